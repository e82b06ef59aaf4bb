/**
 * One relation's heap pages as columns: per-page typed arrays plus a run slab (see the design
 * notes at the top of heap-store.ts, which owns the public API and the INV-HEAP-n list).
 *
 * Entry points: `HeapRelation.extendTo`, `truncate`, `rewritePage` (the one general mutation: a
 * sweep over a page's runs and a sorted list of line-pointer ranges), `appendToPage` (the O(1)
 * fast path for inserts at the end of a page), `checkInvariants`.
 *
 * Callers fill the module-level range scratch (`rangeOffset`, `rangeCount`, `rangeValue`) with at
 * most TUPLES_PER_PAGE sorted, disjoint ranges before calling a mutation; the mutation writes the
 * new runs of the page into the output scratch and then back into the slab. Nothing here
 * allocates per call except when an array grows or the slab is compacted.
 */
import { assert, fail } from '../common/assert.ts';
import { TUPLES_PER_PAGE } from '../wal/records.ts';

export const FIRST_NORMAL_XID = 3;

export const INT32_MIN = -0x80000000;
export const INT32_MAX = 0x7fffffff;

/** Mutation kinds of rewritePage. */
export const MODE_INSERT = 0;
export const MODE_DELETE = 1;
export const MODE_PRUNE = 2;
export type RewriteMode = 0 | 1 | 2;

const SCRATCH_RUNS = 256;
const INITIAL_SLAB_RUNS = 16;
const INITIAL_PAGES = 16;
/** Compact once at least this many slab slots are garbage and garbage is over half the slab. */
const COMPACT_MIN_GARBAGE = 4096;

/** Input ranges of the next mutation: line pointers [offset, offset+count), values from value. */
export const rangeOffset = new Int32Array(SCRATCH_RUNS);
export const rangeCount = new Int32Array(SCRATCH_RUNS);
export const rangeValue = new Int32Array(SCRATCH_RUNS);

// Output scratch: the page's new runs, built by emit() with merging.
const outOffset = new Uint8Array(SCRATCH_RUNS);
const outCount = new Uint8Array(SCRATCH_RUNS);
const outUnused = new Uint8Array(SCRATCH_RUNS);
const outValue = new Int32Array(SCRATCH_RUNS);
const outXmin = new Uint32Array(SCRATCH_RUNS);
const outXmax = new Uint32Array(SCRATCH_RUNS);
let outRuns = 0;

/**
 * Append a run to the output scratch, merging it into the previous one when the two are
 * continuous (INV-HEAP-4): same state, and for used runs same xmin/xmax and consecutive values.
 */
function emit(
  offset: number,
  count: number,
  unused: number,
  value: number,
  xmin: number,
  xmax: number,
): void {
  const last = outRuns - 1;
  if (
    last >= 0 &&
    outUnused[last] === unused &&
    (unused === 1 ||
      (outXmin[last] === xmin &&
        outXmax[last] === xmax &&
        outValue[last]! + outCount[last]! === value))
  ) {
    outCount[last] = outCount[last]! + count;
    return;
  }
  assert(outRuns < SCRATCH_RUNS, 'INV-HEAP-1: a page cannot hold more runs than line pointers');
  outOffset[outRuns] = offset;
  outCount[outRuns] = count;
  outUnused[outRuns] = unused;
  outValue[outRuns] = value;
  outXmin[outRuns] = xmin;
  outXmax[outRuns] = xmax;
  outRuns++;
}

function grownCapacity(capacity: number, needed: number, minimum: number): number {
  let next = Math.max(capacity * 2, minimum);
  while (next < needed) next *= 2;
  return next;
}

export class HeapRelation {
  nblocks = 0;

  // Per page (index = block number). Entries at or beyond nblocks are kept zero.
  pageNitems = new Uint8Array(INITIAL_PAGES);
  pageRunStart = new Uint32Array(INITIAL_PAGES);
  pageRunCount = new Uint8Array(INITIAL_PAGES);

  // The run slab: one row per run, each page's runs contiguous and ordered by offset.
  runOffset = new Uint8Array(INITIAL_SLAB_RUNS);
  runCount = new Uint8Array(INITIAL_SLAB_RUNS);
  runUnused = new Uint8Array(INITIAL_SLAB_RUNS);
  runValue = new Int32Array(INITIAL_SLAB_RUNS);
  runXmin = new Uint32Array(INITIAL_SLAB_RUNS);
  runXmax = new Uint32Array(INITIAL_SLAB_RUNS);
  slabLength = 0;
  /** Slab rows no page points at any more (left behind when a page's runs moved or shrank). */
  slabGarbage = 0;

