/**
 * `npm run simulate -- --seeds N [--from S] [--jobs J] [--json]`: run N seeded scenarios of the
 * whole cluster in one process per job on simulated time, network and disk (sim/), and report
 * seeds, faults by kind, acknowledged commits and lost commits. `--seed S --trace` replays one seed
 * exactly and prints its event trace; `--seed S --shrink` reduces a failing seed's commands while
 * it still fails. `--inject-bug NAME` plants a test-only bug (common/injected-bugs.ts).
 */
import { spawn } from 'node:child_process';
import { availableParallelism } from 'node:os';
import { fileURLToPath } from 'node:url';
import { INJECTED_BUGS, injectedBugs, type InjectedBug } from '../common/injected-bugs.ts';
import {
  generateScenario,
  describeCommand,
  SCENARIO_VERSION,
  type ScenarioVersion,
} from '../sim/scenario.ts';
import { runSimulation } from '../sim/simulation.ts';
import { shrinkScenario } from '../sim/shrink.ts';
import { entryArgs } from '../server/entry.ts';
import { withEntryBundle } from '../server/entry-bundle.ts';
import { parseCli, runCli, UsageError } from './cli/command.ts';
import { exitWhenFlushed } from '../server/process-exit.ts';

/** Seeds are folded to 32 bits by every PRNG stream (subSeed), so a larger one would alias. */
const MAX_SEED = 0xffff_ffff;
/**
 * Commands per scenario at most: a scenario keeps every machine's disk (its WAL, its relations) in
 * memory and runs its commands one after the other, so its time and memory grow with the count
 * (2,000 commands: about 250 MB and half a minute here); longer runs are more seeds, not longer
 * ones.
 */
const MAX_STEPS = 10_000;
/** Worker processes at most: one per core is the useful number; more only thrash. */
const MAX_JOBS = 256;

const USAGE = `usage: npm run simulate -- [options]
  --seeds N          run N seeded scenarios (default 100) starting at --from S (default 1)
  --jobs J           in J worker processes (default: 2, or 1 on a one-core machine; 1 to ${MAX_JOBS})
  --seed S           run one seed and print its outcome; with --trace its whole event trace,
                     with --shrink the smallest command list that still fails
  --steps N          commands per scenario (default 40, at most ${MAX_STEPS})
  --scenario-version V  the scenario format (default ${SCENARIO_VERSION}; 1: the commands seeds drew
                     before the drop mechanism's workloads, 2: before DROP TABLE of many tables
                     in one statement; as the regression seeds were found)
  --json             machine-readable output
  --inject-bug NAME  plant a test-only bug (${INJECTED_BUGS.join(', ')})
  --dir DIR          accepted for symmetry with the other CLIs and ignored: the simulator keeps
                     every machine's disk in memory and writes nothing
  --help             this text
Seeds are 32-bit (0..${MAX_SEED}): every stream is derived from the seed's low 32 bits.`;

function usageError(message: string): never {
  throw new UsageError(`${message}\n${USAGE}`);
}

const OPTIONS = {
  seeds: { type: 'string' },
  from: { type: 'string' },
  seed: { type: 'string' },
  jobs: { type: 'string' },
  trace: { type: 'boolean' },
  shrink: { type: 'boolean' },
  json: { type: 'boolean' },
  steps: { type: 'string' },
  'scenario-version': { type: 'string' },
  'inject-bug': { type: 'string' },
  dir: { type: 'string' },
  help: { type: 'boolean' },
  worker: { type: 'boolean' },
} as const;

/** Read by the CLIs' one parser (cli/command.ts), which lets negative values reach int()'s message. */
function parseOptions() {
  const { values, positionals } = parseCli(process.argv.slice(2), OPTIONS, USAGE);
  if (positionals.length > 0) usageError(`unexpected argument "${positionals[0]}"`);
  return values;
}

/** The options, the commands per scenario and the planted bug: set by `main` before anything runs. */
let values: ReturnType<typeof parseOptions>;
let steps: number;
let bug: string | undefined;

