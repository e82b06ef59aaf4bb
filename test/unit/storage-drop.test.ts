/**
 * The buffer-drop paths are chosen exactly as in PostgreSQL 14+ (pg-internals §1.4, §2) and cost
 * what they should: a full scan visits NBuffers descriptors, a lookup probes once per block to drop.
 * Method: a 1024-buffer pool (threshold 1024/32 = 32 blocks) with relations sized around the
 * threshold, each case checking the path, the counters and that exactly the right buffers went.
 */
import { describe, expect, it } from 'vitest';
import { BufferPool } from '../../storage/buffer-pool.ts';
import {
  DEFAULT_DROP_SETTINGS,
  countDrop,
  copyDropCounters,
  emptyDropCounters,
  RELS_BSEARCH_THRESHOLD,
  dropFullScanThreshold,
  dropRelFileNodeBuffers,
  dropRelFileNodesAllBuffers,
  type DropSettings,
} from '../../storage/drop.ts';
import { smgrdounlinkall, smgrtruncate, StorageManager } from '../../storage/smgr.ts';
import {
  FSM_FORKNUM,
  MAIN_FORKNUM,
  VISIBILITYMAP_FORKNUM,
  type ForkNumber,
} from '../../wal/records.ts';

const N = 1024;
const REL = 16384;
const LOOKUP: DropSettings = DEFAULT_DROP_SETTINGS;
const SCAN: DropSettings = { ...DEFAULT_DROP_SETTINGS, strategy: 'full-scan' };
const FORCE: DropSettings = { ...DEFAULT_DROP_SETTINGS, forceOptimized: true };

interface Setup {
  pool: BufferPool;
  smgr: StorageManager;
}

/** A standby-like node: relations extended and read through replay, so their sizes are cached. */
function setup(recovery = true): Setup {
  const smgr = new StorageManager();
  smgr.inRecovery = recovery;
  return { pool: new BufferPool(N), smgr };
}

function addRel(
  { pool, smgr }: Setup,
  rel: number,
  blocks: number,
  fork: ForkNumber = MAIN_FORKNUM,
): void {
  smgr.create(rel, fork);
  smgr.nblocks(rel, fork);
  for (let b = 0; b < blocks; b++) {
    smgr.extend(rel, fork, b);
    pool.accessBlock(rel, fork, b);
  }
}

