/**
 * Redo: apply one WAL record to a node's storage. The single implementation of what each record
 * means, called by a standby's startup process during replay, by crash recovery, and by the
 * primary's executor right after logging (the primary "replays" its own records). The only
 * difference between the callers is `smgr.inRecovery`, which decides whether cached relation sizes
 * may be trusted and therefore whether the optimized drop path can be taken.
 *
 * Block access follows XLogReadBufferExtended: create the fork if missing, ask smgrnblocks (which
 * caches the size), extend up to the referenced block, read it into a buffer and dirty it.
 */
import { assert, fail } from '../common/assert.ts';
import { injectedBugs } from '../common/injected-bugs.ts';
import {
  FSM_FORKNUM,
  MAIN_FORKNUM,
  SMGR_TRUNCATE_FSM,
  SMGR_TRUNCATE_HEAP,
  SMGR_TRUNCATE_VM,
  TUPLES_PER_PAGE,
  VISIBILITYMAP_FORKNUM,
  type ForkNumber,
  type RelFileNumber,
  type TransactionId,
  type WalRecordBody,
} from '../wal/records.ts';
import type { NodeStorage } from './node-storage.ts';
import { runSteps, timedSteps, type DropResult } from './drop.ts';
import { smgrcreate, smgrdounlinkallSteps, smgrtruncateSteps } from './smgr.ts';
import { runTuples, type ReplayedRecord } from './replay-counts.ts';
import { smgrnblocksAsksFile } from './pg-drop-rules.ts';

/** Heap pages per visibility-map page: 2 bits per heap page in 8168 usable bytes (visibilitymap.c). */
export const HEAPBLOCKS_PER_VM_PAGE = (8192 - 24) * 4;
/** Leaf slots per FSM page (fsm_internals.h LeafNodesPerPage, 8 kB pages). */
export const SLOTS_PER_FSM_PAGE = 4069;
/**
 * A page left with less than BLCKSZ / 5 free is reported to the FSM during redo (heap_xlog_insert,
 * heap_xlog_multi_insert): with `c int` rows (a 28-byte tuple, 32 MAXALIGNed, and a 4-byte line
 * pointer), PageGetHeapFreeSpace after `n` tuples is 8168 − 36 n − 4, below 8192 / 5 = 1638 from
 * n = 182 on: the last 45 of a page's 226 tuples.
 */
export const FSM_REPORT_NITEMS = Math.floor((8192 - 24 - 4 - Math.floor(8192 / 5)) / 36) + 1;
assert(FSM_REPORT_NITEMS === 182 && FSM_REPORT_NITEMS <= TUPLES_PER_PAGE, 'FSM report threshold');

/**
 * FSM fork blocks covering `heapBlocks` heap pages: root, one level-1 page and the leaves. (A
 * simplification of fsm_logical_to_physical, exact up to 4069² heap pages.) With 0 heap pages
 * the upper levels remain, as FreeSpaceMapPrepareTruncateRel keeps them.
 */
export function fsmBlocksFor(heapBlocks: number): number {
  return 2 + Math.ceil(heapBlocks / SLOTS_PER_FSM_PAGE);
}

export function vmBlocksFor(heapBlocks: number): number {
  return Math.ceil(heapBlocks / HEAPBLOCKS_PER_VM_PAGE);
}

/**
 * XLogReadBufferExtended + MarkBufferDirty + release. `reads`: how many PostgreSQL records this
 * read stands for (walsim's PRUNE is PRUNE + VACUUM, its multi-insert one HEAP_INSERT a row):
 * each of them asks smgrnblocks, which under 13's rules is an lseek every time (pg-drop-rules.ts
 * rule 8) and under 14+ the size cached by the first.
 */