  /** Bytes held by the typed arrays (capacity, not length). */
  memoryBytes(): number {
    return (
      this.pageNitems.byteLength +
      this.pageRunStart.byteLength +
      this.pageRunCount.byteLength +
      this.runOffset.byteLength +
      this.runCount.byteLength +
      this.runUnused.byteLength +
      this.runValue.byteLength +
      this.runXmin.byteLength +
      this.runXmax.byteLength
    );
  }

  liveRuns(): number {
    return this.slabLength - this.slabGarbage;
  }

  /** Grow to `nblocks` pages; the new pages are new (all zero: no line pointers). */
  extendTo(nblocks: number): void {
    if (!(Number.isInteger(nblocks) && nblocks >= this.nblocks && nblocks <= 0xfffffffe)) {
      fail(`INV-HEAP-1: cannot extend from ${this.nblocks} to ${nblocks} blocks`);
    }
    if (nblocks > this.pageNitems.length) this.growPages(nblocks);
    this.nblocks = nblocks;
  }

  /** Forget pages >= nblocks; their runs become garbage (or the slab is reset when empty). */
  truncate(nblocks: number): void {
    if (!(Number.isInteger(nblocks) && nblocks >= 0 && nblocks <= this.nblocks))
      fail(`INV-HEAP-1: cannot truncate ${this.nblocks} blocks to ${nblocks}`);
    if (nblocks === 0) {
      this.reset();
      return;
    }
    for (let b = nblocks; b < this.nblocks; b++) this.slabGarbage += this.pageRunCount[b]!;
    this.pageNitems.fill(0, nblocks, this.nblocks);
    this.pageRunStart.fill(0, nblocks, this.nblocks);
    this.pageRunCount.fill(0, nblocks, this.nblocks);
    this.nblocks = nblocks;
    if (this.pageNitems.length > 4 * nblocks && this.pageNitems.length > 1024) this.shrinkPages();
    this.maybeCompact();
  }

  /** Back to zero pages and small arrays, releasing the memory. */
  reset(): void {
    this.nblocks = 0;
    this.pageNitems = new Uint8Array(INITIAL_PAGES);
    this.pageRunStart = new Uint32Array(INITIAL_PAGES);
    this.pageRunCount = new Uint8Array(INITIAL_PAGES);
    this.allocateSlab(INITIAL_SLAB_RUNS);
    this.slabLength = 0;
    this.slabGarbage = 0;
  }

  /**
   * Fast path for inserts that append line pointers nitems+1 .. (the executor's bulk insert): the
   * ranges go straight onto the page's last run or the slab end, O(ranges). Returns false, having
   * changed nothing, when the page's runs are not at the slab end and the ranges do not simply
   * extend its last run; the caller then uses rewritePage.
   */
  appendToPage(block: number, nranges: number, xmin: number): boolean {
    const nitems = this.pageNitems[block]!;
    let count = this.pageRunCount[block]!;
    let start = this.pageRunStart[block]!;
    let added = 0;
    for (let k = 0; k < nranges; k++) added += rangeCount[k]!;
    if (nitems + added > TUPLES_PER_PAGE)
      fail(`INV-HEAP-1: block ${block} would hold ${nitems + added} items`);
    const atEnd = count === 0 || start + count === this.slabLength;
    if (!atEnd && !(nranges === 1 && this.extendsRun(start + count - 1, 0, xmin))) return false;
    if (count === 0) start = this.slabLength;
    if (atEnd) this.ensureSlab(start + count + nranges);
    const { runOffset, runCount, runUnused, runValue, runXmin, runXmax } = this;
    for (let k = 0; k < nranges; k++) {
      const last = start + count - 1;
      if (count > 0 && this.extendsRun(last, k, xmin)) {
        runCount[last] = runCount[last]! + rangeCount[k]!;
      } else {
        const at = start + count;
        runOffset[at] = rangeOffset[k]!;
        runCount[at] = rangeCount[k]!;
        runUnused[at] = 0;
        runValue[at] = rangeValue[k]!;
        runXmin[at] = xmin;
        runXmax[at] = 0;
        count++;
      }
    }
    if (atEnd) this.slabLength = start + count;
    this.pageRunStart[block] = start;
    this.pageRunCount[block] = count;
    this.pageNitems[block] = nitems + added;
    return true;
  }

  /** Whether range k (a fresh insert by xmin) continues slab run `at`. */
  private extendsRun(at: number, k: number, xmin: number): boolean {
    return (
      this.runUnused[at] === 0 &&
      this.runXmin[at] === xmin &&
      this.runXmax[at] === 0 &&
      this.runOffset[at]! + this.runCount[at]! === rangeOffset[k] &&
      this.runValue[at]! + this.runCount[at]! === rangeValue[k]
    );
  }

