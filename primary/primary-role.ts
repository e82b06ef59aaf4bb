/**
 * The primary role of a node: write statements (the executor) one at a time under the node's
 * write lock, WAL-before-data for every change, commits with their synchronous_commit flush and
 * synchronous-replication wait, the WAL writer's background flush, checkpoints, and a primary's
 * fast/smart shutdown. The lifecycle machine creates it when the node enters `primary` (at start,
 * or when promotion opens the node for writes); it lives until the process ends.
 *
 * What it is given, not what it owns: the node's storage, WAL writer, clock and disk, the
 * walsender set and synchronous-replication queue (walsenders outlive promotion: a cascaded
 * standby keeps its connection), the checkpointer's timers and WAL removal, and the control file.
 *
 * Entry points: `PrimaryRole` (`start`, `runWrite`, `flushWal`, `checkpoint`, `requestedCheckpoint`,
 * `shutdown`, `status`, `walSinceLastCheckpoint`).
 */
import { assert, fail } from '../common/assert.ts';
import type { Clock, TimerHandle } from '../common/clock.ts';
import type { Disk } from '../common/disk.ts';
import { WalsimError } from '../common/errors.ts';
import type { Mutex } from '../common/mutex.ts';
import type { Notice, QueryResult, SynchronousCommit } from '../protocol/messages.ts';
import type { Statement } from '../sql/ast.ts';
import type { ControlFile } from '../wal/control-file.ts';
import { formatLsn, type Lsn, type TimeLineId } from '../wal/lsn.ts';
import {
  FSM_FORKNUM,
  VISIBILITYMAP_FORKNUM,
  type RelFileNumber,
  type TransactionId,
  type WalRecordBody,
} from '../wal/records.ts';
import { walIoOrPanic, type WalWriter } from '../wal/wal-writer.ts';
import type { NodeStorage } from '../storage/node-storage.ts';
import { redo } from '../storage/redo.ts';
import { InjectedDropFault } from '../storage/smgr.ts';
import { injectedBugs } from '../common/injected-bugs.ts';
import { executeWrite, heapPlannerOf, type ExecutorContext } from './executor.ts';
import { primaryStatusOf, type PrimaryStatus } from './primary-status.ts';
import { waitModeFor, type SyncRepQueue } from './syncrep.ts';
import type { WalSenderSet } from './walsender-set.ts';

/** The checkpointer's duties a primary drives: checkpoint_timeout, max_wal_size, WAL removal. */
export interface PrimaryCheckpointer {
  start(): void;
  stop(): void;
  walFlushed(flushLsn: Lsn): void;
}

export interface PrimaryRoleDeps {
  dataDir: string;
  clock: Clock;
  disk: Disk;
  storage: NodeStorage;
  wal: WalWriter;
  /** The node's write lock: write statements, checkpoints and base backups take turns. */
  writeLock: Mutex;
  syncRep: SyncRepQueue;
  walsenders: WalSenderSet;
  checkpointer: PrimaryCheckpointer;
  synchronousCommit(): SynchronousCommit;
  timeline(): TimeLineId;
  /** Merge `patch` into pg_control and write it durably. */
  updateControl(patch: Partial<ControlFile>): void;
  /** RemoveOldXlogFiles after a checkpoint with this REDO point, WAL ending at `endLsn`. */
  removeOldWal(redoLsn: Lsn, endLsn: Lsn): void;
  /** The `redo_fail` fault: throws (once, when armed) where the record ending at `at` is applied. */
  injectedRedoFailure(at: Lsn): void;
  /** A commit was acknowledged to its client (the simulator's ledger looks at this instant). */
  commitAcknowledged(endLsn: Lsn): void;
  /** A shutdown has begun: no write statement starts any more. */
  shuttingDown(): boolean;
  log(message: string): void;
  /** The process cannot go on (production: log FATAL and exit at once; the next start is crash recovery). */
  fatal(error: unknown): void;
}

/** The write statement being run: its commits, their WARNINGs, its cancel signal. */
interface StatementState {
  notices: Notice[];
  signal: AbortSignal | undefined;
  /** Its transactions, in commit order (a cancel ends their waits). */
  xids: TransactionId[];
  /** One transaction: its commit's flush and wait run after the write lock is released. */
  deferLastCommit: boolean;
  /** That commit's flush and wait, awaited by runWrite outside the lock. */
  pending: Promise<void> | null;
}

