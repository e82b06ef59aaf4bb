/**
 * `npm run predict-bench`: how close `npm run predict` comes to real PostgreSQL 15 on cells a
 * calibrated profile never saw. For each cell and run: a fresh primary + standby, a backlog made
 * with replay paused, the prediction from the standby's unreplayed WAL, then the promotion
 * `predict --verify` times (scripts/calibration/cell-run.ts). Both targets are reported: wall time, and
 * uncontended time (wall less the standby startup process's run-queue wait). Writes
 * `<out>/results.json` (after every run) and `<out>/accuracy.md`.
 */
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import {
  builtinProfileNames,
  loadProfile,
  profilePath,
  type CostProfile,
} from '../cost-model/profile.ts';
import { parsePgMajor } from './postgres/pg-install.ts';
import { list, parseCli, positiveInt, printJson, runCli, UsageError } from './cli/command.ts';
import { defaultWorkDir } from './experiment/sweep-runner.ts';
import { resolvePgBin } from './postgres/pg-bin.ts';
import { readStoredCalibration, type StoredCalibration } from './calibration/design.ts';
import { destroyPgClustersOnSignal } from './postgres/pg-cluster.ts';
import { removeWorkDir, waitOutInodeReuse } from './postgres/inode-reuse.ts';
import { onInterrupt } from './cli/interrupt.ts';
import { fmtDuration, progressBar } from './report/progress.ts';
import { resultsDirName } from './report/write-results.ts';
import {
  benchTotals,
  calibrationSaw,
  DEFAULT_BENCH_CELLS,
  defaultBenchProfiles,
  DEFAULT_BENCH_RUNS,
  DEFAULT_BENCH_SEEDS,
  estimateBenchRunSeconds,
  parseBenchCell,
  priceBenchRun,
  QUICK_BENCH_CELLS,
  renderBenchMarkdown,
  storedRunCounts,
  summariseBench,
  type BenchCell,
  type BenchRun,
} from './calibration/cell-plan.ts';
import { pgbenchMissingReason, runBenchCell, type BenchSettings } from './calibration/cell-run.ts';

const USAGE = `usage: npm run predict-bench -- [--seeds ${DEFAULT_BENCH_SEEDS}] [--families] [--quick] [--cells SPEC,SPEC,...] [--runs ${DEFAULT_BENCH_RUNS}]
                              [--profile pgN-calibrated-wall] [--uncontended-profile pgN-calibrated-uncontended]
                              [--out DIR] [--continue RESULTS.json] [--reprice RESULTS.json]
                              [--work-dir DIR] [--pg-version 13..18] [--pg-bin DIR] [--json]
  Builds a real PostgreSQL 15 primary + standby per run, makes a backlog with replay paused,
  predicts it (npm run predict, from the standby's unreplayed WAL), promotes (predict --verify)
  and prints predicted against measured per cell, for wall time (--profile) and uncontended time
  (wall less the startup process's run-queue wait; --uncontended-profile). Profiles by default:
  the calibrated pair of --pg-version's major when shipped (pg16-calibrated-wall, …), else 15's.
  Default: the backlogs the workload generator draws from seeds ${DEFAULT_BENCH_SEEDS} (npm run workload
  -- --seed N prints one), a range npm run calibrate never draws (--seeds FROM-TO: another).
  SPEC: WORKLOAD[:N]@SHARED_BUFFERS, WORKLOAD one of testA (N = NB/k), vacuum, truncate,
        truncate-toast, drop, mixed (N = tables), pgbench (N = scale); gen:SEED[@SIZE]: a generated
        backlog. --families: the ${DEFAULT_BENCH_CELLS.length} family cells the default calibration never saw.
        --quick: ${QUICK_BENCH_CELLS.length} small cells, 1 run each.
  --continue FILE  keep the runs of an earlier results.json and run only the missing ones
  --reprice FILE   no PostgreSQL: price the stored runs' counts again with the given profiles
  --no-wait        do not wait out ext4's inode-reuse delay after a recent removal (no journal:
                   60 s; the first runs' file creations then scan the freed inodes)
  --no-probe       price with the profiles as calibrated: no machine probe before each prediction
                   (by default it runs as npm run predict runs it, and the unscaled price is kept beside)`;

