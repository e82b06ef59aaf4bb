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
import { alterSystem, CONF_FILE, loadNodeConfig, type NodeConfig } from '../server/node-config.ts';
import { DEFAULT_WAL_SETTINGS, formatConninfo } from '../server/settings.ts';
import { writeFileAtomic } from '../common/durable-file.ts';
import { readTimelineHistoryFile, timelineHistoryFileName, walDir } from '../wal/segment.ts';
import { timelineOfDataDir } from '../server/topology-core.ts';
import { MemDisk } from './mem-disk.ts';
import { exitedProcessError, exitFencedDisk } from './exited-disk.ts';
import { Network } from './network.ts';
import { Scheduler } from './scheduler.ts';
import { applicationNameOf, subSeed, type Role, type Scenario } from './scenario.ts';
import { Trace } from './trace.ts';
import { NodeStorage } from '../storage/node-storage.ts';
import { parseSharedBuffers } from '../storage/shared-buffers.ts';
import type { Clock } from '../common/clock.ts';
import type { Dialer } from '../common/transport.ts';
import { InjectedDropFault, type DropFault } from '../storage/smgr.ts';

export const DATA_DIR = '/data';
export const BACKUP_DIR = '/basebackup';
const TOKEN = 'sim';
/** Simulated time a start, stop or promotion may take. */
export const ACTION_MS = 60_000;

export type HostName = string;

/** The replication port a host listens on in the simulated network (primary_conninfo names it). */
const PORT_BASE = 5001;

export interface Host {
  name: HostName;
  /** Its replication port (primary_conninfo of its standbys names it) and application_name. */
  port: number;
  applicationName: string;
  /** The node it streams from while a standby (primary_conninfo), or null. */
  upstream: Host | null;
  /**
   * Its flush LSN when it last got a new upstream (set-up, repoint, rebuild, the upstream's
   * rebuild or restart on damaged WAL): the cascade check (SIM-7) holds for WAL received since.
   */
  cascadeBaseline: Lsn;
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

/** Where an acknowledged commit is known to be, on several nodes (by machine disk). */
export interface Copies {
  flushed: Set<MemDisk>;
  written: Set<MemDisk>;
}

/** The copies of a commit at its acknowledgement (`SimCluster.copiesOf`). */
export interface AckCopies extends Copies {
  /** A standby had reached the commit only past a byte flipped in its WAL: that copy is gone. */
  damaged: boolean;
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
  /** Every machine, in name order (A first: the first primary). */
  readonly hosts: Host[];
  primary: Host;
  readonly pending = new Set<Pending>();
  /** synchronous_standby_names in force on the primary (the operator hands it over at each promotion). */
  syncNames: string;
  readonly faults: Record<string, number> = {};
  /**
   * Every process incarnation that ended in an expected exit (a PANIC on a full disk, a fault armed
   * inside a drop). A set, not the last one: a caller waiting on one process must not lose its
   * verdict when another process exits during the wait (seed 1600033957).
   */
  readonly panicked = new Set<string>();
  panics = 0;
  /** Each process's storage as its start loads it, before it replays WAL (SIM-10, set by the simulation). */
  onStorageLoaded: (h: Host, storage: NodeStorage) => void = () => {};
  /** SIM-2's check at every acknowledged commit (set by the simulation). */
  onCommitAcknowledged: (primary: ServerNode, endLsn: Lsn) => void = () => {};
  /** Every machine disk of the run, replaced ones included (their counters are the run's I/O). */
  private readonly disks: MemDisk[] = [];
  /** NBuffers of every node: the scenario's shared_buffers, parsed once. */
  private readonly nBuffers: number;

