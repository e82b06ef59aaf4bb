/**
 * `npm run calibrate`: fit a cost profile to THIS machine's PostgreSQL. A short fixed set of real
 * PostgreSQL cells (Test B VACUUM, TRUNCATE and DROP TABLE of int-only tables — the lookup path —,
 * TRUNCATE of tables with a TOAST table — a full scan per table, because replay never cached the
 * size of the never-written TOAST relation; one size beyond the last-level cache —, Test A VACUUM
 * of one relation of NBuffers/k pages, and the row-level DML backlogs INSERT and DELETE) is run
 * `runs` times on fresh clusters; the same cells run in walsim, in-process, give their counters;
 * the profile's constants are fitted by non-negative least squares (cost-model/fit.ts) to
 * PostgreSQL's median failover (log method; runs whose promote request stalled are left out).
 *
 * Entry points: `planCalibration`, `defaultCalibrationDesign`, `fitCalibration`,
 * `calibrationGroups`, `calibrationGroupsFor`, `CALIBRATION_GROUPS`, `identifiableGroups` and
 * `measuredAtBound` (the terms that keep their measured constants), `CalibrationReport`,
 * `readStoredCalibration` and `recordsFromStored` (`--refit`).
 *
 * The profile written carries, per cell, measured and fitted seconds, the residual, and the
 * leave-one-out prediction (fit without the cell, predict it): how well the profile predicts a
 * cell it has not seen. Its `promotionPoll` is null: the target is the log's instant, not a 100 ms
 * poll.
 */
import { pgDropRules } from '../../storage/pg-drop-rules.ts';
import * as fs from 'node:fs';
import * as os from 'node:os';
import { parseSharedBuffers } from '../../storage/shared-buffers.ts';
import { costFeatures, type CostFeatures } from '../../cost-model/model.ts';
import { price } from '../../cost-model/price.ts';
import {
  fitProfile,
  flattenFeatures,
  unidentifiedGroups,
  type FitGroup,
  type FitObservation,
} from '../../cost-model/fit.ts';
import {
  COST_CONSTANT_NAMES,
  type CostConstantName,
  type CostProfile,
  type MachineProbe,
} from '../../cost-model/profile.ts';
import { withLaterCounters, type FailoverCounts } from '../../storage/replay-counts.ts';
import { parseRelSize, rowsForPages } from '../experiment/rel-size.ts';
import { COPY_WIDE_ROWS_PER_TABLE, DML_ROWS_PER_TABLE } from '../experiment/dml.ts';
import { NO_MODEL, planMulti, type CellSpec } from '../experiment/sweep-runner.ts';
import type { CellSummary, RunRecord } from '../report/records.ts';
import { WalsimError } from '../../common/errors.ts';

/** Test A's shared_buffers sizes (and the default of the other cells' sizes). */
export const DEFAULT_CALIBRATION_SIZES = ['128MB', '1GB', '4GB'];
/**
 * Test B VACUUM / TRUNCATE / DROP TABLE run at two sizes: their drops take the lookup path, whose
 * cost does not depend on NBuffers, so a third size repeated the same counts (1GB was dropped for
 * the DML cells' time).
 */
export const DEFAULT_CALIBRATION_TESTB_SIZES = ['128MB', '4GB'];
/**
 * TOAST-able TRUNCATE (a full scan per table) at Test A's sizes and at 6GB: 786,432 descriptors ×
 * 64 bytes = 48 MiB, beyond this machine's 32 MiB last-level cache — the one cell of the memory
 * tier (at 4GB the array is exactly 32 MiB), so that tier's cost is fitted, not assumed. 6GB, not
 * 8GB: the bench's 8GB cells stay at a size the calibration never ran.
 */
export const DEFAULT_CALIBRATION_TOAST_SIZES = ['128MB', '1GB', '4GB', '6GB'];
/** The row-level DML backlogs (experiment/dml.ts): INSERT and DELETE over 100 tables at 128MB. */
export const DEFAULT_CALIBRATION_DML = { sharedBuffers: '128MB', tables: 100 } as const;
/**
 * The COPY backlogs (experiment/dml.ts `copy`, `copy-wide`) over 100 tables at 128MB: with the
 * INSERT and DELETE backlogs they identify the FSM update, the page appended and the tuple COPY
 * places (cost-model/README.md "Terms").
 */
export const DEFAULT_CALIBRATION_COPY = { sharedBuffers: '128MB', tables: 100 } as const;
/**
 * Test B's table counts: two, so that per-table work (records, smgr operations, pg_control
 * updates) and per-failover work (end of recovery) come from cells that differ in one thing, and a
 * per-table cost that is not constant shows as a residual instead of hiding in one table count's
 * fit (a profile fitted at 200 tables alone priced 1000-table cells 1.4-2.4x too high).
 */
export const DEFAULT_CALIBRATION_TABLES = [50, 300];
/** TOAST-able TRUNCATE (a full scan per table at every size) at one table count: its cost is the scan. */
export const DEFAULT_CALIBRATION_TOAST_TABLES = 100;
/** The one table count of calibrations stored before table counts varied. */
const LEGACY_CALIBRATION_TABLES = 200;
/**
 * Test A's relation sizes, NBuffers / k. With 16 beside 512, 64 and 8, every lookup-path cell beyond
 * 256 pages has a full-scan cell of the same pages at a smaller size (1,024 pages: 4GB NB/512 and 128MB NB/16;
 * 2,048: 1GB NB/64 and 128MB NB/8; 8,192: 4GB NB/64 and 1GB NB/16), so the per-buffer lookup
 * constants are fitted on the difference of two cells with the same records, not on one cell's
 * median (with 4GB NB/64 alone, one slow-mode median priced a dropped buffer at 2.2 µs:
 * docs/history/benchmarks-2026-12-03.md, fifth measurement).
 */
export const DEFAULT_CALIBRATION_REL_DIVISORS = [512, 64, 16, 8];
/**
 * Recorded runs a cell (after the warm-up pass): the median of 5 is not moved by two runs of the
 * startup process's slow mode (docs/history/benchmarks-2026-12-03.md, fourth and fifth
 * measurements). predict-bench
 * measures as many, so its medians are the statistic the profile was fitted to.
 */
