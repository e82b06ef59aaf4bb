/**
 * `npm run predict-bench`'s plan and arithmetic (pure: no servers, no clocks): the cells (workload,
 * size, shared_buffers) as `WORKLOAD[:N]@SHARED_BUFFERS` specs, whether the calibration design of
 * a profile saw a cell, and per cell predicted against measured — the median of the runs without a
 * promote stall, their min–max, the error and whether it is within the target — for both targets:
 * wall time and uncontended time (wall less the standby startup process's run-queue wait).
 *
 * Entry points: `parseBenchCell`, `DEFAULT_BENCH_CELLS`, `QUICK_BENCH_CELLS`, `calibrationSaw`,
 * `defaultBenchProfiles`,
 * `estimateBenchRunSeconds`, `accuracyOf`, `summariseBench`, `benchTotals`, `renderBenchMarkdown`,
 * `WITHIN_PCT`, `benchCellOfCalibration`, `storedRunOfBench`, `probedProfile`, `priceBenchRun`.
 *
 * Within target: |predicted − median| ≤ 25 % of the median, or predicted inside PostgreSQL's own
 * min–max when at least three clean runs were measured (a cell whose runs spread wider than ±25 %
 * cannot be predicted closer than PostgreSQL repeats itself).
 */
import { WalsimError } from '../../common/errors.ts';
import { parseSharedBuffers } from '../../storage/shared-buffers.ts';
import { parseRelSize } from '../experiment/rel-size.ts';
import { isStalledRun, median } from '../experiment/sweep-runner.ts';
import {
  CALIBRATION_MAX_REL_PAGES,
  DEFAULT_CALIBRATION_RUNS,
  storedLabel,
  type StoredCalibration,
  type StoredCalibrationRun,
} from './design.ts';
import type { CellSpec } from '../report/records.ts';
import { markdownTable } from '../report/tables.ts';
import {
  generateBacklog,
  machineGeneratorLimits,
  type GeneratedBacklog,
} from '../generator/backlog.ts';
import { withLaterCounters, type FailoverCounts } from '../../storage/replay-counts.ts';
import type { CostProfile, MachineProbe } from '../../cost-model/profile.ts';
import { scaleProfileByProbe } from '../../cost-model/machine-scale.ts';
import { predictedSeconds } from '../predict/prediction.ts';

/**
 * Runs a cell by default: as many as `npm run calibrate` records a cell, so a bench cell's median is
 * the statistic the profile was fitted to. With 3, one run in the startup process's slow mode
 * (docs/history/benchmarks-2026-12-03.md, fifth measurement) moved a cell's median.
 */
export const DEFAULT_BENCH_RUNS = DEFAULT_CALIBRATION_RUNS;

/**
 * The backlogs (replayed at failover, made while the standby's replay is paused on one-block
 * tables made and replayed before the pause):
 * - `testA`: seed 001's Test A — one relation of NBuffers/k pages, emptied by DELETE, VACUUM
 *   truncates it (N = k);
 * - `vacuum` / `truncate`: Test B — VACUUM (after DELETE) or TRUNCATE of N one-block tables;
 * - `truncate-toast`: TRUNCATE of N tables that have a TOAST table (never written);
 * - `drop`: DROP TABLE of N one-block tables, one transaction each;
 * - `pgbench`: `pgbench -i -s N` (drop, create, COPY, VACUUM, primary keys);
 * - `mixed`: N tables, round-robin INSERT of 10 pages / DELETE + VACUUM (truncates) / TRUNCATE /
 *   DELETE of half the rows + VACUUM (prunes, no truncation);
 * - `insert` / `delete`: the row-level DML backlogs of the calibration (experiment/dml.ts): INSERT
 *   of 2,260 rows into each of N tables / DELETE of each table's 2,486 rows;
 * - `copy` / `copy-wide`: COPY of 2,260 int rows / of 900 rows with a 400-byte text into each of N
 *   tables (COPY's multi-insert: one record a page), the calibration's COPY backlogs;
 * - `gen`: the backlog the workload generator draws from seed N (scripts/generator/README.md),
 *   with the pool it draws (`gen:N`) or a given one (`gen:N@SIZE`).
 */
