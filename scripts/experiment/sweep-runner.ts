/**
 * Seed 001's two experiments as sweeps: every cell (shared_buffers × relation size or variant ×
 * drop strategy) runs the whole step procedure on a fresh cluster, `runs` times, and the runs are
 * averaged.
 *
 * Entry points: `runSweep`, `runCell`, `summarise`; the plan (`planThreshold` for Test A, rel.sh,
 * `planMulti` for Test B, test.sh, `estimateCellSeconds`) is plan.ts's, re-exported here.
 *
 * Test A: one relation of NBuffers/k pages is created, filled, emptied by DELETE and truncated by a
 * VACUUM while the standby's replay is paused; the failover (resume → promoted) replays that one
 * truncation. `cached-lookup` runs with the optimized path forced (the seed's Test-for-threshold
 * patch) against `full-scan` (pre-PG14, "master").
 * Test B: 1000 one-block tables, VACUUM (after DELETE) or TRUNCATE of each in its own transaction
 * while paused: 1000 drops at failover.
 *
 * Runs are interleaved (run 1 of every cell, then run 2, …) so slow drift of the machine's load
 * spreads over all cells instead of biasing one.
 */
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { fail } from '../../common/assert.ts';
import type { ModeledFailover } from '../../cost-model/model.ts';
import { price } from '../../cost-model/price.ts';
import type { CostProfile } from '../../cost-model/profile.ts';
import { countCellsInProcess } from './in-process.ts';
import { type LoadedTemplates, TEMPLATE_STEPS, templateApplies } from './loaded-template.ts';
import {
  runStep,
  StepSession,
  type AnyEngine,
  type AnyFailover,
  type ResumeResult,
  type StepName,
} from './steps.ts';
import { ENGINE_NAMES, type EngineKind } from '../engines/engine.ts';
import {
  BENCH_RUNNER_VARIANTS,
  type CellSpec,
  type CellSummary,
  type Engine,
  type ModeledColumns,
  type RunRecord,
  type SweepKind,
  type SweepProgress,
  type Variant,
} from '../report/records.ts';
import { cellKey, cellLabel, estimateCellSeconds } from './plan.ts';
import { WALSIM_ENGINE } from '../engines/walsim-engine.ts';
import { PG_ENGINE } from '../engines/pg-engine.ts';

export type { CellSpec, Engine, SweepKind, Variant };
export { cellKey, cellLabel, estimateCellSeconds, planMulti, planThreshold } from './plan.ts';
export const ENGINES: readonly Engine[] = ENGINE_NAMES;
const ENGINE_KINDS: Record<Engine, EngineKind<AnyFailover>> = {
  walsim: WALSIM_ENGINE,
  postgres: PG_ENGINE,
};

/** The modeled columns of a run that was measured only (real PostgreSQL, stored calibration runs). */
export const NO_MODEL: ModeledColumns & Pick<RunRecord, 'mode' | 'counts'> = {
  mode: 'measured',
  counts: null,
  modelProfile: '',
  modeledS: NaN,
  modeledPolledS: null,
  modeledReplayS: NaN,
  modeledEndOfRecoveryS: NaN,
  modeledOpenForWritesS: NaN,
  modeledDropS: NaN,
};

export function modeledColumns(m: ModeledFailover): ModeledColumns {
  return {
    modelProfile: m.profile,
    modeledS: m.failoverS,
    modeledPolledS: m.polledS,
    modeledReplayS: m.phases.replayS,
    modeledEndOfRecoveryS: m.phases.endOfRecoveryS,
    modeledOpenForWritesS: m.phases.openForWritesS,
    modeledDropS: m.replay.dropsS,
  };
}

export interface SweepSettings {
  primarySharedBuffers: string;
  thresholdDivisor: number;
  /** Where the fresh clusters live (each removed after its run). */
  workDir: string;
  waitSeconds: number;
  /** Standbys streaming from the primary; the first is measured, the others are extra walsenders. */
  standbys?: number;
  /** PostgreSQL engine: `--pg-bin`, `--pg-version`. */
  pgBin?: string;
  pgVersion?: number;
  /** The cost profile of the modeled columns. */
  profile: CostProfile;
  /**
   * `--template`: Test A's PostgreSQL runs start from copies of their cell's loaded primary, built
   * once (loaded-template.ts); the caller removes the templates when the sweep ends.
   */
  templates?: LoadedTemplates;
}