  constructor(
    readonly scenario: Scenario,
    keepTrace: boolean,
  ) {
    const seed = scenario.seed;
    this.nBuffers = parseSharedBuffers(scenario.options.sharedBuffers).nBuffers;
    this.faultRng = new SeededRandom(subSeed(seed, 'disk'));
    this.net = new Network(this.sched, new SeededRandom(subSeed(seed, 'network')), {
      ...scenario.options.link,
    });
    this.trace = new Trace(keepTrace, () => this.sched.now);
    // Hooks are set through locals, never `x.f = () => …` (sim/README rule 6).
    const onEvent: Scheduler['onEvent'] = (at, owner, label) => this.record(at, owner, label);
    this.sched.onEvent = onEvent;
    const onUncaught: Scheduler['onUncaught'] = (owner, err) => {
      // The process that just PANICked rethrows its WAL write error on the way out (production has
      // already exited inside fatal()); anything else would end a real server: a finding.
      if (this.panicked.has(owner)) return;
      this.violation(
        `uncaught exception in ${owner} (the server process would die): ${(err as Error).stack ?? String(err)}`,
      );
    };
    this.sched.onUncaught = onUncaught;
    this.syncNames = scenario.topology.synchronousStandbyNames;
    const names = ['A', ...scenario.topology.upstreams.map((_, i) => String.fromCharCode(66 + i))];
    this.hosts = names.map((n, i) => this.host(n, i, names.length));
    this.primary = this.hosts[0]!;
    scenario.topology.upstreams.forEach((u, i) => {
      this.hosts[i + 1]!.upstream = this.byName(u);
    });
  }

  /** Two nodes: the simulator's first shape, whose seeds keep their behaviour. */
  get twoNodes(): boolean {
    return this.hosts.length === 2;
  }

  byName(name: HostName): Host {
    const h = this.hosts.find((x) => x.name === name);
    if (h === undefined) throw new Error(`no host ${name}`);
    return h;
  }

  /** The hosts that are not the primary, in name order (commands aim at them by index). */
  get standbys(): Host[] {
    return this.hosts.filter((h) => h !== this.primary);
  }

  /** The primary first, then the standbys: the order the operator walks the machines in. */
  roleOrder(): Host[] {
    return [this.primary, ...this.standbys];
  }

  /**
   * `promoted` is the primary now; the old primary will stream from it. (Its other standbys are
   * repointed by the operator, sim/topology-actions.ts.)
   */
  promoted(promoted: Host, old: Host): void {
    this.archiveHistory(promoted);
    this.primary = promoted;
    promoted.upstream = null;
    old.upstream = promoted;
  }

  /**
   * `h`'s WAL was replaced or cut back (a rebuild, a rejoin, crash recovery ending at damaged WAL):
   * its own cascade baseline and its downstreams' are taken afresh (SIM-7 holds for WAL received since).
   */
  newUpstreamData(h: Host): void {
    h.cascadeBaseline = -1;
    for (const d of this.downstreamsOf(h)) d.cascadeBaseline = -1;
  }

  /**
   * The disks of the live standbys on `target`'s timeline that have flushed no further than it:
   * whatever one of them had flushed, `target` has too (same history, a prefix of it).
   */
  coveredBy(target: Host): Set<MemDisk> {
    const t = target.node;
    const out = new Set<MemDisk>();
    if (t === null) return out;
    for (const h of this.standbys) {
      const n = h.node;
      if (
        n !== null &&
        n.inRecovery &&
        n.timeline === t.timeline &&
        n.wal.flushLsn <= t.wal.flushLsn
      )
        out.add(h.disk);
    }
    return out;
  }

  /**
   * Which standbys' disks hold WAL up to `end` of the primary `p`'s timeline right now (flushed,
   * written): the ledger's copies of a commit acknowledged at this instant. Two nodes: none
   * (their ledger rules predate copies).
   */
  copiesOf(p: Host, end: Lsn): AckCopies {
    const out: AckCopies = { flushed: new Set(), written: new Set(), damaged: false };
    const pn = p.node;
    if (this.twoNodes || pn === null) return out;
    for (const h of this.standbys) {
      const n = h.node;
      if (n === null || !n.inRecovery || n.timeline !== pn.timeline) continue;
      // A byte flipped before `end` in WAL this process holds (not yet healed by its restart): the
      // positions it reported count bytes that are gone, so it holds no copy — media corruption's
      // loss, as `Ledger.copiesDamaged` says of copies made before the flip (seed 1800019708: the
      // flip fell between the standby's reply and the acknowledgement it released).
      if (h.corruptLsn !== null && h.owner === h.corruptOwner && end > h.corruptLsn) {
        if (n.wal.writeLsn >= end) out.damaged = true;
        continue;
      }
      if (n.wal.flushLsn >= end) out.flushed.add(h.disk);
      if (n.wal.writeLsn >= end) out.written.add(h.disk);
    }
    return out;
  }