function int(
  name: string,
  text: string | undefined,
  dflt: number,
  max = MAX_SEED,
  why = '',
): number {
  if (text === undefined) return dflt;
  const n = Number(text);
  if (!Number.isSafeInteger(n) || n < 0)
    usageError(`--${name} must be a non-negative integer, got "${text}"`);
  if (n > max) usageError(`--${name} must be at most ${max}${why}, got "${text}"`);
  return n;
}

let version: ScenarioVersion;
const scenarioOf = (seed: number) => generateScenario(seed, steps, undefined, version);

interface Totals {
  seeds: number;
  failed: Array<{ seed: number; violation: string }>;
  violations: number;
  faults: Record<string, number>;
  acknowledged: number;
  lost: number;
  lostAllowed: number;
  lostToCorruption: number;
  lostToChoice: number;
  /** Seeds per topology kind (nodes, shape, synchronous_standby_names form, operator). */
  topologies: Record<string, number>;
  panics: number;
  failovers: number;
  /** Every failover's resume → read-write time in simulated ms, and modeled PostgreSQL seconds. */
  failoverMs: number[];
  failoverModeledS: number[];
  events: number;
  simMs: number;
  /** Drops by node kind and path (SIM-10), and how many seeds had at least one of each. */
  drops: Record<string, number>;
  dropSeeds: Record<string, number>;
  /** SIM-11's comparisons of a caught-up standby after a restart or failover. */
  replicaComparisons: number;
}

function emptyTotals(): Totals {
  return {
    seeds: 0,
    failed: [],
    violations: 0,
    faults: {},
    acknowledged: 0,
    lost: 0,
    lostAllowed: 0,
    lostToCorruption: 0,
    lostToChoice: 0,
    topologies: {},
    panics: 0,
    failovers: 0,
    failoverMs: [],
    failoverModeledS: [],
    events: 0,
    simMs: 0,
    drops: {},
    dropSeeds: {},
    replicaComparisons: 0,
  };
}

function merge(into: Totals, t: Totals): void {
  into.seeds += t.seeds;
  into.failed.push(...t.failed);
  into.violations += t.violations;
  for (const [k, v] of Object.entries(t.faults)) into.faults[k] = (into.faults[k] ?? 0) + v;
  into.acknowledged += t.acknowledged;
  into.lost += t.lost;
  into.lostAllowed += t.lostAllowed;
  into.lostToCorruption += t.lostToCorruption;
  into.lostToChoice += t.lostToChoice;
  for (const [k, v] of Object.entries(t.topologies))
    into.topologies[k] = (into.topologies[k] ?? 0) + v;
  into.panics += t.panics;
  into.failovers += t.failovers;
  into.failoverMs.push(...t.failoverMs);
  into.failoverModeledS.push(...t.failoverModeledS);
  into.events += t.events;
  into.simMs += t.simMs;
  for (const [k, v] of Object.entries(t.drops)) into.drops[k] = (into.drops[k] ?? 0) + v;
  for (const [k, v] of Object.entries(t.dropSeeds))
    into.dropSeeds[k] = (into.dropSeeds[k] ?? 0) + v;
  into.replicaComparisons += t.replicaComparisons;
}

/** Run seeds in this process; `onSeed` gets each one's totals (the caller keeps their sum). */
async function runRange(
  from: number,
  n: number,
  onSeed: (seed: number, t: Totals) => void,
): Promise<void> {
  for (let seed = from; seed < from + n; seed++) {
    const r = await runSimulation(scenarioOf(seed));
    const t: Totals = {
      seeds: 1,
      failed: r.ok ? [] : [{ seed, violation: r.violations[0]! }],
      violations: r.violations.length,
      faults: r.faults,
      acknowledged: r.acknowledged,
      lost: r.lost,
      lostAllowed: r.lostAllowed,
      lostToCorruption: r.lostToCorruption,
      lostToChoice: r.lostToChoice,
      topologies: Object.fromEntries(r.topology.map((k) => [k, 1])),
      panics: r.panics,
      failovers: r.failovers,
      failoverMs: r.failoverTimes.flatMap((f) => (f.failoverMs === null ? [] : [f.failoverMs])),
      failoverModeledS: r.failoverTimes.flatMap((f) => (f.modeledS === null ? [] : [f.modeledS])),
      events: r.events,
      simMs: r.simMs,
      drops: r.drops,
      dropSeeds: Object.fromEntries(coverageKinds(r.drops, r.faults).map((k) => [k, 1])),
      replicaComparisons: r.replicaComparisons,
    };
    onSeed(seed, t);
  }
}

