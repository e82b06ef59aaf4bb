/**
 * Both drop strategies leave identical pools (house style: "strategies give identical pools").
 * Method: fast-check generates random workloads — reads (some dirtying), extensions, truncations
 * (smgrtruncate), relation drops (smgrdounlinkall), recovery flag flips, cache resets/closes/touches,
 * checkpoints and restarts — and runs each on three (pool, smgr) pairs: pre-PG14 'full-scan',
 * PG14 'cached-lookup', and 'cached-lookup' with forceOptimized. After every step the pairs must
 * have the same descriptors, mapping slots, freelist, clock hand, counters, written pages and
 * storage sizes; no buffer may hold a dropped or truncated block; checkConsistency() must hold.
 */
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { BufferPool } from '../../storage/buffer-pool.ts';
import { DEFAULT_DROP_SETTINGS, DropStats, smgrdounlinkall, smgrtruncate, type DropSettings } from '../../storage/drop.ts';
import { StorageManager } from '../../storage/smgr.ts';
import { MAX_FORKNUM, type ForkNumber } from '../../wal/records.ts';

const RELS = [16384, 16385, 16386, 16387];

type Cmd =
  | { op: 'create'; rel: number; fork: ForkNumber }
  | { op: 'extend'; rel: number; fork: ForkNumber; count: number; viaCache: boolean }
  | { op: 'read'; rel: number; fork: ForkNumber; at: number; dirty: boolean; repeat: number; tail: boolean }
  | { op: 'truncate'; rel: number; forkMask: number; at: number; beyond: boolean; tail: boolean }
  | { op: 'drop'; relMask: number }
  | { op: 'recovery'; on: boolean }
  | { op: 'cache'; rel: number; fork: ForkNumber; action: 'reset' | 'close' | 'touch' }
  | { op: 'checkpoint' }
  | { op: 'restart' };

const rel = fc.constantFrom(...RELS);
const fork = fc.constantFrom<ForkNumber>(0, 0, 0, 0, 0, 1, 2, 3);
const cmd: fc.Arbitrary<Cmd> = fc.oneof(
  { arbitrary: fc.record({ op: fc.constant('create' as const), rel, fork }), weight: 3 },
  {
    arbitrary: fc.record({ op: fc.constant('extend' as const), rel, fork, count: fc.integer({ min: 1, max: 24 }), viaCache: fc.boolean() }),
    weight: 4,
  },
  {
    arbitrary: fc.record({
      op: fc.constant('read' as const), rel, fork, at: fc.double({ min: 0, max: 1, noNaN: true, maxExcluded: true }),
      dirty: fc.boolean(), repeat: fc.integer({ min: 1, max: 12 }), tail: fc.boolean(),
    }),
    weight: 12,
  },
  {
    arbitrary: fc.record({
      op: fc.constant('truncate' as const), rel, forkMask: fc.integer({ min: 1, max: 15 }),
      at: fc.double({ min: 0, max: 1, noNaN: true, maxExcluded: true }), beyond: fc.boolean(), tail: fc.boolean(),
    }),
    weight: 3,
  },
  {
    // Mostly one relation (DROP TABLE), sometimes several (a transaction dropping many).
    arbitrary: fc.record({
      op: fc.constant('drop' as const),
      relMask: fc.oneof(fc.constantFrom(1, 2, 4, 8), fc.integer({ min: 1, max: 15 })),
    }),
    weight: 1,
  },
  { arbitrary: fc.record({ op: fc.constant('recovery' as const), on: fc.boolean() }), weight: 1 },
  {
    arbitrary: fc.record({ op: fc.constant('cache' as const), rel, fork, action: fc.constantFrom('reset' as const, 'close' as const, 'touch' as const) }),
    weight: 2,
  },
  { arbitrary: fc.constant({ op: 'checkpoint' as const }), weight: 1 },
  { arbitrary: fc.constant({ op: 'restart' as const }), weight: 1 },
  { arbitrary: fc.constant({ op: 'recovery' as const, on: true }), weight: 1 },
);

interface Node {
  settings: DropSettings;
  pool: BufferPool;
  smgr: StorageManager;
  written: string[];
  stats: DropStats;
}