export const BENCH_WORKLOADS = [
  'testA',
  'vacuum',
  'truncate',
  'truncate-toast',
  'drop',
  'pgbench',
  'mixed',
  'insert',
  'delete',
  'copy',
  'copy-wide',
  'gen',
] as const;
export type BenchWorkload = (typeof BENCH_WORKLOADS)[number];

export interface BenchCell {
  /** The canonical spec, e.g. `truncate:300@1GB`, `testA:NB/64@2GB`, `pgbench:2@1GB`. */
  id: string;
  workload: BenchWorkload;
  sharedBuffers: string;
  nBuffers: number;
  /** testA: k of NB/k; pgbench: the scale; gen: the seed; every other workload: the table count. */
  n: number;
  /** testA: NBuffers/k; gen: the setup's heap pages; others: 1 page per table (pgbench: 0). */
  pages: number;
}

/**
 * Standby shared_buffers the bench accepts: 128MB to the 20GB a 24 GiB machine starts (the pool is
 * touched lazily; only its descriptors are scanned). Beyond that (the seed's 100GB) predict
 * extrapolates, and says so.
 */
export const BENCH_MIN_NBUFFERS = parseSharedBuffers('128MB').nBuffers;
export const BENCH_MAX_NBUFFERS = parseSharedBuffers('20GB').nBuffers;
const MAX_TABLES = 5000;
const MAX_PGBENCH_SCALE = 20;

const SPEC_FORMS =
  'WORKLOAD[:N]@SHARED_BUFFERS, e.g. testA:NB/64@2GB, truncate:300@1GB, truncate-toast:50@8GB, vacuum:1000@512MB, drop:500@1GB, pgbench:2@1GB, mixed:200@2GB, insert:100@128MB, delete:100@128MB, copy:100@128MB, copy-wide:100@128MB, gen:1001 (a generated seed, its own pool), gen:1001@20GB';

function refuse(text: string, why: string): WalsimError {
  return new WalsimError('invalid_input', `invalid bench cell "${text}": ${why}; ${SPEC_FORMS}`);
}

/** The backlog a `gen` cell runs: its seed's draw with the cell's pool (machine-independent). */
export function backlogOfCell(c: Pick<BenchCell, 'n' | 'sharedBuffers'>): GeneratedBacklog {
  return generateBacklog(c.n, undefined, c.sharedBuffers);
}

/** `gen:N` (the pool the seed draws, at most what this machine starts) or `gen:N@SIZE`. */
function parseGenCell(text: string, seed: string, size: string | undefined): BenchCell {
  const n = Number(seed);
  if (!/^\d+$/.test(seed) || !Number.isSafeInteger(n)) throw refuse(text, 'gen takes a seed ≥ 0');
  let pool: string;
  try {
    pool = size ?? generateBacklog(n, machineGeneratorLimits()).sharedBuffers;
  } catch (e) {
    throw refuse(text, (e as Error).message);
  }
  let nb: number;
  try {
    nb = parseSharedBuffers(pool).nBuffers;
  } catch (e) {
    throw refuse(text, (e as Error).message);
  }
  if (nb < BENCH_MIN_NBUFFERS || nb > BENCH_MAX_NBUFFERS)
    throw refuse(text, `shared_buffers ${pool} is outside 128MB–20GB`);
  const b = backlogOfCell({ n, sharedBuffers: pool });
  const pages = b.relations.reduce((a, r) => a + r.pages, 0);
  return { id: `gen:${n}@${pool}`, workload: 'gen', sharedBuffers: pool, nBuffers: nb, n, pages };
}

