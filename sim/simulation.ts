/**
 * Deterministic simulation of a walsim cluster: two real ServerNodes (WAL, storage, redo,
 * walsender, walreceiver, startup process, lifecycle machine — the production code) in one
 * process, on the scheduler's simulated time, the in-memory network and one in-memory disk per
 * machine. Only the clock, the transport and the disk are simulated.
 *
 * A run executes a scenario's commands (sim/scenario.ts) — the safety phase, faults on, invariants
 * checked after every step and at every acknowledged commit — then heals every fault and requires
 * the cluster to converge within a bounded simulated time — the liveness phase — and compares the
 * nodes. The same seed gives the same events in the same order and the same bytes on the wire:
 * `traceHash` (and the full trace with `trace: true`) says so.
 *
 * Entry point: `runSimulation(scenario, opts)` → SimResult.
 */
import { isWalsimError } from '../common/errors.ts';
import { isErrnoCode } from '../common/disk.ts';
import { InvariantViolation } from '../common/assert.ts';
import { SeededRandom } from '../common/random.ts';
import { fmix32 } from '../common/hash.ts';
import { formatLsn, parseLsn, type Lsn } from '../wal/lsn.ts';
import {
  listSegmentFiles,
  readTimelineHistory,
  segmentOf,
  segmentOffset,
  walDir,
} from '../wal/segment.ts';
import { readWal } from '../wal/wal-reader.ts';
import type { WalRecord } from '../wal/records.ts';
import { readDataImage } from '../storage/data-image.ts';
import { DiskLatency, LatencyDisk } from '../common/latency-disk.ts';
import { SIZE_OF_XLOG_RECORD } from '../wal/codec.ts';
import { initdb } from '../server/initdb.ts';
import { ServerNode, STANDBY_SIGNAL } from '../server/node.ts';
import type { NodeConfig } from '../server/cluster-files.ts';
import type { SynchronousCommit } from '../server/settings.ts';
import { MemDisk } from './mem-disk.ts';
import { Network } from './network.ts';
import { EventBudgetExceeded, Scheduler } from './scheduler.ts';
import { describeCommand, subSeed, type Role, type Scenario, type SimCommand } from './scenario.ts';
import { withModel } from '../cost-model/price.ts';
import { defaultCostProfile } from '../cost-model/profile.ts';

const DATA_DIR = '/data';
const BACKUP_DIR = '/basebackup';
const TOKEN = 'sim';
/** Simulated time the cluster gets to converge once every fault is healed (liveness bound). */
const CONVERGE_MS = 120_000;
/** Simulated time a start, stop or promotion may take. */
const ACTION_MS = 60_000;
/** wal_writer_delay (200 ms) plus margin: an asynchronous commit is on disk after this long. */
const ASYNC_FLUSH_MS = 250;

export interface SimRunOptions {
  /** Keep the full event trace (replay with --trace); the hash is always computed. */
  trace?: boolean;
  /** Stop at the first invariant violation (default true). */
  stopAtViolation?: boolean;
}

export interface SimResult {
  seed: number;
  ok: boolean;
  violations: string[];
  steps: number;
  faults: Record<string, number>;
  acknowledged: number;
  acknowledgedByLevel: Partial<Record<SynchronousCommit, number>>;
  /** Acknowledged commits missing where their level promised them (must be 0). */
  lost: number;
  /** Acknowledged commits gone where their level made no promise (asynchronous, power loss). */
  lostAllowed: number;
  /**
   * Acknowledged commits gone because a flipped byte destroyed a WAL record at or before their
   * commit record (media corruption: beyond the durability promise, which assumes the disk
   * returns what was fsynced). Reported apart from `lost`, never folded into it or into
   * `lostAllowed`; a commit wholly before the corrupt record that is missing is still `lost`.
   */
  lostToCorruption: number;
  /** Processes that ended in an expected PANIC (a primary's WAL write on a full disk). */
  panics: number;
  /** Each failover's phases on the promoted node's clock (simulated ms) and modeled PostgreSQL time. */
  failoverTimes: SimFailoverTime[];
  failovers: number;
  events: number;
  simMs: number;
  /** Bytes written to every machine's disk, base-backup copies included (a work counter). */
  diskBytesWritten: number;
  traceHash: string;
  trace?: string[];
}

export interface SimFailoverTime {
  /** resume → read-write, and its phases, in simulated milliseconds (the node's injected clock). */
  failoverMs: number | null;
  replayMs: number | null;
  endOfRecoveryMs: number | null;
  openForWritesMs: number | null;
  /** The cost model's PostgreSQL seconds for the same counts (null without a profile). */
  modeledS: number | null;
}

/** Whether the ledger may lose a fact at a check. */
type Verdict = 'must' | 'may' | 'corruption';

/** One checkable consequence of an acknowledged statement. */
interface Fact {
  kind: 'present' | 'absentBelow' | 'tableExists' | 'tableGone';
  table: string;
  value: number;
  level: SynchronousCommit;
  ackAt: number;
  /**
   * Upper bound on the end LSN of its commit record: the highest commit end the acknowledging
   * process had reported when the statement returned (exact unless commits overlapped).
   */
  commitEndMax: Lsn;
  /** Known to be on the primary's disk (survived a check there). */
  durableOnPrimary: boolean;
  /** Known to be on the standby's disk too (survived a failover or came with a base backup). */
  onStandby: boolean;
  sql: string;
}

interface Host {
  name: 'A' | 'B';
  disk: MemDisk;
  incarnation: number;
  owner: string;
  node: ServerNode | null;
  /** Restart (as its current role) at this simulated time, or null. */
  restartAt: number | null;
  lastPowerLossAt: number;
  /** The machine's disk latency (slow disk fault), shared by its process incarnations. */
  latency: DiskLatency;
  /** Highest commit end LSN the current process incarnation reported (Fact.commitEndMax). */
  maxCommitEnd: Lsn;
  /** `owner/timeline` whose history file SIM-3 has checked. */
  historyCheckedFor: string;
  /** Its pg_wal is full until then (simulated ms). */
  fullUntil: number;
  /** When its process ended in a PANIC (crash-recovery ledger check at the restart), or null. */
  crashedAt: number | null;
  /** LSN of a record whose bytes were flipped on this machine's disk and not yet healed by a restart. */
  corruptLsn: Lsn | null;
  /** The process incarnation that was running when the byte was flipped. */
  corruptOwner: string;
}

