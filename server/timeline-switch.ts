/**
 * The node's timeline switches (xlog.c, xlogrecovery.c): a standby following its upstream onto a
 * new timeline (rescanLatestTimeLine), and the end of recovery at promotion — a new timeline after
 * the newest one this node knows of (findNewestTimeLine), the END_OF_RECOVERY record written and
 * flushed on it, then the node opened for writes (standby.signal removed durably, pg_control 'in
 * production', checkpoint_timeout armed). The timeline itself and pg_control are the shell's
 * (server/node.ts); this module changes them only through `TimelineSwitchDeps`.
 *
 * Entry points: `TimelineSwitch` (`followTimeline`, `writeEndOfRecovery`, `openForWrites`,
 * `history`),
 * `findNewestTimeLine`.
 */
import * as path from 'node:path';
import type { Clock } from '../common/clock.ts';
import type { Disk } from '../common/disk.ts';
import { fail } from '../common/assert.ts';
import { formatLsn, type Lsn, type TimeLineId } from '../wal/lsn.ts';
import type { ControlFile } from '../wal/control-file.ts';
import {
  listSegmentFiles,
  readTimelineHistory,
  writeTimelineHistoryFile,
  type TimelineHistoryEntry,
} from '../wal/segment.ts';
import { walIoOrPanic, type WalWriter } from '../wal/wal-writer.ts';
import type { FailoverClock } from '../standby/failover-clock.ts';
import { STANDBY_SIGNAL } from './startup-replay.ts';

/** What the timeline switches read and change of the node shell. */
export interface TimelineSwitchDeps {
  readonly dataDir: string;
  readonly disk: Disk;
  readonly clock: Clock;
  readonly wal: WalWriter;
  readonly failover: FailoverClock;
  /** The storage leaving recovery (sizes no longer trusted) and the checkpointer arming. */
  endRecovery(): void;
  startCheckpointer(): void;
  walSegmentSize(): number;
  timeline(): TimeLineId;
  setTimeline(tli: TimeLineId): void;
  updateControl(patch: Partial<ControlFile>): void;
  log(message: string): void;
  /** A failed WAL write or fsync of END_OF_RECOVERY: PANIC (server/README rule 7). */
  fatal(error: unknown): void;
}

/** The newest timeline id with a history file or WAL segment in pg_wal (findNewestTimeLine). */
export function findNewestTimeLine(
  dataDir: string,
  current: TimeLineId,
  segmentSize: number,
  disk: Disk,
): TimeLineId {
  let newest = current;
  for (const f of disk.readdir(path.join(dataDir, 'pg_wal'))) {
    const m = /^([0-9A-F]{8})\.history$/.exec(f);
    if (m) newest = Math.max(newest, parseInt(m[1]!, 16));
  }
  for (const seg of listSegmentFiles(dataDir, segmentSize, disk))
    newest = Math.max(newest, seg.tli);
  return newest;
}

export class TimelineSwitch {
  private historyCache: { tli: TimeLineId; entries: TimelineHistoryEntry[] } | null = null;

  constructor(private readonly d: TimelineSwitchDeps) {}

  /** The history of the current timeline (readTimeLineHistory), cached per timeline. */
  history(): readonly TimelineHistoryEntry[] {
    const tli = this.d.timeline();
    if (this.historyCache?.tli !== tli)
      this.historyCache = {
        tli,
        entries: readTimelineHistory(this.d.dataDir, tli, this.d.disk),
      };
    return this.historyCache.entries;
  }

  /**
   * The upstream's timeline went on as `tli` at `switchLsn`, which this standby has flushed: store
   * the history file, continue this node's WAL on `tli` (rescanning for the latest timeline, as
   * recovery_target_timeline = 'latest' does). INV-NODE-5: only at the end of WAL.
   */
  followTimeline(tli: TimeLineId, historyText: string, switchLsn: Lsn): void {
    const { wal } = this.d;
    if (!(wal.flushLsn === switchLsn && wal.insertLsn === switchLsn))
      fail(
        `INV-NODE-5: timeline switch at ${formatLsn(switchLsn)} but WAL ends at ${formatLsn(wal.insertLsn)}`,
      );
    writeTimelineHistoryFile(this.d.dataDir, tli, historyText, this.d.disk);
    wal.switchTimeline(tli);
    const prev = this.d.timeline();
    this.d.setTimeline(tli);
    this.d.updateControl({ timeline: tli });
    this.d.log(`LOG:  switched from timeline ${prev} to ${tli} at ${formatLsn(switchLsn)}`);
  }

  /**
   * End of recovery, after replay stopped at `end`: switch to a new timeline, log END_OF_RECOVERY
   * and flush it. Every step is counted in the failover report.
   */
  writeEndOfRecovery(end: { nextLsn: Lsn; lastRecordLsn: Lsn }): void {
    const { wal, failover } = this.d;
    if (end.nextLsn < wal.insertLsn) {
      // Replay stopped before the end of received WAL (an invalid record): EndOfLog is the end of
      // the last valid record, so the new timeline branches there, not after the garbage.
      this.d.log(
        `LOG:  end of recovery at ${formatLsn(end.nextLsn)}, before the invalid WAL received up to ${formatLsn(wal.insertLsn)}`,
      );
      wal.truncate(end.nextLsn, end.lastRecordLsn);
    }
    const targetTimeline = this.d.timeline();
    const newTimeline =
      findNewestTimeLine(this.d.dataDir, targetTimeline, this.d.walSegmentSize(), this.d.disk) + 1;
    // The first WAL this node writes itself: a failed write or fsync PANICs, as on a primary.
    const walIo = <T>(fn: () => T): T => walIoOrPanic(fn, (e) => this.d.fatal(e));
    // The new timeline branches from the one the end of WAL lies on (lastRecTLI): the target
    // timeline, unless recovery ended before reaching the point where it began (wal-writer.ts).
    const prevTimeline = walIo(() =>
      wal.switchTimeline(newTimeline, 'no recovery target specified'),
    );
    if (prevTimeline !== targetTimeline)
      this.d.log(
        `LOG:  end of recovery at ${formatLsn(wal.insertLsn)} lies on timeline ${prevTimeline}, before timeline ${targetTimeline} began; timeline ${newTimeline} branches from timeline ${prevTimeline}`,
      );
    failover.countEndOfRecovery('timelineHistoryFiles');
    failover.countEndOfRecovery('walSegmentInits');
    this.d.setTimeline(newTimeline);
    walIo(() =>
      wal.insert(
        { kind: 'END_OF_RECOVERY', newTimeline, prevTimeline, time: this.d.clock.now() },
        0,
      ),
    );
    failover.countEndOfRecovery('records');
    walIo(() => wal.flush());
    failover.countEndOfRecovery('walFlushes');
    failover.newTimeline = newTimeline;
    failover.mark('endOfRecoveryWritten');
    this.d.log(`LOG:  selected new timeline ID: ${newTimeline}`);
  }

  /** The node accepts writes: sizes are no longer trusted (not in recovery), standby.signal goes. */
  openForWrites(): void {
    this.d.endRecovery();
    // durable_unlink: without the directory fsync a crash could bring standby.signal back and
    // restart the promoted node as a standby.
    this.d.disk.rmrf(path.join(this.d.dataDir, STANDBY_SIGNAL));
    this.d.disk.fsyncDir(this.d.dataDir);
    this.d.updateControl({ state: 'in production', timeline: this.d.timeline() });
    this.d.failover.countOpenForWrites('controlFileUpdates');
    this.d.failover.mark('readWrite');
    this.d.startCheckpointer();
    this.d.log('LOG:  database system is ready to accept connections');
  }
}
