/**
 * Heap store: the contents of every heap relation of one node, as runs of tuples in typed arrays.
 *
 * Principal entry points (class HeapStore)
 *   relations      createRelation, dropRelation, hasRelation, relations, nblocks, extendTo,
 *                  truncate
 *   redo/apply     applyMultiInsert, applyInsert, applyDelete, applyPrune — one call per heap WAL
 *                  record (HEAP2_MULTI_INSERT, HEAP_INSERT, HEAP_DELETE, HEAP2_PRUNE); the
 *                  primary's executor calls the same functions after logging the record, so
 *                  primary and standby run identical code on identical payloads.
 *   planning       freeSlots, nitems, forEachPageToDelete, forEachPageToPrune, nonEmptyPages
 *                  — pure reads the executor uses to build those records (VACUUM's
 *                  truncation rule, shouldAttemptTruncation, is in vacuum-truncation.ts).
 *   reads          countVisible, contentDigest, visibleValues, pageRuns (tests), memoryBytes
 *   persistence    serializeRelation, deserializeRelation (format in heap-codec.ts)
 * Helpers: heap-relation.ts (columns and the page rewrite engine), heap-ranges.ts (a record's
 * line-pointer ranges checked and loaded into the range scratch), heap-codec.ts (bytes),
 * heap-digest.ts (content hash), clog.ts (commit status the visibility rules read).
 *
 * Why this shape
 * --------------
 * walsim's table is PostgreSQL's `CREATE TABLE t (c int)`: 226 tuples per 8 kB page. The largest
 * experiment holds one relation of 1,638,400 pages (~370M rows) on both a primary and a standby,
 * filled by `INSERT ... SELECT generate_series(1, N)`, emptied by `DELETE FROM t` and `VACUUM`.
 * A JS object per page or per tuple is out of the question (~100 bytes each plus GC walks). The
 * store keeps what PostgreSQL keeps per tuple — line pointer state, xmin, xmax, the int value —
 * but run-length encoded: a run is a stretch of consecutive line pointers [offset, offset+count)
 * with equal state, xmin and xmax whose values are consecutive (firstValue, firstValue+1, ...).
 * A page of generate_series() is one run, the same page after DELETE is still one run, and after
 * VACUUM it has none. Memory is O(runs) with ~15 bytes per run plus 6 bytes per page (capacity
 * doubling can add up to 2x): the 1,638,400-page relation costs ~44 MB.
 *
 * Data structures (per relation, heap-relation.ts)
 *   per page, indexed by block:  pageNitems Uint8 (line pointers, ≤ 226), pageRunStart Uint32 and
 *                                pageRunCount Uint8 (the page's runs in the slab).
 *   run slab, one row per run:   runOffset Uint8, runCount Uint8, runUnused Uint8 (1 = LP_UNUSED),
 *                                runValue Int32 (firstValue), runXmin Uint32,
 *                                runXmax Uint32 (0 = none).
 * A page's runs are contiguous slab rows. A mutation rebuilds the page's runs in a scratch buffer
 * (one sweep over the old runs and the record's line-pointer ranges, merging as it emits) and
 * writes them back in place when they fit or at the slab end otherwise; the abandoned rows are
 * counted as garbage and the slab is compacted (copied in block order) when garbage exceeds the
 * live rows, which keeps every update amortised O(runs on the page). Inserts that append to a
 * page whose runs are at the slab end — every page of a bulk insert — skip the sweep and extend
 * the last run or push a row: O(1), no allocation. Relations live in a Map keyed by
 * relfilenumber (~1000 relations is fine; each starts at a few hundred bytes).
 *
 * Invariants (asserted where named; `checkInvariants` asserts all of them at once)
 *   INV-HEAP-1  Every page has 0 ≤ nitems ≤ TUPLES_PER_PAGE and runs ≤ nitems; only blocks
 *               < nblocks exist (every operation asserts its block), and page entries beyond
 *               nblocks are zero.
 *   INV-HEAP-2  A page's runs are ordered, each has count ≥ 1, and together they cover line
 *               pointers 1..nitems exactly, without gaps (nitems = 0 iff no runs).
 *   INV-HEAP-3  The last line pointer of a non-empty page is used: prune truncates trailing unused
 *               line pointers (PostgreSQL 14+ PageTruncateLinePointerArray). So a page has a used
 *               line pointer iff nitems > 0, which is what nonEmptyPages relies on.
 *   INV-HEAP-4  Runs are maximal: no two adjacent runs have equal state and (when used) equal
 *               xmin, xmax and consecutive values. Unused runs carry value, xmin and xmax 0. This
 *               makes the representation canonical, so a bulk-loaded page stays one run.
 *   INV-HEAP-5  Slab accounting: slab length = Σ page run counts + garbage, page regions are
 *               disjoint and inside the slab.
 *   INV-HEAP-6  Mutations respect line pointer states, as PageAddItem and heap redo do: an insert
 *               goes to an unused line pointer or extends the array contiguously from nitems + 1;
 *               delete and prune touch only existing, used line pointers; initPage only on a page
 *               with nitems = 0 (or block = nblocks, extending by one page) and from offset 1;
 *               ranges within one record are disjoint.
 *   INV-HEAP-7  Used tuples have a normal xmin (≥ 3), xmax 0 or normal, and int4 values.
 *   INV-HEAP-8  Serialization round-trips exactly; deserialization re-checks INV-HEAP-1..7 and
 *               reports a violation as corrupt data (WalsimError 'io_error').
 *
 * Visibility (walsim has no concurrent snapshots, see pg-internals.md §3)
 *   visible         xmin committed and (xmax = 0 or xmax not committed)
 *   dead to all     used and (xmax committed or xmin aborted) — what prune removes; an xmin
 *                   is aborted when its CLOG status says so or when it is neither committed
 *                   nor running (killed by a crash: no commit or abort record), as
 *                   HeapTupleSatisfiesVacuum decides
 *
 * Where walsim deviates from PostgreSQL
 *   - No free-space reuse of earlier pages: the executor only appends to the last page (freeSlots
 *     = 226 − nitems); there is no FSM-driven placement. Redo still accepts an insert into an
 *     unused line pointer, because PageAddItem allows it.
 *   - Prune and vacuum's second heap pass are one step: HEAP2_PRUNE turns dead tuples straight
 *     into LP_UNUSED (no LP_DEAD, no index pass, no redirects) and then truncates the line
 *     pointer array, as lazy_vacuum_heap_page does.
 *   - No UPDATE, so no HOT chains, no t_ctid, no infomask hint bits, no freezing.
 *   - A tuple is (value, xmin, xmax); page free space is counted in line pointers, not bytes.
 *   - No page LSN: redo idempotency (skipping a record already reflected in a page) is the
 *     caller's concern; replaying a record twice trips INV-HEAP-6.
 *   - The content digest covers visible tuples only (block, offset, value), not nblocks or dead
 *     tuples; compare nblocks separately.
 */