export const DEFAULT_SHARED_BUFFERS = ['128MB', '1GB', '20GB', '100GB'];
export const DEFAULT_REL_DIVISORS = [512, 256, 128, 64, 32, 16, 8];

/** The seed's steps of a cell: Test A's (rel.sh) or Test B's (test.sh), VACUUM or TRUNCATE. */
function cellSteps(cell: CellSpec): StepName[] {
  const drop = cell.variant === 'vacuum' ? 'vacuum' : 'truncate';
  return [
    'create',
    'insert',
    ...(drop === 'vacuum' ? ['delete' as const] : []),
    'pause',
    drop,
    'stop',
    'resume',
  ];
}

/**
 * The procedure of one run on a fresh cluster of the cell's engine, in its own directory under
 * `workDir`: the same steps (steps.ts) for every engine, then the failover as a RunRecord; the
 * cluster is stopped (immediate) and removed whatever happens. With `s.templates` a Test A
 * PostgreSQL run starts from copies of its cell's loaded template instead, after the steps the
 * template ran (loaded-template.ts). `beforeResume`, when given, runs after the stop step with the
 * paused standby up (a test attaches its observer of the replay).
 */
export async function runCell(
  cell: CellSpec,
  run: number,
  s: SweepSettings,
  beforeResume?: (engine: AnyEngine) => Promise<void>,
): Promise<RunRecord> {
  // The steps below are Test A's and Test B's VACUUM / TRUNCATE; the DML and DROP TABLE backlogs
  // are predict-bench's (calibration/cell-run.ts).
  if (BENCH_RUNNER_VARIANTS.includes(cell.variant))
    fail(`the ${cell.variant} backlog runs through npm run calibrate --counts wal, not a sweep`);
  const kind = ENGINE_KINDS[cell.engine];
  fs.mkdirSync(s.workDir, { recursive: true });
  fs.chmodSync(s.workDir, 0o755); // PostgreSQL's OS user must reach the cluster directories
  const dir = fs.mkdtempSync(
    path.join(s.workDir, cell.engine === 'postgres' ? 'pg-cell-' : 'cell-'),
  );
  const stepMs: Record<string, number> = {};
  try {
    const templated = s.templates !== undefined && templateApplies(cell);
    const engine = await startRunCluster(dir, cell, s, stepMs);
    const workload = cell.kind === 'threshold' ? 'rel' : 'multi';
    const session = new StepSession(engine);
    let resume: ResumeResult | null = null;
    try {
      for (const step of cellSteps(cell)) {
        if (templated && TEMPLATE_STEPS.includes(step)) continue;
        if (step === 'resume') await beforeResume?.(engine);
        const t = performance.now();
        const r = await runStep(step, {
          clusterDir: dir,
          engine,
          workload,
          session,
          tables: cell.tables,
          waitSeconds: s.waitSeconds,
          toast: cell.variant === 'truncate-toast',
          profile: s.profile,
          size: cell.kind === 'threshold' ? String(cell.pagesPerTable) : undefined,
        });
        stepMs[step] = performance.now() - t;
        if (step === 'resume') resume = r as ResumeResult;
      }
    } finally {
      await session.close();
      await engine.close();
    }
    return {
      ...runRecordOf(cell, run, stepMs, resume!),
      ...(templated ? { fromTemplate: true } : {}),
    };
  } finally {
    await kind.destroyCluster(dir);
  }
}

/**
 * A run's pair in `dir`: a fresh cluster of the cell's engine, or, with `--template` for a cell
 * it applies to, copies of the cell's loaded template (built by this run if it is the first).
 * Times `start` (and `template`, the build, on the run that built it) into `stepMs`.
 */
