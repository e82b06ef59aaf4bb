/**
 * Each HeapStore operation does what its WAL record means and refuses what PostgreSQL's redo
 * would refuse (INV-HEAP-n). Method: small relations built record by record, checked through
 * pageRuns/nitems/visibility reads and checkInvariants after every mutation.
 */
import { beforeEach, describe, expect, it } from 'vitest';
import { InvariantViolation } from '../../common/assert.ts';
import { WalsimError } from '../../common/errors.ts';
import { Clog } from '../../storage/clog.ts';
import { HeapStore, type DeletePredicate, type HeapRunInfo } from '../../storage/heap-store.ts';
import {
  REL_TRUNCATE_FRACTION,
  REL_TRUNCATE_MINIMUM,
  shouldAttemptTruncation,
} from '../../storage/vacuum-truncation.ts';
import { TUPLES_PER_PAGE } from '../../wal/records.ts';

const REL = 16384;
const X1 = 3;
const X2 = 4;
const X3 = 5;

let store: HeapStore;
let clog: Clog;

beforeEach(() => {
  store = new HeapStore();
  clog = new Clog();
  store.createRelation(REL);
});

function run(
  offset: number,
  count: number,
  firstValue: number,
  xmin: number,
  xmax = 0,
): HeapRunInfo {
  return { offset, count, unused: false, firstValue, xmin, xmax };
}
function unusedRun(offset: number, count: number): HeapRunInfo {
  return { offset, count, unused: true, firstValue: 0, xmin: 0, xmax: 0 };
}

/** A full generate_series page per block, inserted and committed by X1. */
function fillPages(pages: number, xmin = X1): void {
  for (let b = 0; b < pages; b++) {
    store.applyMultiInsert(REL, b, 1, [1 + b * TUPLES_PER_PAGE, TUPLES_PER_PAGE], xmin, true);
  }
  if (clog.status(xmin) === 'in_progress') clog.setCommitted(xmin);
  store.checkInvariants(REL);
}

function collectDeletes(pred: DeletePredicate): Array<[number, number[]]> {
  const out: Array<[number, number[]]> = [];
  store.forEachPageToDelete(REL, pred, clog, (block, offsets) => out.push([block, offsets]));
  return out;
}

describe('relations', () => {
  it('creates, lists in relfilenumber order, and drops relations', () => {
    store.createRelation(20000);
    store.createRelation(16390);
    expect(store.relations()).toEqual([16384, 16390, 20000]);
    expect(store.hasRelation(16390)).toBe(true);
    store.dropRelation(16390);
    expect(store.hasRelation(16390)).toBe(false);
    expect(store.relations()).toEqual([16384, 20000]);
  });

  it('refuses duplicate creation, dropping a missing relation and using one (INV-HEAP-1)', () => {
    expect(() => store.createRelation(REL)).toThrow(InvariantViolation);
    expect(() => store.dropRelation(99999)).toThrow(/does not exist/);
    expect(() => store.nblocks(99999)).toThrow(/does not exist/);
    expect(() => store.applyInsert(99999, 0, 1, 1, X1, true)).toThrow(/does not exist/);
  });

  it('extends with empty pages and truncates away the pages at the end', () => {
    store.extendTo(REL, 3);
    expect(store.nblocks(REL)).toBe(3);
    expect([0, 1, 2].map((b) => store.nitems(REL, b))).toEqual([0, 0, 0]);
    store.applyMultiInsert(REL, 3, 1, [1, 10], X1, true);
    store.truncate(REL, 2);
    expect(store.nblocks(REL)).toBe(2);
    expect(() => store.nitems(REL, 2)).toThrow(/not below nblocks 2/);
    expect(() => store.truncate(REL, 3)).toThrow(InvariantViolation);
    expect(() => store.extendTo(REL, 1)).toThrow(InvariantViolation);
    // Re-extending gives new, empty pages, not the old contents.
    store.extendTo(REL, 4);
    expect(store.nitems(REL, 3)).toBe(0);
    store.checkInvariants(REL);
  });
});