  /**
   * The general mutation. Sweeps the page's runs against the sorted, disjoint input ranges:
   * - MODE_INSERT: each range's line pointers become used tuples (values from rangeValue, xmin =
   *   xid, xmax 0); inside the page they must be unused, past nitems they extend the array.
   * - MODE_DELETE: each range's line pointers (used) get xmax = xid.
   * - MODE_PRUNE: each range's line pointers (used) become unused; trailing unused line pointers
   *   are then truncated (PageTruncateLinePointerArray).
   * The caller has checked the ranges against nitems (INV-HEAP-6); the sweep checks states.
   */
  rewritePage(block: number, nranges: number, mode: RewriteMode, xid: number): void {
    const { runOffset, runCount, runUnused, runValue, runXmin, runXmax } = this;
    const start = this.pageRunStart[block]!;
    const count = this.pageRunCount[block]!;
    const nitems = this.pageNitems[block]!;
    outRuns = 0;
    let k = 0;
    for (let i = start; i < start + count; i++) {
      const off = runOffset[i]!;
      const end = off + runCount[i]!;
      const unused = runUnused[i]!;
      let pos = off;
      while (pos < end) {
        if (k < nranges && rangeOffset[k]! <= pos) {
          // Range k covers pos: ranges are sorted, and k moves on when pos reaches its end.
          const rangeEnd = rangeOffset[k]! + rangeCount[k]!;
          const segEnd = end < rangeEnd ? end : rangeEnd;
          if (mode === MODE_INSERT) {
            if (unused !== 1) {
              fail(`INV-HEAP-6: block ${block} offset ${pos}: insert over a used line pointer`);
            }
            emit(pos, segEnd - pos, 0, rangeValue[k]! + (pos - rangeOffset[k]!), xid, 0);
          } else {
            if (unused !== 0) {
              fail(`INV-HEAP-6: block ${block} offset ${pos}: line pointer is unused`);
            }
            if (mode === MODE_DELETE) {
              emit(pos, segEnd - pos, 0, runValue[i]! + (pos - off), runXmin[i]!, xid);
            } else {
              emit(pos, segEnd - pos, 1, 0, 0, 0);
            }
          }
          pos = segEnd;
          if (pos === rangeEnd) k++;
        } else {
          const segEnd = k < nranges && rangeOffset[k]! < end ? rangeOffset[k]! : end;
          const value = unused === 1 ? 0 : runValue[i]! + (pos - off);
          emit(pos, segEnd - pos, unused, value, runXmin[i]!, runXmax[i]!);
          pos = segEnd;
        }
      }
    }
    // Insert ranges (or the tail of one) beyond nitems extend the line pointer array.
    for (; k < nranges; k++) {
      if (mode !== MODE_INSERT) {
        fail(`INV-HEAP-6: block ${block} offset ${rangeOffset[k]} > nitems ${nitems}`);
      }
      const from = rangeOffset[k]! > nitems + 1 ? rangeOffset[k]! : nitems + 1;
      if (!(from === (outRuns === 0 ? 1 : outOffset[outRuns - 1]! + outCount[outRuns - 1]!))) {
        fail(
          `INV-HEAP-6: block ${block}: insert at offset ${from} leaves a gap after nitems ` +
            `${nitems}`,
        );
      }
      const skipped = from - rangeOffset[k]!;
      emit(from, rangeCount[k]! - skipped, 0, rangeValue[k]! + skipped, xid, 0);
    }
    if (mode === MODE_PRUNE) while (outRuns > 0 && outUnused[outRuns - 1] === 1) outRuns--;
    this.writeBack(block);
  }

  /** Make page `block` a copy of page `block` of `src` (empty when src is shorter). */
  copyPage(block: number, src: HeapRelation): void {
    outRuns = 0;
    if (block < src.nblocks) {
      const start = src.pageRunStart[block]!;
      for (let i = start; i < start + src.pageRunCount[block]!; i++)
        emit(
          src.runOffset[i]!,
          src.runCount[i]!,
          src.runUnused[i]!,
          src.runValue[i]!,
          src.runXmin[i]!,
          src.runXmax[i]!,
        );
    }
    this.writeBack(block);
  }

