/**
 * `npm run calibrate [--pg-bin DIR] [--shared-buffers 128MB,1GB,4GB] [--runs 5] [--warmup 1]
 * [--tables 50,300] [--out FILE] …`: run the calibration cells on real PostgreSQL (scripts/calibration/design.ts), count
 * the same cells in walsim, fit a cost profile to this machine, print measured vs fitted seconds
 * and write the profile (usable as `--profile FILE`).
 */
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { parseSharedBuffers } from '../storage/shared-buffers.ts';
import {
  DEFAULT_PROFILE,
  loadProfile,
  pgMajorOfServer,
  profileToJson,
  type CostProfile,
} from '../cost-model/profile.ts';
import type { FailoverCounts } from '../storage/replay-counts.ts';
import { costFeatures } from '../cost-model/model.ts';
import { unidentifiedGroups, type FitGroup } from '../cost-model/fit.ts';
import {
  nonNegativeInt,
  parseCli,
  positiveInt,
  printJson,
  runCli,
  UsageError,
} from './cli/command.ts';
import { countCellsInProcess } from './experiment/in-process.ts';
import {
  cellKey,
  defaultWorkDir,
  isStalled,
  runSweep,
  summarise,
  type SweepSettings,
} from './experiment/sweep-runner.ts';
import type { RunRecord } from './report/records.ts';
import { resultsDirName } from './report/write-results.ts';
import { printCalibration } from './calibration/table.ts';
import { fmtDuration, progressBar } from './report/progress.ts';
import { resolvePgBin } from './postgres/pg-bin.ts';
import { destroyPgClustersOnSignal } from './postgres/pg-cluster.ts';
import { removeWorkDir, waitOutInodeReuse } from './postgres/inode-reuse.ts';
import { onInterrupt } from './cli/interrupt.ts';
import { benchCellOfCalibration, storedRunOfBench } from './calibration/cell-plan.ts';
import { runBenchCell, type BenchSettings } from './calibration/cell-run.ts';
import { probeMachine } from './predict/probe.ts';
import { medianProbe, type MachineProbe } from '../cost-model/machine-scale.ts';
import { generateBacklog, GENERATOR_VERSION, machineGeneratorLimits } from './generator/backlog.ts';
import {
  cellShortLabel,
  type StoredCalibrationRun,
  type CalibrationDesign,
  calibrationGroupsFor,
  DEFAULT_CALIBRATION_COPY,
  DEFAULT_CALIBRATION_DML,
  DEFAULT_CALIBRATION_REL_DIVISORS,
  DEFAULT_CALIBRATION_RUNS,
  DEFAULT_CALIBRATION_SEEDS,
  DEFAULT_CALIBRATION_SIZES,
  DEFAULT_CALIBRATION_TABLES,
  DEFAULT_CALIBRATION_TOAST_SIZES,
  DEFAULT_CALIBRATION_TOAST_TABLES,
  fitCalibration,
  machineCache,
  planCalibration,
  readStoredCalibration,
  recordsFromStored,
  storedLabel,
  fitTargets,
  identifiableGroups,
  MEASURED_WHEN_UNIDENTIFIED,
  measuredAtBound,
  type StoredCalibration,
  walsimTwinAt,
} from './calibration/design.ts';