/**
 * A worker ends when its parent does, even one killed by SIGKILL (no clean-up ran): the IPC
 * channel the parent opened closes then, and the scheduler yields to the event loop every 256
 * simulated events at most, so 'disconnect' is seen within them. Without it the workers ran on.
 */
function exitWithParent(): void {
  if (process.send === undefined) return; // started by hand, without the parent's channel
  const stop = () => {
    console.error(`simulation worker ${process.pid}: its parent ended; stopping`);
    void exitWhenFlushed(1);
  };
  // A parent killed while this worker was still loading: the channel closed before we listened.
  if (!process.connected) return stop();
  process.on('disconnect', stop);
}

/** A block of seeds: `n` seeds from `from`. */
type Block = { from: number; n: number };

/** What the parent tells a worker that has finished its blocks: the next one, or the end. */
type WorkerOrder = Block | { end: true };

/**
 * Seeds a worker takes at a time: small enough that the jobs end together (a worker that runs
 * slower, e.g. beside this process on its core, takes fewer blocks), large enough that the
 * hand-over (one message each way) costs nothing. With a half of the range each, one of two
 * workers ended 6.8 s before the other in a 76 s run of 10,000 seeds: 4.6 % of the cores idle.
 */
function blockSize(n: number, jobs: number): number {
  return Math.max(1, Math.min(200, Math.ceil(n / (jobs * 8))));
}

/**
 * One child process per job; each runs a block of seeds, then asks for the next, until the range
 * is done. `onSeed` gets every seed's totals, in the order they finish.
 */
function runJobs(
  from: number,
  n: number,
  jobs: number,
  onSeed: (seed: number, t: Totals) => void,
): Promise<void> {
  const block = blockSize(n, jobs);
  let next = from;
  const take = (): Block | null => {
    if (next >= from + n) return null;
    const b = { from: next, n: Math.min(block, from + n - next) };
    next += b.n;
    return b;
  };
  const children: Array<Promise<void>> = [];
  for (let j = 0; j < jobs; j++) {
    const first = take();
    if (first === null) break;
    children.push(runWorker(workerArgs(first), take, onSeed));
  }
  return Promise.all(children).then(() => undefined);
}

/** The command line of a worker whose first block is `first`. */
function workerArgs(first: Block): string[] {
  const args = [
    // A seed allocates a few hundred MB of short-lived objects (messages, records, promises);
    // with V8's default 16 MB young generation most of them survive a scavenge or two and are
    // copied. 64 MB lets them die young: 1,500 seeds on 2 jobs 36.8 s -> 32.2 s here (quiet).
    '--max-semi-space-size=64',
    // One thread per worker: with one worker per core, V8's helper threads (concurrent
    // compilation, parallel scavenges, concurrent marking; four on this machine) only take
    // turns with the other worker's main thread. On the main thread the same work costs less
    // CPU: 3,000 seeds on 2 jobs, three runs of each alternated, 1.096 times the CPU and
    // 1.094 times the wall time without it (medians).
    '--single-threaded',
    ...entryArgs(fileURLToPath(import.meta.url)),
    '--worker',
    '--from',
    String(first.from),
    '--seeds',
    String(first.n),
    '--steps',
    String(steps),
    '--scenario-version',
    String(version),
  ];
  if (bug !== undefined) args.push('--inject-bug', bug);
  return args;
}

