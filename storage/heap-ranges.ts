/**
 * Heap record payload checks: a heap WAL record's line-pointer ranges (`[firstOffset, count, ...]`)
 * and multi-insert runs (`[firstValue, count, ...]`) are checked against the page (INV-HEAP-6,
 * INV-HEAP-7, INV-HEAP-1 in heap-store.ts's header) and copied into heap-relation.ts's range
 * scratch, sorted and disjoint, ready for HeapRelation.rewritePage / appendToPage. A violation is
 * refused through common/assert.ts's `fail`, naming the relation, the block and what was wrong.
 */
import { fail } from '../common/assert.ts';
import { TUPLES_PER_PAGE } from '../wal/records.ts';
import {
  FIRST_NORMAL_XID,
  INT32_MAX,
  INT32_MIN,
  rangeCount,
  rangeOffset,
  rangeValue,
} from './heap-relation.ts';

export function assertNormalXid(xid: number, rel: number, block: number, what: string): void {
  if (!(Number.isInteger(xid) && xid >= FIRST_NORMAL_XID && xid <= 0xffffffff)) {
    fail(`INV-HEAP-7: relation ${rel} block ${block}: ${what} ${xid} is not a normal xid`);
  }
}

/** Copy `[firstOffset, count, ...]` into the range scratch: sorted, disjoint, within 1..nitems. */
export function loadOffsetRanges(
  offsets: number[],
  nitems: number,
  rel: number,
  block: number,
): number {
  if (!(offsets.length % 2 === 0 && offsets.length <= 2 * TUPLES_PER_PAGE)) {
    fail(
      `INV-HEAP-6: relation ${rel} block ${block}: offsets must be [firstOffset, count] ` +
        `pairs, got ${offsets.length} numbers`,
    );
  }
  const n = offsets.length / 2;
  let sorted = true;
  for (let i = 0; i < n; i++) {
    const off = offsets[2 * i]!;
    const cnt = offsets[2 * i + 1]!;
    if (!(
      Number.isInteger(off) &&
      Number.isInteger(cnt) &&
      off >= 1 &&
      cnt >= 1 &&
      off + cnt - 1 <= nitems
    )) {
      fail(
        `INV-HEAP-6: relation ${rel} block ${block}: range (${off}, ${cnt}) is not within ` +
          `line pointers 1..${nitems}`,
      );
    }
    rangeOffset[i] = off;
    rangeCount[i] = cnt;
    rangeValue[i] = 0;
    if (i > 0 && off < rangeOffset[i - 1]!) sorted = false;
  }
  if (!sorted) sortRanges(n);
  for (let i = 1; i < n; i++) {
    if (!(rangeOffset[i]! >= rangeOffset[i - 1]! + rangeCount[i - 1]!)) {
      fail(
        `INV-HEAP-6: relation ${rel} block ${block}: ranges at offsets ${rangeOffset[i - 1]} ` +
          `and ${rangeOffset[i]} overlap`,
      );
    }
  }
  return n;
}

/** Insertion sort of the range scratch by offset (at most 226 entries, rarely unsorted). */
function sortRanges(n: number): void {
  for (let i = 1; i < n; i++) {
    const off = rangeOffset[i]!;
    const cnt = rangeCount[i]!;
    let j = i - 1;
    while (j >= 0 && rangeOffset[j]! > off) {
      rangeOffset[j + 1] = rangeOffset[j]!;
      rangeCount[j + 1] = rangeCount[j]!;
      j--;
    }
    rangeOffset[j + 1] = off;
    rangeCount[j + 1] = cnt;
  }
}

/** Copy a multi-insert's `[firstValue, count, ...]` into the range scratch from firstOffset. */
export function loadInsertRuns(
  firstOffset: number,
  runs: number[],
  rel: number,
  block: number,
): number {
  if (!(runs.length >= 2 && runs.length % 2 === 0 && runs.length <= 2 * TUPLES_PER_PAGE)) {
    fail(
      `INV-HEAP-6: relation ${rel} block ${block}: runs must be [firstValue, count] pairs, ` +
        `got ${runs.length} numbers`,
    );
  }
  if (!(Number.isInteger(firstOffset) && firstOffset >= 1)) {
    fail(`INV-HEAP-6: relation ${rel} block ${block}: first offset ${firstOffset}`);
  }
  const n = runs.length / 2;
  let off = firstOffset;
  for (let i = 0; i < n; i++) {
    const value = runs[2 * i]!;
    const cnt = runs[2 * i + 1]!;
    if (!(
      Number.isInteger(value) &&
      Number.isInteger(cnt) &&
      cnt >= 1 &&
      value >= INT32_MIN &&
      value + cnt - 1 <= INT32_MAX
    )) {
      fail(
        `INV-HEAP-7: relation ${rel} block ${block}: run (${value}, ${cnt}) is not a ` +
          `non-empty run of int4 values`,
      );
    }
    rangeOffset[i] = off;
    rangeCount[i] = cnt;
    rangeValue[i] = value;
    off += cnt;
  }
  if (!(off - 1 <= TUPLES_PER_PAGE)) {
    fail(
      `INV-HEAP-1: relation ${rel} block ${block}: insert up to offset ${off - 1} > ` +
        `${TUPLES_PER_PAGE}`,
    );
  }
  return n;
}