const USAGE = `usage: npm run calibrate -- [--pg-version 13..18] [--pg-bin DIR] [--shared-buffers ${DEFAULT_CALIBRATION_SIZES.join(',')}] [--runs ${DEFAULT_CALIBRATION_RUNS}] [--warmup 1]
                               [--tables ${DEFAULT_CALIBRATION_TABLES.join(',')}] [--testb-sizes FIRST,LAST] [--no-testb-drop] [--toast-tables ${DEFAULT_CALIBRATION_TOAST_TABLES}]
                               [--toast-sizes SIZES,6GB] [--rel-sizes ${DEFAULT_CALIBRATION_REL_DIVISORS.join(',')}]
                               [--dml-tables ${DEFAULT_CALIBRATION_DML.tables}] [--dml-shared-buffers ${DEFAULT_CALIBRATION_DML.sharedBuffers}]
                               [--copy-tables ${DEFAULT_CALIBRATION_COPY.tables}] [--gen-seeds ${DEFAULT_CALIBRATION_SEEDS}|none] [--base ${DEFAULT_PROFILE}]
                               [--name NAME] [--out FILE] [--work-dir DIR] [--json] [--refit FILE]
                               [--target wall|uncontended] [--counts wal|walsim]
  Runs a fixed set of real PostgreSQL cells (Test A VACUUM of NBuffers/k pages at --shared-buffers;
  Test B VACUUM, TRUNCATE and DROP TABLE (each table in its own transaction; --no-testb-drop: none)
  of --tables one-block tables at --testb-sizes, default the first and last --shared-buffers size;
  TRUNCATE of TOAST-able tables at --toast-sizes, default --shared-buffers, 6GB (beyond a 32 MiB
  last-level cache) and the largest pool this machine starts (20GB on 24 GiB);
  the generated backlogs of --gen-seeds (npm run workload -- --seed N prints one), each at its pool; INSERT and DELETE of 2,260 rows a table over --dml-tables tables, 0: none;
  COPY of 2,260 int rows and of 900 rows with a 400-byte text a table over --copy-tables tables
  at --dml-shared-buffers, 0: none),
  counts the same cells in walsim, fits the cost profile by non-negative least squares, and
  writes it: use it with --profile FILE. --warmup N passes over every
  cell come first and are left out of the fit (their figures stay in the profile's fit.records).
  --target uncontended: fit each run's failover less the time the standby's startup process waited
  for a CPU (/proc schedstat run_delay: other work on the machine, not PostgreSQL's); default wall.
  --counts wal (default): each cell's counts are those npm run predict reads from the real WAL of
  its runs (the counts every prediction is priced from); walsim: the walsim twin's counts (runs
  through the sweep, which has no DML, COPY or DROP TABLE backlogs: pass --dml-tables 0
  --copy-tables 0 --gen-seeds none --no-testb-drop).
  --refit FILE: no PostgreSQL run; fit again the measurements stored in a profile this command
  wrote (its fit.records and fit.walCounts), with this version's stall rule and groups.
  --no-wait: do not wait out ext4's inode-reuse delay (no journal: 60 s) after a recent removal.`;

/** Run the plan on real PostgreSQL (warm-up passes first); cleans the work directory on a signal. */
async function measureCells(
  plan: ReturnType<typeof planCalibration>,
  runs: number,
  warmupRuns: number,
  settings: SweepSettings,
): Promise<RunRecord[]> {
  destroyPgClustersOnSignal(settings.workDir);
  const bar = progressBar(plan.length * (runs + warmupRuns), false);
  try {
    return await runSweep(plan, runs, settings, (p) => bar.update(p), { warmupRuns });
  } finally {
    bar.stop();
    fs.rmSync(settings.workDir, { recursive: true, force: true });
  }
}

/**
 * Run the plan on real PostgreSQL with predict-bench's runner (warm-up passes first, runs
 * interleaved): each run's measured failover as a stored calibration run, and per cell the counts
 * predict read from the real WAL (the first recorded run's: the WAL of a cell is the same run to
 * run up to a few catalog records).
 */
async function measureCellsByPredict(
  plan: ReturnType<typeof planCalibration>,
  runs: number,
  warmupRuns: number,
  s: BenchSettings,
): Promise<{
  records: RunRecord[];
  stored: StoredCalibrationRun[];
  walCounts: Record<string, FailoverCounts>;
}> {
  if (s.inodeReuseWait) await waitOutInodeReuse(s.workDir, (l) => process.stderr.write(`${l}\n`));
  destroyPgClustersOnSignal(s.workDir, (d) => path.join(d, 'pair'));
  onInterrupt(async () => removeWorkDir(s.workDir)); // after the clusters: their parents too
  const total = plan.length * (runs + warmupRuns);
  const bar = progressBar(total, false);
  const stored: StoredCalibrationRun[] = [];
  const walCounts: Record<string, FailoverCounts> = {};
  try {
    for (let pass = 1; pass <= warmupRuns + runs; pass++) {
      const warmup = pass <= warmupRuns;
      for (const c of plan) {
        bar.update({
          done: stored.length,
          total,
          weightDone: stored.length,
          weightTotal: total,
          current: `${cellShortLabel(c)}${warmup ? ' warm-up' : ` run ${pass - warmupRuns}/${runs}`}`,
          lastRecord: null,
        });
        const r = await runBenchCell(
          benchCellOfCalibration(c),
          warmup ? pass : pass - warmupRuns,
          s,
        );
        stored.push(storedRunOfBench(c, r, warmup));
        if (!warmup) walCounts[storedLabel(c)] ??= r.counts;
      }
    }
  } finally {
    bar.stop();
    removeWorkDir(s.workDir);
  }
  return { records: recordsFromStored(stored, plan), stored, walCounts };
}

