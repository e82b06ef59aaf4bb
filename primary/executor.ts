/**
 * Executor for the write statements of walsim's SQL subset on a primary. Every change is made by
 * logging a WAL record and applying it through the same redo routine a standby uses
 * (`ExecutorContext.log`), so primary and standby cannot disagree about what a record means.
 *
 * Bulk statements log one heap page per record (HEAP2_MULTI_INSERT, HEAP_DELETE with offset
 * ranges, HEAP2_PRUNE), so WAL volume grows with pages, not rows. Each statement is one
 * transaction: it is validated before anything is logged, so a refused statement logs nothing.
 */
import { WalsimError } from '../common/errors.ts';
import {
  TOAST_NAMESPACE,
  toastIndexName,
  toastTableName,
  type Catalog,
} from '../storage/catalog.ts';
import type { DeletePredicate, Statement } from '../sql/ast.ts';
import {
  MAIN_FORKNUM,
  SMGR_TRUNCATE_ALL,
  TUPLES_PER_PAGE,
  type RelFileNumber,
  type TransactionId,
  type WalRecordBody,
} from '../wal/records.ts';
import type { Lsn } from '../wal/lsn.ts';
import type { QueryResult } from '../protocol/messages.ts';
import { shouldAttemptTruncation } from '../storage/vacuum-truncation.ts';
import type { NodeStorage } from '../storage/node-storage.ts';

/** What the executor reads to plan a statement (the heap store's planning API). */
export interface HeapPlanner {
  nblocks(rel: RelFileNumber): number;
  /** Line pointers in use on `block` (new tuples go at nitems + 1). */
  nitems(rel: RelFileNumber, block: number): number;
  /** Calls `cb` per page with visible tuples matching `pred`, offsets as [first, count, ...] ranges. */
  forEachPageToDelete(
    rel: RelFileNumber,
    pred: DeletePredicate,
    cb: (block: number, offsets: number[]) => void,
  ): void;
  /**
   * Calls `cb` per page with line pointers dead to everyone (deleted by a committed transaction,
   * or inserted by an aborted or crash-killed one), and the newest xmax among them.
   */
  forEachPageToPrune(
    rel: RelFileNumber,
    cb: (block: number, offsets: number[], latestRemovedXid: TransactionId) => void,
  ): void;
  /** Last page with a used line pointer + 1 (count_nondeletable_pages). */
  nonEmptyPages(rel: RelFileNumber): number;
}

export interface ExecutorContext {
  catalog: Catalog;
  heap: HeapPlanner;
  /** Insert a record into WAL and apply it locally. Returns the record's end LSN. */
  log(body: WalRecordBody, xid: TransactionId): Lsn;
  /** Log the commit record and wait as synchronous_commit requires (flush always when rels drop). */
  commit(xid: TransactionId, droppedRels: RelFileNumber[]): Promise<void>;
  checkpoint(): Promise<void>;
  /** Give the event loop a turn during long statements (control and walsender stay responsive). */
  yieldNow(): Promise<void>;
}

/**
 * No transaction that touched the table is running while a statement plans: write statements run
 * one at a time under the node's write lock, each allocates its xid after planning, and a
 * statement starts only after every commit still waiting (outside the lock) on one of its tables
 * was acknowledged (PrimaryRole.runWrite). So every xid of the table's tuples whose CLOG status
 * is still "in progress" belongs to a transaction that ended without a commit record (killed by a
 * crash, or a statement that failed before committing) — for VACUUM an aborted one
 * (HeapTupleSatisfiesVacuum).
 */
const NO_RUNNING_XIDS: ReadonlySet<TransactionId> = new Set();

/** The planner over a node's storage (heap contents judged against its CLOG). */
export function heapPlannerOf(st: Pick<NodeStorage, 'heap' | 'clog'>): HeapPlanner {
  return {
    nblocks: (rel) => st.heap.nblocks(rel),
    nitems: (rel, block) => st.heap.nitems(rel, block),
    forEachPageToDelete: (rel, pred, cb) => st.heap.forEachPageToDelete(rel, pred, st.clog, cb),
    forEachPageToPrune: (rel, cb) => st.heap.forEachPageToPrune(rel, st.clog, NO_RUNNING_XIDS, cb),
    nonEmptyPages: (rel) => st.heap.nonEmptyPages(rel),
  };
}

/** Pages between event-loop turns in bulk statements. */
const PAGES_PER_SLICE = 4096;