/** Start a worker; hand it the next block (`take`) whenever it is idle; end with it. */
function runWorker(
  args: string[],
  take: () => Block | null,
  onSeed: (seed: number, t: Totals) => void,
): Promise<void> {
  return new Promise<void>((resolve, reject) => {
    // The IPC channel is the worker's lifeline (it closes when this process dies, however) and
    // carries its requests for work.
    const child = spawn(process.execPath, args, {
      stdio: ['ignore', 'pipe', 'inherit', 'ipc'],
    });
    let buf = '';
    child.stdout!.setEncoding('utf8');
    child.stdout!.on('data', (chunk: string) => {
      buf += chunk;
      let nl: number;
      while ((nl = buf.indexOf('\n')) >= 0) {
        const line = buf.slice(0, nl);
        buf = buf.slice(nl + 1);
        const msg = JSON.parse(line) as { seed: number; t: Totals };
        onSeed(msg.seed, msg.t);
      }
    });
    // A worker that finished its block is idle: give it the next one, or tell it to end.
    child.on('message', () => {
      const order: WorkerOrder = take() ?? { end: true };
      child.send(order);
    });
    child.on('error', reject);
    child.on('exit', (code) =>
      code === 0 || code === 1
        ? resolve()
        : reject(new Error(`simulation worker exited with ${code}`)),
    );
  });
}

/**
 * A job of the parent: one JSON line per seed on stdout; its first block from the command line,
 * then, each time it says it is idle (a message on the IPC channel), the block the parent sends,
 * until the parent says the range is done. Started by hand (no channel), it runs its block only.
 */
async function workerLoop(from: number, n: number): Promise<void> {
  const print = (seed: number, t: Totals) => console.log(JSON.stringify({ seed, t }));
  await runRange(from, n, print);
  if (process.send === undefined) return;
  for (;;) {
    const order = await new Promise<WorkerOrder>((resolve) => {
      process.once('message', (m) => resolve(m as WorkerOrder));
      process.send!({ idle: true });
    });
    if ('end' in order) return;
    await runRange(order.from, order.n, print);
  }
}

async function one(seed: number): Promise<number> {
  const scenario = scenarioOf(seed);
  const r = await runSimulation(scenario, { trace: values.trace === true });
  if (values.trace) for (const line of r.trace ?? []) console.log(line);
  if (values.json) console.log(JSON.stringify({ ...r, trace: undefined }));
  else {
    console.log(
      `seed ${seed}: ${r.ok ? 'ok' : 'FAILED'}; ${r.steps} steps, ${r.events} events, ${r.simMs} simulated ms, ${r.acknowledged} acknowledged, lost ${r.lost}, trace ${r.traceHash}`,
    );
    for (const v of r.violations) console.log(`  violation: ${v}`);
  }
  if (!r.ok && values.shrink) {
    const small = await shrinkScenario(scenario);
    console.log(
      `shrunk to ${small.commands.length} of ${scenario.commands.length} commands (options ${JSON.stringify(small.options)}):`,
    );
    for (const c of small.commands) console.log(`  ${describeCommand(c)}`);
  }
  return r.ok ? 0 : 1;
}

async function many(from: number, n: number, jobs: number): Promise<number> {
  const t0 = performance.now();
  let done = 0;
  // The sum of every seed so far: the summary, and what an interrupted run reports.
  const totals = emptyTotals();
  reportWhenInterrupted(totals, from, n, jobs, t0);
  const onSeed = (seed: number, t: Totals) => {
    done++;
    merge(totals, t);
    if (values.json) return;
    for (const f of t.failed) {
      console.log(`seed ${seed} FAILED: ${f.violation}`);
      console.log(`  replay: npm run simulate -- --seed ${seed} --trace`);
    }
    if (done % 500 === 0)
      console.log(`${done}/${n} seeds, ${((performance.now() - t0) / 1000).toFixed(1)} s`);
  };
  // The workers run an esbuild bundle of this script (server/entry-bundle.ts), not tsx: tsx
  // transpiles with keepNames, which wraps every function and class it creates in a name-setting
  // call, and its loader costs about a second per worker start.
  if (jobs > 1) await withEntryBundle(() => runJobs(from, n, jobs, onSeed));
  else await runRange(from, n, onSeed);
  const wallS = (performance.now() - t0) / 1000;
  const summary = summaryOf(totals, from, jobs, wallS);
  if (values.json) console.log(JSON.stringify(summary));
  else printSummary(summary, totals, from, n, jobs, wallS);
  return totals.failed.length === 0 ? 0 : 1;
}

/**
 * A long run stopped by SIGINT or SIGTERM (Ctrl-C, a deadline) still reports what it ran: the
 * summary of the seeds finished so far, after a line saying the run was interrupted (with several
 * jobs each worker had run a prefix of the block it was on, so they are not one contiguous range).
 */
