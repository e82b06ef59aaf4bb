/**
 * `npm run sweep -- strategies [options]`: the strategy lab's command line — the failover of every
 * drop strategy on seed 001's Test B workloads (measured and modeled), the read-only workload they
 * tax, and the memory they add; prints the tables and writes results/<timestamp>/.
 *
 * Entry points: `strategiesSweep(args, progress)`, `STRATEGIES_USAGE`.
 */
import * as fs from 'node:fs';
import * as path from 'node:path';
import { DEFAULT_PROFILE, loadProfile } from '../../cost-model/profile.ts';
import { DROP_STRATEGIES } from '../../storage/drop.ts';
import { parseSharedBuffers } from '../../storage/shared-buffers.ts';
import { parseDropStrategy } from '../../server/settings.ts';
import { list, parseCli, positiveInt, printJson, UsageError } from '../cli/command.ts';
import { renderStrategies, type StrategiesOutput } from './lab-report.ts';
import { writeResultFiles } from '../report/write-results.ts';
import { measureReadOnly, strategyMemory } from './readonly-workload.ts';
import { runStrategyFailovers, STRATEGY_WORKLOADS, type StrategyWorkload } from './lab.ts';
import { DEFAULT_SHARED_BUFFERS } from '../experiment/sweep-runner.ts';

export const STRATEGIES_USAGE = `  strategies the seed debate replayed: every drop strategy (${DROP_STRATEGIES.join(', ')}) on Test B
             (--tables one-block tables; VACUUM and TRUNCATE, int-only and TOAST-like), measured in-process
             and modeled with --profile; a pgbench -S-like read-only workload at --hit-ratios; memory per buffer
             [--tables 1000] [--workloads ${STRATEGY_WORKLOADS.join(',')}] [--strategies ${DROP_STRATEGIES.join(',')}]
             [--runs 1] [--profile ${DEFAULT_PROFILE}] [--readonly-shared-buffers 1GB] [--hit-ratios 0.5,0.9,0.99]
             [--readonly-reads 30000] [--readonly-rounds 40]`;

/** What sweep.ts's progress bar takes. */
export interface ProgressSink {
  update(p: {
    done: number;
    total: number;
    weightDone: number;
    weightTotal: number;
    current: string;
    lastRecord: null;
  }): void;
  stop(): void;
}

/** `strategies`'s options (parseArgs). */
const STRATEGIES_OPTIONS = {
  'shared-buffers': { type: 'string', default: DEFAULT_SHARED_BUFFERS.join(',') },
  tables: { type: 'string', default: '1000' },
  workloads: { type: 'string', default: STRATEGY_WORKLOADS.join(',') },
  strategies: { type: 'string', default: DROP_STRATEGIES.join(',') },
  runs: { type: 'string', default: '1' },
  'threshold-divisor': { type: 'string', default: '32' },
  profile: { type: 'string', default: DEFAULT_PROFILE },
  'readonly-shared-buffers': { type: 'string', default: '1GB' },
  'hit-ratios': { type: 'string', default: '0.5,0.9,0.99' },
  'readonly-reads': { type: 'string', default: '30000' },
  'readonly-rounds': { type: 'string', default: '40' },
  out: { type: 'string', default: 'results' },
  json: { type: 'boolean', default: false },
} as const;

type StrategiesValues = ReturnType<typeof parseCli<typeof STRATEGIES_OPTIONS>>['values'];

/** The lab's settings from its options, every one checked before anything runs. */
function labSettings(values: StrategiesValues) {
  const sharedBuffers = list(values['shared-buffers'], 'shared-buffers');
  for (const sb of sharedBuffers) parseSharedBuffers(sb);
  const readOnlySb = values['readonly-shared-buffers'];
  const readOnlyNBuffers = parseSharedBuffers(readOnlySb).nBuffers;
  const strategies = [
    ...new Set(list(values.strategies, 'strategies').map((s) => parseDropStrategy(s))),
  ];
  if (!strategies.includes('cached-lookup'))
    throw new UsageError(
      '--strategies must include cached-lookup (the baseline of the read-only regression)',
    );
  const workloads = list(values.workloads, 'workloads').map((w) => {
    if (!(STRATEGY_WORKLOADS as readonly string[]).includes(w))
      throw new UsageError(`unknown workload "${w}" (accepted: ${STRATEGY_WORKLOADS.join(', ')})`);
    return w as StrategyWorkload;
  });
  const hitRatios = list(values['hit-ratios'], 'hit-ratios').map((h) => {
    const x = Number(h);
    if (!(x > 0 && x <= 1)) throw new UsageError(`--hit-ratios: "${h}" is not in (0, 1]`);
    return x;
  });
  const tables = positiveInt(values.tables, 'tables');
  const runs = positiveInt(values.runs, 'runs');
  const thresholdDivisor = positiveInt(values['threshold-divisor'], 'threshold-divisor');
  const reads = positiveInt(values['readonly-reads'], 'readonly-reads');
  const rounds = positiveInt(values['readonly-rounds'], 'readonly-rounds');
  let profile;
  try {
    profile = loadProfile(values.profile);
  } catch (e) {
    throw new UsageError(`--profile: ${(e as Error).message}`);
  }
  const settings = {
    sharedBuffers,
    tables,
    workloads,
    strategies,
    runs,
    thresholdDivisor,
    profile: profile.name,
    readOnlySharedBuffers: readOnlySb,
    hitRatios,
    readOnlyReads: reads,
    readOnlyRounds: rounds,
  };
  return { settings, profile, readOnlyNBuffers };
}