export const DEFAULT_CALIBRATION_RUNS = 5;
/** Test A cells stay below this many pages (128MB of table), so calibration stays short. */
export const CALIBRATION_MAX_REL_PAGES = 16_384;

/** The calibration's cells, as stored in a profile's `fit.settings` (with the primary's size). */
export interface CalibrationDesign {
  /** Test A's sizes. */
  sizes: string[];
  /** Test B's table counts. */
  tables: number[];
  /** Where Test B VACUUM / TRUNCATE (and DROP TABLE) run (older files: every size). */
  testBSizes: string[];
  /**
   * Test B DROP TABLE beside VACUUM and TRUNCATE, at the same sizes and table counts (false: none;
   * older files). Per table, VACUUM, TRUNCATE and TOAST TRUNCATE give three equations in four I/O
   * terms (namespace operation n, truncation or size query s, pg_control update c, unlink of a
   * written file u): VACUUM 4s + c, TRUNCATE 3n + c + 2u, TOAST TRUNCATE 7n + s + c + 3u. Where no
   * other cell pins one of them (17's and 18's counts; 14's third FSM update a VACUUMed table did,
   * by chance), least squares can move cost along the fourth direction, and the fit fell back to
   * the measured 0.43 ms for u, which over-priced TRUNCATE and DROP of written tables on 17 and
   * 18. DROP TABLE unlinks the forks TRUNCATE unlinks, with one pg_control update, and creates no
   * file: 2n + c + 2u; TRUNCATE less DROP is one file created, and the 4 × 4 system is regular.
   */
  testBDrop: boolean;
  /** TOAST-able TRUNCATE's table count. */
  toastTables: number;
  /** Where TOAST-able TRUNCATE runs (older files: every size). */
  toastSizes: string[];
  relDivisors: number[];
  /** The row-level DML backlogs (INSERT, DELETE) over `tables` tables; null: none (older files). */
  dml: { sharedBuffers: string; tables: number } | null;
  /** The COPY backlogs (narrow and wide rows) over `tables` tables; null: none (older files). */
  copy: { sharedBuffers: string; tables: number } | null;
  /**
   * Generated backlogs (scripts/generator/): the seeds, each at the pool it draws, and the
   * generator version that drew them; absent or null: none (older files).
   */
  generated?: { seeds: number[]; pools: string[]; generator: number } | null;
}

/**
 * The generated backlogs calibration runs by default (seeds 1–12, each at the pool it draws on
 * this machine): below the bench's seeds (1001 on), so the bench never measures a seed the fit saw.
 */
export const DEFAULT_CALIBRATION_SEEDS = '1-12';

/** A generated calibration cell: the seed's backlog at its pool (calibration/gen-backlog.ts runs it). */
const generatedCell = (seed: number, sb: string): CellSpec => ({
  ...testBCell(sb, 'truncate', 1),
  variant: 'generated',
  tables: 0,
  pagesPerTable: 0,
  seed,
});

/** The default design (30 cells). */
export function defaultCalibrationDesign(): CalibrationDesign {
  return {
    sizes: [...DEFAULT_CALIBRATION_SIZES],
    tables: [...DEFAULT_CALIBRATION_TABLES],
    testBSizes: [...DEFAULT_CALIBRATION_TESTB_SIZES],
    testBDrop: true,
    toastTables: DEFAULT_CALIBRATION_TOAST_TABLES,
    toastSizes: [...DEFAULT_CALIBRATION_TOAST_SIZES],
    relDivisors: [...DEFAULT_CALIBRATION_REL_DIVISORS],
    dml: { ...DEFAULT_CALIBRATION_DML },
    copy: { ...DEFAULT_CALIBRATION_COPY },
  };
}

/** One PostgreSQL cell over one-block tables (the sweeps' Test B cell; PostgreSQL 15's drop path). */
const testBCell = (sb: string, variant: CellSpec['variant'], tables: number): CellSpec =>
  planMulti([sb], tables, [variant], ['cached-lookup'], ['postgres'])[0]!;

/**
 * The fixed cell set (PostgreSQL engine; walsim counts come from the same specs), size by size
 * (ascending NBuffers): Test B (VACUUM, TRUNCATE, DROP TABLE by table count), TOAST-able TRUNCATE,
 * Test A, then the DML backlogs.
 */
export function planCalibration(d: CalibrationDesign): CellSpec[] {
  const nb = (sb: string) => parseSharedBuffers(sb).nBuffers;
  const has = (list: readonly string[], sb: string) => list.some((x) => nb(x) === nb(sb));
  const all: string[] = [];
  for (const sb of [
    ...d.sizes,
    ...d.testBSizes,
    ...d.toastSizes,
    ...(d.dml ? [d.dml.sharedBuffers] : []),
    ...(d.copy ? [d.copy.sharedBuffers] : []),
  ])
    if (!has(all, sb)) all.push(sb);
  all.sort((a, b) => nb(a) - nb(b));
  const testB = d.testBDrop
    ? (['vacuum', 'truncate', 'drop'] as const)
    : (['vacuum', 'truncate'] as const);
  const cells: CellSpec[] = [];
  for (const sb of all) {
    const { nBuffers } = parseSharedBuffers(sb);
    if (has(d.testBSizes, sb))
      for (const n of d.tables) for (const v of testB) cells.push(testBCell(sb, v, n));
    if (has(d.toastSizes, sb)) cells.push(testBCell(sb, 'truncate-toast', d.toastTables));
    for (const k of has(d.sizes, sb) ? d.relDivisors : []) {
      const size = parseRelSize(`NB/${k}`, nBuffers);
      if (size.pages > CALIBRATION_MAX_REL_PAGES) continue;
      cells.push({
        kind: 'threshold',
        engine: 'postgres',
        sharedBuffers: sb,
        nBuffers,
        strategy: 'cached-lookup',
        forceOptimized: false,
        variant: 'vacuum',
        relSize: size.spec,
        relDivisor: k,
        pagesPerTable: size.pages,
        tables: 1,
      });
    }
    if (d.dml !== null && nb(d.dml.sharedBuffers) === nBuffers)
      for (const v of ['insert', 'delete'] as const) cells.push(testBCell(sb, v, d.dml.tables));
    if (d.copy !== null && nb(d.copy.sharedBuffers) === nBuffers)
      for (const v of ['copy', 'copy-wide'] as const) cells.push(testBCell(sb, v, d.copy.tables));
  }
  const g = d.generated ?? null;
  if (g !== null) g.seeds.forEach((seed, i) => cells.push(generatedCell(seed, g.pools[i]!)));
  return cells;
}