  /** Store the output scratch as the page's runs: in place if they fit, else at the slab end. */
  private writeBack(block: number): void {
    const n = outRuns;
    const newNitems = n === 0 ? 0 : outOffset[n - 1]! + outCount[n - 1]! - 1;
    if (newNitems > TUPLES_PER_PAGE) {
      fail(`INV-HEAP-1: block ${block} would hold ${newNitems} items`);
    }
    if (!(n === 0 || (outOffset[0] === 1 && outUnused[n - 1] === 0))) {
      fail(
        `INV-HEAP-3: block ${block} runs must start at offset 1 and end with a used line ` +
          `pointer`,
      );
    }
    const oldStart = this.pageRunStart[block]!;
    const oldCount = this.pageRunCount[block]!;
    const atEnd = oldCount > 0 && oldStart + oldCount === this.slabLength;
    let start: number;
    if (atEnd) {
      start = oldStart;
      this.ensureSlab(start + n);
      this.slabLength = start + n;
    } else if (n <= oldCount) {
      start = oldStart;
      this.slabGarbage += oldCount - n;
    } else {
      start = this.slabLength;
      this.ensureSlab(start + n);
      this.slabLength = start + n;
      this.slabGarbage += oldCount;
    }
    const { runOffset, runCount, runUnused, runValue, runXmin, runXmax } = this;
    for (let j = 0; j < n; j++) {
      runOffset[start + j] = outOffset[j]!;
      runCount[start + j] = outCount[j]!;
      runUnused[start + j] = outUnused[j]!;
      runValue[start + j] = outValue[j]!;
      runXmin[start + j] = outXmin[j]!;
      runXmax[start + j] = outXmax[j]!;
    }
    this.pageRunStart[block] = n === 0 ? 0 : start;
    this.pageRunCount[block] = n;
    this.pageNitems[block] = newNitems;
    this.maybeCompact();
  }

  private ensureSlab(runs: number): void {
    if (runs > this.runValue.length) {
      this.resizeSlab(grownCapacity(this.runValue.length, runs, INITIAL_SLAB_RUNS));
    }
  }

  private resizeSlab(capacity: number): void {
    const old = {
      o: this.runOffset,
      c: this.runCount,
      u: this.runUnused,
      v: this.runValue,
      n: this.runXmin,
      x: this.runXmax,
    };
    this.allocateSlab(capacity);
    const len = this.slabLength;
    this.runOffset.set(old.o.subarray(0, len));
    this.runCount.set(old.c.subarray(0, len));
    this.runUnused.set(old.u.subarray(0, len));
    this.runValue.set(old.v.subarray(0, len));
    this.runXmin.set(old.n.subarray(0, len));
    this.runXmax.set(old.x.subarray(0, len));
  }

  allocateSlab(capacity: number): void {
    this.runOffset = new Uint8Array(capacity);
    this.runCount = new Uint8Array(capacity);
    this.runUnused = new Uint8Array(capacity);
    this.runValue = new Int32Array(capacity);
    this.runXmin = new Uint32Array(capacity);
    this.runXmax = new Uint32Array(capacity);
  }

  private growPages(nblocks: number): void {
    this.resizePages(grownCapacity(this.pageNitems.length, nblocks, INITIAL_PAGES));
  }

  private shrinkPages(): void {
    this.resizePages(Math.max(INITIAL_PAGES, this.nblocks * 2));
  }

  resizePages(capacity: number): void {
    const n = Math.min(this.nblocks, capacity);
    const nitems = new Uint8Array(capacity);
    const starts = new Uint32Array(capacity);
    const counts = new Uint8Array(capacity);
    nitems.set(this.pageNitems.subarray(0, n));
    starts.set(this.pageRunStart.subarray(0, n));
    counts.set(this.pageRunCount.subarray(0, n));
    this.pageNitems = nitems;
    this.pageRunStart = starts;
    this.pageRunCount = counts;
  }

  private maybeCompact(): void {
    const garbage = this.slabGarbage;
    if (garbage >= COMPACT_MIN_GARBAGE && garbage * 2 > this.slabLength) this.compact();
  }

  /**
   * Copy the live runs, in block order, into fresh arrays sized 1.5x the live count. Amortised
   * O(1) per garbage row: it runs only when garbage exceeds the live rows.
   */
  compact(): void {
    const old = {
      o: this.runOffset,
      c: this.runCount,
      u: this.runUnused,
      v: this.runValue,
      n: this.runXmin,
      x: this.runXmax,
    };
    const live = this.liveRuns();
    this.allocateSlab(Math.max(INITIAL_SLAB_RUNS, Math.ceil(live * 1.5)));
    const { runOffset, runCount, runUnused, runValue, runXmin, runXmax } = this;
    const { pageRunStart, pageRunCount } = this;
    let at = 0;
    for (let b = 0; b < this.nblocks; b++) {
      const count = pageRunCount[b]!;
      const from = pageRunStart[b]!;
      pageRunStart[b] = count === 0 ? 0 : at;
      for (let j = 0; j < count; j++, at++) {
        runOffset[at] = old.o[from + j]!;
        runCount[at] = old.c[from + j]!;
        runUnused[at] = old.u[from + j]!;
        runValue[at] = old.v[from + j]!;
        runXmin[at] = old.n[from + j]!;
        runXmax[at] = old.x[from + j]!;
      }
    }
    if (at !== live) fail(`INV-HEAP-5: compaction copied ${at} runs, expected ${live} live`);
    this.slabLength = at;
    this.slabGarbage = 0;
  }

