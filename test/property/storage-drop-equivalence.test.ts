/**
 * Every drop strategy leaves identical pools (house style: "strategies give identical pools").
 * Method: fast-check generates random workloads — fork creation (smgrcreate), reads (some
 * dirtying), extensions, truncations (smgrtruncate), relation drops (smgrdounlinkall), recovery
 * flag flips with or without an end of recovery, cache resets/closes/touches, checkpoints and
 * restarts — and runs each in lockstep on one (pool, smgr) pair per strategy: pre-PG14
 * 'full-scan', PG14 'cached-lookup', 'cached-lookup' with forceOptimized, 'rel-list',
 * 'recovery-hash' and 'cache-at-create'. After every step the pairs must have the same
 * descriptors, mapping slots, freelist, clock hand, counters, written pages and storage sizes
 * (cached sizes too, except for cache-at-create, whose rule is to cache more); no buffer may hold
 * a dropped or truncated block; checkConsistency() (including the relation lists) must hold.
 */
import fc from 'fast-check';
import { afterEach, describe, expect, it } from 'vitest';
import { BufferPool } from '../../storage/buffer-pool.ts';
import {
  DEFAULT_DROP_SETTINGS,
  countDrop,
  emptyDropCounters,
  type DropCounters,
  endOfRecovery,
  poolOptionsFor,
  type DropSettings,
} from '../../storage/drop.ts';
import { smgrcreate, smgrdounlinkall, smgrtruncate, StorageManager } from '../../storage/smgr.ts';
import { LookupDropper } from '../../storage/drop-cached-lookup.ts';
import { MAX_FORKNUM, type ForkNumber } from '../../wal/records.ts';

const RELS = [16384, 16385, 16386, 16387];

type Cmd =
  | { op: 'create'; rel: number; fork: ForkNumber }
  | { op: 'extend'; rel: number; fork: ForkNumber; count: number; viaCache: boolean }
  | {
      op: 'read';
      rel: number;
      fork: ForkNumber;
      at: number;
      dirty: boolean;
      repeat: number;
      tail: boolean;
    }
  | { op: 'truncate'; rel: number; forkMask: number; at: number; beyond: boolean; tail: boolean }
  | { op: 'drop'; relMask: number }
  | { op: 'recovery'; on: boolean; promote: boolean }
  | { op: 'cache'; rel: number; fork: ForkNumber; action: 'reset' | 'close' | 'touch' }
  | { op: 'checkpoint' }
  | { op: 'restart' };

