/**
 * A walsim server node: composes the engine (WAL, storage) with a role. A primary executes writes
 * and runs walsenders; a standby (standby.signal in its data directory) runs the walreceiver and
 * the startup process and answers read-only queries. Start-up is "load the last data image, then
 * replay local WAL from its REDO point"; after an unclean stop that replay is crash recovery.
 *
 * Ordering rules: a record is inserted into WAL before its redo is applied locally; a walsender
 * sends only flushed WAL; a commit returns only after the flush/remote wait synchronous_commit
 * requires; a standby replays only WAL its walreceiver has flushed.
 */
import * as path from 'node:path';
import { assert, InvariantViolation } from '../common/assert.ts';
import { systemClock, type Clock, type TimerHandle } from '../common/clock.ts';
import { nodeDisk, type Disk } from '../common/disk.ts';
import { LatencyDisk } from '../common/latency-disk.ts';
import type { Dialer, MessageConn } from '../common/transport.ts';
import { writeFileSynced } from '../common/durable-file.ts';
import { WalsimError, isWalsimError } from '../common/errors.ts';
import { formatLsn, type Lsn, type TimeLineId } from '../wal/lsn.ts';
import { maxAlign } from '../wal/codec.ts';
import type { ForkNumber, WalRecord, WalRecordBody, TransactionId, RelFileNumber } from '../wal/records.ts';
import { WalWriter } from '../wal/wal-writer.ts';
import { readWal, walSegmentRemovedMessage, type WalReadOptions } from '../wal/wal-reader.ts';
import { NodeStorage } from '../storage/node-storage.ts';
import { redo, replayRecordSteps } from '../storage/redo.ts';
import { runSteps } from '../storage/drop.ts';
import { inProgressView, type XactStatusReader } from '../storage/clog.ts';
import { parseSharedBuffers, formatSharedBuffers } from '../storage/shared-buffers.ts';
import type { DropResult, DropSettings } from '../storage/drop.ts';
import { executeWrite, heapPlannerOf, type ExecutorContext } from '../primary/executor.ts';
import { SyncRepQueue, waitModeFor, type Notice } from '../primary/syncrep.ts';
import { WalSender } from '../primary/walsender.ts';
import { WalSenderSet } from '../primary/walsender-set.ts';
import { parseSynchronousStandbyNames } from '../primary/sync-standby-names.ts';
import { StartupProcess } from '../standby/startup.ts';
import { WalReceiver } from '../standby/walreceiver.ts';
import { createActor, type Actor } from 'xstate';
import {
  describeState, isInRecovery, lifecycleMachine, pauseStateOf, refusalOf, type LifecycleEvent,
} from '../standby/lifecycle-machine.ts';
import { FailoverClock } from '../standby/failover-clock.ts';
import { withModel, type FailoverReport } from '../standby/failover-report.ts';
import { replayCountsOf } from '../storage/cost-model/counts.ts';
import { defaultCostProfile } from '../storage/cost-model/profile.ts';
import { listSegmentFiles, readTimelineHistory, segmentOf, writeTimelineHistoryFile, type TimelineHistoryEntry } from '../wal/segment.ts';
import { parseStatement, writeCommandName } from './sql-parser.ts';
import type { FaultName, QueryResult, StopMode } from './control-protocol.ts';
import { readControlFile, writeControlFile, type ControlFile } from './control-file.ts';
import { executeRead } from './sql-functions.ts';
import { wsReplicationDialer } from './ws-conn.ts';
import { alterSystem, copyDataDirectory, loadNodeConfig, RELOADABLE_SETTINGS, walSettingsOf, type NodeConfig, type ReloadableSetting } from './cluster-files.ts';
import { Checkpointer } from './checkpointer.ts';
import type { NodeCommonStatus, NodeStatus } from './node-status.ts';
import { primaryStatusOf } from '../primary/primary-status.ts';
import { standbyStatusOf } from '../standby/standby-status.ts';

export const STANDBY_SIGNAL = 'standby.signal';

/** findNewestTimeLine for recovery: the newest timeline with a history file that contains `tli`. */
export function latestTimeline(dataDir: string, tli: TimeLineId, disk: Disk = nodeDisk): TimeLineId {
  let newest = tli;
  let names: string[] = [];
  try {
    names = disk.readdir(path.join(dataDir, 'pg_wal'));
  } catch {
    return tli;
  }
  for (const f of names) {
    const m = /^([0-9A-F]{8})\.history$/.exec(f);
    if (!m) continue;
    const t = parseInt(m[1]!, 16);
    if (t > newest && readTimelineHistory(dataDir, t, disk).some((h) => h.tli === tli)) newest = t;
  }
  return newest;
}

export interface NodeInspection {
  tables: Array<{ name: string; rel: number; rows: number; digest: string; forks: Array<number | null>; buffered: string[] }>;
  orphanBuffers: string[];
  relations: number[];
  usedBuffers: number;
}

/** A FIFO mutex: write statements run one at a time (walsim has no concurrent writers). */
class Mutex {
  private tail: Promise<void> = Promise.resolve();
  run<T>(fn: () => Promise<T>): Promise<T> {
    const result = this.tail.then(fn);
    this.tail = result.then(() => undefined, () => undefined);
    return result;
  }
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
  /** Clock and disk; Node's clock and node:fs when omitted. */
  env?: NodeEnv;
  /** Replication connections to the upstream; ws to config.primaryHost:primaryPort when omitted. */
  connect?: Dialer;
}

