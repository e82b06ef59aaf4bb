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
import { assert, InvariantViolation } from '../common/assert.ts';
import type { Clock } from '../common/clock.ts';
import type { Disk } from '../common/disk.ts';
import { LatencyDisk } from '../common/latency-disk.ts';
import type { MessageConn, UpstreamDialer } from '../common/transport.ts';
import { writeFileSynced } from '../common/durable-file.ts';
import { WalsimError } from '../common/errors.ts';
import { Mutex } from '../common/mutex.ts';
import { formatLsn, type Lsn, type TimeLineId } from '../wal/lsn.ts';
import type { ForkNumber } from '../wal/records.ts';
import { walIoOrPanic, type WalWriter } from '../wal/wal-writer.ts';
import { walFilesForBaseBackup } from '../wal/wal-retention.ts';
import { walSegmentRemovedMessage, type WalReadOptions } from '../wal/wal-reader.ts';
import { writeControlFile, type ControlFile } from '../wal/control-file.ts';
import { NodeStorage } from '../storage/node-storage.ts';
import { inProgressView, type XactStatusReader } from '../storage/clog.ts';
import { formatSharedBuffers } from '../storage/shared-buffers.ts';
import type { DropResult } from '../storage/drop.ts';
import { PrimaryRole } from '../primary/primary-role.ts';
import { SyncRepQueue } from '../primary/syncrep.ts';
import { WalSender } from '../primary/walsender.ts';
import { WalSenderSet } from '../primary/walsender-set.ts';
import { parseSynchronousStandbyNames } from '../primary/sync-standby-names.ts';
import { StandbyRole } from '../standby/standby-role.ts';
import type { StartupProcess } from '../standby/startup.ts';
import type { WalReceiver } from '../standby/walreceiver.ts';
import {
  describeState,
  isInRecovery,
  refusalOf,
  stopModeOf,
  type LifecycleEvent,
} from '../lifecycle/lifecycle-machine.ts';
import {
  LifecycleActor,
  type LifecycleActionError,
  type LifecycleActionName,
  type LifecycleActions,
} from '../lifecycle/lifecycle-actor.ts';
import { FailoverClock } from '../standby/failover-clock.ts';
import type { FailoverReport } from '../standby/failover-report.ts';
import { replayCountsOf } from '../storage/replay-counts.ts';
import {
  listSegmentFiles,
  readTimelineHistory,
  segmentOf,
  writeTimelineHistoryFile,
  type TimelineHistoryEntry,
} from '../wal/segment.ts';
import { parseStatement, writeCommandName } from '../sql/parser.ts';
import type { FaultName, QueryResult, StopMode } from './control-protocol.ts';
import { describeStatement } from '../sql/functions.ts';
import { executeRead } from './sql-read.ts';
import {
  alterSystem,
  copyDataDirectory,
  loadNodeConfig,
  RELOADABLE_SETTINGS,
  upstreamOf,
  walSettingsOf,
  type NodeConfig,
  type ReloadableSetting,
} from './node-config.ts';
import { Checkpointer } from './checkpointer.ts';
import { NodeFaults } from './node-faults.ts';
import type { NodeCommonStatus, NodeStatus, StartupReplayStatus } from './node-status.ts';
import { replayLocalWal, STANDBY_SIGNAL } from './startup-replay.ts';

export { STANDBY_SIGNAL };

export interface NodeInspection {
  tables: Array<{
    name: string;
    rel: number;
    rows: number;
    digest: string;
    forks: Array<number | null>;
    buffered: string[];
  }>;
  orphanBuffers: string[];
  relations: number[];
  usedBuffers: number;
}

export interface NodeOptions {
  dataDir: string;
  config: NodeConfig;
  token: string;
  log(message: string): void;
  /**
   * A failure the node cannot continue after (an exception inside redo in the startup process):
   * log FATAL and end the process with a non-zero exit; the next start is crash recovery.
   */
  fatal(error: unknown): void;
  /** Clock, disk and the dialer to the upstream: always given, the node has no defaults. */
  env: NodeEnv;
}

/**
 * Everything nondeterministic the node core uses, injected: clock and timers, the file system, and
 * the dialer to the upstream. Production (server/main.ts) binds Node's clock, node:fs (behind the
 * slow_disk layer) and ws; the simulator (sim/) its scheduler, in-memory disk and in-memory network.
 */