async function startRunCluster(
  dir: string,
  cell: CellSpec,
  s: SweepSettings,
  stepMs: Record<string, number>,
): Promise<AnyEngine> {
  const t = performance.now();
  const cluster = {
    sharedBuffers: cell.sharedBuffers,
    primarySharedBuffers: s.primarySharedBuffers,
    dropStrategy: cell.strategy,
    forceOptimized: cell.forceOptimized,
    thresholdDivisor: s.thresholdDivisor,
    standbys: s.standbys ?? 1,
    pgBin: s.pgBin,
    // A walsim cell follows its own major only; a PostgreSQL cell falls back to --pg-version.
    pgVersion: cell.engine === 'walsim' ? cell.pgVersion : (cell.pgVersion ?? s.pgVersion),
  };
  if (s.templates === undefined || !templateApplies(cell)) {
    const engine = await ENGINE_KINDS[cell.engine].createCluster(dir, cluster);
    stepMs.start = performance.now() - t;
    return engine;
  }
  const started = await s.templates.startRun(dir, cell, {
    cluster,
    waitSeconds: s.waitSeconds,
    profile: s.profile,
  });
  if (started.buildMs !== null) stepMs.template = started.buildMs;
  stepMs.start = performance.now() - t - (started.buildMs ?? 0);
  return started.engine;
}

/** One run's record: what the resume step measured; walsim's counts and their modeled columns. */
function runRecordOf(
  cell: CellSpec,
  run: number,
  stepMs: Record<string, number>,
  r: ResumeResult,
): RunRecord {
  const measured = {
    ...cell,
    run,
    failoverMs: r.failoverMs,
    replayMs: r.phases.replayMs,
    endOfRecoveryMs: r.phases.endOfRecoveryMs,
    openForWritesMs: r.phases.openForWritesMs,
    recordsReplayed: r.recordsReplayed,
    promoted: r.promoted,
    resumeAt: r.resumeAt,
    promotedAt: r.promotedAt,
    stepMs,
  };
  if (r.engine === 'postgres') {
    // PostgreSQL measures real seconds and does not count its drops; the model prices walsim's counts, so its columns stay empty.
    return {
      ...measured,
      ...NO_MODEL,
      dropMs: NaN,
      dropsFullScan: NaN,
      dropsCachedLookup: NaN,
      scanned: NaN,
      probes: NaN,
      invalidated: NaN,
      seedMethodMs: r.seedMethod.ms,
      walBytes: r.waldump?.total.combinedBytes ?? NaN,
      recordsByType: Object.fromEntries(
        (r.waldump?.rows ?? []).map((w) => [`${w.rmgr}/${w.type}`, w.count]),
      ),
      stall: r.stall,
      ...(r.startupSched === null
        ? {}
        : {
            startupCpuMs: r.startupSched.cpuMs,
            startupRunQueueMs: r.startupSched.runQueueMs,
            startupBlockedMs: r.startupSched.blockedMs,
          }),
    };
  }
  return {
    ...measured,
    mode: 'measured',
    ...modeledColumns(r.model),
    counts: r.report.counts,
    dropMs: r.drop.ms,
    dropsFullScan: r.drop.drops['full-scan'],
    dropsCachedLookup: r.drop.drops['cached-lookup'],
    scanned: r.drop.scanned,
    probes: r.drop.probes,
    invalidated: r.drop.invalidated,
  };
}

/**
 * A PostgreSQL run whose promote request slept out `wal_retrieve_retry_interval` (5 s): flagged by
 * the resume step when the request was noticed late, or — when the sleep came before replay logged
 * the end of WAL, which the flag cannot see — a run at least STALL_OUTLIER_MS slower than the
 * fastest other run of its cell (warm-up runs count as references) and at least twice as slow.
 * Against the fastest run, not the median: a real calibration had two of three runs of a 45 ms cell
 * stall (5,085 and 5,090 ms), which a median of the others cannot see; a real 4GB run took 5,045 ms
 * where the other two took 89 and 53. "Twice as slow" keeps a long failover's ordinary spread (a
 * 60 s cell 4 s slower) from counting.
 */
export const STALL_OUTLIER_MS = 4000;
export function isStalled(r: RunRecord, cellRuns: readonly RunRecord[]): boolean {
  if (r.engine !== 'postgres') return false;
  return isStalledRun(
    r.failoverMs,
    r.stall === true,
    cellRuns.filter((o) => o !== r).map((o) => o.failoverMs),
  );
}

