/**
 * Size queries (smgrnblocks that reach mdnblocks: an lseek) and FSM updates of a replayed VACUUM,
 * counted by walsim's own replay (the sweeps' model-only path) and by predict's replay model from
 * PostgreSQL's records, under each major's rules (storage/pg-drop-rules.ts rule 8). 13 has no
 * smgrnblocks_cached: every block a record reads asks the kernel the fork's size, 7 a Test A page
 * (the heap page and the FSM page for each of its 3 records, and the visibility-map page), as
 * perf stat counted on a 13.23 standby's startup process (BENCHMARKS.md). 14+ answer from the size
 * cached in recovery. Both counters call the one rule, so they agree page for page.
 */
import { describe, expect, it } from 'vitest';
import { countCellsInProcess } from '../../scripts/experiment/in-process.ts';
import type { CellSpec } from '../../scripts/experiment/sweep-runner.ts';
import { RecoveryModel } from '../../scripts/predict/replay-model.ts';
import type { PgWalRecord } from '../../scripts/predict/wal-records.ts';
import { NO_FILES } from '../../scripts/predict/replay-model.ts';
import {
  mdnblocksOpensNextSegment,
  pgDropRules,
  RELSEG_SIZE,
} from '../../storage/pg-drop-rules.ts';
import type { ReplayCounts } from '../../storage/replay-counts.ts';
import { StorageManager } from '../../storage/smgr.ts';
import { MAIN_FORKNUM } from '../../wal/records.ts';

const NBUFFERS = 4096;

function testA(pages: number, pgVersion: number | undefined): CellSpec {
  return {
    kind: 'threshold',
    engine: 'walsim',
    sharedBuffers: `${NBUFFERS * 8}kB`,
    nBuffers: NBUFFERS,
    strategy: 'full-scan',
    forceOptimized: false,
    variant: 'vacuum',
    relSize: String(pages),
    relDivisor: null,
    pagesPerTable: pages,
    tables: 1,
    ...(pgVersion === undefined ? {} : { pgVersion }),
  };
}

const sizeAndFsm = (c: ReplayCounts) => ({ nblocks: c.smgr.nblocks, fsmUpdates: c.fsmUpdates });

/** walsim's counts of the failover span of a Test A VACUUM of `pages` pages. */
async function walsimCounts(pages: number, pgVersion?: number) {
  const [c] = await countCellsInProcess([testA(pages, pgVersion)], { thresholdDivisor: 32 });
  return sizeAndFsm(c!.replay);
}

const NODE = { spc: 1663, db: 5, rel: 16384 };

/** PostgreSQL's records of a VACUUM of pages 0..pages−1 in `major` (13: CLEAN twice). */
function vacuumRecords(major: 13 | 15, pages: number): PgWalRecord[] {
  const rec = (type: string, blocks: PgWalRecord['blocks']): PgWalRecord => ({
    lsn: 0,
    rmgr: 'Heap2',
    type,
    totalLength: 64,
    xid: 0,
    blocks,
  });
  const out: PgWalRecord[] = [];
  for (let p = 0; p < pages; p++) {
    const heap = { node: NODE, fork: 0 as const, block: p };
    out.push(rec(major === 13 ? 'CLEAN' : 'PRUNE', [heap]));
    out.push(rec(major === 13 ? 'CLEAN' : 'VACUUM', [heap]));
    // heap_xlog_visible: block 0 is the visibility-map page, block 1 the heap page.
    out.push(rec('VISIBLE', [{ node: NODE, fork: 2, block: 0 }, heap]));
  }
  return out;
}

/** predict's counts of those records, the relation's forks already read by replay before. */
function predictCounts(major: 13 | 15, pages: number) {
  const model = new RecoveryModel(NBUFFERS, NO_FILES, false, pgDropRules({ major, minor: null }));
  for (const r of vacuumRecords(major, 1)) model.learn(r);
  for (const r of vacuumRecords(major, pages)) model.replay(r);
  return sizeAndFsm(model.result().counts);
}

/** The counts one page adds: the difference of two cell sizes, so fixed parts cancel. */
function perPage(
  a: { nblocks: number[]; fsmUpdates: number },
  b: { nblocks: number[]; fsmUpdates: number },
  pages: number,
) {
  return {
    nblocks: b.nblocks.map((n, f) => (n - a.nblocks[f]!) / pages),
    fsmUpdates: (b.fsmUpdates - a.fsmUpdates) / pages,
  };
}