describe('applyMultiInsert / applyInsert', () => {
  it('keeps a generate_series page as one run and extends the relation with initPage', () => {
    store.applyMultiInsert(REL, 0, 1, [1, 226], X1, true);
    expect(store.nblocks(REL)).toBe(1);
    expect(store.pageRuns(REL, 0)).toEqual([run(1, 226, 1, X1)]);
    expect(store.nitems(REL, 0)).toBe(226);
    expect(store.freeSlots(REL, 0)).toBe(0);
  });

  it('merges payload runs whose values continue and keeps the others apart (INV-HEAP-4)', () => {
    store.applyMultiInsert(REL, 0, 1, [10, 5, 15, 5, 100, 2], X1, true);
    expect(store.pageRuns(REL, 0)).toEqual([run(1, 10, 10, X1), run(11, 2, 100, X1)]);
    store.checkInvariants(REL);
  });

  it('appends to the page, merging with the last run only for the same xid and next value', () => {
    store.applyMultiInsert(REL, 0, 1, [1, 100], X1, true);
    store.applyMultiInsert(REL, 0, 101, [101, 50], X1, false);
    expect(store.pageRuns(REL, 0)).toEqual([run(1, 150, 1, X1)]);
    store.applyMultiInsert(REL, 0, 151, [151, 10], X2, false);
    store.applyInsert(REL, 0, 161, 7, X2, false);
    expect(store.pageRuns(REL, 0)).toEqual([
      run(1, 150, 1, X1),
      run(151, 10, 151, X2),
      run(161, 1, 7, X2),
    ]);
    expect(store.freeSlots(REL, 0)).toBe(226 - 161);
  });

  it('appends from a page whose runs are not at the slab end (moves them)', () => {
    store.applyInsert(REL, 0, 1, 1, X1, true);
    store.applyInsert(REL, 1, 1, 2, X1, true); // block 1's run is now at the slab end
    store.applyInsert(REL, 0, 2, 50, X2, false);
    store.applyInsert(REL, 0, 3, 51, X2, false);
    expect(store.pageRuns(REL, 0)).toEqual([run(1, 1, 1, X1), run(2, 2, 50, X2)]);
    expect(store.pageRuns(REL, 1)).toEqual([run(1, 1, 2, X1)]);
    store.checkInvariants(REL);
  });

  it('re-initialises an emptied page with initPage', () => {
    store.applyMultiInsert(REL, 0, 1, [1, 5], X1, true);
    clog.setCommitted(X1);
    store.applyDelete(REL, 0, [1, 5], X2);
    clog.setCommitted(X2);
    store.applyPrune(REL, 0, [1, 5]);
    expect(store.nitems(REL, 0)).toBe(0);
    store.applyMultiInsert(REL, 0, 1, [40, 3], X3, true);
    expect(store.pageRuns(REL, 0)).toEqual([run(1, 3, 40, X3)]);
  });

  it('refuses initPage on a non-empty page, off offset 1, or past nblocks (INV-HEAP-6)', () => {
    store.applyMultiInsert(REL, 0, 1, [1, 5], X1, true);
    expect(() => store.applyMultiInsert(REL, 0, 1, [1, 5], X1, true)).toThrow(
      /initPage on a page with 5/,
    );
    expect(() => store.applyMultiInsert(REL, 1, 2, [1, 5], X1, true)).toThrow(/offset 1/);
    expect(() => store.applyMultiInsert(REL, 2, 1, [1, 5], X1, true)).toThrow(/beyond nblocks/);
    expect(() => store.applyInsert(REL, 1, 1, 1, X1, false)).toThrow(/not below nblocks/);
    expect(store.nblocks(REL)).toBe(1);
  });

  it('refuses gaps, overflowing a page, bad values and bad xids', () => {
    store.applyMultiInsert(REL, 0, 1, [1, 5], X1, true);
    expect(() => store.applyInsert(REL, 0, 7, 1, X1, false)).toThrow(/past nitems 5/);
    expect(() => store.applyMultiInsert(REL, 0, 6, [1, 222], X1, false)).toThrow(/> 226/);
    expect(() => store.applyMultiInsert(REL, 0, 6, [1, 0], X1, false)).toThrow(/INV-HEAP-7/);
    expect(() => store.applyMultiInsert(REL, 0, 6, [2 ** 31 - 2, 3], X1, false)).toThrow(/int4/);
    expect(() => store.applyMultiInsert(REL, 0, 6, [1], X1, false)).toThrow(/pairs/);
    expect(() => store.applyInsert(REL, 0, 6, 1.5, X1, false)).toThrow(/int4/);
    expect(() => store.applyInsert(REL, 0, 6, 1, 2, false)).toThrow(/not a normal xid/);
    expect(store.pageRuns(REL, 0)).toEqual([run(1, 5, 1, X1)]);
  });

  it('accepts int4 extremes', () => {
    store.applyMultiInsert(REL, 0, 1, [-(2 ** 31), 2, 2 ** 31 - 2, 2], X1, true);
    clog.setCommitted(X1);
    expect(store.visibleValues(REL, clog)).toEqual([
      -(2 ** 31),
      -(2 ** 31) + 1,
      2 ** 31 - 2,
      2 ** 31 - 1,
    ]);
  });

  it('reuses an unused line pointer inside the page, but never overwrites a used one', () => {
    store.applyMultiInsert(REL, 0, 1, [1, 10], X1, true);
    clog.setCommitted(X1);
    store.applyDelete(REL, 0, [3, 2], X2);
    clog.setCommitted(X2);
    store.applyPrune(REL, 0, [3, 2]);
    expect(store.pageRuns(REL, 0)).toEqual([run(1, 2, 1, X1), unusedRun(3, 2), run(5, 6, 5, X1)]);
    expect(() => store.applyInsert(REL, 0, 5, 99, X3, false)).toThrow(
      /insert over a used line pointer/,
    );
    store.applyInsert(REL, 0, 4, 99, X3, false);
    expect(store.pageRuns(REL, 0)).toEqual([
      run(1, 2, 1, X1),
      unusedRun(3, 1),
      run(4, 1, 99, X3),
      run(5, 6, 5, X1),
    ]);
    // A multi-insert may fill the last unused slot and run on past nitems.
    store.applyMultiInsert(REL, 0, 3, [3, 1], X1, false);
    expect(store.pageRuns(REL, 0)[0]).toEqual(run(1, 3, 1, X1));
    store.checkInvariants(REL);
  });

  it('fills unused line pointers with a multi-insert but stops at a used one', () => {
    store.applyMultiInsert(REL, 0, 1, [1, 10], X1, true);
    clog.setCommitted(X1);
    store.applyDelete(REL, 0, [8, 2], X2);
    clog.setCommitted(X2);
    store.applyPrune(REL, 0, [8, 2]);
    expect(() => store.applyMultiInsert(REL, 0, 8, [500, 3], X3, false)).toThrow(
      /offset 10: insert over a used/,
    );
    store.applyMultiInsert(REL, 0, 8, [500, 2], X3, false);
    expect(store.pageRuns(REL, 0)).toEqual([
      run(1, 7, 1, X1),
      run(8, 2, 500, X3),
      run(10, 1, 10, X1),
    ]);
    expect(store.nitems(REL, 0)).toBe(10);
  });
});