function newPool(nBuffers: number, written: string[]): BufferPool {
  return new BufferPool(nBuffers, { onWriteDirty: (r, f, b) => written.push(`${r}/${f}/${b}`) });
}

function makeNode(nBuffers: number, settings: DropSettings, recovery: boolean): Node {
  const written: string[] = [];
  const smgr = new StorageManager();
  smgr.inRecovery = recovery;
  return { settings, pool: newPool(nBuffers, written), smgr, written, stats: new DropStats() };
}

function existingForks(smgr: StorageManager, r: number): ForkNumber[] {
  const out: ForkNumber[] = [];
  for (let f = 0; f <= MAX_FORKNUM; f++) if (smgr.exists(r, f as ForkNumber)) out.push(f as ForkNumber);
  return out;
}

/** Apply one command to one node. Decisions depend only on state that is identical across nodes. */
function apply(node: Node, c: Cmd): void {
  const { pool, smgr, settings } = node;
  switch (c.op) {
    case 'create':
      smgr.create(c.rel, c.fork);
      return;
    case 'extend': {
      if (!smgr.exists(c.rel, c.fork)) return;
      const start = c.viaCache ? smgr.nblocks(c.rel, c.fork) : smgr.diskNblocks(c.rel, c.fork);
      for (let b = start; b < start + c.count; b++) smgr.extend(c.rel, c.fork, b);
      return;
    }
    case 'read': {
      if (!smgr.exists(c.rel, c.fork)) return;
      // Replay sizes the fork for every block it reads (XLogReadBufferExtended -> smgrnblocks).
      if (smgr.inRecovery) smgr.nblocks(c.rel, c.fork);
      const size = smgr.diskNblocks(c.rel, c.fork);
      if (size === 0) return;
      for (let k = 0; k < c.repeat; k++) {
        // Tail reads hit the last blocks, the ones a truncation drops first.
        const block = c.tail ? (size - 1 - k + size * 12) % size : Math.floor(c.at * size + k * 7) % size;
        const id = pool.readBuffer(c.rel, c.fork, block);
        if (c.dirty && k % 2 === 0) pool.markDirty(id);
        pool.releaseBuffer(id);
      }
      return;
    }
    case 'truncate': {
      const forks = existingForks(smgr, c.rel).filter((f) => (c.forkMask >> f) & 1);
      if (forks.length === 0) return;
      const nblocks = forks.map((f) => {
        const size = smgr.diskNblocks(c.rel, f);
        // In recovery a truncation point beyond the end is possible (the file is left alone).
        if (c.beyond && smgr.inRecovery) return size + 1 + Math.floor(c.at * 4);
        // Tail truncations cut a few blocks, like VACUUM's; the others cut anywhere.
        return c.tail ? Math.max(0, size - Math.floor(c.at * 6)) : Math.floor(c.at * (size + 1));
      });
      const r = smgrtruncate(pool, smgr, c.rel, forks, nblocks, settings);
      node.stats.add(r);
      for (const t of pool.bufferedBlocks(c.rel)) {
        const i = forks.indexOf(t.fork);
        expect(i < 0 || t.block < nblocks[i]!, `truncated block ${t.rel}/${t.fork}/${t.block} still buffered`).toBe(true);
      }
      return;
    }
    case 'drop': {
      const rels = RELS.filter((_, i) => (c.relMask >> i) & 1).filter((r) => existingForks(smgr, r).length > 0);
      node.stats.add(smgrdounlinkall(pool, smgr, rels, settings));
      for (const r of rels) expect(pool.bufferedBlocks(r), `dropped relation ${r} still buffered`).toEqual([]);
      return;
    }
    case 'recovery':
      smgr.inRecovery = c.on;
      return;
    case 'cache':
      if (c.action === 'reset') smgr.resetCachedSizes(c.rel);
      else if (c.action === 'close') smgr.close(c.rel);
      else if (smgr.exists(c.rel, c.fork)) smgr.nblocks(c.rel, c.fork);
      return;
    case 'checkpoint':
      pool.flushAll();
      return;
    case 'restart': {
      pool.flushAll();
      const recovery = smgr.inRecovery;
      node.smgr = StorageManager.deserialize(smgr.serialize());
      node.smgr.inRecovery = recovery;
      node.pool = newPool(pool.nBuffers, node.written);
      return;
    }
  }
}

