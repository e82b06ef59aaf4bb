/**
 * Fencing an old primary after a failover, and the "locally committed, not replicated" window.
 *
 * Entry points: `timelineOf` (a node's newest timeline on disk), `divergence` (what a node's WAL
 * holds past the point where a newer node's timeline forked off), `splitBrainRefusal` (why a node
 * must not start as a primary).
 *
 * After a standby is promoted to timeline N+1, the old primary's data directory still says it is a
 * primary on timeline N. PostgreSQL would start it as a second read-write primary — every failover
 * tool fences it for that reason. walsim knows every node of the cluster directory, so `startNode`
 * refuses to start a node as a primary when another node is on a later timeline that branched from
 * it. The refusal names the fork point and the commits that exist only on the old primary: commits
 * whose record was flushed there but never reached the promoted standby (at the remote levels they
 * were never acknowledged — they waited for the standby when the primary died; at `local`/`off`
 * they may have been). An old primary whose WAL does not go past the fork point can follow the new
 * one (`cluster rejoin`, server/topology.ts); one that diverged would need pg_rewind, which walsim
 * does not implement.
 */
import * as fs from 'node:fs';
import * as path from 'node:path';
import { formatLsn, type Lsn, type TimeLineId } from '../wal/lsn.ts';
import { readTimelineHistory, walDir } from '../wal/segment.ts';
import { readWal } from '../wal/wal-reader.ts';
import { findForkPoint, type ForkPoint } from '../wal/timeline-fork.ts';
import { listNodes, nodeDir, readNodeConfig, type NodeName } from './cluster-files.ts';
import { readControlFile } from '../wal/control-file.ts';
import { nodeDisk } from '../common/node-disk.ts';

/** A commit record in the old node's WAL past the fork point. */
export interface DivergedCommit {
  xid: number;
  lsn: string;
  /** The commit's time (xactTime), ISO 8601. */
  time: string;
}

export interface Divergence {
  /** The old node and its timeline; the newer node and its timeline. */
  node: NodeName;
  timeline: TimeLineId;
  newerNode: NodeName;
  newerTimeline: TimeLineId;
  fork: ForkPoint | null;
  /** WAL bytes the old node has past the fork point (0: it has nothing the newer node lacks). */
  divergedBytes: number;
  /** Commits whose records lie past the fork point: only the old node has them. */
  commits: DivergedCommit[];
  /** Set when the old node's WAL past the fork could not be read completely. */
  readError: string | null;
}

/** The newest timeline of a node: its pg_control's, or a newer history file's (a promotion in progress). */
export function timelineOf(dataDir: string): TimeLineId {
  let tli = readControlFile(dataDir, nodeDisk).timeline;
  const dir = walDir(dataDir);
  if (fs.existsSync(dir)) {
    for (const f of fs.readdirSync(dir)) {
      const m = /^([0-9A-F]{8})\.history$/.exec(f);
      if (m) tli = Math.max(tli, parseInt(m[1]!, 16));
    }
  }
  return tli;
}

/**
 * What node `name` (on its own timeline) holds past the point where `newer`'s timeline forked off:
 * bytes and commit records. Reads the old node's WAL files from the fork point (a record boundary:
 * a standby receives whole records, and promotion branches at the end of the last valid one).
 */