import { fail } from '../common/assert.ts';
import type { XactStatusReader } from './clog.ts';
import { XACT_ABORTED, XACT_COMMITTED, XACT_IN_PROGRESS } from './clog.ts';
import type { BlockNumber, RelFileNumber, TransactionId } from '../wal/records.ts';
import { TUPLES_PER_PAGE } from '../wal/records.ts';
import { deserializeHeapRelation, serializeHeapRelation } from './heap-codec.ts';
import { ContentHasher } from './heap-digest.ts';
import { assertNormalXid, loadInsertRuns, loadOffsetRanges } from './heap-ranges.ts';
import {
  HeapRelation,
  INT32_MAX,
  INT32_MIN,
  MODE_DELETE,
  MODE_INSERT,
  MODE_PRUNE,
  rangeCount,
  rangeOffset,
  rangeValue,
} from './heap-relation.ts';

/** DELETE's WHERE clause on the one int column: `c < v`, `c > v`, `c = v`, or no WHERE. */
export type DeletePredicate =
  { op: '<' | '>' | '='; value: number } | { op: 'all'; value?: undefined };

/**
 * Called once per page that has something to do, in block order. `offsets` is a fresh
 * `[firstOffset, count, ...]` array of sorted, disjoint ranges, ready to go into a WAL record.
 * The callback may apply the planned change to this page (plan, log, apply), but must not touch
 * other pages of the relation or change its size.
 */
