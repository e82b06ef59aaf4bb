/**
 * What the operator does to the simulated cluster (sim/README rule 2, the fault atlas): initdb and
 * the first base backup, restarts at step boundaries once a disk has space, crashes and stops of
 * a node followed by its restart and the ledger's crash-recovery check, failovers (the old
 * primary stopped first, the standby promoted, the old primary rebuilt from a fresh base backup).
 */
import { initdb } from '../server/initdb.ts';
import { STANDBY_SIGNAL, type ServerNode } from '../server/node.ts';
import { withModel } from '../cost-model/price.ts';
import { defaultCostProfile } from '../cost-model/profile.ts';
import {
  ACTION_MS,
  BACKUP_DIR,
  DATA_DIR,
  type Host,
  type Settled,
  type SimCluster,
} from './cluster.ts';
import {
  guaranteedAfterFailover,
  guaranteedAfterFailoverOnto,
  guaranteedAfterPrimaryCrash,
  type Ledger,
} from './checkers/ledger.ts';
import type { SimCommand } from './scenario.ts';
import type { MemDisk } from './mem-disk.ts';
import { handOverNames } from '../server/topology-core.ts';
import { TopologyActions } from './topology-actions.ts';

export interface SimFailoverTime {
  /** resume → read-write, and its phases, in simulated milliseconds (the node's injected clock). */
  failoverMs: number | null;
  replayMs: number | null;
  endOfRecoveryMs: number | null;
  openForWritesMs: number | null;
  /** The cost model's PostgreSQL seconds for the same counts (null without a profile). */
  modeledS: number | null;
}

export class Operator {
  readonly failoverTimes: SimFailoverTime[] = [];
  failovers = 0;

  readonly topology: TopologyActions;

  constructor(
    private readonly cluster: SimCluster,
    private readonly ledger: Ledger,
  ) {
    this.topology = new TopologyActions(cluster, ledger, {
      rebuildStandby: (h) => this.rebuildStandby(h),
      restart: (h) => this.restart(h),
    });
  }

  /** initdb on A, a base backup onto every other host, all synced (as initdb and pg_basebackup end). */
  async setup(): Promise<void> {
    const c = this.cluster;
    const a = c.hosts[0]!;
    a.disk.mkdirp(DATA_DIR);
    const r = await c.settle(
      initdb(
        DATA_DIR,
        c.config(a),
        { disk: a.disk, clock: c.sched.clockFor('sim') },
        String(c.scenario.seed),
      ),
      ACTION_MS,
    );
    if (!r.done || r.error !== undefined)
      throw new Error(`initdb failed: ${r.done ? (r.error as Error).message : 'did not finish'}`);
    a.disk.syncAll();
    // Every copy starts at initdb's checkpoint, so a cascaded standby's upstream has what it asks for.
    for (const b of c.standbys) {
      a.disk.copyTo(DATA_DIR, b.disk, DATA_DIR);
      b.disk.writeFile(`${DATA_DIR}/${STANDBY_SIGNAL}`, '');
      b.disk.syncAll();
    }
    for (const h of c.hosts) await c.start(h);
  }

  /** At a step boundary: restart a standby whose WAL is damaged, start what is due and has space. */
  async restartDue(): Promise<void> {
    const c = this.cluster;
    c.restoreHistoriesOfRunning();
    for (const h of c.roleOrder()) {
      if (
        h.node !== null &&
        h.corruptLsn !== null &&
        h.owner === h.corruptOwner &&
        h.restartAt !== null &&
        h.restartAt <= c.sched.now
      ) {
        await c.stop(h, 'fast'); // the operator restarts the standby whose replay stopped
      }
      // A server does not start on a full disk (PostgreSQL PANICs writing its first WAL): the
      // operator starts it once space is free.
      if (
        h.node === null &&
        h.restartAt !== null &&
        h.restartAt <= c.sched.now &&
        h.disk.fullPrefixes.size === 0
      )
        await this.restart(h);
    }
  }

  /** Start a host that is down; a primary that crashed (a PANIC) gets the crash-recovery ledger check. */
  async restart(h: Host): Promise<void> {
    await this.cluster.start(h);
    const crashedAt = h.crashedAt;
    h.crashedAt = null;
    if (crashedAt !== null && h === this.cluster.primary) {
      await this.ledger.check(h, 'primary restart after a PANIC', (f) =>
        guaranteedAfterPrimaryCrash(f, crashedAt, h),
      );
    }
  }