function touchBlockForRedo(
  st: NodeStorage,
  rel: RelFileNumber,
  fork: ForkNumber,
  block: number,
  reads = 1,
): void {
  const { smgr, pool } = st;
  const rules = st.dropSettings.rules;
  if (!smgr.exists(rel, fork)) smgr.create(rel, fork);
  let n = smgr.nblocks(rel, fork, rules);
  while (n <= block) smgr.extend(rel, fork, n++);
  // In recovery the first call cached the size: under 14+ the other reads are cache hits with no
  // effect, so they are asked only where each one goes to the file (13's rules, or no recovery).
  if (reads > 1 && smgrnblocksAsksFile(rules, smgr.inRecovery)) {
    smgr.nblocksRepeated(rel, fork, rules, reads - 1);
  }
  const id = pool.readBuffer(rel, fork, block);
  pool.markDirty(id);
  pool.releaseBuffer(id);
}

/**
 * XLogRecordPageWithFreeSpace: touch the FSM leaf page covering `heapBlock`. `updates` is how many
 * PostgreSQL records would call it here (walsim's PRUNE stands for PRUNE + VACUUM, its
 * multi-insert for one HEAP_INSERT a row): counted in recovery for the cost model.
 */
function recordFreeSpace(
  st: NodeStorage,
  rel: RelFileNumber,
  heapBlock: number,
  updates: number,
): void {
  const leaf = fsmBlocksFor(heapBlock + 1) - 1;
  touchBlockForRedo(st, rel, FSM_FORKNUM, leaf, updates);
  if (st.smgr.inRecovery) st.replayCounters.fsmUpdates += updates;
}

function ensureHeapPage(st: NodeStorage, rel: RelFileNumber, block: number): void {
  if (!st.heap.hasRelation(rel)) st.heap.createRelation(rel);
  if (st.heap.nblocks(rel) <= block) st.heap.extendTo(rel, block + 1);
}

/** Apply a record at once (the primary's executor, crash recovery). */
export function redo(st: NodeStorage, body: WalRecordBody, xid: TransactionId): void {
  const steps = redoSteps(st, body, xid);
  if (steps !== NO_STEPS) runSteps(steps);
}

/**
 * The steps of a record applied at once: a generator that has already finished, so `next()` says
 * done. Records without a drop (all but truncations and commits/aborts that drop relations) return
 * it instead of a generator of their own: replay allocates no generator per heap record.
 */
const NO_STEPS: Generator<void, void, void> = (function* () {})();
NO_STEPS.next();

/**
 * Replay one record of WAL (standby replay, crash recovery): count it for the cost model
 * (storage/replay-counts.ts), then apply it in steps. The one replay entry point, so replay
 * in a server and replay in-process (the sweeps' model-only mode) count the same. The record is
 * counted, and a record without a drop applied, when this is called; the steps (if any) run as
 * the caller iterates them.
 */
export function replayRecordSteps(
  st: NodeStorage,
  rec: ReplayedRecord,
): Generator<void, void, void> {
  st.replayCounters.observe(rec);
  return redoSteps(st, rec.body, rec.header.xid);
}

/**
 * Apply a record in steps: buffer drops yield between chunks of their scan or probes, so a caller
 * can serve other requests during a long drop. The record is applied completely before the
 * returned generator finishes; nothing else may change this node's storage in between. A record
 * that drops nothing is applied before this returns (the steps are then NO_STEPS).
 */
export function redoSteps(
  st: NodeStorage,
  body: WalRecordBody,
  xid: TransactionId,
): Generator<void, void, void> {
  if (xid !== 0) st.catalog.observeXid(xid);
  switch (body.kind) {
    case 'SMGR_TRUNCATE':
      return redoTruncate(st, body.rel, body.blkno, body.flags);
    case 'XACT_COMMIT':
    case 'XACT_ABORT':
      if (body.kind === 'XACT_COMMIT') st.clog.setCommitted(xid);
      else st.clog.setAborted(xid);
      if (body.droppedRels.length === 0) return NO_STEPS;
      // xact_redo_commit/abort: XLogFlush(lsn) before the files go; in recovery that rewrites
      // pg_control's minRecoveryPoint (counted for the cost model).
      if (st.smgr.inRecovery) st.replayCounters.minRecoveryPointUpdates++;
      return dropRelations(st, body.droppedRels);
    default:
      redoAtOnce(st, body, xid);
      return NO_STEPS;
  }
}