export interface NodeEnv {
  clock: Clock;
  disk: Disk;
  /** Replication connections to the upstream primary_conninfo names. */
  dialer: UpstreamDialer;
}

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
    this.lifecycle = new LifecycleActor(
      { inRecovery: this.disk.exists(path.join(this.dataDir, STANDBY_SIGNAL)) },
      this.lifecycleEffects(),
      (failure) => this.actionFailed(failure),
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
    assert(
      this.primaryRole !== null,
      `INV-NODE-6: no primary role in lifecycle state ${describeState(this.lifecycle.getSnapshot())}`,
    );
    return this.primaryRole;
  }

  private standby(): StandbyRole {
    assert(
      this.standbyRole !== null,
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
   * Side effects of lifecycle transitions (see lifecycle/lifecycle-machine.ts); each runs after the
   * test-only action faults had their chance to throw in its place.
   */
  private lifecycleEffects(): LifecycleActions {
    const effects: LifecycleActions = {
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
      requestReplayPause: () => this.standbyRole?.wakeReplay(),
      resumeReplay: () => this.standbyRole?.wakeReplay(),
      recordResumeRequested: () => this.failover.resumeRequested(),
      recordReplayResumed: () => this.failover.mark('replayResumed'),
      recordPromoteRequested: () => {
        this.opts.log('LOG:  received promote request');
        this.failover.mark('promoteRequested');
      },
      stopWalReceiver: () => this.standbyRole?.stopWalReceiver(),
      wakeReplayForPromotion: () => this.standbyRole?.wakeReplay(),
      recordReplayCaughtUp: () => this.failover.mark('replayCaughtUp'),
      writeEndOfRecovery: () => this.writeEndOfRecovery(),
      openForWrites: () => this.openForWrites(),
      requestCheckpoint: () => {
        this.clock.defer(() => {
          this.primary()
            .requestedCheckpoint()
            .then(
              () => {
                this.failover.mark('firstCheckpointDone');
                this.notify({ type: 'CHECKPOINT_DONE' });
              },
              (e: unknown) => {
                if (e instanceof InvariantViolation) this.fatal(e);
                else
                  this.opts.log(`LOG:  end-of-recovery checkpoint failed: ${(e as Error).message}`);
              },
            );
        });
      },
      recordCheckpointDone: () => {},
      beginShutdown: () => {},
    };
    for (const name of Object.keys(effects) as LifecycleActionName[]) {
      const effect = effects[name]!;
      effects[name] = () => {
        this.faults.beforeLifecycleAction(name);
        effect();
      };
    }
    return effects;
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
    this.control = { ...this.control, ...patch };
    writeControlFile(this.dataDir, this.control, this.disk, this.clock.now());
  }

  /**
   * RemoveOldXlogFiles after a checkpoint or restartpoint with this REDO point, WAL ending at
   * `endLsn`, keeping what a connected standby still needs (KeepLogSeg).
   */
  private removeOldWal(redoLsn: Lsn, endLsn: Lsn): void {
    this.checkpointer.removeOldWal(redoLsn, endLsn, this.walsenders.keepLsn(), this.timeline);
  }

  /** The newest timeline id with a history file or WAL segment here (findNewestTimeLine). */
  private newestTimeline(): TimeLineId {
    let newest = this.timeline;
    for (const f of this.disk.readdir(path.join(this.dataDir, 'pg_wal'))) {
      const m = /^([0-9A-F]{8})\.history$/.exec(f);
      if (m) newest = Math.max(newest, parseInt(m[1]!, 16));
    }
    for (const seg of listSegmentFiles(this.dataDir, this.config.walSegmentSize, this.disk))
      newest = Math.max(newest, seg.tli);
    return newest;
  }

  /** End of recovery: stop replay, switch to a new timeline, log END_OF_RECOVERY and flush it. */
  private writeEndOfRecovery(): void {
    const end = this.standby().finishReplay();
    if (end.nextLsn < this.wal.insertLsn) {
      // Replay stopped before the end of received WAL (an invalid record): EndOfLog is the end of
      // the last valid record, so the new timeline branches there, not after the garbage.
      this.opts.log(
        `LOG:  end of recovery at ${formatLsn(end.nextLsn)}, before the invalid WAL received up to ${formatLsn(this.wal.insertLsn)}`,
      );
      this.wal.truncate(end.nextLsn, end.lastRecordLsn);
    }
    const prevTimeline = this.timeline;
    const newTimeline = this.newestTimeline() + 1;
    // The first WAL this node writes itself: a failed write or fsync PANICs, as on a primary.
    const walIo = <T>(fn: () => T): T => walIoOrPanic(fn, (e) => this.fatal(e));
    walIo(() => this.wal.switchTimeline(newTimeline, 'no recovery target specified'));
    this.failover.countEndOfRecovery('timelineHistoryFiles');
    this.failover.countEndOfRecovery('walSegmentInits');
    this.timeline = newTimeline;
    walIo(() =>
      this.wal.insert(
        { kind: 'END_OF_RECOVERY', newTimeline, prevTimeline, time: this.clock.now() },
        0,
      ),
    );
    this.failover.countEndOfRecovery('records');
    walIo(() => this.wal.flush());
    this.failover.countEndOfRecovery('walFlushes');
    this.failover.newTimeline = newTimeline;
    this.failover.mark('endOfRecoveryWritten');
    this.opts.log(`LOG:  selected new timeline ID: ${newTimeline}`);
    queueMicrotask(() => this.notify({ type: 'END_OF_RECOVERY_WRITTEN' }));
  }

  /** The node accepts writes: sizes are no longer trusted (not in recovery), standby.signal goes. */
  private openForWrites(): void {
    this.storage.endRecovery();
    // durable_unlink: without the directory fsync a crash could bring standby.signal back and
    // restart the promoted node as a standby.
    this.disk.rmrf(path.join(this.dataDir, STANDBY_SIGNAL));
    this.disk.fsyncDir(this.dataDir);
    this.updateControl({ state: 'in production', timeline: this.timeline });
    this.failover.countOpenForWrites('controlFileUpdates');
    this.failover.mark('readWrite');
    this.checkpointer.start();
    this.opts.log('LOG:  database system is ready to accept connections');
  }

  /**
   * pg_basebackup from this running node into `targetDir`: a checkpoint (a restartpoint on a
   * standby, as pg_basebackup from a standby does), then a copy of the data image, control file and
   * WAL made without yielding to the event loop (so nothing changes in between), marked as a
   * standby. The copy streams the rest from whichever node it is pointed at.
   */
  async baseBackup(targetDir: string): Promise<{ checkpointLsn: string; timeline: TimeLineId }> {
    if (
      this.disk.exists(targetDir) &&
      this.disk.readdir(targetDir).some((f) => f !== 'walsim.conf.json')
    ) {
      throw new WalsimError(
        'invalid_input',
        `base backup target "${targetDir}" exists and is not empty`,
        '58P02',
      );
    }
    const copy = () => {
      // pg_basebackup -X stream: only the WAL from the backup checkpoint's REDO point on.
      const walFiles = walFilesForBaseBackup(
        this.dataDir,
        this.wal.segmentSize,
        this.control.redoLsn,
        this.timeline,
        this.disk,
      );
      copyDataDirectory(this.dataDir, targetDir, this.disk, walFiles);
      writeFileSynced(path.join(targetDir, STANDBY_SIGNAL), '', this.disk);
      return { checkpointLsn: formatLsn(this.control.checkpointLsn), timeline: this.timeline };
    };
    return this.writeLock.run(async () => {
      if (this.inRecovery) await this.standby().restartpoint();
      else await this.primary().checkpoint('CHECKPOINT_ONLINE');
      return copy();
    });
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
    return this.failover.report();
  }

  readOptions(): WalReadOptions {
    return { timeline: this.timeline, segmentSize: this.config.walSegmentSize, disk: this.disk };
  }

  /** Load the data image, replay local WAL from its REDO point, open WAL for writing. */
  static open(opts: NodeOptions): ServerNode {
    const r = replayLocalWal(opts.dataDir, opts.config, opts.env.disk, opts.log);
    return new ServerNode(opts, r.storage, r.wal, r.control, r.startupReplay);
  }

  /** Start the role: a primary opens for writes (after an end-of-recovery checkpoint); a standby streams. */
  async startRole(): Promise<void> {
    if (!this.inRecovery) return this.primary().start(this.startupReplay.crashRecovery);
    this.standby().start();
  }

  /**
   * The upstream's timeline went on as `tli` at `switchLsn`, which this standby has flushed: store
   * the history file, continue this node's WAL on `tli` (rescanning for the latest timeline, as
   * recovery_target_timeline = 'latest' does), and let cascading walsenders end the old timeline.
   */
  private followTimeline(tli: TimeLineId, historyText: string, switchLsn: Lsn): void {
    assert(this.inRecovery, 'INV-NODE-5: only a standby follows an upstream timeline');
    assert(
      this.wal.flushLsn === switchLsn && this.wal.insertLsn === switchLsn,
      `INV-NODE-5: timeline switch at ${formatLsn(switchLsn)} but WAL ends at ${formatLsn(this.wal.insertLsn)}`,
    );
    writeTimelineHistoryFile(this.dataDir, tli, historyText, this.disk);
    this.wal.switchTimeline(tli);
    const prev = this.timeline;
    this.timeline = tli;
    this.updateControl({ timeline: tli });
    this.opts.log(`LOG:  switched from timeline ${prev} to ${tli} at ${formatLsn(switchLsn)}`);
    this.walsenders.pumpAll();
  }

  // ---------------------------------------------------------------- walsender side

  /**
   * A replication connection. On a primary a walsender streams this node's WAL; on a standby it is
   * a cascading walsender streaming what this node has received and flushed (never synchronous).
   */
  acceptReplication(conn: MessageConn): void {
    const sender = new WalSender(conn, {
      dataDir: this.dataDir,
      clock: this.clock,
      flushedLsn: () => this.wal.flushLsn,
      timeline: () => this.timeline,
      history: () => this.history(),
      readOptions: () => this.readOptions(),
      checkStart: (startLsn, timeline, applicationName, self) =>
        this.checkStartReplication(startLsn, timeline, applicationName, self),
      onReply: (s) => this.walsenders.onReply(s),
      onClose: (s) => this.walsenders.remove(s),
      log: this.opts.log,
    });
    this.walsenders.add(sender);
  }

  private historyCache: { tli: TimeLineId; entries: TimelineHistoryEntry[] } | null = null;

  /** The history of the current timeline (readTimeLineHistory), cached per timeline. */
  history(): readonly TimelineHistoryEntry[] {
    if (this.historyCache?.tli !== this.timeline)
      this.historyCache = {
        tli: this.timeline,
        entries: readTimelineHistory(this.dataDir, this.timeline, this.disk),
      };
    return this.historyCache.entries;
  }

  /** The walsender's timeline checks passed; these are the node's (walsender.c StartReplication). */
  private checkStartReplication(
    startLsn: Lsn,
    timeline: TimeLineId,
    applicationName: string,
    self: WalSender,
  ): string | null {
    if (this.shuttingDown !== null) return 'the database system is shutting down';
    if (timeline === this.timeline && startLsn > this.wal.flushLsn) {
      return `requested starting point ${formatLsn(startLsn)} is ahead of the WAL flush position of this server ${formatLsn(this.wal.flushLsn)}`;
    }
    // CheckXLogRemoved: a checkpoint removed the segment the standby would start in.
    const startSegno = segmentOf(startLsn, this.config.walSegmentSize);
    if (startLsn < this.wal.flushLsn && startSegno <= this.checkpointer.lastRemovedSegno) {
      return walSegmentRemovedMessage(
        startSegno,
        readTimelineHistory(this.dataDir, this.timeline, this.disk),
        this.config.walSegmentSize,
      );
    }
    this.walsenders.startStreaming(self, this.inRecovery);
    if (applicationName !== '' && self.priority > 0) {
      // walsim refuses a second synchronous candidate under a name already streaming (PostgreSQL
      // accepts it and orders the two by slot): a stray client must not speak for a standby.
      for (const s of this.walsenders.senders()) {
        if (
          s !== self &&
          s.state !== 'startup' &&
          s.applicationName.toLowerCase() === applicationName.toLowerCase()
        ) {
          return `a standby named "${applicationName}" is already streaming`;
        }
      }
    }
    return null;
  }

  // ---------------------------------------------------------------- SQL

  /**
   * Transaction status as a reading session sees it: a transaction whose commit waits for
   * synchronous replication is still in progress for everyone else (xact.c: the proc array entry
   * goes only after SyncRepWaitForLSN), although CLOG already says committed.
   */
  snapshotClog(): XactStatusReader {
    return inProgressView(this.storage.clog, this.syncRep.waitingXids());
  }

  /** Run one statement. `signal` is a cancel request (pg_cancel_backend); waits end on it with 57014. */
  async execute(sql: string, signal?: AbortSignal): Promise<QueryResult> {
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
    if (stmt.type === 'select_function' && stmt.fn === 'pg_promote') {
      const [wait = true, waitSeconds = 60] = stmt.args;
      if (typeof wait !== 'boolean' || typeof waitSeconds !== 'number') {
        throw new WalsimError(
          'invalid_input',
          'function pg_promote takes (wait boolean, wait_seconds integer)',
          '42883',
        );
      }
      return {
        command: 'SELECT 1',
        columns: ['pg_promote'],
        rows: [{ pg_promote: await this.promote(wait, waitSeconds, signal) }],
      };
    }
    if (stmt.type === 'checkpoint') {
      if (this.inRecovery) {
        await this.standby().restartpoint();
        return { command: 'CHECKPOINT', columns: [], rows: [] };
      }
      return this.primary().runWrite(stmt, signal);
    }
    if (stmt.type === 'alter_system') {
      if (!(RELOADABLE_SETTINGS as readonly string[]).includes(stmt.name)) {
        const known = ['shared_buffers', 'wal_segment_size', 'hot_standby', 'autovacuum'].includes(
          stmt.name,
        );
        if (known)
          throw new WalsimError(
            'invalid_input',
            `walsim cannot change "${stmt.name}" with ALTER SYSTEM (it can: ${RELOADABLE_SETTINGS.join(', ')})`,
            '0A000',
          );
        throw new WalsimError(
          'invalid_input',
          `unrecognized configuration parameter "${stmt.name}"`,
          '42704',
        );
      }
      alterSystem(this.dataDir, stmt.name as ReloadableSetting, stmt.value, this.disk);
      return { command: 'ALTER SYSTEM', columns: [], rows: [] };
    }
    if (stmt.type === 'select_function' && stmt.fn === 'pg_reload_conf') {
      if (stmt.args.length > 0)
        throw new WalsimError(
          'invalid_input',
          'function pg_reload_conf() takes no arguments',
          '42883',
        );
      this.reloadConfig();
      return { command: 'SELECT 1', columns: ['pg_reload_conf'], rows: [{ pg_reload_conf: true }] };
    }
    return executeRead(this, stmt);
  }

  /**
   * SIGHUP / pg_reload_conf(): re-read the settings (walsim.conf.json + ALTER SYSTEM's) and apply
   * what changed: synchronous_standby_names (every walsender's priority, then release),
   * synchronous_commit, primary_conninfo (the walreceiver restarts towards the new upstream at its
   * flush LSN, as PostgreSQL 13+ does). A value that no longer parses is ignored with a log line,
   * like a bad postgresql.conf line on reload.
   */
  reloadConfig(): void {
    let next: NodeConfig;
    try {
      next = loadNodeConfig(this.dataDir, this.disk);
    } catch (e) {
      this.opts.log(
        `LOG:  configuration file contains errors; unaffected changes were applied: ${(e as Error).message}`,
      );
      return;
    }
    const prev = this.config;
    this.config = next;
    this.opts.log('LOG:  received SIGHUP, reloading configuration files');
    if (next.synchronousStandbyNames !== prev.synchronousStandbyNames) {
      this.opts.log(
        `LOG:  parameter "synchronous_standby_names" changed to "${next.synchronousStandbyNames}"`,
      );
      this.walsenders.reload(parseSynchronousStandbyNames(next.synchronousStandbyNames));
    }
    if (next.synchronousCommit !== prev.synchronousCommit)
      this.opts.log(`LOG:  parameter "synchronous_commit" changed to "${next.synchronousCommit}"`);
    const upstreamChanged =
      next.primaryHost !== prev.primaryHost ||
      next.primaryPort !== prev.primaryPort ||
      next.applicationName !== prev.applicationName;
    if (upstreamChanged && this.inRecovery && this.standbyRole !== null) {
      this.opts.log(`LOG:  parameter "primary_conninfo" changed; restarting the walreceiver`);
      this.standbyRole.restartWalReceiver();
    }
  }

  /**
   * pg_promote(wait, wait_seconds): trigger promotion; with wait, poll 10 times a second until the
   * node is out of recovery (true) or wait_seconds pass (WARNING "server did not promote within
   * %d seconds", false).
   */
  async promote(wait = true, waitSeconds = 60, signal?: AbortSignal): Promise<boolean> {
    // xlogfuncs.c checks recovery first: pg_promote(true, 0) on a primary is 55000, not 22023.
    const refused = refusalOf(this.lifecycle.getSnapshot(), 'PROMOTE');
    if (refused) throw refused;
    if (!Number.isInteger(waitSeconds) || waitSeconds <= 0) {
      throw new WalsimError(
        'invalid_input',
        '"wait_seconds" must not be negative or zero',
        '22023',
      );
    }
    if (this.lifecycle.getSnapshot().matches('recovery')) this.send({ type: 'PROMOTE' });
    if (!wait) return true;
    for (let i = 0; i < waitSeconds * 10; i++) {
      if (!this.inRecovery) return true;
      if (signal?.aborted)
        throw new WalsimError('canceled', 'canceling statement due to user request', '57014');
      await this.clock.sleep(i === 0 ? 1 : 100);
    }
    this.opts.log(`WARNING:  server did not promote within ${waitSeconds} seconds`);
    return false;
  }

  // ---------------------------------------------------------------- status and shutdown

  /** Status requests answered while a data image was being written (checkpoint or restartpoint). */
  private statusDuringImageWrite = 0;

  status(): NodeStatus {
    if (this.storage.imageWriteInProgress) this.statusDuringImageWrite++;
    const drop = this.storage.dropCounters;
    const snap = this.lifecycle.getSnapshot();
    const common: NodeCommonStatus = {
      lifecycle: describeState(snap),
      failover: this.failoverReport(),
      inRecovery: this.inRecovery,
      timeline: this.timeline,
      sharedBuffers: formatSharedBuffers(this.nBuffers),
      nBuffers: this.nBuffers,
      dropStrategy: this.config.dropStrategy,
      drop: {
        drops: { ...drop.drops },
        scanned: drop.scanned,
        probes: drop.probes,
        invalidated: drop.invalidated,
        bsearchScans: drop.bsearchScans,
        elapsedMsByPath: { ...this.storage.dropBusyMs },
      },
      startupReplay: this.startupReplay,
      insertLsn: formatLsn(this.wal.insertLsn),
      flushLsn: formatLsn(this.wal.flushLsn),
      synchronousStandbyNames: this.config.synchronousStandbyNames,
      checkpointer: { ...this.checkpointer.stats },
      dataImage: {
        writes: this.storage.imagesWritten,
        inProgress: this.storage.imageWriteInProgress,
        last: this.storage.lastImageWrite,
        statusAnsweredDuringWrite: this.statusDuringImageWrite,
      },
      walFiles: listSegmentFiles(this.dataDir, this.config.walSegmentSize, this.disk).length,
      replication: this.walsenders.statusRows(this.wal.flushLsn),
      faultsInjected: { ...this.faults.injected },
      slowDisk: this.disk instanceof LatencyDisk ? { ...this.disk.latency.counters } : null,
    };
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

  /**
   * The node's logical and physical state, for comparing nodes in tests and tools: per table its
   * rows, content digest, fork sizes and buffered blocks; and buffers that hold a block which no
   * longer exists (must always be none).
   */
  inspect(): NodeInspection {
    const { heap, clog, smgr, pool, catalog } = this.storage;
    const tables = catalog.tables().map(([name, rel]) => {
      const forks = [0, 1, 2, 3].map((f) =>
        smgr.exists(rel, f as ForkNumber) ? smgr.diskNblocks(rel, f as ForkNumber) : null,
      );
      return {
        name,
        rel,
        rows: heap.hasRelation(rel) ? heap.countVisible(rel, clog) : 0,
        digest: heap.hasRelation(rel) ? heap.contentDigest(rel, clog) : '',
        forks,
        buffered: pool.bufferedBlocks(rel).map((b) => `${b.fork}:${b.block}`),
      };
    });
    return {
      tables,
      orphanBuffers: this.storage.orphanBuffers(),
      relations: smgr.relations(),
      usedBuffers: pool.usedBuffers,
    };
  }

  noteDrop(cb: ((r: DropResult) => void) | null): void {
    this.storage.onDrop = cb;
  }
}
