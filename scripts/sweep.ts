/**
 * `npm run sweep -- threshold|multi [options]`: seed 001's Test A (rel.sh, the threshold of the
 * optimized drop path) and Test B (test.sh, 1000 one-block relations), each cell on a fresh
 * cluster, with a progress bar, the seed's tables on stdout and files in results/<timestamp>/.
 * `npm start` runs `multi` on its defaults.
 */
import * as fs from 'node:fs';
import * as path from 'node:path';
import { parseSharedBuffers } from '../storage/shared-buffers.ts';
import { DEFAULT_PROFILE, loadProfile, type CostProfile } from '../cost-model/profile.ts';
import { parseDropStrategy, type DropStrategy } from '../server/settings.ts';
import {
  list,
  nonNegativeInt,
  parseCli,
  positiveInt,
  printJson,
  runCli,
  splitCommand,
  UsageError,
} from './cli/command.ts';
import { destroyCluster } from './engines/fresh-cluster.ts';
import { destroyPgCluster, isPgCluster } from './postgres/pg-cluster.ts';
import { pgBuildOf, resolvePgBin } from './postgres/pg-bin.ts';
import { parsePgMajor } from './postgres/pg-install.ts';
import {
  DEFAULT_REL_DIVISORS,
  DEFAULT_SHARED_BUFFERS,
  defaultWorkDir,
  ENGINES,
  planMulti,
  planThreshold,
  runSweep,
  runSweepModelOnly,
  summarise,
  type CellSpec,
  type Engine,
  type SweepKind,
  type SweepSettings,
  type Variant,
} from './experiment/sweep-runner.ts';
import { computeCrossover } from './report/tables.ts';
import { MAX_REL_PAGES, rowsForPages } from './experiment/rel-size.ts';
import { fmtDuration, progressBar } from './report/progress.ts';
import { writeResults, type SweepOutput } from './report/write-results.ts';
import type { RunRecord } from './report/records.ts';
import { publishedPoints } from './experiment/seed-001.ts';
import { STRATEGIES_USAGE, strategiesSweep } from './strategies/lab-sweep.ts';
import { withEntryBundle } from '../server/entry-bundle.ts';
import { onInterrupt } from './cli/interrupt.ts';
import { checkTemplateSpace, LoadedTemplates } from './experiment/loaded-template.ts';

const SEED_RUNS = 5;
const DEFAULT_MULTI_RUNS = 1;

const USAGE = `usage: npm run sweep -- <threshold|multi|strategies> [options]
  threshold  seed 001 Test A: one relation of NBuffers/k pages, VACUUM replayed at failover,
             cached-lookup with the optimized path forced vs full-scan
             [--rel-sizes 512,256,128,64,32,16,8] [--runs ${SEED_RUNS}] [--force-optimized | --no-force-optimized]
             [--template]  PostgreSQL: load each relation once (create, insert, the primary stopped cleanly) and
             start every run from two copies of it (primary and standby), so a run does only the DELETE,
             VACUUM, replay and promotion; the templates are removed when the sweep ends
  multi      seed 001 Test B: --tables one-block relations, VACUUM and/or TRUNCATE of each at failover
             [--tables 1000] [--variants vacuum,truncate[,truncate-toast]] [--strategies full-scan,cached-lookup] [--runs ${DEFAULT_MULTI_RUNS}]
             (truncate-toast: tables with a TOAST table, whose TRUNCATE drops three relfilenodes)
  threshold and multi, engines: [--engine walsim|postgres|walsim,postgres] [--pg-bin DIR]: postgres runs every cell on a real
             PostgreSQL primary + synchronous standby too (PostgreSQL 14 and later: the cached-lookup path, unforced),
             side by side with walsim's measured and modeled seconds
             [--pg-version 13,15]: one PostgreSQL column per major (13–18, the npm registry's builds, installed on first use);
             default: Debian's newest (15) or --pg-bin. walsim's cells then follow each major's drop rules
             (13 full scan, 14+ the lookup below NBuffers/32, unforced) instead of --strategies: one walsim
             column per major, also with --engine walsim or --model-only
${STRATEGIES_USAGE}
  common     [--shared-buffers ${DEFAULT_SHARED_BUFFERS.join(',')}] (the standby's; the primary gets --primary-shared-buffers 128MB)
             [--threshold-divisor 32] [--out results] [--work-dir DIR] [--wait-seconds 3600] [--json]
             [--standbys 1] (more: the measured standby is synchronous, standby2…N asynchronous extras)
             [--profile seed-001|FILE]  cost profile of the modeled PostgreSQL seconds beside the measured ones
             [--warmup 0]  unrecorded passes over every cell before the measured runs (left out of every figure)
             [--model-only]  no servers, no timing: count each cell in-process and report modeled seconds only`;