/**
 * Everything nondeterministic the node core uses, injected: clock and timers, the file system, and
 * the dialer to the upstream. Production (server/main.ts) takes the defaults — Node's clock, node:fs
 * and ws; the simulator (sim/) passes its scheduler, in-memory disk and in-memory network.
 */
export interface NodeEnv {
  clock: Clock;
  disk: Disk;
}

export const PRODUCTION_ENV: NodeEnv = { clock: systemClock, disk: nodeDisk };

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
  readonly lifecycle: Actor<typeof lifecycleMachine>;
  readonly failover: FailoverClock;
  shuttingDown: StopMode | null = null;
  /**
   * Observer of acknowledged commits (the simulator's ledger checks the synchronous standby's
   * positions against `endLsn` at this instant); null in production.
   */
  onCommitAcknowledged: ((endLsn: Lsn) => void) | null = null;
  /** Records replayed at start (crash recovery or catch-up from local WAL). */
  readonly startupReplay: { records: number; fromLsn: string; toLsn: string; crashRecovery: boolean };

  // primary role
  readonly syncRep: SyncRepQueue;
  /** Every walsender of this node: on a primary, and on a standby serving cascaded standbys. */
  readonly walsenders: WalSenderSet;
  private readonly writeLock = new Mutex();
  private asyncFlushTimer: TimerHandle | null = null;
  /** WARNINGs for the write statement running now (a cancelled synchronous-replication wait). */
  private statementNotices: Notice[] = [];
  /** The cancel signal of the write statement running now (its commits' waits end on it). */
  private writeSignal: AbortSignal | undefined;
  /** Fault `redo_fail`: the next record this node applies throws an InvariantViolation. */
  private redoFaultArmed = false;

  /** Automatic checkpoints and WAL removal (checkpoint_timeout, max_wal_size, wal_keep_size). */
  readonly checkpointer: Checkpointer;
  /** End of the last checkpoint record this node wrote: no WAL since means a timed checkpoint is skipped. */
  private lastCheckpointEnd: Lsn = 0;

  // standby role
  startup: StartupProcess | null = null;
  receiver: WalReceiver | null = null;

  private constructor(readonly opts: NodeOptions, storage: NodeStorage, wal: WalWriter, control: ControlFile, startupReplay: ServerNode['startupReplay']) {
    this.dataDir = opts.dataDir;
    this.config = opts.config;
    this.clock = (opts.env ?? PRODUCTION_ENV).clock;
    this.disk = (opts.env ?? PRODUCTION_ENV).disk;
    this.storage = storage;
    this.wal = wal;
    this.control = control;
    this.timeline = control.timeline;
    this.nBuffers = storage.pool.nBuffers;
    this.failover = new FailoverClock(
      () => this.storage.dropStats, () => this.startup?.recordsReplayed ?? 0, () => replayCountsOf(this.storage), this.nBuffers, this.clock,
    );
    this.lifecycle = createActor(lifecycleMachine.provide({ actions: this.lifecycleEffects() }), {
      input: { inRecovery: this.disk.exists(path.join(this.dataDir, STANDBY_SIGNAL)) },
    });
    this.lifecycle.start();
    this.syncRep = new SyncRepQueue(() => this.clock.now());
    this.walsenders = new WalSenderSet(this.syncRep, parseSynchronousStandbyNames(opts.config.synchronousStandbyNames), opts.log);
    this.startupReplay = startupReplay;
    this.checkpointer = new Checkpointer({
      dataDir: this.dataDir,
      clock: this.clock,
      disk: this.disk,
      segmentSize: this.config.walSegmentSize,
      settings: walSettingsOf(this.config),
      canCheckpoint: () => !this.inRecovery && this.shuttingDown === null,
      walSinceLastCheckpoint: () => this.wal.insertLsn > this.lastCheckpointEnd,
      redoLsn: () => this.control.redoLsn,
      runCheckpoint: () => this.writeLock.run(() => this.checkpoint('CHECKPOINT_ONLINE')),
      log: opts.log,
    });
  }

  /** pg_is_in_recovery(), read from the lifecycle machine. */
  get inRecovery(): boolean {
    return isInRecovery(this.lifecycle.getSnapshot());
  }

  send(event: LifecycleEvent): void {
    this.lifecycle.send(event);
  }

  /** Side effects of lifecycle transitions (see standby/lifecycle-machine.ts). */
  private lifecycleEffects() {
    return {
      requestReplayPause: () => this.startup?.wakeup(),
      resumeReplay: () => this.startup?.wakeup(),
      recordResumeRequested: () => this.failover.resumeRequested(),
      recordReplayResumed: () => this.failover.mark('replayResumed'),
      recordPromoteRequested: () => {
        this.opts.log('LOG:  received promote request');
        this.failover.mark('promoteRequested');
      },
      stopWalReceiver: () => {
        // Finish replaying what was received, nothing more: the primary may be gone.
        this.receiver?.stop();
      },
      wakeReplayForPromotion: () => this.startup?.wakeup(),
      recordReplayCaughtUp: () => this.failover.mark('replayCaughtUp'),
      writeEndOfRecovery: () => this.writeEndOfRecovery(),
      openForWrites: () => this.openForWrites(),
      requestCheckpoint: () => {
        this.clock.defer(() => {
          this.writeLock.run(() => this.checkpoint('CHECKPOINT_ONLINE')).then(
            () => {
              this.failover.mark('firstCheckpointDone');
              this.send({ type: 'CHECKPOINT_DONE' });
            },
            (e: unknown) => {
              if (e instanceof InvariantViolation) this.opts.fatal(e);
              else this.opts.log(`LOG:  end-of-recovery checkpoint failed: ${(e as Error).message}`);
            },
          );
        });
      },
      recordCheckpointDone: () => {},
      beginShutdown: () => {},
    };
  }

  /** The newest timeline id with a history file or WAL segment here (findNewestTimeLine). */
  private newestTimeline(): TimeLineId {
    let newest = this.timeline;
    for (const f of this.disk.readdir(path.join(this.dataDir, 'pg_wal'))) {
      const m = /^([0-9A-F]{8})\.history$/.exec(f);
      if (m) newest = Math.max(newest, parseInt(m[1]!, 16));
    }
    for (const seg of listSegmentFiles(this.dataDir, this.config.walSegmentSize, this.disk)) newest = Math.max(newest, seg.tli);
    return newest;
  }

  /** End of recovery: stop replay, switch to a new timeline, log END_OF_RECOVERY and flush it. */
  private writeEndOfRecovery(): void {
    const s = this.startup;
    s?.finish();
    if (s !== null && s.nextLsn < this.wal.insertLsn) {
      // Replay stopped before the end of received WAL (an invalid record): EndOfLog is the end of
      // the last valid record, so the new timeline branches there, not after the garbage.
      this.opts.log(`LOG:  end of recovery at ${formatLsn(s.nextLsn)}, before the invalid WAL received up to ${formatLsn(this.wal.insertLsn)}`);
      this.wal.truncate(s.nextLsn, s.lastRecordLsn);
    }
    const prevTimeline = this.timeline;
    const newTimeline = this.newestTimeline() + 1;
    this.wal.switchTimeline(newTimeline, 'no recovery target specified');
    this.failover.countEndOfRecovery('timelineHistoryFiles');
    this.failover.countEndOfRecovery('walSegmentInits');
    this.timeline = newTimeline;
    this.wal.insert({ kind: 'END_OF_RECOVERY', newTimeline, prevTimeline, time: this.clock.now() }, 0);
    this.failover.countEndOfRecovery('records');
    this.wal.flush();
    this.failover.countEndOfRecovery('walFlushes');
    this.failover.newTimeline = newTimeline;
    this.failover.mark('endOfRecoveryWritten');
    this.opts.log(`LOG:  selected new timeline ID: ${newTimeline}`);
    queueMicrotask(() => this.send({ type: 'END_OF_RECOVERY_WRITTEN' }));
  }

  /** The node accepts writes: sizes are no longer trusted (not in recovery), standby.signal goes. */
  private openForWrites(): void {
    this.storage.endRecovery();
    // durable_unlink: without the directory fsync a crash could bring standby.signal back and
    // restart the promoted node as a standby.
    this.disk.rmrf(path.join(this.dataDir, STANDBY_SIGNAL));
    this.disk.fsyncDir(this.dataDir);
    this.control = { ...this.control, state: 'in production', timeline: this.timeline };
    this.writeControl();
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
    if (this.disk.exists(targetDir) && this.disk.readdir(targetDir).some((f) => f !== 'walsim.conf.json')) {
      throw new WalsimError('invalid_input', `base backup target "${targetDir}" exists and is not empty`, '58P02');
    }
    return this.writeLock.run(async () => {
      if (this.inRecovery) await this.restartpoint();
      else await this.checkpoint('CHECKPOINT_ONLINE');
      copyDataDirectory(this.dataDir, targetDir, this.disk);
      writeFileSynced(path.join(targetDir, STANDBY_SIGNAL), '', undefined, this.disk);
      return { checkpointLsn: formatLsn(this.control.checkpointLsn), timeline: this.timeline };
    });
  }

  /** Faults injected so far, by name (status). */
  readonly faultsInjected: Record<FaultName, number> = { cut_replication: 0, wal_write_fail: 0, redo_fail: 0, slow_disk: 0 };

  /**
   * Fault injection for tests (standbys only): cut the walreceiver's connection and hold it down
   * for holdMs, or make every WAL write fail with ENOSPC for holdMs (a full disk); on any node,
   * make every write and fsync latencyMs slower for holdMs (slow_disk, common/latency-disk.ts).
   */
  injectFault(fault: FaultName, holdMs: number, latencyMs = 100): { injected: FaultName } {
    if (fault === 'slow_disk') {
      if (!(this.disk instanceof LatencyDisk)) throw new WalsimError('invalid_input', 'slow_disk needs a disk with a latency layer (the server process binds one)');
      this.disk.latency.set(latencyMs, latencyMs, holdMs, this.clock.monoMs());
      this.faultsInjected[fault]++;
      return { injected: fault };
    }
    if (fault === 'redo_fail') {
      this.redoFaultArmed = true;
      this.faultsInjected[fault]++;
      return { injected: fault };
    }
    if (this.receiver === null || !this.inRecovery) throw new WalsimError('invalid_input', `${fault} needs a standby with a walreceiver`);
    if (fault === 'cut_replication') this.receiver.cutConnection(holdMs);
    if (fault === 'wal_write_fail') {
      const until = this.clock.monoMs() + holdMs;
      this.wal.writeFaultHook = () => {
        if (this.clock.monoMs() >= until) {
          this.wal.writeFaultHook = null;
          return;
        }
        throw Object.assign(new Error('ENOSPC: no space left on device, write (injected fault)'), { code: 'ENOSPC' });
      };
    }
    this.faultsInjected[fault]++;
    return { injected: fault };
  }

  /** Fault `redo_fail`: throw (once) where the next record would be applied. */
  private injectedRedoFailure(at: Lsn): void {
    if (!this.redoFaultArmed) return;
    this.redoFaultArmed = false;
    throw new InvariantViolation(`INV-FAULT: injected redo failure applying the record ending at ${formatLsn(at)}`);
  }

  /** The failover report, with the model of its counts under the default cost profile. */
  failoverReport(): FailoverReport | null {
    const r = this.failover.report();
    return r === null ? null : withModel(r, defaultCostProfile());
  }

  readOptions(): WalReadOptions {
    return { timeline: this.timeline, segmentSize: this.config.walSegmentSize, disk: this.disk };
  }

  static dropSettingsOf(config: NodeConfig): DropSettings {
    return { strategy: config.dropStrategy, thresholdDivisor: config.thresholdDivisor, forceOptimized: config.forceOptimized };
  }

  /** Load the data image, replay local WAL from its REDO point, open WAL for writing. */
  static open(opts: NodeOptions): ServerNode {
    const { dataDir, config } = opts;
    const env = opts.env ?? PRODUCTION_ENV;
    let control = readControlFile(dataDir, env.disk);
    if (env.disk.exists(path.join(dataDir, STANDBY_SIGNAL))) {
      // recovery_target_timeline = 'latest': follow the newest timeline whose history holds ours.
      const latest = latestTimeline(dataDir, control.timeline, env.disk);
      if (latest !== control.timeline) {
        opts.log(`LOG:  recovery follows the latest timeline ${latest} (pg_control names ${control.timeline})`);
        control = { ...control, timeline: latest };
      }
    }
    const { nBuffers } = parseSharedBuffers(config.sharedBuffers);
    const { storage, header } = NodeStorage.loadImage(dataDir, nBuffers, ServerNode.dropSettingsOf(config), env.disk);
    storage.smgr.inRecovery = true; // startup replay runs "in recovery" on every role
    const crashRecovery = control.state !== 'shut down' && control.state !== 'shut down in recovery';
    let nextLsn = header.redoLsn;
    let lastRecordLsn = header.redoPrevLsn;
    let endLsn = header.redoLsn;
    let records = 0;
    const reader = readWal(dataDir, header.redoLsn, { timeline: control.timeline, segmentSize: config.walSegmentSize, disk: env.disk });
    for (const rec of reader) {
      ServerNode.applyRecord(storage, rec);
      lastRecordLsn = rec.lsn;
      endLsn = rec.endLsn;
      nextLsn = maxAlign(rec.endLsn);
      records++;
    }
    if (isWalsimError(reader.endReason)) {
      // Like PostgreSQL, an invalid record ends local WAL; a standby streams the rest again.
      opts.log(`LOG:  invalid record at ${formatLsn(nextLsn)} ends local WAL: ${reader.endReason.message}`);
    }
    const wal = WalWriter.open(dataDir, {
      segmentSize: config.walSegmentSize,
      timeline: control.timeline,
      startLsn: nextLsn,
      prevLsn: lastRecordLsn,
      disk: env.disk,
    });
    const node = new ServerNode(opts, storage, wal, control, {
      records, fromLsn: formatLsn(header.redoLsn), toLsn: formatLsn(endLsn), crashRecovery,
    });
    opts.log(`LOG:  ${crashRecovery ? 'crash recovery' : 'startup'} replayed ${records} records from ${formatLsn(header.redoLsn)} to ${formatLsn(endLsn)}`);
    return node;
  }

  /** Redo one record (start-up replay: no restartpoints). */
  static applyRecord(storage: NodeStorage, rec: WalRecord): void {
    runSteps(replayRecordSteps(storage, rec));
  }

  /**
   * A restartpoint before a replayed checkpoint record whose REDO is its own LSN: the image holds
   * everything before the record, so replay may restart there; then old WAL goes. null for any
   * other record. Replay waits for it; the event loop (clients, the walreceiver) does not.
   */
  private restartpointAt(rec: WalRecord): Promise<void> | null {
    const body = rec.body;
    if ((body.kind !== 'CHECKPOINT_ONLINE' && body.kind !== 'CHECKPOINT_SHUTDOWN') || body.redo !== rec.lsn) return null;
    return this.storage.writeImage(this.dataDir, { redoLsn: rec.lsn, redoPrevLsn: rec.header.prev, timeline: this.timeline }, () => this.clock.yield(), { disk: this.disk, clock: this.clock })
      .then(() => this.removeWalAfterRestartpoint(rec.lsn));
  }

  /** The startup process's redo of one record (with the `redo_fail` fault: fail inside the record). */
  private *replaySteps(rec: WalRecord): Generator<void, void, void> {
    if (this.redoFaultArmed) {
      yield; // fail inside the record, as a long drop would, with the event loop running in between
      this.injectedRedoFailure(rec.endLsn);
    }
    yield* replayRecordSteps(this.storage, rec);
  }

  /** Start the role: primary opens for writes (after an end-of-recovery checkpoint); standby streams. */
  async startRole(upstreamToken: string): Promise<void> {
    if (!this.inRecovery) {
      this.storage.endRecovery();
      if (this.startupReplay.crashRecovery) await this.checkpoint('CHECKPOINT_ONLINE');
      this.control = { ...this.control, state: 'in production' };
      this.writeControl();
      this.checkpointer.start();
      return;
    }
    this.control = { ...this.control, state: 'in archive recovery' };
    this.writeControl();
    const startup = new StartupProcess(
      {
        dataDir: this.dataDir,
        clock: this.clock,
        readOptions: () => this.readOptions(),
        flushedUpTo: () => this.wal.flushLsn,
        applySteps: (rec) => this.replaySteps(rec),
        fatal: (e) => this.opts.fatal(e),
        beforeRecord: (rec) => this.restartpointAt(rec),
        onProgress: () => this.receiver?.sendStatus(),
        pauseRequested: () => pauseStateOf(this.lifecycle.getSnapshot()) !== 'not paused',
        confirmPause: () => this.send({ type: 'PAUSE_CONFIRMED' }),
        caughtUp: () => this.send({ type: 'CAUGHT_UP' }),
        replaying: () => this.send({ type: 'WAL_RECEIVED' }),
        log: this.opts.log,
      },
      { nextLsn: this.wal.insertLsn, replayEndLsn: this.wal.insertLsn, lastRecordLsn: this.wal.lastRecordLsn },
    );
    this.startup = startup;
    startup.start();
    this.upstreamToken = upstreamToken;
    this.startWalReceiver();
  }

  private upstreamToken = '';

  /** Start the walreceiver towards primary_conninfo (none when the node has no upstream). */
  private startWalReceiver(): void {
    const startup = this.startup;
    if (this.config.primaryPort === null || startup === null) return;
    this.receiver = new WalReceiver({
      connect: this.opts.connect ?? wsReplicationDialer(this.config.primaryHost ?? '127.0.0.1', this.config.primaryPort, this.upstreamToken),
      clock: this.clock,
      applicationName: this.config.applicationName,
      wal: this.wal,
      timeline: () => this.timeline,
      applyLsn: () => startup.replayEndLsn,
      onFlushed: () => {
        startup.wakeup();
        this.walsenders.pumpAll(); // cascading walsenders send what was just flushed
      },
      onNewTimeline: (tli, text, switchLsn) => this.followTimeline(tli, text, switchLsn),
      onStateChange: (state) => {
        if (state === 'streaming') this.send({ type: 'UPSTREAM_CONNECTED' });
        else if (state === 'disconnected') this.send({ type: 'UPSTREAM_LOST' });
        else if (state === 'connecting') this.send({ type: 'UPSTREAM_RETRY' });
      },
      log: this.opts.log,
    });
    this.receiver.start();
  }

  /**
   * The upstream's timeline went on as `tli` at `switchLsn`, which this standby has flushed: store
   * the history file, continue this node's WAL on `tli` (rescanning for the latest timeline, as
   * recovery_target_timeline = 'latest' does), and let cascading walsenders end the old timeline.
   */
  private followTimeline(tli: TimeLineId, historyText: string, switchLsn: Lsn): void {
    assert(this.inRecovery, 'INV-NODE-5: only a standby follows an upstream timeline');
    assert(this.wal.flushLsn === switchLsn && this.wal.insertLsn === switchLsn, `INV-NODE-5: timeline switch at ${formatLsn(switchLsn)} but WAL ends at ${formatLsn(this.wal.insertLsn)}`);
    writeTimelineHistoryFile(this.dataDir, tli, historyText, this.disk);
    this.wal.switchTimeline(tli);
    const prev = this.timeline;
    this.timeline = tli;
    this.control = { ...this.control, timeline: tli };
    this.writeControl();
    this.opts.log(`LOG:  switched from timeline ${prev} to ${tli} at ${formatLsn(switchLsn)}`);
    this.walsenders.pumpAll();
  }

  // ---------------------------------------------------------------- primary: WAL and commits

  private executorContext(): ExecutorContext {
    const st = this.storage;
    return {
      catalog: st.catalog,
      heap: heapPlannerOf(st),
      log: (body, xid) => this.logAndApply(body, xid),
      commit: (xid, dropped) => this.commit(xid, dropped),
      checkpoint: () => this.checkpoint('CHECKPOINT_ONLINE'),
      yieldNow: async () => {
        // The WAL writer's job: push WAL out during long statements so standbys keep up.
        this.flushWal();
        await this.clock.yield();
      },
    };
  }

  private logAndApply(body: WalRecordBody, xid: TransactionId): Lsn {
    const { endLsn } = this.wal.insert(body, xid);
    this.injectedRedoFailure(endLsn);
    redo(this.storage, body, xid);
    return endLsn;
  }

  /** XLogFlush, then wake walsenders; past CheckPointSegments of WAL, request a checkpoint. */
  flushWal(): void {
    if (this.wal.flushLsn < this.wal.insertLsn) this.wal.flush();
    this.walsenders.pumpAll();
    this.checkpointer.walFlushed(this.wal.flushLsn);
  }

  /**
   * The oldest WAL position a connected standby still needs: the lowest replay (apply) LSN its
   * walsender holds, 0 (keep everything) until a reconnected standby has replied. PostgreSQL keeps
   * WAL for standbys only through replication slots (from the flush position); walsim has no slots
   * and keeps it for every connected standby from its replay position, because a standby that
   * finds a received record corrupt streams it again from there (RELIABILITY.md). A paused but
   * connected standby therefore holds back removal on the primary. null when none is streaming.
   */
  private standbysKeepLsn(): Lsn | null {
    let keep: Lsn | null = null;
    for (const s of this.walsenders.senders()) {
      if (s.state === 'startup') continue;
      if (keep === null || s.applyLsn < keep) keep = s.applyLsn;
    }
    return keep;
  }

  private async commit(xid: TransactionId, droppedRels: RelFileNumber[]): Promise<void> {
    const endLsn = this.logAndApply({ kind: 'XACT_COMMIT', xactTime: this.clock.now(), droppedRels }, xid);
    const level = this.config.synchronousCommit;
    // RecordTransactionCommit: flush unless synchronous_commit=off, and always when rels are dropped.
    if (level !== 'off' || droppedRels.length > 0) this.flushWal();
    else this.scheduleAsyncFlush();
    const mode = waitModeFor(level);
    if (mode !== null && this.syncRep.enabled) {
      const waiting = this.syncRep.wait(endLsn, mode, xid);
      if (this.writeSignal?.aborted) this.syncRep.cancel(xid); // cancelled before the wait began
      const notice = await waiting;
      if (notice !== null) this.statementNotices.push(notice);
    }
    this.onCommitAcknowledged?.(endLsn);
  }

  /** wal_writer_delay: asynchronous commits reach disk within 200 ms. */
  private scheduleAsyncFlush(): void {
    if (this.asyncFlushTimer) return;
    this.asyncFlushTimer = this.clock.setTimeout(() => {
      this.asyncFlushTimer = null;
      this.flushWal();
    }, 200);
  }

  /** CHECKPOINT on a primary: write the data image for REDO = here, then log the checkpoint record. */
  async checkpoint(kind: 'CHECKPOINT_ONLINE' | 'CHECKPOINT_SHUTDOWN'): Promise<void> {
    assert(!this.inRecovery && this.storage.smgr.inRecovery === false, 'INV-NODE-2: checkpoint records are written only by a primary');
    // WAL before data: the image holds every change up to REDO, so that WAL must be durable first
    // (asynchronous commits may have left it in the WAL buffers); else a power loss could leave an
    // image ahead of the WAL that replay starts from.
    this.flushWal();
    const redoLsn = this.wal.insertLsn;
    const prev = this.wal.lastRecordLsn;
    // The write lock keeps statements out until the record is written; clients, walsenders and
    // reads run while the image is written (only what changed since the last one, in steps).
    await this.storage.writeImage(this.dataDir, { redoLsn, redoPrevLsn: prev, timeline: this.timeline }, () => this.clock.yield(), { disk: this.disk, clock: this.clock });
    assert(this.wal.insertLsn === redoLsn, `INV-NODE-3: WAL was written during the checkpoint's image (${formatLsn(redoLsn)} → ${formatLsn(this.wal.insertLsn)})`);
    const cat = this.storage.catalog;
    const { startLsn } = this.wal.insert({
      kind, redo: redoLsn, timeline: this.timeline, prevTimeline: this.timeline,
      nextXid: cat.nextXid, nextRelFileNumber: cat.nextRelFileNumber, time: this.clock.now(),
    }, 0);
    assert(startLsn === redoLsn, `INV-NODE-3: checkpoint record at ${formatLsn(startLsn)} but REDO ${formatLsn(redoLsn)}`);
    this.flushWal();
    this.control = { ...this.control, checkpointLsn: startLsn, redoLsn, state: kind === 'CHECKPOINT_SHUTDOWN' ? 'shut down' : 'in production' };
    this.writeControl();
    this.lastCheckpointEnd = this.wal.insertLsn;
    // CreateCheckPoint: KeepLogSeg from the end of the checkpoint record, then RemoveOldXlogFiles.
    this.checkpointer.removeOldWal(redoLsn, this.wal.insertLsn, this.standbysKeepLsn(), this.timeline);
    if (kind === 'CHECKPOINT_ONLINE') this.checkpointer.start(); // checkpoint_timeout counts from here
  }

  /** Restartpoint on a standby at the current replay position (CHECKPOINT on a standby, shutdown). */
  async restartpoint(): Promise<void> {
    const s = this.startup;
    if (s === null) return;
    await s.holdReplay(async () => {
      await this.storage.writeImage(this.dataDir, { redoLsn: s.nextLsn, redoPrevLsn: s.lastRecordLsn, timeline: this.timeline }, () => this.clock.yield(), { disk: this.disk, clock: this.clock });
      this.control = { ...this.control, checkpointLsn: s.lastRecordLsn, redoLsn: s.nextLsn };
      this.writeControl();
      this.removeWalAfterRestartpoint(s.nextLsn);
    });
  }

  private writeControl(): void {
    writeControlFile(this.dataDir, this.control, this.disk, this.clock.now());
  }

  /**
   * CreateRestartPoint: KeepLogSeg from the later of receive and replay (and what a cascaded
   * standby streaming from this one still needs), then RemoveOldXlogFiles.
   */
  private removeWalAfterRestartpoint(redoLsn: Lsn): void {
    const replayed = this.startup?.replayEndLsn ?? redoLsn;
    this.checkpointer.removeOldWal(redoLsn, Math.max(this.wal.flushLsn, replayed, redoLsn), this.standbysKeepLsn(), this.timeline);
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
      checkStart: (startLsn, timeline, applicationName, self) => this.checkStartReplication(startLsn, timeline, applicationName, self),
      onReply: (s) => this.walsenders.onReply(s),
      onClose: (s) => this.walsenders.remove(s),
      log: this.opts.log,
    });
    this.walsenders.add(sender);
  }

  private historyCache: { tli: TimeLineId; entries: TimelineHistoryEntry[] } | null = null;

  /** The history of the current timeline (readTimeLineHistory), cached per timeline. */
  history(): readonly TimelineHistoryEntry[] {
    if (this.historyCache?.tli !== this.timeline) this.historyCache = { tli: this.timeline, entries: readTimelineHistory(this.dataDir, this.timeline, this.disk) };
    return this.historyCache.entries;
  }

  /** The walsender's timeline checks passed; these are the node's (walsender.c StartReplication). */
  private checkStartReplication(startLsn: Lsn, timeline: TimeLineId, applicationName: string, self: WalSender): string | null {
    if (this.shuttingDown !== null) return 'the database system is shutting down';
    if (timeline === this.timeline && startLsn > this.wal.flushLsn) {
      return `requested starting point ${formatLsn(startLsn)} is ahead of the WAL flush position of this server ${formatLsn(this.wal.flushLsn)}`;
    }
    // CheckXLogRemoved: a checkpoint removed the segment the standby would start in.
    const startSegno = segmentOf(startLsn, this.config.walSegmentSize);
    if (startLsn < this.wal.flushLsn && startSegno <= this.checkpointer.lastRemovedSegno) {
      return walSegmentRemovedMessage(startSegno, readTimelineHistory(this.dataDir, this.timeline, this.disk), this.config.walSegmentSize);
    }
    this.walsenders.startStreaming(self, this.inRecovery);
    if (applicationName !== '' && self.priority > 0) {
      // walsim refuses a second synchronous candidate under a name already streaming (PostgreSQL
      // accepts it and orders the two by slot): a stray client must not speak for a standby.
      for (const s of this.walsenders.senders()) {
        if (s !== self && s.state !== 'startup' && s.applicationName.toLowerCase() === applicationName.toLowerCase()) {
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
    if (this.shuttingDown !== null) throw new WalsimError('shutting_down', 'the database system is shutting down', '57P03');
    const write = writeCommandName(stmt);
    if (write !== null) {
      if (this.inRecovery) throw new WalsimError('read_only', `cannot execute ${write} in a read-only transaction`, '25006');
      return this.runWrite(() => executeWrite(this.executorContext(), stmt), signal);
    }
    if (stmt.type === 'select_function' && stmt.fn === 'pg_promote') {
      const [wait = true, waitSeconds = 60] = stmt.args;
      if (typeof wait !== 'boolean' || typeof waitSeconds !== 'number') {
        throw new WalsimError('invalid_input', 'function pg_promote takes (wait boolean, wait_seconds integer)', '42883');
      }
      return { command: 'SELECT 1', columns: ['pg_promote'], rows: [{ pg_promote: await this.promote(wait, waitSeconds, signal) }] };
    }
    if (stmt.type === 'checkpoint') {
      if (this.inRecovery) {
        await this.restartpoint();
        return { command: 'CHECKPOINT', columns: [], rows: [] };
      }
      return this.runWrite(() => executeWrite(this.executorContext(), stmt), signal);
    }
    if (stmt.type === 'alter_system') {
      if (!(RELOADABLE_SETTINGS as readonly string[]).includes(stmt.name)) {
        const known = ['shared_buffers', 'wal_segment_size', 'hot_standby', 'autovacuum'].includes(stmt.name);
        if (known) throw new WalsimError('invalid_input', `walsim cannot change "${stmt.name}" with ALTER SYSTEM (it can: ${RELOADABLE_SETTINGS.join(', ')})`, '0A000');
        throw new WalsimError('invalid_input', `unrecognized configuration parameter "${stmt.name}"`, '42704');
      }
      alterSystem(this.dataDir, stmt.name as ReloadableSetting, stmt.value);
      return { command: 'ALTER SYSTEM', columns: [], rows: [] };
    }
    if (stmt.type === 'select_function' && stmt.fn === 'pg_reload_conf') {
      if (stmt.args.length > 0) throw new WalsimError('invalid_input', 'function pg_reload_conf() takes no arguments', '42883');
      this.reloadConfig();
      return { command: 'SELECT 1', columns: ['pg_reload_conf'], rows: [{ pg_reload_conf: true }] };
    }
    return executeRead(this, stmt);
  }

  /**
   * Run a write statement under the write lock. A statement still queued when a shutdown begins
   * never starts (PostgreSQL's fast stop terminates every backend). WARNINGs raised while it ran
   * (a cancelled synchronous-replication wait) travel with its result.
   */
  private runWrite(fn: () => Promise<QueryResult>, signal?: AbortSignal): Promise<QueryResult> {
    return this.writeLock.run(async () => {
      if (this.shuttingDown !== null) throw new WalsimError('shutting_down', 'terminating connection due to administrator command', '57P01');
      // Cancelled while queued behind another write: it never starts.
      if (signal?.aborted) throw new WalsimError('canceled', 'canceling statement due to user request', '57014');
      // Cancelled while running: walsim cannot roll a statement back, so only its commit's
      // synchronous-replication wait ends (the commit stands, with PostgreSQL's WARNING). Writes run
      // one at a time, so every waiter now is this statement's commit.
      const cancelWait = () => { for (const w of this.syncRep.waiters()) this.syncRep.cancel(w.xid); };
      signal?.addEventListener('abort', cancelWait);
      this.statementNotices = [];
      this.writeSignal = signal;
      try {
        const result = await fn();
        const notices = this.statementNotices;
        return notices.length > 0 ? { ...result, notices } : result;
      } finally {
        this.statementNotices = [];
        this.writeSignal = undefined;
        signal?.removeEventListener('abort', cancelWait);
      }
    });
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
      next = loadNodeConfig(this.dataDir);
    } catch (e) {
      this.opts.log(`LOG:  configuration file contains errors; unaffected changes were applied: ${(e as Error).message}`);
      return;
    }
    const prev = this.config;
    this.config = next;
    this.opts.log('LOG:  received SIGHUP, reloading configuration files');
    if (next.synchronousStandbyNames !== prev.synchronousStandbyNames) {
      this.opts.log(`LOG:  parameter "synchronous_standby_names" changed to "${next.synchronousStandbyNames}"`);
      this.walsenders.reload(parseSynchronousStandbyNames(next.synchronousStandbyNames));
    }
    if (next.synchronousCommit !== prev.synchronousCommit) this.opts.log(`LOG:  parameter "synchronous_commit" changed to "${next.synchronousCommit}"`);
    const upstreamChanged = next.primaryHost !== prev.primaryHost || next.primaryPort !== prev.primaryPort || next.applicationName !== prev.applicationName;
    if (upstreamChanged && this.inRecovery && this.startup !== null) {
      this.opts.log(`LOG:  parameter "primary_conninfo" changed; restarting the walreceiver`);
      const old = this.receiver;
      this.receiver = null;
      if (old !== null) {
        old.stop();
        this.send({ type: 'UPSTREAM_LOST' });
      }
      this.startWalReceiver();
    }
  }

  /**
   * pg_promote(wait, wait_seconds): trigger promotion; with wait, poll 10 times a second until the
   * node is out of recovery (true) or wait_seconds pass (WARNING "server did not promote within
   * %d seconds", false).
   */
  async promote(wait = true, waitSeconds = 60, signal?: AbortSignal): Promise<boolean> {
    if (!Number.isInteger(waitSeconds) || waitSeconds <= 0) {
      throw new WalsimError('invalid_input', '"wait_seconds" must not be negative or zero', '22023');
    }
    const refused = refusalOf(this.lifecycle.getSnapshot(), 'PROMOTE');
    if (refused) throw refused;
    if (this.lifecycle.getSnapshot().matches('recovery')) this.send({ type: 'PROMOTE' });
    if (!wait) return true;
    for (let i = 0; i < waitSeconds * 10; i++) {
      if (!this.inRecovery) return true;
      if (signal?.aborted) throw new WalsimError('canceled', 'canceling statement due to user request', '57014');
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
    const drop = this.storage.dropStats;
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
        drops: { ...drop.drops }, scanned: drop.scanned, probes: drop.probes, invalidated: drop.invalidated,
        bsearchScans: drop.bsearchScans, elapsedMsByPath: { ...drop.elapsedMsByPath },
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
      faultsInjected: { ...this.faultsInjected },
      slowDisk: this.disk instanceof LatencyDisk ? { ...this.disk.latency.counters } : null,
    };
    if (!this.inRecovery) return { ...common, ...primaryStatusOf(this.syncRep, this.config.synchronousCommit, this.clock.now()) };
    const upstream = this.config.primaryPort === null ? null : { host: this.config.primaryHost ?? '127.0.0.1', port: this.config.primaryPort, applicationName: this.config.applicationName };
    return { ...common, ...standbyStatusOf({ upstream, wal: this.wal, startup: this.startup!, receiver: this.receiver, lifecycle: snap }) };
  }

  /** Fast/smart shutdown work before exit. Immediate is handled by the process shell (no work). */
  async shutdown(mode: 'smart' | 'fast'): Promise<void> {
    const wasInRecovery = this.inRecovery; // read before STOP leaves the recovery states
    this.send({ type: 'STOP', mode });
    this.shuttingDown = mode;
    this.checkpointer.stop();
    if (wasInRecovery) {
      this.receiver?.stop();
      await this.startup?.stop();
      await this.restartpoint(); // shutdown restartpoint
      this.control = { ...this.control, state: 'shut down in recovery' };
      this.writeControl();
      return;
    }
    // Sessions waiting for synchronous replication are terminated first (PostgreSQL's fast stop
    // signals every backend; one waiting in SyncRepWaitForLSN warns and exits): each holds the
    // write lock, so waiting for the lock first would wait for a standby that may never come.
    this.syncRep.terminateAll();
    // Let the running write statement finish, then the shutdown checkpoint.
    await this.writeLock.run(async () => {
      await this.checkpoint('CHECKPOINT_SHUTDOWN');
    });
    // Walsenders send the remaining WAL (incl. the shutdown checkpoint) and wait for the standby's flush.
    const deadline = this.clock.monoMs() + 10_000;
    const target = this.wal.flushLsn;
    while (this.clock.monoMs() < deadline && this.walsenders.senders().some((s) => s.state !== 'startup' && s.flushLsn < target)) {
      this.walsenders.pumpAll();
      await this.clock.sleep(10);
    }
  }

  /**
   * The node's logical and physical state, for comparing nodes in tests and tools: per table its
   * rows, content digest, fork sizes and buffered blocks; and buffers that hold a block which no
   * longer exists (must always be none).
   */
  inspect(): NodeInspection {
    const { heap, clog, smgr, pool, catalog } = this.storage;
    const tables = catalog.tables().map(([name, rel]) => {
      const forks = [0, 1, 2, 3].map((f) => (smgr.exists(rel, f as ForkNumber) ? smgr.diskNblocks(rel, f as ForkNumber) : null));
      return {
        name, rel,
        rows: heap.hasRelation(rel) ? heap.countVisible(rel, clog) : 0,
        digest: heap.hasRelation(rel) ? heap.contentDigest(rel, clog) : '',
        forks,
        buffered: pool.bufferedBlocks(rel).map((b) => `${b.fork}:${b.block}`),
      };
    });
    return { tables, orphanBuffers: this.storage.orphanBuffers(), relations: smgr.relations(), usedBuffers: pool.usedBuffers };
  }

  noteDrop(cb: ((r: DropResult) => void) | null): void {
    this.storage.onDrop = cb;
  }
}