/** A commit waiting outside the write lock; `tables` null: its statement touched every table. */
interface WaitingCommit {
  tables: ReadonlySet<string> | null;
  done: Promise<void>;
}

/** Statements that run exactly one transaction (their commit is their last step). */
function isSingleTransaction(stmt: Statement): boolean {
  if (stmt.type === 'vacuum') return stmt.name !== null;
  return stmt.type !== 'checkpoint';
}

/** The tables a write statement touches (null: every table), named as the parser gives them (the catalog's keys). */
function touchedTables(stmt: Statement): ReadonlySet<string> | null {
  switch (stmt.type) {
    case 'create_table':
    case 'insert_series':
    case 'insert_values':
    case 'delete':
      return new Set([stmt.name]);
    case 'vacuum':
      return stmt.name === null ? null : new Set([stmt.name]);
    case 'truncate':
    case 'drop_table':
      return new Set(stmt.names);
    case 'checkpoint':
      return new Set();
    default:
      return null;
  }
}

export class PrimaryRole {
  private asyncFlushTimer: TimerHandle | null = null;
  /** The group flush the next commit joins while other commits are in flight (see `flushForCommit`). */
  private groupFlush: Promise<void> | null = null;
  /**
   * Transactions whose commit record is in WAL but whose commit is not acknowledged yet (the flush
   * and the synchronous-replication wait, which run after the write lock is released): other
   * sessions treat them as in progress, as PostgreSQL keeps them in the proc array until then.
   */
  private readonly committing = new Set<TransactionId>();
  /** Commits waiting outside the write lock, with the tables their statement touched. */
  private readonly waitingCommits = new Set<WaitingCommit>();
  /** End of the last checkpoint record this node wrote: no WAL since means a timed checkpoint is skipped. */
  private lastCheckpointEnd: Lsn = 0;

  constructor(private readonly deps: PrimaryRoleDeps) {}

  /**
   * A node that opened as a primary: sizes are no longer trusted (not in recovery); after crash
   * recovery, a checkpoint first (the end-of-recovery checkpoint); then 'in production' and the
   * checkpointer's timer.
   */
  async start(crashRecovery: boolean): Promise<void> {
    this.deps.storage.endRecovery();
    if (crashRecovery) await this.checkpoint('CHECKPOINT_ONLINE');
    this.deps.updateControl({ state: 'in production' });
    this.deps.checkpointer.start();
  }

  walSinceLastCheckpoint(): boolean {
    return this.deps.wal.insertLsn > this.lastCheckpointEnd;
  }

  status(): PrimaryStatus {
    return primaryStatusOf(this.deps.syncRep, this.deps.synchronousCommit(), this.deps.clock.now());
  }

  /** Transactions committed but not yet acknowledged (readers see them in progress). */
  committingXids(): ReadonlySet<TransactionId> {
    return this.committing;
  }

  /**
   * Run a write statement under the write lock. A statement still queued when a shutdown
   * begins never starts (PostgreSQL's fast stop terminates every backend). WARNINGs raised while it
   * ran (a cancelled synchronous-replication wait) travel with its result.
   *
   * A statement of one transaction (all but VACUUM of every table and CHECKPOINT) inserts its
   * commit record under the lock and then lets go of it: the commit's WAL flush and
   * synchronous-replication wait run while the next statement executes, so concurrent sessions'
   * commits share a flush and a round trip to the standby (group commit: XLogFlush writes
   * everything inserted so far). What PostgreSQL's heavyweight locks would make a later statement
   * wait for — a table it touches that a waiting commit touched — it waits for under the lock
   * before it starts (`waitForConflicts`), so statements on one table still apply one after
   * another's acknowledgement, as one session's would.
   */
  async runWrite(stmt: Statement, signal?: AbortSignal): Promise<QueryResult> {
    const { syncRep } = this.deps;
    const st: StatementState = {
      notices: [],
      signal,
      xids: [],
      deferLastCommit: isSingleTransaction(stmt),
      pending: null,
    };
    // Cancelled while running or while its commit waits: walsim cannot roll a statement back, so
    // only its commits' synchronous-replication waits end (the commit stands, with PostgreSQL's
    // WARNING).
    const cancelWait = () => {
      for (const xid of st.xids) syncRep.cancel(xid);
    };
    signal?.addEventListener('abort', cancelWait);
    try {
      const result = await this.deps.writeLock.run(async () => {
        const tables = touchedTables(stmt);
        this.refuseIfStopping(signal);
        await this.waitForConflicts(tables);
        // A shutdown or cancel that came while it waited for another commit: it never starts.
        this.refuseIfStopping(signal);
        return executeWrite(this.executorContext(st, tables), stmt);
      });
      if (st.pending !== null) await st.pending;
      return st.notices.length > 0 ? { ...result, notices: st.notices } : result;
    } finally {
      signal?.removeEventListener('abort', cancelWait);
    }
  }