/** `threshold` and `multi`'s options (parseArgs). */
const SWEEP_OPTIONS = {
  'shared-buffers': { type: 'string', default: DEFAULT_SHARED_BUFFERS.join(',') },
  'primary-shared-buffers': { type: 'string', default: '128MB' },
  'rel-sizes': { type: 'string', default: DEFAULT_REL_DIVISORS.join(',') },
  'force-optimized': { type: 'boolean', default: true },
  'no-force-optimized': { type: 'boolean', default: false },
  tables: { type: 'string', default: '1000' },
  variants: { type: 'string', default: 'vacuum,truncate' },
  strategies: { type: 'string', default: 'full-scan,cached-lookup' },
  runs: { type: 'string' },
  warmup: { type: 'string', default: '0' },
  'threshold-divisor': { type: 'string', default: '32' },
  out: { type: 'string', default: 'results' },
  'work-dir': { type: 'string' },
  'wait-seconds': { type: 'string', default: '3600' },
  standbys: { type: 'string', default: '1' },
  json: { type: 'boolean', default: false },
  engine: { type: 'string', default: 'walsim' },
  'pg-bin': { type: 'string' },
  'pg-version': { type: 'string' },
  profile: { type: 'string', default: DEFAULT_PROFILE },
  'model-only': { type: 'boolean', default: false },
  template: { type: 'boolean', default: false },
} as const;

/** The sweeps' options that take no value (splitCommand: options before the sweep's name). */
const SWEEP_FLAGS = new Set([
  ...Object.entries(SWEEP_OPTIONS)
    .filter(([, o]) => o.type === 'boolean')
    .map(([name]) => name),
  'help',
  'h',
]);

type SweepValues = ReturnType<typeof parseCli<typeof SWEEP_OPTIONS>>['values'];

/** What the options say about runs and engines, checked before any cell runs. */
function runsAndEngines(kind: SweepKind, values: SweepValues) {
  const modelOnly = values['model-only'];
  if (modelOnly && values.runs !== undefined)
    throw new UsageError(
      '--runs does not apply to --model-only (modeled seconds are the same on every run)',
    );
  const runs = modelOnly
    ? 1
    : values.runs === undefined
      ? kind === 'threshold'
        ? SEED_RUNS
        : DEFAULT_MULTI_RUNS
      : positiveInt(values.runs, 'runs');
  const warmupRuns = nonNegativeInt(values.warmup, 'warmup');
  if (modelOnly && warmupRuns > 0)
    throw new UsageError('--warmup does not apply to --model-only (nothing is timed)');
  const engines = list(values.engine, 'engine').map((e) => {
    if (!(ENGINES as readonly string[]).includes(e))
      throw new UsageError(`unknown engine "${e}" (accepted: ${ENGINES.join(', ')})`);
    return e as Engine;
  });
  if (modelOnly && engines.includes('postgres'))
    throw new UsageError(
      "--model-only models walsim's counts; it does not run PostgreSQL (drop --engine postgres)",
    );
  const pgVersions =
    values['pg-version'] === undefined
      ? []
      : list(values['pg-version'], 'pg-version').map((v) => parsePgMajor(v) as number);
  if (pgVersions.length > 1 && values['pg-bin'] !== undefined)
    throw new UsageError('--pg-bin names one installation; give one --pg-version with it');
  checkTemplateOption(kind, values.template, engines);
  return { modelOnly, runs, warmupRuns, engines, pgVersions };
}

/** `--template` is for Test A on PostgreSQL only (experiment/loaded-template.ts says why). */
function checkTemplateOption(kind: SweepKind, template: boolean, engines: Engine[]): void {
  if (!template) return;
  if (kind !== 'threshold')
    throw new UsageError(
      "--template applies to threshold (Test A) only: a TRUNCATE run from a template would find its standby without the tables' sizes cached, so its drops would take another path",
    );
  if (!engines.includes('postgres'))
    throw new UsageError('--template applies to PostgreSQL runs (--engine postgres)');
}

