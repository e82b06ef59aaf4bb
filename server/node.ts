/**
 * A walsim server node: the shell both roles share — storage, the WAL writer, pg_control and the
 * timeline, the walsenders, the checkpointer's bookkeeping, the lifecycle machine, and the bindings
 * of clock, disk and transport — plus the role in force, which the lifecycle machine creates and
 * retires as actions: `recovery` creates the standby role (standby/standby-role.ts: startup
 * process, walreceiver, restartpoints), `primary` creates the primary role
 * (primary/primary-role.ts: executor, commits and synchronous replication, checkpoints), and
 * promotion retires the standby role once END_OF_RECOVERY is written and the node is open for
 * writes. Start-up is "load the last data image, then replay local WAL from its REDO point"; after
 * an unclean stop that replay is crash recovery.
 *
 * Ordering rules: a record is inserted into WAL before its redo is applied locally; a walsender
 * sends only flushed WAL; a commit returns only after the flush/remote wait synchronous_commit
 * requires; a standby replays only WAL its walreceiver has flushed.
 */
import * as path from 'node:path';
import { assert, fail, InvariantViolation } from '../common/assert.ts';
import type { Clock } from '../common/clock.ts';
import type { Disk } from '../common/disk.ts';
import type { MessageConn } from '../common/transport.ts';
import { WalsimError } from '../common/errors.ts';
import { Mutex } from '../common/mutex.ts';
import { injectedBugs } from '../common/injected-bugs.ts';
import type { Lsn, TimeLineId } from '../wal/lsn.ts';
import type { WalWriter } from '../wal/wal-writer.ts';
import type { WalReadOptions } from '../wal/wal-reader.ts';
import { writeControlFile, type ControlFile } from '../wal/control-file.ts';
import { NodeStorage } from '../storage/node-storage.ts';
import { inProgressView, type XactStatusReader } from '../storage/clog.ts';
import type { DropResult } from '../storage/drop.ts';
import { PrimaryRole } from '../primary/primary-role.ts';
import { SyncRepQueue } from '../primary/syncrep.ts';
import { WalSenderSet } from '../primary/walsender-set.ts';
import { parseSynchronousStandbyNames } from '../primary/sync-standby-names.ts';
import { StandbyRole } from '../standby/standby-role.ts';
import type { StartupProcess } from '../standby/startup.ts';
import type { WalReceiver } from '../standby/walreceiver.ts';
import {
  describeState,
  isInRecovery,
  stopModeOf,
  type LifecycleEvent,
} from '../lifecycle/lifecycle-machine.ts';
import {
  LifecycleActor,
  type LifecycleActionError,
  type LifecycleActions,
} from '../lifecycle/lifecycle-actor.ts';
import { FailoverClock } from '../standby/failover-clock.ts';
import type { FailoverReport } from '../standby/failover-report.ts';
import { replayCountsOf } from '../storage/replay-counts.ts';
import type { TimelineHistoryEntry } from '../wal/segment.ts';
import { parseStatement, writeCommandName } from '../sql/parser.ts';
import type { FaultName, QueryResult, StopMode } from './control-protocol.ts';
import { describeStatement } from '../sql/functions.ts';
import { executeRead, type SessionSettings } from './sql-read.ts';
import {
  executeConfigStatement,
  reloadConfig,
  upstreamOf,
  walSettingsOf,
  type NodeConfig,
} from './node-config.ts';
import { performBaseBackup } from './base-backup.ts';
import { Checkpointer } from './checkpointer.ts';
import { NodeFaults } from './node-faults.ts';
import {
  commonStatus,
  inspectNode,
  type NodeInspection,
  type NodeStatus,
  type StartupReplayStatus,
} from './node-status.ts';
import { replayLocalWal, STANDBY_SIGNAL } from './startup-replay.ts';
import { executePgPromote, pgPromote } from './pg-promote.ts';
import { acceptWalSender } from './start-replication.ts';
import { TimelineSwitch } from './timeline-switch.ts';
import type { NodeEnv, NodeOptions } from './node-options.ts';

export { STANDBY_SIGNAL };
export type { NodeEnv, NodeInspection, NodeOptions };