const rel = fc.constantFrom(...RELS);
const fork = fc.constantFrom<ForkNumber>(0, 0, 0, 0, 0, 1, 2, 3);
const cmd: fc.Arbitrary<Cmd> = fc.oneof(
  { arbitrary: fc.record({ op: fc.constant('create' as const), rel, fork }), weight: 3 },
  {
    arbitrary: fc.record({
      op: fc.constant('extend' as const),
      rel,
      fork,
      count: fc.integer({ min: 1, max: 24 }),
      viaCache: fc.boolean(),
    }),
    weight: 4,
  },
  {
    arbitrary: fc.record({
      op: fc.constant('read' as const),
      rel,
      fork,
      at: fc.double({ min: 0, max: 1, noNaN: true, maxExcluded: true }),
      dirty: fc.boolean(),
      repeat: fc.integer({ min: 1, max: 12 }),
      tail: fc.boolean(),
    }),
    weight: 12,
  },
  {
    arbitrary: fc.record({
      op: fc.constant('truncate' as const),
      rel,
      forkMask: fc.integer({ min: 1, max: 15 }),
      at: fc.double({ min: 0, max: 1, noNaN: true, maxExcluded: true }),
      beyond: fc.boolean(),
      tail: fc.boolean(),
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
  {
    arbitrary: fc.record({
      op: fc.constant('recovery' as const),
      on: fc.boolean(),
      promote: fc.boolean(),
    }),
    weight: 1,
  },
  {
    arbitrary: fc.record({
      op: fc.constant('cache' as const),
      rel,
      fork,
      action: fc.constantFrom('reset' as const, 'close' as const, 'touch' as const),
    }),
    weight: 2,
  },
  { arbitrary: fc.constant({ op: 'checkpoint' as const }), weight: 1 },
  { arbitrary: fc.constant({ op: 'restart' as const }), weight: 1 },
  { arbitrary: fc.constant({ op: 'recovery' as const, on: true, promote: false }), weight: 1 },
);

interface Node {
  settings: DropSettings;
  pool: BufferPool;
  smgr: StorageManager;
  written: string[];
  stats: DropCounters;
}

function newPool(nBuffers: number, written: string[], settings: DropSettings): BufferPool {
  return new BufferPool(
    nBuffers,
    poolOptionsFor(settings, { onWriteDirty: (r, f, b) => written.push(`${r}/${f}/${b}`) }),
  );
}

function makeNode(nBuffers: number, settings: DropSettings, recovery: boolean): Node {
  const written: string[] = [];
  const smgr = new StorageManager();
  smgr.inRecovery = recovery;
  return {
    settings,
    pool: newPool(nBuffers, written, settings),
    smgr,
    written,
    stats: emptyDropCounters(),
  };
}

function existingForks(smgr: StorageManager, r: number): ForkNumber[] {
  const out: ForkNumber[] = [];
  for (let f = 0; f <= MAX_FORKNUM; f++)
    if (smgr.exists(r, f as ForkNumber)) out.push(f as ForkNumber);
  return out;
}

/** Apply one command to one node. Decisions depend only on state that is identical across nodes. */
function apply(node: Node, c: Cmd): void {
  const { pool, smgr, settings } = node;
  switch (c.op) {
    case 'create':
      smgrcreate(smgr, c.rel, c.fork, settings);
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
        const block = c.tail
          ? (size - 1 - k + size * 12) % size
          : Math.floor(c.at * size + k * 7) % size;
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
      countDrop(node.stats, r);
      for (const t of pool.bufferedBlocks(c.rel)) {
        const i = forks.indexOf(t.fork);
        expect(
          i < 0 || t.block < nblocks[i]!,
          `truncated block ${t.rel}/${t.fork}/${t.block} still buffered`,
        ).toBe(true);
      }
      return;
    }
    case 'drop': {
      const rels = RELS.filter((_, i) => (c.relMask >> i) & 1).filter(
        (r) => existingForks(smgr, r).length > 0,
      );
      countDrop(node.stats, smgrdounlinkall(pool, smgr, rels, settings));
      for (const r of rels)
        expect(pool.bufferedBlocks(r), `dropped relation ${r} still buffered`).toEqual([]);
      return;
    }
    case 'recovery':
      // Leaving recovery is either a promotion (the strategy releases recovery-only state) or a
      // bare flag flip (then a recovery-hash drop outside recovery must release it itself).
      if (!c.on && smgr.inRecovery && c.promote) endOfRecovery(pool, settings);
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
      node.pool = newPool(pool.nBuffers, node.written, node.settings);
      return;
    }
  }
}

function snapshot(node: Node) {
  const { pool, smgr } = node;
  const cached: number[] = [];
  for (const r of RELS)
    for (let f = 0; f <= MAX_FORKNUM; f++) cached.push(smgr.peekCachedNblocks(r, f as ForkNumber));
  return {
    tagRel: pool.tagRel.slice(),
    tagFork: pool.tagFork.slice(),
    tagBlock: pool.tagBlock.slice(),
    flags: pool.flags.slice(),
    usage: pool.usageCount.slice(),
    refCount: pool.refCount.slice(),
    freeNext: pool.freeNext.slice(),
    slots: pool.table.slots.slice(),
    firstFree: pool.firstFreeBuffer,
    lastFree: pool.lastFreeBuffer,
    hand: pool.nextVictimBuffer,
    passes: pool.completePasses,
    counters: { ...pool.counters },
    written: node.written.slice(),
    disk: smgr.serialize(),
    cached,
    recovery: smgr.inRecovery,
  };
}

type Snapshot = ReturnType<typeof snapshot>;

/** Byte-wise comparison of two snapshots (fast); on a difference, toEqual for a readable diff. */
function expectSameSnapshot(actual: Snapshot, ref: Snapshot, what: string): void {
  let same = true;
  for (const k of Object.keys(ref) as Array<keyof Snapshot>) {
    const a = actual[k];
    const b = ref[k];
    if (ArrayBuffer.isView(a) && ArrayBuffer.isView(b)) {
      same &&=
        Buffer.compare(
          Buffer.from(a.buffer, a.byteOffset, a.byteLength),
          Buffer.from(b.buffer, b.byteOffset, b.byteLength),
        ) === 0;
    } else {
      same &&= JSON.stringify(a) === JSON.stringify(b);
    }
    if (!same) break;
  }
  if (!same) expect(actual, what).toEqual(ref);
}

/** Every buffered block lies below its fork's size on disk, so no dropped block can hide anywhere. */
function checkBlocksBelowDiskSize(node: Node): void {
  for (const t of node.pool.bufferedBlocks()) {
    expect(node.smgr.exists(t.rel, t.fork), `buffer of missing fork ${t.rel}/${t.fork}`).toBe(true);
    expect(t.block).toBeLessThan(node.smgr.diskNblocks(t.rel, t.fork));
  }
}

type PathsSeen = Record<
  | 'full-scan'
  | 'cached-lookup'
  | 'lookupInvalidations'
  | 'relListInvalidations'
  | 'hashBuilds'
  | 'hashWalkInvalidations'
  | 'cacheAtCreateLookups',
  number
>;

/** One property run: the workload in lockstep on one node per strategy, compared after every step. */
function runLockstep(
  nBuffers: number,
  thresholdDivisor: number,
  recovery: boolean,
  cmds: Cmd[],
  pathsSeen: PathsSeen,
): void {
  const nodes = [
    makeNode(
      nBuffers,
      { ...DEFAULT_DROP_SETTINGS, strategy: 'full-scan', thresholdDivisor },
      recovery,
    ),
    makeNode(nBuffers, { ...DEFAULT_DROP_SETTINGS, thresholdDivisor }, recovery),
    makeNode(
      nBuffers,
      { ...DEFAULT_DROP_SETTINGS, thresholdDivisor, forceOptimized: true },
      recovery,
    ),
    makeNode(
      nBuffers,
      { ...DEFAULT_DROP_SETTINGS, strategy: 'rel-list', thresholdDivisor },
      recovery,
    ),
    makeNode(
      nBuffers,
      { ...DEFAULT_DROP_SETTINGS, strategy: 'recovery-hash', thresholdDivisor },
      recovery,
    ),
    makeNode(
      nBuffers,
      { ...DEFAULT_DROP_SETTINGS, strategy: 'cache-at-create', thresholdDivisor },
      recovery,
    ),
  ];
  const cacheAtCreate = nodes[5]!;
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
    for (const node of nodes.slice(1, 5))
      expectSameSnapshot(snapshot(node), ref, node.settings.strategy);
    // cache-at-create caches sizes the others do not; everything else must be the same.
    expectSameSnapshot({ ...snapshot(cacheAtCreate), cached: ref.cached }, ref, 'cache-at-create');
  }
  expect(nodes[0]!.stats.drops['cached-lookup']).toBe(0);
  pathsSeen['full-scan'] += nodes[1]!.stats.drops['full-scan'];
  pathsSeen['cached-lookup'] +=
    nodes[1]!.stats.drops['cached-lookup'] + nodes[2]!.stats.drops['cached-lookup'];
  pathsSeen.lookupInvalidations +=
    nodes[1]!.stats.invalidatedByPath['cached-lookup'] +
    nodes[2]!.stats.invalidatedByPath['cached-lookup'];
  pathsSeen.relListInvalidations += nodes[3]!.stats.invalidatedByPath['rel-list'];
  pathsSeen.hashBuilds += nodes[4]!.stats.hashBuilds;
  pathsSeen.hashWalkInvalidations += nodes[4]!.stats.invalidatedByPath['recovery-hash'];
  pathsSeen.cacheAtCreateLookups +=
    cacheAtCreate.stats.drops['cached-lookup'] - nodes[1]!.stats.drops['cached-lookup'];
  expect(nodes[3]!.stats.drops['rel-list']).toBe(nodes[0]!.stats.drops['full-scan']);
}