interface Pending {
  seq: number;
  sql: string;
  host: Host;
  owner: string;
}

export class Simulation {
  readonly sched = new Scheduler();
  readonly net: Network;
  private readonly faultRng: SeededRandom;
  private readonly hosts: Record<'A' | 'B', Host>;
  private primary: Host;
  private standby: Host;
  readonly violations: string[] = [];
  private readonly ledger: Fact[] = [];
  private readonly pending = new Set<Pending>();
  private readonly faults: Record<string, number> = {};
  private acknowledged = 0;
  private readonly acknowledgedByLevel: Partial<Record<SynchronousCommit, number>> = {};
  private lost = 0;
  private lostAllowed = 0;
  private lostToCorruption = 0;
  /** The process incarnation that last ended in an expected PANIC (a WAL write on a full disk). */
  private panicked = '';
  private panics = 0;
  private readonly failoverTimes: SimFailoverTime[] = [];
  private failovers = 0;
  private maxValueIssued = 0;
  private issueSeq = 0;
  /** Statements issued that may remove what earlier facts promise, by issue order. */
  private supersessions: Array<{ seq: number; covers: (f: Fact) => boolean }> = [];
  private hash = 0x811c9dc5;
  /** Every machine disk of the run, replaced ones included (their counters are the run's I/O). */
  private readonly disks: MemDisk[] = [];
  readonly trace: string[] | null;
  private stepsRun = 0;

  constructor(
    readonly scenario: Scenario,
    private readonly opts: SimRunOptions = {},
  ) {
    const seed = scenario.seed;
    this.faultRng = new SeededRandom(subSeed(seed, 'disk'));
    this.net = new Network(this.sched, new SeededRandom(subSeed(seed, 'network')), {
      ...scenario.options.link,
    });
    this.trace = opts.trace === true ? [] : null;
    this.sched.onEvent = (at, owner, label) => this.record(at, owner, label);
    this.sched.onUncaught = (owner, err) => {
      // The process that just PANICked rethrows its WAL write error on the way out (production has
      // already exited inside fatal()); anything else would end a real server: a finding.
      if (owner === this.panicked) return;
      this.violation(
        `uncaught exception in ${owner} (the server process would die): ${(err as Error).stack ?? String(err)}`,
      );
    };
    const host = (name: 'A' | 'B'): Host => {
      const latency = new DiskLatency();
      const spread = new SeededRandom(subSeed(seed, `latency-${name}`));
      latency.spread = () => spread.float();
      return {
        name,
        disk: this.newDisk(),
        incarnation: 0,
        owner: `${name}#0`,
        node: null,
        restartAt: null,
        lastPowerLossAt: -1,
        latency,
        maxCommitEnd: 0,
        historyCheckedFor: '',
        fullUntil: 0,
        crashedAt: null,
        corruptLsn: null,
        corruptOwner: '',
      };
    };
    this.hosts = { A: host('A'), B: host('B') };
    this.primary = this.hosts.A;
    this.standby = this.hosts.B;
  }

  private newDisk(): MemDisk {
    const d = new MemDisk();
    this.disks.push(d);
    return d;
  }

  // ------------------------------------------------------------------------- trace

  private mix(text: string): void {
    let h = this.hash;
    for (let i = 0; i < text.length; i++) h = fmix32(h ^ text.charCodeAt(i)) ^ (h >>> 7);
    this.hash = h >>> 0;
  }

  private record(at: number, owner: string, what: string): void {
    const line = `${at} ${owner} ${what}`;
    this.mix(line);
    this.trace?.push(line);
  }

  private violation(message: string): void {
    this.violations.push(`t=${this.sched.now} ms: ${message}`);
    this.record(this.sched.now, 'sim', `VIOLATION ${message}`);
  }

  // ------------------------------------------------------------------------- nodes

  private config(h: Host): NodeConfig {
    const o = this.scenario.options;
    return {
      name: h.name,
      role: h === this.primary ? 'primary' : 'standby',
      listen: '127.0.0.1',
      port: 0,
      sharedBuffers: o.sharedBuffers,
      dropStrategy: h === this.hosts.A ? o.dropStrategy.primary : o.dropStrategy.standby,
      thresholdDivisor: 32,
      forceOptimized: false,
      synchronousCommit: o.synchronousCommit,
      // Both nodes list the standby's name, so a promoted standby waits for its own new standby.
      synchronousStandbyNames: 'walreceiver',
      primaryHost: null,
      primaryPort: 1,
      applicationName: 'walreceiver',
      walSegmentSize: o.walSegmentSize,
      hotStandby: true,
    };
  }

  /** The running process of a role (tests inspect it), or null while it is down. */
  nodeOf(role: Role): ServerNode | null {
    return this.hostOf(role).node;
  }

  /** A machine's disk latency (tests read its counters). */
  latencyOf(role: Role): DiskLatency {
    return this.hostOf(role).latency;
  }

  private other(h: Host): Host {
    return h === this.hosts.A ? this.hosts.B : this.hosts.A;
  }

  /** Wait (in simulated time) for a promise the nodes will settle; false if it did not within ms. */
  private async settle<T>(
    p: Promise<T>,
    ms: number,
  ): Promise<{ done: boolean; value?: T; error?: unknown }> {
    const out: { done: boolean; value?: T; error?: unknown } = { done: false };
    p.then(
      (v) => {
        out.done = true;
        out.value = v;
      },
      (e: unknown) => {
        out.done = true;
        out.error = e;
      },
    );
    await this.sched.runUntil(() => out.done, ms);
    return out;
  }

  private log(h: Host, owner: string, message: string): void {
    if (this.sched.isDead(owner)) return; // a dead process says nothing more
    this.record(this.sched.now, owner, message);
    if (/INV-|FATAL|internal error/.test(message)) this.violation(`${h.name} logged: ${message}`);
  }

