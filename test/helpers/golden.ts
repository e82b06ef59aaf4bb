/**
 * Golden scenarios in toydb's manner (goldenscript): a text file of statements and operator
 * commands, run on the deterministic simulator (sim/: the production node code on simulated time,
 * disk and network), and the text it produces — one compact status line per node and its drop
 * counters — kept in the same file below a `----` line. A change in behaviour shows up as a text
 * diff of that part; `UPDATE_GOLDEN=1` rewrites it (test/README.md, "Golden scenarios").
 *
 * Input lines (one command each; `#` starts a comment line). Every command but `status` and
 * `converge` is the simulator's (sim/scenario.ts) and is followed by `step_ms` of simulated time:
 *   option synchronous_commit|drop_strategy|primary_drop_strategy|standby_drop_strategy|
 *          shared_buffers|step_ms VALUE     (before the first command)
 *   sql STATEMENT                       a write statement on the current primary
 *   pause | resume | restartpoint | cut
 *   crash primary|standby [power]       the process dies (power: unsynced writes are lost too)
 *   stop primary|standby smart|fast|immediate
 *   failover crash|power|immediate|fast stop the primary, promote the standby, rebuild the old one
 *   wait MS
 *   status                              print the two nodes (the output's `> status` blocks)
 *   converge                            heal, start what is down, resume replay, wait until the
 *                                       standby has caught up, check the ledger (sim/README)
 * A node that crashed or stopped stays down until the next `converge`. After the last command the
 * run converges and prints the nodes once more, and any violation of the simulator's checks.
 *
 * Entry points: `parseGolden`, `runGolden`, `GOLDEN_SEPARATOR`.
 */
import { Simulation } from '../../sim/simulation.ts';
import {
  TWO_NODES,
  type Role,
  type Scenario,
  type SimCommand,
  type SimOptions,
} from '../../sim/scenario.ts';
import type { ServerNode } from '../../server/node.ts';
import { DROP_PATHS, DROP_STRATEGIES, type DropStrategy } from '../../storage/drop.ts';
import { parseSynchronousCommit } from '../../server/settings.ts';

/** The line between a file's commands and the output they produce. */
export const GOLDEN_SEPARATOR = '----';

/** The seed of every golden run: it draws only the disk's and network's fault streams. */
const GOLDEN_SEED = 1;

export interface GoldenFile {
  /** The commands part, as written (comments included), without the separator. */
  input: string;
  /** The output part as stored (empty when the file has none yet). */
  expected: string;
  options: SimOptions;
  commands: GoldenCommand[];
}

function defaultOptions(): SimOptions {
  return {
    synchronousCommit: 'on',
    dropStrategy: { primary: 'cached-lookup', standby: 'cached-lookup' },
    sharedBuffers: '256kB',
    walSegmentSize: 64 * 1024,
    link: { delayMinMs: 0, delayMaxMs: 2, cutDetectMs: 50 },
    stepMs: 100,
  };
}

const role = (w: string | undefined, line: string): Role => {
  if (w === 'primary' || w === 'standby') return w;
  throw new Error(`expected primary or standby in "${line}"`);
};

const ms = (w: string | undefined, line: string): number => {
  const n = Number(w);
  if (w === undefined || !Number.isInteger(n) || n < 0)
    throw new Error(`expected a number of milliseconds in "${line}"`);
  return n;
};

const strategy = (w: string | undefined, line: string): DropStrategy => {
  if (!(DROP_STRATEGIES as readonly string[]).includes(w ?? ''))
    throw new Error(`unknown drop strategy in "${line}" (${DROP_STRATEGIES.join(', ')})`);
  return w as DropStrategy;
};

function applyOption(o: SimOptions, name: string | undefined, value: string, line: string): void {
  switch (name) {
    case 'synchronous_commit':
      o.synchronousCommit = parseSynchronousCommit(value);
      return;
    case 'drop_strategy':
      o.dropStrategy = { primary: strategy(value, line), standby: strategy(value, line) };
      return;
    case 'primary_drop_strategy':
      o.dropStrategy.primary = strategy(value, line);
      return;
    case 'standby_drop_strategy':
      o.dropStrategy.standby = strategy(value, line);
      return;
    case 'shared_buffers':
      o.sharedBuffers = value;
      return;
    case 'step_ms':
      o.stepMs = ms(value, line);
      return;
    default:
      throw new Error(`unknown option in "${line}"`);
  }
}

type GoldenCommand = { line: string } & (
  { kind: 'sim'; command: SimCommand } | { kind: 'status' } | { kind: 'converge' }
);