/** One run as the profile's `fit.records` stores it (its stall judged among its cell's runs). */
function storedRecord(r: RunRecord, records: readonly RunRecord[]) {
  return {
    label: storedLabel(r),
    run: r.run,
    warmup: r.warmup === true,
    failoverMs: r.failoverMs,
    seedMethodMs: r.seedMethodMs,
    replayMs: r.replayMs,
    endOfRecoveryMs: r.endOfRecoveryMs,
    openForWritesMs: r.openForWritesMs,
    stall: r.stall,
    stalled:
      r.warmup !== true &&
      isStalled(
        r,
        records.filter((x) => cellKey(x) === cellKey(r)),
      ),
    loadAvg1: r.loadAvg1,
    cpuPressure: r.cpuPressure,
    startupCpuMs: r.startupCpuMs,
    startupRunQueueMs: r.startupRunQueueMs,
    startupBlockedMs: r.startupBlockedMs,
    walBytes: r.walBytes,
    recordsReplayed: r.recordsReplayed,
  };
}

/** What the profile's `fit` stores: the settings, every run and each cell's fit (for --refit). */
function storedFit(o: {
  startedAt: Date;
  wallSeconds: number;
  pgVersion: string;
  runs: number;
  warmupRuns: number;
  settings: StoredCalibration['settings'];
  refittedFrom: string | null;
  machine: unknown;
  target: 'wall' | 'uncontended';
  counts: 'wal' | 'walsim';
  walCounts: Record<string, FailoverCounts> | null;
  report: ReturnType<typeof fitCalibration>;
  records: RunRecord[];
  atBound: string[] | null;
  probe: MachineProbe | null;
}) {
  return {
    measuredAt: o.startedAt.toISOString(),
    wallSeconds: o.wallSeconds,
    postgres: o.pgVersion,
    runsPerCell: o.runs,
    warmupRunsPerCell: o.warmupRuns,
    settings: o.settings,
    ...(o.refittedFrom !== null
      ? { refittedAt: new Date().toISOString(), refittedFrom: o.refittedFrom }
      : {}),
    machine: o.machine ?? {
      cpus: os.cpus().length,
      model: os.cpus()[0]?.model ?? null,
      memoryBytes: os.totalmem(),
    },
    target: `PostgreSQL failover, resume (clock_timestamp()) to "database system is ready to accept connections"${o.target === 'uncontended' ? ", less the standby startup process's run-queue wait (schedstat run_delay)" : ''}, median of the recorded runs without a promote stall (warm-up runs left out)`,
    counts:
      o.counts === 'wal'
        ? 'per cell, the counts npm run predict read from the WAL PostgreSQL replayed (walCounts)'
        : "the walsim twin's counts of each cell",
    groups: o.report.groupSeconds,
    // The groups the fit left at the bound 0 that keep their measured constants (design.ts
    // `measuredAtBound`); its presence tells a refit the file was fitted under that rule.
    ...(o.atBound !== null ? { measuredAtBound: o.atBound } : {}),
    cells: o.report.cells.map((c) => ({
      label: c.label,
      runs: c.runs,
      stalls: c.stalls,
      measuredS: c.measuredS,
      fittedS: c.fittedS,
      residualS: c.residualS,
      residualPct: c.residualPct,
      leaveOneOutS: c.leaveOneOutS,
      leaveOneOutPct: c.leaveOneOutPct,
    })),
    records: o.records.map((r) => storedRecord(r, o.records)),
    ...(o.probe !== null ? { probe: o.probe } : {}),
    ...(o.walCounts !== null ? { walCounts: o.walCounts } : {}),
  };
}

