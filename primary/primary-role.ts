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
import { assert } from '../common/assert.ts';
import type { Clock, TimerHandle } from '../common/clock.ts';
import type { Disk } from '../common/disk.ts';
import { WalsimError } from '../common/errors.ts';
import type { Mutex } from '../common/mutex.ts';
import type { QueryResult, SynchronousCommit } from '../protocol/messages.ts';
import type { Statement } from '../sql/ast.ts';
import type { ControlFile } from '../wal/control-file.ts';
import { formatLsn, type Lsn, type TimeLineId } from '../wal/lsn.ts';
import type { RelFileNumber, TransactionId, WalRecordBody } from '../wal/records.ts';
import { walIoOrPanic, type WalWriter } from '../wal/wal-writer.ts';
import type { NodeStorage } from '../storage/node-storage.ts';
import { redo } from '../storage/redo.ts';
import { executeWrite, heapPlannerOf, type ExecutorContext } from './executor.ts';
import { primaryStatusOf, type PrimaryStatus } from './primary-status.ts';
import { waitModeFor, type Notice, type SyncRepQueue } from './syncrep.ts';
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

export class PrimaryRole {
  private asyncFlushTimer: TimerHandle | null = null;
  /** WARNINGs for the write statement running now (a cancelled synchronous-replication wait). */
  private statementNotices: Notice[] = [];
  /** The cancel signal of the write statement running now (its commits' waits end on it). */
  private writeSignal: AbortSignal | undefined;
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

  /**
   * Run a write statement under the write lock. A statement still queued when a shutdown
   * begins never starts (PostgreSQL's fast stop terminates every backend). WARNINGs raised while it
   * ran (a cancelled synchronous-replication wait) travel with its result.
   */
  runWrite(stmt: Statement, signal?: AbortSignal): Promise<QueryResult> {
    const { syncRep } = this.deps;
    return this.deps.writeLock.run(async () => {
      if (this.deps.shuttingDown())
        throw new WalsimError(
          'shutting_down',
          'terminating connection due to administrator command',
          '57P01',
        );
      // Cancelled while queued behind another write: it never starts.
      if (signal?.aborted)
        throw new WalsimError('canceled', 'canceling statement due to user request', '57014');
      // Cancelled while running: walsim cannot roll a statement back, so only its commit's
      // synchronous-replication wait ends (the commit stands, with PostgreSQL's WARNING). Writes run
      // one at a time, so every waiter now is this statement's commit.
      const cancelWait = () => {
        for (const w of syncRep.waiters()) syncRep.cancel(w.xid);
      };
      signal?.addEventListener('abort', cancelWait);
      this.statementNotices = [];
      this.writeSignal = signal;
      try {
        const result = await executeWrite(this.executorContext(), stmt);
        const notices = this.statementNotices;
        return notices.length > 0 ? { ...result, notices } : result;
      } finally {
        this.statementNotices = [];
        this.writeSignal = undefined;
        signal?.removeEventListener('abort', cancelWait);
      }
    });
  }

  private executorContext(): ExecutorContext {
    const st = this.deps.storage;
    return {
      catalog: st.catalog,
      heap: heapPlannerOf(st),
      log: (body, xid) => this.logAndApply(body, xid),
      commit: (xid, dropped) => this.commit(xid, dropped),
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
    redo(this.deps.storage, body, xid);
    return endLsn;
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

  private async commit(xid: TransactionId, droppedRels: RelFileNumber[]): Promise<void> {
    const endLsn = this.logAndApply(
      { kind: 'XACT_COMMIT', xactTime: this.deps.clock.now(), droppedRels },
      xid,
    );
    const level = this.deps.synchronousCommit();
    // RecordTransactionCommit: flush unless synchronous_commit=off, and always when rels are dropped.
    if (level !== 'off' || droppedRels.length > 0) this.flushWal();
    else this.scheduleAsyncFlush();
    const mode = waitModeFor(level);
    const { syncRep } = this.deps;
    if (mode !== null && syncRep.enabled) {
      const waiting = syncRep.wait(endLsn, mode, xid);
      if (this.writeSignal?.aborted) syncRep.cancel(xid); // cancelled before the wait began
      const notice = await waiting;
      if (notice !== null) this.statementNotices.push(notice);
    }
    this.deps.commitAcknowledged(endLsn);
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
    assert(
      wal.insertLsn === redoLsn,
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
    assert(
      startLsn === redoLsn,
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
