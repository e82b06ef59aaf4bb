/**
 * The simulated cluster's machines and their processes: each host is a machine (its `MemDisk`, its
 * disk latency, its process incarnations `A#1`, `A#2`, …) running at most one production
 * `ServerNode` on the scheduler's clock and the in-memory network. Starting, killing and stopping
 * a process live here, with the bookkeeping a death needs (statements in flight get an unknown
 * outcome, an expected PANIC is told apart from a finding). What the operator does with these
 * (sim/operator.ts), the faults (sim/faults.ts) and the checkers (sim/checkers/) build on it.
 */
import { isWalsimError } from '../common/errors.ts';
import { isErrnoCode } from '../common/disk.ts';
import { InvariantViolation } from '../common/assert.ts';
import { SeededRandom } from '../common/random.ts';
import type { Lsn } from '../wal/lsn.ts';
import { DiskLatency, LatencyDisk } from '../common/latency-disk.ts';
import { ServerNode } from '../server/node.ts';
import type { NodeConfig } from '../server/cluster-files.ts';
import { MemDisk } from './mem-disk.ts';
import { Network } from './network.ts';
import { Scheduler } from './scheduler.ts';
import { subSeed, type Role, type Scenario } from './scenario.ts';
import { Trace } from './trace.ts';

export const DATA_DIR = '/data';
export const BACKUP_DIR = '/basebackup';
const TOKEN = 'sim';
/** Simulated time a start, stop or promotion may take. */
export const ACTION_MS = 60_000;

export type HostName = 'A' | 'B';

export interface Host {
  name: HostName;
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
  /** When the machine's pg_wal was full or slow (simulated ms): the WAL writer may not flush then. */
  walTrouble: Array<{ from: number; to: number }>;
}

/** A write statement issued and not yet answered; a death of its process drops it (outcome unknown). */
export interface Pending {
  seq: number;
  sql: string;
  host: Host;
  owner: string;
}

export interface Settled<T> {
  done: boolean;
  value?: T;
  error?: unknown;
}

export class SimCluster {
  readonly sched = new Scheduler();
  readonly net: Network;
  readonly faultRng: SeededRandom;
  readonly trace: Trace;
  readonly hosts: Record<HostName, Host>;
  primary: Host;
  standby: Host;
  readonly pending = new Set<Pending>();
  readonly faults: Record<string, number> = {};
  /** The process incarnation that last ended in an expected PANIC (a WAL write on a full disk). */
  panicked = '';
  panics = 0;
  /** SIM-2's check at every acknowledged commit (set by the simulation). */
  onCommitAcknowledged: (primary: ServerNode, endLsn: Lsn) => void = () => {};
  /** Every machine disk of the run, replaced ones included (their counters are the run's I/O). */
  private readonly disks: MemDisk[] = [];

  constructor(
    readonly scenario: Scenario,
    keepTrace: boolean,
  ) {
    const seed = scenario.seed;
    this.faultRng = new SeededRandom(subSeed(seed, 'disk'));
    this.net = new Network(this.sched, new SeededRandom(subSeed(seed, 'network')), {
      ...scenario.options.link,
    });
    this.trace = new Trace(keepTrace, () => this.sched.now);
    this.sched.onEvent = (at, owner, label) => this.record(at, owner, label);
    this.sched.onUncaught = (owner, err) => {
      // The process that just PANICked rethrows its WAL write error on the way out (production has
      // already exited inside fatal()); anything else would end a real server: a finding.
      if (owner === this.panicked) return;
      this.violation(
        `uncaught exception in ${owner} (the server process would die): ${(err as Error).stack ?? String(err)}`,
      );
    };
    this.hosts = { A: this.host('A'), B: this.host('B') };
    this.primary = this.hosts.A;
    this.standby = this.hosts.B;
  }

