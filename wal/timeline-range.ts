/**
 * Which timeline each part of a WAL range belongs to, from a timeline history: PostgreSQL's
 * `tliOfPointInHistory` (timeline.c) and the split a reader makes at the history's switch points.
 * A reader of a range that crosses a timeline switch (a standby whose last restartpoint predates
 * its upstream's promotion) reads [from, switch point) on the old timeline's segment files and
 * [switch point, to) on the new one's: segments before the switch exist only under the old
 * timeline's file names. Pure: the history comes from `parseTimelineHistory` (segment.ts).
 *
 * Entry points: `tliOfPointInHistory`, `splitRangeByTimeline`, `TimelinePart`.
 */
import { formatLsn, type Lsn, type TimeLineId } from './lsn.ts';
import type { TimelineHistoryEntry } from './segment.ts';
import { WalsimError } from '../common/errors.ts';

/** One part of a range: [from, to) lies on `tli`. */
export interface TimelinePart {
  tli: TimeLineId;
  from: Lsn;
  to: Lsn;
}

/**
 * tliOfPointInHistory: the timeline `lsn` lies on. A switch point belongs to the new timeline (an
 * entry covers [beginLsn, endLsn)). Throws when the history does not cover `lsn`.
 */
export function tliOfPointInHistory(
  lsn: Lsn,
  history: readonly TimelineHistoryEntry[],
): TimeLineId {
  for (const h of history)
    if (lsn >= h.beginLsn && (h.endLsn === null || lsn < h.endLsn)) return h.tli;
  throw new WalsimError(
    'invalid_wal',
    `timeline history (${history.map((h) => h.tli).join(', ')}) does not cover ${formatLsn(lsn)}`,
  );
}

/**
 * [from, to) cut at the history's switch points, oldest first, each part with its timeline. An
 * empty range gives no part; a range within one timeline gives one.
 */
export function splitRangeByTimeline(
  history: readonly TimelineHistoryEntry[],
  from: Lsn,
  to: Lsn,
): TimelinePart[] {
  if (from >= to) return [];
  tliOfPointInHistory(from, history); // the start must lie on the history
  const parts: TimelinePart[] = [];
  for (const h of history) {
    const a = Math.max(from, h.beginLsn);
    const b = h.endLsn === null ? to : Math.min(to, h.endLsn);
    if (a < b) parts.push({ tli: h.tli, from: a, to: b });
  }
  return parts;
}