/**
 * The walsim twin of a PostgreSQL cell: walsim following the calibrated server's `major` (13: a
 * full scan at every drop; 14+: the lookup below NBuffers/32, unforced); no major: PostgreSQL
 * 15's drop path (cached-lookup), the machine's Debian server.
 */
export function walsimTwinAt(c: CellSpec, major: number | undefined): CellSpec {
  const twin = { ...c, engine: 'walsim' as const, forceOptimized: false };
  if (major === undefined) return { ...twin, strategy: 'cached-lookup' };
  const lookup = pgDropRules({ major, minor: null }).cachedLookup;
  return { ...twin, strategy: lookup ? 'cached-lookup' : 'full-scan', pgVersion: major };
}

/** The walsim twin of a PostgreSQL cell: PostgreSQL 15's drop path (cached-lookup, unforced). */
export const walsimTwin = (c: CellSpec): CellSpec => walsimTwinAt(c, undefined);

const of = (pred: (k: CostConstantName) => boolean) => COST_CONSTANT_NAMES.filter(pred);

/**
 * Records whose redo changes one tuple on one page already in shared_buffers
 * (XLogReadBufferForRedo, the tuple written, the page marked dirty): heap_xlog_insert,
 * heap_xlog_delete, heap_xlog_update, heap_xlog_inplace, btree_xlog_insert. Every other record
 * works on a whole page or on no page: lazy vacuum's PRUNE / VACUUM (every line pointer of the
 * page, then its free space in the FSM) and VISIBLE (the VM page too), full-page images, and the
 * non-page records (commit, lock, smgr, checkpoint). Measured apart: the mixed bench backlog, 99 %
 * HEAP_INSERT / HEAP_DELETE, replayed at ≈ 1 µs a record where the one tied constant, fitted on
 * Test A's lazy-vacuum records, said 4.4 µs (docs/history/benchmarks-2026-12-02.md, second
 * measurement).
 */
export const TUPLE_RECORD_KINDS = [
  'HEAP_INSERT',
  'HEAP_DELETE',
  'HEAP_UPDATE',
  'HEAP_INPLACE',
  'BTREE_INSERT_LEAF',
] as const;
const isTupleRecord = (k: CostConstantName) =>
  (TUPLE_RECORD_KINDS as readonly string[]).includes(k.slice('record.'.length));

/**
 * Constants fitted together: the cells cannot tell apart, e.g., the cost of a PRUNE from a VISIBLE
 * record (they always come together), so each group shares one value per event. Everything else
 * keeps the base profile's value — `walByte` included: it counts walsim's encoding, not
 * PostgreSQL's bytes, so it has no PostgreSQL cost to fit (a free walByte soaked up what the record
 * constant should price: 0.11 µs per walsim byte and 0 per record in a real calibration).
 */
export function calibrationGroups(o: {
  rowDml: boolean;
  memoryTier: boolean;
  copy?: boolean;
  firstTouch?: boolean;
  unlinkNonEmpty?: boolean;
  sizeQueryPerRead?: boolean;
  segmentOpenFailed?: boolean;
  walSegmentPrealloc?: boolean;
}): FitGroup[] {
  return [
    ...(o.rowDml
      ? [
          { name: 'record', constants: of((k) => k.startsWith('record.') && !isTupleRecord(k)) },
          {
            name: 'recordTuple',
            constants: of((k) => k.startsWith('record.') && isTupleRecord(k)),
          },
        ]
      : [{ name: 'record', constants: of((k) => k.startsWith('record.')) }]),
    ...(o.memoryTier
      ? [
          {
            name: 'scan',
            constants: of(
              (k) => /^scan\.(single|multi)\.cache$/.test(k) || k === 'scan.preCheckHit',
            ),
          },
          { name: 'scanMemory', constants: of((k) => /^scan\.(single|multi)\.memory$/.test(k)) },
        ]
      : [
          {
            name: 'scan',
            constants: of((k) => /^scan\.(single|multi)\./.test(k) || k === 'scan.preCheckHit'),
          },
        ]),
    ...laterGroups(o.sizeQueryPerRead === true),
    ...(o.rowDml ? [{ name: 'smgrExtend', constants: ['smgr.extend' as const] }] : []),
    // With the COPY backlogs beside INSERT and DELETE: an FSM update is 45 a page in the INSERT
    // backlog, 1 a page in COPY's, 2 a page in lazy vacuum's; a tuple COPY places is 226 a page in
    // `copy` and 18 in `copy-wide`, every other per-page event the same in both.
    ...(o.rowDml && o.copy
      ? [
          { name: 'fsmUpdate', constants: ['fsm.update' as const] },
          { name: 'multiInsertTuple', constants: ['multiInsert.tuple' as const] },
        ]
      : []),
    ...countedTermGroups(o),
  ];
}

/**
 * The groups of terms fitted once a calibration's runs count them (each a counter added after
 * the first calibrations; runs stored before it carry 0 and leave the group out).
 */
