/**
 * A simulated scenario: options drawn per seed ("swarm testing": one seed has a slow lossy network
 * and a perfect disk, another the reverse), the cluster's topology (a primary and 1–4 standbys,
 * flat or cascaded, synchronous_standby_names in each grammar form) and a list of commands — the
 * workload and its faults. The list is data, so a failing seed can be shrunk by removing commands
 * (sim/shrink.ts) and replayed from its printed form.
 *
 * Draw order (what keeps old seeds meaningful): the options and the two-node command list come
 * from the `scenario` stream exactly as before several nodes existed, parameters added later from
 * `scenario-ext`; the topology from `topology`; which standby a command hits and the commands only
 * several nodes have (switchover, repoint) from `scenario-n`. A seed whose topology is the
 * two-node one (one standby) therefore runs the commands and faults it always ran.
 */
import { SeededRandom } from '../common/random.ts';
import type { SynchronousCommit, DropStrategy } from '../server/settings.ts';
import type { StopMode } from '../server/control-protocol.ts';

export type Role = 'primary' | 'standby';

/**
 * Which node a command hits: the current primary, or the standby at index `target` of the
 * current standbys in host-name order (modulo their number; absent: the first).
 */
interface Aim {
  node: Role;
  target?: number;
}

export type SimCommand =
  /** A write statement on the current primary (it may wait: sync rep holds it). */
  | { op: 'sql'; sql: string }
  | { op: 'pause'; target?: number }
  | { op: 'resume'; target?: number }
  /** CHECKPOINT on a standby: a restartpoint. */
  | { op: 'restartpoint'; target?: number }
  /** Kill a node's process; `power` also loses the machine's unsynced writes. Restarts after downMs. */
  | ({ op: 'crash'; power: boolean; downMs: number } & Aim)
  /** pg_ctl stop -m mode, then start again after downMs. */
  | ({ op: 'stop'; mode: StopMode; downMs: number } & Aim)
  /** Cut a standby's replication connection to its upstream (both ends see 1006). */
  | { op: 'cut'; target?: number }
  /**
   * Partition the cluster for ms: two nodes, primary | standby; several, `split` gives each node's
   * side (index 0 the primary, then the standbys in order); every link across is cut.
   */
  | { op: 'partition'; ms: number; split?: number[] }
  /**
   * A node's pg_wal is full for ms (writes that extend a file fail with ENOSPC): a standby's
   * walreceiver retries; a primary PANICs at its next WAL write and restarts once space is free.
   */
  | ({ op: 'diskFull'; ms: number } & Aim)
  /**
   * Media corruption: flip a byte inside a WAL record on a node's disk. Standby: a record it has
   * flushed but not replayed; it restarts at the next step. Primary: a record its crash recovery
   * will read; the primary crashes at once and restarts after downMs (sim/README "Corruption").
   */
  | ({ op: 'corrupt'; downMs: number } & Aim)
  /** A node's disk is slow for ms: every write takes up to writeMs more, every fsync up to latencyMs more. */
  | ({ op: 'slowDisk'; latencyMs: number; writeMs: number; ms: number } & Aim)
  /** A node's wall clock steps by ms (NTP); simulated time does not. */
  | ({ op: 'clockJump'; ms: number } & Aim)
  /**
   * Stop the primary (crash, power loss or immediate stop), promote a standby — `choice`: the
   * operator's pick, the most advanced one ('best', the only one with two nodes) or the standby
   * at that index, right or wrong — then bring the old primary back as a standby: `rejoin` tries
   * the production rejoin (refused when its WAL diverged: then a base backup), else a base backup.
   */
  | {
      op: 'failover';
      how: 'crash' | 'power' | 'immediate' | 'fast';
      choice?: 'best' | number;
      rejoin?: boolean;
    }
  /** The production switchover onto the standby at `target` (several nodes only). */
  | { op: 'switchover'; target: number }
  /** Repoint the standby at `target` to stream from node `to` (0 the primary, k the standby k-1). */
  | { op: 'repoint'; target: number; to: number }
  /** Let simulated time pass. */
  | { op: 'wait'; ms: number }
  /** Several write statements issued at once on the primary (as from several sessions). */
  | { op: 'sqlBatch'; sqls: string[] }
  /**
   * Arm a fault inside the next drop on a node (storage/smgr.ts DropFault): between the buffer
   * drop and the truncation of fork #`fork` (or the unlinks), an I/O error or the process killed.
   * On a standby it fires in replay.
   */
  | ({ op: 'dropFault'; kind: 'io' | 'crash'; where: 'truncate' | 'unlink'; fork: number } & Aim);