/** `WORKLOAD[:N]@SHARED_BUFFERS` → a cell; a clear error naming what was wrong otherwise. */
export function parseBenchCell(text: string): BenchCell {
  const g = /^gen:([^@]*)(?:@(\S+))?$/.exec(text.trim());
  if (g !== null) return parseGenCell(text, g[1]!, g[2]);
  const m = /^([a-zA-Z-]+)(?::([^@]+))?@(\S+)$/.exec(text.trim());
  if (m === null) throw refuse(text, 'not of the form WORKLOAD[:N]@SHARED_BUFFERS');
  const workload = m[1] as BenchWorkload;
  if (!BENCH_WORKLOADS.includes(workload))
    throw refuse(text, `unknown workload "${m[1]}" (one of ${BENCH_WORKLOADS.join(', ')})`);
  let sb: { nBuffers: number; text: string };
  try {
    const p = parseSharedBuffers(m[3]!);
    sb = { nBuffers: p.nBuffers, text: m[3]! };
  } catch (e) {
    throw refuse(text, (e as Error).message);
  }
  if (sb.nBuffers < BENCH_MIN_NBUFFERS || sb.nBuffers > BENCH_MAX_NBUFFERS)
    throw refuse(text, `shared_buffers ${sb.text} is outside 128MB–20GB`);
  const arg = m[2];
  const base = { workload, sharedBuffers: sb.text, nBuffers: sb.nBuffers };
  if (workload === 'testA') {
    if (arg === undefined || !/^NB\/\d+$/i.test(arg))
      throw refuse(text, 'testA takes NB/k (the relation is NBuffers/k pages)');
    // Any NB/k the test table holds (parseRelSize: its int column). Calibration keeps its own cells
    // below CALIBRATION_MAX_REL_PAGES to stay short; a bench cell is asked for by name and its ETA
    // says how long it runs (20GB NB/8, 327,680 pages: about 10 minutes a run on 13).
    let size;
    try {
      size = parseRelSize(arg, sb.nBuffers);
    } catch (e) {
      throw refuse(text, (e as Error).message);
    }
    return {
      ...base,
      id: `testA:NB/${size.divisor}@${sb.text}`,
      n: size.divisor!,
      pages: size.pages,
    };
  }
  const max = workload === 'pgbench' ? MAX_PGBENCH_SCALE : MAX_TABLES;
  const n = arg === undefined ? NaN : Number(arg);
  if (!Number.isSafeInteger(n) || n < 1 || n > max)
    throw refuse(
      text,
      `${workload} takes ${workload === 'pgbench' ? 'a scale' : 'a table count'} from 1 to ${max}`,
    );
  return { ...base, id: `${workload}:${n}@${sb.text}`, n, pages: workload === 'pgbench' ? 0 : 1 };
}

/**
 * The full bench: cells the default calibration design (Test A NB/512, NB/64, NB/8 at
 * 128MB/1GB/4GB; Test B at 50 and 300 tables at 128MB/4GB; TOAST TRUNCATE of 100 tables at
 * 128MB/1GB/4GB/6GB; INSERT and DELETE over 100 tables at 128MB) never saw — other shared_buffers
 * sizes, table counts, relation sizes and workloads — over 128MB–8GB, each workload the bench
 * targets (the calibration's own DML backlogs are not among them: the mixed cells carry row-level
 * DML).
 */
export const DEFAULT_BENCH_CELLS: readonly string[] = [
  'testA:NB/8@256MB',
  'testA:NB/32@2GB',
  'testA:NB/128@2GB',
  'testA:NB/512@8GB',
  'testA:NB/64@8GB',
  'truncate:100@2GB',
  'truncate:1000@1GB',
  'truncate:3000@256MB',
  'vacuum:1000@512MB',
  'vacuum:200@8GB',
  'truncate-toast:300@512MB',
  'truncate-toast:50@8GB',
  'drop:500@1GB',
  'drop:200@8GB',
  'pgbench:2@1GB',
  'mixed:400@2GB',
  'mixed:100@8GB',
];