function reportWhenInterrupted(soFar: Totals, from: number, n: number, jobs: number, t0: number) {
  const report = (signal: string) => {
    const wallS = (performance.now() - t0) / 1000;
    const summary = { ...summaryOf(soFar, from, jobs, wallS), interrupted: signal };
    if (values.json) console.log(JSON.stringify(summary));
    else {
      console.log(
        `interrupted (${signal}) after ${soFar.seeds} of ${n} seeds` +
          (jobs > 1
            ? ` (${jobs} jobs took blocks of ${blockSize(n, jobs)} seeds in turn from the start of the range; their last blocks are unfinished)`
            : ''),
      );
      printSummary(summary, soFar, from, n, jobs, wallS);
    }
    void exitWhenFlushed(130);
  };
  process.once('SIGINT', () => report('SIGINT'));
  process.once('SIGTERM', () => report('SIGTERM'));
}

/** The run's figures (the --json line, and what printSummary prints). */
function summaryOf(totals: Totals, from: number, jobs: number, wallS: number) {
  const q = (xs: number[], p: number) => {
    if (xs.length === 0) return null;
    const sorted = [...xs].sort((a, b) => a - b);
    return sorted[Math.min(sorted.length - 1, Math.floor(p * sorted.length))]!;
  };
  const failoverTime = {
    simulatedMs: {
      median: q(totals.failoverMs, 0.5),
      p99: q(totals.failoverMs, 0.99),
      max: q(totals.failoverMs, 1),
    },
    modeledS: {
      median: q(totals.failoverModeledS, 0.5),
      p99: q(totals.failoverModeledS, 0.99),
      max: q(totals.failoverModeledS, 1),
    },
  };
  return {
    seeds: totals.seeds,
    from,
    jobs,
    failedSeeds: totals.failed.map((f) => f.seed).sort((a, b) => a - b),
    violations: totals.violations,
    faults: totals.faults,
    acknowledged: totals.acknowledged,
    lost: totals.lost,
    lostAllowed: totals.lostAllowed,
    lostToCorruption: totals.lostToCorruption,
    lostToChoice: totals.lostToChoice,
    topologies: totals.topologies,
    panics: totals.panics,
    failovers: totals.failovers,
    failoverTime,
    events: totals.events,
    drops: totals.drops,
    seedsReaching: totals.dropSeeds,
    replicaComparisons: totals.replicaComparisons,
    simulatedHours: +(totals.simMs / 3_600_000).toFixed(2),
    wallSeconds: +wallS.toFixed(1),
    seedsPerSecond: +(totals.seeds / wallS).toFixed(1),
  };
}