export class ServerNode {
  readonly dataDir: string;
  /** The settings in force (replaced by pg_reload_conf()). */
  config: NodeConfig;
  readonly storage: NodeStorage;
  readonly wal: WalWriter;
  readonly nBuffers: number;
  readonly clock: Clock;
  readonly disk: Disk;
  timeline: TimeLineId;
  control: ControlFile;
  /** The lifecycle machine: the single source of truth for recovery, pause and promotion state. */
  readonly lifecycle: LifecycleActor;
  readonly failover: FailoverClock;
  /**
   * Observer of acknowledged commits (the simulator's ledger checks the synchronous standby's
   * positions against `endLsn` at this instant); null in production.
   */
  onCommitAcknowledged: ((endLsn: Lsn) => void) | null = null;
  /** Records replayed at start (crash recovery or catch-up from local WAL). */
  readonly startupReplay: StartupReplayStatus;

  /**
   * Every walsender of this node and the commits waiting for them: on a primary, and on a standby
   * serving cascaded standbys (whose connections survive this node's promotion).
   */
  readonly syncRep: SyncRepQueue;
  readonly walsenders: WalSenderSet;
  /** Write statements, checkpoints and base backups take turns (walsim has no concurrent writers). */
  private readonly writeLock = new Mutex();
  /** Automatic checkpoints and WAL removal (checkpoint_timeout, max_wal_size, wal_keep_size). */
  readonly checkpointer: Checkpointer;
  readonly faults: NodeFaults;
  /** Following the upstream's timeline; END_OF_RECOVERY on a new one; opening for writes. */
  private readonly timelines: TimelineSwitch;

  /** The role in force: created and retired by lifecycle actions (exactly one outside `stopping`). */
  private primaryRole: PrimaryRole | null = null;
  private standbyRole: StandbyRole | null = null;
  /** fatal() was called: the process is ending (production never returns from it). */
  private ending = false;

  private constructor(
    readonly opts: NodeOptions,
    storage: NodeStorage,
    wal: WalWriter,
    control: ControlFile,
    startupReplay: StartupReplayStatus,
  ) {
    this.dataDir = opts.dataDir;
    this.config = opts.config;
    this.clock = opts.env.clock;
    this.disk = opts.env.disk;
    this.storage = storage;
    this.wal = wal;
    this.control = control;
    this.timeline = control.timeline;
    this.nBuffers = storage.pool.nBuffers;
    this.faults = new NodeFaults(this.clock, this.disk, wal);
    this.failover = new FailoverClock(
      () => this.storage.dropBusyMs,
      () => this.startup?.recordsReplayed ?? 0,
      () => replayCountsOf(this.storage),
      this.nBuffers,
      this.clock,
    );
    this.syncRep = new SyncRepQueue(() => this.clock.now());
    this.walsenders = new WalSenderSet(
      this.syncRep,
      parseSynchronousStandbyNames(opts.config.synchronousStandbyNames),
      opts.log,
    );
    this.startupReplay = startupReplay;
    this.timelines = new TimelineSwitch({
      dataDir: this.dataDir,
      disk: this.disk,
      clock: this.clock,
      wal,
      failover: this.failover,
      endRecovery: () => this.storage.endRecovery(),
      startCheckpointer: () => this.checkpointer.start(),
      walSegmentSize: () => this.config.walSegmentSize,
      timeline: () => this.timeline,
      setTimeline: (tli) => (this.timeline = tli),
      updateControl: (patch) => this.updateControl(patch),
      log: opts.log,
      fatal: (e) => this.fatal(e),
    });
    this.checkpointer = new Checkpointer({
      dataDir: this.dataDir,
      clock: this.clock,
      disk: this.disk,
      segmentSize: this.config.walSegmentSize,
      settings: walSettingsOf(this.config),
      canCheckpoint: () => !this.inRecovery && this.shuttingDown === null,
      walSinceLastCheckpoint: () => this.primaryRole?.walSinceLastCheckpoint() ?? false,
      redoLsn: () => this.control.redoLsn,
      runCheckpoint: () => this.primary().requestedCheckpoint(),
      log: opts.log,
    });
    // Last: entering the initial state creates the role, which needs everything above.
    this.lifecycle = this.newLifecycle(control);
  }