export interface SimOptions {
  synchronousCommit: SynchronousCommit;
  /** Drop strategy of host A (`primary`) and of every other host (`standby`). */
  dropStrategy: { primary: DropStrategy; standby: DropStrategy };
  sharedBuffers: string;
  walSegmentSize: number;
  link: { delayMinMs: number; delayMaxMs: number; cutDetectMs: number };
  /** Simulated time given to each command before the next one starts. */
  stepMs: number;
  /**
   * wal_keep_size in MB (format 2: its episodes write megabytes of WAL, and a standby that was
   * disconnected meanwhile would find its segments removed — PostgreSQL then needs a new base
   * backup; the DBA's answer is wal_keep_size or a slot, and this operator re-clones such a
   * standby only when the cluster converges: sim/topology-actions.ts rebuildCutOff).
   */
  walKeepSizeMb?: number;
}

/**
 * The cluster's shape at set-up. Host A is the first primary; host i+1 streams from
 * `upstreams[i]` (A, or an earlier standby: a cascade, at most two levels below the primary).
 * Two nodes: one standby named `walreceiver`, listed alone in synchronous_standby_names (the
 * simulator's shape before several nodes existed).
 */
export interface SimTopology {
  upstreams: string[];
  /** Every node's synchronous_standby_names (a promoted node's is handed over, as switchover does). */
  synchronousStandbyNames: string;
  /**
   * The operator's failover rule: `careful` refuses to promote a standby that lacks WAL of an
   * acknowledged synchronous commit (and promotes the most advanced one instead), `any` promotes
   * whichever it chose — the losses then count against that choice, not against walsim.
   */
  operator: 'careful' | 'any';
}

/**
 * Scenario format versions: 1, the commands every seed drew before the drop mechanism's own
 * workloads existed (the regression seeds pin it); 2 adds, from the `scenario-drop` stream,
 * episodes that reach the mechanism (see `dropEpisode`) and an 8MB shared_buffers option; 3 drops
 * an episode's many tables in one `DROP TABLE a, b, …` (one commit record) as often as one by one
 * (format 2's seeds, e.g. its regression seeds, keep their commands: the draw is 3's alone).
 */
export type ScenarioVersion = 1 | 2 | 3;
export const SCENARIO_VERSION: ScenarioVersion = 3;

export interface Scenario {
  seed: number;
  /** Absent in hand-written scenarios (tests): they say their commands themselves. */
  version?: ScenarioVersion;
  options: SimOptions;
  topology: SimTopology;
  commands: SimCommand[];
}

/** What the generator may draw; the swarm switches fault families on and off per seed. */
interface Swarm {
  crashes: boolean;
  stops: boolean;
  network: boolean;
  diskFull: boolean;
  corruption: boolean;
  slowDisk: boolean;
  clockJumps: boolean;
  failovers: boolean;
  pauses: boolean;
}

/** The scenario's PRNG streams (sim/README rule 1). */
interface Streams {
  rng: SeededRandom;
  ext: SeededRandom;
  /** Targets among several standbys, and the commands only several nodes have. */
  n: SeededRandom;
}

/** Per-subsystem seeds derived from the top-level one, so each stream can be replayed alone. */
export function subSeed(seed: number, stream: string): number {
  let h = seed >>> 0;
  for (let i = 0; i < stream.length; i++) h = Math.imul(h ^ stream.charCodeAt(i), 0x9e3779b1) >>> 0;
  return new SeededRandom(h).nextUint32();
}