/**
 * Warn when the profile was fitted on another major than a --pg-version priced with it; fail
 * before any cell runs when PostgreSQL is asked for and absent (a version not yet in the
 * cache is installed now, with its progress line).
 */
async function checkPgVersions(
  engines: Engine[],
  pgVersions: number[],
  pgBin: string | undefined,
  profile: CostProfile,
) {
  // A profile names the major it was fitted on: pricing another major's counts is said, not silent.
  const others = pgVersions.filter((v) => profile.pgMajor !== null && v !== profile.pgMajor);
  if (others.length > 0)
    process.stderr.write(
      `warning: cost profile ${profile.name} was fitted on PostgreSQL ${profile.pgMajor}; the modeled seconds of PostgreSQL ${others.join(', ')} are priced with it (fit one with npm run calibrate -- --pg-version ${others[0]})\n`,
    );
  if (!engines.includes('postgres')) return [];
  const bins = pgVersions.length === 0 ? [await resolvePgBin({ pgBin })] : [];
  for (const v of pgVersions) bins.push(await resolvePgBin({ pgBin, pgVersion: v }));
  // Which binaries each PostgreSQL column runs: a major's replay CPU differs between builds.
  return bins.map((b) => ({ major: b.major, version: b.version, build: pgBuildOf(b), dir: b.dir }));
}

/** A --shared-buffers value as typed and its NBuffers: parsed once, here at the command's edge. */
interface SweepSize {
  sb: string;
  nBuffers: number;
}