  /** Start the process of a host from its data directory (crash recovery if it was not shut down). */
  private async start(h: Host): Promise<void> {
    h.incarnation++;
    h.owner = `${h.name}#${h.incarnation}`;
    h.restartAt = null;
    const owner = h.owner;
    const clock = this.sched.clockFor(owner);
    const dial = this.net.dialer(h.name, owner, () => this.other(h).name);
    let node: ServerNode;
    try {
      node = ServerNode.open({
        dataDir: DATA_DIR,
        config: this.config(h),
        token: TOKEN,
        log: (m) => this.log(h, owner, m),
        // The process would exit non-zero (a redo failure): a finding, and the process is gone.
        fatal: (e) => {
          if (h.owner !== owner || this.sched.isDead(owner)) return;
          if (isErrnoCode((e as Error).cause, 'ENOSPC') && h.disk.fullPrefixes.size > 0) {
            // Expected: a WAL write failed on a full disk and the node PANICs, as PostgreSQL does.
            // Its sessions see the connection end (outcome unknown); it restarts once space is free.
            this.record(this.sched.now, owner, `exit after ${(e as Error).message}`);
            this.panicked = owner;
            this.panics++;
            for (const p of [...this.pending]) if (p.owner === owner) this.pending.delete(p);
          } else {
            this.violation(`${h.name} FATAL: ${(e as Error).stack ?? String(e)}`);
          }
          this.sched.at(0, 'sim', 'fatal exit', () => {
            if (h.owner !== owner || h.node === null) return;
            this.kill(h, false);
            if (this.panicked === owner) {
              h.crashedAt = this.sched.now;
              h.restartAt = Math.max(this.sched.now, h.fullUntil);
            }
          });
        },
        // The slow-disk layer production uses, over the machine's in-memory disk: a synchronous
        // write or fsync stalls by advancing simulated time inside the running event.
        env: {
          clock,
          disk: new LatencyDisk(h.disk, clock, (ms) => this.sched.advance(ms), h.latency),
          // The upstream is always the other host (primary_conninfo's host and port are unused).
          dialer: () => dial,
        },
      });
    } catch (e) {
      this.violation(`${h.name} failed to start: ${(e as Error).message}`);
      return;
    }
    h.node = node;
    this.net.listen(h.name, owner, (conn) => node.acceptReplication(conn));
    h.maxCommitEnd = 0;
    node.onCommitAcknowledged = (endLsn) => {
      if (endLsn > h.maxCommitEnd) h.maxCommitEnd = endLsn;
      this.checkSyncAck(node, endLsn);
    };
    this.record(
      this.sched.now,
      'sim',
      `start ${owner} as ${node.inRecovery ? 'standby' : 'primary'}`,
    );
    const r = await this.settle(node.startRole(), ACTION_MS);
    if (!r.done) this.violation(`${h.name} did not finish starting within ${ACTION_MS} ms`);
    else if (r.error !== undefined)
      this.violation(`${h.name} failed to start its role: ${(r.error as Error).message}`);
  }

  /** The process dies: its events stop, its sockets reset, the disk keeps what the fault allows. */
  private kill(h: Host, power: boolean): void {
    if (h.node === null) return;
    this.sched.kill(h.owner);
    this.net.hostDown(h.name);
    for (const p of [...this.pending]) if (p.owner === h.owner) this.pending.delete(p); // outcome unknown
    h.node = null;
    if (power) {
      h.disk.powerLoss(this.faultRng);
      h.lastPowerLossAt = this.sched.now;
    } else {
      h.disk.processCrash();
    }
    this.record(this.sched.now, 'sim', `${power ? 'power loss' : 'process exit'} ${h.owner}`);
  }

  /** pg_ctl stop -m mode. */
  /** pg_ctl stop -m mode; false if the process ended in a PANIC instead (a crash, for the ledger). */
  private async stop(h: Host, mode: 'smart' | 'fast' | 'immediate'): Promise<boolean> {
    const node = h.node;
    if (node === null) return true;
    const owner = h.owner;
    if (mode !== 'immediate') {
      const r = await this.settle(node.shutdown(mode), ACTION_MS);
      if (!r.done && mode === 'smart') {
        // A smart stop waits for sessions, and a session waiting for an unreachable synchronous
        // standby never ends (as in PostgreSQL): the operator then asks for a fast stop.
        this.record(
          this.sched.now,
          'sim',
          `${h.name}: smart shutdown still waiting; fast shutdown requested`,
        );
        return this.stop(h, 'fast');
      }
      const panicked = this.panicked === owner; // a WAL write on a full disk during the shutdown checkpoint
      if (!r.done && !panicked)
        this.violation(`${h.name}: ${mode} shutdown did not finish within ${ACTION_MS} ms`);
      else if (r.error !== undefined && !panicked)
        this.violation(`${h.name}: ${mode} shutdown failed: ${(r.error as Error).message}`);
      this.kill(h, false);
      return !panicked;
    }
    node.send({ type: 'STOP', mode });
    this.kill(h, false);
    return true;
  }

  /** The operator starts a server only once its disk has space again. */
  private async waitForSpace(h: Host): Promise<void> {
    const wait = h.fullUntil - this.sched.now;
    if (h.disk.fullPrefixes.size > 0 && wait > 0) await this.sched.runFor(wait);
  }

  // ------------------------------------------------------------------------- setup

  /** initdb on A, a base backup onto B, both synced (as initdb and pg_basebackup end). */
  async setup(): Promise<void> {
    const a = this.hosts.A;
    const b = this.hosts.B;
    a.disk.mkdirp(DATA_DIR);
    const r = await this.settle(
      initdb(
        DATA_DIR,
        this.config(a),
        { disk: a.disk, clock: this.sched.clockFor('sim') },
        String(this.scenario.seed),
      ),
      ACTION_MS,
    );
    if (!r.done || r.error !== undefined)
      throw new Error(`initdb failed: ${r.done ? (r.error as Error).message : 'did not finish'}`);
    a.disk.syncAll();
    a.disk.copyTo(DATA_DIR, b.disk, DATA_DIR);
    b.disk.writeFile(`${DATA_DIR}/${STANDBY_SIGNAL}`, '');
    b.disk.syncAll();
    await this.start(a);
    await this.start(b);
  }