function countedTermGroups(o: {
  firstTouch?: boolean;
  unlinkNonEmpty?: boolean;
  segmentOpenFailed?: boolean;
  walSegmentPrealloc?: boolean;
}): FitGroup[] {
  return [
    // Runs that count the descriptor pages the startup process maps at its first full scan (its
    // page map, read by predict): a TOAST cell maps them once beside 100 scans, a Test A full-scan
    // cell once beside one, at pools from 128MB to 20GB. Runs stored before the count keep the
    // base profile's value (the fitted scan constants then carry what their cells paid for it).
    ...(o.firstTouch
      ? [{ name: 'descriptorPageMapped', constants: ['scan.descriptorPageMapped' as const] }]
      : []),
    // Runs that count the unlinked forks that held blocks (predict, from the fork sizes): apart
    // from the per-file unlink, the pg_control update and the truncation by Test B DROP TABLE
    // beside TRUNCATE (one file created apart: `CalibrationDesign.testBDrop`); without it, only
    // through cells that drop many written tables in one commit (generated seeds) or by chance of
    // the other counts (14's 3 FSM updates a VACUUMed table against 17's 2).
    ...(o.unlinkNonEmpty
      ? [{ name: 'unlinkNonEmpty', constants: ['smgr.unlinkNonEmpty' as const] }]
      : []),
    // Runs that count failed opens of a next 1 GB segment (a fork of whole segments asked its size
    // at the file): cost-model/README.md "Terms".
    ...(o.segmentOpenFailed
      ? [{ name: 'segmentOpenFailed', constants: ['smgr.segmentOpenFailed' as const] }]
      : []),
    // Runs that count the next segment PreallocXlogFiles makes as recovery ends (the end of WAL in
    // the last quarter of its segment: about a quarter of the cells, by where their WAL ends). Runs
    // stored before the count carry 0, and the end-of-recovery group the average of what it cost.
    ...(o.walSegmentPrealloc
      ? [{ name: 'walSegmentPrealloc', constants: ['walSegment.prealloc' as const] }]
      : []),
  ];
}

/**
 * The size query's group. Where smgrnblocks asks the file only for a fork's first read after
 * the size cache was reset (14+ in recovery), a size query comes with the fork's first read or
 * truncation: a few a table, in step with the truncations, so the two share a constant. Where it
 * asks at every block a record reads (13: no smgrnblocks_cached; 7 a Test A page), it is an lseek
 * per block read, apart from the truncation: its own term (`sizeQuery`), identified by Test A (7
 * a page beside 3 records and 3 FSM updates) against the COPY backlogs (2 a page beside 1 record
 * and about 1 FSM update) and the row backlogs (1 a row).
 */
function sizeGroups(perRead: boolean): FitGroup[] {
  return perRead
    ? [
        { name: 'smgrTruncate', constants: ['smgr.truncate'] },
        { name: 'sizeQuery', constants: ['smgr.nblocks'] },
      ]
    : [{ name: 'smgrSize', constants: ['smgr.truncate', 'smgr.nblocks'] }];
}

/**
 * Do these counts ask the size at block reads — some cell with more size queries than PostgreSQL
 * records? Only where smgrnblocks reaches the file at every read (13's rules): 14+ ask a fork's
 * size once until the cache is reset, which no cell's records come near.
 */
export function sizeQueriesPerRead(features: readonly CostFeatures[]): boolean {
  return features.some((f) => {
    const x = flattenFeatures(f);
    let records = 0;
    for (const [k, n] of Object.entries(x)) if (k.startsWith('record.')) records += n ?? 0;
    return (x['smgr.nblocks'] ?? 0) > records;
  });
}

function laterGroups(sizeQueryPerRead: boolean): FitGroup[] {
  return [
    {
      name: 'lookup',
      constants: of(
        (k) =>
          k.startsWith('lookup.') ||
          k === 'invalidate' ||
          k === 'dropCall.fullScan' ||
          k === 'dropCall.lookup',
      ),
    },
    // A file created or unlinked changes a directory and allocates or frees an inode: journaled
    // namespace changes. Extending, truncating or sizing a file touches one inode's size and extents.
    // One tied constant for both under-priced TRUNCATE of TOAST-able tables (three files created and
    // three unlinked per table) by 30–40 % in a real calibration; split, the fit prices a namespace
    // operation at ~0.3 ms and a size operation at ~0.1 ms on this kind of machine.
    { name: 'smgrNamespace', constants: ['smgr.create', 'smgr.unlink'] },
    // smgr.extend is fitted only with the DML cells (smgrExtend, above): without them it counts one
    // FSM page a VACUUMed table, always beside that table's other per-table events, and a tie gave it
    // truncate's 64 µs — which priced the 3,845 blocks of a `pgbench -i` backlog at 0.25 s against
    // 0.12 s measured for the whole failover (predict-bench). Then it keeps the base profile's value.
    // Truncation and size query: tied, or apart where the size is asked per read (`sizeGroups`).
    ...sizeGroups(sizeQueryPerRead),
    { name: 'controlFile', constants: ['controlFile.update'] },
    { name: 'endOfRecovery', constants: of((k) => k.startsWith('endOfRecovery.')) },
  ];
}

/** The groups of a design without DML cells or a memory-tier cell (every calibration before them). */
export const CALIBRATION_GROUPS: FitGroup[] = calibrationGroups({
  rowDml: false,
  memoryTier: false,
});

/**
 * The groups a design's cells can identify: the per-record constant split in two when the design
 * has the DML backlogs (and `smgr.extend` fitted: the INSERT backlog appends 10 pages a table, the
 * DELETE backlog none), the scan's memory tier fitted on its own when a cell scans beyond the
 * last-level cache. Otherwise the older ties (a group no cell counts would be fitted to 0).
 */
export function calibrationGroupsFor(
  cells: readonly Pick<CellSpec, 'variant'>[],
  features: readonly CostFeatures[],
): FitGroup[] {
  const rowDml = cells.some((c) => c.variant === 'insert' || c.variant === 'delete');
  const copy = cells.some((c) => c.variant === 'copy' || c.variant === 'copy-wide');
  const memoryTier = features.some((f) => {
    const x = flattenFeatures(f);
    return (x['scan.single.memory'] ?? 0) + (x['scan.multi.memory'] ?? 0) > 0;
  });
  const firstTouch = features.some(
    (f) => (flattenFeatures(f)['scan.descriptorPageMapped'] ?? 0) > 0,
  );
  const unlinkNonEmpty = features.some((f) => (flattenFeatures(f)['smgr.unlinkNonEmpty'] ?? 0) > 0);
  const segmentOpenFailed = features.some(
    (f) => (flattenFeatures(f)['smgr.segmentOpenFailed'] ?? 0) > 0,
  );
  const walSegmentPrealloc = features.some(
    (f) => (flattenFeatures(f)['walSegment.prealloc'] ?? 0) > 0,
  );
  const sizeQueryPerRead = sizeQueriesPerRead(features);
  return calibrationGroups({
    rowDml,
    memoryTier,
    copy,
    firstTouch,
    unlinkNonEmpty,
    sizeQueryPerRead,
    segmentOpenFailed,
    walSegmentPrealloc,
  });
}