  /**
   * Full structural check, O(pages + slab): INV-HEAP-1..5 and 7. Tests call it after every
   * step; deserialization calls it on what it read. Returns the live run count.
   */
  checkInvariants(label: string): number {
    const owner = new Uint8Array(this.slabLength);
    let live = 0;
    for (let b = 0; b < this.nblocks; b++) {
      const nitems = this.pageNitems[b]!;
      const count = this.pageRunCount[b]!;
      const start = this.pageRunStart[b]!;
      const where = `${label} block ${b}`;
      if (nitems > TUPLES_PER_PAGE) fail(`INV-HEAP-1: ${where} has ${nitems} line pointers`);
      if (!((nitems === 0) === (count === 0))) {
        fail(`INV-HEAP-2: ${where}: nitems ${nitems} with ${count} runs`);
      }
      if (!(count === 0 || start + count <= this.slabLength)) {
        fail(`INV-HEAP-5: ${where} runs past the slab end`);
      }
      let expectOffset = 1;
      for (let i = start; i < start + count; i++) {
        if (owner[i] !== 0) fail(`INV-HEAP-5: ${where}: slab row ${i} shared by two pages`);
        owner[i] = 1;
        this.checkRun(i, expectOffset, i > start ? i - 1 : -1, where);
        expectOffset += this.runCount[i]!;
      }
      if (!(expectOffset === nitems + 1)) {
        fail(`INV-HEAP-2: ${where}: runs cover ${expectOffset - 1} of ${nitems}`);
      }
      if (!(count === 0 || this.runUnused[start + count - 1] === 0)) {
        fail(`INV-HEAP-3: ${where} ends with an unused line pointer`);
      }
      live += count;
    }
    for (let b = this.nblocks; b < this.pageNitems.length; b++) {
      if (!(this.pageNitems[b] === 0 && this.pageRunCount[b] === 0)) {
        fail(`INV-HEAP-1: ${label} block ${b} past nblocks is not empty`);
      }
    }
    if (!(live + this.slabGarbage === this.slabLength)) {
      fail(
        `INV-HEAP-5: ${label}: ${live} live + ${this.slabGarbage} garbage != slab length ` +
          `${this.slabLength}`,
      );
    }
    return live;
  }

  private checkRun(i: number, expectOffset: number, prev: number, where: string): void {
    const count = this.runCount[i]!;
    if (!(this.runOffset[i] === expectOffset && count >= 1)) {
      fail(`INV-HEAP-2: ${where}: run ${i} is not contiguous`);
    }
    if (this.runUnused[i] === 1) {
      if (!(this.runValue[i] === 0 && this.runXmin[i] === 0 && this.runXmax[i] === 0)) {
        fail(`INV-HEAP-4: ${where}: unused run ${i} carries a value or xids`);
      }
    } else {
      if (this.runUnused[i] !== 0) {
        fail(`INV-HEAP-4: ${where}: run ${i} has state ${this.runUnused[i]}`);
      }
      const xmax = this.runXmax[i]!;
      if (!(this.runXmin[i]! >= FIRST_NORMAL_XID && (xmax === 0 || xmax >= FIRST_NORMAL_XID))) {
        fail(`INV-HEAP-7: ${where}: run ${i} has xmin ${this.runXmin[i]} xmax ${xmax}`);
      }
      if (!(this.runValue[i]! + count - 1 <= INT32_MAX)) {
        fail(`INV-HEAP-7: ${where}: run ${i} values overflow int4`);
      }
    }
    if (prev >= 0) {
      const mergeable =
        this.runUnused[prev] === this.runUnused[i] &&
        (this.runUnused[i] === 1 ||
          (this.runXmin[prev] === this.runXmin[i] &&
            this.runXmax[prev] === this.runXmax[i] &&
            this.runValue[prev]! + this.runCount[prev]! === this.runValue[i]));
      if (mergeable) fail(`INV-HEAP-4: ${where}: runs ${prev} and ${i} should have been merged`);
    }
  }
}