interface BenchFile {
  format: 'walsim-predict-bench/1';
  startedAt: string;
  finishedAt: string | null;
  settings: {
    cells: string[];
    runs: number;
    wallProfile: string;
    uncontendedProfile: string;
    primarySharedBuffers: string;
    postgres: string;
    machine: { cpus: number; model: string | null; memoryBytes: number };
  };
  runs: BenchRun[];
  failures: Array<{ cell: string; run: number; error: string }>;
  skipped: Array<{ cell: string; reason: string }>;
}

function readBenchFile(file: string): BenchFile {
  let j: BenchFile;
  try {
    j = JSON.parse(fs.readFileSync(file, 'utf8')) as BenchFile;
  } catch (e) {
    throw new UsageError(`cannot read ${file}: ${(e as Error).message}`);
  }
  if (j?.format !== 'walsim-predict-bench/1' || !Array.isArray(j.runs))
    throw new UsageError(`${file} is not a results.json written by npm run predict-bench`);
  // Counters added after the file was written read as 0 there (not counted then), but for what
  // the run recorded itself (storedRunCounts: the page map of its startup process).
  for (const r of j.runs) r.counts = storedRunCounts(r);
  return j;
}

/** The calibration design a profile was fitted on (null: not written by npm run calibrate). */
function calibrationSettings(ref: string): StoredCalibration['settings'] | null {
  try {
    return readStoredCalibration(profilePath(ref).file).settings;
  } catch {
    return null;
  }
}

function loadNamed(ref: string): { profile: CostProfile; ref: string } {
  return { profile: loadProfile(ref), ref };
}

/** Run every missing (cell, run), pass by pass (run 1 of every cell, then run 2, …). */
async function measure(
  cells: BenchCell[],
  runs: number,
  file: BenchFile,
  s: BenchSettings,
  save: () => void,
): Promise<void> {
  const todo: Array<{ cell: BenchCell; run: number }> = [];
  for (let run = 1; run <= runs; run++)
    for (const cell of cells)
      if (!file.runs.some((r) => r.cell === cell.id && r.run === run)) todo.push({ cell, run });
  const weightTotal = todo.reduce((a, t) => a + estimateBenchRunSeconds(t.cell), 0);
  if (s.inodeReuseWait) await waitOutInodeReuse(s.workDir, (l) => process.stderr.write(`${l}\n`));
  const bar = progressBar(todo.length, false);
  destroyPgClustersOnSignal(s.workDir, (d) => path.join(d, 'pair'));
  onInterrupt(async () => removeWorkDir(s.workDir)); // after the clusters: their parents too
  let weightDone = 0;
  try {
    for (const [i, t] of todo.entries()) {
      bar.update({
        done: i,
        total: todo.length,
        weightDone,
        weightTotal,
        current: `${t.cell.id}${runs > 1 ? ` run ${t.run}/${runs}` : ''}`,
        lastRecord: null,
      });
      try {
        file.runs.push(await runBenchCell(t.cell, t.run, s));
      } catch (e) {
        file.failures.push({ cell: t.cell.id, run: t.run, error: (e as Error).message });
      }
      weightDone += estimateBenchRunSeconds(t.cell);
      save();
    }
    bar.update({
      done: todo.length,
      total: todo.length,
      weightDone,
      weightTotal,
      current: 'done',
      lastRecord: null,
    });
  } finally {
    bar.stop();
    removeWorkDir(s.workDir);
  }
}

/** `FROM-TO` (or one seed) → `gen:N` specs. */
function seedRange(text: string): string[] {
  const m = /^(\d+)(?:-(\d+))?$/.exec(text.trim());
  const from = Number(m?.[1]);
  const to = Number(m?.[2] ?? m?.[1]);
  if (m === null || !Number.isSafeInteger(to) || to < from || to - from >= 1000)
    throw new UsageError(`--seeds takes FROM-TO (at most 1000 seeds) or one seed, got "${text}"`);
  return Array.from({ length: to - from + 1 }, (_, i) => `gen:${from + i}`);
}

const PREDICT_BENCH_OPTIONS = {
  seeds: { type: 'string' },
  families: { type: 'boolean', default: false },
  quick: { type: 'boolean', default: false },
  cells: { type: 'string' },
  runs: { type: 'string' },
  profile: { type: 'string' },
  'uncontended-profile': { type: 'string' },
  out: { type: 'string' },
  continue: { type: 'string' },
  reprice: { type: 'string' },
  'work-dir': { type: 'string' },
  'pg-bin': { type: 'string' },
  'pg-version': { type: 'string' },
  'primary-shared-buffers': { type: 'string', default: '128MB' },
  json: { type: 'boolean', default: false },
  'no-wait': { type: 'boolean', default: false },
  'no-probe': { type: 'boolean', default: false },
} as const;