/**
 * Terms measured outside a fit (cost-model/README.md "Terms"): the generated bench's (the
 * startup process's first-scan CPU less its second scan's, per unmapped page; a commit dropping
 * 300 written tables against 300 empty ones, per written file) and 13's (its startup CPU a Test A
 * page against 15's, per lseek; at 8GB NB/8 against NB/16, per failed segment open). A design
 * whose runs count a term but whose cells cannot tell it from the others keeps this value (and
 * says so) rather than refusing the fit after the runs were measured.
 */
export const MEASURED_WHEN_UNIDENTIFIED: Readonly<
  Record<string, { constant: CostConstantName; seconds: number; measured: string }>
> = {
  descriptorPageMapped: {
    constant: 'scan.descriptorPageMapped',
    seconds: 8.1e-6,
    measured: 'the first full scan less the second, per unmapped page: 8.1 us (6.9-9.9)',
  },
  unlinkNonEmpty: {
    constant: 'smgr.unlinkNonEmpty',
    seconds: 0.43e-3,
    measured:
      'a commit dropping 300 written tables less one dropping 300 empty ones: 0.43 ms a file',
  },
  sizeQuery: {
    constant: 'smgr.nblocks',
    seconds: 1.5e-6,
    measured:
      "13.23 less 15.18 (one build), startup CPU a Test A page added from 1GB NB/16 to NB/8, over 13's 7 lseeks a page: 1.5 us",
  },
  segmentOpenFailed: {
    constant: 'smgr.segmentOpenFailed',
    seconds: 2.9e-6,
    measured:
      "13.23's startup CPU a page under perf stat, Test A at 8GB NB/8 less NB/16, over its 3 failed opens a page: 2.9 us",
  },
  walSegmentPrealloc: {
    constant: 'walSegment.prealloc',
    seconds: 16.5e-3,
    measured:
      'the family benches of 14, 16, 17 and 18: the median time from "archive recovery complete" to "ready" of the runs whose WAL ended in the last quarter of a segment less that of the others, 17, 16, 15 and 19 ms: 16.5 ms',
  },
};

/**
 * Measured terms a calibration prices even when none of its cells counts them: the failed open of
 * a next segment repeats at every block read of a fork of whole 1 GB segments where the size is
 * asked per read (13), so a profile for such counts must price it — yet a calibration cell with a
 * 1 GB relation would stream 1 GB of WAL a run. Where the size is cached (14+) it happens at most
 * once a fork between cache resets, and the base's value (0 in every shipped profile) stays.
 */
function measuredWhenUncounted(features: readonly CostFeatures[]): string[] {
  if (!sizeQueriesPerRead(features)) return [];
  const counted = features.some((f) => (flattenFeatures(f)['smgr.segmentOpenFailed'] ?? 0) > 0);
  return counted ? [] : ['segmentOpenFailed'];
}

/**
 * `base` with each named group's measured constant (MEASURED_WHEN_UNIDENTIFIED) set, its `source`
 * saying why it was not fitted: the one place a measured term replaces a fitted one.
 */
function withMeasured(
  base: CostProfile,
  names: readonly string[],
  why: (group: string) => string,
): CostProfile {
  const constants = { ...base.constants };
  for (const g of names) {
    const m = MEASURED_WHEN_UNIDENTIFIED[g]!;
    constants[m.constant] = {
      ...constants[m.constant],
      seconds: m.seconds,
      source: `measured, not fitted: ${why(g)} (${m.measured}; cost-model/README.md)`,
    };
  }
  return { ...base, constants };
}

/**
 * The groups a calibration fits: `calibrationGroupsFor`'s, less a group with a measured constant
 * (MEASURED_WHEN_UNIDENTIFIED) the cells cannot identify — that constant is set in the returned
 * base and named in `measured`, as is the failed segment open that no cell counts where the size
 * is asked per read (`measuredWhenUncounted`). `unidentified`: the other groups the cells cannot
 * identify (the caller refuses the fit). A group the cells identify but cannot price above 0 is
 * `measuredAtBound`'s, which needs the measured seconds.
 */
export function identifiableGroups(
  cells: readonly Pick<CellSpec, 'variant'>[],
  features: readonly CostFeatures[],
  base: CostProfile,
): { groups: FitGroup[]; base: CostProfile; measured: string[]; unidentified: string[] } {
  const all = calibrationGroupsFor(cells, features);
  const notIdentified = unidentifiedGroups(features, all).filter(
    (g) => MEASURED_WHEN_UNIDENTIFIED[g] !== undefined,
  );
  const uncounted = measuredWhenUncounted(features);
  const groups = all.filter((g) => !notIdentified.includes(g.name));
  return {
    groups,
    base: withMeasured(base, [...notIdentified, ...uncounted], (g) =>
      uncounted.includes(g)
        ? "none of the calibration's cells counts it"
        : "the calibration's cells count it but cannot tell it from the other groups",
    ),
    measured: [...notIdentified, ...uncounted],
    unidentified: unidentifiedGroups(features, groups),
  };
}

/** `measuredAtBound`'s fits are read for their group values only: their names do not matter. */
const BOUND_META = { name: 'bound', description: 'bound', source: 'bound' };