describe('dropRelFileNodeBuffers via smgrtruncate', () => {
  it('uses the threshold NBuffers / 32', () => {
    expect(dropFullScanThreshold(N, LOOKUP)).toBe(32);
    expect(dropFullScanThreshold(13_107_200, LOOKUP)).toBe(409_600);
  });

  it('probes each block to drop when every size is cached and the total is below the threshold', () => {
    const s = setup();
    addRel(s, REL, 100);
    addRel(s, REL + 1, 50);
    const r = smgrtruncate(s.pool, s.smgr, REL, [MAIN_FORKNUM], [69], LOOKUP);
    expect(r).toMatchObject({
      path: 'cached-lookup',
      scanned: 0,
      probes: 31,
      invalidated: 31,
      nBlocksToInvalidate: 31,
    });
    expect(s.pool.bufferedBlocks(REL).map((t) => t.block)).toEqual([...Array(69).keys()]);
    expect(s.pool.bufferedBlocks(REL + 1)).toHaveLength(50);
    expect(s.pool.table.sharedLockCount).toBeGreaterThanOrEqual(31);
    expect(s.smgr.nblocksCached(REL, MAIN_FORKNUM)).toBe(69);
    s.pool.checkConsistency();
  });

  it('scans the whole pool when the total equals the threshold', () => {
    const s = setup();
    addRel(s, REL, 100);
    const r = smgrtruncate(s.pool, s.smgr, REL, [MAIN_FORKNUM], [68], LOOKUP);
    expect(r).toMatchObject({
      path: 'full-scan',
      scanned: N,
      probes: 0,
      invalidated: 32,
      nBlocksToInvalidate: 32,
    });
    expect(r.headerLocks).toBe(100); // every buffer of the relation passes the rnode-only pre-check
  });

  it('sums blocks over the listed forks', () => {
    const s = setup();
    addRel(s, REL, 100);
    addRel(s, REL, 3, FSM_FORKNUM);
    const r = smgrtruncate(s.pool, s.smgr, REL, [MAIN_FORKNUM, FSM_FORKNUM], [70, 0], LOOKUP);
    expect(r).toMatchObject({ path: 'full-scan', nBlocksToInvalidate: 33, invalidated: 33 });
    const s2 = setup();
    addRel(s2, REL, 100);
    addRel(s2, REL, 3, FSM_FORKNUM);
    const r2 = smgrtruncate(s2.pool, s2.smgr, REL, [MAIN_FORKNUM, FSM_FORKNUM], [71, 1], LOOKUP);
    expect(r2).toMatchObject({ path: 'cached-lookup', probes: 31, invalidated: 31 });
    expect(
      s2.pool
        .bufferedBlocks(REL)
        .map((t) => [t.fork, t.block])
        .slice(-2),
    ).toEqual([
      [0, 70],
      [1, 0],
    ]);
  });

  it('scans when a listed fork has no cached size', () => {
    const s = setup();
    addRel(s, REL, 10);
    s.smgr.close(REL); // e.g. a standby restart: nothing cached
    const r = smgrtruncate(s.pool, s.smgr, REL, [MAIN_FORKNUM], [5], LOOKUP);
    expect(r).toMatchObject({
      path: 'full-scan',
      scanned: N,
      nBlocksToInvalidate: null,
      invalidated: 5,
      matcher: 'single',
    });
    // smgrtruncate cached the new size: the next truncation may take the lookup path.
    expect(smgrtruncate(s.pool, s.smgr, REL, [MAIN_FORKNUM], [2], LOOKUP)).toMatchObject({
      path: 'cached-lookup',
      probes: 3,
    });
  });

  it('scans on a primary (not in recovery) even with every size cached', () => {
    const s = setup(false);
    addRel(s, REL, 10);
    expect(s.smgr.peekCachedNblocks(REL, MAIN_FORKNUM)).toBe(10);
    const r = smgrtruncate(s.pool, s.smgr, REL, [MAIN_FORKNUM], [5], LOOKUP);
    expect(r).toMatchObject({ path: 'full-scan', scanned: N, nBlocksToInvalidate: null });
  });

  it('forceOptimized ignores the threshold but still needs cached sizes', () => {
    const s = setup();
    addRel(s, REL, 100);
    expect(smgrtruncate(s.pool, s.smgr, REL, [MAIN_FORKNUM], [0], FORCE)).toMatchObject({
      path: 'cached-lookup',
      probes: 100,
      invalidated: 100,
      nBlocksToInvalidate: 100,
    });
    s.smgr.close(REL);
    expect(smgrtruncate(s.pool, s.smgr, REL, [MAIN_FORKNUM], [0], FORCE).path).toBe('full-scan');
  });

  it("strategy 'full-scan' (pre-PG14) always scans and never reads sizes", () => {
    const s = setup();
    addRel(s, REL, 10);
    const r = smgrtruncate(s.pool, s.smgr, REL, [MAIN_FORKNUM], [9], SCAN);
    expect(r).toMatchObject({
      path: 'full-scan',
      scanned: N,
      invalidated: 1,
      nBlocksToInvalidate: null,
    });
  });

  it('a cached size below the cut wraps in 32-bit arithmetic and forces the scan', () => {
    const s = setup();
    addRel(s, REL, 5);
    const r = dropRelFileNodeBuffers(s.pool, s.smgr, REL, [MAIN_FORKNUM], [20], LOOKUP);
    expect(r.path).toBe('full-scan');
    expect(r.nBlocksToInvalidate).toBe(2 ** 32 - 15);
  });

  it('discards dirty buffers without writing them', () => {
    const s = setup();
    addRel(s, REL, 10);
    for (let b = 0; b < 10; b++) {
      const id = s.pool.readBuffer(REL, MAIN_FORKNUM, b);
      s.pool.markDirty(id);
      s.pool.releaseBuffer(id);
    }
    smgrtruncate(s.pool, s.smgr, REL, [MAIN_FORKNUM], [5], LOOKUP);
    smgrtruncate(s.pool, s.smgr, REL, [MAIN_FORKNUM], [2], SCAN);
    expect(s.pool.counters).toMatchObject({ writes: 0, discardedDirty: 8 });
    expect(s.pool.flushAll()).toBe(2);
  });
});