export type PageDeleteCallback = (block: BlockNumber, offsets: number[]) => void;
/** As PageDeleteCallback; latestRemovedXid is the newest committed xmax removed (0 if none). */
export type PagePruneCallback = (
  block: BlockNumber,
  offsets: number[],
  latestRemovedXid: TransactionId,
) => void;

/** One run as tests and debugging see it. */
export interface HeapRunInfo {
  offset: number;
  count: number;
  unused: boolean;
  firstValue: number;
  xmin: TransactionId;
  xmax: TransactionId;
}

/** Inclusive value bounds a predicate selects; lo > hi selects nothing. */
function predicateBounds(pred: DeletePredicate): [number, number] {
  if (pred.op === 'all') return [-Infinity, Infinity];
  const v = pred.value;
  if (!(typeof v === 'number' && Number.isFinite(v))) {
    fail(`INV-HEAP-6: predicate c ${pred.op} ${v} needs a finite value`);
  }
  if (pred.op === '<') return [-Infinity, Math.ceil(v) - 1];
  if (pred.op === '>') return [Math.floor(v) + 1, Infinity];
  if (pred.op !== '=') {
    fail(`INV-HEAP-6: unknown predicate operator ${String((pred as { op: unknown }).op)}`);
  }
  return Number.isInteger(v) ? [v, v] : [1, 0];
}

/** Append the range (off, cnt) to `ranges`, merging with the last range when adjacent. */
function pushRange(ranges: number[], off: number, cnt: number): void {
  const n = ranges.length;
  if (n > 0 && ranges[n - 2]! + ranges[n - 1]! === off) ranges[n - 1] = ranges[n - 1]! + cnt;
  else ranges.push(off, cnt);
}

export class HeapStore {
  private readonly rels = new Map<RelFileNumber, HeapRelation>();
  /**
   * Relations created, changed or dropped since the last `takeChanged()`: what the next data image
   * must write (or forget). Loading a relation from an image does not count as a change.
   */
  private changedRels = new Set<RelFileNumber>();

  // ---- relations ----------------------------------------------------------------------------

  createRelation(rel: RelFileNumber): void {
    if (!(Number.isInteger(rel) && rel > 0)) fail(`INV-HEAP-1: bad relfilenumber ${rel}`);
    if (this.rels.has(rel)) fail(`INV-HEAP-1: relation ${rel} already exists`);
    this.rels.set(rel, new HeapRelation());
    this.changedRels.add(rel);
  }

  dropRelation(rel: RelFileNumber): void {
    if (!this.rels.delete(rel)) {
      fail(`INV-HEAP-1: cannot drop relation ${rel}: it does not exist`);
    }
    this.changedRels.add(rel);
  }

  hasRelation(rel: RelFileNumber): boolean {
    return this.rels.has(rel);
  }

  /** Relfilenumbers, ascending. */
  relations(): RelFileNumber[] {
    return [...this.rels.keys()].sort((a, b) => a - b);
  }

  nblocks(rel: RelFileNumber): number {
    return this.rel(rel).nblocks;
  }

  /** Add new (empty) pages up to nblocks. */
  extendTo(rel: RelFileNumber, nblocks: number): void {
    this.changed(rel).extendTo(nblocks);
  }

  /** Drop pages ≥ nblocks (RelationTruncate / smgr_redo of XLOG_SMGR_TRUNCATE). */
  truncate(rel: RelFileNumber, nblocks: number): void {
    this.changed(rel).truncate(nblocks);
  }

  // ---- redo / apply -------------------------------------------------------------------------

