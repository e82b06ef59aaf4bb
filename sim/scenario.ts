/**
 * A simulated scenario: options drawn per seed ("swarm testing": one seed has a slow lossy network
 * and a perfect disk, another the reverse) and a list of commands — the workload and its faults.
 * The list is data, so a failing seed can be shrunk by removing commands (sim/shrink.ts) and
 * replayed from its printed form.
 */
import { SeededRandom } from '../common/random.ts';
import type { SynchronousCommit, DropStrategy } from '../server/settings.ts';
import type { StopMode } from '../server/control-protocol.ts';

export type Role = 'primary' | 'standby';

export type SimCommand =
  /** A write statement on the current primary (it may wait: sync rep holds it). */
  | { op: 'sql'; sql: string }
  | { op: 'pause' }
  | { op: 'resume' }
  /** CHECKPOINT on the standby: a restartpoint. */
  | { op: 'restartpoint' }
  /** Kill a node's process; `power` also loses the machine's unsynced writes. Restarts after downMs. */
  | { op: 'crash'; node: Role; power: boolean; downMs: number }
  /** pg_ctl stop -m mode, then start again after downMs. */
  | { op: 'stop'; node: Role; mode: StopMode; downMs: number }
  /** Cut the replication connection (both ends see 1006). */
  | { op: 'cut' }
  /** Partition primary and standby for ms. */
  | { op: 'partition'; ms: number }
  /**
   * A node's pg_wal is full for ms (writes that extend a file fail with ENOSPC): a standby's
   * walreceiver retries; a primary PANICs at its next WAL write and restarts once space is free.
   */
  | { op: 'diskFull'; node: Role; ms: number }
  /**
   * Media corruption: flip a byte inside a WAL record on a node's disk. Standby: a record it has
   * flushed but not replayed; it restarts at the next step. Primary: a record its crash recovery
   * will read; the primary crashes at once and restarts after downMs (sim/README "Corruption").
   */
  | { op: 'corrupt'; node: Role; downMs: number }
  /** A node's disk is slow for ms: every write takes up to writeMs more, every fsync up to latencyMs more. */
  | { op: 'slowDisk'; node: Role; latencyMs: number; writeMs: number; ms: number }
  /** A node's wall clock steps by ms (NTP); simulated time does not. */
  | { op: 'clockJump'; node: Role; ms: number }
  /** Stop the primary (crash, power loss or immediate stop), promote the standby, rebuild the old primary as its standby. */
  | { op: 'failover'; how: 'crash' | 'power' | 'immediate' | 'fast' }
  /** Let simulated time pass. */
  | { op: 'wait'; ms: number };

export interface SimOptions {
  synchronousCommit: SynchronousCommit;
  dropStrategy: { primary: DropStrategy; standby: DropStrategy };
  sharedBuffers: string;
  walSegmentSize: number;
  link: { delayMinMs: number; delayMaxMs: number; cutDetectMs: number };
  /** Simulated time given to each command before the next one starts. */
  stepMs: number;
}