export const TWO_NODE_APPLICATION_NAME = 'walreceiver';
const HOST_NAMES = ['A', 'B', 'C', 'D', 'E'];
/** Host name → application_name (and the name synchronous_standby_names lists). */
export const applicationNameOf = (host: string, nodes: number): string =>
  nodes === 2 ? TWO_NODE_APPLICATION_NAME : host.toLowerCase();

/** The two-node topology: A primary, B its synchronous-by-name standby. */
export const TWO_NODES: SimTopology = {
  upstreams: ['A'],
  synchronousStandbyNames: TWO_NODE_APPLICATION_NAME,
  operator: 'careful',
};

/**
 * The topology of a seed (its own stream): 1–4 standbys; with one, the two-node shape. Several:
 * each standby after the first streams from the primary or (a cascade) from an earlier standby
 * at depth 1; synchronous_standby_names in one of the grammar's forms over the standbys' names
 * (`name`, `name, name`, `FIRST n (…)`, `ANY n (…)`, `*`, or '' — no synchronous standby),
 * `n` at most the number of listed standbys that stream from the primary, so the configuration
 * can be satisfied once every node is up.
 */
export function generateTopology(seed: number): SimTopology {
  const t = new SeededRandom(subSeed(seed, 'topology'));
  const standbys = t.pick([1, 1, 2, 3, 4]);
  if (standbys === 1) return TWO_NODES;
  const upstreams: string[] = ['A'];
  const depth: Record<string, number> = { A: 0, B: 1 };
  const cascade = t.chance(0.5);
  for (let i = 2; i <= standbys; i++) {
    const options = HOST_NAMES.slice(0, i).filter((h) => depth[h]! < 2);
    const up = cascade && t.chance(0.5) ? t.pick(options) : 'A';
    upstreams.push(up);
    depth[HOST_NAMES[i]!] = depth[up]! + 1;
  }
  const names = HOST_NAMES.slice(1, standbys + 1).map((h) => h.toLowerCase());
  const direct = names.filter((_, i) => upstreams[i] === 'A');
  // Shuffle the members (priority order matters under FIRST).
  const members = [...names];
  for (let i = members.length - 1; i > 0; i--) {
    const j = t.int(0, i);
    [members[i], members[j]] = [members[j]!, members[i]!];
  }
  const numSync = t.int(1, direct.length);
  const form = t.pick(['name', 'list', 'first', 'any', 'star', 'none'] as const);
  const synchronousStandbyNames =
    form === 'name'
      ? t.pick(direct)
      : form === 'list'
        ? members.join(', ')
        : form === 'first'
          ? `FIRST ${numSync} (${members.join(', ')})`
          : form === 'any'
            ? `ANY ${numSync} (${members.join(', ')})`
            : form === 'star'
              ? '*'
              : '';
  return { upstreams, synchronousStandbyNames, operator: t.chance(0.5) ? 'careful' : 'any' };
}

/** A topology's kinds, for the run's counts: nodes, shape, synchronous_standby_names form, operator. */
export function topologyKinds(t: SimTopology): string[] {
  const nodes = t.upstreams.length + 1;
  if (nodes === 2) return ['2 nodes'];
  const n = t.synchronousStandbyNames;
  const form =
    n === ''
      ? 'no synchronous standby'
      : n === '*'
        ? "'*'"
        : n.startsWith('FIRST')
          ? 'FIRST n (…)'
          : n.startsWith('ANY')
            ? 'ANY n (…)'
            : n.includes(',')
              ? "'a, b, …'"
              : "'a'";
  const cascaded = t.upstreams.some((u) => u !== 'A');
  return [`${nodes} nodes`, cascaded ? 'cascaded' : 'flat', form, `${t.operator} operator`];
}

function drawOptions(rng: SeededRandom): SimOptions {
  return {
    synchronousCommit: rng.pick(['off', 'local', 'remote_write', 'on', 'remote_apply'] as const),
    dropStrategy: {
      primary: rng.pick(['full-scan', 'cached-lookup'] as const),
      standby: rng.pick(['full-scan', 'cached-lookup'] as const),
    },
    sharedBuffers: rng.pick(['128kB', '256kB', '1MB']),
    walSegmentSize: 64 * 1024,
    link: rng.chance(0.5)
      ? { delayMinMs: 0, delayMaxMs: 2, cutDetectMs: 50 }
      : { delayMinMs: 1, delayMaxMs: rng.int(5, 200), cutDetectMs: rng.int(50, 2000) },
    stepMs: rng.pick([5, 20, 100, 500]),
  };
}