  /**
   * A write that has not started yet never starts once a shutdown began (PostgreSQL's fast stop
   * terminates every backend) or its session cancelled it.
   */
  private refuseIfStopping(signal: AbortSignal | undefined): void {
    if (this.deps.shuttingDown())
      throw new WalsimError(
        'shutting_down',
        'terminating connection due to administrator command',
        '57P01',
      );
    if (signal?.aborted)
      throw new WalsimError('canceled', 'canceling statement due to user request', '57014');
  }

  /**
   * Before a statement starts: wait until every commit still waiting outside the lock that touched
   * one of its tables (any, for `null`: VACUUM of every table) is acknowledged — PostgreSQL's
   * committing transaction holds its table locks through the synchronous-replication wait, and
   * its rows stay invisible to other snapshots until it ends. Stricter than PostgreSQL's lock
   * modes (two INSERTs into one table would not wait there), never weaker. Waits that failed
   * (cancelled, terminated) count as ended.
   */
  private async waitForConflicts(tables: ReadonlySet<string> | null): Promise<void> {
    for (;;) {
      const blocking = [...this.waitingCommits].filter(
        (w) => tables === null || w.tables === null || [...tables].some((t) => w.tables!.has(t)),
      );
      if (blocking.length === 0) return;
      await Promise.allSettled(blocking.map((w) => w.done));
    }
  }

  private executorContext(st: StatementState, tables: ReadonlySet<string> | null): ExecutorContext {
    const st0 = this.deps.storage;
    return {
      catalog: st0.catalog,
      heap: heapPlannerOf(st0),
      log: (body, xid) => this.logAndApply(body, xid),
      commit: (xid, dropped) => this.commit(xid, dropped, st, tables),
      checkpoint: () => this.checkpoint('CHECKPOINT_ONLINE'),
      yieldNow: async () => {
        // The WAL writer's job: push WAL out during long statements so standbys keep up.
        this.flushWal();
        await this.deps.clock.yield();
      },
    };
  }

  /** WAL before data: insert the record, then apply it with the redo routine a standby uses. */
  private logAndApply(body: WalRecordBody, xid: TransactionId): Lsn {
    const { endLsn } = this.walIo(() => this.deps.wal.insert(body, xid));
    this.deps.injectedRedoFailure(endLsn);
    if (body.kind === 'SMGR_TRUNCATE' && this.hasFsmOrVm(body.rel)) {
      // RelationTruncate: "Flush, because otherwise the truncation of the main relation might
      // hit the disk before the WAL record, and the truncation of the FSM or visibility map" —
      // and crash recovery must find the record if the truncation fails (its PANIC below).
      this.flushWal();
    }
    try {
      redo(this.deps.storage, body, xid);
    } catch (e) {
      this.dropFailed(body, e);
      throw e;
    }
    return endLsn;
  }

  private hasFsmOrVm(rel: RelFileNumber): boolean {
    const { smgr } = this.deps.storage;
    return smgr.exists(rel, FSM_FORKNUM) || smgr.exists(rel, VISIBILITYMAP_FORKNUM);
  }

  /**
   * A drop failed between its buffer drop and its file operations. RelationTruncate truncates in
   * a critical section once the record is logged and the old sizes are known (PostgreSQL 17.3,
   * 16.7, …: "Fix data corruption when relation truncation fails"): the failure is a PANIC, and
   * crash recovery replays the truncation — the dropped buffers' pages are never read back from
   * the untruncated file. A crash there (fault `crash`) ends the process either way.
   */
  private dropFailed(body: WalRecordBody, e: unknown): void {
    if (!(e instanceof InjectedDropFault)) return;
    if (
      e.fault.kind === 'io' &&
      body.kind === 'SMGR_TRUNCATE' &&
      injectedBugs.truncateFailureLeavesStalePages
    ) {
      // The pre-2025 ordering: an ERROR; the file keeps its pages, as stale as they were written.
      this.deps.storage.readBackStaleTail(body.rel, body.blkno);
      return;
    }
    this.deps.fatal(new Error(`PANIC:  ${e.message}`, { cause: e }));
  }