  // ------------------------------------------------------------------------- commands

  private countFault(kind: string): void {
    this.faults[kind] = (this.faults[kind] ?? 0) + 1;
  }

  private async restartDue(): Promise<void> {
    for (const h of [this.primary, this.standby]) {
      if (
        h.node !== null &&
        h.corruptLsn !== null &&
        h.owner === h.corruptOwner &&
        h.restartAt !== null &&
        h.restartAt <= this.sched.now
      ) {
        await this.stop(h, 'fast'); // the operator restarts the standby whose replay stopped
      }
      // A server does not start on a full disk (PostgreSQL PANICs writing its first WAL): the
      // operator starts it once space is free.
      if (
        h.node === null &&
        h.restartAt !== null &&
        h.restartAt <= this.sched.now &&
        h.disk.fullPrefixes.size === 0
      )
        await this.restart(h);
    }
  }

  /** Start a host that is down; a primary that crashed (a PANIC) gets the crash-recovery ledger check. */
  private async restart(h: Host): Promise<void> {
    await this.start(h);
    const crashedAt = h.crashedAt;
    h.crashedAt = null;
    if (crashedAt !== null && h === this.primary) {
      await this.checkLedger(h, 'primary restart after a PANIC', (f) =>
        this.guaranteedAfterPrimaryCrash(f, crashedAt),
      );
    }
  }

  private hostOf(role: Role): Host {
    return role === 'primary' ? this.primary : this.standby;
  }

  async exec(c: SimCommand): Promise<void> {
    switch (c.op) {
      case 'sql':
        return this.issue(c.sql);
      case 'pause':
      case 'resume':
      case 'restartpoint': {
        const node = this.standby.node;
        if (node === null) return;
        const sql = c.op === 'restartpoint' ? 'CHECKPOINT' : `SELECT pg_wal_replay_${c.op}()`;
        const r = await this.settle(node.execute(sql), ACTION_MS);
        if (r.error !== undefined) this.expectedError(r.error, sql);
        return;
      }
      case 'crash': {
        const h = this.hostOf(c.node);
        if (h.node === null) return;
        this.countFault(c.power ? `power loss (${c.node})` : `crash (${c.node})`);
        const crashAt = this.sched.now;
        this.kill(h, c.power);
        h.restartAt = this.sched.now + c.downMs;
        if (h === this.primary) {
          await this.sched.runFor(c.downMs);
          await this.waitForSpace(h);
          await this.start(h);
          await this.checkLedger(h, 'primary restart', (f) =>
            this.guaranteedAfterPrimaryCrash(f, crashAt),
          );
        }
        return;
      }
      case 'stop': {
        const h = this.hostOf(c.node);
        if (h.node === null) return;
        this.countFault(`stop -m ${c.mode} (${c.node})`);
        const stopAt = this.sched.now;
        const clean = await this.stop(h, c.mode);
        h.restartAt = this.sched.now + c.downMs;
        if (h === this.primary) {
          await this.sched.runFor(c.downMs);
          await this.waitForSpace(h);
          await this.start(h);
          await this.checkLedger(
            h,
            `primary restart after stop -m ${c.mode}`,
            (f) => (c.mode !== 'immediate' && clean) || this.guaranteedAfterPrimaryCrash(f, stopAt),
          );
        }
        return;
      }
      case 'cut':
        this.countFault('connection cut');
        this.net.cutBetween(this.primary.name, this.standby.name, 'cut');
        return;
      case 'partition': {
        this.countFault('partition');
        const [a, b] = [this.primary.name, this.standby.name];
        this.net.partition(a, b);
        this.sched.at(c.ms, 'sim', 'heal partition', () => this.net.heal(a, b));
        return;
      }
      case 'diskFull': {
        const h = this.hostOf(c.node);
        this.countFault(`disk full (${c.node} pg_wal)`);
        const disk = h.disk;
        const prefix = `${DATA_DIR}/pg_wal`;
        disk.fullPrefixes.add(prefix);
        h.fullUntil = Math.max(h.fullUntil, this.sched.now + c.ms);
        this.sched.at(c.ms, 'sim', 'disk space freed', () => disk.fullPrefixes.delete(prefix));
        return;
      }
      case 'corrupt':
        return c.node === 'standby' ? this.corruptStandby() : this.corruptPrimary(c.downMs);
      case 'slowDisk': {
        this.countFault(`slow disk (${c.node})`);
        // The hold runs on simulated time; it ends by itself (DiskLatency checks the clock).
        this.hostOf(c.node).latency.set(c.writeMs, c.latencyMs, c.ms, this.sched.now);
        return;
      }
      case 'clockJump':
        this.countFault(`clock jump (${c.node})`);
        this.sched.jumpWallClock(this.hostOf(c.node).owner, c.ms);
        return;
      case 'failover':
        return this.failover(c.how);
      case 'wait':
        await this.sched.runFor(c.ms);
        return;
    }
  }

  /**
   * Flip one byte inside one of `recs` (drawn from the disk stream) in the newest segment file of
   * `h` that holds it on timeline ≤ `tli`; the start LSN of the damaged record, or null if none fits.
   */
  private flipByteInRecord(
    h: Host,
    tli: number,
    recs: readonly WalRecord[],
    kind: string,
  ): Lsn | null {
    if (recs.length === 0) return null;
    const rec = recs[this.faultRng.int(0, recs.length - 1)]!;
    const size = rec.endLsn - rec.lsn;
    if (size <= SIZE_OF_XLOG_RECORD) return null;
    const at = rec.lsn + SIZE_OF_XLOG_RECORD + this.faultRng.int(0, size - SIZE_OF_XLOG_RECORD - 1);
    const segSize = this.scenario.options.walSegmentSize;
    const files = listSegmentFiles(DATA_DIR, segSize, h.disk).filter(
      (f) => f.segno === segmentOf(at, segSize) && f.tli <= tli,
    );
    const file = files[files.length - 1];
    if (file === undefined) return null;
    this.countFault(kind);
    h.disk.flipByte(
      `${walDir(DATA_DIR)}/${file.name}`,
      segmentOffset(at, segSize),
      1 << this.faultRng.int(0, 7),
    );
    this.record(
      this.sched.now,
      'sim',
      `flipped a byte at ${formatLsn(at)} in the record at ${formatLsn(rec.lsn)} (${file.name} on ${h.name})`,
    );
    return rec.lsn;
  }

