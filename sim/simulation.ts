/**
 * Deterministic simulation of a walsim cluster: a primary and 1–4 standbys, real ServerNodes (WAL,
 * storage, redo, walsender, walreceiver, startup process, lifecycle machine — the production
 * code) in one process, on the scheduler's simulated time, the in-memory network and one
 * in-memory disk per machine. Only the clock, the transport and the disk are simulated.
 *
 * A run executes a scenario's commands (sim/scenario.ts) — the safety phase, faults on, invariants
 * checked after every step and at every acknowledged commit — then heals every fault and requires
 * the cluster to converge within a bounded simulated time — the liveness phase — and compares the
 * nodes. The same seed gives the same events in the same order and the same bytes on the wire:
 * `traceHash` (and the full trace with `trace: true`) says so.
 *
 * This file is the run loop; the machines and their processes are sim/cluster.ts, the operator's
 * actions sim/operator.ts, the faults sim/faults.ts, the write statements sim/workload.ts and the
 * invariants sim/checkers/ (TigerBeetle keeps its checkers apart from the simulator too).
 *
 * Entry point: `runSimulation(scenario, opts)` → SimResult.
 */
import { formatLsn, type Lsn } from '../wal/lsn.ts';
import type { DiskLatency } from '../common/latency-disk.ts';
import type { ServerNode } from '../server/node.ts';
import type { SynchronousCommit } from '../server/settings.ts';
import { EventBudgetExceeded } from './scheduler.ts';
import {
  describeCommand,
  topologyKinds,
  type Role,
  type Scenario,
  type SimCommand,
} from './scenario.ts';
import { ACTION_MS, SimCluster, type Host } from './cluster.ts';
import type { NodeStorage } from '../storage/node-storage.ts';
import { Ledger } from './checkers/ledger.ts';
import { checkSyncAck } from './checkers/sync-ack.ts';
import { checkPositions } from './checkers/positions.ts';
import { watchDrops } from './checkers/drop-path.ts';
import { checkIdenticalTables } from './checkers/convergence.ts';
import { ReplicaStateChecker } from './checkers/replica-state.ts';
import { checkSyncState } from './checkers/sync-state.ts';
import { checkCascades, checkClusterShape, checkSingleWriter } from './checkers/cluster-shape.ts';
import { Operator, type SimFailoverTime } from './operator.ts';
import { armDropFault, corruptPrimary, corruptStandby, injectFault } from './faults.ts';
import { Workload } from './workload.ts';

export type { SimFailoverTime } from './operator.ts';

/** Simulated time the cluster gets to converge once every fault is healed (liveness bound). */
const CONVERGE_MS = 120_000;

export interface SimRunOptions {
  /** Keep the full event trace (replay with --trace); the hash is always computed. */
  trace?: boolean;
  /** Stop at the first invariant violation (default true). */
  stopAtViolation?: boolean;
  /** SIM-11's comparisons after restarts and failovers (default true; off: the oracle before it). */
  replicaCheck?: boolean;
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
  /** Of `lostAllowed`: synchronous commits lost with the operator's choice of a standby (several nodes). */
  lostToChoice: number;
  /** The topology's kinds (sim/scenario.ts topologyKinds): nodes, shape, names form, operator. */
  topology: string[];
  /** Processes that ended in an expected PANIC (a primary's WAL write on a full disk). */
  panics: number;
  /** Each failover's phases on the promoted node's clock (simulated ms) and modeled PostgreSQL time. */
  failoverTimes: SimFailoverTime[];
  failovers: number;
  events: number;
  simMs: number;
  /** Drops by node kind and path (SIM-10): e.g. "replay truncation: cached-lookup". */
  drops: Record<string, number>;
  /** SIM-11: standbys compared with the primary after a restart or failover, once caught up. */
  replicaComparisons: number;
  /** Bytes written to every machine's disk, base-backup copies included (a work counter). */
  diskBytesWritten: number;
  traceHash: string;
  trace?: string[];
}

export class Simulation {
  private readonly cluster: SimCluster;
  private readonly ledger: Ledger;
  private readonly operator: Operator;
  private readonly workload: Workload;
  private readonly replicas: ReplicaStateChecker;
  private stepsRun = 0;