describe('applyDelete', () => {
  beforeEach(() => fillPages(2));

  it('sets xmax on the listed ranges, splitting runs, and a whole-page delete stays one run', () => {
    store.applyDelete(REL, 0, [10, 5, 100, 1], X2);
    expect(store.pageRuns(REL, 0)).toEqual([
      run(1, 9, 1, X1),
      run(10, 5, 10, X1, X2),
      run(15, 85, 15, X1),
      run(100, 1, 100, X1, X2),
      run(101, 126, 101, X1),
    ]);
    store.applyDelete(REL, 1, [1, 226], X2);
    expect(store.pageRuns(REL, 1)).toEqual([run(1, 226, 227, X1, X2)]);
    store.checkInvariants(REL);
  });

  it('merges back into one run when the rest of the page is deleted by the same xid', () => {
    store.applyDelete(REL, 0, [10, 5], X2);
    store.applyDelete(REL, 0, [1, 9, 15, 212], X2);
    expect(store.pageRuns(REL, 0)).toEqual([run(1, 226, 1, X1, X2)]);
  });

  it('accepts ranges in any order but not overlapping ones (INV-HEAP-6)', () => {
    store.applyDelete(REL, 0, [20, 2, 5, 3], X2);
    expect(store.pageRuns(REL, 0)[1]).toEqual(run(5, 3, 5, X1, X2));
    expect(() => store.applyDelete(REL, 0, [5, 3, 7, 2], X2)).toThrow(/overlap/);
  });

  it('refuses line pointers that do not exist or are unused', () => {
    expect(() => store.applyDelete(REL, 0, [220, 10], X2)).toThrow(
      /not within line pointers 1..226/,
    );
    expect(() => store.applyDelete(REL, 0, [0, 1], X2)).toThrow(InvariantViolation);
    expect(() => store.applyDelete(REL, 0, [], X2)).toThrow(/no line pointers/);
    expect(() => store.applyDelete(REL, 0, [1, 1], 0)).toThrow(/xmax 0/);
    store.applyDelete(REL, 0, [3, 1], X2);
    clog.setCommitted(X2);
    store.applyPrune(REL, 0, [3, 1]);
    expect(() => store.applyDelete(REL, 0, [2, 3], X3)).toThrow(/offset 3: line pointer is unused/);
  });

  it('hides tuples only once the deleter commits; an aborted delete leaves them visible', () => {
    store.applyDelete(REL, 0, [1, 226], X2);
    store.applyDelete(REL, 1, [1, 226], X3);
    expect(store.countVisible(REL, clog)).toBe(452);
    clog.setCommitted(X2);
    clog.setAborted(X3);
    expect(store.countVisible(REL, clog)).toBe(226);
  });
});