function undefinedTable(name: string): WalsimError {
  return new WalsimError('undefined_table', `relation "${name}" does not exist`, '42P01');
}

function relOf(ctx: ExecutorContext, name: string): RelFileNumber {
  const rel = ctx.catalog.lookup(name);
  if (rel === undefined) throw undefinedTable(name);
  return rel;
}

function done(command: string): QueryResult {
  return { command, columns: [], rows: [] };
}

export async function executeWrite(ctx: ExecutorContext, stmt: Statement): Promise<QueryResult> {
  switch (stmt.type) {
    case 'create_table':
      return createTable(ctx, stmt.name, stmt.toastColumn !== null);
    case 'drop_table':
      return dropTables(ctx, stmt.names, stmt.ifExists);
    case 'insert_series': {
      const rel = relOf(ctx, stmt.name);
      const n = stmt.to >= stmt.from ? stmt.to - stmt.from + 1 : 0;
      return insertRuns(ctx, rel, [stmt.from, n]);
    }
    case 'insert_values': {
      const rel = relOf(ctx, stmt.name);
      return insertRuns(ctx, rel, valuesToRuns(stmt.values));
    }
    case 'delete':
      return deleteRows(ctx, relOf(ctx, stmt.name), stmt.predicate);
    case 'vacuum': {
      const targets =
        stmt.name === null
          ? ctx.catalog.tables()
          : [[stmt.name, relOf(ctx, stmt.name)] as [string, number]];
      for (const [, rel] of targets) await vacuumRel(ctx, rel);
      return done('VACUUM');
    }
    case 'truncate':
      return truncateTables(ctx, stmt.names);
    case 'checkpoint':
      await ctx.checkpoint();
      return done('CHECKPOINT');
    default:
      throw new WalsimError('invalid_input', `statement ${stmt.type} is not a write`);
  }
}

async function createTable(
  ctx: ExecutorContext,
  name: string,
  toastable: boolean,
): Promise<QueryResult> {
  if (ctx.catalog.lookup(name) !== undefined) {
    throw new WalsimError('duplicate_table', `relation "${name}" already exists`, '42P07');
  }
  if (name.startsWith(TOAST_NAMESPACE)) {
    throw new WalsimError(
      'invalid_input',
      `permission denied to create "${name}": the pg_toast schema is reserved`,
      '42501',
    );
  }
  const xid = ctx.catalog.allocateXid();
  const rel = ctx.catalog.allocateRelFileNumber();
  ctx.log({ kind: 'SMGR_CREATE', rel, fork: MAIN_FORKNUM }, xid);
  ctx.log({ kind: 'CATALOG_UPDATE', relname: name, rel }, xid);
  if (toastable) createToastRelations(ctx, name, xid);
  await ctx.commit(xid, []);
  return done('CREATE TABLE');
}

/**
 * create_toast_table: a TOAST heap (created, empty: walsim never writes it) and its btree index,
 * whose build writes the metapage with log_newpage (XLOG_FPI). So on a standby replay sizes the
 * index but never the TOAST heap — the fork that makes PostgreSQL 14's drop full-scan.
 * Returns the two new relfilenumbers.
 */
/**
 * New TOAST heap and index relfilenodes for `table`. `locked`: TRUNCATE's case — PostgreSQL opens
 * the old TOAST heap with AccessExclusiveLock (ExecuteTruncateGuts) and reindex_relation locks its
 * index the same way, and every AccessExclusiveLock on a relation is logged for standbys: three
 * Standby/LOCK records per TOAST-able table (pg_waldump of a real TRUNCATE), not one.
 */
function createToastRelations(
  ctx: ExecutorContext,
  table: string,
  xid: TransactionId,
  locked?: { toast: RelFileNumber; index: RelFileNumber },
): RelFileNumber[] {
  if (locked) ctx.log({ kind: 'STANDBY_LOCK', rel: locked.toast }, xid);
  const toast = ctx.catalog.allocateRelFileNumber();
  ctx.log({ kind: 'SMGR_CREATE', rel: toast, fork: MAIN_FORKNUM }, xid);
  ctx.log({ kind: 'CATALOG_UPDATE', relname: toastTableName(table), rel: toast }, xid);
  if (locked) ctx.log({ kind: 'STANDBY_LOCK', rel: locked.index }, xid);
  const index = ctx.catalog.allocateRelFileNumber();
  ctx.log({ kind: 'SMGR_CREATE', rel: index, fork: MAIN_FORKNUM }, xid);
  ctx.log({ kind: 'FPI', rel: index, fork: MAIN_FORKNUM, block: 0 }, xid);
  ctx.log({ kind: 'CATALOG_UPDATE', relname: toastIndexName(table), rel: index }, xid);
  return [toast, index];
}