/** The human-readable summary of a run of many seeds. */
function printSummary(
  summary: ReturnType<typeof summaryOf>,
  totals: Totals,
  from: number,
  n: number,
  jobs: number,
  wallS: number,
): void {
  const { failoverTime } = summary;
  console.log(
    `${totals.seeds} seeds (${from}..${from + n - 1}) on ${jobs} job(s) in ${wallS.toFixed(1)} s (${summary.seedsPerSecond} seeds/s), ${summary.simulatedHours} simulated hours, ${totals.events} events`,
  );
  console.log(
    `topologies: ${Object.entries(totals.topologies)
      .sort()
      .map(([k, v]) => `${k} ${v}`)
      .join(', ')}`,
  );
  console.log(
    `faults: ${Object.entries(totals.faults)
      .sort()
      .map(([k, v]) => `${k} ${v}`)
      .join(', ')}`,
  );
  console.log(
    `acknowledged commits ${totals.acknowledged}, lost ${totals.lost}; allowed losses (their level promised nothing: asynchronous, remote_write after a power loss, local at failover) ${totals.lostAllowed}; lost to WAL corruption (media fault, beyond the durability promise) ${totals.lostToCorruption}; of the allowed, synchronous commits lost with the operator's choice of a standby the promise did not cover ${totals.lostToChoice}`,
  );
  const fmt = (x: number | null, unit: string, digits = 0) =>
    x === null ? 'n/a' : `${x.toFixed(digits)} ${unit}`;
  console.log(
    `failovers ${totals.failovers}: resume → read-write median ${fmt(failoverTime.simulatedMs.median, 'simulated ms')}, ` +
      `p99 ${fmt(failoverTime.simulatedMs.p99, 'ms')}, max ${fmt(failoverTime.simulatedMs.max, 'ms')}; ` +
      `modeled PostgreSQL median ${fmt(failoverTime.modeledS.median === null ? null : failoverTime.modeledS.median * 1000, 'ms', 3)}, max ${fmt(failoverTime.modeledS.max === null ? null : failoverTime.modeledS.max * 1000, 'ms', 3)}`,
  );
  console.log(
    `PANICs (a primary's WAL write on a full disk, then crash recovery): ${totals.panics}`,
  );
  console.log(
    `standbys compared block by block with the primary after a restart or failover (SIM-11): ${totals.replicaComparisons}`,
  );
  console.log(
    `drops (SIM-10): ${Object.entries(totals.drops)
      .sort()
      .map(([k, v]) => `${k} ${v}`)
      .join(', ')}`,
  );
  const share = (k: string) =>
    `${(((totals.dropSeeds[k] ?? 0) / Math.max(1, totals.seeds)) * 100).toFixed(1)} %`;
  console.log(
    `seeds reaching: ${Object.keys(totals.dropSeeds)
      .sort()
      .map((k) => `${k} ${totals.dropSeeds[k]} (${share(k)})`)
      .join(', ')}`,
  );
  console.log(
    totals.violations === 0
      ? `invariant violations: none in ${totals.seeds} seeds`
      : `invariant violations: ${totals.violations} in ${totals.failed.length} of ${totals.seeds} seeds`,
  );
}

/**
 * What a seed reached, for the "seeds reaching" shares: each drop kind and path (SIM-10), any
 * truncation at all, and each drop fault that fired.
 */
function coverageKinds(drops: Record<string, number>, faults: Record<string, number>): string[] {
  const kinds = Object.keys(drops);
  if (kinds.some((k) => k.includes('truncation'))) kinds.push('any truncation');
  if (kinds.some((k) => k.startsWith('replay') && k.includes('full-scan')))
    kinds.push('any replayed full scan');
  if (kinds.some((k) => k.startsWith('replay') && k.includes('cached-lookup')))
    kinds.push('any replayed lookup');
  for (const k of Object.keys(faults)) if (k.startsWith('drop fault fired')) kinds.push(k);
  return kinds;
}

runCli(async () => {
  values = parseOptions();
  if (values.help) {
    console.log(USAGE);
    return 0;
  }
  if (values.dir !== undefined && !values.worker)
    console.error(
      `note: --dir ignored: the simulator keeps every disk in memory and writes nothing`,
    );
  steps = int('steps', values.steps, 40, MAX_STEPS, ' (commands per scenario; run more seeds)');
  const v = int('scenario-version', values['scenario-version'], SCENARIO_VERSION, SCENARIO_VERSION);
  if (v < 1) usageError(`--scenario-version must be 1 to ${SCENARIO_VERSION}, got "${v}"`);
  version = v as ScenarioVersion;
  bug = values['inject-bug'];
  if (bug !== undefined) {
    if (!(INJECTED_BUGS as string[]).includes(bug))
      usageError(`--inject-bug must be one of ${INJECTED_BUGS.join(', ')}, got "${bug}"`);
    injectedBugs[bug as InjectedBug] = true;
    if (!values.worker && !values.json) console.log(`planted test-only bug: ${bug}`);
  }
  if (values.worker) {
    exitWithParent();
    await workerLoop(int('from', values.from, 1), int('seeds', values.seeds, 1));
    return 0;
  }
  if (values.seed !== undefined) return one(int('seed', values.seed, 0));
  const from = int('from', values.from, 1);
  const n = int('seeds', values.seeds, 100);
  if (from + n - 1 > MAX_SEED)
    usageError(`--from ${from} --seeds ${n} runs past the last seed, ${MAX_SEED}`);
  const jobs = int('jobs', values.jobs, Math.min(2, availableParallelism()), MAX_JOBS);
  if (jobs === 0) usageError(`--jobs must be at least 1, got "${values.jobs}"`);
  return many(from, n, jobs);
});