/**
 * The rule for a term with a measured constant that the cells identify (by rank) but that the NNLS
 * leaves at its bound 0: it is not priced at 0, it keeps its measured constant (`withMeasured`,
 * as an unidentified one does) and the other groups are fitted again against the targets less its
 * part; repeated until no such group is left at 0. Named in `atBound` (the profile's
 * `fit.measuredAtBound`); the leave-one-out fits keep the same groups.
 *
 * Why at 0 and not the fitted value: each of these terms counts an event that costs time wherever
 * it is counted on the kind of machine its constant was measured on — a synchronous discard a
 * written fork file freed (a device round trip), a page fault a descriptor page first touched, an
 * lseek a size query, an openat a failed segment open — and each comes in a nearly fixed ratio
 * with a neighbouring term in most cells (one commit drops a table's written forks beside one
 * pg_control fsync; the pages mapped are NBuffers / 64 beside the first scan's NBuffers
 * descriptors; 13's size query comes 1:1 with the one-tuple record in the row backlogs). Only a few
 * cells tell them apart, so run-to-run noise can put the least-squares value below 0, where the
 * NNLS stops at 0 and gives the neighbour the whole cost (16's pg_control update at 0.44 ms
 * against its 0.1-0.3 ms fsync, its 900-file TOAST TRUNCATE then priced -46 %). A 0 there says
 * the data could not price the term positively, not that it is free — the situation the
 * unidentified case is in, so the same measured value serves, for every MEASURED_WHEN_UNIDENTIFIED
 * term alike: none of their mechanisms gives a 0 on the machine they were measured on. Where one
 * would be free (a mount without `discard`, shared memory in huge pages), the measured constant is
 * as wrong for the unidentified case; the table is this kind of machine's, and a calibration
 * elsewhere has to measure the term again. A positive fitted value, even one below the measured
 * constant, is the data's and stays. So does the 0 when the measured constant is refuted by a
 * cell — its count times the constant alone above the cell's measured seconds (`refuted`): 14's,
 * 16's and 18's Test B DROP TABLE of 300 tables at 128MB took 0.16-0.19 s with 600 written forks
 * unlinked, 0.26 s at 0.43 ms each, so that value does not hold for these files here.
 */
export function measuredAtBound(
  cells: readonly CellSummary[],
  counts: readonly FailoverCounts[],
  fit: { groups: FitGroup[]; base: CostProfile },
): {
  groups: FitGroup[];
  base: CostProfile;
  atBound: string[];
  refuted: Array<{ group: string; cell: string }>;
} {
  let { groups, base } = fit;
  const atBound: string[] = [];
  const refuted: Array<{ group: string; cell: string }> = [];
  // The features depend on the base's cache tier only, which `withMeasured` keeps: built once.
  const { obs } = calibrationObservations(cells, counts, base);
  for (;;) {
    const spec = { base: { ...base, promotionPoll: null }, groups, ...BOUND_META };
    const { groupSeconds } = fitProfile(obs, spec);
    const zero = groups
      .map((g) => g.name)
      .filter((g) => MEASURED_WHEN_UNIDENTIFIED[g] !== undefined && groupSeconds[g] === 0)
      .filter((g) => !refuted.some((r) => r.group === g));
    // A measured constant that alone prices some cell above its measured seconds is refuted by
    // that cell: not kept, the group stays fitted (at 0).
    for (const g of zero) {
      const cell = refutingCell(obs, MEASURED_WHEN_UNIDENTIFIED[g]!);
      if (cell !== undefined) refuted.push({ group: g, cell });
    }
    const kept = zero.filter((g) => !refuted.some((r) => r.group === g));
    if (kept.length === 0) return { groups, base, atBound, refuted };
    atBound.push(...kept);
    groups = groups.filter((g) => !kept.includes(g.name));
    base = withMeasured(
      base,
      kept,
      () =>
        "the calibration's cells identify it, but the fit left it at its bound 0: they could not price it positively beside the other groups",
    );
  }
}

/** The label of a cell whose measured seconds the measured term alone exceeds, if any. */
function refutingCell(
  obs: readonly FitObservation[],
  m: { constant: CostConstantName; seconds: number },
): string | undefined {
  return obs.find((o) => (flattenFeatures(o.features)[m.constant] ?? 0) * m.seconds > o.targetS)
    ?.label;
}

export interface CalibrationCell {
  label: string;
  cell: CellSpec;
  runs: number;
  stalls: number;
  /** PostgreSQL: median failover, seconds (log method, stalled runs excluded). */
  measuredS: number;
  fittedS: number;
  residualS: number;
  residualPct: number;
  /** Fitted without this cell, then predicted. */
  leaveOneOutS: number;
  leaveOneOutPct: number;
}

export interface CalibrationReport {
  profile: CostProfile;
  groupSeconds: Record<string, number>;
  cells: CalibrationCell[];
}

const testBVerb = (v: CellSpec['variant']) =>
  v === 'truncate-toast' ? 'TRUNCATE (TOAST)' : v === 'drop' ? 'DROP TABLE' : v.toUpperCase();

export function cellShortLabel(c: CellSpec): string {
  if (c.variant === 'generated') return `${c.sharedBuffers} generated seed ${c.seed}`;
  const what =
    c.kind === 'threshold'
      ? `Test A VACUUM ${c.relSize}`
      : c.variant === 'insert' || c.variant === 'delete'
        ? `DML ${c.variant.toUpperCase()} ${c.tables} tables × ${c.variant === 'insert' ? DML_ROWS_PER_TABLE : DML_ROWS_PER_TABLE + rowsForPages(1)} rows`
        : c.variant === 'copy' || c.variant === 'copy-wide'
          ? `DML COPY ${c.tables} tables × ${c.variant === 'copy' ? `${DML_ROWS_PER_TABLE} int rows` : `${COPY_WIDE_ROWS_PER_TABLE} wide rows`}`
          : `Test B ${testBVerb(c.variant)} ${c.tables} tables`;
  return `${c.sharedBuffers} ${what}`;
}

/** This machine's last-level cache, for the profile's scan tier (sysfs; the base's when unknown). */
export function machineCache(base: CostProfile): CostProfile['cache'] {
  for (const idx of ['index3', 'index2']) {
    try {
      const text = fs.readFileSync(`/sys/devices/system/cpu/cpu0/cache/${idx}/size`, 'utf8').trim();
      const m = /^(\d+)([KM])$/.exec(text);
      if (m)
        return {
          ...base.cache,
          llcBytes: Number(m[1]) * (m[2] === 'M' ? 1 << 20 : 1024),
          source: `this machine: ${os.cpus()[0]?.model ?? 'cpu'}, last-level cache ${text} (sysfs ${idx})`,
        };
    } catch {
      /* try the next level */
    }
  }
  return base.cache;
}

