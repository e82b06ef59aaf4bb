/**
 * The fork point of two timeline histories and the rejoin rule: a node may follow another node's
 * history only if its WAL does not extend past the point where the histories part.
 * Method: histories parsed from history-file text, as `%08X.history` holds them.
 */
import { describe, expect, it } from 'vitest';
import { parseTimelineHistory } from '../../wal/segment.ts';
import { checkRejoin, findForkPoint } from '../../wal/timeline-fork.ts';

const tl1 = parseTimelineHistory('', 1);
const tl2 = parseTimelineHistory('1\t0/3000060\tno recovery target specified\n', 2);
const tl3 = parseTimelineHistory(
  '1\t0/3000060\tno recovery target specified\n2\t0/5000000\tno recovery target specified\n',
  3,
);
/** A sibling of timeline 2: another standby promoted from timeline 1 at an earlier point. */
const tl4sibling = parseTimelineHistory('1\t0/2800000\tno recovery target specified\n', 4);

describe('findForkPoint (findCommonAncestorTimeline)', () => {
  it('an ancestor and its descendant part where the descendant branched', () => {
    expect(findForkPoint(tl1, tl2)).toEqual({ timeline: 1, lsn: 0x3000060 });
    expect(findForkPoint(tl2, tl1)).toEqual({ timeline: 1, lsn: 0x3000060 });
    expect(findForkPoint(tl1, tl3)).toEqual({ timeline: 1, lsn: 0x3000060 });
    expect(findForkPoint(tl2, tl3)).toEqual({ timeline: 2, lsn: 0x5000000 });
  });

  it('the same timeline does not fork', () => {
    expect(findForkPoint(tl2, tl2)).toEqual({ timeline: 2, lsn: null });
  });

  it('siblings part at the earlier of their switch points', () => {
    expect(findForkPoint(tl2, tl4sibling)).toEqual({ timeline: 1, lsn: 0x2800000 });
  });

  it('histories that share nothing have no fork point', () => {
    expect(findForkPoint(parseTimelineHistory('', 5), tl2)).toBeNull();
  });
});

describe('checkRejoin', () => {
  it('allows an old primary whose WAL ends at or before the fork point', () => {
    expect(checkRejoin(tl1, 0x3000060, tl2)).toEqual({
      ok: true,
      fork: { timeline: 1, lsn: 0x3000060 },
    });
    expect(checkRejoin(tl1, 0x2000028, tl2).ok).toBe(true);
    expect(checkRejoin(tl2, 0x7000000, tl2).ok).toBe(true);
    expect(checkRejoin(tl2, 0x4000000, tl3).ok).toBe(true);
  });

  it('refuses one byte past the fork point, saying how many bytes diverged and that pg_rewind is needed', () => {
    const v = checkRejoin(tl1, 0x3000068, tl2);
    expect(v.ok).toBe(false);
    if (v.ok) return;
    expect(v.divergedBytes).toBe(8);
    expect(v.message).toBe(
      'its WAL on timeline 1 ends at 0/3000068, 8 bytes past 0/3000060, where timeline 2 forked off timeline 1 ' +
        '(history file of timeline 2); those 8 bytes exist only on this node, so it cannot follow timeline 2: ' +
        'PostgreSQL would need pg_rewind (or a new base backup) first',
    );
  });

  it('refuses a node on a sibling branch that wrote past the earlier switch point', () => {
    const v = checkRejoin(tl4sibling, 0x2900000, tl2);
    expect(v).toMatchObject({
      ok: false,
      divergedBytes: 0x100000,
      fork: { timeline: 1, lsn: 0x2800000 },
    });
  });

  it('refuses a node on a newer timeline than the one it would follow, past the switch', () => {
    expect(checkRejoin(tl2, 0x3000100, tl1)).toMatchObject({ ok: false, divergedBytes: 0xa0 });
  });

  it('refuses unrelated histories', () => {
    const v = checkRejoin(parseTimelineHistory('', 5), 0x100, tl2);
    expect(v).toMatchObject({ ok: false, fork: null, divergedBytes: null });
    if (!v.ok) expect(v.message).toMatch(/no common ancestor/);
  });
});