/**
 * The walsim twins' counts of the plan, refusing a plan whose cells leave a fitted group
 * unidentified (its column of the design matrix a combination of the others': least squares would
 * place its cost anywhere along that direction).
 */
async function identifiedTwinCounts(
  plan: ReturnType<typeof planCalibration>,
  base: CostProfile,
  major: number | undefined,
): Promise<FailoverCounts[]> {
  const twins = plan.map((c) => walsimTwinAt(c, major));
  const counts = await countCellsInProcess(twins, { thresholdDivisor: 32 });
  const features = counts.map((n, i) => costFeatures(n, base, plan[i]!.nBuffers));
  const unidentified = unidentifiedGroups(features, calibrationGroupsFor(plan, features));
  if (unidentified.length > 0)
    throw new UsageError(
      `these cells cannot tell apart the fit groups ${unidentified.join(', ')}: vary --tables, --shared-buffers or --rel-sizes`,
    );
  return counts;
}

/**
 * The plan's WAL counts in plan order and the groups they identify, refusing a missing cell or an
 * unidentified group — except a term with a measured constant, which keeps it (printed), so runs
 * already measured are not thrown away; as does such a term the cells identify but the fit leaves
 * at its bound 0 (`measuredAtBound`, printed too).
 */
function identifiedWalCounts(
  plan: ReturnType<typeof planCalibration>,
  walCounts: Record<string, FailoverCounts>,
  base: CostProfile,
  cells: Parameters<typeof measuredAtBound>[0],
): { counts: FailoverCounts[]; groups: FitGroup[]; base: CostProfile; atBound: string[] } {
  const counts = plan.map((c) => {
    const n = walCounts[storedLabel(c)];
    if (n === undefined)
      throw new UsageError(
        `no WAL counts for the cell "${storedLabel(c)}" (every run of it failed)`,
      );
    return n;
  });
  const features = counts.map((n, i) => costFeatures(n, base, plan[i]!.nBuffers));
  const fit = identifiableGroups(plan, features, base);
  if (fit.unidentified.length > 0)
    throw new UsageError(
      `the WAL counts of these cells cannot tell apart the fit groups ${fit.unidentified.join(', ')}`,
    );
  for (const g of fit.measured)
    console.error(`fit group ${g} not identified by these cells: ${keepsMeasured(g)}`);
  const bound = measuredAtBound(cells, counts, fit);
  for (const g of bound.atBound)
    console.error(`fit group ${g} at the bound 0: ${keepsMeasured(g)}`);
  for (const r of bound.refuted)
    console.error(
      `fit group ${r.group} at the bound 0 stays 0: its measured ${MEASURED_WHEN_UNIDENTIFIED[r.group]!.seconds} s alone prices the cell "${r.cell}" above its measured seconds`,
    );
  return { counts, groups: bound.groups, base: bound.base, atBound: bound.atBound };
}

/** What a group priced at its measured constant is printed with. */
function keepsMeasured(g: string): string {
  const m = MEASURED_WHEN_UNIDENTIFIED[g]!;
  return `${m.constant} keeps its measured ${m.seconds} s`;
}