  /**
   * Media corruption on the standby: flip one byte inside a record it has flushed but not replayed.
   * Replay must stop at that record and never apply it (checked after every step); the standby is
   * restarted at the next step (crash recovery ends local WAL there and streaming fetches it again).
   */
  private corruptStandby(): void {
    const h = this.standby;
    const n = h.node;
    if (n === null || !n.inRecovery || n.startup === null) return;
    const from = n.startup.nextLsn;
    const to = n.wal.flushLsn;
    if (from >= to) return;
    // Only records the running startup process will still read from disk: bytes it already holds
    // in memory replay intact, so the damage would not be seen before the next restart.
    const readAhead = n.startup.readAheadLsn();
    const recs = [...readWal(DATA_DIR, from, { ...n.readOptions(), stopLsn: to })].filter(
      (r) => r.lsn >= readAhead,
    );
    const lsn = this.flipByteInRecord(h, n.timeline, recs, 'corruption (standby WAL)');
    if (lsn === null) return;
    h.corruptLsn = lsn;
    h.corruptOwner = h.owner;
    h.restartAt = this.sched.now; // healed by a restart at the next step boundary
  }

  /**
   * Media corruption on the primary: flip one byte inside a flushed WAL record that crash recovery
   * will read (after the data image's REDO record), crash the primary at once (a process crash:
   * nothing else is lost) and restart it after downMs. Like PostgreSQL, crash recovery takes the
   * bad record for the end of WAL (checked: it replays nothing at or past it), so every commit at
   * or past that record is gone from the primary although it was acknowledged — media corruption,
   * beyond the durability promise: such facts count as `lostToCorruption`; a fact whose commit
   * ended before the record must still hold. A standby that received WAL past the record holds a
   * history the primary's new WAL contradicts (PostgreSQL would need pg_rewind or a new base
   * backup): the operator stops it before restarting the primary and re-clones it afterwards.
   */
  private async corruptPrimary(downMs: number): Promise<void> {
    const h = this.primary;
    const n = h.node;
    if (n === null || n.inRecovery) return;
    const redo = readDataImage(DATA_DIR, h.disk).header.redoLsn;
    if (redo >= n.wal.flushLsn) return;
    const recs = [
      ...readWal(DATA_DIR, redo, { ...n.readOptions(), stopLsn: n.wal.flushLsn }),
    ].filter((r) => r.lsn > redo);
    const bad = this.flipByteInRecord(h, n.timeline, recs, 'corruption (primary WAL)');
    if (bad === null) return;
    const crashAt = this.sched.now;
    this.kill(h, false);
    h.restartAt = null;
    const s = this.standby;
    const sn = s.node;
    // Received past the bad record, or unknown (down: its disk may hold anything the primary sent).
    const diverged =
      sn === null || !sn.inRecovery || Math.max(sn.wal.writeLsn, sn.wal.flushLsn) > bad;
    if (diverged && sn !== null) await this.stop(s, 'fast');
    if (diverged) s.restartAt = null;
    await this.sched.runFor(downMs);
    await this.waitForSpace(h);
    await this.start(h);
    const p = h.node;
    if (p === null) return;
    if (parseLsn(p.startupReplay.toLsn) > bad) {
      this.violation(
        `${h.name}: crash recovery replayed to ${p.startupReplay.toLsn}, past the corrupt record at ${formatLsn(bad)}`,
      );
    }
    await this.checkLedger(h, 'primary restart after WAL corruption', (f) =>
      f.commitEndMax > bad
        ? 'corruption'
        : this.guaranteedAfterPrimaryCrash(f, crashAt)
          ? 'must'
          : 'may',
    );
    if (diverged) await this.rebuildStandby();
  }

  private expectedError(e: unknown, what: string): void {
    if (e instanceof InvariantViolation) this.violation(`${what}: ${e.message}`);
    else if (!isWalsimError(e))
      this.violation(`${what}: unexpected error ${(e as Error).stack ?? String(e)}`);
  }

  /** Issue a write statement on the primary; the ledger learns its facts when it is acknowledged. */
  private issue(sql: string): void {
    const h = this.primary;
    const node = h.node;
    if (node === null) return;
    const seq = ++this.issueSeq;
    this.supersede(sql, seq);
    const level = this.scenario.options.synchronousCommit;
    const maxValue = this.maxValueIssued;
    if (sql.startsWith('INSERT'))
      for (const m of sql.matchAll(/(?<![a-z_])\d+/g))
        this.maxValueIssued = Math.max(this.maxValueIssued, Number(m[0]));
    const p: Pending = { seq, sql, host: h, owner: h.owner };
    this.pending.add(p);
    node.execute(sql).then(
      () => {
        if (!this.pending.delete(p)) return;
        this.acknowledged++;
        this.acknowledgedByLevel[level] = (this.acknowledgedByLevel[level] ?? 0) + 1;
        this.record(this.sched.now, 'sim', `ack ${sql}`);
        this.addFacts(sql, level, maxValue, seq, h.maxCommitEnd);
      },
      (e: unknown) => {
        if (!this.pending.delete(p)) return;
        this.record(this.sched.now, 'sim', `error ${sql}: ${(e as Error).message}`);
        this.expectedError(e, sql);
      },
    );
  }

