/**
 * What the operator does to the shape of a cluster of several nodes: repoint a standby (ALTER
 * SYSTEM SET primary_conninfo + pg_reload_conf(), as `cluster repoint` does), rejoin a stopped old
 * primary as a standby of the new one (the production verdict, server/topology-core.ts: refused
 * when its WAL diverged, then a base backup instead), and the switchover — the production
 * sequence (`runSwitchover`) bound to the simulated nodes.
 */
import { formatLsn, type Lsn } from '../wal/lsn.ts';
import { readTimelineHistory } from '../wal/segment.ts';
import { checkRejoin } from '../wal/timeline-fork.ts';
import { writeFileSynced } from '../common/durable-file.ts';
import { STANDBY_SIGNAL } from '../server/node.ts';
import { parseSynchronousStandbyNames } from '../primary/sync-standby-names.ts';
import { rejoinVerdictOf, runSwitchover, walEndOfDataDir } from '../server/topology-core.ts';
import { startSegmentRemoved } from '../server/start-replication.ts';
import { ACTION_MS, DATA_DIR, type Host, type SimCluster } from './cluster.ts';
import type { Ledger } from './checkers/ledger.ts';

/** What the topology actions ask of the operator (sim/operator.ts). */
export interface OperatorSteps {
  /** Re-clone `h` from the primary by a base backup. */
  rebuildStandby(h: Host): Promise<void>;
  /** Start `h` again (with the crash-recovery ledger check of a primary that PANICked). */
  restart(h: Host): Promise<void>;
}

/** A switchover step could not be done: the switchover stops there (the operator recovers). */
class SwitchoverAborted extends Error {}

export class TopologyActions {
  constructor(
    private readonly cluster: SimCluster,
    private readonly ledger: Ledger,
    private readonly operator: OperatorSteps,
  ) {}

  /** Depth below the primary (1: streams from it), by the operator's map. */
  private depth(h: Host): number {
    let d = 0;
    for (let x: Host | null = h; x !== null && x !== this.cluster.primary; x = x.upstream) {
      d++;
      if (d > this.cluster.hosts.length) return Infinity; // a cycle: never drawn, refused below
    }
    return d;
  }

  /**
   * Would the primary's synchronous_standby_names still be satisfiable if `direct` were the
   * standbys streaming from it? (An operator does not repoint a synchronous standby away when
   * that leaves commits waiting forever.)
   */
  private satisfiable(direct: Host[]): boolean {
    const cfg = parseSynchronousStandbyNames(this.cluster.syncNames);
    if (cfg === null) return true;
    const listed = direct.filter((h) =>
      cfg.members.some((m) => m === '*' || m.toLowerCase() === h.applicationName),
    );
    return listed.length >= cfg.numSync;
  }

  /** The `repoint` command: standby `target` streams from node `to` (0 the primary). */
  async repointCommand(target: number, to: number): Promise<void> {
    const c = this.cluster;
    const s = c.standbyAt(target);
    const u = to === 0 ? c.primary : c.standbyAt(to - 1);
    if (u === s || u === s.upstream) return;
    // Depth at most two, no cycle: a standby with downstreams streams from the primary only.
    const refuse =
      (u !== c.primary && (this.depth(u) !== 1 || c.downstreamsOf(s).length > 0)) ||
      !this.satisfiable(
        c.standbys.filter((h) => (h === s ? u === c.primary : h.upstream === c.primary)),
      );
    if (refuse) {
      c.record(c.sched.now, 'sim', `operator: repoint of ${s.name} to ${u.name} not done`);
      return;
    }
    c.countFault(u === c.primary ? 'repoint (to the primary)' : 'repoint (cascade)');
    await this.repoint(s, u);
  }

  /** primary_conninfo + pg_reload_conf() when it runs; the setting alone when it is down. */
  async repoint(s: Host, to: Host): Promise<void> {
    const c = this.cluster;
    s.upstream = to;
    s.cascadeBaseline = -1;
    // Down: its settings are written at its next start (sim/cluster.ts writeConfig).
    if (s.node !== null) await c.alterSystem(s, 'primary_conninfo', c.conninfoTo(s, to));
  }

  /**
   * After a promotion onto `promoted`: a standby (other than the old primary, which the rejoin
   * judges) holding WAL of an old timeline past the point where the new history leaves it has
   * diverged — it could never follow (PostgreSQL: pg_rewind or a new base backup). The operator
   * re-clones it. Read from its positions when it runs, from its disk when it is down.
   *
   * A standby judged fine may still be following a diverged upstream, which goes on serving it
   * until it has stopped: a walsender that had announced the dead timeline's switch can move it
   * onto that timeline after its verdict (seed 1600014820: D switched to timeline 4 from E, which
   * was stopping, and every walsender then refused it). So the operator judges every standby again
   * after a pass that re-cloned one, until a pass re-clones none; a re-cloned standby comes from
   * the new primary, so that ends.
   */
  async rebuildDiverged(promoted: Host, old: Host): Promise<void> {
    for (let pass = 0; pass <= this.cluster.hosts.length; pass++)
      if (!(await this.rebuildDivergedPass(promoted, old))) return;
  }