describe('applyPrune', () => {
  beforeEach(() => {
    fillPages(1);
    store.applyDelete(REL, 0, [1, 226], X2);
    clog.setCommitted(X2);
  });

  it('marks interior line pointers unused and keeps nitems', () => {
    store.applyPrune(REL, 0, [10, 5]);
    expect(store.nitems(REL, 0)).toBe(226);
    expect(store.pageRuns(REL, 0)[1]).toEqual(unusedRun(10, 5));
  });

  it('truncates trailing unused line pointers (PageTruncateLinePointerArray)', () => {
    store.applyPrune(REL, 0, [10, 5]);
    store.applyPrune(REL, 0, [15, 212]);
    expect(store.nitems(REL, 0)).toBe(9);
    expect(store.pageRuns(REL, 0)).toEqual([run(1, 9, 1, X1, X2)]);
    store.applyPrune(REL, 0, [1, 9]);
    expect(store.nitems(REL, 0)).toBe(0);
    expect(store.pageRuns(REL, 0)).toEqual([]);
    expect(store.nonEmptyPages(REL)).toBe(0);
    store.checkInvariants(REL);
  });

  it('refuses unused or missing line pointers', () => {
    store.applyPrune(REL, 0, [10, 5]);
    expect(() => store.applyPrune(REL, 0, [12, 1])).toThrow(/line pointer is unused/);
    expect(() => store.applyPrune(REL, 0, [226, 2])).toThrow(/not within/);
  });

  it('accepts an empty offset list as a no-op', () => {
    store.applyPrune(REL, 0, []);
    expect(store.pageRuns(REL, 0)).toEqual([run(1, 226, 1, X1, X2)]);
  });
});