  /**
   * HEAP2_MULTI_INSERT: `runs` = [firstValue, count, ...] go to consecutive line pointers from
   * firstOffset, inserted by xmin. initPage (XLOG_HEAP_INIT_PAGE) needs an empty page or
   * block = nblocks, which adds the page.
   */
  applyMultiInsert(
    rel: RelFileNumber,
    block: BlockNumber,
    firstOffset: number,
    runs: number[],
    xmin: TransactionId,
    initPage: boolean,
  ): void {
    const r = this.changed(rel);
    const nranges = loadInsertRuns(firstOffset, runs, rel, block);
    this.insertRanges(r, rel, block, firstOffset, nranges, xmin, initPage);
  }

  /** HEAP_INSERT: one tuple at `offset`. Same rules as applyMultiInsert. */
  applyInsert(
    rel: RelFileNumber,
    block: BlockNumber,
    offset: number,
    value: number,
    xmin: TransactionId,
    initPage: boolean,
  ): void {
    const r = this.changed(rel);
    if (!(Number.isInteger(offset) && offset >= 1 && offset <= TUPLES_PER_PAGE)) {
      fail(
        `INV-HEAP-1: relation ${rel} block ${block}: offset ${offset} outside ` +
          `1..${TUPLES_PER_PAGE}`,
      );
    }
    if (!(Number.isInteger(value) && value >= INT32_MIN && value <= INT32_MAX)) {
      fail(`INV-HEAP-7: relation ${rel} block ${block}: value ${value} is not int4`);
    }
    rangeOffset[0] = offset;
    rangeCount[0] = 1;
    rangeValue[0] = value;
    this.insertRanges(r, rel, block, offset, 1, xmin, initPage);
  }

  private insertRanges(
    r: HeapRelation,
    rel: number,
    block: number,
    firstOffset: number,
    nranges: number,
    xmin: number,
    initPage: boolean,
  ): void {
    assertNormalXid(xmin, rel, block, 'xmin');
    if (initPage) {
      if (!(Number.isInteger(block) && block >= 0 && block <= r.nblocks)) {
        fail(`INV-HEAP-6: relation ${rel} block ${block}: initPage beyond nblocks ${r.nblocks}`);
      }
      if (!(block === r.nblocks || r.pageNitems[block] === 0)) {
        fail(
          `INV-HEAP-6: relation ${rel} block ${block}: initPage on a page with ` +
            `${r.pageNitems[block]} line pointers`,
        );
      }
      if (firstOffset !== 1) {
        fail(
          `INV-HEAP-6: relation ${rel} block ${block}: initPage insert must start at offset ` +
            `1, not ${firstOffset}`,
        );
      }
      if (block === r.nblocks) r.extendTo(block + 1);
    } else {
      this.assertBlock(r, rel, block);
    }
    const nitems = r.pageNitems[block]!;
    if (!(firstOffset <= nitems + 1)) {
      fail(
        `INV-HEAP-6: relation ${rel} block ${block}: insert at offset ${firstOffset} past ` +
          `nitems ${nitems} + 1`,
      );
    }
    if (firstOffset === nitems + 1 && r.appendToPage(block, nranges, xmin)) return;
    r.rewritePage(block, nranges, MODE_INSERT, xmin);
  }

  /** HEAP_DELETE: the listed line pointers (ranges, all used) get xmax. */
  applyDelete(
    rel: RelFileNumber,
    block: BlockNumber,
    offsets: number[],
    xmax: TransactionId,
  ): void {
    const r = this.changed(rel);
    this.assertBlock(r, rel, block);
    assertNormalXid(xmax, rel, block, 'xmax');
    const nranges = loadOffsetRanges(offsets, r.pageNitems[block]!, rel, block);
    if (!(nranges > 0)) {
      fail(`INV-HEAP-6: relation ${rel} block ${block}: delete of no line pointers`);
    }
    r.rewritePage(block, nranges, MODE_DELETE, xmax);
  }