  /**
   * A WAL write or fsync: its failure PANICs (`walIoOrPanic`); the session sees its connection end,
   * never an error for a commit that may stand. (Before: the raw ENOSPC went to the client while
   * the statement's WAL stayed in the buffers, to be written by the next flush.)
   */
  private walIo<T>(fn: () => T): T {
    return walIoOrPanic(fn, this.deps.fatal);
  }

  /** XLogFlush, then wake walsenders; past CheckPointSegments of WAL, request a checkpoint. */
  flushWal(): void {
    const { wal } = this.deps;
    if (wal.flushLsn < wal.insertLsn) this.walIo(() => wal.flush());
    this.deps.walsenders.pumpAll();
    this.deps.checkpointer.walFlushed(wal.flushLsn);
  }

  /**
   * RecordTransactionCommit: insert the commit record (under the write lock), then flush and wait
   * for the synchronous standbys. For a one-transaction statement the flush and the wait run after
   * the statement returns to `runWrite`, outside the lock (`st.pending`); a statement of several
   * transactions (VACUUM of every table) waits for each commit before its next transaction, as
   * PostgreSQL's VACUUM does.
   */
  private async commit(
    xid: TransactionId,
    droppedRels: RelFileNumber[],
    st: StatementState,
    tables: ReadonlySet<string> | null,
  ): Promise<void> {
    const endLsn = this.logAndApply(
      { kind: 'XACT_COMMIT', xactTime: this.deps.clock.now(), droppedRels },
      xid,
    );
    st.xids.push(xid);
    const level = this.deps.synchronousCommit();
    // RecordTransactionCommit: flush unless synchronous_commit=off, and always when rels are dropped.
    const flush = level !== 'off' || droppedRels.length > 0;
    if (!flush) this.scheduleAsyncFlush();
    else this.committing.add(xid);
    const finish = this.finishCommit(xid, endLsn, flush, level, st);
    if (!st.deferLastCommit) return finish;
    const waiting: WaitingCommit = { tables, done: finish };
    this.waitingCommits.add(waiting);
    st.pending = finish.finally(() => this.waitingCommits.delete(waiting));
    st.pending.catch(() => {}); // observed by runWrite; avoids an unhandled rejection meanwhile
  }

  /** The commit's flush (joined with concurrent commits'), then its synchronous-replication wait. */
  private async finishCommit(
    xid: TransactionId,
    endLsn: Lsn,
    flush: boolean,
    level: SynchronousCommit,
    st: StatementState,
  ): Promise<void> {
    try {
      if (flush) await this.flushForCommit(endLsn);
    } finally {
      this.committing.delete(xid);
    }
    const mode = waitModeFor(level);
    const { syncRep } = this.deps;
    if (mode !== null && syncRep.enabled) {
      const waiting = syncRep.wait(endLsn, mode, xid);
      if (st.signal?.aborted) syncRep.cancel(xid); // cancelled before the wait began
      const notice = await waiting;
      if (notice !== null) st.notices.push(notice);
    }
    this.deps.commitAcknowledged(endLsn);
  }

  /**
   * XLogFlush for a commit ending at `endLsn`. While other commits are in flight (flushing or
   * waiting for the standbys) or other write statements are queued, the flush waits for the end
   * of this turn of the event loop, so that the commits of the other sessions whose statements
   * arrive meanwhile are inserted first and one fsync (and one send to each standby) covers them
   * all: PostgreSQL's group commit, where a backend that gets WALWriteLock after another's flush
   * writes everything inserted so far. A commit with nothing else in flight (one session) flushes
   * at once.
   */
  private flushForCommit(endLsn: Lsn): Promise<void> {
    if (this.deps.wal.flushLsn >= endLsn) return Promise.resolve();
    const concurrent =
      this.waitingCommits.size > 0 || this.committing.size > 1 || this.deps.writeLock.waiting > 0;
    if (!concurrent) {
      this.flushWal();
      return Promise.resolve();
    }
    this.groupFlush ??= this.deps.clock.yield().then(() => {
      this.groupFlush = null;
      this.flushWal();
    });
    return this.groupFlush;
  }