  /** The lifecycle machine, started: in recovery if standby.signal is there. */
  private newLifecycle(control: ControlFile): LifecycleActor {
    return new LifecycleActor(
      {
        inRecovery:
          this.disk.exists(path.join(this.dataDir, STANDBY_SIGNAL)) &&
          // Test-only planted bug (common/injected-bugs.ts): a crashed primary ignores the signal.
          !(injectedBugs.crashedPrimaryIgnoresStandbySignal && control.state === 'in production'),
      },
      this.lifecycleEffects(),
      (failure) => this.actionFailed(failure),
      (name) => this.faults.beforeLifecycleAction(name),
    );
  }

  /** The standby role's startup process (null on a primary). */
  get startup(): StartupProcess | null {
    return this.standbyRole?.startup ?? null;
  }

  /** The standby role's walreceiver (null on a primary, or with no upstream). */
  get receiver(): WalReceiver | null {
    return this.standbyRole?.receiver ?? null;
  }

  /** The primary role; only called where the lifecycle state implies it exists. */
  private primary(): PrimaryRole {
    if (this.primaryRole === null)
      fail(
        `INV-NODE-6: no primary role in lifecycle state ${describeState(this.lifecycle.getSnapshot())}`,
      );
    return this.primaryRole;
  }

  private standby(): StandbyRole {
    if (this.standbyRole === null)
      fail(
        `INV-NODE-6: no standby role in lifecycle state ${describeState(this.lifecycle.getSnapshot())}`,
      );
    return this.standbyRole;
  }

  /** The stop in progress (null while running), read from the lifecycle machine's `stopping`. */
  get shuttingDown(): StopMode | null {
    return stopModeOf(this.lifecycle.getSnapshot());
  }

  /** pg_is_in_recovery(), read from the lifecycle machine. */
  get inRecovery(): boolean {
    return isInRecovery(this.lifecycle.getSnapshot());
  }

  /** Send a lifecycle event for a requester: an action that failed throws here, to the requester. */
  send(event: LifecycleEvent): void {
    this.lifecycle.send(event);
  }

  /** A lifecycle event from the node's own processes: action failures are logged, not thrown. */
  private notify(event: LifecycleEvent): void {
    this.lifecycle.notify(event);
  }

  /**
   * A lifecycle action threw. Every such failure is an internal error (the machine moved on, the
   * effect did not happen); an InvariantViolation is FATAL — the process ends, and the next start
   * is crash recovery. Anything else is also thrown to the event's requester, if any.
   */
  private actionFailed(failure: LifecycleActionError): void {
    if (this.ending) return; // a PANIC or FATAL inside the action: the process is already on its way out
    const cause = failure.cause;
    this.opts.log(
      `ERROR:  internal error: ${failure.message}${cause instanceof Error && cause.stack ? `\n${cause.stack}` : ''}`,
    );
    if (cause instanceof InvariantViolation) this.fatal(cause);
  }

  /**
   * The process cannot go on (NodeOptions.fatal: production logs and exits at once). In the
   * simulator the call returns and the error it came with is rethrown on the way out: nothing after
   * it is reported again.
   */
  private fatal(error: unknown): void {
    this.ending = true;
    this.opts.fatal(error);
  }

  /**
   * Side effects of lifecycle transitions (see lifecycle/lifecycle-machine.ts), by kind; each runs
   * after the test-only action faults had their chance to throw in its place (the actor's
   * `beforeAction`).
   */
  private lifecycleEffects(): LifecycleActions {
    // Object.assign, not spreads: Node 20's V8 built this from spreads on a slow path, ~15 µs a
    // node start (0.4 % of the simulator's time).
    return Object.assign({}, this.roleEffects(), this.replayEffects(), this.promotionEffects(), {
      recordCheckpointDone: () => {},
      beginShutdown: () => {},
    });
  }