const CALIBRATE_OPTIONS = {
  'pg-bin': { type: 'string' },
  'pg-version': { type: 'string' },
  'shared-buffers': { type: 'string', default: DEFAULT_CALIBRATION_SIZES.join(',') },
  'primary-shared-buffers': { type: 'string', default: '128MB' },
  // 5 runs after 1 unrecorded pass (26 cells took ~13 min on 2 cores; the 4 DROP TABLE cells add
  // ~5). In a 3-run calibration 13 of 72
  // runs (the first pass's first 7 cells among them) had their startup process use 2-5x the CPU
  // of the same cell's fastest run in every phase, without waiting for a CPU
  // (docs/history/benchmarks-2026-12-03.md, fourth measurement); with 3 runs two such runs move a
  // cell's median; with 5 after a warm-up pass they rarely do.
  runs: { type: 'string', default: String(DEFAULT_CALIBRATION_RUNS) },
  warmup: { type: 'string', default: '1' },
  tables: { type: 'string', default: DEFAULT_CALIBRATION_TABLES.join(',') },
  'testb-sizes': { type: 'string' },
  'no-testb-drop': { type: 'boolean', default: false },
  'toast-tables': { type: 'string', default: String(DEFAULT_CALIBRATION_TOAST_TABLES) },
  'toast-sizes': { type: 'string' },
  'dml-tables': { type: 'string', default: String(DEFAULT_CALIBRATION_DML.tables) },
  'dml-shared-buffers': { type: 'string', default: DEFAULT_CALIBRATION_DML.sharedBuffers },
  'copy-tables': { type: 'string', default: String(DEFAULT_CALIBRATION_COPY.tables) },
  'gen-seeds': { type: 'string', default: DEFAULT_CALIBRATION_SEEDS },
  'rel-sizes': { type: 'string', default: DEFAULT_CALIBRATION_REL_DIVISORS.join(',') },
  base: { type: 'string', default: DEFAULT_PROFILE },
  name: { type: 'string' },
  out: { type: 'string' },
  'work-dir': { type: 'string' },
  json: { type: 'boolean', default: false },
  target: { type: 'string', default: 'wall' },
  refit: { type: 'string' },
  counts: { type: 'string' },
  'no-wait': { type: 'boolean', default: false },
} as const;

type CalibrateValues = ReturnType<typeof parseCli<typeof CALIBRATE_OPTIONS>>['values'];

// One linear pass over the CLI's steps (options, plan, measure or refit, fit, write, print).
runCli(async () => {
  const { values, positionals } = parseCli(process.argv.slice(2), CALIBRATE_OPTIONS, USAGE);
  if (positionals.length > 0)
    throw new UsageError(`unexpected argument "${positionals[0]}"\n${USAGE}`);
  const inputs = calibrationInputs(values);
  const { target, refit, countsFrom, design } = inputs;
  // One-line error naming what to install when absent; --pg-version installs that major on first use.
  const bin = refit
    ? null
    : await resolvePgBin({ pgBin: values['pg-bin'], pgVersion: values['pg-version'] });
  const pgVersion = refit?.postgres ?? bin!.version;
  const baseProfile = loadProfile(values.base!);
  const base = { ...baseProfile, cache: machineCache(baseProfile) };
  const startedAt = refit ? new Date(refit.measuredAt) : new Date();
  const name = values.name ?? `calibrated-${resultsDirName(startedAt)}${refit ? '-refit' : ''}`;
  const out = path.resolve(values.out ?? path.join('results', `${name}.json`));
  const settings: SweepSettings = {
    primarySharedBuffers: refit?.settings.primarySharedBuffers ?? values['primary-shared-buffers']!,
    thresholdDivisor: 32,
    workDir: path.resolve(values['work-dir'] ?? defaultWorkDir()),
    waitSeconds: 3600,
    pgBin: bin?.dir ?? values['pg-bin'],
    profile: baseProfile,
  };
  const plan = planCalibration(design);
  // The walsim twins price the fit only with --counts walsim (walsim has no COPY, and its FSM
  // updates follow its own int rows); with WAL counts the design is checked on those, after the runs.
  const major = pgMajorOfServer(pgVersion) ?? undefined;
  const twinCounts = countsFrom === 'walsim' ? await identifiedTwinCounts(plan, base, major) : null;
  const measured = await measureOrRefit(values, inputs, plan, settings, pgVersion, baseProfile);
  const { records, walCounts, probe } = measured;
  let { wallSeconds } = measured;
  const cells = summarise(plan, fitTargets(records, target));
  const wal = countsFrom === 'wal' ? identifiedWalCounts(plan, walCounts!, base, cells) : null;
  const counts = wal?.counts ?? twinCounts!;
  if (!refit) wallSeconds = (Date.now() - startedAt.getTime()) / 1000;
  const report = fitCalibration(
    cells,
    counts,
    wal?.base ?? base,
    {
      name,
      description: `fitted by npm run calibrate on ${os.cpus().length} × ${os.cpus()[0]?.model ?? 'cpu'} against ${pgVersion}, ${startedAt.toISOString()}${refit ? `, refitted ${new Date().toISOString()}` : ''}`,
      source: `npm run calibrate ${startedAt.toISOString()}${refit ? ` (refitted by npm run calibrate --refit ${new Date().toISOString()})` : ''}: NNLS fit to ${cells.length} PostgreSQL cells`,
    },
    wal?.groups,
  );
  // The profile names the major it was fitted on (predict warns when a standby runs another).
  report.profile.pgMajor = pgMajorOfServer(pgVersion);
  return writeCalibration(values, inputs, {
    startedAt,
    wallSeconds,
    pgVersion,
    name,
    out,
    settings,
    walCounts,
    report,
    records,
    probe,
    atBound: wal?.atBound ?? null,
  });
}, USAGE);