export interface Scenario {
  seed: number;
  options: SimOptions;
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

/** Per-subsystem seeds derived from the top-level one, so each stream can be replayed alone. */
export function subSeed(seed: number, stream: string): number {
  let h = seed >>> 0;
  for (let i = 0; i < stream.length; i++) h = Math.imul(h ^ stream.charCodeAt(i), 0x9e3779b1) >>> 0;
  return new SeededRandom(h).nextUint32();
}

/** The scenario of a seed: options and commands are a pure function of it. */
export function generateScenario(seed: number, steps = 40): Scenario {
  const rng = new SeededRandom(subSeed(seed, 'scenario'));
  // Parameters added after the first release of the generator come from their own stream, so the
  // commands a seed drew before (and the regression seeds in test/sim) stay the same.
  const ext = new SeededRandom(subSeed(seed, 'scenario-ext'));
  const options: SimOptions = {
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
  const commands: SimCommand[] = [];
  const tables: string[] = [];
  let nextTable = 1;
  let nextValue = 1;
  const node = (): Role => (rng.chance(0.5) ? 'primary' : 'standby');
  for (let i = 0; i < steps; i++) {
    const faultChance = 0.3;
    if (rng.chance(faultChance)) {
      const kinds: Array<() => SimCommand | null> = [];
      if (swarm.crashes)
        kinds.push(() => ({
          op: 'crash',
          node: node(),
          power: rng.chance(0.5),
          downMs: rng.int(0, 3000),
        }));
      if (swarm.stops)
        kinds.push(() => ({
          op: 'stop',
          node: node(),
          mode: rng.pick(['smart', 'fast', 'immediate'] as const),
          downMs: rng.int(0, 2000),
        }));
      if (swarm.network) {
        kinds.push(() => ({ op: 'cut' }));
        kinds.push(() => ({ op: 'partition', ms: rng.int(10, 5000) }));
      }
      if (swarm.diskFull)
        kinds.push(() => ({
          op: 'diskFull',
          ms: rng.int(10, 3000),
          node: ext.chance(0.3) ? 'primary' : 'standby',
        }));
      if (swarm.corruption)
        kinds.push(() => ({
          op: 'corrupt',
          node: ext.chance(0.5) ? 'primary' : 'standby',
          downMs: ext.int(0, 2000),
        }));
      if (swarm.slowDisk)
        kinds.push(() => ({
          op: 'slowDisk',
          node: node(),
          latencyMs: rng.int(1, 200),
          writeMs: ext.int(0, 50),
          ms: rng.int(100, 5000),
        }));
      if (swarm.clockJumps)
        kinds.push(() => ({
          op: 'clockJump',
          node: node(),
          ms: rng.pick([-1, 1]) * rng.int(1000, 3_600_000),
        }));
      if (swarm.failovers)
        kinds.push(() => ({
          op: 'failover',
          how: rng.pick(['crash', 'power', 'immediate', 'fast'] as const),
        }));
      if (swarm.pauses) {
        kinds.push(() => ({ op: 'pause' }));
        kinds.push(() => ({ op: 'resume' }));
      }
      if (kinds.length > 0) {
        const c = rng.pick(kinds)();
        if (c !== null) commands.push(c);
        continue;
      }
    }
    // The workload: the SQL subset, fresh table names and values so every fact stays checkable.
    const r = rng.float();
    if (tables.length === 0 || r < 0.1) {
      const t = `t${nextTable++}`;
      tables.push(t);
      commands.push({ op: 'sql', sql: `CREATE TABLE ${t} (c int)` });
    } else if (r < 0.5) {
      const t = rng.pick(tables);
      const n = rng.pick([1, 3, 50, 500, 3000]);
      if (n <= 3) {
        const vals = Array.from({ length: n }, () => nextValue++);
        commands.push({
          op: 'sql',
          sql: `INSERT INTO ${t} VALUES ${vals.map((v) => `(${v})`).join(', ')}`,
        });
      } else {
        commands.push({
          op: 'sql',
          sql: `INSERT INTO ${t} SELECT generate_series(${nextValue}, ${nextValue + n - 1})`,
        });
        nextValue += n;
      }
    } else if (r < 0.6) {
      const t = rng.pick(tables);
      commands.push({ op: 'sql', sql: `DELETE FROM ${t} WHERE c < ${rng.int(1, nextValue)}` });
    } else if (r < 0.7) {
      commands.push({ op: 'sql', sql: `VACUUM ${rng.pick(tables)}` });
    } else if (r < 0.76) {
      commands.push({ op: 'sql', sql: `TRUNCATE ${rng.pick(tables)}` });
    } else if (r < 0.8) {
      const t = rng.pick(tables);
      tables.splice(tables.indexOf(t), 1);
      commands.push({ op: 'sql', sql: `DROP TABLE ${t}` });
    } else if (r < 0.85) {
      commands.push({ op: 'sql', sql: 'CHECKPOINT' });
    } else if (r < 0.88) {
      commands.push({ op: 'restartpoint' });
    } else {
      commands.push({ op: 'wait', ms: rng.pick([1, 10, 100, 1000]) });
    }
  }
  return { seed, options, commands };
}

/** One line per command, for the trace and the shrinker's output. */
export function describeCommand(c: SimCommand): string {
  switch (c.op) {
    case 'sql':
      return `sql ${c.sql}`;
    case 'crash':
      return `crash ${c.node}${c.power ? ' (power loss)' : ''}, down ${c.downMs} ms`;
    case 'stop':
      return `stop ${c.node} -m ${c.mode}, down ${c.downMs} ms`;
    case 'partition':
      return `partition ${c.ms} ms`;
    case 'diskFull':
      return `${c.node} pg_wal full ${c.ms} ms`;
    case 'corrupt':
      return c.node === 'standby'
        ? 'flip a byte in a WAL record the standby has not replayed'
        : `flip a byte in a WAL record the primary's crash recovery reads; crash it, down ${c.downMs} ms`;
    case 'slowDisk':
      return `slow disk on ${c.node}: writes +${c.writeMs} ms, fsyncs +${c.latencyMs} ms (each 50–100%) for ${c.ms} ms`;
    case 'clockJump':
      return `wall clock of ${c.node} jumps ${c.ms} ms`;
    case 'failover':
      return `failover (primary: ${c.how})`;
    case 'wait':
      return `wait ${c.ms} ms`;
    default:
      return c.op;
  }
}