  /** A crash or power loss of a node; a primary is restarted after downMs and checked. */
  async crash(c: Extract<SimCommand, { op: 'crash' }>): Promise<void> {
    const cl = this.cluster;
    const h = cl.hostOf(c.node, c.target);
    if (h.node === null) return;
    cl.countFault(c.power ? `power loss (${c.node})` : `crash (${c.node})`);
    const crashAt = cl.sched.now;
    cl.kill(h, c.power);
    h.restartAt = cl.sched.now + c.downMs;
    if (h === cl.primary) {
      await cl.sched.runFor(c.downMs);
      await cl.waitForSpace(h);
      await cl.start(h);
      await this.ledger.check(h, 'primary restart', (f) =>
        guaranteedAfterPrimaryCrash(f, crashAt, h),
      );
    }
  }

  /** pg_ctl stop of a node; a primary is restarted after downMs and checked. */
  async stop(c: Extract<SimCommand, { op: 'stop' }>): Promise<void> {
    const cl = this.cluster;
    const h = cl.hostOf(c.node, c.target);
    if (h.node === null) return;
    cl.countFault(`stop -m ${c.mode} (${c.node})`);
    const stopAt = cl.sched.now;
    const clean = await cl.stop(h, c.mode);
    h.restartAt = cl.sched.now + c.downMs;
    if (h === cl.primary) {
      await cl.sched.runFor(c.downMs);
      await cl.waitForSpace(h);
      await cl.start(h);
      await this.ledger.check(
        h,
        `primary restart after stop -m ${c.mode}`,
        (f) => (c.mode !== 'immediate' && clean) || guaranteedAfterPrimaryCrash(f, stopAt, h),
      );
    }
  }

  /**
   * Failover: stop the old primary (no split brain), promote the chosen standby, then bring the
   * old primary back as a standby (a rejoin when asked and its WAL allows, else a base backup).
   * Several nodes: the careful operator refuses a standby that is behind another live one and
   * promotes the most advanced instead; the new primary gets the handed-over
   * synchronous_standby_names first; the old primary's other standbys are repointed to it.
   */
  async failover(cmd: Extract<SimCommand, { op: 'failover' }>): Promise<void> {
    const c = this.cluster;
    const oldPrimary = c.primary;
    if (oldPrimary.node === null) return;
    let target = c.twoNodes ? c.standby : this.choose(cmd.choice ?? 'best');
    c.countFault(`failover (${cmd.how})`);
    if (target.node === null) await c.start(target);
    if (target.node === null) return;
    // Fault atlas: the operator frees the standby's disk before promoting it. (Promotion on a full
    // disk fails writing the history file, and the process dies, as PostgreSQL's startup would.)
    target.disk.fullPrefixes.clear();
    if (cmd.how === 'crash' || cmd.how === 'power') c.kill(oldPrimary, cmd.how === 'power');
    else await c.stop(oldPrimary, cmd.how);
    oldPrimary.restartAt = null;
    let covered = new Set<MemDisk>();
    if (!c.twoNodes) {
      const best = this.choose('best');
      if (best !== target && c.scenario.topology.operator === 'careful' && best.node !== null) {
        c.countFault('failover choice refused (behind another standby)');
        c.record(
          c.sched.now,
          'sim',
          `operator: ${target.name} is behind ${best.name}; promoting ${best.name}`,
        );
        target = best;
        target.disk.fullPrefixes.clear();
      }
      covered = c.coveredBy(target);
      c.restoreHistories(target);
      await this.handOver(target, oldPrimary);
    }
    const newPrimary = target;
    // Its process may have ended meanwhile (a fault armed inside a drop fired in its replay while
    // the old primary stopped): the operator starts it again before promoting it.
    if (newPrimary.node === null) await c.start(newPrimary);
    if (newPrimary.node === null) return;
    const r = await this.promote(newPrimary);
    if (r === null) return; // started again, it did not come up (the start reported why)
    if (!r.done || r.error !== undefined || r.value !== true) {
      c.violation(
        `promotion of ${newPrimary.name} failed: ${r.done ? String((r.error as Error | undefined)?.message ?? r.value) : 'did not finish'}`,
      );
      return;
    }
    this.failovers++;
    c.promoted(newPrimary, oldPrimary);
    this.recordFailoverTime(newPrimary);
    await this.ledger.check(newPrimary, 'failover', (f) =>
      c.twoNodes
        ? guaranteedAfterFailover(f, newPrimary)
        : guaranteedAfterFailoverOnto(f, newPrimary, covered),
    );
    newPrimary.corruptLsn = null; // promotion truncated WAL at the bad record
    if (!c.twoNodes) await this.topology.rebuildDiverged(newPrimary, oldPrimary);
    await this.topology.repointSiblings(oldPrimary, newPrimary);
    if (cmd.rejoin === true) await this.topology.rejoinOrRebuild(oldPrimary, newPrimary);
    else await this.rebuildStandby(oldPrimary);
  }