/** One command line as the simulator's command. */
function commandOf(line: string): SimCommand {
  const [op, ...args] = line.split(/\s+/);
  switch (op) {
    case 'sql':
      return { op: 'sql', sql: line.slice(4).trim() };
    case 'pause':
    case 'resume':
    case 'restartpoint':
    case 'cut':
      return { op };
    case 'crash':
      return { op, node: role(args[0], line), power: args[1] === 'power', downMs: 0 };
    case 'stop': {
      const mode = args[1];
      if (mode !== 'smart' && mode !== 'fast' && mode !== 'immediate')
        throw new Error(`expected smart, fast or immediate in "${line}"`);
      return { op, node: role(args[0], line), mode, downMs: 0 };
    }
    case 'failover': {
      const how = args[0];
      if (how !== 'crash' && how !== 'power' && how !== 'immediate' && how !== 'fast')
        throw new Error(`expected crash, power, immediate or fast in "${line}"`);
      return { op, how };
    }
    case 'wait':
      return { op, ms: ms(args[0], line) };
    default:
      throw new Error(`unknown command "${op}" in "${line}"`);
  }
}

export function parseGolden(text: string): GoldenFile {
  const lines = text.split('\n');
  const sep = lines.indexOf(GOLDEN_SEPARATOR);
  const inputLines = sep === -1 ? lines : lines.slice(0, sep);
  const options = defaultOptions();
  const commands: GoldenCommand[] = [];
  for (const raw of inputLines) {
    const line = raw.trim();
    if (line === '' || line.startsWith('#')) continue;
    if (line.startsWith('option ')) {
      const [, name, value = ''] = line.split(/\s+/);
      applyOption(options, name, value, line);
    } else if (line === 'status' || line === 'converge') commands.push({ line, kind: line });
    else commands.push({ line, kind: 'sim', command: commandOf(line) });
  }
  return {
    input: inputLines.join('\n').trimEnd(),
    expected: sep === -1 ? '' : lines.slice(sep + 1).join('\n'),
    options,
    commands,
  };
}

/**
 * One node: its machine (A started as the primary), lifecycle state and positions on one line,
 * its drop counters on the next.
 */
function nodeLines(role: Role, node: ServerNode | null): string[] {
  if (node === null) return [`${role}: down`];
  const s = node.status();
  const where =
    s.role === 'standby'
      ? `receive=${s.receiveLsn} replay=${s.replayLsn} replayed=${s.recordsReplayed} pause=${s.pauseState.replace(' ', '-')}`
      : `senders=${s.replication.length}`;
  const startup = `${s.startupReplay.records}${s.startupReplay.crashRecovery ? ' (crash recovery)' : ''}`;
  const d = s.drop;
  return [
    `${role} ${node.config.name}: ${s.lifecycle} tl=${s.timeline} insert=${s.insertLsn} flush=${s.flushLsn} ${where} ` +
      `startup-replay=${startup} images=${s.dataImage.writes} wal-files=${s.walFiles}`,
    `  drops ${s.dropStrategy}: ${DROP_PATHS.map((p) => `${p}=${d.drops[p]}`).join(' ')} ` +
      `scanned=${d.scanned} probes=${d.probes} invalidated=${d.invalidated} bsearch-scans=${d.bsearchScans}`,
  ];
}

/** The two nodes, primary first; each `status` and the end of the run print this. */
function statusBlock(heading: string, sim: Simulation): string[] {
  return [
    `> ${heading}`,
    ...nodeLines('primary', sim.nodeOf('primary')),
    ...nodeLines('standby', sim.nodeOf('standby')),
  ];
}

/**
 * Run a golden file's commands on the simulator (in-process, deterministic); its output text: a
 * block per `status`, then the nodes after the final convergence and the run's violations.
 */
export async function runGolden(file: GoldenFile): Promise<string> {
  const scenario: Scenario = {
    seed: GOLDEN_SEED,
    options: file.options,
    topology: TWO_NODES,
    commands: file.commands.flatMap((c) => (c.kind === 'sim' ? [c.command] : [])),
  };
  const sim = new Simulation(scenario);
  const out: string[] = [];
  await sim.setup();
  let last = 'start';
  for (const c of file.commands) {
    if (c.kind === 'status') {
      out.push(...statusBlock(`status after ${last}`, sim));
      continue;
    }
    if (c.kind === 'converge') await sim.converge();
    else {
      await sim.exec(c.command);
      await sim.exec({ op: 'wait', ms: file.options.stepMs });
      sim.checkInvariants(`after ${c.line}`);
    }
    last = c.line;
  }
  await sim.converge();
  out.push(...statusBlock('end (converged)', sim));
  out.push(`violations: ${sim.violations.length}`);
  for (const v of sim.violations) out.push(`  ${v.split('\n')[0]}`);
  return out.join('\n') + '\n';
}