interface CalibrationInputs {
  target: 'wall' | 'uncontended';
  refit: ReturnType<typeof readStoredCalibration> | null;
  countsFrom: 'wal' | 'walsim';
  runs: number;
  warmupRuns: number;
  design: CalibrationDesign;
}

/** A comma-separated list of shared_buffers sizes, each checked (a function: runCli runs above). */
function sizeList(text: string, what: string): string[] {
  const sizes = text
    .split(',')
    .map((s) => s.trim())
    .filter(Boolean);
  if (sizes.length === 0) throw new UsageError(`--${what} needs at least one size`);
  for (const s of sizes) parseSharedBuffers(s);
  return sizes;
}

/**
 * `--gen-seeds FROM-TO` (or `none`): the generated backlogs, each at the pool its seed draws on
 * this machine (stored, so a refit elsewhere plans the same cells).
 */
function generatedDesign(text: string): CalibrationDesign['generated'] {
  if (text.trim() === 'none' || text.trim() === '0') return null;
  const m = /^(\d+)(?:-(\d+))?$/.exec(text.trim());
  const from = Number(m?.[1]);
  const to = Number(m?.[2] ?? m?.[1]);
  if (m === null || to < from || to >= 1000)
    throw new UsageError(
      `--gen-seeds takes FROM-TO below 1000 (the bench draws 1001 on), one seed, or none; got "${text}"`,
    );
  const limits = machineGeneratorLimits();
  const seeds = Array.from({ length: to - from + 1 }, (_, i) => from + i);
  const pools = seeds.map((n) => generateBacklog(n, limits).sharedBuffers);
  return { seeds, pools, generator: GENERATOR_VERSION };
}