  /** wal_writer_delay: asynchronous commits reach disk within 200 ms. */
  private scheduleAsyncFlush(): void {
    if (this.asyncFlushTimer) return;
    this.asyncFlushTimer = this.deps.clock.setTimeout(() => {
      this.asyncFlushTimer = null;
      this.flushWal();
    }, 200);
  }

  /** CHECKPOINT on a primary: write the data image for REDO = here, then log the checkpoint record. */
  async checkpoint(kind: 'CHECKPOINT_ONLINE' | 'CHECKPOINT_SHUTDOWN'): Promise<void> {
    const { storage, wal, clock } = this.deps;
    assert(
      storage.smgr.inRecovery === false,
      'INV-NODE-2: checkpoint records are written only by a primary',
    );
    // WAL before data: the image holds every change up to REDO, so that WAL must be durable first
    // (asynchronous commits may have left it in the WAL buffers); else a power loss could leave an
    // image ahead of the WAL that replay starts from.
    this.flushWal();
    const redoLsn = wal.insertLsn;
    const prev = wal.lastRecordLsn;
    const timeline = this.deps.timeline();
    // The write lock keeps statements out until the record is written; clients, walsenders and
    // reads run while the image is written (only what changed since the last one, in steps).
    await storage.writeImage(
      this.deps.dataDir,
      { redoLsn, redoPrevLsn: prev, timeline },
      () => clock.yield(),
      { disk: this.deps.disk, clock },
    );
    if (wal.insertLsn !== redoLsn)
      fail(
        `INV-NODE-3: WAL was written during the checkpoint's image (${formatLsn(redoLsn)} → ${formatLsn(wal.insertLsn)})`,
      );
    const cat = storage.catalog;
    const { startLsn } = wal.insert(
      {
        kind,
        redo: redoLsn,
        timeline,
        prevTimeline: timeline,
        nextXid: cat.nextXid,
        nextRelFileNumber: cat.nextRelFileNumber,
        time: clock.now(),
      },
      0,
    );
    if (startLsn !== redoLsn)
      fail(
        `INV-NODE-3: checkpoint record at ${formatLsn(startLsn)} but REDO ${formatLsn(redoLsn)}`,
      );
    this.flushWal();
    this.deps.updateControl({
      checkpointLsn: startLsn,
      redoLsn,
      state: kind === 'CHECKPOINT_SHUTDOWN' ? 'shut down' : 'in production',
    });
    this.lastCheckpointEnd = wal.insertLsn;
    // CreateCheckPoint: KeepLogSeg from the end of the checkpoint record, then RemoveOldXlogFiles.
    this.deps.removeOldWal(redoLsn, wal.insertLsn);
    if (kind === 'CHECKPOINT_ONLINE') this.deps.checkpointer.start(); // checkpoint_timeout counts from here
  }

  /** A checkpoint after the running write statement (CHECKPOINT requests, the checkpointer). */
  requestedCheckpoint(): Promise<void> {
    return this.deps.writeLock.run(() => this.checkpoint('CHECKPOINT_ONLINE'));
  }

  /**
   * Fast/smart shutdown of a primary: sessions waiting for synchronous replication are terminated
   * first (PostgreSQL's fast stop signals every backend; one waiting in SyncRepWaitForLSN warns
   * and exits) — each holds the write lock, so waiting for the lock first would wait for a
   * standby that may never come; then the running write statement finishes and the shutdown
   * checkpoint is written; walsenders send the rest (incl. that checkpoint) and wait up to 10 s
   * for the standbys' flush.
   */
  async shutdown(): Promise<void> {
    const { walsenders, clock, wal } = this.deps;
    this.deps.syncRep.terminateAll();
    await this.deps.writeLock.run(() => this.checkpoint('CHECKPOINT_SHUTDOWN'));
    const deadline = clock.monoMs() + 10_000;
    const target = wal.flushLsn;
    while (
      clock.monoMs() < deadline &&
      walsenders.senders().some((s) => s.state !== 'startup' && s.flushLsn < target)
    ) {
      walsenders.pumpAll();
      await clock.sleep(10);
    }
  }
}