/** The rule of `isStalled` on plain figures: flagged, or an outlier against the fastest other run. */
export function isStalledRun(ms: number, flagged: boolean, othersMs: readonly number[]): boolean {
  if (flagged) return true;
  const others = othersMs.filter(Number.isFinite);
  if (others.length === 0) return false;
  const fastest = Math.min(...others);
  return ms - fastest >= STALL_OUTLIER_MS && ms >= 2 * fastest;
}

export function median(xs: number[]): number {
  if (xs.length === 0) return NaN;
  const s = [...xs].sort((a, b) => a - b);
  const m = s.length >> 1;
  return s.length % 2 ? s[m]! : (s[m - 1]! + s[m]!) / 2;
}

/** Average the runs of each cell, in plan order; warm-up runs are left out. */
export function summarise(plan: CellSpec[], records: RunRecord[]): CellSummary[] {
  return plan.map((cell) => {
    const key = cellKey(cell);
    const all = records.filter((r) => cellKey(r) === key);
    const rs = all.filter((r) => r.warmup !== true);
    const mean = (f: (r: RunRecord) => number) => rs.reduce((a, r) => a + f(r), 0) / rs.length;
    const replays = rs.map((r) => r.replayMs).filter((v): v is number => v !== null);
    const clean = rs.filter((r) => !isStalled(r, all));
    const modeled = (f: (r: RunRecord) => number) => (rs.length ? mean(f) : NaN);
    const polled = rs.map((r) => r.modeledPolledS).filter((v): v is number => v !== null);
    return {
      ...cell,
      runs: rs.length,
      modelProfile: rs[0]?.modelProfile ?? '',
      modeledS: modeled((r) => r.modeledS),
      modeledPolledS: polled.length ? polled.reduce((a, b) => a + b, 0) / polled.length : null,
      modeledReplayS: modeled((r) => r.modeledReplayS),
      modeledEndOfRecoveryS: modeled((r) => r.modeledEndOfRecoveryS),
      modeledOpenForWritesS: modeled((r) => r.modeledOpenForWritesS),
      modeledDropS: modeled((r) => r.modeledDropS),
      ...(cell.engine === 'walsim' && rs.length
        ? { modeledMsMean: modeled((r) => r.modeledS) * 1000 }
        : {}),
      failoverMsMean: rs.length ? mean((r) => r.failoverMs) : NaN,
      failoverMsMedian: median((clean.length ? clean : rs).map((r) => r.failoverMs)),
      stalls: rs.length - clean.length,
      ...(cell.engine === 'postgres'
        ? {
            seedMethodMsMedian: median(
              (clean.length ? clean : rs).map((r) => r.seedMethodMs ?? NaN),
            ),
          }
        : {}),
      failoverMsMin: Math.min(...rs.map((r) => r.failoverMs)),
      failoverMsMax: Math.max(...rs.map((r) => r.failoverMs)),
      replayMsMean: replays.length ? replays.reduce((a, b) => a + b, 0) / replays.length : null,
      dropMsMean: rs.length ? mean((r) => r.dropMs) : NaN,
      dropsFullScan: rs.length ? mean((r) => r.dropsFullScan) : NaN,
      dropsCachedLookup: rs.length ? mean((r) => r.dropsCachedLookup) : NaN,
      scanned: rs.length ? mean((r) => r.scanned) : NaN,
      probes: rs.length ? mean((r) => r.probes) : NaN,
      invalidated: rs.length ? mean((r) => r.invalidated) : NaN,
    };
  });
}

/** Cumulative microseconds in which some task waited for a CPU (/proc/pressure/cpu), or null. */
export function cpuPressureTotalUs(text?: string): number | null {
  let t = text;
  if (t === undefined) {
    try {
      t = fs.readFileSync('/proc/pressure/cpu', 'utf8');
    } catch {
      return null;
    }
  }
  const m = /^some .*\btotal=(\d+)/m.exec(t);
  return m ? Number(m[1]) : null;
}

/**
 * Run every cell `runs` times (interleaved), reporting progress before and after each run.
 * `warmupRuns` passes over the whole plan come first and are marked `warmup` (summarise leaves them
 * out): the first minutes of a measurement on a shared machine are not like the rest (a real
 * calibration's first pass was up to 3× slower than its other two, every cell alike). `runOne`
 * replaces `runCell` (tests).
 */