/**
 * The generated seeds `npm run predict-bench` runs by default (FROM-TO): a range the default
 * calibration's seeds (design.ts `DEFAULT_CALIBRATION_SEEDS`, 1–999) never reach.
 */
export const DEFAULT_BENCH_SEEDS = '1001-1040';

/**
 * The profiles a bench on PostgreSQL `major` prices with when none is given: that major's shipped
 * calibrated pair (`pgN-calibrated-wall`, `pgN-calibrated-uncontended`) when both are shipped, else
 * 15's (a profile fitted on another major than the bench's is warned of).
 */
export function defaultBenchProfiles(
  major: number | null,
  shipped: readonly string[],
): { wall: string; uncontended: string } {
  const pair = (m: number) => ({
    wall: `pg${m}-calibrated-wall`,
    uncontended: `pg${m}-calibrated-uncontended`,
  });
  const own = major === null ? null : pair(major);
  return own !== null && shipped.includes(own.wall) && shipped.includes(own.uncontended)
    ? own
    : pair(15);
}

/** `--quick`: a handful of small cells, one of each kind of drop path, for a first look. */
export const QUICK_BENCH_CELLS: readonly string[] = [
  'truncate:100@256MB',
  'testA:NB/16@256MB',
  'truncate-toast:20@512MB',
  'drop:100@512MB',
  'mixed:40@256MB',
];

/**
 * Did a calibration with these settings run this cell (same workload, shared_buffers and table
 * count or relation size)? Workloads calibration never runs (pgbench, mixed) are never seen.
 */
export function calibrationSaw(
  cell: BenchCell,
  settings: StoredCalibration['settings'] | null,
): boolean {
  if (settings === null) return false;
  const at = (sizes: readonly string[]) =>
    sizes.some((s) => parseSharedBuffers(s).nBuffers === cell.nBuffers);
  switch (cell.workload) {
    case 'testA':
      return (
        at(settings.sizes) &&
        settings.relDivisors.includes(cell.n) &&
        cell.pages <= CALIBRATION_MAX_REL_PAGES
      );
    case 'vacuum':
    case 'truncate':
      return at(settings.testBSizes) && settings.tables.includes(cell.n);
    case 'drop':
      return settings.testBDrop && at(settings.testBSizes) && settings.tables.includes(cell.n);
    case 'truncate-toast':
      return at(settings.toastSizes) && settings.toastTables === cell.n;
    case 'insert':
    case 'delete':
      return (
        settings.dml !== null && at([settings.dml.sharedBuffers]) && settings.dml.tables === cell.n
      );
    case 'gen':
      return (settings.generated?.seeds ?? []).includes(cell.n);
    case 'copy':
    case 'copy-wide':
      return (
        settings.copy !== null &&
        at([settings.copy.sharedBuffers]) &&
        settings.copy.tables === cell.n
      );
    default:
      return false;
  }
}

/**
 * A rough wall time of one run on this kind of machine, for the plan's budget and the ETA only:
 * a fresh pair (initdb, base backup, two starts, promotion, removal), the statements on the
 * primary, rows written, and the replay at failover.
 */
export function estimateBenchRunSeconds(c: BenchCell): number {
  const pair = 9;
  switch (c.workload) {
    case 'testA':
      return pair + c.pages * 2e-3;
    case 'pgbench':
      return pair + c.n * 12;
    case 'truncate-toast':
      return pair + c.n * 0.03 + c.n * 3 * c.nBuffers * 5e-9;
    case 'mixed':
      return pair + c.n * 0.04;
    case 'insert':
    case 'delete':
    case 'copy':
      return pair + c.n * 0.06;
    case 'copy-wide':
      return pair + c.n * 0.1;
    case 'gen':
      return pair + 3 + c.pages * 3e-3;
    default:
      return pair + c.n * 0.025;
  }
}

