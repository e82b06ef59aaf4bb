/**
 * The standby role of a node: the startup process (replay of the node's own WAL, never past what
 * the walreceiver flushed), the walreceiver towards primary_conninfo, restartpoints at replayed
 * checkpoint records and on request, and a standby's fast/smart shutdown. The lifecycle machine
 * creates it when the node enters `recovery` and retires it when promotion opens the node for
 * writes (after END_OF_RECOVERY); its counters stay in the failover report captured at that instant.
 *
 * What it is given, not what it owns: the node's storage, WAL writer, clock and disk, the dialer to
 * the upstream, the control file, the lifecycle machine (to read the pause state and to report
 * PAUSE_CONFIRMED / CAUGHT_UP / WAL_RECEIVED / UPSTREAM_*), the node's timeline switch, WAL removal
 * and the cascading walsenders' wake-up.
 *
 * Entry points: `StandbyRole` (`start`, `wakeReplay`, `stopWalReceiver`, `restartWalReceiver`,
 * `finishReplay`, `restartpoint`, `shutdown`, `status`).
 */
import type { Clock } from '../common/clock.ts';
import type { Disk } from '../common/disk.ts';
import type { Upstream, UpstreamDialer } from '../common/transport.ts';
import { injectedBugs } from '../common/injected-bugs.ts';
import type { ControlFile } from '../wal/control-file.ts';
import type { Lsn, TimeLineId } from '../wal/lsn.ts';
import type { WalRecord } from '../wal/records.ts';
import type { WalReadOptions } from '../wal/wal-reader.ts';
import type { WalWriter } from '../wal/wal-writer.ts';
import type { NodeStorage } from '../storage/node-storage.ts';
import { replayRecordSteps } from '../storage/redo.ts';
import {
  pauseStateOf,
  type LifecycleEvent,
  type LifecycleSnapshot,
} from '../lifecycle/lifecycle-machine.ts';
import { StartupProcess } from './startup.ts';
import { standbyStatusOf, type StandbyStatus } from './standby-status.ts';
import { WalReceiver } from './walreceiver.ts';

export type { Upstream };

export interface StandbyRoleDeps {
  dataDir: string;
  clock: Clock;
  disk: Disk;
  storage: NodeStorage;
  wal: WalWriter;
  /** primary_conninfo now (it changes on reload); null when the node has no upstream. */
  upstream(): Upstream | null;
  /** A dialer to `upstream` (ws in production, the simulator's network). */
  dialer: UpstreamDialer;
  timeline(): TimeLineId;
  readOptions(): WalReadOptions;
  /** Merge `patch` into pg_control and write it durably. */
  updateControl(patch: Partial<ControlFile>): void;
  /** RemoveOldXlogFiles after a restartpoint with this REDO point, keeping WAL up to `endLsn`. */
  removeOldWal(redoLsn: Lsn, endLsn: Lsn): void;
  /** The upstream's timeline continues as `tli` at `switchLsn`: the node switches its WAL. */
  followTimeline(tli: TimeLineId, historyText: string, switchLsn: Lsn): void;
  /** WAL was flushed: cascading walsenders may send it. */
  walFlushed(): void;
  lifecycle(): LifecycleSnapshot;
  /** Report an event of the startup process or the walreceiver to the lifecycle machine. */
  notify(event: LifecycleEvent): void;
  /** The `redo_fail` fault: armed, and where it throws (once). */
  redoFaultArmed(): boolean;
  injectedRedoFailure(at: Lsn): void;
  /** Replay failed: the process must end (StartupDeps.fatal). */
  fatal(error: unknown): void;
  log(message: string): void;
}

export class StandbyRole {
  readonly startup: StartupProcess;
  receiver: WalReceiver | null = null;

  constructor(private readonly deps: StandbyRoleDeps) {
    const { wal } = deps;
    this.startup = new StartupProcess(
      {
        dataDir: deps.dataDir,
        clock: deps.clock,
        readOptions: () => deps.readOptions(),
        // (The planted bug of common/injected-bugs.ts ends replay where it is at a promotion.)
        flushedUpTo: () =>
          injectedBugs.promoteSkipsUnreplayedWal && this.promoting
            ? Math.min(this.startup.nextLsn, wal.flushLsn)
            : wal.flushLsn,
        applySteps: (rec) => this.replaySteps(rec),
        fatal: (e) => deps.fatal(e),
        beforeRecord: (rec) => this.restartpointAt(rec),
        onProgress: () => this.receiver?.sendStatus(),
        pauseRequested: () => this.pauseRequested(),
        confirmPause: () => deps.notify({ type: 'PAUSE_CONFIRMED' }),
        caughtUp: () => deps.notify({ type: 'CAUGHT_UP' }),
        replaying: () => deps.notify({ type: 'WAL_RECEIVED' }),
        log: deps.log,
      },
      { nextLsn: wal.insertLsn, replayEndLsn: wal.insertLsn, lastRecordLsn: wal.lastRecordLsn },
    );
  }

  /** pg_control says 'in archive recovery'; replay starts after local WAL; the walreceiver connects. */
  start(): void {
    this.deps.updateControl({ state: 'in archive recovery' });
    this.startup.start();
    this.startWalReceiver();
  }

  /** New WAL, a pause or resume request, promotion: the startup process looks again. */
  wakeReplay(): void {
    this.startup.wakeup();
  }

  /** Set at PROMOTE (the walreceiver stops then). */
  private promoting = false;

  /** Promotion: finish replaying what was received, nothing more (the primary may be gone). */
  stopWalReceiver(): void {
    this.promoting = true;
    this.receiver?.stop();
  }