export function divergence(clusterDir: string, name: NodeName, newer: NodeName): Divergence {
  const dir = nodeDir(clusterDir, name);
  const newerDir = nodeDir(clusterDir, newer);
  const timeline = timelineOf(dir);
  const newerTimeline = timelineOf(newerDir);
  const fork = findForkPoint(
    readTimelineHistory(dir, timeline, nodeDisk),
    readTimelineHistory(newerDir, newerTimeline, nodeDisk),
  );
  const out: Divergence = {
    node: name,
    timeline,
    newerNode: newer,
    newerTimeline,
    fork,
    divergedBytes: 0,
    commits: [],
    readError: null,
  };
  if (fork === null || fork.lsn === null) return out;
  const segmentSize = readNodeConfig(clusterDir, name).walSegmentSize;
  let end: Lsn = fork.lsn;
  const reader = readWal(dir, fork.lsn, { timeline, segmentSize, disk: nodeDisk });
  try {
    for (const rec of reader) {
      end = rec.endLsn;
      if (rec.body.kind === 'XACT_COMMIT') {
        out.commits.push({
          xid: rec.header.xid,
          lsn: formatLsn(rec.lsn),
          time: new Date(rec.body.xactTime).toISOString(),
        });
      }
    }
  } catch (e) {
    out.readError = (e as Error).message;
  } finally {
    reader.close();
  }
  out.divergedBytes = Math.max(0, end - fork.lsn);
  return out;
}

function describeCommits(d: Divergence): string {
  if (d.readError !== null)
    return ` (its WAL past the fork point could not be read: ${d.readError})`;
  if (d.commits.length === 0)
    return d.divergedBytes > 0
      ? ` Its WAL goes ${d.divergedBytes} bytes past the fork point, with no commit in them.`
      : '';
  const shown = d.commits
    .slice(0, 5)
    .map((c) => `xid ${c.xid} at ${c.lsn} (${c.time})`)
    .join(', ');
  return (
    ` ${d.commits.length} commit${d.commits.length === 1 ? '' : 's'} exist${d.commits.length === 1 ? 's' : ''} only on "${d.node}"` +
    ` (committed locally, never replicated to "${d.newerNode}"): ${shown}${d.commits.length > 5 ? ', …' : ''}.`
  );
}

/**
 * The node on the newest timeline later than `name`'s, when `name` would start as a primary (no
 * standby.signal): then another node was promoted after it and `name` is an old primary.
 */
export function supersededBy(
  clusterDir: string,
  name: NodeName,
): { node: NodeName; timeline: TimeLineId } | null {
  const dir = nodeDir(clusterDir, name);
  if (fs.existsSync(path.join(dir, 'standby.signal'))) return null;
  const mine = timelineOf(dir);
  let newest: { node: NodeName; timeline: TimeLineId } | null = null;
  for (const other of listNodes(clusterDir)) {
    if (other === name) continue;
    const tli = timelineOf(nodeDir(clusterDir, other));
    if (tli > mine && (newest === null || tli > newest.timeline))
      newest = { node: other, timeline: tli };
  }
  return newest;
}

/**
 * Why `name` must not start as a primary, or null when it may. A node starting as a standby
 * (standby.signal) is never refused here.
 */
export function splitBrainRefusal(clusterDir: string, name: NodeName): string | null {
  const newest = supersededBy(clusterDir, name);
  if (newest === null) return null;
  const mine = timelineOf(nodeDir(clusterDir, name));
  const d = divergence(clusterDir, name, newest.node);
  const where = d.fork?.lsn != null ? ` at ${formatLsn(d.fork.lsn)}` : '';
  const way =
    d.readError === null && d.divergedBytes === 0
      ? `Its WAL ends at the fork point, so it can follow "${newest.node}" as a standby: ` +
        `"npm run cluster -- rejoin --node ${name} --to ${newest.node}".`
      : `It cannot rejoin "${newest.node}" as a standby (PostgreSQL would need pg_rewind, which walsim does not implement): ` +
        `keep its directory for inspection or remove it, and add a standby of "${newest.node}" with ` +
        `"npm run cluster -- add-standby --name NAME --from ${newest.node}".`;
  return (
    `node "${name}" was a primary on timeline ${mine}, but node "${newest.node}" has since been promoted ` +
    `(timeline ${newest.timeline}, forked off timeline ${d.fork?.timeline ?? '?'}${where}); starting "${name}" as a primary ` +
    `would give the cluster two read-write primaries (split brain), so it is refused.${describeCommits(d)} ${way}`
  );
}