function snapshot(node: Node) {
  const { pool, smgr } = node;
  const cached: number[] = [];
  for (const r of RELS) for (let f = 0; f <= MAX_FORKNUM; f++) cached.push(smgr.peekCachedNblocks(r, f as ForkNumber));
  return {
    tagRel: Array.from(pool.tagRel), tagFork: Array.from(pool.tagFork), tagBlock: Array.from(pool.tagBlock),
    flags: Array.from(pool.flags), usage: Array.from(pool.usageCount), refCount: Array.from(pool.refCount),
    freeNext: Array.from(pool.freeNext), slots: Array.from(pool.table.slots),
    firstFree: pool.firstFreeBuffer, lastFree: pool.lastFreeBuffer, hand: pool.nextVictimBuffer,
    passes: pool.completePasses, counters: { ...pool.counters }, written: node.written.slice(),
    disk: Array.from(smgr.serialize()), cached, recovery: smgr.inRecovery,
  };
}

/** Every buffered block lies below its fork's size on disk, so no dropped block can hide anywhere. */
function checkBlocksBelowDiskSize(node: Node): void {
  for (const t of node.pool.bufferedBlocks()) {
    expect(node.smgr.exists(t.rel, t.fork), `buffer of missing fork ${t.rel}/${t.fork}`).toBe(true);
    expect(t.block).toBeLessThan(node.smgr.diskNblocks(t.rel, t.fork));
  }
}

describe('drop strategies are equivalent', () => {
  it('full-scan, cached-lookup and forced lookup leave identical pools and storage', () => {
    const pathsSeen = { 'full-scan': 0, 'cached-lookup': 0, lookupInvalidations: 0 };
    fc.assert(
      fc.property(
        fc.integer({ min: 16, max: 256 }),
        fc.constantFrom(32, 8, 2),
        fc.boolean(),
        fc.array(cmd, { minLength: 1, maxLength: 80, size: 'max' }),
        (nBuffers, thresholdDivisor, recovery, cmds) => {
          const nodes = [
            makeNode(nBuffers, { ...DEFAULT_DROP_SETTINGS, strategy: 'full-scan', thresholdDivisor }, recovery),
            makeNode(nBuffers, { ...DEFAULT_DROP_SETTINGS, thresholdDivisor }, recovery),
            makeNode(nBuffers, { ...DEFAULT_DROP_SETTINGS, thresholdDivisor, forceOptimized: true }, recovery),
          ];
          // Every relation starts with a main fork, as after CREATE TABLE.
          const setup: Cmd[] = RELS.map((r) => ({ op: 'create', rel: r, fork: 0 }));
          for (const c of [...setup, ...cmds]) {
            for (const node of nodes) {
              apply(node, c);
              node.pool.checkConsistency();
              node.smgr.checkStorage();
              checkBlocksBelowDiskSize(node);
            }
            const ref = snapshot(nodes[0]!);
            expect(snapshot(nodes[1]!)).toEqual(ref);
            expect(snapshot(nodes[2]!)).toEqual(ref);
          }
          expect(nodes[0]!.stats.drops['cached-lookup']).toBe(0);
          pathsSeen['full-scan'] += nodes[1]!.stats.drops['full-scan'];
          pathsSeen['cached-lookup'] += nodes[1]!.stats.drops['cached-lookup'] + nodes[2]!.stats.drops['cached-lookup'];
          pathsSeen.lookupInvalidations += nodes[1]!.stats.invalidatedByPath['cached-lookup'] + nodes[2]!.stats.invalidatedByPath['cached-lookup'];
        },
      ),
      { numRuns: 200 },
    );
    console.log(`drop paths taken by the PG14 strategies: ${JSON.stringify(pathsSeen)}`);
    // The workload must actually exercise both paths of the PG14 strategy. The bounds sit well
    // below what 200 random runs give (~250 drops per path, ~100–140 lookup invalidations) so that
    // an unlucky seed does not fail, while a generator that stopped reaching a path still does.
    expect(pathsSeen['cached-lookup']).toBeGreaterThan(50);
    expect(pathsSeen['full-scan']).toBeGreaterThan(50);
    expect(pathsSeen.lookupInvalidations).toBeGreaterThan(25);
  });
});