describe('planning', () => {
  it('plans deletes for each predicate over visible tuples only', () => {
    fillPages(3);
    expect(collectDeletes({ op: '<', value: 5 })).toEqual([[0, [1, 4]]]);
    expect(collectDeletes({ op: '<', value: 4.5 })).toEqual([[0, [1, 4]]]);
    expect(collectDeletes({ op: '>', value: 676 })).toEqual([[2, [225, 2]]]);
    expect(collectDeletes({ op: '=', value: 227 })).toEqual([[1, [1, 1]]]);
    expect(collectDeletes({ op: '=', value: 227.5 })).toEqual([]);
    expect(collectDeletes({ op: 'all' })).toEqual([
      [0, [1, 226]],
      [1, [1, 226]],
      [2, [1, 226]],
    ]);
    store.applyDelete(REL, 1, [1, 226], X2);
    clog.setCommitted(X2);
    expect(collectDeletes({ op: '>', value: 200 })).toEqual([
      [0, [201, 26]],
      [2, [1, 226]],
    ]);
  });

  it('skips uncommitted and aborted inserts, keeps tuples whose delete aborted', () => {
    store.applyMultiInsert(REL, 0, 1, [1, 10], X1, true);
    store.applyMultiInsert(REL, 0, 11, [11, 10], X2, false);
    store.applyMultiInsert(REL, 0, 21, [21, 10], X3, false);
    clog.setCommitted(X1);
    clog.setAborted(X3);
    expect(collectDeletes({ op: 'all' })).toEqual([[0, [1, 10]]]);
    store.applyDelete(REL, 0, [1, 5], 6);
    clog.setAborted(6);
    clog.setCommitted(X2);
    // Runs with different xmin/xmax are planned as one merged range.
    expect(collectDeletes({ op: '<', value: 15 })).toEqual([[0, [1, 14]]]);
  });

  it('lets the callbacks apply each planned change, even when that compacts the slab', () => {
    // 6000 pages of three runs. Deleting one value moves every page's runs (five now) to the
    // slab end; pruning everything then empties pages in place until garbage exceeds the live
    // rows and the slab is compacted in the middle of the prune iteration.
    for (let b = 0; b < 6000; b++)
      store.applyMultiInsert(REL, b, 1, [0, 10, 100, 10, 1000, 10], X1, true);
    clog.setCommitted(X1);
    const seen = new Set<string>();
    let pages = 0;
    store.forEachPageToDelete(REL, { op: '=', value: 105 }, clog, (block, offsets) => {
      seen.add(offsets.join());
      store.applyDelete(REL, block, offsets, X2);
      pages++;
    });
    expect([pages, [...seen]]).toEqual([6000, ['16,1']]);
    expect(store.checkInvariants(REL)).toBe(6000 * 5);
    clog.setCommitted(X2);
    expect(store.countVisible(REL, clog)).toBe(6000 * 29);
    store.forEachPageToDelete(REL, { op: 'all' }, clog, (block, offsets) => {
      seen.add(offsets.join());
      store.applyDelete(REL, block, offsets, X3);
    });
    expect([...seen]).toEqual(['16,1', '1,15,17,14']);
    clog.setCommitted(X3);
    const before = store.memoryBytes(REL);
    pages = 0;
    store.forEachPageToPrune(REL, clog, new Set(), (block, offsets, latest) => {
      seen.add(`${offsets.join()}/${latest}`);
      store.applyPrune(REL, block, offsets);
      pages++;
    });
    expect([pages, [...seen]]).toEqual([6000, ['16,1', '1,15,17,14', `1,30/${X3}`]]);
    expect(store.checkInvariants(REL)).toBe(0);
    expect(store.nonEmptyPages(REL)).toBe(0);
    expect(store.memoryBytes(REL)).toBeLessThan(before);
  });

  it('plans prunes of committed deletes and aborted inserts with latestRemovedXid', () => {
    store.applyMultiInsert(REL, 0, 1, [1, 10], X1, true);
    store.applyMultiInsert(REL, 0, 11, [11, 10], X2, false);
    store.applyMultiInsert(REL, 1, 1, [1, 10], X1, true);
    clog.setCommitted(X1);
    clog.setAborted(X2);
    store.applyDelete(REL, 0, [1, 3], 7);
    store.applyDelete(REL, 0, [4, 1], 8);
    store.applyDelete(REL, 1, [1, 10], 9);
    clog.setCommitted(7);
    clog.setCommitted(8);
    // Block 2: X3 was killed by a crash (no commit or abort record, not running); block 3: 10 runs.
    store.applyMultiInsert(REL, 2, 1, [1, 5], X3, true);
    store.applyMultiInsert(REL, 3, 1, [1, 5], 10, true);
    const plans: unknown[] = [];
    store.forEachPageToPrune(REL, clog, new Set([9, 10]), (block, offsets, latest) =>
      plans.push([block, offsets, latest]),
    );
    // Block 1's deleter (9) is still in progress: nothing to prune there; nor on block 3.
    // X3 "must have aborted or crashed": its tuples are dead (latestRemovedXid stays 0).
    expect(plans).toEqual([
      [0, [1, 4, 11, 10], 8],
      [2, [1, 5], 0],
    ]);
    expect(clog.status(X3)).toBe('in_progress');
  });

  it('computes nonEmptyPages and the truncation rule', () => {
    fillPages(4);
    store.extendTo(REL, 6);
    expect(store.nonEmptyPages(REL)).toBe(4);
    store.applyDelete(REL, 3, [1, 226], X2);
    clog.setCommitted(X2);
    store.applyPrune(REL, 3, [1, 100]);
    expect(store.nonEmptyPages(REL)).toBe(4); // any used line pointer keeps the page
    store.applyPrune(REL, 3, [101, 126]);
    expect(store.nonEmptyPages(REL)).toBe(3);
    store.truncate(REL, 3);
    expect(store.nonEmptyPages(REL)).toBe(3);
  });

  it('applies should_attempt_truncation thresholds', () => {
    expect(REL_TRUNCATE_MINIMUM).toBe(1000);
    expect(REL_TRUNCATE_FRACTION).toBe(16);
    expect(shouldAttemptTruncation(0, 0)).toBe(false);
    expect(shouldAttemptTruncation(100, 100)).toBe(false);
    expect(shouldAttemptTruncation(100, 99)).toBe(false); // 1 < 100/16
    expect(shouldAttemptTruncation(100, 93)).toBe(true); // 7 >= 6
    // rel_pages / REL_TRUNCATE_FRACTION is BlockNumber (unsigned) division: 100/16 = 6, 20/16 = 1.
    expect(shouldAttemptTruncation(100, 94)).toBe(true);
    expect(shouldAttemptTruncation(20, 19)).toBe(true);
    expect(shouldAttemptTruncation(15, 14)).toBe(true); // 15/16 = 0: any free tail page
    expect(shouldAttemptTruncation(32, 31)).toBe(false); // 1 < 2
    expect(shouldAttemptTruncation(100_000, 99_000)).toBe(true); // 1000 >= minimum
    expect(shouldAttemptTruncation(100_000, 99_001)).toBe(false);
    expect(shouldAttemptTruncation(1_638_400, 0)).toBe(true);
    expect(() => shouldAttemptTruncation(10, 11)).toThrow(InvariantViolation);
  });
});

