/**
 * What the operator does to the simulated cluster (sim/README rule 2, the fault atlas): initdb and
 * the first base backup, restarts at step boundaries once a disk has space, crashes and stops of
 * a node followed by its restart and the ledger's crash-recovery check, failovers (the old
 * primary stopped first, the standby promoted, the old primary rebuilt from a fresh base backup).
 */
import { initdb } from '../server/initdb.ts';
import { STANDBY_SIGNAL } from '../server/node.ts';
import { withModel } from '../cost-model/price.ts';
import { defaultCostProfile } from '../cost-model/profile.ts';
import { ACTION_MS, BACKUP_DIR, DATA_DIR, type Host, type SimCluster } from './cluster.ts';
import {
  guaranteedAfterFailover,
  guaranteedAfterPrimaryCrash,
  type Ledger,
} from './checkers/ledger.ts';
import type { SimCommand } from './scenario.ts';

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

  constructor(
    private readonly cluster: SimCluster,
    private readonly ledger: Ledger,
  ) {}

  /** initdb on A, a base backup onto B, both synced (as initdb and pg_basebackup end). */
  async setup(): Promise<void> {
    const c = this.cluster;
    const a = c.hosts.A;
    const b = c.hosts.B;
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
    a.disk.copyTo(DATA_DIR, b.disk, DATA_DIR);
    b.disk.writeFile(`${DATA_DIR}/${STANDBY_SIGNAL}`, '');
    b.disk.syncAll();
    await c.start(a);
    await c.start(b);
  }

  /** At a step boundary: restart a standby whose WAL is damaged, start what is due and has space. */
  async restartDue(): Promise<void> {
    const c = this.cluster;
    for (const h of [c.primary, c.standby]) {
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
    const h = cl.hostOf(c.node);
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
    const h = cl.hostOf(c.node);
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

  async failover(how: 'crash' | 'power' | 'immediate' | 'fast'): Promise<void> {
    const c = this.cluster;
    const oldPrimary = c.primary;
    const newPrimary = c.standby;
    if (oldPrimary.node === null) return;
    c.countFault(`failover (${how})`);
    if (newPrimary.node === null) await c.start(newPrimary);
    if (newPrimary.node === null) return;
    // Fault atlas: the operator frees the standby's disk before promoting it. (Promotion on a full
    // disk fails writing the history file, and the process dies, as PostgreSQL's startup would.)
    newPrimary.disk.fullPrefixes.clear();
    if (how === 'crash' || how === 'power') c.kill(oldPrimary, how === 'power');
    else await c.stop(oldPrimary, how);
    oldPrimary.restartAt = null;
    const node = newPrimary.node;
    const r = await c.settle(node.promote(true, 60), ACTION_MS + 10_000);
    if (!r.done || r.error !== undefined || r.value !== true) {
      c.violation(
        `promotion of ${newPrimary.name} failed: ${r.done ? String((r.error as Error | undefined)?.message ?? r.value) : 'did not finish'}`,
      );
      return;
    }
    this.failovers++;
    c.primary = newPrimary;
    c.standby = oldPrimary;
    this.recordFailoverTime(newPrimary);
    await this.ledger.check(newPrimary, 'failover', (f) => guaranteedAfterFailover(f, newPrimary));
    newPrimary.corruptLsn = null; // promotion truncated WAL at the bad record
    await this.rebuildStandby();
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

  /** The old primary becomes a standby of the new one through a fresh base backup (its disk is wiped). */
  async rebuildStandby(): Promise<void> {
    const c = this.cluster;
    const src = c.primary;
    const dst = c.standby;
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
    src.disk.copyTo(BACKUP_DIR, dst.disk, DATA_DIR);
    src.disk.rmrf(BACKUP_DIR);
    dst.disk.syncAll();
    this.ledger.backupTaken();
    await c.start(dst);
  }
}