type LabSettings = ReturnType<typeof labSettings>;

/** The progress bar's steps: a failover group per size × workload × run, then the read-only rounds. */
function labSteps(s: LabSettings['settings']): { groups: number; total: number } {
  const groups = s.sharedBuffers.length * s.workloads.length * s.runs;
  return {
    groups,
    total: groups + s.hitRatios.length * s.strategies.length * (s.readOnlyRounds + 2),
  };
}

/** The failovers of every strategy, then the read-only workload, on one progress bar. */
async function runLab({ settings: s, profile, readOnlyNBuffers }: LabSettings, bar: ProgressSink) {
  const { groups, total } = labSteps(s);
  const step = (done: number, label: string) =>
    bar.update({
      done,
      total,
      weightDone: done,
      weightTotal: total,
      current: label,
      lastRecord: null,
    });
  try {
    const failover = await runStrategyFailovers({
      sharedBuffers: s.sharedBuffers,
      workloads: s.workloads,
      strategies: s.strategies,
      tables: s.tables,
      runs: s.runs,
      thresholdDivisor: s.thresholdDivisor,
      profile,
      onProgress: (done, _t, label) => step(done, label),
    });
    const readOnly = measureReadOnly({
      nBuffers: readOnlyNBuffers,
      hitRatios: s.hitRatios,
      strategies: s.strategies,
      reads: s.readOnlyReads,
      rounds: s.readOnlyRounds,
      onMeasured: (done, _t, label) => step(groups + done, label),
    });
    return { failover, readOnly };
  } finally {
    bar.stop();
  }
}

export async function strategiesSweep(
  args: string[],
  makeProgress: (total: number) => ProgressSink,
  usage: string,
): Promise<number> {
  const { values, positionals } = parseCli(args, STRATEGIES_OPTIONS, usage);
  if (positionals.length > 0)
    throw new UsageError(`unexpected argument "${positionals[0]}"\n${usage}`);
  const lab = labSettings(values);
  const { settings, profile } = lab;
  const { sharedBuffers, strategies, workloads, tables, runs, hitRatios } = settings;
  const readOnlySb = settings.readOnlySharedBuffers;
  const json = values.json;
  if (!json) {
    console.log(
      `strategy lab: ${strategies.length} strategies × ${workloads.length} workloads × shared_buffers ${sharedBuffers.join(', ')} ` +
        `(${tables} tables, ${runs} run${runs === 1 ? '' : 's'}); read-only at ${readOnlySb}, hit ratios ${hitRatios.join(', ')}`,
    );
  }
  const { total } = labSteps(settings);
  const bar = makeProgress(total);
  const startedAt = new Date();
  const { failover, readOnly } = await runLab(lab, bar);
  const memorySizes = [
    ...new Set([...sharedBuffers.map((sb) => parseSharedBuffers(sb).nBuffers), 13_107_200]),
  ].sort((a, b) => a - b);
  const finishedAt = new Date();
  const output: StrategiesOutput = {
    startedAt: startedAt.toISOString(),
    finishedAt: finishedAt.toISOString(),
    wallSeconds: (finishedAt.getTime() - startedAt.getTime()) / 1000,
    settings,
    profile: profile.name,
    failover,
    readOnly: { ...readOnly, sharedBuffers: readOnlySb },
    memory: memorySizes.flatMap((n) => strategyMemory(n, strategies)),
  };
  const written = writeResultFiles(values.out, output.startedAt, renderStrategies(output));
  if (json) {
    printJson({
      kind: 'strategies',
      dir: written.dir,
      files: written.files,
      wallSeconds: output.wallSeconds,
      settings,
      failover: failover.cells,
      readOnly: readOnly.cells,
      memory: output.memory,
    });
  } else {
    console.log('');
    console.log(fs.readFileSync(path.join(written.dir, 'tables.md'), 'utf8').trimEnd());
    console.log('');
    console.log(`finished in ${output.wallSeconds.toFixed(0)} s.`);
    console.log(`files: ${written.dir}/{${written.files.join(',')}}`);
  }
  return 0;
}