/**
 * DROP TABLE a, b, …: one transaction, one commit record whose dropped relfilenumbers are every
 * table's (and its TOAST table's and index's), so replay drops them all at once
 * (smgrdounlinkall: DropRelationsAllBuffers over the whole set). Every name is checked before
 * anything is logged: a missing one without IF EXISTS drops nothing (PostgreSQL's error).
 */
async function dropTables(
  ctx: ExecutorContext,
  names: string[],
  ifExists: boolean,
): Promise<QueryResult> {
  names = [...new Set(names)];
  const rels = names.map((name) => {
    const rel = ctx.catalog.lookup(name);
    if (rel === undefined && !ifExists) throw undefinedTable(name);
    return rel;
  });
  const present = names.filter((_, i) => rels[i] !== undefined);
  if (present.length === 0) return done('DROP TABLE');
  const xid = ctx.catalog.allocateXid();
  const dropped: RelFileNumber[] = [];
  for (const name of present) {
    const rel = ctx.catalog.lookup(name)!;
    const toast = ctx.catalog.toastOf(name);
    ctx.log({ kind: 'STANDBY_LOCK', rel }, xid);
    ctx.log({ kind: 'CATALOG_UPDATE', relname: name, rel: 0 }, xid);
    dropped.push(rel);
    if (toast) {
      ctx.log({ kind: 'CATALOG_UPDATE', relname: toastTableName(name), rel: 0 }, xid);
      ctx.log({ kind: 'CATALOG_UPDATE', relname: toastIndexName(name), rel: 0 }, xid);
      dropped.push(toast.toast, toast.index);
    }
  }
  await ctx.commit(xid, dropped);
  return done('DROP TABLE');
}

/** VALUES lists as runs of consecutive integers. */
export function valuesToRuns(values: number[]): number[] {
  const runs: number[] = [];
  for (const v of values) {
    const n = runs.length;
    if (n > 0 && runs[n - 2]! + runs[n - 1]! === v) runs[n - 1]!++;
    else runs.push(v, 1);
  }
  return runs;
}

/** Take up to `max` tuples from the front of `runs` (mutated), returning them as runs. */
function takeTuples(runs: number[], cursor: { i: number }, max: number): number[] {
  const out: number[] = [];
  let left = max;
  while (left > 0 && cursor.i < runs.length) {
    const first = runs[cursor.i]!;
    const count = runs[cursor.i + 1]!;
    const take = Math.min(count, left);
    out.push(first, take);
    left -= take;
    if (take === count) cursor.i += 2;
    else {
      runs[cursor.i] = first + take;
      runs[cursor.i + 1] = count - take;
    }
  }
  return out;
}

async function insertRuns(
  ctx: ExecutorContext,
  rel: RelFileNumber,
  runsIn: number[],
): Promise<QueryResult> {
  const runs = runsIn.slice();
  let total = 0;
  for (let i = 1; i < runs.length; i += 2) total += runs[i]!;
  const xid = ctx.catalog.allocateXid();
  let block = ctx.heap.nblocks(rel) - 1;
  let nitems = block >= 0 ? ctx.heap.nitems(rel, block) : TUPLES_PER_PAGE;
  const cursor = { i: 0 };
  let pages = 0;
  let inserted = 0;
  while (inserted < total) {
    let initPage = false;
    if (nitems >= TUPLES_PER_PAGE) {
      block++;
      nitems = 0;
      initPage = true;
    }
    const pageRuns = takeTuples(runs, cursor, TUPLES_PER_PAGE - nitems);
    let count = 0;
    for (let i = 1; i < pageRuns.length; i += 2) count += pageRuns[i]!;
    if (count === 1) {
      ctx.log(
        { kind: 'HEAP_INSERT', rel, block, offset: nitems + 1, value: pageRuns[0]!, initPage },
        xid,
      );
    } else {
      ctx.log(
        {
          kind: 'HEAP2_MULTI_INSERT',
          rel,
          block,
          firstOffset: nitems + 1,
          runs: pageRuns,
          initPage,
        },
        xid,
      );
    }
    nitems += count;
    inserted += count;
    if (++pages % PAGES_PER_SLICE === 0) await ctx.yieldNow();
  }
  await ctx.commit(xid, []);
  return done(`INSERT 0 ${total}`);
}