/** One verified promotion of a cell (what `runBenchCell` returns; stored in results.json). */
export interface BenchRun {
  cell: string;
  run: number;
  /** predict with the wall-time profile / the uncontended profile: seconds to writable. */
  predictedWallS: number;
  predictedUncontendedS: number;
  /** resume (clock_timestamp()) → "database system is ready to accept connections". */
  measuredWallS: number;
  /** The standby startup process's run-queue wait over the failover (schedstat), or null. */
  runQueueS: number | null;
  startupCpuS: number | null;
  startupBlockedS: number | null;
  /** The promote request waited for wal_retrieve_retry_interval (verify's flag). */
  stall: boolean;
  phases: { replayS: number | null; endOfRecoveryS: number | null; openForWritesS: number | null };
  predictedPhasesWall: { replayS: number; endOfRecoveryS: number; openForWritesS: number };
  records: number;
  walBytes: number;
  /** The unreplayed range predict read, [from, to) (absent in files from before it was kept). */
  range?: { from: string; to: string };
  dropsFullScan: number;
  dropsLookup: number;
  /** predict's counts of the range and its records without a constant of their own (repricing). */
  counts: FailoverCounts;
  genericRecords: number;
  dominates: string;
  loadAvg1: number;
  cpuPressure: number | null;
  at: string;
  /**
   * The machine probe run beside the standby's data directory before pricing, as `npm run predict`
   * runs it (predict/probe.ts); null: skipped or failed (absent in files from before the probe).
   * When it ran and a profile stores its calibration machine's probe, that profile's prediction
   * above is scaled by it (cost-model/machine-scale.ts), as predict prints it.
   */
  probe?: MachineProbe | null;
  /** The same counts priced with the profiles as calibrated (no probe scaling). */
  unprobed?: { wallS: number; uncontendedS: number };
  /**
   * The buffer descriptor array's 4 KiB pages and how many the standby's startup process had not
   * mapped before the promotion (its first full scan faults each in); null: not readable.
   */
  descriptorPages?: { pages: number; unmapped: number } | null;
}

/**
 * A stored run's counts as predict counts now: counters added since the file was written read as
 * 0 (withLaterCounters), except the descriptor pages the first full scan maps, which a run that
 * recorded its startup process's page map before the promotion carries (`descriptorPages`): the
 * unmapped pages when its range had a full scan (predict reads the same page map at that moment).
 */
export function storedRunCounts(
  r: Pick<BenchRun, 'counts' | 'dropsFullScan' | 'descriptorPages'>,
): FailoverCounts {
  const counted = (r.counts.replay as Partial<FailoverCounts['replay']>).descriptorPagesMapped;
  const fromPageMap = r.dropsFullScan > 0 ? (r.descriptorPages?.unmapped ?? 0) : 0;
  const replay = withLaterCounters(r.counts.replay);
  return {
    ...r.counts,
    replay: { ...replay, descriptorPagesMapped: counted ?? fromPageMap },
  };
}

/**
 * The profile a run's prediction is priced with: scaled by the run's probe when the run stored one
 * and the profile stores its calibration machine's probe (what `npm run predict` does), else as
 * calibrated.
 */
export function probedProfile(
  profile: CostProfile,
  probe: MachineProbe | null | undefined,
): CostProfile {
  const calibrated = profile.machineProbe ?? null;
  if (probe === undefined || probe === null || calibrated === null) return profile;
  return scaleProfileByProbe(profile, calibrated, probe).profile;
}

/**
 * A run's predictions from its stored counts: each profile scaled by the run's probe (as predict
 * prints them), and unscaled (`unprobed`).
 */