  /**
   * HEAP2_PRUNE: the listed line pointers (ranges, all used) become unused, then trailing unused
   * line pointers are truncated, so a page whose every tuple was pruned ends with nitems 0.
   */
  applyPrune(rel: RelFileNumber, block: BlockNumber, offsets: number[]): void {
    const r = this.changed(rel);
    this.assertBlock(r, rel, block);
    const nranges = loadOffsetRanges(offsets, r.pageNitems[block]!, rel, block);
    if (nranges > 0) r.rewritePage(block, nranges, MODE_PRUNE, 0);
  }

  // ---- planning (pure reads) ----------------------------------------------------------------

  /** Line pointers left on the page: TUPLES_PER_PAGE − nitems. */
  freeSlots(rel: RelFileNumber, block: BlockNumber): number {
    return TUPLES_PER_PAGE - this.nitems(rel, block);
  }

  /** nitems: the page's line pointer count (PageGetMaxOffsetNumber). */
  nitems(rel: RelFileNumber, block: BlockNumber): number {
    const r = this.rel(rel);
    this.assertBlock(r, rel, block);
    return r.pageNitems[block]!;
  }

  /** For each page with visible tuples matching `pred`, their line pointers (PageDeleteCallback). */
  forEachPageToDelete(
    rel: RelFileNumber,
    pred: DeletePredicate,
    clog: XactStatusReader,
    cb: PageDeleteCallback,
  ): void {
    const r = this.rel(rel);
    const [lo, hi] = predicateBounds(pred);
    if (lo > hi) return;
    for (let b = 0; b < r.nblocks; b++) {
      const count = r.pageRunCount[b]!;
      if (count === 0) continue;
      const start = r.pageRunStart[b]!;
      // Re-read the columns per page: the callback may have compacted the slab.
      const { runOffset, runCount, runUnused, runValue, runXmin, runXmax } = r;
      let offsets: number[] | null = null;
      for (let i = start; i < start + count; i++) {
        if (runUnused[i] === 1 || !isVisible(clog, runXmin[i]!, runXmax[i]!)) continue;
        const first = runValue[i]!;
        const last = first + runCount[i]! - 1;
        const from = first > lo ? first : lo;
        const to = last < hi ? last : hi;
        if (from > to) continue;
        offsets ??= [];
        pushRange(offsets, runOffset[i]! + (from - first), to - from + 1);
      }
      if (offsets !== null) cb(b, offsets);
    }
  }

  /**
   * For each page with line pointers dead to everyone, those line pointers (PagePruneCallback).
   * HeapTupleSatisfiesVacuum's order: TransactionIdIsInProgress (`running`, the proc array)
   * before the CLOG. An xmin neither running nor committed "must have aborted or crashed": a
   * transaction killed by a crash left no commit or abort record, so its CLOG status stays in
   * progress for ever, but after crash recovery nothing runs it — its tuples are dead.
   */
  forEachPageToPrune(
    rel: RelFileNumber,
    clog: XactStatusReader,
    running: ReadonlySet<TransactionId>,
    cb: PagePruneCallback,
  ): void {
    const r = this.rel(rel);
    for (let b = 0; b < r.nblocks; b++) {
      const count = r.pageRunCount[b]!;
      if (count === 0) continue;
      const start = r.pageRunStart[b]!;
      const { runOffset, runCount, runUnused, runXmin, runXmax } = r;
      let offsets: number[] | null = null;
      let latestRemovedXid = 0;
      for (let i = start; i < start + count; i++) {
        if (runUnused[i] === 1) continue;
        const xmin = runXmin[i]!;
        const xminStatus = clog.statusCode(xmin);
        const xminAborted =
          xminStatus === XACT_ABORTED || (xminStatus === XACT_IN_PROGRESS && !running.has(xmin));
        const xmax = runXmax[i]!;
        const xmaxCommitted = xmax !== 0 && clog.statusCode(xmax) === XACT_COMMITTED;
        if (!xminAborted && !xmaxCommitted) continue;
        // HeapTupleHeaderAdvanceLatestRemovedXid: only a committed deleter of a live insert counts.
        if (xmaxCommitted && !xminAborted && xmax > latestRemovedXid) latestRemovedXid = xmax;
        offsets ??= [];
        pushRange(offsets, runOffset[i]!, runCount[i]!);
      }
      if (offsets !== null) cb(b, offsets, latestRemovedXid);
    }
  }