function drawSwarm(rng: SeededRandom): Swarm {
  const swarm: Swarm = {
    crashes: rng.chance(0.6),
    stops: rng.chance(0.5),
    network: rng.chance(0.6),
    diskFull: rng.chance(0.3),
    slowDisk: rng.chance(0.3),
    clockJumps: rng.chance(0.3),
    failovers: rng.chance(0.7),
    pauses: rng.chance(0.5),
    corruption: false,
  };
  swarm.corruption = rng.chance(0.3);
  return swarm;
}

/**
 * The fault kinds this swarm allows, each a thunk drawing its command (the order of the list and
 * of the draws inside each thunk is the seed's: do not reorder). `several` adds what only a
 * cluster of several nodes has: the standby a command hits, partition splits, the operator's
 * failover choice, switchovers and repoints — all from the `n` stream.
 */
function faultKinds(s: Streams, swarm: Swarm, nodes: number): Array<() => SimCommand> {
  const { rng, ext, n } = s;
  const several = nodes > 2;
  const node = (): Role => (rng.chance(0.5) ? 'primary' : 'standby');
  /** Which standby, for a command that hit one (several nodes only). */
  const aim = (role: Role): Aim =>
    several && role === 'standby' ? { node: role, target: n.int(0, nodes - 2) } : { node: role };
  const kinds: Array<() => SimCommand> = [];
  if (swarm.crashes)
    kinds.push(() => {
      const role = node();
      return { op: 'crash', ...aim(role), power: rng.chance(0.5), downMs: rng.int(0, 3000) };
    });
  if (swarm.stops)
    kinds.push(() => {
      const role = node();
      const mode = rng.pick(['smart', 'fast', 'immediate'] as const);
      return { op: 'stop', ...aim(role), mode, downMs: rng.int(0, 2000) };
    });
  if (swarm.network) {
    kinds.push(() => (several ? { op: 'cut', target: n.int(0, nodes - 2) } : { op: 'cut' }));
    kinds.push((): SimCommand => {
      const ms = rng.int(10, 5000);
      if (!several) return { op: 'partition', ms };
      // Any split with both sides non-empty; node 0 (the primary) on side 0.
      const split: number[] = [0, ...Array.from({ length: nodes - 1 }, () => n.int(0, 1))];
      if (!split.includes(1)) split[n.int(1, nodes - 1)] = 1;
      return { op: 'partition', ms, split };
    });
  }
  if (swarm.diskFull)
    kinds.push(() => {
      const ms = rng.int(10, 3000);
      return { op: 'diskFull', ms, ...aim(ext.chance(0.3) ? 'primary' : 'standby') };
    });
  if (swarm.corruption)
    kinds.push(() => {
      const role: Role = ext.chance(0.5) ? 'primary' : 'standby';
      return { op: 'corrupt', ...aim(role), downMs: ext.int(0, 2000) };
    });
  if (swarm.slowDisk)
    kinds.push(() => {
      const role = node();
      const latencyMs = rng.int(1, 200);
      const writeMs = ext.int(0, 50);
      return { op: 'slowDisk', ...aim(role), latencyMs, writeMs, ms: rng.int(100, 5000) };
    });
  if (swarm.clockJumps)
    kinds.push(() => {
      const role = node();
      return { op: 'clockJump', ...aim(role), ms: rng.pick([-1, 1]) * rng.int(1000, 3_600_000) };
    });
  if (swarm.failovers)
    kinds.push(() => {
      const how = rng.pick(['crash', 'power', 'immediate', 'fast'] as const);
      if (!several) return { op: 'failover', how };
      const choice = n.chance(0.5) ? 'best' : n.int(0, nodes - 2);
      return { op: 'failover', how, choice, rejoin: n.chance(0.5) };
    });
  if (swarm.pauses) {
    const t = () => (several ? { target: n.int(0, nodes - 2) } : {});
    kinds.push(() => ({ op: 'pause', ...t() }));
    kinds.push(() => ({ op: 'resume', ...t() }));
  }
  return kinds;
}