export async function runSweep(
  plan: CellSpec[],
  runs: number,
  settings: SweepSettings,
  onProgress: (p: SweepProgress) => void = () => {},
  opts: { warmupRuns?: number; runOne?: typeof runCell } = {},
): Promise<RunRecord[]> {
  const runOne = opts.runOne ?? runCell;
  const warmups = opts.warmupRuns ?? 0;
  if (!(Number.isSafeInteger(warmups) && warmups >= 0))
    fail(`warm-up runs must be a non-negative integer, got ${warmups}`);
  const records: RunRecord[] = [];
  const passes = warmups + runs;
  const total = plan.length * passes;
  const weightTotal = plan.reduce((a, c) => a + estimateCellSeconds(c), 0) * passes;
  let weightDone = 0;
  for (let pass = 1; pass <= passes; pass++) {
    const warmup = pass <= warmups;
    const run = warmup ? pass : pass - warmups;
    for (const cell of plan) {
      const current = `${cellLabel(cell)}${warmup ? ` warm-up${warmups > 1 ? ` ${run}/${warmups}` : ''}` : runs > 1 ? ` run ${run}/${runs}` : ''}`;
      onProgress({
        done: records.length,
        total,
        weightDone,
        weightTotal,
        current,
        lastRecord: records.at(-1) ?? null,
      });
      const p0 = cpuPressureTotalUs();
      const t0 = performance.now();
      const rec = await runOne(cell, run, settings);
      const p1 = cpuPressureTotalUs();
      const wallUs = (performance.now() - t0) * 1000;
      records.push({
        ...rec,
        ...(warmup ? { warmup: true } : {}),
        loadAvg1: os.loadavg()[0]!,
        ...(p0 !== null && p1 !== null && wallUs > 0
          ? { cpuPressure: Math.min(1, (p1 - p0) / wallUs) }
          : {}),
      });
      weightDone += estimateCellSeconds(cell);
    }
  }
  onProgress({
    done: records.length,
    total,
    weightDone,
    weightTotal,
    current: 'done',
    lastRecord: records.at(-1) ?? null,
  });
  return records;
}

/**
 * Model-only: every cell's counts computed in-process (in-process.ts; no servers, no timing
 * repetitions: modeled seconds do not need averaging), one record per cell with the measured
 * fields NaN.
 */
export async function runSweepModelOnly(
  plan: CellSpec[],
  settings: Pick<SweepSettings, 'thresholdDivisor' | 'profile'>,
  onProgress: (p: SweepProgress) => void = () => {},
): Promise<RunRecord[]> {
  const total = plan.length;
  onProgress({
    done: 0,
    total,
    weightDone: 0,
    weightTotal: total,
    current: 'counting in-process',
    lastRecord: null,
  });
  const counts = await countCellsInProcess(
    plan,
    { thresholdDivisor: settings.thresholdDivisor },
    (done, label) =>
      onProgress({
        done,
        total,
        weightDone: done,
        weightTotal: total,
        current: label,
        lastRecord: null,
      }),
  );
  return plan.map((cell, i) => ({
    ...cell,
    mode: 'model-only',
    ...modeledColumns(price({ counts: counts[i]!, nBuffers: cell.nBuffers }, settings.profile)),
    counts: counts[i]!,
    run: 1,
    failoverMs: NaN,
    replayMs: null,
    endOfRecoveryMs: null,
    openForWritesMs: null,
    recordsReplayed: Object.values(counts[i]!.replay.records).reduce((a, b) => a + b, 0),
    dropMs: NaN,
    dropsFullScan: counts[i]!.replay.drops.drops['full-scan'],
    dropsCachedLookup: counts[i]!.replay.drops.drops['cached-lookup'],
    scanned:
      counts[i]!.replay.drops.scannedByMatcher.single +
      counts[i]!.replay.drops.scannedByMatcher.linear +
      counts[i]!.replay.drops.scannedByMatcher.bsearch +
      counts[i]!.replay.drops.hashBuildScanned,
    probes: counts[i]!.replay.drops.probes,
    invalidated: counts[i]!.replay.drops.invalidated,
    promoted: false,
    resumeAt: '',
    promotedAt: '',
    stepMs: {},
  }));
}

export function defaultWorkDir(): string {
  return path.join(os.tmpdir(), `walsim-sweep-${process.pid}`);
}
