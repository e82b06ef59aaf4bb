/**
 * The invariants of several nodes that hold after every step (sim/README SIM-7 … SIM-9):
 * - SIM-7 a cascaded standby never has flushed WAL its upstream has not (for WAL received since
 *   it got that upstream: `Host.cascadeBaseline`);
 * - SIM-8 at most one node accepts writes (is out of recovery), and it is the primary the operator
 *   promoted last: a stopped or fenced old primary never does;
 * - SIM-9 every standby's timeline history is a prefix of the primary's, and on a timeline the
 *   primary's history has ended, the standby has flushed no WAL past its end (a diverged node
 *   that was let back in would show here).
 */
import { formatLsn } from '../../wal/lsn.ts';
import { readTimelineHistory, type TimelineHistoryEntry } from '../../wal/segment.ts';
import type { ServerNode } from '../../server/node.ts';
import { DATA_DIR, type Host, type SimCluster } from '../cluster.ts';

export function checkClusterShape(cluster: SimCluster, where: string): void {
  checkCascades(cluster, where);
  checkSingleWriter(cluster, where);
  checkTimelinePrefix(cluster, where);
}

/** SIM-7. */
export function checkCascades(cluster: SimCluster, where: string): void {
  for (const s of cluster.standbys) {
    const u = s.upstream;
    const sn = s.node;
    if (u === null || u === cluster.primary || sn === null || !sn.inRecovery) continue;
    if (s.cascadeBaseline < 0) s.cascadeBaseline = sn.wal.flushLsn;
    const un = u.node;
    if (un === null || u.corruptLsn !== null || un.timeline !== sn.timeline) continue;
    if (sn.wal.flushLsn > Math.max(un.wal.flushLsn, s.cascadeBaseline)) {
      cluster.violation(
        `${where}: cascaded standby ${s.name} flushed ${formatLsn(sn.wal.flushLsn)}, past its upstream ${u.name}'s flush ${formatLsn(un.wal.flushLsn)} (timeline ${sn.timeline})`,
      );
    }
  }
}

/** SIM-8. */
export function checkSingleWriter(cluster: SimCluster, where: string): void {
  // Out of recovery and not a standby shutting down (the lifecycle machine's `stopping` state is
  // out of recovery for either role; a stopping standby still has its startup process).
  const writers = cluster.hosts.filter(
    (h) =>
      h.node !== null &&
      !h.node.inRecovery &&
      (h.node.shuttingDown === null || h.node.startup === null),
  );
  if (writers.length > 1 || (writers.length === 1 && writers[0] !== cluster.primary)) {
    cluster.violation(
      `${where}: nodes accepting writes: ${writers.map((h) => h.name).join(', ')} (the primary is ${cluster.primary.name})`,
    );
  }
}

/** History of a node's timeline, cached per process incarnation and timeline (the file never changes). */
const historyCache = new WeakMap<ServerNode, { tli: number; hist: TimelineHistoryEntry[] }>();
function historyOf(h: Host, n: ServerNode): TimelineHistoryEntry[] {
  const c = historyCache.get(n);
  if (c !== undefined && c.tli === n.timeline) return c.hist;
  const hist = readTimelineHistory(DATA_DIR, n.timeline, h.disk);
  historyCache.set(n, { tli: n.timeline, hist });
  return hist;
}

/** SIM-9. */
export function checkTimelinePrefix(cluster: SimCluster, where: string): void {
  const p = cluster.primary;
  const pn = p.node;
  if (pn === null || pn.inRecovery) return;
  let ph: TimelineHistoryEntry[];
  try {
    ph = historyOf(p, pn);
  } catch {
    return; // unreadable: SIM-3 says so
  }
  for (const s of cluster.standbys) {
    const sn = s.node;
    if (sn === null || !sn.inRecovery || sn.timeline > pn.timeline) continue;
    let sh: TimelineHistoryEntry[];
    try {
      sh = historyOf(s, sn);
    } catch {
      continue;
    }
    const i = sh.length - 1;
    const prefix =
      i < ph.length &&
      sh.every(
        (e, k) =>
          e.tli === ph[k]!.tli &&
          e.beginLsn === ph[k]!.beginLsn &&
          (k === i || e.endLsn === ph[k]!.endLsn),
      );
    if (!prefix) {
      cluster.violation(
        `${where}: ${s.name}'s timeline history ${JSON.stringify(sh)} is not a prefix of the primary ${p.name}'s ${JSON.stringify(ph)}`,
      );
      continue;
    }
    const end = ph[i]!.endLsn;
    if (end !== null && sn.wal.flushLsn > end) {
      cluster.violation(
        `${where}: ${s.name} flushed ${formatLsn(sn.wal.flushLsn)} on timeline ${sn.timeline}, past ${formatLsn(end)} where the primary ${p.name}'s history ends it (diverged WAL)`,
      );
    }
  }
}