export function priceBenchRun(
  r: Pick<BenchRun, 'counts' | 'genericRecords' | 'probe'>,
  nBuffers: number,
  wall: CostProfile,
  uncontended: CostProfile,
): Pick<BenchRun, 'predictedWallS' | 'predictedUncontendedS' | 'unprobed'> {
  const s = (p: CostProfile) => predictedSeconds(r.counts, r.genericRecords, nBuffers, p).writableS;
  return {
    predictedWallS: s(probedProfile(wall, r.probe)),
    predictedUncontendedS: s(probedProfile(uncontended, r.probe)),
    unprobed: { wallS: s(wall), uncontendedS: s(uncontended) },
  };
}

export const WITHIN_PCT = 25;

export interface TargetAccuracy {
  predictedS: number;
  runs: number;
  medianS: number;
  minS: number;
  maxS: number;
  /** (predicted − median) / median, percent. */
  errorPct: number;
  within: boolean;
  /** Which rule put it within (or null when it is not). */
  by: '±25%' | 'min–max' | null;
}

/** Predicted (median over the runs' predictions) against the measured runs' median and min–max. */
export function accuracyOf(
  predicted: readonly number[],
  measured: readonly number[],
): TargetAccuracy {
  const ms = measured.filter(Number.isFinite);
  const p = median(predicted.filter(Number.isFinite));
  const med = median(ms);
  const minS = ms.length ? Math.min(...ms) : NaN;
  const maxS = ms.length ? Math.max(...ms) : NaN;
  const errorPct = ((p - med) / med) * 100;
  const byPct = Number.isFinite(errorPct) && Math.abs(errorPct) <= WITHIN_PCT;
  const byRange = ms.length >= 3 && p >= minS && p <= maxS;
  return {
    predictedS: p,
    runs: ms.length,
    medianS: med,
    minS,
    maxS,
    errorPct,
    within: byPct || byRange,
    by: byPct ? '±25%' : byRange ? 'min–max' : null,
  };
}

export interface BenchCellSummary {
  cell: BenchCell;
  /** The wall profile's calibration ran this cell (not a held-out cell). */
  seen: boolean;
  runs: number;
  stalls: number;
  wall: TargetAccuracy;
  uncontended: TargetAccuracy;
  /** Medians over the clean runs. */
  runQueueS: number;
  loadAvg1: number;
  cpuPressure: number;
  records: number;
  dropsFullScan: number;
  dropsLookup: number;
  dominates: string;
  /** Both targets priced without the machine probe; null when a run has no unscaled price. */
  unprobed: { wall: TargetAccuracy; uncontended: TargetAccuracy } | null;
}

/** Per cell in plan order: stalled runs left out (all kept if every run stalled), both targets. */
export function summariseBench(
  cells: readonly BenchCell[],
  runs: readonly BenchRun[],
  seen: (c: BenchCell) => boolean,
): BenchCellSummary[] {
  return cells.map((cell) => {
    const all = runs.filter((r) => r.cell === cell.id);
    const stalled = all.map((r) =>
      isStalledRun(
        r.measuredWallS * 1000,
        r.stall,
        all.filter((o) => o !== r).map((o) => o.measuredWallS * 1000),
      ),
    );
    const clean = all.filter((_, i) => !stalled[i]);
    const rs = clean.length > 0 ? clean : all;
    const med = (f: (r: BenchRun) => number | null) =>
      median(rs.map(f).filter((v): v is number => v !== null && Number.isFinite(v)));
    const wallMeasured = rs.map((r) => r.measuredWallS);
    const uncontendedMeasured = rs.map((r) =>
      r.runQueueS === null ? NaN : r.measuredWallS - r.runQueueS,
    );
    const unprobed = rs.length > 0 && rs.every((r) => r.unprobed !== undefined);
    return {
      cell,
      seen: seen(cell),
      runs: all.length,
      stalls: all.length - clean.length,
      wall: accuracyOf(
        rs.map((r) => r.predictedWallS),
        wallMeasured,
      ),
      uncontended: accuracyOf(
        rs.map((r) => r.predictedUncontendedS),
        uncontendedMeasured,
      ),
      unprobed: unprobed
        ? {
            wall: accuracyOf(
              rs.map((r) => r.unprobed!.wallS),
              wallMeasured,
            ),
            uncontended: accuracyOf(
              rs.map((r) => r.unprobed!.uncontendedS),
              uncontendedMeasured,
            ),
          }
        : null,
      runQueueS: med((r) => r.runQueueS),
      loadAvg1: med((r) => r.loadAvg1),
      cpuPressure: med((r) => r.cpuPressure),
      records: med((r) => r.records),
      dropsFullScan: med((r) => r.dropsFullScan),
      dropsLookup: med((r) => r.dropsLookup),
      dominates: rs[0]?.dominates ?? '',
    };
  });
}