/** The cells with a measured median, each as a fit observation (weight 1/measured). */
function calibrationObservations(
  cells: readonly CellSummary[],
  counts: readonly FailoverCounts[],
  base: CostProfile,
): { usable: Array<{ c: CellSummary; counts: FailoverCounts }>; obs: FitObservation[] } {
  const usable = cells
    .map((c, i) => ({ c, counts: counts[i]! }))
    .filter((x) => Number.isFinite(x.c.failoverMsMedian) && x.c.failoverMsMedian > 0);
  const obs: FitObservation[] = usable.map(({ c, counts: n }) => ({
    label: cellShortLabel(c),
    features: costFeatures(n, base, c.nBuffers),
    targetS: c.failoverMsMedian / 1000,
    weight: 1000 / c.failoverMsMedian,
  }));
  return { usable, obs };
}

/**
 * Fit the groups to the measured cells (weights 1/measured: relative error), then refit without
 * each cell to predict it.
 */
export function fitCalibration(
  cells: CellSummary[],
  counts: FailoverCounts[],
  base: CostProfile,
  meta: { name: string; description: string; source: string },
  groupsGiven?: FitGroup[],
): CalibrationReport {
  const { usable, obs } = calibrationObservations(cells, counts, base);
  const groups =
    groupsGiven ??
    calibrationGroupsFor(
      usable.map((u) => u.c),
      obs.map((o) => o.features),
    );
  const spec = { base: { ...base, promotionPoll: null }, groups, ...meta };
  const all = fitProfile(obs, spec);
  const out: CalibrationCell[] = usable.map(({ c, counts: n }, i) => {
    const measuredS = c.failoverMsMedian / 1000;
    const fittedS = price({ counts: n, nBuffers: c.nBuffers }, all.profile).failoverS;
    const others = obs.filter((_, j) => j !== i);
    const loo =
      others.length > 0
        ? price({ counts: n, nBuffers: c.nBuffers }, fitProfile(others, spec).profile).failoverS
        : NaN;
    return {
      label: obs[i]!.label,
      cell: c,
      runs: c.runs,
      stalls: c.stalls,
      measuredS,
      fittedS,
      residualS: fittedS - measuredS,
      residualPct: (fittedS - measuredS) / measuredS,
      leaveOneOutS: loo,
      leaveOneOutPct: (loo - measuredS) / measuredS,
    };
  });
  return { profile: all.profile, groupSeconds: all.groupSeconds, cells: out };
}

/** A run as `npm run calibrate` stores it in the profile's `fit.records`. */
export interface StoredCalibrationRun {
  label: string;
  run: number;
  warmup?: boolean;
  failoverMs: number;
  seedMethodMs?: number;
  replayMs?: number | null;
  endOfRecoveryMs?: number | null;
  openForWritesMs?: number | null;
  stall?: boolean;
  loadAvg1?: number;
  cpuPressure?: number;
  /** The standby's startup process: on a CPU, waiting for one, blocked (ms; pg-engine.ts). */
  startupCpuMs?: number;
  startupRunQueueMs?: number;
  startupBlockedMs?: number;
  walBytes?: number;
  recordsReplayed?: number;
  /** The machine probe run before the run's prediction (predict/probe.ts); null: it failed. */
  probe?: MachineProbe | null;
}

export interface StoredCalibration {
  measuredAt: string;
  wallSeconds: number;
  postgres: string;
  runs: number;
  warmupRuns: number;
  machine: unknown;
  /**
   * What the cell set was planned from (older files: inferred from the labels and the defaults;
   * Test B's table counts one number, TOAST-able TRUNCATE at that count, every cell at every size,
   * no DML cells, no Test B DROP TABLE).
   */
  settings: CalibrationDesign & { primarySharedBuffers: string };
  records: StoredCalibrationRun[];
  /**
   * Per cell label, the counts predict read from the real WAL of a run (calibrations since
   * `--counts wal`); absent in older files, whose fits priced walsim twins' counts.
   */
  walCounts: Record<string, FailoverCounts> | null;
  /**
   * The groups `measuredAtBound` priced at their measured constants (`fit.measuredAtBound`; [] when
   * none); null in a file fitted before that rule, whose constants it reproduces without it.
   */
  measuredAtBound: string[] | null;
}

/** The label a stored run carries: `<shared_buffers> <NB/k>` or `<shared_buffers> <variant> <n> tables`. */
export const storedLabel = (
  c: Pick<CellSpec, 'sharedBuffers' | 'relSize' | 'variant' | 'tables' | 'seed'>,
) =>
  c.variant === 'generated'
    ? `${c.sharedBuffers} generated seed ${c.seed}`
    : c.relSize !== null
      ? `${c.sharedBuffers} ${c.relSize}`
      : `${c.sharedBuffers} ${c.variant} ${c.tables} tables`;

/** Labels of calibrations with one table count: `<shared_buffers> <variant>`. */
const legacyLabel = (c: Pick<CellSpec, 'sharedBuffers' | 'relSize' | 'variant'>) =>
  `${c.sharedBuffers} ${c.relSize ?? c.variant}`;

/** The settings a stored fit wrote: older files lack some and have one table count. */
type StoredSettings = Omit<
  StoredCalibration['settings'],
  'tables' | 'toastTables' | 'testBSizes' | 'testBDrop' | 'toastSizes' | 'dml' | 'copy'
> & {
  tables?: number | number[];
  toastTables?: number;
  testBSizes?: string[];
  testBDrop?: boolean;
  toastSizes?: string[];
  dml?: CalibrationDesign['dml'];
  copy?: CalibrationDesign['copy'];
};