  /** Last page with a used line pointer + 1 (count_nondeletable_pages); 0 when all are empty. */
  nonEmptyPages(rel: RelFileNumber): number {
    const r = this.rel(rel);
    for (let b = r.nblocks - 1; b >= 0; b--) if (r.pageNitems[b]! > 0) return b + 1; // INV-HEAP-3
    return 0;
  }

  // ---- reads --------------------------------------------------------------------------------

  /** Visible tuples (what `SELECT count(*)` returns), summed over runs. */
  countVisible(rel: RelFileNumber, clog: XactStatusReader): number {
    const r = this.rel(rel);
    const { runCount, runUnused, runXmin, runXmax } = r;
    let total = 0;
    for (let b = 0; b < r.nblocks; b++) {
      const start = r.pageRunStart[b]!;
      const end = start + r.pageRunCount[b]!;
      for (let i = start; i < end; i++) {
        if (runUnused[i] === 0 && isVisible(clog, runXmin[i]!, runXmax[i]!)) total += runCount[i]!;
      }
    }
    return total;
  }

  /**
   * Hash of the visible tuples in physical order. Visible runs are first merged into maximal
   * segments (same block, consecutive offsets and values) regardless of xmin/xmax, and each
   * segment feeds (block, offset, firstValue, count): equal visible contents give equal digests
   * however the runs are split.
   */
  contentDigest(rel: RelFileNumber, clog: XactStatusReader): string {
    const r = this.rel(rel);
    const { runOffset, runCount, runUnused, runValue, runXmin, runXmax } = r;
    const hasher = new ContentHasher();
    let segBlock = -1,
      segOffset = 0,
      segValue = 0,
      segCount = 0;
    const flush = (): void => {
      if (segCount === 0) return;
      hasher.word(segBlock);
      hasher.word(segOffset);
      hasher.word(segValue);
      hasher.word(segCount);
    };
    for (let b = 0; b < r.nblocks; b++) {
      const start = r.pageRunStart[b]!;
      const end = start + r.pageRunCount[b]!;
      for (let i = start; i < end; i++) {
        if (runUnused[i] === 1 || !isVisible(clog, runXmin[i]!, runXmax[i]!)) continue;
        const off = runOffset[i]!;
        const value = runValue[i]!;
        const continues =
          segBlock === b && segOffset + segCount === off && segValue + segCount === value;
        if (segCount > 0 && continues) {
          segCount += runCount[i]!;
        } else {
          flush();
          segBlock = b;
          segOffset = off;
          segValue = value;
          segCount = runCount[i]!;
        }
      }
    }
    flush();
    return hasher.hex();
  }

  /** Up to `limit` visible values in physical order (for small tests). */
  visibleValues(rel: RelFileNumber, clog: XactStatusReader, limit = Infinity): number[] {
    const r = this.rel(rel);
    const out: number[] = [];
    for (let b = 0; b < r.nblocks && out.length < limit; b++) {
      const start = r.pageRunStart[b]!;
      const end = start + r.pageRunCount[b]!;
      for (let i = start; i < end && out.length < limit; i++) {
        if (r.runUnused[i] === 1 || !isVisible(clog, r.runXmin[i]!, r.runXmax[i]!)) continue;
        for (let j = 0; j < r.runCount[i]! && out.length < limit; j++) out.push(r.runValue[i]! + j);
      }
    }
    return out;
  }