/** The cell design the options give (a --refit takes the stored one instead). */
function designOf(values: CalibrateValues): CalibrationDesign {
  const sizes = sizeList(values['shared-buffers']!, 'shared-buffers');
  const dmlTables = nonNegativeInt(values['dml-tables']!, 'dml-tables');
  const copyTables = nonNegativeInt(values['copy-tables']!, 'copy-tables');
  const dmlSize = sizeList(values['dml-shared-buffers']!, 'dml-shared-buffers');
  if (dmlSize.length !== 1) throw new UsageError('--dml-shared-buffers takes one size');
  return {
    sizes,
    tables: values.tables!.split(',').map((s) => positiveInt(s.trim(), 'tables')),
    testBSizes: sizeList(
      values['testb-sizes'] ?? [...new Set([sizes[0]!, sizes[sizes.length - 1]!])].join(','),
      'testb-sizes',
    ),
    testBDrop: !values['no-testb-drop'],
    toastTables: positiveInt(values['toast-tables']!, 'toast-tables'),
    toastSizes: sizeList(
      values['toast-sizes'] ??
        [
          ...new Set([
            ...sizes,
            DEFAULT_CALIBRATION_TOAST_SIZES.at(-1)!,
            machineGeneratorLimits().maxSharedBuffers,
          ]),
        ].join(','),
      'toast-sizes',
    ),
    relDivisors: values['rel-sizes']!.split(',').map((s) =>
      positiveInt(s.trim().replace(/^NB\//i, ''), 'rel-sizes'),
    ),
    dml: dmlTables === 0 ? null : { sharedBuffers: dmlSize[0]!, tables: dmlTables },
    copy: copyTables === 0 ? null : { sharedBuffers: dmlSize[0]!, tables: copyTables },
    generated: generatedDesign(values['gen-seeds']!),
  };
}

/** The calibration's settings: from the options, or from the stored calibration a --refit names. */
function calibrationInputs(values: CalibrateValues): CalibrationInputs {
  const target = values.target!;
  if (target !== 'wall' && target !== 'uncontended')
    throw new UsageError(`--target must be wall or uncontended, got "${target}"`);
  const refit =
    values.refit === undefined ? null : readStoredCalibration(path.resolve(values.refit));
  const countsFrom =
    values.counts ?? (refit !== null && refit.walCounts === null ? 'walsim' : 'wal');
  if (countsFrom !== 'wal' && countsFrom !== 'walsim')
    throw new UsageError(`--counts must be wal or walsim, got "${countsFrom}"`);
  if (countsFrom === 'wal' && refit !== null && refit.walCounts === null)
    throw new UsageError(
      `${values.refit} stores no WAL counts (a calibration from before --counts wal): refit it with --counts walsim`,
    );
  parseSharedBuffers(values['primary-shared-buffers']!);
  const runs = refit?.runs ?? positiveInt(values.runs!, 'runs');
  const warmupRuns = refit?.warmupRuns ?? nonNegativeInt(values.warmup!, 'warmup');
  const r = refit?.settings;
  const design: CalibrationDesign =
    r === undefined
      ? designOf(values)
      : {
          sizes: r.sizes,
          tables: r.tables,
          testBSizes: r.testBSizes,
          testBDrop: r.testBDrop,
          toastTables: r.toastTables,
          toastSizes: r.toastSizes,
          relDivisors: r.relDivisors,
          dml: r.dml,
          copy: r.copy,
          generated: r.generated ?? null,
        };
  if (
    countsFrom === 'walsim' &&
    refit === null &&
    (design.dml !== null ||
      design.copy !== null ||
      (design.generated ?? null) !== null ||
      design.testBDrop)
  )
    throw new UsageError(
      '--counts walsim measures through the sweep, which has no DML, COPY, generated or DROP TABLE backlogs: pass --dml-tables 0 --copy-tables 0 --gen-seeds none --no-testb-drop',
    );
  return { target, refit, countsFrom, runs, warmupRuns, design };
}

/** The plan's records (and WAL counts): measured on PostgreSQL, or the refitted file's. */
async function measureOrRefit(
  values: CalibrateValues,
  { refit, runs, warmupRuns, design, countsFrom }: CalibrationInputs,
  plan: ReturnType<typeof planCalibration>,
  settings: SweepSettings,
  pgVersion: string,
  baseProfile: CostProfile,
): Promise<{
  records: RunRecord[];
  walCounts: Record<string, FailoverCounts> | null;
  wallSeconds: number;
  /** The recorded runs' median machine probe (null: none probed, or a refit). */
  probe: MachineProbe | null;
}> {
  let probe: MachineProbe | null = null;
  let records: RunRecord[];
  let walCounts: Record<string, FailoverCounts> | null = refit?.walCounts ?? null;
  let wallSeconds: number;
  if (refit) {
    records = recordsFromStored(refit.records, plan);
    wallSeconds = refit.wallSeconds;
    if (!values.json)
      console.log(
        `refit of ${values.refit}: ${plan.length} PostgreSQL cells × ${runs} run${runs === 1 ? '' : 's'} measured ${refit.measuredAt} (${pgVersion}); no PostgreSQL run`,
      );
  } else {
    if (!values.json)
      console.log(
        `calibration: ${plan.length} PostgreSQL cells × ${runs} run${runs === 1 ? '' : 's'}${warmupRuns ? ` after ${warmupRuns} unrecorded warm-up pass${warmupRuns === 1 ? '' : 'es'}` : ''} (${pgVersion}); shared_buffers ${[...new Set([...design.sizes, ...design.testBSizes, ...design.toastSizes])].join(', ')}`,
      );
    if (countsFrom === 'wal') {
      const m = await measureCellsByPredict(plan, runs, warmupRuns, {
        workDir: settings.workDir,
        pgBin: settings.pgBin,
        primarySharedBuffers: settings.primarySharedBuffers,
        inodeReuseWait: !values['no-wait'],
        // Each run probes the machine as predict does before it prices (the base profile stores
        // no probe, so nothing is scaled): the profile stores the recorded runs' median probe.
        probe: true,
        wall: { profile: baseProfile, ref: values.base! },
        uncontended: { profile: baseProfile, ref: values.base! },
      });
      records = m.records;
      walCounts = m.walCounts;
      probe = medianProbe(m.stored.flatMap((r) => (r.warmup !== true && r.probe ? [r.probe] : [])));
    } else records = await measureCells(plan, runs, warmupRuns, settings);
    wallSeconds = NaN;
  }
  return { records, walCounts, wallSeconds, probe };
}

/**
 * This machine's probe (predict/probe.ts) in the work directory the pairs ran in, stored as
 * `fit.probe` when no run was probed (`--counts walsim`, whose runs go through the sweep):
 * predict scales the I/O and memory terms from it to the machine it runs on. Taken after the work
 * directory's removal, its create + unlink can meet ext4's inode-reuse delay
 * (postgres/inode-reuse.ts); the runs' own probes, taken where predict takes its, are preferred.
 */
function machineProbeNow(workDir: string): MachineProbe | null {
  fs.mkdirSync(workDir, { recursive: true });
  const p = probeMachine(path.join(workDir, 'pair'));
  if ('error' in p) {
    console.error(`machine probe not stored: ${p.error}`);
    return null;
  }
  return p;
}

/** The pools the fit saw; a larger standby (the seed's 100GB) is priced by extrapolation. */
function poolRangeLine(report: ReturnType<typeof fitCalibration>): string {
  const cells = [...report.cells].sort((a, b) => a.cell.nBuffers - b.cell.nBuffers);
  const lo = cells[0]?.cell.sharedBuffers ?? 'none';
  const hi = cells.at(-1)?.cell.sharedBuffers ?? 'none';
  return `pools fitted: ${lo}–${hi} (the largest this machine starts: ${machineGeneratorLimits().maxSharedBuffers}); a standby above ${hi} (the seed's 100GB) is priced by extrapolation`;
}

/** What `writeCalibration` writes: the fitted report and what it was fitted from. */
interface FittedCalibration {
  startedAt: Date;
  wallSeconds: number;
  pgVersion: string;
  name: string;
  out: string;
  settings: SweepSettings;
  walCounts: Record<string, FailoverCounts> | null;
  report: ReturnType<typeof fitCalibration>;
  records: RunRecord[];
  /** The runs' median probe; null: probe the machine now (the walsim-counts path). */
  probe: MachineProbe | null;
  /** The groups priced at their measured constants at the bound 0; null: walsim counts. */
  atBound: string[] | null;
}

/** Write the fitted profile with its stored runs, then print it (text or --json). */
function writeCalibration(
  values: CalibrateValues,
  { refit, runs, warmupRuns, design, target, countsFrom }: CalibrationInputs,
  o: FittedCalibration,
): number {
  const { name, out, report, records, wallSeconds } = o;
  const fit = storedFit({
    ...o,
    runs,
    warmupRuns,
    settings: { ...design, primarySharedBuffers: o.settings.primarySharedBuffers },
    // Relative: the file is often shipped, and a profile carries no machine's paths.
    refittedFrom: refit ? path.relative(process.cwd(), path.resolve(values.refit!)) : null,
    machine: refit?.machine,
    target,
    counts: countsFrom,
    walCounts: countsFrom === 'wal' ? o.walCounts : null,
    probe: refit
      ? (loadProfile(path.resolve(values.refit!)).machineProbe ?? null)
      : (o.probe ?? machineProbeNow(o.settings.workDir)),
  });
  fs.mkdirSync(path.dirname(out), { recursive: true });
  fs.writeFileSync(out, profileToJson(report.profile, fit));
  const within = report.cells.filter((c) => Math.abs(c.leaveOneOutPct) <= 0.25).length;
  if (values.json) {
    printJson({
      profile: out,
      name,
      wallSeconds,
      groups: report.groupSeconds,
      cells: fit.cells,
      leaveOneOutWithin25Pct: within,
    });
    return 0;
  }
  printCalibration(report, records, warmupRuns, within);
  console.log(poolRangeLine(report));
  console.log(
    `${refit ? 'measured' : 'finished'} in ${fmtDuration(wallSeconds)}; profile: ${out}  (use it with --profile ${path.relative(process.cwd(), out) || out})`,
  );
  return 0;
}