describe('reads', () => {
  it('counts and lists visible values in physical order', () => {
    store.applyMultiInsert(REL, 0, 1, [50, 3, 1, 2], X1, true);
    store.applyInsert(REL, 1, 1, 7, X2, true);
    clog.setCommitted(X1);
    expect(store.countVisible(REL, clog)).toBe(5);
    expect(store.visibleValues(REL, clog)).toEqual([50, 51, 52, 1, 2]);
    expect(store.visibleValues(REL, clog, 2)).toEqual([50, 51]);
  });

  it('digests contents, not how they were split into runs or by whom', () => {
    const other = new HeapStore();
    other.createRelation(REL);
    store.applyMultiInsert(REL, 0, 1, [1, 20], X1, true);
    other.applyMultiInsert(REL, 0, 1, [1, 5], X1, true);
    other.applyMultiInsert(REL, 0, 6, [6, 15], X2, false);
    other.applyMultiInsert(REL, 0, 21, [21, 5], X3, false);
    other.extendTo(REL, 3);
    clog.setCommitted(X1);
    clog.setCommitted(X2);
    clog.setAborted(X3);
    expect(other.pageRuns(REL, 0)).toHaveLength(3);
    expect(other.contentDigest(REL, clog)).toBe(store.contentDigest(REL, clog));
    // The same values at another offset or block, or one value fewer, differ.
    const digests = new Set([store.contentDigest(REL, clog)]);
    store.applyDelete(REL, 0, [20, 1], 6);
    clog.setCommitted(6);
    digests.add(store.contentDigest(REL, clog));
    const moved = new HeapStore();
    moved.createRelation(REL);
    moved.extendTo(REL, 1);
    moved.applyMultiInsert(REL, 1, 1, [1, 20], X1, true);
    digests.add(moved.contentDigest(REL, clog));
    expect(digests.size).toBe(3);
  });
});