type PredictBenchValues = ReturnType<typeof parseCli<typeof PREDICT_BENCH_OPTIONS>>['values'];

runCli(async () => {
  const { values, positionals } = parseCli(process.argv.slice(2), PREDICT_BENCH_OPTIONS, USAGE);
  if (positionals.length > 0)
    throw new UsageError(`unexpected argument "${positionals[0]}"\n${USAGE}`);
  if (values.continue !== undefined && values.reprice !== undefined)
    throw new UsageError('--continue runs PostgreSQL, --reprice does not: give one of them');
  const prior = values.continue ?? values.reprice;
  const file: BenchFile | null = prior === undefined ? null : readBenchFile(path.resolve(prior));
  const specs =
    values.cells !== undefined
      ? list(values.cells, 'cells')
      : values.seeds !== undefined
        ? seedRange(values.seeds)
        : (file?.settings.cells ??
          (values.quick
            ? QUICK_BENCH_CELLS
            : values.families
              ? DEFAULT_BENCH_CELLS
              : seedRange(DEFAULT_BENCH_SEEDS)));
  let cells: BenchCell[];
  try {
    cells = specs.map(parseBenchCell);
  } catch (e) {
    throw new UsageError((e as Error).message);
  }
  const defaults = defaultBenchProfiles(
    values['pg-version'] === undefined ? null : parsePgMajor(values['pg-version']),
    builtinProfileNames(),
  );
  const wall = loadNamed(values.profile ?? defaults.wall);
  const uncontended = loadNamed(values['uncontended-profile'] ?? defaults.uncontended);
  const runs =
    values.runs !== undefined
      ? positiveInt(values.runs, 'runs')
      : (file?.settings.runs ?? (values.quick ? 1 : DEFAULT_BENCH_RUNS));
  const seenBy = calibrationSettings(wall.ref);
  const seen = (c: BenchCell) => calibrationSaw(c, seenBy);
  const startedAt = new Date();
  const out = path.resolve(
    values.out ??
      (prior !== undefined && values.reprice === undefined
        ? path.dirname(prior)
        : path.join('results', `predict-bench-${resultsDirName(startedAt)}`)),
  );
  const bench = benchFileOf(values, file, cells, runs, wall, uncontended, startedAt);
  fs.mkdirSync(out, { recursive: true });
  const save = () =>
    fs.writeFileSync(path.join(out, 'results.json'), JSON.stringify(bench, null, 2) + '\n');
  const t0 = Date.now();
  if (values.reprice !== undefined) reprice(bench, wall, uncontended);
  else await measureOnPostgres(values, cells, runs, bench, out, wall, uncontended, save);
  bench.finishedAt = new Date().toISOString();
  save();
  return report(values, bench, seen, wall, uncontended, out, t0);
}, USAGE);

type NamedProfile = ReturnType<typeof loadNamed>;

/** The results file to fill: the one --continue or --reprice names, or a new one; its settings now. */
function benchFileOf(
  values: PredictBenchValues,
  file: BenchFile | null,
  cells: BenchCell[],
  runs: number,
  wall: NamedProfile,
  uncontended: NamedProfile,
  startedAt: Date,
): BenchFile {
  const bench: BenchFile = file ?? {
    format: 'walsim-predict-bench/1',
    startedAt: startedAt.toISOString(),
    finishedAt: null,
    settings: {
      cells: cells.map((c) => c.id),
      runs,
      wallProfile: wall.ref,
      uncontendedProfile: uncontended.ref,
      primarySharedBuffers: values['primary-shared-buffers']!,
      postgres: '',
      machine: {
        cpus: os.cpus().length,
        model: os.cpus()[0]?.model ?? null,
        memoryBytes: os.totalmem(),
      },
    },
    runs: [],
    failures: [],
    skipped: [],
  };
  bench.settings.cells = [...new Set([...bench.settings.cells, ...cells.map((c) => c.id)])];
  bench.settings.runs = runs;
  bench.settings.wallProfile = wall.ref;
  bench.settings.uncontendedProfile = uncontended.ref;
  return bench;
}