/** The arbitrary of one property run: pool size, threshold divisor, start in recovery, workload. */
const runArb = fc.tuple(
  fc.integer({ min: 16, max: 256 }),
  fc.constantFrom(32, 8, 2),
  fc.boolean(),
  fc.array(cmd, { minLength: 1, maxLength: 80, size: 'max' }),
);

describe('drop strategies are equivalent', () => {
  it('every strategy leaves identical pools and storage', () => {
    const pathsSeen: PathsSeen = {
      'full-scan': 0,
      'cached-lookup': 0,
      lookupInvalidations: 0,
      relListInvalidations: 0,
      hashBuilds: 0,
      hashWalkInvalidations: 0,
      cacheAtCreateLookups: 0,
    };
    fc.assert(
      fc.property(runArb, ([nBuffers, thresholdDivisor, recovery, cmds]) =>
        runLockstep(nBuffers, thresholdDivisor, recovery, cmds, pathsSeen),
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
    // The other strategies must have found buffers their own way, and the recovery hash must
    // have been rebuilt after releases and restarts.
    expect(pathsSeen.relListInvalidations).toBeGreaterThan(100);
    expect(pathsSeen.hashBuilds).toBeGreaterThan(50);
    expect(pathsSeen.hashWalkInvalidations).toBeGreaterThan(50);
    expect(pathsSeen.cacheAtCreateLookups).toBeGreaterThan(10);
  });
});

/**
 * The lockstep comparison is strong enough to catch off-by-one mistakes in the PG14 lookup path
 * (FindAndDropRelFileNodeBuffers): each mutant below replaces LookupDropper's probe loop for one
 * property check with a fixed seed, and the check must fail. The unmutated loop passes the same
 * runs (the test above). A mutant that only probes one block too many is not listed: it changes
 * the probe count (covered by storage-drop.test.ts's `probes == blocks to drop`) but no state.
 */
describe('mutations of the lookup path are caught', () => {
  type ProbeRange = (
    this: LookupDropper,
    rel: number,
    fork: ForkNumber,
    from: number,
    to: number,
    firstDelBlock: number,
  ) => void;
  const proto = LookupDropper.prototype as unknown as { probeRange: ProbeRange };
  const original = proto.probeRange;
  afterEach(() => {
    proto.probeRange = original;
  });
  const mutants: Record<string, ProbeRange> = {
    'probes start at firstDelBlock + 1': function (rel, fork, from, to, first) {
      original.call(this, rel, fork, from === first ? from + 1 : from, to, first);
    },
    'the last block (nForkBlock - 1) is not probed': function (rel, fork, from, to, first) {
      original.call(this, rel, fork, from, to - 1, first);
    },
    'the header re-check uses > firstDelBlock instead of >=': function (
      rel,
      fork,
      from,
      to,
      first,
    ) {
      original.call(this, rel, fork, from, to, first + 1);
    },
  };
  for (const [name, mutant] of Object.entries(mutants)) {
    it(`catches: ${name}`, () => {
      proto.probeRange = mutant;
      const paths: PathsSeen = {
        'full-scan': 0,
        'cached-lookup': 0,
        lookupInvalidations: 0,
        relListInvalidations: 0,
        hashBuilds: 0,
        hashWalkInvalidations: 0,
        cacheAtCreateLookups: 0,
      };
      const r = fc.check(
        fc.property(runArb, ([nBuffers, thresholdDivisor, recovery, cmds]) =>
          runLockstep(nBuffers, thresholdDivisor, recovery, cmds, paths),
        ),
        { numRuns: 200, seed: 20261201, endOnFailure: true },
      );
      expect(r.failed, `mutant "${name}" survived ${r.numRuns} runs`).toBe(true);
    });
  }
});