  constructor(
    readonly scenario: Scenario,
    private readonly opts: SimRunOptions = {},
  ) {
    this.cluster = new SimCluster(scenario, opts.trace === true);
    this.ledger = new Ledger(this.cluster);
    this.operator = new Operator(this.cluster, this.ledger);
    this.workload = new Workload(this.cluster, this.ledger);
    this.replicas = new ReplicaStateChecker(this.cluster);
    // Hooks are set through locals, never `x.f = () => …` (sim/README rule 6).
    const onStorageLoaded = (h: Host, st: NodeStorage) => watchDrops(this.cluster, h, st);
    this.cluster.onStorageLoaded = onStorageLoaded;
    const onCommitAcknowledged = (node: ServerNode, endLsn: Lsn) => {
      if (this.cluster.twoNodes) return checkSyncAck(this.cluster, node, endLsn);
      checkSyncState(this.cluster, node, endLsn);
      checkSingleWriter(this.cluster, 'at a commit acknowledgement');
    };
    this.cluster.onCommitAcknowledged = onCommitAcknowledged;
    // SIM-7 after every event: WAL a cascade relays too early is flushed downstream within a link
    // delay, and the upstream's own fsync may follow before any step boundary.
    if (!this.cluster.twoNodes) {
      const afterEvent = () => {
        if (this.cluster.violations.length === 0) checkCascades(this.cluster, 'after an event');
      };
      this.cluster.sched.afterEvent = afterEvent;
    }
  }

  get violations(): string[] {
    return this.cluster.violations;
  }

  /** The running process of a role (tests inspect it), or null while it is down. */
  nodeOf(role: Role, target?: number): ServerNode | null {
    return this.cluster.hostOf(role, target).node;
  }

  /** A machine's disk latency (tests read its counters). */
  latencyOf(role: Role, target?: number): DiskLatency {
    return this.cluster.hostOf(role, target).latency;
  }

  /** initdb on A, a base backup onto B, both started. */
  setup(): Promise<void> {
    return this.operator.setup();
  }

  async exec(c: SimCommand): Promise<void> {
    switch (c.op) {
      case 'sql':
        return this.workload.issue(c.sql);
      case 'pause':
      case 'resume':
      case 'restartpoint': {
        const node = this.cluster.standbyAt(c.target).node;
        if (node === null) return;
        const sql = c.op === 'restartpoint' ? 'CHECKPOINT' : `SELECT pg_wal_replay_${c.op}()`;
        const r = await this.cluster.settle(node.execute(sql), ACTION_MS);
        if (r.error !== undefined) this.cluster.expectedError(r.error, sql);
        return;
      }
      case 'crash':
        return this.operator.crash(c);
      case 'stop':
        return this.operator.stop(c);
      case 'corrupt':
        return c.node === 'standby'
          ? corruptStandby(this.cluster, this.ledger, c.target)
          : corruptPrimary(this.cluster, this.ledger, this.operator, c.downMs);
      case 'failover':
        return this.operator.failover(c);
      case 'switchover':
        return this.operator.topology.switchover(c.target);
      case 'repoint':
        return this.operator.topology.repointCommand(c.target, c.to);
      case 'wait':
        await this.cluster.sched.runFor(c.ms);
        return;
      case 'sqlBatch':
        for (const sql of c.sqls) this.workload.issue(sql);
        return;
      case 'dropFault':
        return armDropFault(this.cluster, c);
      default:
        return injectFault(this.cluster, c);
    }
  }

  /**
   * After every step: positions, buffers, timelines (SIM-3); several nodes: SIM-7 … SIM-9; the
   * relations of a standby caught up since its restart or the last failover (SIM-11).
   */
  checkInvariants(where: string): void {
    checkPositions(this.cluster, where);
    if (!this.cluster.twoNodes) checkClusterShape(this.cluster, where);
    if (this.cluster.violations.length === 0 && this.opts.replicaCheck !== false)
      this.replicas.check(where);
  }

  // ------------------------------------------------------------------------- liveness