/** The cells of a threshold or multi sweep, and the options that shaped them (for settings.json). */
function planOf(
  kind: SweepKind,
  values: SweepValues,
  sizes: readonly SweepSize[],
  engines: Engine[],
  pgVersions: number[],
): { plan: CellSpec[]; described: Record<string, unknown> } {
  const sharedBuffers = sizes.map((s) => s.sb);
  if (kind === 'threshold') {
    const divisors = list(values['rel-sizes'], 'rel-sizes').map((s) =>
      positiveInt(s.replace(/^NB\//i, ''), 'rel-sizes'),
    );
    checkThresholdSizes(
      sizes,
      divisors,
      values['rel-sizes'] === SWEEP_OPTIONS['rel-sizes'].default,
    );
    const forced = !values['no-force-optimized'];
    return {
      plan: planThreshold(sharedBuffers, divisors, forced, engines, pgVersions),
      described: { relSizes: divisors.map((k) => `NB/${k}`), forceOptimized: forced },
    };
  }
  const tables = positiveInt(values.tables, 'tables');
  const variants = list(values.variants, 'variants').map((v) => {
    if (v !== 'vacuum' && v !== 'truncate' && v !== 'truncate-toast')
      throw new UsageError(`unknown variant "${v}" (accepted: vacuum, truncate, truncate-toast)`);
    return v as Variant;
  });
  const strategies = list(values.strategies, 'strategies').map(
    (s) => parseDropStrategy(s) as DropStrategy,
  );
  return {
    plan: planMulti(sharedBuffers, tables, variants, strategies, engines, pgVersions),
    described: { tables, variants, strategies },
  };
}

/**
 * Every NB/k of every --shared-buffers must be a relation the test table can hold (1 page to
 * MAX_REL_PAGES: its rows are numbered in an int column). Refused naming what the user typed —
 * the --shared-buffers value, and --rel-sizes or that the sizes are the defaults — and the range
 * of k that fits, never only the NB/k of a default they did not type.
 */
function checkThresholdSizes(
  sharedBuffers: readonly SweepSize[],
  divisors: number[],
  defaulted: boolean,
) {
  const sizes = defaulted
    ? `the default --rel-sizes ${DEFAULT_REL_DIVISORS.join(',')}`
    : `--rel-sizes ${divisors.join(',')}`;
  for (const { sb, nBuffers } of sharedBuffers) {
    // floor(NBuffers / k) pages must lie in 1..MAX_REL_PAGES.
    const kMin = Math.floor(nBuffers / (MAX_REL_PAGES + 1)) + 1;
    for (const k of divisors) {
      const pages = Math.floor(nBuffers / k);
      if (pages >= 1 && pages <= MAX_REL_PAGES) continue;
      const why =
        pages < 1
          ? `NB/${k} is less than one page (NBuffers = ${nBuffers})`
          : `NB/${k} = ${pages} pages, whose ${rowsForPages(pages)} rows overflow the test table's int column (at most ${MAX_REL_PAGES} pages)`;
      throw new UsageError(
        `--shared-buffers ${sb} does not fit ${sizes}: ${why}. Give --rel-sizes with k from ${kMin} to ${nBuffers} there, or a ${pages < 1 ? 'larger' : 'smaller'} --shared-buffers`,
      );
    }
  }
}

/** Ctrl-C: stop the clusters this sweep started, then exit 130 (cli/interrupt.ts). */
function destroyClustersOnSignal(workDir: string): void {
  onInterrupt(async () => {
    // The runs' own `finally` never comes: the clean-up owns the exit. Stop the servers first,
    // then remove their directories and the work directory, and say what was cleaned.
    let clusters = 0;
    if (fs.existsSync(workDir)) {
      for (const d of fs.readdirSync(workDir)) {
        const dir = path.join(workDir, d);
        await (isPgCluster(dir) ? destroyPgCluster(dir) : destroyCluster(dir));
        clusters++;
      }
      fs.rmSync(workDir, { recursive: true, force: true });
    }
    console.error(
      `\nsweep interrupted: stopped the servers of ${clusters} cluster${clusters === 1 ? '' : 's'} it had started and removed ${workDir}; no results written`,
    );
  });
}

/** The sweep's result on stdout: JSON, or the seed's tables as written to tables.md. */
function printSweep(
  output: SweepOutput,
  written: { dir: string; files: string[] },
  json: boolean,
  modelOnly: boolean,
  runsNote: string,
): void {
  const { kind, cells, settings } = output;
  if (json) {
    printJson({
      kind,
      dir: written.dir,
      files: written.files,
      wallSeconds: output.wallSeconds,
      settings,
      cells,
      ...(kind === 'threshold'
        ? {
            ...(modelOnly ? {} : { crossover: computeCrossover(cells) }),
            modeledCrossover: computeCrossover(cells, 'modeled'),
          }
        : {}),
    });
    return;
  }
  console.log('');
  console.log(fs.readFileSync(path.join(written.dir, 'tables.md'), 'utf8').trimEnd());
  console.log('');
  console.log(`${runsNote}; finished in ${fmtDuration(output.wallSeconds)}.`);
  console.log(`files: ${written.dir}/{${written.files.join(',')}}`);
}

/** The sweep's name: threshold or multi (strategies is dispatched before). */
function sweepKindOf(kindArg: string | undefined): SweepKind {
  if (kindArg === 'threshold' || kindArg === 'multi') return kindArg;
  throw new UsageError(
    `${kindArg === undefined ? 'missing sweep' : `unknown sweep "${kindArg}"`} (threshold, multi or strategies)\n${USAGE}`,
  );
}

/** What every cell runs with. */
function sweepSettingsOf(values: SweepValues, profile: CostProfile): SweepSettings {
  return {
    primarySharedBuffers: values['primary-shared-buffers'],
    thresholdDivisor: positiveInt(values['threshold-divisor'], 'threshold-divisor'),
    workDir: path.resolve(values['work-dir'] ?? defaultWorkDir()),
    waitSeconds: positiveInt(values['wait-seconds'], 'wait-seconds'),
    standbys: positiveInt(values.standbys, 'standbys'),
    pgBin: values['pg-bin'],
    profile,
  };
}

/** The first line and the last: how many runs per cell, and which seconds are modeled. */
function runsNoteOf(r: ReturnType<typeof runsAndEngines>, profile: CostProfile): string {
  const { modelOnly, runs, warmupRuns } = r;
  return modelOnly
    ? `model only: counts in-process, modeled PostgreSQL seconds (cost profile ${profile.name}), nothing measured`
    : `${runs < SEED_RUNS ? `${runs} run${runs === 1 ? '' : 's'} per cell (the seed averaged ${SEED_RUNS}; pass --runs ${SEED_RUNS} for its averaging)` : `${runs} runs per cell`}${warmupRuns ? ` after ${warmupRuns} unrecorded warm-up pass${warmupRuns === 1 ? '' : 'es'}` : ''}; modeled PostgreSQL seconds with cost profile ${profile.name}`;
}

/** Run every cell (or only count them, --model-only) with a progress bar; the work dir goes after. */
async function runPlan(
  plan: CellSpec[],
  r: ReturnType<typeof runsAndEngines>,
  settings: SweepSettings,
): Promise<RunRecord[]> {
  const { modelOnly, runs, warmupRuns } = r;
  const bar = progressBar(plan.length * (runs + warmupRuns), false);
  try {
    return modelOnly
      ? await runSweepModelOnly(plan, settings, (p) => bar.update(p))
      : // Two server processes per cell: start them from one bundle built now, not through tsx.
        await withEntryBundle(() =>
          runSweep(plan, runs, settings, (p) => bar.update(p), { warmupRuns }),
        );
  } finally {
    bar.stop();
    try {
      await settings.templates?.removeAll();
    } finally {
      fs.rmSync(settings.workDir, { recursive: true, force: true });
    }
  }
}

runCli(async () => {
  const { cmd: kindArg, rest } = splitCommand(process.argv.slice(2), SWEEP_FLAGS);
  if (kindArg === 'strategies')
    return strategiesSweep(rest, (total) => progressBar(total, false), USAGE);
  const kind = sweepKindOf(kindArg);
  const { values, positionals } = parseCli(rest, SWEEP_OPTIONS, USAGE);
  if (positionals.length > 0)
    throw new UsageError(`unexpected argument "${positionals[0]}"\n${USAGE}`);
  const json = values.json;
  const sharedBuffers = list(values['shared-buffers'], 'shared-buffers');
  const sizes = sharedBuffers.map((sb) => ({ sb, nBuffers: parseSharedBuffers(sb).nBuffers }));
  parseSharedBuffers(values['primary-shared-buffers']);
  const profile = loadProfile(values.profile);
  const r = runsAndEngines(kind, values);
  const { modelOnly, runs, warmupRuns, engines, pgVersions } = r;
  const pgServers = await checkPgVersions(engines, pgVersions, values['pg-bin'], profile);
  const settings = sweepSettingsOf(values, profile);
  const { plan, described } = planOf(kind, values, sizes, engines, pgVersions);
  if (values.template) {
    checkTemplateSpace(plan, settings.workDir);
    settings.templates = new LoadedTemplates(settings.workDir);
  }
  const settingsOut = {
    engines,
    ...(pgVersions.length > 0 ? { pgVersions } : {}),
    ...(pgServers.length > 0 ? { pgServers } : {}),
    sharedBuffers,
    ...described,
    runs,
    warmupRuns,
    primarySharedBuffers: settings.primarySharedBuffers,
    thresholdDivisor: settings.thresholdDivisor,
    synchronousCommit: 'remote_write',
    standbys: settings.standbys,
    profile: profile.name,
    modelOnly,
    ...(values.template ? { templates: true } : {}),
  };
  const runsNote = runsNoteOf(r, profile);
  if (!json)
    console.log(
      `seed 001 ${kind === 'threshold' ? 'Test A (threshold)' : 'Test B (multi)'}: ${plan.length} cells × ${runsNote}; shared_buffers ${sharedBuffers.join(', ')}`,
    );
  if (!json)
    for (const s of pgServers) console.log(`PostgreSQL ${s.major}: ${s.version}, ${s.build}`);
  if (!json && settings.templates !== undefined)
    console.log(
      `--template: each relation loaded once per major under ${settings.workDir}, every PostgreSQL run starting from copies of it; removed when the sweep ends`,
    );
  destroyClustersOnSignal(settings.workDir);
  const startedAt = new Date();
  const records = await runPlan(plan, r, settings);
  const finishedAt = new Date();
  const output: SweepOutput = {
    kind,
    startedAt: startedAt.toISOString(),
    finishedAt: finishedAt.toISOString(),
    wallSeconds: (finishedAt.getTime() - startedAt.getTime()) / 1000,
    settings: settingsOut,
    records,
    cells: summarise(plan, records),
    published: engines.includes('postgres') ? publishedPoints(plan) : [],
  };
  printSweep(output, writeResults(values.out, output), json, modelOnly, runsNote);
  return 0;
}, USAGE);