  /** Start the walreceiver towards primary_conninfo (none when the node has no upstream). */
  private startWalReceiver(): void {
    const upstream = this.deps.upstream();
    if (upstream === null) return;
    const startup = this.startup;
    this.receiver = new WalReceiver({
      connect: this.deps.dialer(upstream),
      clock: this.deps.clock,
      applicationName: upstream.applicationName,
      wal: this.deps.wal,
      timeline: () => this.deps.timeline(),
      applyLsn: () => startup.replayEndLsn,
      onFlushed: () => {
        startup.wakeup();
        // Cascading walsenders send what was just flushed (not under the planted bug).
        if (!injectedBugs.cascadeMissesFlushWakeup) this.deps.walFlushed();
      },
      onNewTimeline: (tli, text, switchLsn) => this.deps.followTimeline(tli, text, switchLsn),
      onStateChange: (state) => {
        if (state === 'streaming') this.deps.notify({ type: 'UPSTREAM_CONNECTED' });
        else if (state === 'disconnected') this.deps.notify({ type: 'UPSTREAM_LOST' });
        else if (state === 'connecting') this.deps.notify({ type: 'UPSTREAM_RETRY' });
      },
      log: this.deps.log,
    });
    this.receiver.start();
  }

  /** primary_conninfo changed on reload: the walreceiver restarts towards the new upstream. */
  restartWalReceiver(): void {
    const old = this.receiver;
    this.receiver = null;
    if (old !== null) {
      old.stop();
      this.deps.notify({ type: 'UPSTREAM_LOST' });
    }
    this.startWalReceiver();
  }

  /**
   * End of recovery (promotion): the startup process stops at the current record boundary.
   * Returns where replay ended: EndOfLog is the end of the last valid record replayed.
   */
  finishReplay(): { nextLsn: Lsn; lastRecordLsn: Lsn } {
    this.startup.finish();
    return { nextLsn: this.startup.nextLsn, lastRecordLsn: this.startup.lastRecordLsn };
  }

  /** The startup process's redo of one record (with the `redo_fail` fault: fail inside the record). */
  private replaySteps(rec: WalRecord): Generator<void, void, void> {
    if (this.deps.redoFaultArmed()) return this.failingReplaySteps(rec);
    return replayRecordSteps(this.deps.storage, rec);
  }

  private *failingReplaySteps(rec: WalRecord): Generator<void, void, void> {
    yield; // fail inside the record, as a long drop would, with the event loop running in between
    this.deps.injectedRedoFailure(rec.endLsn);
    yield* replayRecordSteps(this.deps.storage, rec);
  }

  /** The lifecycle snapshot `pauseRequested` last read, and its answer. */
  private pauseSnapshot: LifecycleSnapshot | null = null;
  private pauseRequestedThen = false;

  /**
   * The machine's replay region is 'pause requested' or 'paused'. Asked before every record:
   * snapshots are immutable (a transition makes a new one), so the answer is recomputed only when
   * the snapshot changed — matching state values costs ~1.7 µs, more than replaying a heap record.
   */
  private pauseRequested(): boolean {
    const s = this.deps.lifecycle();
    if (s !== this.pauseSnapshot) {
      this.pauseSnapshot = s;
      this.pauseRequestedThen = pauseStateOf(s) !== 'not paused';
    }
    return this.pauseRequestedThen;
  }

  /**
   * A restartpoint before a replayed checkpoint record whose REDO is its own LSN: the image holds
   * everything before the record, so replay may restart there; then old WAL goes. null for any
   * other record. Replay waits for it; the event loop (clients, the walreceiver) does not.
   */
  private restartpointAt(rec: WalRecord): Promise<void> | null {
    const body = rec.body;
    if (
      (body.kind !== 'CHECKPOINT_ONLINE' && body.kind !== 'CHECKPOINT_SHUTDOWN') ||
      body.redo !== rec.lsn
    )
      return null;
    return this.writeImage(rec.lsn, rec.header.prev).then(() =>
      this.removeWalAfterRestartpoint(rec.lsn),
    );
  }

  private writeImage(redoLsn: Lsn, redoPrevLsn: Lsn): Promise<unknown> {
    const { clock, disk } = this.deps;
    return this.deps.storage.writeImage(
      this.deps.dataDir,
      { redoLsn, redoPrevLsn, timeline: this.deps.timeline() },
      () => clock.yield(),
      { disk, clock },
    );
  }

  /** Restartpoint at the current replay position (CHECKPOINT on a standby, shutdown, base backup). */
  async restartpoint(): Promise<void> {
    const s = this.startup;
    await s.holdReplay(async () => {
      await this.writeImage(s.nextLsn, s.lastRecordLsn);
      this.deps.updateControl({ checkpointLsn: s.lastRecordLsn, redoLsn: s.nextLsn });
      this.removeWalAfterRestartpoint(s.nextLsn);
    });
  }

  /**
   * CreateRestartPoint: KeepLogSeg from the later of receive and replay (and what a cascaded
   * standby streaming from this one still needs), then RemoveOldXlogFiles.
   */
  private removeWalAfterRestartpoint(redoLsn: Lsn): void {
    this.deps.removeOldWal(
      redoLsn,
      Math.max(this.deps.wal.flushLsn, this.startup.replayEndLsn, redoLsn),
    );
  }

  /** Fast/smart shutdown of a standby: stop receiving and replaying, then the shutdown restartpoint. */
  async shutdown(): Promise<void> {
    this.receiver?.stop();
    await this.startup.stop();
    await this.restartpoint();
    this.deps.updateControl({ state: 'shut down in recovery' });
  }

  status(): StandbyStatus {
    return standbyStatusOf({
      upstream: this.deps.upstream(),
      wal: this.deps.wal,
      startup: this.startup,
      receiver: this.receiver,
      lifecycle: this.deps.lifecycle(),
    });
  }
}