  /** One pass of `rebuildDiverged`: whether it re-cloned a standby. */
  private async rebuildDivergedPass(promoted: Host, old: Host): Promise<boolean> {
    const c = this.cluster;
    const pn = promoted.node;
    if (pn === null) return false;
    const hist = readTimelineHistory(DATA_DIR, pn.timeline, promoted.disk);
    let rebuilt = false;
    for (const s of c.standbys) {
      if (s === old) continue;
      const n = s.node;
      let tli: number;
      let end: Lsn;
      if (n !== null) {
        tli = n.timeline;
        end = Math.max(n.wal.writeLsn, n.wal.flushLsn);
      } else {
        ({ timeline: tli, endLsn: end } = walEndOfDataDir(DATA_DIR, s.disk));
      }
      // The rejoin's verdict, on the standby's own history and end of WAL; and a standby on a
      // timeline the new history does not contain (a dead branch, even with no WAL on it past
      // the fork) is refused by every walsender ("requested timeline is not in this server's
      // history"): it too needs pg_rewind or a new base backup.
      const verdict = checkRejoin(readTimelineHistory(DATA_DIR, tli, s.disk), end, hist);
      const deadBranch = !hist.some((e) => e.tli === tli);
      if (verdict.ok && !deadBranch) continue;
      c.countFault('standby diverged at failover (re-cloned)');
      c.record(
        c.sched.now,
        'sim',
        `${s.name} diverged from ${promoted.name}: ${verdict.ok ? `timeline ${tli} is not in its history` : verdict.message}`,
      );
      if (n !== null) await c.stop(s, 'fast');
      s.restartAt = null;
      await this.operator.rebuildStandby(s);
      rebuilt = true;
    }
    return rebuilt;
  }

  /**
   * A standby whose upstream has removed the WAL segment it would start streaming in can never
   * catch up: the walsender refuses it at every retry ("requested WAL segment … has already been
   * removed", CheckXLogRemoved), and PostgreSQL's answer is a new base backup, which the operator
   * takes. It happens when the upstream's WAL begins after the standby's end — a node re-cloned
   * by a base backup (its pg_wal starts at the backup's start) then promoted while a standby was
   * down — or when a standby stayed away past wal_keep_size. The upstream's own check
   * (`startSegmentRemoved`), on its state.
   */
  async rebuildCutOff(): Promise<void> {
    const c = this.cluster;
    for (const s of c.standbys) {
      const n = s.node;
      const u = (s.upstream ?? c.primary).node;
      if (n === null || u === null || !n.inRecovery) continue;
      const start = n.wal.flushLsn;
      if (!startSegmentRemoved(u, start)) continue;
      c.countFault("standby behind its upstream's oldest WAL (re-cloned)");
      c.record(
        c.sched.now,
        'sim',
        `${s.name} needs WAL from ${formatLsn(start)}, which ${s.upstream?.name ?? c.primary.name} has removed: re-cloned`,
      );
      await c.stop(s, 'fast');
      s.restartAt = null;
      await this.operator.rebuildStandby(s);
    }
  }

  /** After a promotion: the old primary's other standbys stream from the new one. */
  async repointSiblings(old: Host, promoted: Host): Promise<void> {
    const c = this.cluster;
    for (const s of c.standbys)
      if (s !== old && s.upstream === old) await this.repoint(s, promoted);
  }

  /**
   * Rejoin stopped `old` as a standby of `to` when its WAL does not extend past the fork point
   * (server/topology-core.ts, the verdict `cluster rejoin` gives); refused: a base backup.
   */
  async rejoinOrRebuild(old: Host, to: Host): Promise<void> {
    const c = this.cluster;
    if (old.node !== null || to.node === null) return;
    const check = rejoinVerdictOf(
      { dir: DATA_DIR, disk: old.disk },
      { dir: DATA_DIR, disk: to.disk },
    );
    if (!check.verdict.ok) {
      c.countFault('rejoin refused (diverged)');
      c.record(c.sched.now, 'sim', `rejoin of ${old.name} refused: ${check.verdict.message}`);
      await this.operator.rebuildStandby(old);
      return;
    }
    c.countFault('rejoin');
    c.record(
      c.sched.now,
      'sim',
      `rejoin ${old.name} (WAL ends at ${formatLsn(check.oldEndLsn)} on timeline ${check.oldTimeline}) as a standby of ${to.name}`,
    );
    writeFileSynced(`${DATA_DIR}/${STANDBY_SIGNAL}`, '', old.disk);
    old.upstream = to;
    c.newUpstreamData(old);
    old.restartAt = null;
    await c.start(old);
  }

