/**
 * Where two timeline histories fork, and whether a node's WAL still fits another node's history:
 * the check behind `cluster rejoin` (may an old primary follow the promoted standby?).
 *
 * Entry points: `findForkPoint` (pg_rewind's findCommonAncestorTimeline), `checkRejoin`.
 *
 * A node whose WAL ends at E on its own history can stream from a node on history H exactly when
 * E is not past the point where the two histories part: everything it has is then also in H, and
 * what it lacks arrives by streaming. If E is past the fork point, the bytes between the fork point
 * and E exist only on this node (commits the promoted standby never received); following H would
 * mean replaying H's different WAL on top of them. PostgreSQL's walsender refuses such a start
 * ("requested starting point … is not in this server's history") and the way back is pg_rewind or
 * a new base backup.
 */
import { formatLsn, type Lsn, type TimeLineId } from './lsn.ts';
import type { TimelineHistoryEntry } from './segment.ts';
import { injectedBugs } from '../common/injected-bugs.ts';

export interface ForkPoint {
  /** The newest timeline both histories share. */
  timeline: TimeLineId;
  /** Where they part: the smaller of the two ends of that shared timeline; null if neither ended it. */
  lsn: Lsn | null;
}

/**
 * findCommonAncestorTimeline: walk both histories from the oldest entry while they name the same
 * timeline beginning at the same LSN; the last such entry is the common ancestor and the fork point
 * is the smaller of its two end LSNs (an open end counts as infinite). null if nothing is shared.
 */
export function findForkPoint(
  a: readonly TimelineHistoryEntry[],
  b: readonly TimelineHistoryEntry[],
): ForkPoint | null {
  let i = 0;
  while (
    i < a.length &&
    i < b.length &&
    a[i]!.tli === b[i]!.tli &&
    a[i]!.beginLsn === b[i]!.beginLsn
  )
    i++;
  if (i === 0) return null;
  const ea = a[i - 1]!.endLsn;
  const eb = b[i - 1]!.endLsn;
  const lsn = ea === null ? eb : eb === null ? ea : Math.min(ea, eb);
  return { timeline: a[i - 1]!.tli, lsn };
}

export type RejoinVerdict =
  | { ok: true; fork: ForkPoint }
  | { ok: false; fork: ForkPoint | null; divergedBytes: number | null; message: string };

/**
 * May a node whose WAL (history `oldHistory`) ends at `oldEndLsn` — where its next record would
 * start — follow a node with history `newHistory`? Allowed when it does not extend past the fork
 * point; otherwise refused with the number of bytes that diverged.
 */
export function checkRejoin(
  oldHistory: readonly TimelineHistoryEntry[],
  oldEndLsn: Lsn,
  newHistory: readonly TimelineHistoryEntry[],
): RejoinVerdict {
  const oldTli = oldHistory[oldHistory.length - 1]!.tli;
  const newTli = newHistory[newHistory.length - 1]!.tli;
  const fork = findForkPoint(oldHistory, newHistory);
  if (fork === null) {
    return {
      ok: false,
      fork,
      divergedBytes: null,
      message: `timeline ${oldTli} and timeline ${newTli} have no common ancestor: the nodes are not from the same cluster history; PostgreSQL would need a new base backup`,
    };
  }
  if (fork.lsn === null || oldEndLsn <= fork.lsn || injectedBugs.skipRejoinDivergenceCheck)
    return { ok: true, fork };
  const divergedBytes = oldEndLsn - fork.lsn;
  return {
    ok: false,
    fork,
    divergedBytes,
    message:
      `its WAL on timeline ${oldTli} ends at ${formatLsn(oldEndLsn)}, ${divergedBytes} bytes past ${formatLsn(fork.lsn)}, ` +
      `where timeline ${newTli} forked off timeline ${fork.timeline} (history file of timeline ${newTli}); ` +
      `those ${divergedBytes} bytes exist only on this node, so it cannot follow timeline ${newTli}: ` +
      `PostgreSQL would need pg_rewind (or a new base backup) first`,
  };
}
