/**
 * The results format of the sweeps, calibrate and predict-bench: a cell (which experiment, Test A
 * threshold or Test B multi; which engine; the standby's shared_buffers, the drop strategy, the
 * variant and the relation sizes), one record per run of it and the summary of its runs. A leaf:
 * the runner that writes records (experiment/), the reports that read them (report/) and the
 * in-process counter share it without importing each other.
 */
import type { DropStrategy } from '../../server/settings.ts';
import type { FailoverCounts } from '../../storage/replay-counts.ts';

export type SweepKind = 'threshold' | 'multi';
/**
 * `truncate-toast`: TRUNCATE of tables that have a TOAST table (three relfilenodes dropped each).
 * `drop`: DROP TABLE of each one-block table in its own transaction (Test B's tables, no file
 * created), and `insert` / `delete`: row-level DML backlogs (INSERT of 2,260 rows into each table /
 * DELETE of its 2,486 rows), which only `npm run calibrate` plans (through predict-bench's runner,
 * not the sweeps).
 */
export type Variant =
  | 'vacuum'
  | 'truncate'
  | 'truncate-toast'
  | 'drop'
  | 'insert'
  | 'delete'
  | 'copy'
  | 'copy-wide'
  | 'generated';

/** The row-level backlogs (experiment/dml.ts): measured through predict-bench's runner only. */
export const ROW_BACKLOG_VARIANTS: readonly Variant[] = ['insert', 'delete', 'copy', 'copy-wide'];
/**
 * The variants measured through predict-bench's runner only (calibration/cell-run.ts): the row
 * backlogs and Test B's DROP TABLE, for which the sweeps' steps (experiment/steps.ts) have no step.
 */
export const BENCH_RUNNER_VARIANTS: readonly Variant[] = [...ROW_BACKLOG_VARIANTS, 'drop'];
/** Who runs the cell: walsim, or a real PostgreSQL primary + standby (scripts/postgres/). */
export type Engine = 'walsim' | 'postgres';

export interface CellSpec {
  kind: SweepKind;
  engine: Engine;
  /** Standby shared_buffers as given (e.g. `100GB`) and in buffers. */
  sharedBuffers: string;
  nBuffers: number;
  strategy: DropStrategy;
  forceOptimized: boolean;
  variant: Variant;
  /** Test A: the relation size `NB/k`, its k and pages. Test B: null, 1 page per table. */
  relSize: string | null;
  relDivisor: number | null;
  pagesPerTable: number;
  tables: number;
  /**
   * PostgreSQL cells of `--pg-version`: the major run (the npm registry's build, scripts/postgres/
   * pg-install.ts); absent: the default binaries (Debian's 15, or `--pg-bin`).
   */
  pgVersion?: number;
  /** `generated` cells: the workload generator's seed (scripts/generator/), drawn at this pool. */
  seed?: number;
}

/** The modeled columns of a run (cost-model), from its exact counts. */
export interface ModeledColumns {
  /** The cost profile's name. */
  modelProfile: string;
  /** Modeled PostgreSQL seconds, resume → read-write, and per phase. */
  modeledS: number;
  /** As the profile's reference would have measured them (its promotion poll), or null. */
  modeledPolledS: number | null;
  modeledReplayS: number;
  modeledEndOfRecoveryS: number;
  modeledOpenForWritesS: number;
  /** Of the replay phase: seconds inside buffer drops. */
  modeledDropS: number;
}

/** A run without modeled columns (the PostgreSQL engine): measured fields only. */
export type MeasuredRunRecord = Omit<RunRecord, keyof ModeledColumns | 'mode' | 'counts'>;