  /** INV-NODE-6: the role is created by the state the node enters, retired after promotion. */
  private roleEffects() {
    return {
      createStandbyRole: () => {
        assert(
          this.standbyRole === null && this.primaryRole === null,
          'INV-NODE-6: the standby role is created once, on a node with no role',
        );
        this.standbyRole = this.newStandbyRole();
      },
      createPrimaryRole: () => {
        assert(
          this.primaryRole === null && this.standbyRole === null,
          'INV-NODE-6: the primary role is created on a node with no role (promotion retires the standby role first)',
        );
        this.primaryRole = this.newPrimaryRole();
      },
      retireStandbyRole: () => {
        // Replay finished and the walreceiver stopped at PROMOTE; the failover report captured the
        // role's counters when the node opened for writes.
        this.standbyRole = null;
      },
    };
  }

  /** pg_wal_replay_pause / pg_wal_replay_resume: wake the startup process, mark the failover. */
  private replayEffects() {
    return {
      requestReplayPause: () => this.standbyRole?.wakeReplay(),
      resumeReplay: () => this.standbyRole?.wakeReplay(),
      recordResumeRequested: () => this.failover.resumeRequested(),
      recordReplayResumed: () => this.failover.mark('replayResumed'),
    };
  }

  /** Promotion, in order: PROMOTE, replay caught up, END_OF_RECOVERY, open, first checkpoint. */
  private promotionEffects() {
    return {
      recordPromoteRequested: () => {
        this.opts.log('LOG:  received promote request');
        this.failover.mark('promoteRequested');
      },
      stopWalReceiver: () => this.standbyRole?.stopWalReceiver(),
      wakeReplayForPromotion: () => this.standbyRole?.wakeReplay(),
      recordReplayCaughtUp: () => this.failover.mark('replayCaughtUp'),
      writeEndOfRecovery: () => {
        this.timelines.writeEndOfRecovery(this.standby().finishReplay());
        queueMicrotask(() => this.notify({ type: 'END_OF_RECOVERY_WRITTEN' }));
      },
      openForWrites: () => this.timelines.openForWrites(),
      requestCheckpoint: () => this.clock.defer(() => this.endOfRecoveryCheckpoint()),
    };
  }

  /** The first checkpoint after promotion (xlog.c: requested once the node is open for writes). */
  private endOfRecoveryCheckpoint(): void {
    this.primary()
      .requestedCheckpoint()
      .then(
        () => {
          this.failover.mark('firstCheckpointDone');
          this.notify({ type: 'CHECKPOINT_DONE' });
        },
        (e: unknown) => {
          if (e instanceof InvariantViolation) this.fatal(e);
          else this.opts.log(`LOG:  end-of-recovery checkpoint failed: ${(e as Error).message}`);
        },
      );
  }

  private newPrimaryRole(): PrimaryRole {
    return new PrimaryRole({
      dataDir: this.dataDir,
      clock: this.clock,
      disk: this.disk,
      storage: this.storage,
      wal: this.wal,
      writeLock: this.writeLock,
      syncRep: this.syncRep,
      walsenders: this.walsenders,
      checkpointer: this.checkpointer,
      synchronousCommit: () => this.config.synchronousCommit,
      timeline: () => this.timeline,
      updateControl: (patch) => this.updateControl(patch),
      removeOldWal: (redoLsn, endLsn) => this.removeOldWal(redoLsn, endLsn),
      injectedRedoFailure: (at) => this.faults.injectedRedoFailure(at),
      commitAcknowledged: (endLsn) => this.onCommitAcknowledged?.(endLsn),
      shuttingDown: () => this.shuttingDown !== null,
      log: this.opts.log,
      fatal: (e) => this.fatal(e),
    });
  }

  private newStandbyRole(): StandbyRole {
    return new StandbyRole({
      dataDir: this.dataDir,
      clock: this.clock,
      disk: this.disk,
      storage: this.storage,
      wal: this.wal,
      upstream: () => upstreamOf(this.config),
      dialer: this.opts.env.dialer,
      timeline: () => this.timeline,
      readOptions: () => this.readOptions(),
      updateControl: (patch) => this.updateControl(patch),
      removeOldWal: (redoLsn, endLsn) => this.removeOldWal(redoLsn, endLsn),
      followTimeline: (tli, text, switchLsn) => this.followTimeline(tli, text, switchLsn),
      walFlushed: () => this.walsenders.pumpAll(),
      lifecycle: () => this.lifecycle.getSnapshot(),
      notify: (event) => this.notify(event),
      redoFaultArmed: () => this.faults.redoFaultArmed(),
      injectedRedoFailure: (at) => this.faults.injectedRedoFailure(at),
      fatal: (e) => this.fatal(e),
      log: this.opts.log,
    });
  }

