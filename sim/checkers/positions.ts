/**
 * SIM-3 (sim/README), after every step: no buffer holds a dropped block; a node's timeline equals
 * its WAL's and the history file of a timeline > 1 is readable and branches at or before the
 * flush LSN; replay is not past the flush LSN nor past a corrupt record; the standby's flush LSN
 * is not ahead of the primary's on the same timeline.
 */
import { formatLsn } from '../../wal/lsn.ts';
import { readTimelineHistory } from '../../wal/segment.ts';
import type { ServerNode } from '../../server/node.ts';
import { DATA_DIR, type Host, type SimCluster } from '../cluster.ts';

export function checkPositions(cluster: SimCluster, where: string): void {
  for (const h of cluster.roleOrder()) {
    const n = h.node;
    if (n !== null) checkNode(cluster, h, n, where);
  }
  const p = cluster.primary.node;
  for (const sh of cluster.standbys) {
    const s = sh.node;
    if (p === null || s === null || !s.inRecovery || p.inRecovery || s.timeline !== p.timeline)
      continue;
    if (s.wal.flushLsn > p.wal.flushLsn) {
      const who = cluster.twoNodes ? 'standby' : `standby ${sh.name}`;
      cluster.violation(
        `${where}: ${who} flushed ${formatLsn(s.wal.flushLsn)}, ahead of the primary's flush ${formatLsn(p.wal.flushLsn)}`,
      );
    }
  }
}

function checkNode(cluster: SimCluster, h: Host, n: ServerNode, where: string): void {
  const orphans = n.storage.orphanBuffers();
  if (orphans.length > 0)
    cluster.violation(
      `${where}: ${h.name} buffers hold dropped blocks ${orphans.slice(0, 5).join(', ')}`,
    );
  if (n.timeline !== n.wal.timeline)
    cluster.violation(`${where}: ${h.name} timeline ${n.timeline} but WAL on ${n.wal.timeline}`);
  checkHistory(cluster, h, n, where);
  if (
    h.corruptLsn !== null &&
    h.owner === h.corruptOwner &&
    n.inRecovery &&
    n.startup !== null &&
    n.startup.nextLsn > h.corruptLsn
  ) {
    cluster.violation(
      `${where}: ${h.name} replayed past the corrupt record at ${formatLsn(h.corruptLsn)} (next ${formatLsn(n.startup.nextLsn)})`,
    );
  }
  // Healed once a restarted process (crash recovery ended local WAL at the bad record) has
  // streamed and flushed past it again.
  if (h.corruptLsn !== null && h.owner !== h.corruptOwner && n.wal.flushLsn > h.corruptLsn)
    h.corruptLsn = null;
  if (n.inRecovery && n.startup !== null && n.startup.replayEndLsn > n.wal.flushLsn) {
    cluster.violation(
      `${where}: ${h.name} replayed to ${formatLsn(n.startup.replayEndLsn)} past its flushed WAL ${formatLsn(n.wal.flushLsn)}`,
    );
  }
}

/**
 * The history file is written once per timeline and the flush LSN only grows within a process:
 * checked once per process incarnation and timeline (a power loss starts a new incarnation).
 */
function checkHistory(cluster: SimCluster, h: Host, n: ServerNode, where: string): void {
  if (n.timeline <= 1 || h.historyCheckedFor === `${h.owner}/${n.timeline}`) return;
  // A standby restarted on damaged WAL: crash recovery ended its local WAL at the bad record,
  // which may lie before the branch point of the timeline it follows (the segment file of the new
  // timeline holds the old timeline's WAL up to the switch); it streams it again. Checked once
  // the damage is healed (seed 41001232).
  if (n.inRecovery && h.corruptLsn !== null) return;
  h.historyCheckedFor = `${h.owner}/${n.timeline}`;
  try {
    const hist = readTimelineHistory(DATA_DIR, n.timeline, h.disk);
    const last = hist[hist.length - 2];
    if (last === undefined || last.endLsn === null || last.endLsn > n.wal.flushLsn) {
      cluster.violation(
        `${where}: ${h.name} history of timeline ${n.timeline} ends its parent after the flush LSN`,
      );
    }
  } catch (e) {
    cluster.violation(
      `${where}: ${h.name} history of timeline ${n.timeline} unreadable: ${(e as Error).message}`,
    );
  }
}