/** The profile file's `fit` and its runs, each checked for the fields a refit needs. */
function readStoredFit(file: string): {
  fit: Record<string, unknown>;
  records: StoredCalibrationRun[];
} {
  let j: unknown;
  try {
    j = JSON.parse(fs.readFileSync(file, 'utf8'));
  } catch (e) {
    throw new WalsimError(
      'invalid_input',
      `cannot read calibration ${file}: ${(e as Error).message}`,
    );
  }
  const fit = (j as { fit?: Record<string, unknown> } | null)?.fit;
  const recs = fit?.records;
  if (!fit || !Array.isArray(recs) || recs.length === 0)
    throw new WalsimError(
      'invalid_input',
      `${file} has no fit.records: only a profile written by npm run calibrate can be refitted`,
    );
  for (const r of recs as Array<Record<string, unknown>>) {
    if (
      typeof r.label !== 'string' ||
      typeof r.run !== 'number' ||
      typeof r.failoverMs !== 'number'
    )
      throw new WalsimError(
        'invalid_input',
        `${file}: a fit.records entry lacks label, run or failoverMs: ${JSON.stringify(r).slice(0, 200)}`,
      );
  }
  return { fit, records: recs as StoredCalibrationRun[] };
}

/** The cell design a stored fit was planned from (what older files lack: from labels, defaults). */
function storedSettings(
  s: StoredSettings | undefined,
  records: readonly StoredCalibrationRun[],
): StoredCalibration['settings'] {
  const sizes = s?.sizes ?? [...new Set(records.map((r) => r.label.split(' ')[0]!))];
  const divisors = s?.relDivisors ?? [
    ...new Set(records.flatMap((r) => /NB\/(\d+)$/.exec(r.label)?.[1] ?? []).map(Number)),
  ];
  return {
    sizes,
    tables: Array.isArray(s?.tables)
      ? s.tables
      : [typeof s?.tables === 'number' ? s.tables : LEGACY_CALIBRATION_TABLES],
    toastTables:
      s?.toastTables ?? (typeof s?.tables === 'number' ? s.tables : LEGACY_CALIBRATION_TABLES),
    testBSizes: s?.testBSizes ?? sizes,
    testBDrop: s?.testBDrop ?? false,
    toastSizes: s?.toastSizes ?? sizes,
    dml: s?.dml ?? null,
    copy: s?.copy ?? null,
    generated: s?.generated ?? null,
    relDivisors:
      divisors.length > 0 ? divisors.sort((a, b) => b - a) : DEFAULT_CALIBRATION_REL_DIVISORS,
    primarySharedBuffers: s?.primarySharedBuffers ?? '128MB',
  };
}

/** Read the measurements of a profile written by `npm run calibrate` (for `--refit`). */
export function readStoredCalibration(file: string): StoredCalibration {
  const { fit, records } = readStoredFit(file);
  return {
    measuredAt: String(fit.measuredAt),
    wallSeconds: Number(fit.wallSeconds),
    postgres: String(fit.postgres),
    runs: Number(fit.runsPerCell),
    warmupRuns: Number(fit.warmupRunsPerCell ?? 0),
    machine: fit.machine ?? null,
    settings: storedSettings(fit.settings as StoredSettings | undefined, records),
    records,
    walCounts:
      fit.walCounts !== null && typeof fit.walCounts === 'object'
        ? Object.fromEntries(
            Object.entries(fit.walCounts as Record<string, FailoverCounts>).map(([k, c]) => [
              k,
              { ...c, replay: withLaterCounters(c.replay) },
            ]),
          )
        : null,
    measuredAtBound: Array.isArray(fit.measuredAtBound)
      ? (fit.measuredAtBound as unknown[]).map((g) => String(g))
      : null,
  };
}

/** Stored runs back as PostgreSQL RunRecords of the plan's cells (measured fields only; drop counters NaN). */
export function recordsFromStored(
  stored: readonly StoredCalibrationRun[],
  plan: readonly CellSpec[],
): RunRecord[] {
  return stored.map((r) => {
    const cell =
      plan.find((c) => storedLabel(c) === r.label) ?? plan.find((c) => legacyLabel(c) === r.label);
    if (!cell)
      throw new WalsimError(
        'invalid_input',
        `stored run "${r.label}" matches no calibration cell (${plan.map(storedLabel).join(', ')})`,
      );
    return {
      ...cell,
      ...NO_MODEL,
      run: r.run,
      failoverMs: r.failoverMs,
      replayMs: r.replayMs ?? null,
      endOfRecoveryMs: r.endOfRecoveryMs ?? null,
      openForWritesMs: r.openForWritesMs ?? null,
      recordsReplayed: r.recordsReplayed ?? NaN,
      dropMs: NaN,
      dropsFullScan: NaN,
      dropsCachedLookup: NaN,
      scanned: NaN,
      probes: NaN,
      invalidated: NaN,
      promoted: true,
      resumeAt: '',
      promotedAt: '',
      stepMs: {},
      ...(r.seedMethodMs !== undefined ? { seedMethodMs: r.seedMethodMs } : {}),
      ...(r.walBytes !== undefined ? { walBytes: r.walBytes } : {}),
      stall: r.stall === true,
      ...(r.warmup ? { warmup: true } : {}),
      ...(r.loadAvg1 !== undefined ? { loadAvg1: r.loadAvg1 } : {}),
      ...(r.cpuPressure !== undefined ? { cpuPressure: r.cpuPressure } : {}),
      ...(r.startupCpuMs !== undefined ? { startupCpuMs: r.startupCpuMs } : {}),
      ...(r.startupRunQueueMs !== undefined ? { startupRunQueueMs: r.startupRunQueueMs } : {}),
      ...(r.startupBlockedMs !== undefined ? { startupBlockedMs: r.startupBlockedMs } : {}),
    };
  });
}

/**
 * The runs as the fit sees them: `wall` keeps each failover as measured; `uncontended` takes off the
 * startup process's run-queue wait (the machine's other load; runs without the figure are kept as
 * measured).
 */
export function fitTargets(records: RunRecord[], target: 'wall' | 'uncontended'): RunRecord[] {
  if (target === 'wall') return records;
  return records.map((r) =>
    r.startupRunQueueMs === undefined
      ? r
      : { ...r, failoverMs: Math.max(0, r.failoverMs - r.startupRunQueueMs) },
  );
}