/** heap_xlog_multi_insert: the rows into one page, then the free-space reports. */
function redoMultiInsert(
  st: NodeStorage,
  body: Extract<WalRecordBody, { kind: 'HEAP2_MULTI_INSERT' }>,
  xid: TransactionId,
): void {
  touchBlockForRedo(st, body.rel, MAIN_FORKNUM, body.block, runTuples(body.runs));
  ensureHeapPage(st, body.rel, body.block);
  st.heap.applyMultiInsert(body.rel, body.block, body.firstOffset, body.runs, xid, body.initPage);
  // One HEAP_INSERT a row in PostgreSQL: each row at offset ≥ FSM_REPORT_NITEMS reports.
  const last = st.heap.nitems(body.rel, body.block);
  if (last >= FSM_REPORT_NITEMS)
    recordFreeSpace(
      st,
      body.rel,
      body.block,
      last - Math.max(body.firstOffset, FSM_REPORT_NITEMS) + 1,
    );
}

/** The records that drop no buffers: applied in one go. */
function redoAtOnce(st: NodeStorage, body: WalRecordBody, xid: TransactionId): void {
  switch (body.kind) {
    case 'SMGR_CREATE':
      smgrcreate(st.smgr, body.rel, body.fork, st.dropSettings);
      if (body.fork === MAIN_FORKNUM && !st.heap.hasRelation(body.rel))
        st.heap.createRelation(body.rel);
      return;
    case 'CATALOG_UPDATE':
      st.catalog.set(body.relname, body.rel);
      return;
    case 'HEAP_INSERT':
      touchBlockForRedo(st, body.rel, MAIN_FORKNUM, body.block);
      ensureHeapPage(st, body.rel, body.block);
      st.heap.applyInsert(body.rel, body.block, body.offset, body.value, xid, body.initPage);
      if (body.offset >= FSM_REPORT_NITEMS) recordFreeSpace(st, body.rel, body.block, 1);
      return;
    case 'HEAP2_MULTI_INSERT':
      redoMultiInsert(st, body, xid);
      return;
    case 'HEAP_DELETE':
      // One HEAP_DELETE a row in PostgreSQL, each reading the page.
      touchBlockForRedo(st, body.rel, MAIN_FORKNUM, body.block, runTuples(body.offsets));
      st.heap.applyDelete(body.rel, body.block, body.offsets, xid);
      return;
    case 'HEAP2_PRUNE':
      // PRUNE and VACUUM each read the heap page.
      touchBlockForRedo(st, body.rel, MAIN_FORKNUM, body.block, 2);
      st.heap.applyPrune(body.rel, body.block, body.offsets);
      // heap_xlog_prune and heap_xlog_vacuum each report the page's free space.
      recordFreeSpace(st, body.rel, body.block, 2);
      return;
    case 'HEAP2_VISIBLE':
      // heap_xlog_visible: the heap page (its second block reference), whose free space it
      // records in the FSM (the record sets a bit), then the visibility-map page.
      touchBlockForRedo(st, body.rel, MAIN_FORKNUM, body.block);
      recordFreeSpace(st, body.rel, body.block, 1);
      touchBlockForRedo(
        st,
        body.rel,
        VISIBILITYMAP_FORKNUM,
        Math.floor(body.block / HEAPBLOCKS_PER_VM_PAGE),
      );
      return;
    case 'FPI':
      // xlog_redo's XLOG_FPI: restore the page image (reads the block, so replay sizes the fork).
      touchBlockForRedo(st, body.rel, body.fork, body.block);
      return;
    case 'STANDBY_LOCK':
    case 'NOOP':
    case 'CHECKPOINT_ONLINE':
    case 'CHECKPOINT_SHUTDOWN':
    case 'END_OF_RECOVERY':
      return; // no storage effect; checkpoints are handled by the node (restartpoints)
    case 'SMGR_TRUNCATE':
    case 'XACT_COMMIT':
    case 'XACT_ABORT':
      fail(`INV-REDO-1: ${body.kind} is applied in steps`);
    default: {
      const never: never = body;
      fail(`INV-REDO-1: no redo routine for ${(never as { kind: string }).kind}`);
    }
  }
}

