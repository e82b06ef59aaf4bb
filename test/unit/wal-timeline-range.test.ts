/**
 * A WAL range cut at a timeline history's switch points (wal/timeline-range.ts), on the history
 * file text PostgreSQL writes: each part on the timeline tliOfPointInHistory gives its LSNs.
 */
import { expect, it } from 'vitest';
import { parseLsn } from '../../wal/lsn.ts';
import { parseTimelineHistory } from '../../wal/segment.ts';
import { splitRangeByTimeline, tliOfPointInHistory } from '../../wal/timeline-range.ts';

// 00000003.history after two promotions.
const history = parseTimelineHistory(
  '1\t0/5000108\tno recovery target specified\n\n2\t0/8000000\tno recovery target specified\n',
  3,
);
const L = parseLsn;

it('gives each LSN the timeline current there; a switch point belongs to the new timeline', () => {
  expect(tliOfPointInHistory(L('0/3000028'), history)).toBe(1);
  expect(tliOfPointInHistory(L('0/5000107'), history)).toBe(1);
  expect(tliOfPointInHistory(L('0/5000108'), history)).toBe(2);
  expect(tliOfPointInHistory(L('0/8000000'), history)).toBe(3);
  expect(tliOfPointInHistory(L('1/0'), history)).toBe(3);
});

it('cuts a range at every switch point inside it, and nowhere else', () => {
  expect(splitRangeByTimeline(history, L('0/3000028'), L('0/9000010'))).toEqual([
    { tli: 1, from: L('0/3000028'), to: L('0/5000108') },
    { tli: 2, from: L('0/5000108'), to: L('0/8000000') },
    { tli: 3, from: L('0/8000000'), to: L('0/9000010') },
  ]);
  expect(splitRangeByTimeline(history, L('0/6000000'), L('0/7000000'))).toEqual([
    { tli: 2, from: L('0/6000000'), to: L('0/7000000') },
  ]);
  // Ending exactly at a switch point: nothing of the next timeline.
  expect(splitRangeByTimeline(history, L('0/3000028'), L('0/5000108'))).toEqual([
    { tli: 1, from: L('0/3000028'), to: L('0/5000108') },
  ]);
  expect(splitRangeByTimeline(history, L('0/9000000'), L('0/9000000'))).toEqual([]);
  // Timeline 1 (no history file): one open timeline.
  expect(splitRangeByTimeline([{ tli: 1, beginLsn: 0, endLsn: null }], L('0/1'), L('0/2'))).toEqual(
    [{ tli: 1, from: 1, to: 2 }],
  );
});