export interface RunRecord extends CellSpec, ModeledColumns {
  /** 'measured': a real cluster ran the cell; 'model-only': counts in-process, measured fields NaN. */
  mode: 'measured' | 'model-only';
  run: number;
  failoverMs: number;
  replayMs: number | null;
  endOfRecoveryMs: number | null;
  openForWritesMs: number | null;
  recordsReplayed: number;
  /** Busy time inside buffer drops during the failover (the part the two paths differ in), ms. */
  dropMs: number;
  dropsFullScan: number;
  dropsCachedLookup: number;
  scanned: number;
  probes: number;
  invalidated: number;
  promoted: boolean;
  resumeAt: string;
  promotedAt: string;
  /** Wall time of each step of this run, ms (cluster start included as `start`). */
  stepMs: Record<string, number>;
  /**
   * PostgreSQL engine only (drop counters are NaN there: PostgreSQL does not count them): the
   * seed's own figure (pg_ctl promote -w), WAL bytes replayed (pg_waldump), whether the promote
   * request stalled in the streaming retry loop (such runs are flagged and left out of fits).
   */
  seedMethodMs?: number;
  walBytes?: number;
  /** PostgreSQL engine only: pg_waldump's record count per `rmgr/type` over the replayed WAL. */
  recordsByType?: Record<string, number>;
  stall?: boolean;
  /** The failover's exact event counts (what the modeled columns are computed from); null for the PostgreSQL engine. */
  counts: FailoverCounts | null;
  /**
   * An unrecorded warm-up run (`runSweep`'s `warmupRuns`): kept in the records so its figure stays
   * visible, left out of every summary, median and fit.
   */
  warmup?: boolean;
  /**
   * The run started from copies of its cell's loaded template (`npm run sweep -- threshold
   * --template`, experiment/loaded-template.ts): no create or insert step of its own; the run that
   * built the template has the build's time as `stepMs.template`.
   */
  fromTemplate?: boolean;
  /** The machine's 1-minute load average when the run ended (os.loadavg): other work competing for the CPUs. */
  loadAvg1?: number;
  /**
   * Share of the run's wall time during which at least one task waited for a CPU (Linux pressure
   * stall information, /proc/pressure/cpu "some"; absent where the kernel has none). High on a
   * machine busy with other work: the run's seconds then measure the machine, not the engine.
   */
  cpuPressure?: number;
  /** PostgreSQL: the startup process's CPU, run-queue wait and blocked time (engines/pg-engine.ts), ms. */
  startupCpuMs?: number;
  startupRunQueueMs?: number;
  startupBlockedMs?: number;
}

export interface CellSummary extends CellSpec, ModeledColumns {
  runs: number;
  failoverMsMean: number;
  /** Median over the runs without a promote stall (all runs if every one stalled). */
  failoverMsMedian: number;
  /** Runs whose promote request stalled (PostgreSQL engine). */
  stalls: number;
  /** walsim: modeled PostgreSQL seconds (cost profile) of the cell, ms, when a model ran. */
  modeledMsMean?: number;
  /** PostgreSQL engine: median of the seed's pg_ctl promote -w figure over the same runs. */
  seedMethodMsMedian?: number;
  failoverMsMin: number;
  failoverMsMax: number;
  replayMsMean: number | null;
  dropMsMean: number;
  dropsFullScan: number;
  dropsCachedLookup: number;
  scanned: number;
  probes: number;
  invalidated: number;
}

export interface SweepProgress {
  done: number;
  total: number;
  /** Estimated seconds done / total (estimateCellSeconds), for an ETA weighted by cost. */
  weightDone: number;
  weightTotal: number;
  current: string;
  lastRecord: RunRecord | null;
}

/**
 * A published figure beside a sweep's cells (seed 001's Test A and Test B tables): the seed's
 * seconds for a variant at a shared_buffers (Test A: and a relation of NBuffers/`relDivisor`
 * pages), on its "master" (pre-14, full scan) or "patched" (14's lookup) build.
 */
export interface PublishedPoint {
  variant: Variant;
  sharedBuffers: string;
  nBuffers: number;
  /** Test A only: the k of NB/k and the relation's pages. */
  relDivisor?: number;
  pages?: number;
  build: 'master' | 'patched';
  seconds: number;
}