  /**
   * A statement that may remove what earlier facts promise: those facts are no longer checked —
   * including facts of statements issued before it but acknowledged after it was issued.
   */
  private supersede(sql: string, seq: number): void {
    let m: RegExpExecArray | null;
    const drop = (pred: (f: Fact) => boolean) => {
      for (let i = this.ledger.length - 1; i >= 0; i--)
        if (pred(this.ledger[i]!)) this.ledger.splice(i, 1);
      this.supersessions.push({ seq, covers: pred });
      let oldest = seq;
      for (const p of this.pending) oldest = Math.min(oldest, p.seq);
      this.supersessions = this.supersessions.filter((x) => x.seq >= oldest);
    };
    if ((m = /^DELETE FROM (\w+) WHERE c < (\d+)$/.exec(sql))) {
      const [t, n] = [m[1]!, Number(m[2])];
      drop((f) => f.table === t && f.kind === 'present' && f.value < n);
    } else if ((m = /^TRUNCATE (\w+)$/.exec(sql))) {
      const t = m[1]!;
      drop((f) => f.table === t && f.kind === 'present');
    } else if ((m = /^DROP TABLE (\w+)$/.exec(sql))) {
      const t = m[1]!;
      drop((f) => f.table === t && (f.kind === 'present' || f.kind === 'tableExists'));
    }
  }