  /**
   * The WAL archive's timeline history files (tli → path and text), several nodes only: every promotion's
   * is archived (archive_command) and every node finds them (restore_command). PostgreSQL looks
   * there for history files — findNewestTimeLine at a promotion, so a standby that has not yet
   * fetched the newest one still picks an unused timeline ID (without it two promotions could both
   * create "timeline 2" with different WAL, which no history comparison can tell apart), and
   * existsTimeLineHistory when a walreceiver follows several timeline switches at once (a
   * cascading upstream re-cloned by a base backup holds only its own timeline's file). The
   * simulator places them in each node's pg_wal, where walsim looks. Each with its path there,
   * built once: restore_command's check at every step boundary asks the disk for each, and a path
   * string built anew is hashed anew.
   */
  readonly historyArchive = new Map<number, { path: string; text: string }>();

  archiveHistory(h: Host): void {
    const n = h.node;
    if (n === null || this.twoNodes || n.timeline <= 1) return;
    const text = readTimelineHistoryFile(DATA_DIR, n.timeline, h.disk);
    if (text === null) return;
    const path = `${walDir(DATA_DIR)}/${timelineHistoryFileName(n.timeline)}`;
    this.historyArchive.set(n.timeline, { path, text });
  }

  /**
   * restore_command's view: the archived history files `h` lacks, in its pg_wal — every one before
   * a promotion (`upTo` absent), else those of timelines up to the node's own (the ones a
   * walreceiver following several switches at once would have fetched; a newer one would make a
   * standby target a timeline before it has the WAL leading there, which walsim does not model).
   */
  restoreHistories(h: Host, upTo = Infinity): void {
    for (const [tli, { path, text }] of this.historyArchive) {
      if (tli > upTo) continue;
      if (h.disk.exists(path) || h.disk.fullPrefixes.size > 0) continue; // full: at its next start
      writeFileAtomic(path, text, h.disk);
    }
  }

  /** At a step boundary: every running node gets the archived history files up to its timeline. */
  restoreHistoriesOfRunning(): void {
    if (this.historyArchive.size === 0) return;
    for (const h of this.hosts) if (h.node !== null) this.restoreHistories(h, h.node.timeline);
  }

  /** ALTER SYSTEM SET name = value and pg_reload_conf() on a running node (the SQL a DBA sends). */
  async alterSystem(h: Host, name: string, value: string): Promise<void> {
    const n = h.node;
    if (n === null) return;
    for (const sql of [
      `ALTER SYSTEM SET ${name} = '${value.replace(/'/g, "''")}'`,
      'SELECT pg_reload_conf()',
    ]) {
      const r = await this.settle(n.execute(sql), ACTION_MS);
      if (r.error !== undefined) this.expectedError(r.error, sql);
    }
  }

  /** The first standby (the only one with two nodes). */
  get standby(): Host {
    return this.standbys[0]!;
  }

  /** The standby a command aims at: index modulo the standbys' number. */
  standbyAt(target: number | undefined): Host {
    const s = this.standbys;
    return s[(target ?? 0) % s.length]!;
  }

  /** The hosts that stream from `h`. */
  downstreamsOf(h: Host): Host[] {
    return this.hosts.filter((x) => x !== this.primary && x.upstream === h);
  }