/** The workload's next statement: the SQL subset, fresh table names and values so every fact stays checkable. */
class StatementDrawer {
  private readonly tables: string[] = [];
  private nextTable = 1;
  private nextValue = 1;

  constructor(
    private readonly rng: SeededRandom,
    private readonly several: boolean,
    private readonly n: SeededRandom,
    private readonly nodes: number,
  ) {}

  next(): SimCommand {
    const { rng, tables } = this;
    const r = rng.float();
    if (tables.length === 0 || r < 0.1) {
      const t = `t${this.nextTable++}`;
      tables.push(t);
      return { op: 'sql', sql: `CREATE TABLE ${t} (c int)` };
    }
    if (r < 0.5) {
      const t = rng.pick(tables);
      const n = rng.pick([1, 3, 50, 500, 3000]);
      if (n <= 3) {
        const vals = Array.from({ length: n }, () => this.nextValue++);
        return {
          op: 'sql',
          sql: `INSERT INTO ${t} VALUES ${vals.map((v) => `(${v})`).join(', ')}`,
        };
      }
      const from = this.nextValue;
      this.nextValue += n;
      return {
        op: 'sql',
        sql: `INSERT INTO ${t} SELECT generate_series(${from}, ${from + n - 1})`,
      };
    }
    if (r < 0.6) {
      const t = rng.pick(tables);
      return { op: 'sql', sql: `DELETE FROM ${t} WHERE c < ${rng.int(1, this.nextValue)}` };
    }
    if (r < 0.7) return { op: 'sql', sql: `VACUUM ${rng.pick(tables)}` };
    if (r < 0.76) return { op: 'sql', sql: `TRUNCATE ${rng.pick(tables)}` };
    if (r < 0.8) {
      const t = rng.pick(tables);
      tables.splice(tables.indexOf(t), 1);
      return { op: 'sql', sql: `DROP TABLE ${t}` };
    }
    if (r < 0.85) return { op: 'sql', sql: 'CHECKPOINT' };
    if (r < 0.88)
      return this.several
        ? { op: 'restartpoint', target: this.n.int(0, this.nodes - 2) }
        : { op: 'restartpoint' };
    return { op: 'wait', ms: rng.pick([1, 10, 100, 1000]) };
  }
}

/** Values of the drop episodes' tables: their own range, above anything the drawer issues. */
const EPISODE_VALUE_BASE = 100_000_000;

/**
 * Format 2: sequences of commands that reach the drop mechanism, from their own stream (`m`).
 * `tail`: a table filled past NBuffers/32 or not, maybe a checkpoint (an image holds its pages),
 * a DELETE of its tail or all of it, then VACUUM (which truncates when the freed tail is large
 * enough), maybe a DROP. `many`: 2–30 tables (around the 20-relation bsearch threshold)
 * truncated in one transaction, or dropped. Before the drop, maybe a standby restart (its size
 * cache is lost: replay takes the full scan unless replay touched the forks again) and maybe a
 * fault armed inside the drop, on the primary or a standby.
 */
class DropEpisodes {
  private nextTable = 1;
  private nextValue = EPISODE_VALUE_BASE;

  constructor(
    private readonly m: SeededRandom,
    private readonly nodes: number,
    private readonly version: ScenarioVersion,
  ) {}

  next(): SimCommand[] {
    return this.m.chance(0.6) ? this.tail() : this.many();
  }

  private aimStandby(): Aim {
    return this.nodes > 2
      ? { node: 'standby', target: this.m.int(0, this.nodes - 2) }
      : { node: 'standby' };
  }

  private fill(t: string, rows: number): string {
    const from = this.nextValue;
    this.nextValue += rows;
    return `INSERT INTO ${t} SELECT generate_series(${from}, ${from + rows - 1})`;
  }