describe('dropRelFileNodesAllBuffers via smgrdounlinkall', () => {
  it('skips forks that do not exist and probes every block of the others', () => {
    const s = setup();
    addRel(s, REL, 10);
    addRel(s, REL + 1, 5);
    addRel(s, REL + 1, 2, VISIBILITYMAP_FORKNUM);
    addRel(s, REL + 2, 3);
    const r = smgrdounlinkall(s.pool, s.smgr, [REL, REL + 1], LOOKUP);
    expect(r).toMatchObject({
      path: 'cached-lookup',
      scanned: 0,
      probes: 17,
      invalidated: 17,
      nBlocksToInvalidate: 17,
    });
    expect(s.pool.bufferedBlocks().map((t) => t.rel)).toEqual([REL + 2, REL + 2, REL + 2]);
    expect(s.smgr.exists(REL, MAIN_FORKNUM)).toBe(false);
    expect(s.smgr.isOpen(REL)).toBe(false);
    s.pool.checkConsistency();
  });

  it('scans when an existing fork is not cached', () => {
    const s = setup();
    addRel(s, REL, 10);
    s.smgr.create(REL, FSM_FORKNUM); // exists, never sized by replay
    const r = smgrdounlinkall(s.pool, s.smgr, [REL], LOOKUP);
    expect(r).toMatchObject({
      path: 'full-scan',
      scanned: N,
      invalidated: 10,
      nBlocksToInvalidate: null,
      matcher: 'linear',
    });
  });

  it('scans when the grand total reaches the threshold', () => {
    const s = setup();
    for (let i = 0; i < 4; i++) addRel(s, REL + i, 8);
    expect(
      dropRelFileNodesAllBuffers(s.pool, s.smgr, [REL, REL + 1, REL + 2, REL + 3], LOOKUP).path,
    ).toBe('full-scan');
    const t = setup();
    for (let i = 0; i < 4; i++) addRel(t, REL + i, 8);
    t.pool.accessBlock(REL + 9, MAIN_FORKNUM, 0);
    const r = dropRelFileNodesAllBuffers(t.pool, t.smgr, [REL, REL + 1, REL + 2], LOOKUP);
    expect(r).toMatchObject({ path: 'cached-lookup', probes: 24 });
  });

  it(`matches linearly up to ${RELS_BSEARCH_THRESHOLD} relations and by binary search above`, () => {
    for (const n of [1, RELS_BSEARCH_THRESHOLD, RELS_BSEARCH_THRESHOLD + 1, 200]) {
      const s = setup(false);
      const rels = Array.from({ length: n }, (_, i) => REL + 1000 - i); // unsorted on purpose
      for (const rel of rels) addRel(s, rel, 2);
      addRel(s, 99_999, 3);
      const stats = emptyDropCounters();
      const r = smgrdounlinkall(s.pool, s.smgr, rels, LOOKUP);
      countDrop(stats, r);
      expect(r.path).toBe('full-scan');
      expect(r.matcher).toBe(n > RELS_BSEARCH_THRESHOLD ? 'bsearch' : 'linear');
      expect(stats.bsearchScans).toBe(n > RELS_BSEARCH_THRESHOLD ? 1 : 0);
      expect(r.invalidated).toBe(Math.min(2 * n, N - 3));
      expect(s.pool.bufferedBlocks().every((t) => t.rel === 99_999 || !rels.includes(t.rel))).toBe(
        true,
      );
      s.pool.checkConsistency();
    }
  });

  it('after a restart the first drop of a relation full-scans, a relation touched since then does not', () => {
    const s = setup();
    addRel(s, REL, 4);
    addRel(s, REL + 1, 4);
    const smgr = StorageManager.deserialize(s.smgr.serialize());
    smgr.inRecovery = true;
    const pool = new BufferPool(N);
    for (let b = 0; b < 4; b++) pool.accessBlock(REL, MAIN_FORKNUM, b);
    expect(smgrdounlinkall(pool, smgr, [REL], LOOKUP).path).toBe('full-scan');
    smgr.nblocks(REL + 1, MAIN_FORKNUM); // replay touched it
    expect(smgrdounlinkall(pool, smgr, [REL + 1], LOOKUP)).toMatchObject({
      path: 'cached-lookup',
      probes: 4,
      invalidated: 0,
    });
  });

  it('treats an empty list as nothing to do', () => {
    const s = setup();
    expect(smgrdounlinkall(s.pool, s.smgr, [], LOOKUP)).toMatchObject({
      scanned: 0,
      probes: 0,
      invalidated: 0,
    });
  });
});

describe('DropCounters', () => {
  it('accumulates per-path counts and counters', () => {
    const s = setup();
    addRel(s, REL, 100);
    const stats = emptyDropCounters();
    countDrop(stats, smgrtruncate(s.pool, s.smgr, REL, [MAIN_FORKNUM], [90], LOOKUP));
    countDrop(stats, smgrtruncate(s.pool, s.smgr, REL, [MAIN_FORKNUM], [10], LOOKUP));
    expect(stats.drops).toEqual({
      'full-scan': 1,
      'cached-lookup': 1,
      'rel-list': 0,
      'recovery-hash': 0,
    });
    expect(stats).toMatchObject({ scanned: N, probes: 10, invalidated: 90 });
  });

  it('copies as structuredClone does, sharing nothing', () => {
    const s = setup();
    addRel(s, REL, 100);
    const stats = emptyDropCounters();
    countDrop(stats, smgrtruncate(s.pool, s.smgr, REL, [MAIN_FORKNUM], [90], LOOKUP));
    const copy = copyDropCounters(stats);
    expect(copy).toStrictEqual(structuredClone(stats));
    expect(Object.keys(copy)).toEqual(Object.keys(stats));
    countDrop(stats, smgrtruncate(s.pool, s.smgr, REL, [MAIN_FORKNUM], [10], LOOKUP));
    stats.scannedByMatcher.single++;
    expect(copy.drops['cached-lookup']).toBe(1);
    expect(copy.scannedByMatcher.single).not.toBe(stats.scannedByMatcher.single);
    expect(copy.headerLocksByPath).not.toBe(stats.headerLocksByPath);
    expect(copy.invalidatedByPath).not.toBe(stats.invalidatedByPath);
  });
});