  private host(name: HostName): Host {
    const latency = new DiskLatency();
    const spread = new SeededRandom(subSeed(this.scenario.seed, `latency-${name}`));
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
      walTrouble: [],
    };
  }

  newDisk(): MemDisk {
    const d = new MemDisk();
    this.disks.push(d);
    return d;
  }

  diskBytesWritten(): number {
    return this.disks.reduce((n, d) => n + d.counters.bytesWritten, 0);
  }

  // ------------------------------------------------------------------------- trace

  record(at: number, owner: string, what: string): void {
    this.trace.record(at, owner, what);
  }

  violation(message: string): void {
    this.trace.violation(message);
  }

  get violations(): string[] {
    return this.trace.violations;
  }

  countFault(kind: string): void {
    this.faults[kind] = (this.faults[kind] ?? 0) + 1;
  }

  /** A statement's error: a WalsimError is an answer; anything else is a finding. */
  expectedError(e: unknown, what: string): void {
    if (e instanceof InvariantViolation) this.violation(`${what}: ${e.message}`);
    else if (!isWalsimError(e))
      this.violation(`${what}: unexpected error ${(e as Error).stack ?? String(e)}`);
  }

  // ------------------------------------------------------------------------- hosts

  hostOf(role: Role): Host {
    return role === 'primary' ? this.primary : this.standby;
  }

  other(h: Host): Host {
    return h === this.hosts.A ? this.hosts.B : this.hosts.A;
  }

  config(h: Host): NodeConfig {
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

  /** Wait (in simulated time) for a promise the nodes will settle; done false if it did not within ms. */
  async settle<T>(p: Promise<T>, ms: number): Promise<Settled<T>> {
    const out: Settled<T> = { done: false };
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

  // ------------------------------------------------------------------------- processes

  /** Start the process of a host from its data directory (crash recovery if it was not shut down). */
  async start(h: Host): Promise<void> {
    h.incarnation++;
    h.owner = `${h.name}#${h.incarnation}`;
    h.restartAt = null;
    const owner = h.owner;
    let node: ServerNode;
    try {
      node = this.open(h, owner);
    } catch (e) {
      this.violation(`${h.name} failed to start: ${(e as Error).message}`);
      return;
    }
    h.node = node;
    this.net.listen(h.name, owner, (conn) => node.acceptReplication(conn));
    h.maxCommitEnd = 0;
    node.onCommitAcknowledged = (endLsn) => {
      if (endLsn > h.maxCommitEnd) h.maxCommitEnd = endLsn;
      this.onCommitAcknowledged(node, endLsn);
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

  /** ServerNode.open on the host's disk, clock and network, as process incarnation `owner`. */
  private open(h: Host, owner: string): ServerNode {
    const clock = this.sched.clockFor(owner);
    const dial = this.net.dialer(h.name, owner, () => this.other(h).name);
    return ServerNode.open({
      dataDir: DATA_DIR,
      config: this.config(h),
      token: TOKEN,
      log: (m) => this.log(h, owner, m),
      fatal: (e) => this.fatal(h, owner, e),
      // The slow-disk layer production uses, over the machine's in-memory disk: a synchronous
      // write or fsync stalls by advancing simulated time inside the running event.
      env: {
        clock,
        disk: new LatencyDisk(h.disk, clock, (ms) => this.sched.advance(ms), h.latency),
        // The upstream is always the other host (primary_conninfo's host and port are unused).
        dialer: () => dial,
      },
    });
  }

  /** The process would exit non-zero (a redo failure): a finding, and the process is gone. */
  private fatal(h: Host, owner: string, e: unknown): void {
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
  }

  /** The process dies: its events stop, its sockets reset, the disk keeps what the fault allows. */
  kill(h: Host, power: boolean): void {
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

  /** pg_ctl stop -m mode; false if the process ended in a PANIC instead (a crash, for the ledger). */
  async stop(h: Host, mode: 'smart' | 'fast' | 'immediate'): Promise<boolean> {
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
  async waitForSpace(h: Host): Promise<void> {
    const wait = h.fullUntil - this.sched.now;
    if (h.disk.fullPrefixes.size > 0 && wait > 0) await this.sched.runFor(wait);
  }
}