/** Predictions are counts × profile: price the stored counts with the profiles given now. */
function reprice(bench: BenchFile, wall: NamedProfile, uncontended: NamedProfile): void {
  for (const r of bench.runs) {
    const priced = priceBenchRun(
      r,
      parseBenchCell(r.cell).nBuffers,
      wall.profile,
      uncontended.profile,
    );
    r.predictedWallS = priced.predictedWallS;
    r.predictedUncontendedS = priced.predictedUncontendedS;
    // Runs measured without the probe keep no unscaled pair (their predictions are unscaled).
    if (r.probe !== undefined) r.unprobed = priced.unprobed;
  }
}

/** Run the cells on PostgreSQL (pgbench cells skipped, with the reason, when pgbench is absent). */
async function measureOnPostgres(
  values: PredictBenchValues,
  cells: BenchCell[],
  runs: number,
  bench: BenchFile,
  out: string,
  wall: NamedProfile,
  uncontended: NamedProfile,
  save: () => void,
): Promise<void> {
  // One-line error naming what to install when absent; --pg-version installs that major.
  const bin = await resolvePgBin({ pgBin: values['pg-bin'], pgVersion: values['pg-version'] });
  bench.settings.postgres = bin.version;
  for (const p of [wall, uncontended])
    if ((p.profile.pgMajor ?? 15) !== bin.major)
      console.error(
        `predict-bench: profile ${p.ref} was fitted on PostgreSQL ${p.profile.pgMajor ?? 15}, the bench runs ${bin.major}: its seconds are ${p.profile.pgMajor ?? 15}'s constants on ${bin.major}'s counts (npm run calibrate -- --pg-version ${bin.major})`,
      );
  const noPgbench = pgbenchMissingReason(bin.dir);
  const runnable = cells.filter((c) => {
    if (c.workload !== 'pgbench' || noPgbench === null) return true;
    if (!bench.skipped.some((x) => x.cell === c.id))
      bench.skipped.push({ cell: c.id, reason: noPgbench });
    return false;
  });
  if (!values.json)
    console.log(
      `predict-bench: ${runnable.length} cells × ${runs} run${runs === 1 ? '' : 's'} on ${bin.version}; profiles ${wall.ref} (wall), ${uncontended.ref} (uncontended); results in ${out}`,
    );
  await measure(
    runnable,
    runs,
    bench,
    {
      workDir: path.resolve(values['work-dir'] ?? defaultWorkDir()),
      pgBin: bin.dir,
      primarySharedBuffers: values['primary-shared-buffers']!,
      inodeReuseWait: !values['no-wait'],
      wall,
      uncontended,
      probe: values['no-probe'] !== true,
    },
    save,
  );
}

/** accuracy.md, then the summary (text or --json); the exit code (1 when a run failed). */
function report(
  values: PredictBenchValues,
  bench: BenchFile,
  seen: (c: BenchCell) => boolean,
  wall: NamedProfile,
  uncontended: NamedProfile,
  out: string,
  t0: number,
): number {
  const all = bench.settings.cells.map(parseBenchCell);
  const summaries = summariseBench(all, bench.runs, seen);
  const md = renderBenchMarkdown(summaries, {
    wallProfile: wall.ref,
    uncontendedProfile: uncontended.ref,
  });
  const notes = [
    ...bench.failures.map((f) => `failed: ${f.cell} run ${f.run}: ${f.error}`),
    ...bench.skipped.map((x) => `skipped: ${x.cell}: ${x.reason}`),
  ];
  fs.writeFileSync(path.join(out, 'accuracy.md'), [md, '', ...notes].join('\n') + '\n');
  if (values.json) {
    printJson({
      out,
      summaries,
      totals: benchTotals(summaries),
      failures: bench.failures,
      skipped: bench.skipped,
    });
    return bench.failures.length > 0 ? 1 : 0;
  }
  console.log('');
  console.log(md);
  for (const n of notes) console.log(n);
  console.log(
    `${values.reprice !== undefined ? 'repriced' : 'finished'} in ${fmtDuration((Date.now() - t0) / 1000)}; ${path.join(out, 'results.json')}, ${path.join(out, 'accuracy.md')}`,
  );
  return bench.failures.length > 0 ? 1 : 0;
}