  /** The page's runs as objects (tests, debugging, `rel` CLI). */
  pageRuns(rel: RelFileNumber, block: BlockNumber): HeapRunInfo[] {
    const r = this.rel(rel);
    this.assertBlock(r, rel, block);
    const out: HeapRunInfo[] = [];
    const start = r.pageRunStart[block]!;
    for (let i = start; i < start + r.pageRunCount[block]!; i++) {
      out.push({
        offset: r.runOffset[i]!,
        count: r.runCount[i]!,
        unused: r.runUnused[i] === 1,
        firstValue: r.runValue[i]!,
        xmin: r.runXmin[i]!,
        xmax: r.runXmax[i]!,
      });
    }
    return out;
  }

  /** Bytes of typed-array capacity held for one relation, or for all. */
  memoryBytes(rel?: RelFileNumber): number {
    if (rel !== undefined) return this.rel(rel).memoryBytes();
    let total = 0;
    for (const r of this.rels.values()) total += r.memoryBytes();
    return total;
  }

  /** Assert every INV-HEAP invariant of the relation (O(pages + runs)); returns the live runs. */
  checkInvariants(rel: RelFileNumber): number {
    return this.rel(rel).checkInvariants(`relation ${rel}`);
  }

  // ---- persistence --------------------------------------------------------------------------

  /** The relation's contents as bytes (heap-codec.ts). Compacts the slab first if needed. */
  serializeRelation(rel: RelFileNumber): Uint8Array {
    return serializeHeapRelation(this.rel(rel));
  }

  /** Create the relation from serializeRelation() bytes, replacing it if it exists. */
  deserializeRelation(rel: RelFileNumber, bytes: Uint8Array): void {
    if (!(Number.isInteger(rel) && rel > 0)) fail(`INV-HEAP-1: bad relfilenumber ${rel}`);
    this.rels.set(rel, deserializeHeapRelation(bytes, `relation ${rel}`));
  }

  /**
   * Pages ≥ `fromBlock` of `rel` become those of `older` (a serializeRelation() copy; pages it
   * lacks become new, empty pages): what a read finds in the file when the buffers holding the
   * newer versions were dropped and the file kept its pages (a failed truncation, planted bug).
   */
  restorePagesFrom(rel: RelFileNumber, fromBlock: number, older: Uint8Array | null): void {
    const r = this.changed(rel);
    const src =
      older === null ? new HeapRelation() : deserializeHeapRelation(older, `relation ${rel}`);
    for (let b = fromBlock; b < r.nblocks; b++) r.copyPage(b, src);
  }

  // ---- change tracking (incremental data images) ---------------------------------------------

  /** The relations changed since the last call (dropped ones included), and start a new set. */
  takeChanged(): Set<RelFileNumber> {
    const taken = this.changedRels;
    this.changedRels = new Set();
    return taken;
  }

  /** Put back relations whose image write failed, so the next image writes them. */
  markChanged(rels: Iterable<RelFileNumber>): void {
    for (const rel of rels) this.changedRels.add(rel);
  }

  /** How many relations changed since the last takeChanged(). */
  get changedCount(): number {
    return this.changedRels.size;
  }

  // ---- internals ----------------------------------------------------------------------------

  /** The relation, recorded as changed (every mutation goes through here). */
  private changed(rel: RelFileNumber): HeapRelation {
    const r = this.rel(rel);
    this.changedRels.add(rel);
    return r;
  }

  private rel(rel: RelFileNumber): HeapRelation {
    const r = this.rels.get(rel);
    if (!(r !== undefined)) fail(`INV-HEAP-1: relation ${rel} does not exist`);
    return r;
  }

  private assertBlock(r: HeapRelation, rel: number, block: number): void {
    if (!(Number.isInteger(block) && block >= 0 && block < r.nblocks)) {
      fail(`INV-HEAP-1: relation ${rel} block ${block}: block is not below nblocks ${r.nblocks}`);
    }
  }
}

/** xmin committed and xmax none or not committed. */
function isVisible(clog: XactStatusReader, xmin: number, xmax: number): boolean {
  if (clog.statusCode(xmin) !== XACT_COMMITTED) return false;
  return xmax === 0 || clog.statusCode(xmax) !== XACT_COMMITTED;
}