/** Per-page work collected before logging, in flat arrays (no object per page). */
class PageWorkList {
  blocks: number[] = [];
  offsetStart: number[] = [];
  offsets: number[] = [];
  extra: number[] = [];
  add(block: number, offsets: number[], extra = 0): void {
    this.blocks.push(block);
    this.offsetStart.push(this.offsets.length);
    for (const o of offsets) this.offsets.push(o);
    this.extra.push(extra);
  }
  offsetsOf(i: number): number[] {
    const end = i + 1 < this.blocks.length ? this.offsetStart[i + 1]! : this.offsets.length;
    return this.offsets.slice(this.offsetStart[i]!, end);
  }
}

function tupleCount(ranges: number[]): number {
  let n = 0;
  for (let i = 1; i < ranges.length; i += 2) n += ranges[i]!;
  return n;
}

async function deleteRows(
  ctx: ExecutorContext,
  rel: RelFileNumber,
  pred: DeletePredicate,
): Promise<QueryResult> {
  const work = new PageWorkList();
  ctx.heap.forEachPageToDelete(rel, pred, (block, offsets) => work.add(block, offsets));
  const xid = ctx.catalog.allocateXid();
  let deleted = 0;
  for (let i = 0; i < work.blocks.length; i++) {
    const offsets = work.offsetsOf(i);
    deleted += tupleCount(offsets);
    ctx.log({ kind: 'HEAP_DELETE', rel, block: work.blocks[i]!, offsets }, xid);
    if ((i + 1) % PAGES_PER_SLICE === 0) await ctx.yieldNow();
  }
  await ctx.commit(xid, []);
  return done(`DELETE ${deleted}`);
}

async function vacuumRel(ctx: ExecutorContext, rel: RelFileNumber): Promise<void> {
  const work = new PageWorkList();
  ctx.heap.forEachPageToPrune(rel, (block, offsets, latestRemovedXid) =>
    work.add(block, offsets, latestRemovedXid),
  );
  const xid = ctx.catalog.allocateXid();
  for (let i = 0; i < work.blocks.length; i++) {
    const block = work.blocks[i]!;
    ctx.log(
      {
        kind: 'HEAP2_PRUNE',
        rel,
        block,
        latestRemovedXid: work.extra[i]!,
        offsets: work.offsetsOf(i),
      },
      xid,
    );
    // The page has no dead tuples left: vacuum sets its visibility-map bit (XLOG_HEAP2_VISIBLE).
    ctx.log({ kind: 'HEAP2_VISIBLE', rel, block }, xid);
    if ((i + 1) % PAGES_PER_SLICE === 0) await ctx.yieldNow();
  }
  const relPages = ctx.heap.nblocks(rel);
  const nonEmpty = ctx.heap.nonEmptyPages(rel);
  if (shouldAttemptTruncation(relPages, nonEmpty)) {
    // lazy_truncate_heap: AccessExclusiveLock (logged for standbys), then RelationTruncate.
    ctx.log({ kind: 'STANDBY_LOCK', rel }, xid);
    ctx.log({ kind: 'SMGR_TRUNCATE', rel, blkno: nonEmpty, flags: SMGR_TRUNCATE_ALL }, xid);
  }
  await ctx.commit(xid, []);
}

async function truncateTables(ctx: ExecutorContext, names: string[]): Promise<QueryResult> {
  names = [...new Set(names)];
  const olds = names.map((n) => relOf(ctx, n)); // validate every name before logging anything
  const xid = ctx.catalog.allocateXid();
  const dropped: RelFileNumber[] = [];
  names.forEach((name, i) => {
    const old = olds[i]!;
    const toast = ctx.catalog.toastOf(name);
    ctx.log({ kind: 'STANDBY_LOCK', rel: old }, xid);
    const rel = ctx.catalog.allocateRelFileNumber();
    ctx.log({ kind: 'SMGR_CREATE', rel, fork: MAIN_FORKNUM }, xid);
    ctx.log({ kind: 'CATALOG_UPDATE', relname: name, rel }, xid);
    dropped.push(old);
    // A TOAST-able table gets new TOAST relfilenodes too: three relfilenodes dropped per table.
    if (toast) {
      createToastRelations(ctx, name, xid, toast);
      dropped.push(toast.toast, toast.index);
    }
  });
  await ctx.commit(xid, [...new Set(dropped)]);
  return done('TRUNCATE TABLE');
}