/** smgr_redo for XLOG_SMGR_TRUNCATE (on a primary: RelationTruncate's smgr part). */
function* redoTruncate(
  st: NodeStorage,
  rel: RelFileNumber,
  blkno: number,
  flags: number,
): Generator<void, void, void> {
  const { smgr } = st;
  const rules = st.dropSettings.rules;
  // In case a later record drops the relation, replay goes on best-effort: make sure MAIN exists.
  if (!smgr.exists(rel, MAIN_FORKNUM)) smgr.create(rel, MAIN_FORKNUM);
  // smgr_redo: XLogFlush(lsn) before truncating; in recovery it rewrites pg_control's minRecoveryPoint.
  if (smgr.inRecovery) st.replayCounters.minRecoveryPointUpdates++;
  if (!smgr.inRecovery) smgr.resetCachedSizes(rel); // RelationTruncate resets them on a primary
  const forks: ForkNumber[] = [];
  const nblocks: number[] = [];
  if (flags & SMGR_TRUNCATE_HEAP) {
    forks.push(MAIN_FORKNUM);
    nblocks.push(blkno);
  }
  if (flags & SMGR_TRUNCATE_FSM && smgr.exists(rel, FSM_FORKNUM)) {
    const newFsm = fsmBlocksFor(blkno);
    if (newFsm < smgr.nblocks(rel, FSM_FORKNUM, rules)) {
      forks.push(FSM_FORKNUM);
      nblocks.push(newFsm);
    }
  }
  if (flags & SMGR_TRUNCATE_VM && smgr.exists(rel, VISIBILITYMAP_FORKNUM)) {
    const newVm = vmBlocksFor(blkno);
    if (newVm < smgr.nblocks(rel, VISIBILITYMAP_FORKNUM, rules)) {
      forks.push(VISIBILITYMAP_FORKNUM);
      nblocks.push(newVm);
    }
  }
  // The January 2025 minors (and a node following one: DropSettings.rules) ask smgrnblocks of
  // every fork they truncate before smgrtruncate2, so in recovery each size is cached at the drop.
  if (rules?.truncateCachesSizes && smgr.inRecovery)
    for (const f of forks) smgr.nblocks(rel, f, rules);
  if (forks.length > 0) {
    st.beforeDrop?.({ op: 'truncate', rel, forks, nblocks });
    yield* recordedDrop(st, smgrtruncateSteps(st.pool, smgr, rel, forks, nblocks, st.dropSettings));
  }
  if (injectedBugs.replayTruncateKeepsHeapPages && smgr.inRecovery) return;
  if (st.heap.hasRelation(rel) && st.heap.nblocks(rel) > blkno) st.heap.truncate(rel, blkno);
}

/** DropRelationFiles: drop buffers of all forks (smgrdounlinkall), then the files and contents. */
function* dropRelations(st: NodeStorage, rels: RelFileNumber[]): Generator<void, void, void> {
  st.beforeDrop?.({ op: 'unlink', rels });
  yield* recordedDrop(st, smgrdounlinkallSteps(st.pool, st.smgr, rels, st.dropSettings));
  for (const rel of rels) if (st.heap.hasRelation(rel)) st.heap.dropRelation(rel);
}

/** Run a drop in steps and add it, with the time spent inside its steps, to the node's counters. */
function* recordedDrop(
  st: NodeStorage,
  steps: Generator<void, DropResult, void>,
): Generator<void, void, void> {
  const t = { ms: 0 };
  st.recordDrop(yield* timedSteps(steps, t), t.ms);
}