  private updateControl(patch: Partial<ControlFile>): void {
    // Object.assign, not spreads: Node 20's V8 builds `{ ...a, ...b }` on a slow path.
    this.control = Object.assign({}, this.control, patch);
    writeControlFile(this.dataDir, this.control, this.disk, this.clock.now());
  }

  /**
   * RemoveOldXlogFiles after a checkpoint or restartpoint with this REDO point, WAL ending at
   * `endLsn`, keeping what a connected standby still needs (KeepLogSeg).
   */
  private removeOldWal(redoLsn: Lsn, endLsn: Lsn): void {
    this.checkpointer.removeOldWal(redoLsn, endLsn, this.walsenders.keepLsn(), this.timeline);
  }

  /**
   * pg_basebackup from this running node into `targetDir` (server/base-backup.ts): a checkpoint,
   * or a restartpoint on a standby, then a copy made without yielding, marked as a standby.
   */
  baseBackup(targetDir: string): Promise<{ checkpointLsn: string; timeline: TimeLineId }> {
    return performBaseBackup(
      {
        dataDir: this.dataDir,
        disk: this.disk,
        segmentSize: this.wal.segmentSize,
        writeLock: this.writeLock,
        control: () => this.control,
        timeline: () => this.timeline,
        checkpoint: () =>
          this.inRecovery
            ? this.standby().restartpoint()
            : this.primary().checkpoint('CHECKPOINT_ONLINE'),
      },
      targetDir,
    );
  }

  /**
   * Fault injection for tests: `redo_fail` and `slow_disk` on any node; `cut_replication` (cut the
   * walreceiver's connection and hold it down for holdMs) and `wal_write_fail` (every WAL write
   * fails with ENOSPC for holdMs, a full disk) on a standby with a walreceiver.
   */
  injectFault(fault: FaultName, holdMs: number, latencyMs = 100): { injected: FaultName } {
    return this.faults.inject(fault, holdMs, latencyMs, () => {
      const receiver = this.inRecovery ? this.receiver : null;
      if (receiver === null)
        throw new WalsimError('invalid_input', `${fault} needs a standby with a walreceiver`);
      return receiver;
    });
  }

  /** The failover report: counts only (the edges that show seconds price it). */
  failoverReport(): FailoverReport | null {
    return this.failover.report(this.storage.dropSettings.rules ?? null);
  }

  readOptions(): WalReadOptions {
    return { timeline: this.timeline, segmentSize: this.config.walSegmentSize, disk: this.disk };
  }

  /**
   * Assemble the node: a pool of `opts.nBuffers` buffers loaded with the data image, local WAL
   * replayed from its REDO point, WAL open for writing.
   */
  static open(opts: NodeOptions): ServerNode {
    const r = replayLocalWal(opts.dataDir, opts.config, opts.nBuffers, opts.env.disk, opts.log);
    return new ServerNode(opts, r.storage, r.wal, r.control, r.startupReplay);
  }

  /** Start the role: a primary opens for writes (after an end-of-recovery checkpoint); a standby streams. */
  async startRole(): Promise<void> {
    if (!this.inRecovery) return this.primary().start(this.startupReplay.crashRecovery);
    this.standby().start();
  }

  /**
   * The upstream's timeline went on as `tli` at `switchLsn`, which this standby has flushed
   * (server/timeline-switch.ts); then cascading walsenders end the old timeline.
   */
  private followTimeline(tli: TimeLineId, historyText: string, switchLsn: Lsn): void {
    assert(this.inRecovery, 'INV-NODE-5: only a standby follows an upstream timeline');
    this.timelines.followTimeline(tli, historyText, switchLsn);
    this.walsenders.pumpAll();
  }

  // ---------------------------------------------------------------- walsender side

  /**
   * A replication connection. On a primary a walsender streams this node's WAL; on a standby it is
   * a cascading walsender streaming what this node has received and flushed (never synchronous).
   */
  acceptReplication(conn: MessageConn): void {
    acceptWalSender(this, conn, this.opts.log);
  }