export interface BenchTotals {
  /** Cells the profile's calibration never saw, with at least one measured run. */
  unseen: number;
  wallWithin: number;
  uncontendedWithin: number;
  /** Unseen cells with an uncontended figure (schedstat readable). */
  uncontendedCells: number;
  medianAbsErrorPct: { wall: number; uncontended: number };
  /** The same unseen cells priced without the machine probe (cells with an unscaled price). */
  unprobed: { cells: number; wallWithin: number; uncontendedWithin: number };
}

export function benchTotals(s: readonly BenchCellSummary[]): BenchTotals {
  const unseen = s.filter((c) => !c.seen && c.wall.runs > 0);
  const unc = unseen.filter((c) => c.uncontended.runs > 0);
  return {
    unseen: unseen.length,
    wallWithin: unseen.filter((c) => c.wall.within).length,
    uncontendedWithin: unc.filter((c) => c.uncontended.within).length,
    uncontendedCells: unc.length,
    medianAbsErrorPct: {
      wall: median(unseen.map((c) => Math.abs(c.wall.errorPct))),
      uncontended: median(unc.map((c) => Math.abs(c.uncontended.errorPct))),
    },
    unprobed: {
      cells: unseen.filter((c) => c.unprobed !== null).length,
      wallWithin: unseen.filter((c) => c.unprobed?.wall.within === true).length,
      uncontendedWithin: unseen.filter((c) => c.unprobed?.uncontended.within === true).length,
    },
  };
}

const sec = (x: number) => (Number.isFinite(x) ? x.toFixed(3) : 'n/a');
const pct = (x: number) => (Number.isFinite(x) ? `${x >= 0 ? '+' : ''}${x.toFixed(1)}%` : 'n/a');
const measuredCol = (a: TargetAccuracy) =>
  a.runs === 0 ? 'n/a' : `${sec(a.medianS)} (${sec(a.minS)}–${sec(a.maxS)})`;
const withinCol = (a: TargetAccuracy) => (a.runs === 0 ? 'n/a' : a.within ? `yes (${a.by})` : 'no');