describe('size queries and FSM updates of a replayed VACUUM, by major', () => {
  it("13's rules: every block read asks the size, 7 a Test A page; 15's: cached", async () => {
    const w13 = await walsimCounts(64, 13);
    // Main: PRUNE, VACUUM and VISIBLE read the heap page (3 a page), and the truncation asks the
    // old size; FSM: the 3 free-space updates a page, then FreeSpaceMapPrepareTruncateRel and the
    // old size; VM: VISIBLE's page, then visibilitymap_prepare_truncate and the old size.
    expect(w13).toEqual({ nblocks: [3 * 64 + 1, 3 * 64 + 2, 64 + 2, 0], fsmUpdates: 3 * 64 });
    const sum = (n: number[]) => n.reduce((a, b) => a + b, 0);
    expect(sum(w13.nblocks) - 5).toBe(7 * 64);
    // 15 asks the file once, for the visibility map the VACUUM creates; every other size is cached.
    const w15 = await walsimCounts(64, 15);
    expect(w15).toEqual({ nblocks: [0, 0, 1, 0], fsmUpdates: 3 * 64 });
    // A walsim node following no major keeps the cache (14+'s behaviour).
    expect(await walsimCounts(64)).toEqual(w15);
  });

  it("walsim's replay counts what predict counts of PostgreSQL's records", async () => {
    const w13 = perPage(await walsimCounts(64, 13), await walsimCounts(128, 13), 64);
    const p13 = perPage(predictCounts(13, 64), predictCounts(13, 128), 64);
    expect(w13).toEqual({ nblocks: [3, 3, 1, 0], fsmUpdates: 3 });
    expect(p13).toEqual(w13);
    const w15 = perPage(await walsimCounts(64, 15), await walsimCounts(128, 15), 64);
    const p15 = perPage(predictCounts(15, 64), predictCounts(15, 128), 64);
    expect(w15).toEqual({ nblocks: [0, 0, 0, 0], fsmUpdates: 3 });
    expect(p15).toEqual(w15);
  });

  it('a fork of whole 1 GB segments: each size query at the file also fails to open the next', () => {
    expect([0, 1, RELSEG_SIZE - 1, RELSEG_SIZE + 1].map(mdnblocksOpensNextSegment)).toEqual([
      false,
      false,
      false,
      false,
    ]);
    expect([RELSEG_SIZE, 2 * RELSEG_SIZE].map(mdnblocksOpensNextSegment)).toEqual([true, true]);
    // predict: the relation's highest block is RELSEG_SIZE − 1 (its size a lower bound from the
    // WAL), then a VACUUM of its first pages. 13: the 3 main-fork reads a page each fail to open
    // segment 1 (perf stat on 13.23 at 8GB NB/8: 3.00 openat a page); 15: its sizes are cached.
    const segmentOpens = (major: 13 | 15, pages: number) => {
      const model = new RecoveryModel(
        NBUFFERS,
        NO_FILES,
        false,
        pgDropRules({ major, minor: null }),
      );
      const last = { node: NODE, fork: 0 as const, block: RELSEG_SIZE - 1 };
      const [first] = vacuumRecords(major, 1);
      model.learn({ ...first!, blocks: [last] });
      for (const r of vacuumRecords(major, 1)) model.learn(r);
      for (const r of vacuumRecords(major, pages)) model.replay(r);
      const c = model.result().counts;
      return { failed: c.failedSegmentOpens, mainSizeQueries: c.smgr.nblocks[0] };
    };
    expect(segmentOpens(13, 10)).toEqual({ failed: 30, mainSizeQueries: 30 });
    expect(segmentOpens(13, 20)).toEqual({ failed: 60, mainSizeQueries: 60 });
    expect(segmentOpens(15, 20)).toEqual({ failed: 0, mainSizeQueries: 0 });
  });

  it("walsim's storage manager counts the failed segment open at each size query at the file", () => {
    const sizeQueries = (blocks: number, major: 13 | 15) => {
      const smgr = new StorageManager();
      smgr.create(16384, MAIN_FORKNUM);
      for (let b = 0; b < blocks; b++) smgr.extend(16384, MAIN_FORKNUM, b);
      smgr.close(16384);
      smgr.inRecovery = true;
      const rules = pgDropRules({ major, minor: null });
      for (let i = 0; i < 3; i++) expect(smgr.nblocks(16384, MAIN_FORKNUM, rules)).toBe(blocks);
      return { asked: smgr.fileOps.nblocks[MAIN_FORKNUM], failed: smgr.failedSegmentOpens };
    };
    expect(sizeQueries(RELSEG_SIZE, 13)).toEqual({ asked: 3, failed: 3 });
    expect(sizeQueries(RELSEG_SIZE - 1, 13)).toEqual({ asked: 3, failed: 0 });
    // 14+: the first query asks the file (and fails to open segment 1), the others are cached.
    expect(sizeQueries(RELSEG_SIZE, 15)).toEqual({ asked: 1, failed: 1 });
  });
});