  /**
   * Heal every fault, restart what is down, resume replay; the cluster must converge in bounded
   * time. The operator keeps acting meanwhile: a node that goes down while the cluster converges
   * (a primary's WAL write that failed on the full disk just before the heal ends in a PANIC) is
   * started again once its disk has space — a restarted primary gets the crash-recovery ledger
   * check — and the wait goes on until the same deadline. Then every node gets the ledger check.
   */
  async converge(): Promise<void> {
    const c = this.cluster;
    await this.operator.restartDue(); // a standby whose WAL was just damaged is restarted, as at a step boundary
    c.net.healAll();
    let deadline: number | null = null;
    for (;;) {
      for (const h of c.roleOrder()) {
        h.disk.fullPrefixes.clear();
        h.latency.clear();
        if (h.node === null) await this.operator.restart(h);
      }
      await this.operator.topology.rebuildCutOff();
      const nodes = c.roleOrder().map((h) => h.node);
      if (nodes.some((n) => n === null)) return; // a start failed: a violation says so
      const p = nodes[0]!;
      const standbys = nodes.slice(1) as ServerNode[];
      for (const s of standbys) {
        if (!s.inRecovery) continue;
        const r = await c.settle(s.execute('SELECT pg_wal_replay_resume()'), ACTION_MS);
        if (r.error !== undefined) c.expectedError(r.error, 'resume');
      }
      const caughtUp = () =>
        c.pending.size === 0 &&
        p.wal.flushLsn === p.wal.insertLsn &&
        standbys.every(
          (s) =>
            s.startup !== null &&
            s.receiver?.state === 'streaming' &&
            s.startup.nextLsn >= p.wal.flushLsn &&
            s.wal.flushLsn === p.wal.flushLsn,
        );
      const down = () => c.roleOrder().some((h, i) => h.node !== nodes[i]);
      // A process that exited inside a drop or a WAL write (a PANIC) is gone already; its kill is
      // the next event. It is not caught up: its files are not yet crash-recovered.
      const exiting = () => c.roleOrder().some((h) => h.node !== null && c.sched.isDead(h.owner));
      deadline ??= c.sched.now + CONVERGE_MS;
      await c.sched.runUntil(() => (caughtUp() && !exiting()) || down(), deadline - c.sched.now);
      if (down() && c.sched.now < deadline) continue; // the operator starts it again
      if (!caughtUp() || exiting()) {
        const lag = c.standbys
          .map(
            (h) =>
              `${c.twoNodes ? 'standby' : `standby ${h.name}`} flush ${formatLsn(h.node!.wal.flushLsn)} replay ${formatLsn(h.node!.startup?.nextLsn ?? 0)}, receiver ${h.node!.receiver?.state}`,
          )
          .join('; ');
        c.violation(
          `no convergence within ${CONVERGE_MS} ms: ${c.pending.size} statements pending, primary flush ${formatLsn(p.wal.flushLsn)}, ${lag}`,
        );
        return;
      }
      break;
    }
    await c.sched.reportUnhandled();
    this.checkInvariants('after convergence');
    await this.ledger.check(c.primary, 'end (primary)', () => true);
    for (const h of c.standbys)
      await this.ledger.check(
        h,
        c.twoNodes ? 'end (standby)' : `end (standby ${h.name})`,
        () => true,
      );
    for (const h of c.standbys) checkIdenticalTables(c, c.primary.node!, h.node!, h.name);
  }

  // ------------------------------------------------------------------------- run

  async run(): Promise<SimResult> {
    const c = this.cluster;
    const stop = this.opts.stopAtViolation ?? true;
    try {
      c.record(
        0,
        'sim',
        `seed ${this.scenario.seed} options ${JSON.stringify(this.scenario.options)}`,
      );
      await this.setup();
      const cmds = this.scenario.commands;
      for (let i = 0; i < cmds.length && !(stop && c.violations.length > 0); i++) {
        await this.operator.restartDue();
        const what = describeCommand(cmds[i]!);
        c.record(c.sched.now, 'sim', `step ${i}: ${what}`);
        await this.exec(cmds[i]!);
        await c.sched.runFor(this.scenario.options.stepMs);
        // No real turn here for Node to report rejections left unhandled: the scheduler takes one
        // every 256 events, and one comes before the convergence's checks and the result. A turn
        // per step (~50 a seed) cost 24 µs of CPU each, 8 % of a seed (RELIABILITY.md).
        this.checkInvariants(`after step ${i} (${what})`);
        this.stepsRun = i + 1;
      }
      if (!(stop && c.violations.length > 0)) await this.converge();
    } catch (e) {
      if (e instanceof EventBudgetExceeded) c.violation(`livelock: ${e.message}`);
      else c.violation(`simulation error: ${(e as Error).stack ?? String(e)}`);
    }
    await c.sched.reportUnhandled();
    c.record(c.sched.now, 'sim', `end: ${c.violations.length} violations`);
    return this.result();
  }

  private result(): SimResult {
    const c = this.cluster;
    return {
      seed: this.scenario.seed,
      ok: c.violations.length === 0,
      violations: c.violations,
      steps: this.stepsRun,
      faults: c.faults,
      acknowledged: this.workload.acknowledged,
      acknowledgedByLevel: this.workload.acknowledgedByLevel,
      lost: this.ledger.lost,
      lostAllowed: this.ledger.lostAllowed,
      lostToCorruption: this.ledger.lostToCorruption,
      lostToChoice: this.ledger.lostToChoice,
      topology: topologyKinds(this.scenario.topology),
      panics: c.panics,
      failoverTimes: this.operator.failoverTimes,
      failovers: this.operator.failovers,
      events: c.sched.eventsRun,
      simMs: c.sched.now,
      drops: c.drops,
      replicaComparisons: this.replicas.comparisons,
      diskBytesWritten: c.diskBytesWritten(),
      traceHash: c.trace.hashHex(),
      ...(c.trace.lines !== null ? { trace: c.trace.lines } : {}),
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