  /** A standby restart before the drop, and a fault inside it (each maybe). */
  private beforeDrop(where: 'truncate' | 'unlink'): SimCommand[] {
    const { m } = this;
    const out: SimCommand[] = [];
    if (m.chance(0.3)) out.push({ op: 'stop', ...this.aimStandby(), mode: 'fast', downMs: 0 });
    if (m.chance(0.35)) {
      const aim: Aim = m.chance(0.5) ? { node: 'primary' } : this.aimStandby();
      const kind = where === 'unlink' || m.chance(0.5) ? 'crash' : 'io';
      out.push({
        op: 'dropFault',
        ...aim,
        kind,
        where,
        fork: where === 'unlink' ? 0 : m.int(0, 2),
      });
    }
    return out;
  }

  private tail(): SimCommand[] {
    const { m } = this;
    const t = `r${this.nextTable++}`;
    const rows = m.pick([300, 3000, 8000]);
    const first = this.nextValue;
    const out: SimCommand[] = [
      { op: 'sql', sql: `CREATE TABLE ${t} (c int)` },
      { op: 'sql', sql: this.fill(t, rows) },
    ];
    if (m.chance(0.5)) out.push({ op: 'sql', sql: 'CHECKPOINT' });
    // Keep 0 %, 30 %, 70 % or 95 % of the rows: all of it, a large or a small tail deleted.
    const keep = Math.floor(rows * m.pick([0, 0.3, 0.7, 0.95]));
    out.push({ op: 'sql', sql: `DELETE FROM ${t} WHERE c > ${first + keep - 1}` });
    if (m.chance(0.3)) out.push({ op: 'wait', ms: m.pick([10, 200]) });
    out.push(...this.beforeDrop('truncate'), { op: 'sql', sql: `VACUUM ${t}` });
    if (m.chance(0.3)) out.push({ op: 'sql', sql: `DROP TABLE ${t}` });
    return out;
  }

  private many(): SimCommand[] {
    const { m } = this;
    const k = m.pick([2, 5, 12, 19, 20, 21, 30]);
    const ts = Array.from({ length: k }, () => `r${this.nextTable++}`);
    // One size for all: one-block tables keep even 30 relations below NBuffers/32 at 8MB (the
    // lookup path above the bsearch threshold); larger ones cross it.
    const rows = m.pick([1, 20, 300, 3000]);
    const out: SimCommand[] = [
      { op: 'sqlBatch', sqls: ts.map((t) => `CREATE TABLE ${t} (c int)`) },
      { op: 'sqlBatch', sqls: ts.map((t) => this.fill(t, rows)) },
    ];
    if (m.chance(0.3)) out.push({ op: 'sql', sql: 'CHECKPOINT' });
    out.push(...this.beforeDrop('unlink'));
    if (m.chance(0.6)) out.push({ op: 'sql', sql: `TRUNCATE ${ts.join(', ')}` });
    else if (this.version >= 3 && m.chance(0.5))
      out.push({ op: 'sql', sql: `DROP TABLE ${ts.join(', ')}` });
    else out.push({ op: 'sqlBatch', sqls: ts.map((t) => `DROP TABLE ${t}`) });
    return out;
  }
}

/** A command only several nodes have, drawn after a step (its own stream), or null. */
function topologyCommand(n: SeededRandom, nodes: number, swarm: Swarm): SimCommand | null {
  if (!swarm.failovers || !n.chance(0.06)) return null;
  if (n.chance(0.5)) return { op: 'switchover', target: n.int(0, nodes - 2) };
  return { op: 'repoint', target: n.int(0, nodes - 2), to: n.int(0, nodes - 1) };
}

/**
 * The scenario of a seed: options, topology and commands are a pure function of it. `topology`
 * overrides the seed's own (a regression seed found with two nodes keeps its two nodes).
 */