  /** The history of the current timeline (readTimeLineHistory), cached per timeline. */
  history(): readonly TimelineHistoryEntry[] {
    return this.timelines.history();
  }

  // ---------------------------------------------------------------- SQL

  /**
   * Transaction status as a reading session sees it: a transaction whose commit waits for
   * synchronous replication is still in progress for everyone else (xact.c: the proc array entry
   * goes only after SyncRepWaitForLSN), although CLOG already says committed.
   */
  snapshotClog(): XactStatusReader {
    const committing = this.primaryRole?.committingXids();
    return inProgressView(
      this.storage.clog,
      committing === undefined || committing.size === 0
        ? this.syncRep.waitingXids()
        : new Set([...this.syncRep.waitingXids(), ...committing]),
    );
  }

  /** Run one statement. `signal` is a cancel request (pg_cancel_backend); waits end on it with 57014. */
  async execute(
    sql: string,
    signal?: AbortSignal,
    session?: SessionSettings,
  ): Promise<QueryResult> {
    const stmt = parseStatement(sql);
    describeStatement(stmt); // parse analysis: an unknown function or view fails before anything runs
    if (this.shuttingDown !== null)
      throw new WalsimError('shutting_down', 'the database system is shutting down', '57P03');
    const write = writeCommandName(stmt);
    if (write !== null) {
      if (this.inRecovery)
        throw new WalsimError(
          'read_only',
          `cannot execute ${write} in a read-only transaction`,
          '25006',
        );
      return this.primary().runWrite(stmt, signal);
    }
    if (stmt.type === 'select_function' && stmt.fn === 'pg_promote')
      return executePgPromote(stmt.args, (wait, secs) => this.promote(wait, secs, signal));
    if (stmt.type === 'checkpoint') {
      if (this.inRecovery) {
        await this.standby().restartpoint();
        return { command: 'CHECKPOINT', columns: [], rows: [] };
      }
      return this.primary().runWrite(stmt, signal);
    }
    const configResult = executeConfigStatement(stmt, this.dataDir, this.disk, () =>
      this.reloadConfig(),
    );
    if (configResult !== null) return configResult;
    return executeRead(this, stmt, session);
  }

  /** SIGHUP / pg_reload_conf(): re-read the settings and apply what changed (node-config.ts). */
  reloadConfig(): void {
    reloadConfig({
      dataDir: this.dataDir,
      disk: this.disk,
      config: this.config,
      setConfig: (next) => (this.config = next),
      walsenders: this.walsenders,
      walReceiverToRestart: () => (this.inRecovery ? this.standbyRole : null),
      log: this.opts.log,
    });
  }

  /** pg_promote(wait, wait_seconds) (server/pg-promote.ts). */
  promote(wait = true, waitSeconds = 60, signal?: AbortSignal): Promise<boolean> {
    return pgPromote(this, wait, waitSeconds, signal, this.opts.log);
  }

  // ---------------------------------------------------------------- status and shutdown

  /** Status requests answered while a data image was being written (checkpoint or restartpoint). */
  private statusDuringImageWrite = 0;

  status(): NodeStatus {
    if (this.storage.imageWriteInProgress) this.statusDuringImageWrite++;
    const common = commonStatus(this, this.statusDuringImageWrite);
    // The role in force contributes its part (a standby stays one while it shuts down).
    return { ...common, ...(this.primaryRole?.status() ?? this.standby().status()) };
  }

  /** Fast/smart shutdown work before exit. Immediate is handled by the process shell (no work). */
  async shutdown(mode: 'smart' | 'fast'): Promise<void> {
    const wasInRecovery = this.inRecovery; // read before STOP leaves the recovery states
    this.send({ type: 'STOP', mode });
    this.checkpointer.stop();
    if (wasInRecovery) await this.standby().shutdown();
    else await this.primary().shutdown();
  }

  /** The node's tables, forks and buffers, for comparing nodes (server/node-status.ts). */
  inspect(): NodeInspection {
    return inspectNode(this.storage);
  }

  noteDrop(cb: ((r: DropResult) => void) | null): void {
    this.storage.onDrop = cb;
  }
}