  private host(name: HostName, index: number, nodes: number): Host {
    const latency = new DiskLatency();
    const spread = new SeededRandom(subSeed(this.scenario.seed, `latency-${name}`));
    const spreadOf = () => spread.float();
    latency.spread = spreadOf;
    return {
      name,
      port: PORT_BASE + index,
      applicationName: applicationNameOf(name, nodes),
      upstream: null,
      cascadeBaseline: 0,
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

  /** Drops by node kind and path (SIM-10's coverage counts). */
  readonly drops: Record<string, number> = {};

  countDrop(kind: string): void {
    this.drops[kind] = (this.drops[kind] ?? 0) + 1;
  }

  /** A statement's error: a WalsimError is an answer; anything else is a finding. */
  expectedError(e: unknown, what: string): void {
    // A statement of a process that exited under it (fatal()) has no answer, as for its client.
    if (exitedProcessError(e)) return;
    if (e instanceof InvariantViolation) this.violation(`${what}: ${e.message}`);
    else if (!isWalsimError(e))
      this.violation(`${what}: unexpected error ${(e as Error).stack ?? String(e)}`);
  }

  // ------------------------------------------------------------------------- hosts

  hostOf(role: Role, target?: number): Host {
    return role === 'primary' ? this.primary : this.standbyAt(target);
  }

  /** The host listening on a replication port (primary_conninfo's port names the upstream). */
  private hostByPort(port: number): Host | undefined {
    return this.hosts.find((h) => h.port === port);
  }

  /**
   * A host's settings (walsim.conf.json): its role, its upstream's port in primary_conninfo, the
   * topology's synchronous_standby_names. Two nodes keep the shape they always had: both list the
   * standby's name, so a promoted standby waits for its own new standby.
   */
  config(h: Host): NodeConfig {
    const o = this.scenario.options;
    const up = h === this.primary ? null : h.upstream;
    return {
      name: h.name,
      role: h === this.primary ? 'primary' : 'standby',
      listen: '127.0.0.1',
      port: h.port,
      sharedBuffers: o.sharedBuffers,
      dropStrategy: h === this.hosts[0] ? o.dropStrategy.primary : o.dropStrategy.standby,
      thresholdDivisor: 32,
      forceOptimized: false,
      synchronousCommit: o.synchronousCommit,
      synchronousStandbyNames: this.syncNames,
      primaryHost: '127.0.0.1',
      primaryPort: up?.port ?? (this.twoNodes ? this.other(h).port : null),
      applicationName: h.applicationName,
      walSegmentSize: o.walSegmentSize,
      hotStandby: true,
      ...(o.walKeepSizeMb === undefined
        ? {}
        : { wal: { ...DEFAULT_WAL_SETTINGS, walKeepSizeMb: o.walKeepSizeMb } }),
    };
  }

  private other(h: Host): Host {
    return this.hosts.find((x) => x !== h)!;
  }

  /**
   * Wait (in simulated time) for a promise the nodes will settle; done false if it did not within
   * ms, or before `ended` held (a call into a process that died never settles here, while a
   * PostgreSQL client sees its connection close at once).
   */
  async settle<T>(p: Promise<T>, ms: number, ended = () => false): Promise<Settled<T>> {
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
    await this.sched.runUntil(() => out.done || ended(), ms);
    return out;
  }

  private log(h: Host, owner: string, message: string): void {
    if (this.sched.isDead(owner)) return; // a dead process says nothing more
    this.record(this.sched.now, owner, message);
    // The startup process's FATAL for a fault the simulator injected into a drop is expected.
    if (/INV-|FATAL|internal error/.test(message) && !message.includes('(injected fault)'))
      this.violation(`${h.name} logged: ${message}`);
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
    const onCommitAcknowledged = (endLsn: Lsn) => {
      if (endLsn > h.maxCommitEnd) h.maxCommitEnd = endLsn;
      this.onCommitAcknowledged(node, endLsn);
    };
    node.onCommitAcknowledged = onCommitAcknowledged;
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
    if (this.historyArchive.size > 0) this.restoreHistories(h, timelineOfDataDir(DATA_DIR, h.disk));
    // primary_conninfo's port names the upstream host (its host part is unused).
    const dialTo = (port: number) =>
      this.net.dialer(h.name, owner, () => this.hostByPort(port)?.name ?? `port-${port}`);
    // SIM-10 watches every drop of the process, from the crash recovery or replay of its start.
    const onLoad = (st: NodeStorage) => this.onStorageLoaded(h, st);
    NodeStorage.onLoad = onLoad;
    try {
      return this.openNode(h, owner, clock, dialTo);
    } finally {
      NodeStorage.onLoad = null;
    }
  }

  private openNode(
    h: Host,
    owner: string,
    clock: Clock,
    dialTo: (port: number) => Dialer,
  ): ServerNode {
    return ServerNode.open({
      dataDir: DATA_DIR,
      config: this.twoNodes ? this.config(h) : this.writeConfig(h),
      nBuffers: this.nBuffers,
      token: TOKEN,
      log: (m) => this.log(h, owner, m),
      fatal: (e) => this.fatal(h, owner, e),
      // The slow-disk layer production uses, over the machine's in-memory disk: a synchronous
      // write or fsync stalls by advancing simulated time inside the running event.
      env: {
        clock,
        disk: new LatencyDisk(
          exitFencedDisk(h.disk, () => this.sched.isDead(owner)),
          clock,
          (ms) => this.sched.advance(ms),
          h.latency,
        ),
        dialer: (upstream) => dialTo(upstream.port),
      },
    });
  }

  /**
   * Several nodes: the host's settings file (walsim.conf.json) written as the operator wants them
   * and, on a standby, primary_conninfo naming its upstream (ALTER SYSTEM's file, as pg_basebackup
   * -R and the rejoin write it); the node then reads them as it would at any start and reload.
   */
  private writeConfig(h: Host): NodeConfig {
    const conf = this.config(h);
    writeFileAtomic(`${DATA_DIR}/${CONF_FILE}`, JSON.stringify(conf, null, 2) + '\n', h.disk);
    if (h !== this.primary && h.upstream !== null)
      alterSystem(DATA_DIR, 'primary_conninfo', this.conninfoTo(h, h.upstream), h.disk);
    return loadNodeConfig(DATA_DIR, h.disk);
  }

  /** primary_conninfo for `h` streaming from `to`. */
  conninfoTo(h: Host, to: Host): string {
    return formatConninfo({ host: '127.0.0.1', port: to.port, applicationName: h.applicationName });
  }

  /** The process would exit non-zero (a redo failure): a finding, and the process is gone. */
  private fatal(h: Host, owner: string, e: unknown): void {
    if (h.owner !== owner || this.sched.isDead(owner)) return;
    const dropFault = injectedDropFaultOf(e);
    if (dropFault !== null) {
      // Expected: the fault the simulator armed fired inside a drop (a PANIC in the truncation's
      // critical section, a startup process that failed replaying it, or the process killed there).
      this.record(this.sched.now, owner, `exit after ${(e as Error).message}`);
      this.countFault(
        `drop fault fired: ${dropFault.kind} before ${dropFault.where === 'unlink' ? 'the unlinks' : `truncating fork #${dropFault.fork}`} (${h === this.primary ? 'primary' : 'standby replay'})`,
      );
      this.panicked.add(owner);
      for (const p of [...this.pending]) if (p.owner === owner) this.pending.delete(p);
    } else if (isErrnoCode((e as Error).cause, 'ENOSPC') && h.disk.fullPrefixes.size > 0) {
      // Expected: a WAL write failed on a full disk and the node PANICs, as PostgreSQL does.
      // Its sessions see the connection end (outcome unknown); it restarts once space is free.
      this.record(this.sched.now, owner, `exit after ${(e as Error).message}`);
      this.panicked.add(owner);
      this.panics++;
      for (const p of [...this.pending]) if (p.owner === owner) this.pending.delete(p);
    } else {
      this.violation(`${h.name} FATAL: ${(e as Error).stack ?? String(e)}`);
    }
    // Production exits inside fatal(): from here the process runs no event and changes no file
    // (its disk view is fenced); the rest of the kill follows as the next event.
    this.sched.kill(owner);
    this.sched.at(0, 'sim', 'fatal exit', () => {
      if (h.owner !== owner || h.node === null) return;
      this.kill(h, false);
      if (this.panicked.has(owner)) {
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
      const panicked = this.panicked.has(owner); // a WAL write on a full disk during the shutdown checkpoint
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

/** The drop fault behind a process's fatal error (itself or its cause), or null. */
function injectedDropFaultOf(e: unknown): DropFault | null {
  if (e instanceof InjectedDropFault) return e.fault;
  const cause = (e as Error | undefined)?.cause;
  return cause instanceof InjectedDropFault ? cause.fault : null;
}