/** The accuracy table and its totals (Markdown), as printed and written to accuracy.md. */
export function renderBenchMarkdown(
  s: readonly BenchCellSummary[],
  meta: { wallProfile: string; uncontendedProfile: string },
): string {
  const t = benchTotals(s);
  const rows = s.map((c) => [
    c.cell.id,
    c.seen ? 'seen' : 'unseen',
    `${c.runs}${c.stalls ? ` (${c.stalls} stalled)` : ''}`,
    Number.isFinite(c.records) ? String(Math.round(c.records)) : 'n/a',
    `${Number.isFinite(c.dropsFullScan) ? c.dropsFullScan : 'n/a'} / ${Number.isFinite(c.dropsLookup) ? c.dropsLookup : 'n/a'}`,
    sec(c.wall.predictedS),
    measuredCol(c.wall),
    pct(c.wall.errorPct),
    withinCol(c.wall),
    sec(c.uncontended.predictedS),
    measuredCol(c.uncontended),
    pct(c.uncontended.errorPct),
    withinCol(c.uncontended),
    sec(c.runQueueS),
    `${Number.isFinite(c.loadAvg1) ? c.loadAvg1.toFixed(1) : 'n/a'} / ${Number.isFinite(c.cpuPressure) ? `${Math.round(c.cpuPressure * 100)}%` : 'n/a'}`,
  ]);
  return [
    markdownTable(
      [
        'cell',
        'calibration',
        'runs',
        'records',
        'drops full / lookup',
        'wall: predicted s',
        'measured s (min–max)',
        'error',
        'within',
        'uncontended: predicted s',
        'measured s (min–max)',
        'error',
        'within',
        'run-queue wait s',
        'load / CPU pressure',
      ],
      rows,
      ['l', 'l', 'r', 'r', 'r', 'r', 'r', 'r', 'l', 'r', 'r', 'r', 'l', 'r', 'r'],
    ),
    '',
    `Profiles: wall ${meta.wallProfile}; uncontended ${meta.uncontendedProfile}. Within target: |error| ≤ ${WITHIN_PCT}% of the median, or predicted inside PostgreSQL's min–max over ≥ 3 clean runs.`,
    `Unseen cells within target: wall ${t.wallWithin} of ${t.unseen} (median |error| ${pct(t.medianAbsErrorPct.wall).replace('+', '')}); uncontended ${t.uncontendedWithin} of ${t.uncontendedCells} (median |error| ${pct(t.medianAbsErrorPct.uncontended).replace('+', '')}).`,
    ...(t.unprobed.cells > 0
      ? [
          `Priced without the machine probe (the profiles as calibrated), the same cells: wall ${t.unprobed.wallWithin} of ${t.unprobed.cells}, uncontended ${t.unprobed.uncontendedWithin} of ${t.unprobed.cells}.`,
        ]
      : []),
  ].join('\n');
}

/**
 * A calibration cell (scripts/calibration/design.ts planCalibration) as a bench cell: `npm run
 * calibrate` measures its PostgreSQL runs with this module's runner, so that the fit sees the
 * counts predict reads from the real WAL — the counts every prediction is priced from.
 */
export function benchCellOfCalibration(c: CellSpec): BenchCell {
  if (c.variant === 'generated') return parseBenchCell(`gen:${c.seed}@${c.sharedBuffers}`);
  const what = c.kind === 'threshold' ? `testA:NB/${c.relDivisor}` : `${c.variant}:${c.tables}`;
  return parseBenchCell(`${what}@${c.sharedBuffers}`);
}

/** A bench run as `npm run calibrate` stores it (fit.records), labelled as its calibration cell. */
export function storedRunOfBench(c: CellSpec, r: BenchRun, warmup: boolean): StoredCalibrationRun {
  const ms = (s: number | null) => (s === null ? null : s * 1000);
  return {
    label: storedLabel(c),
    run: r.run,
    ...(warmup ? { warmup: true } : {}),
    failoverMs: r.measuredWallS * 1000,
    replayMs: ms(r.phases.replayS),
    endOfRecoveryMs: ms(r.phases.endOfRecoveryS),
    openForWritesMs: ms(r.phases.openForWritesS),
    stall: r.stall,
    loadAvg1: r.loadAvg1,
    ...(r.cpuPressure !== null ? { cpuPressure: r.cpuPressure } : {}),
    ...(r.startupCpuS !== null ? { startupCpuMs: r.startupCpuS * 1000 } : {}),
    ...(r.runQueueS !== null ? { startupRunQueueMs: r.runQueueS * 1000 } : {}),
    ...(r.startupBlockedS !== null ? { startupBlockedMs: r.startupBlockedS * 1000 } : {}),
    walBytes: r.walBytes,
    recordsReplayed: r.records,
    ...(r.probe !== undefined ? { probe: r.probe } : {}),
  };
}