  /**
   * pg_promote(wait => true, 60) on the host's running process. Its session ends with the server,
   * so the wait ends when the process does. If its last replay before promotion hit a fault armed
   * inside a drop and the process ended (expected), the operator starts it again — it replays the
   * drop again — and promotes it. The check is on that incarnation's own exit: another process
   * may end in an expected fault meanwhile (seed 1600033957). Null if the restart failed.
   */
  private async promote(h: Host): Promise<Settled<boolean> | null> {
    const c = this.cluster;
    const once = (node: ServerNode) =>
      c.settle(node.promote(true, 60), ACTION_MS + 10_000, () => h.node !== node);
    const r = await once(h.node!);
    if (h.node !== null || !c.panicked.has(h.owner)) return r;
    await c.start(h);
    return h.node === null ? null : once(h.node);
  }

  /** The standby the operator promotes: the one at an index, or the most advanced live one. */
  private choose(choice: 'best' | number): Host {
    const c = this.cluster;
    if (choice !== 'best') return c.standbyAt(choice);
    const pos = (h: Host) => (h.node === null ? [-1, -1] : [h.node.timeline, h.node.wal.flushLsn]);
    let best = c.standbys[0]!;
    for (const h of c.standbys) {
      const [t, f] = pos(h);
      const [bt, bf] = pos(best);
      if (t! > bt! || (t === bt && f! > bf!)) best = h;
    }
    return best;
  }

  /** synchronous_standby_names handed over to the node about to be promoted (ALTER SYSTEM + reload). */
  async handOver(to: Host, from: Host): Promise<void> {
    const c = this.cluster;
    const names = handOverNames(c.syncNames, to.applicationName, from.applicationName);
    await c.alterSystem(to, 'synchronous_standby_names', names);
    c.syncNames = names;
  }

  /**
   * The failover clock runs on the node's injected clock: its phases are simulated milliseconds
   * (waits and slow fsyncs take simulated time, CPU does not); the cost model gives modeled time.
   */
  private recordFailoverTime(promoted: Host): void {
    const c = this.cluster;
    const node = promoted.node!;
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
    c.record(
      c.sched.now,
      'sim',
      `promoted ${promoted.owner} on timeline ${node.timeline}; failover ${fr?.failoverMs ?? '?'} ms ` +
        `(replay ${fr?.phases.replayMs ?? '?'}, end of recovery ${fr?.phases.endOfRecoveryMs ?? '?'}, open for writes ${fr?.phases.openForWritesMs ?? '?'}); ` +
        `modeled ${fr?.model ? `${fr.model.failoverS.toFixed(6)} s (${fr.model.profile})` : 'n/a'}`,
    );
  }

  /**
   * `dst` (the old primary, or a standby whose WAL diverged) becomes a standby of the primary
   * through a fresh base backup (its disk is wiped).
   */
  async rebuildStandby(dst: Host = this.cluster.standby): Promise<void> {
    const c = this.cluster;
    const src = c.primary;
    if (src.node === null) return;
    const r = await c.settle(src.node.baseBackup(BACKUP_DIR), ACTION_MS);
    if (!r.done || r.error !== undefined) {
      c.violation(
        `base backup from ${src.name} failed: ${r.done ? (r.error as Error).message : 'did not finish'}`,
      );
      return;
    }
    dst.disk = c.newDisk();
    dst.corruptLsn = null;
    dst.upstream = src;
    c.newUpstreamData(dst);
    src.disk.copyTo(BACKUP_DIR, dst.disk, DATA_DIR);
    src.disk.rmrf(BACKUP_DIR);
    dst.disk.syncAll();
    this.ledger.backupTaken(src, dst);
    await c.start(dst);
  }
}