  /**
   * The production switchover onto the standby at `target`: refused unless the primary runs and
   * the target is a running standby streaming from it. A step that cannot finish (the target
   * unreachable, a PANIC) stops it; nothing was promoted, so the operator starts the old primary
   * again (the way out `cluster switchover` prints).
   */
  async switchover(target: number): Promise<void> {
    const c = this.cluster;
    const from = c.primary;
    const to = c.standbyAt(target);
    const tn = to.node;
    if (from.node === null || tn === null || !tn.inRecovery || to.upstream !== from) return;
    if (tn.receiver?.state !== 'streaming' || tn.timeline !== from.node.timeline) return;
    c.countFault('switchover');
    const siblings = c.standbys.filter((s) => s !== to && s.upstream === from);
    let clean = true;
    let promoted = false;
    const fromNames = c.syncNames;
    try {
      const out = await runSwitchover(
        {
          from,
          to,
          fromNames,
          fromApplicationName: from.applicationName,
          toApplicationName: to.applicationName,
          siblings,
        },
        {
          stopFast: async (h) => {
            clean = await c.stop(h, 'fast');
            if (!clean) throw new SwitchoverAborted(`${h.name} ended in a PANIC while stopping`);
          },
          walEnd: (h) => walEndOfDataDir(DATA_DIR, h.disk).endLsn,
          waitReceived: (h, lsn) => this.waitReceived(h, lsn),
          setSynchronousStandbyNames: async (h, names) => {
            await c.alterSystem(h, 'synchronous_standby_names', names);
            c.syncNames = names;
          },
          promote: async (h) => {
            c.restoreHistories(h);
            const r = await c.settle(h.node!.promote(true, 60), ACTION_MS + 10_000);
            if (!r.done || r.error !== undefined || r.value !== true)
              throw new SwitchoverAborted(`promotion of ${h.name} did not finish`);
            promoted = true;
            c.promoted(h, from);
            await this.ledger.check(h, 'switchover', (f) =>
              h.corruptLsn !== null && f.commitEndMax > h.corruptLsn ? 'corruption' : 'must',
            );
            h.corruptLsn = null;
          },
          rejoin: async (old, h) => {
            await this.rejoinOrRebuild(old, h);
            return h.node?.timeline ?? 0;
          },
          repoint: (s, h) => this.repoint(s, h),
        },
      );
      c.record(
        c.sched.now,
        'sim',
        `switchover ${from.name} -> ${to.name} at ${formatLsn(out.switchLsn)}, timeline ${out.newTimeline}, synchronous_standby_names '${out.synchronousStandbyNames}'`,
      );
    } catch (e) {
      if (!(e instanceof SwitchoverAborted)) throw e;
      c.record(c.sched.now, 'sim', `switchover stopped: ${e.message}`);
      if (promoted) c.violation(`switchover to ${to.name}: ${e.message} after the promotion`);
      else await this.restartAfterStoppedSwitchover(from, fromNames, clean);
    }
  }

  /**
   * Nothing promoted: start the old primary again; a PANIC is a crash for the ledger. Its
   * synchronous_standby_names are its own again: the hand-over went to the target only (as
   * `cluster switchover` leaves the old primary's settings untouched), and a restart with the
   * target's would make its commits wait forever (for its own name, or a name listed twice).
   */
  private async restartAfterStoppedSwitchover(
    from: Host,
    fromNames: string,
    clean: boolean,
  ): Promise<void> {
    const c = this.cluster;
    c.syncNames = fromNames;
    if (from.node !== null) return;
    if (!clean) from.crashedAt = c.sched.now;
    await c.waitForSpace(from);
    await this.operator.restart(from);
  }

  /** Until `h` has flushed WAL up to `lsn` (what `cluster switchover` polls as receive_lsn). */
  private async waitReceived(h: Host, lsn: Lsn): Promise<void> {
    const c = this.cluster;
    const n = h.node;
    if (n === null) throw new SwitchoverAborted(`${h.name} is down`);
    await c.sched.runUntil(() => h.node !== n || !n.inRecovery || n.wal.flushLsn >= lsn, ACTION_MS);
    if (h.node !== n || !n.inRecovery || n.wal.flushLsn < lsn)
      throw new SwitchoverAborted(
        `${h.name} received up to ${formatLsn(n.wal.flushLsn)} of ${formatLsn(lsn)} within ${ACTION_MS} ms`,
      );
  }
}