  private addFacts(
    sql: string,
    level: SynchronousCommit,
    maxValueBefore: number,
    seq: number,
    commitEndMax: Lsn,
  ): void {
    const fact = (kind: Fact['kind'], table: string, value = 0) => {
      const f: Fact = {
        kind,
        table,
        value,
        level,
        ackAt: this.sched.now,
        commitEndMax,
        durableOnPrimary: false,
        onStandby: false,
        sql,
      };
      if (!this.supersessions.some((x) => x.seq > seq && x.covers(f))) this.ledger.push(f);
    };
    let m: RegExpExecArray | null;
    if ((m = /^CREATE TABLE (\w+)/.exec(sql))) fact('tableExists', m[1]!);
    else if (
      (m = /^INSERT INTO (\w+) (?:VALUES \((\d+)\)|SELECT generate_series\((\d+),)/.exec(sql))
    )
      fact('present', m[1]!, Number(m[2] ?? m[3]));
    else if ((m = /^DELETE FROM (\w+) WHERE c < (\d+)$/.exec(sql)))
      fact('absentBelow', m[1]!, Number(m[2]));
    else if ((m = /^TRUNCATE (\w+)$/.exec(sql))) fact('absentBelow', m[1]!, maxValueBefore + 1);
    else if ((m = /^DROP TABLE (\w+)$/.exec(sql))) fact('tableGone', m[1]!);
  }

  // ------------------------------------------------------------------------- failover

  private async failover(how: 'crash' | 'power' | 'immediate' | 'fast'): Promise<void> {
    const oldPrimary = this.primary;
    const newPrimary = this.standby;
    if (oldPrimary.node === null) return;
    this.countFault(`failover (${how})`);
    if (newPrimary.node === null) await this.start(newPrimary);
    if (newPrimary.node === null) return;
    // Fault atlas: the operator frees the standby's disk before promoting it. (Promotion on a full
    // disk fails writing the history file, and the process dies, as PostgreSQL's startup would.)
    newPrimary.disk.fullPrefixes.clear();
    if (how === 'crash' || how === 'power') this.kill(oldPrimary, how === 'power');
    else await this.stop(oldPrimary, how);
    oldPrimary.restartAt = null;
    const node = newPrimary.node;
    const r = await this.settle(node.promote(true, 60), ACTION_MS + 10_000);
    if (!r.done || r.error !== undefined || r.value !== true) {
      this.violation(
        `promotion of ${newPrimary.name} failed: ${r.done ? String((r.error as Error | undefined)?.message ?? r.value) : 'did not finish'}`,
      );
      return;
    }
    this.failovers++;
    this.primary = newPrimary;
    this.standby = oldPrimary;
    // The failover clock runs on the node's injected clock: its phases are simulated milliseconds
    // (waits and slow fsyncs take simulated time, CPU does not); the cost model gives modeled time.
    // The simulator's trace shows modeled seconds: an edge, so it prices the report here.
    const report = node.failoverReport();
    const fr = report === null ? null : withModel(report, defaultCostProfile());
    this.failoverTimes.push({
      failoverMs: fr?.failoverMs ?? null,
      replayMs: fr?.phases.replayMs ?? null,
      endOfRecoveryMs: fr?.phases.endOfRecoveryMs ?? null,
      openForWritesMs: fr?.phases.openForWritesMs ?? null,
      modeledS: fr?.model?.failoverS ?? null,
    });
    this.record(
      this.sched.now,
      'sim',
      `promoted ${newPrimary.owner} on timeline ${node.timeline}; failover ${fr?.failoverMs ?? '?'} ms ` +
        `(replay ${fr?.phases.replayMs ?? '?'}, end of recovery ${fr?.phases.endOfRecoveryMs ?? '?'}, open for writes ${fr?.phases.openForWritesMs ?? '?'}); ` +
        `modeled ${fr?.model ? `${fr.model.failoverS.toFixed(6)} s (${fr.model.profile})` : 'n/a'}`,
    );
    await this.checkLedger(newPrimary, 'failover', (f) =>
      this.guaranteedAfterFailover(f, newPrimary),
    );
    newPrimary.corruptLsn = null; // promotion truncated WAL at the bad record
    await this.rebuildStandby();
  }

  /** The old primary becomes a standby of the new one through a fresh base backup (its disk is wiped). */
  private async rebuildStandby(): Promise<void> {
    const src = this.primary;
    const dst = this.standby;
    if (src.node === null) return;
    const r = await this.settle(src.node.baseBackup(BACKUP_DIR), ACTION_MS);
    if (!r.done || r.error !== undefined) {
      this.violation(
        `base backup from ${src.name} failed: ${r.done ? (r.error as Error).message : 'did not finish'}`,
      );
      return;
    }
    dst.disk = this.newDisk();
    dst.corruptLsn = null;
    src.disk.copyTo(BACKUP_DIR, dst.disk, DATA_DIR);
    src.disk.rmrf(BACKUP_DIR);
    dst.disk.syncAll();
    for (const f of this.ledger) f.onStandby = f.durableOnPrimary;
    await this.start(dst);
  }

  // ------------------------------------------------------------------------- the ledger

  private guaranteedAfterPrimaryCrash(f: Fact, crashAt: number): boolean {
    return f.durableOnPrimary || f.level !== 'off' || f.ackAt + ASYNC_FLUSH_MS <= crashAt;
  }

  /** `promoted` is the host that was the standby until this failover. */
  private guaranteedAfterFailover(f: Fact, promoted: Host): Verdict {
    if (f.onStandby) return 'must';
    // Corrupt WAL the standby had not yet refetched: promotion ends recovery at the bad record, so
    // commits at or past it are lost (RELIABILITY.md: "corrupt WAL on standby, promote") — to the
    // corruption, not to a broken promise; commits before it keep their level's guarantee.
    if (promoted.corruptLsn !== null && f.commitEndMax > promoted.corruptLsn) return 'corruption';
    if (f.level === 'on' || f.level === 'remote_apply') return 'must';
    // remote_write: written to the standby's OS, so lost only if that machine lost power since.
    return f.level === 'remote_write' && promoted.lastPowerLossAt < f.ackAt ? 'must' : 'may';
  }

  private async holds(node: ServerNode, f: Fact): Promise<boolean> {
    const count = async (where: string): Promise<number | null> => {
      try {
        const r = await node.execute(`SELECT count(*) FROM ${f.table}${where}`);
        return Number(r.rows[0]!.count);
      } catch (e) {
        if (isWalsimError(e) && e.kind === 'undefined_table') return null;
        throw e;
      }
    };
    switch (f.kind) {
      case 'present':
        return ((await count(` WHERE c = ${f.value}`)) ?? 0) >= 1;
      case 'absentBelow':
        return ((await count(` WHERE c < ${f.value}`)) ?? 0) === 0;
      case 'tableExists':
        return (await count('')) !== null;
      case 'tableGone':
        return (await count('')) === null;
    }
  }

  /**
   * Check every fact on `h`: a guaranteed fact ('must', or `true`) that does not hold is a lost
   * acknowledged commit (violation); one that was not guaranteed ('may', `false`) is dropped from
   * the ledger (allowed loss); one destroyed by media corruption ('corruption') too, counted apart.
   */
  private async checkLedger(
    h: Host,
    when: string,
    guaranteed: (f: Fact) => boolean | Verdict,
  ): Promise<void> {
    const node = h.node;
    if (node === null) return;
    for (let i = this.ledger.length - 1; i >= 0; i--) {
      const f = this.ledger[i]!;
      if (await this.holds(node, f)) {
        f.durableOnPrimary = true;
        if (when === 'failover') f.onStandby = true;
        continue;
      }
      const v = guaranteed(f);
      if (v === true || v === 'must') {
        this.lost++;
        this.violation(
          `${when}: acknowledged commit lost on ${h.name} (synchronous_commit=${f.level}, acknowledged at t=${f.ackAt} ms): ${f.sql} [${f.kind} ${f.table} ${f.value}]`,
        );
      } else if (v === 'corruption') {
        this.lostToCorruption++;
        this.record(
          this.sched.now,
          'sim',
          `${when}: lost to WAL corruption on ${h.name} (commit ends at or before ${formatLsn(f.commitEndMax)}): ${f.sql}`,
        );
      } else {
        this.lostAllowed++;
      }
      this.ledger.splice(i, 1);
    }
  }

  /** At the instant a commit is acknowledged, the sync standby holds it as far as the level says. */
  private checkSyncAck(primary: ServerNode, endLsn: Lsn): void {
    const level = primary.config.synchronousCommit;
    if (level !== 'remote_write' && level !== 'on' && level !== 'remote_apply') return;
    const sb = this.standby.node;
    // A dead standby's in-flight replies are lost with its connections, so a live standby on the
    // same timeline is the one that confirmed; with none alive there is nothing to compare.
    if (sb === null || !sb.inRecovery || sb.timeline !== primary.timeline) return;
    const pos =
      level === 'remote_write'
        ? sb.wal.writeLsn
        : level === 'on'
          ? sb.wal.flushLsn
          : (sb.startup?.replayEndLsn ?? 0);
    if (pos < endLsn) {
      this.violation(
        `commit ending at ${formatLsn(endLsn)} acknowledged under synchronous_commit=${level}, but the standby's ${level === 'remote_write' ? 'write' : level === 'on' ? 'flush' : 'replay'} LSN is ${formatLsn(pos)}`,
      );
    }
  }

  // ------------------------------------------------------------------------- invariants

  /** After every step: positions, buffers, timelines. */
  checkInvariants(where: string): void {
    const p = this.primary.node;
    const s = this.standby.node;
    for (const h of [this.primary, this.standby]) {
      const n = h.node;
      if (n === null) continue;
      const orphans = n.storage.orphanBuffers();
      if (orphans.length > 0)
        this.violation(
          `${where}: ${h.name} buffers hold dropped blocks ${orphans.slice(0, 5).join(', ')}`,
        );
      if (n.timeline !== n.wal.timeline)
        this.violation(`${where}: ${h.name} timeline ${n.timeline} but WAL on ${n.wal.timeline}`);
      // The history file is written once per timeline and the flush LSN only grows within a process:
      // checked once per process incarnation and timeline (a power loss starts a new incarnation).
      if (n.timeline > 1 && h.historyCheckedFor !== `${h.owner}/${n.timeline}`) {
        h.historyCheckedFor = `${h.owner}/${n.timeline}`;
        try {
          const hist = readTimelineHistory(DATA_DIR, n.timeline, h.disk);
          const last = hist[hist.length - 2];
          if (last === undefined || last.endLsn === null || last.endLsn > n.wal.flushLsn) {
            this.violation(
              `${where}: ${h.name} history of timeline ${n.timeline} ends its parent after the flush LSN`,
            );
          }
        } catch (e) {
          this.violation(
            `${where}: ${h.name} history of timeline ${n.timeline} unreadable: ${(e as Error).message}`,
          );
        }
      }
      if (
        h.corruptLsn !== null &&
        h.owner === h.corruptOwner &&
        n.inRecovery &&
        n.startup !== null &&
        n.startup.nextLsn > h.corruptLsn
      ) {
        this.violation(
          `${where}: ${h.name} replayed past the corrupt record at ${formatLsn(h.corruptLsn)} (next ${formatLsn(n.startup.nextLsn)})`,
        );
      }
      // Healed once a restarted process (crash recovery ended local WAL at the bad record) has
      // streamed and flushed past it again.
      if (h.corruptLsn !== null && h.owner !== h.corruptOwner && n.wal.flushLsn > h.corruptLsn)
        h.corruptLsn = null;
      if (n.inRecovery && n.startup !== null && n.startup.replayEndLsn > n.wal.flushLsn) {
        this.violation(
          `${where}: ${h.name} replayed to ${formatLsn(n.startup.replayEndLsn)} past its flushed WAL ${formatLsn(n.wal.flushLsn)}`,
        );
      }
    }
    if (p !== null && s !== null && s.inRecovery && !p.inRecovery && s.timeline === p.timeline) {
      if (s.wal.flushLsn > p.wal.flushLsn) {
        this.violation(
          `${where}: standby flushed ${formatLsn(s.wal.flushLsn)}, ahead of the primary's flush ${formatLsn(p.wal.flushLsn)}`,
        );
      }
      if (s.timeline > p.timeline)
        this.violation(`${where}: standby on timeline ${s.timeline}, primary on ${p.timeline}`);
    }
  }

  // ------------------------------------------------------------------------- liveness

  /** Heal every fault, restart what is down, resume replay; the cluster must converge in bounded time. */
  async converge(): Promise<void> {
    await this.restartDue(); // a standby whose WAL was just damaged is restarted, as at a step boundary
    this.net.healAll();
    for (const h of [this.primary, this.standby]) {
      h.disk.fullPrefixes.clear();
      h.latency.clear();
      if (h.node === null) await this.restart(h);
    }
    const p = this.primary.node;
    const s = this.standby.node;
    if (p === null || s === null) return;
    if (s.inRecovery) {
      const r = await this.settle(s.execute('SELECT pg_wal_replay_resume()'), ACTION_MS);
      if (r.error !== undefined) this.expectedError(r.error, 'resume');
    }
    const caughtUp = () =>
      this.pending.size === 0 &&
      s.startup !== null &&
      s.receiver?.state === 'streaming' &&
      s.startup.nextLsn >= p.wal.flushLsn &&
      s.wal.flushLsn === p.wal.flushLsn &&
      p.wal.flushLsn === p.wal.insertLsn;
    if (!(await this.sched.runUntil(caughtUp, CONVERGE_MS))) {
      this.violation(
        `no convergence within ${CONVERGE_MS} ms: ${this.pending.size} statements pending, primary flush ${formatLsn(p.wal.flushLsn)}, standby flush ${formatLsn(s.wal.flushLsn)} replay ${formatLsn(s.startup?.nextLsn ?? 0)}, receiver ${s.receiver?.state}`,
      );
      return;
    }
    this.checkInvariants('after convergence');
    await this.checkLedger(this.primary, 'end (primary)', () => true);
    await this.checkLedger(this.standby, 'end (standby)', () => true);
    const a = p.inspect();
    const b = s.inspect();
    const tables = (x: typeof a) => JSON.stringify(x.tables.map((t) => [t.name, t.rows, t.digest]));
    if (tables(a) !== tables(b))
      this.violation(
        `after convergence the nodes differ: primary ${tables(a)} standby ${tables(b)}`,
      );
  }

  // ------------------------------------------------------------------------- run

  async run(): Promise<SimResult> {
    const stop = this.opts.stopAtViolation ?? true;
    try {
      this.record(
        0,
        'sim',
        `seed ${this.scenario.seed} options ${JSON.stringify(this.scenario.options)}`,
      );
      await this.setup();
      const cmds = this.scenario.commands;
      for (let i = 0; i < cmds.length && !(stop && this.violations.length > 0); i++) {
        await this.restartDue();
        this.record(this.sched.now, 'sim', `step ${i}: ${describeCommand(cmds[i]!)}`);
        await this.exec(cmds[i]!);
        await this.sched.runFor(this.scenario.options.stepMs);
        this.checkInvariants(`after step ${i} (${describeCommand(cmds[i]!)})`);
        this.stepsRun = i + 1;
      }
      if (!(stop && this.violations.length > 0)) await this.converge();
    } catch (e) {
      if (e instanceof EventBudgetExceeded) this.violation(`livelock: ${e.message}`);
      else this.violation(`simulation error: ${(e as Error).stack ?? String(e)}`);
    }
    this.record(this.sched.now, 'sim', `end: ${this.violations.length} violations`);
    return {
      seed: this.scenario.seed,
      ok: this.violations.length === 0,
      violations: this.violations,
      steps: this.stepsRun,
      faults: this.faults,
      acknowledged: this.acknowledged,
      acknowledgedByLevel: this.acknowledgedByLevel,
      lost: this.lost,
      lostAllowed: this.lostAllowed,
      lostToCorruption: this.lostToCorruption,
      panics: this.panics,
      failoverTimes: this.failoverTimes,
      failovers: this.failovers,
      events: this.sched.eventsRun,
      simMs: this.sched.now,
      diskBytesWritten: this.disks.reduce((n, d) => n + d.counters.bytesWritten, 0),
      traceHash: this.hash.toString(16).padStart(8, '0'),
      ...(this.trace !== null ? { trace: this.trace } : {}),
    };
  }
}

export async function runSimulation(
  scenario: Scenario,
  opts: SimRunOptions = {},
): Promise<SimResult> {
  const sim = new Simulation(scenario, opts);
  // An exception escaping the node code would end a real server process: a violation here.
  const onUncaught = (e: unknown) =>
    sim.violations.push(
      `uncaught exception (the server process would die): ${(e as Error).stack ?? String(e)}`,
    );
  process.on('uncaughtException', onUncaught);
  process.on('unhandledRejection', onUncaught);
  try {
    return await sim.run();
  } finally {
    process.off('uncaughtException', onUncaught);
    process.off('unhandledRejection', onUncaught);
  }
}