export function generateScenario(
  seed: number,
  steps = 40,
  topology?: SimTopology,
  version: ScenarioVersion = SCENARIO_VERSION,
): Scenario {
  const s: Streams = {
    rng: new SeededRandom(subSeed(seed, 'scenario')),
    // Parameters added after the first release of the generator come from their own stream, so the
    // commands a seed drew before (and the regression seeds in test/sim) stay the same.
    ext: new SeededRandom(subSeed(seed, 'scenario-ext')),
    n: new SeededRandom(subSeed(seed, 'scenario-n')),
  };
  const topo = topology ?? generateTopology(seed);
  const nodes = topo.upstreams.length + 1;
  const options = drawOptions(s.rng);
  const swarm = drawSwarm(s.rng);
  const kinds = faultKinds(s, swarm, nodes);
  const statements = new StatementDrawer(s.rng, nodes > 2, s.n, nodes);
  // Format 2's draws come from their own stream, after the format-1 command of each step.
  const m = version >= 2 ? new SeededRandom(subSeed(seed, 'scenario-drop')) : null;
  const episodes = m === null ? null : new DropEpisodes(m, nodes, version);
  if (m !== null && m.chance(0.4)) options.sharedBuffers = '8MB';
  if (m !== null) options.walKeepSizeMb = 16;
  const commands: SimCommand[] = [];
  for (let i = 0; i < steps; i++) {
    if (s.rng.chance(0.3) && kinds.length > 0) commands.push(s.rng.pick(kinds)());
    else commands.push(statements.next());
    const extra = nodes > 2 ? topologyCommand(s.n, nodes, swarm) : null;
    if (extra !== null) commands.push(extra);
    if (m !== null && episodes !== null && m.chance(0.04)) commands.push(...episodes.next());
  }
  return { seed, version, options, topology: topo, commands };
}

const on = (c: { node?: Role; target?: number }): string =>
  c.node === 'primary' ? 'primary' : `standby${c.target === undefined ? '' : ` #${c.target}`}`;

/** One line per command, for the trace and the shrinker's output. */
export function describeCommand(c: SimCommand): string {
  switch (c.op) {
    case 'sql':
      return `sql ${c.sql}`;
    case 'crash':
      return `crash ${on(c)}${c.power ? ' (power loss)' : ''}, down ${c.downMs} ms`;
    case 'stop':
      return `stop ${on(c)} -m ${c.mode}, down ${c.downMs} ms`;
    case 'cut':
      return c.target === undefined ? 'cut' : `cut ${on({ target: c.target })}`;
    case 'partition':
      return `partition ${c.ms} ms${c.split === undefined ? '' : ` split ${c.split.join('')}`}`;
    case 'diskFull':
      return `${on(c)} pg_wal full ${c.ms} ms`;
    case 'corrupt':
      return c.node === 'standby'
        ? `flip a byte in a WAL record the ${on(c)} has not replayed`
        : `flip a byte in a WAL record the primary's crash recovery reads; crash it, down ${c.downMs} ms`;
    case 'slowDisk':
      return `slow disk on ${on(c)}: writes +${c.writeMs} ms, fsyncs +${c.latencyMs} ms (each 50–100%) for ${c.ms} ms`;
    case 'clockJump':
      return `wall clock of ${on(c)} jumps ${c.ms} ms`;
    case 'failover':
      return (
        `failover (primary: ${c.how})` +
        (c.choice === undefined
          ? ''
          : ` onto ${c.choice === 'best' ? 'the most advanced standby' : on({ target: c.choice })}`) +
        (c.rejoin === true ? ', rejoin the old primary' : '')
      );
    case 'switchover':
      return `switchover to ${on({ target: c.target })}`;
    case 'repoint':
      return `repoint ${on({ target: c.target })} to ${c.to === 0 ? 'the primary' : on({ target: c.to - 1 })}`;
    case 'wait':
      return `wait ${c.ms} ms`;
    case 'sqlBatch':
      return `sql batch (${c.sqls.length}): ${c.sqls[0]} … ${c.sqls[c.sqls.length - 1]}`;
    case 'dropFault':
      return `arm ${c.kind === 'io' ? 'an I/O error' : 'a crash'} on ${on(c)} inside its next drop, before ${c.where === 'unlink' ? 'the unlinks' : `truncating fork #${c.fork}`}`;
    default:
      return c.target === undefined ? c.op : `${c.op} ${on({ target: c.target })}`;
  }
}