describe('persistence', () => {
  it('round-trips exactly, garbage compacted away', () => {
    fillPages(50);
    store.applyDelete(REL, 3, [5, 10, 50, 3], X2);
    store.applyInsert(REL, 50, 1, 1, X3, true);
    store.applyMultiInsert(REL, 50, 2, [7, 3, 1, 1], X2, false);
    clog.setCommitted(X2);
    const copy = new HeapStore();
    copy.deserializeRelation(REL, store.serializeRelation(REL));
    expect(copy.nblocks(REL)).toBe(51);
    for (let b = 0; b < 51; b++) expect(copy.pageRuns(REL, b)).toEqual(store.pageRuns(REL, b));
    expect(copy.contentDigest(REL, clog)).toBe(store.contentDigest(REL, clog));
    expect(copy.serializeRelation(REL)).toEqual(store.serializeRelation(REL));
  }, 10_000);

  it('is compact: 16 + 15 bytes per run + 2 per page', () => {
    fillPages(10);
    store.extendTo(REL, 12);
    expect(store.serializeRelation(REL).length).toBe(16 + 15 * 10 + 2 * 12);
  });

  it('reads from an unaligned buffer and replaces an existing relation', () => {
    fillPages(3);
    const bytes = store.serializeRelation(REL);
    const padded = new Uint8Array(bytes.length + 1);
    padded.set(bytes, 1);
    const other = new HeapStore();
    other.createRelation(REL);
    other.applyInsert(REL, 0, 1, 1, X1, true);
    other.deserializeRelation(REL, padded.subarray(1));
    expect(other.countVisible(REL, clog)).toBe(3 * 226);
  });

  it('reports malformed or inconsistent bytes as corrupt data', () => {
    fillPages(2);
    const bytes = store.serializeRelation(REL);
    const cases: Array<(b: Uint8Array) => Uint8Array> = [
      (b) => b.subarray(0, 10),
      (b) => {
        b[0] = 1;
        return b;
      },
      (b) => b.subarray(0, b.length - 1),
      (b) => {
        b[b.length - 4] = 200;
        return b;
      }, // nitems of block 0 no longer matches its run
      (b) => {
        b[16 + 8] = 0;
        return b;
      }, // xmin of run 0 becomes 0 (INV-HEAP-7)
      (b) => {
        b[16 + 8] = 9;
        return b;
      }, // xmin of run 0 becomes 9: still a valid file
    ];
    const kinds = cases.map((mutate) => {
      try {
        new HeapStore().deserializeRelation(REL, mutate(bytes.slice()));
        return 'ok';
      } catch (e) {
        return e instanceof WalsimError ? e.kind : String(e);
      }
    });
    expect(kinds).toEqual(['io_error', 'io_error', 'io_error', 'io_error', 'io_error', 'ok']);
  });
});
