/**
 * The checkpointer's policy for one node: when a primary checkpoints on its own
 * (checkpoint_timeout, and max_wal_size through CheckPointSegments, as checkpointer.c and
 * XLogWrite decide), requests coalesced into one pending checkpoint, and what every checkpoint or
 * restartpoint does to pg_wal afterwards (remove segments older than its REDO point, keeping
 * wal_keep_size and what a connected standby still needs). The checkpoint itself is the node's.
 *
 * Entry points: `Checkpointer` (`walFlushed`, `request`, `start`, `stop`, `removeOldWal`).
 */
import type { Clock, TimerHandle } from '../common/clock.ts';
import type { Disk } from '../common/disk.ts';
import type { Lsn } from '../wal/lsn.ts';
import { formatLsn } from '../wal/lsn.ts';
import { segmentFileName, segmentOf } from '../wal/segment.ts';
import {
  checkpointNeeded,
  checkpointSegments,
  lastRemovableSegment,
  oldestSegment,
  removeOldSegments,
} from '../wal/wal-retention.ts';
import type { WalSettings } from './settings.ts';

export type CheckpointCause = 'time' | 'xlog';

export interface CheckpointerDeps {
  dataDir: string;
  /** Timers and the disk of pg_wal (the node's bindings). */
  clock: Clock;
  disk: Disk;
  segmentSize: number;
  settings: WalSettings;
  /** May this node checkpoint now (a primary, not shutting down)? */
  canCheckpoint(): boolean;
  /** Has WAL been written since the last checkpoint record? (A timed checkpoint is skipped if not.) */
  walSinceLastCheckpoint(): boolean;
  /** The REDO point of the last checkpoint or restartpoint. */
  redoLsn(): Lsn;
  /** Run one checkpoint (the node waits for the running write statement first). */
  runCheckpoint(cause: CheckpointCause): Promise<void>;
  log(message: string): void;
}

export interface CheckpointerStats {
  /** Checkpoints started by checkpoint_timeout (pg_stat_bgwriter.checkpoints_timed). */
  timedCheckpoints: number;
  /** Checkpoints requested by WAL volume, max_wal_size (part of checkpoints_req; CHECKPOINT statements are not counted). */
  walVolumeCheckpoints: number;
  /** Segment files removed by checkpoints and restartpoints since start. */
  walFilesRemoved: number;
  /** The newest segment removed (PostgreSQL's lastRemovedSegNo), as a file name. */
  lastRemovedSegment: string | null;
  /** CheckPointSegments for this node's max_wal_size and segment size. */
  checkpointSegments: number;
}

export class Checkpointer {
  readonly stats: CheckpointerStats;
  /** PostgreSQL's XLogCtl->lastRemovedSegNo: segments at or below it are gone (-1: none yet). */
  lastRemovedSegno = -1;
  private pending = false;
  private timer: TimerHandle | null = null;
  private readonly clock: Clock;
  private readonly disk: Disk;

  constructor(private readonly deps: CheckpointerDeps) {
    this.clock = deps.clock;
    this.disk = deps.disk;
    this.stats = {
      timedCheckpoints: 0,
      walVolumeCheckpoints: 0,
      walFilesRemoved: 0,
      lastRemovedSegment: null,
      checkpointSegments: checkpointSegments(deps.settings.maxWalSizeMb, deps.segmentSize),
    };
    // After a restart, segments below the oldest file present are gone (RemoveOldXlogFiles ran).
    const oldest = oldestSegment(deps.dataDir, deps.segmentSize, this.disk);
    if (oldest !== null) this.lastRemovedSegno = oldest - 1;
  }

  /** Arm checkpoint_timeout (primary: after start-up, after promotion, after each checkpoint). */
  start(): void {
    this.stop();
    this.timer = this.clock.setTimeout(
      () => {
        this.timer = null;
        if (this.deps.canCheckpoint() && this.deps.walSinceLastCheckpoint()) this.request('time');
        else this.start();
      },
      this.deps.settings.checkpointTimeoutS * 1000,
      true,
    );
  }

  stop(): void {
    this.timer?.cancel();
    this.timer = null;
  }

  /** XLogWrite's check after WAL reached `flushLsn`: request a checkpoint past CheckPointSegments. */
  walFlushed(flushLsn: Lsn): void {
    if (this.pending || !this.deps.canCheckpoint()) return;
    if (
      checkpointNeeded(
        this.deps.redoLsn(),
        segmentOf(flushLsn, this.deps.segmentSize),
        this.deps.segmentSize,
        this.stats.checkpointSegments,
      )
    ) {
      this.request('xlog');
    }
  }

  /** RequestCheckpoint: at most one pending; it runs after the running write statement. */
  request(cause: CheckpointCause): void {
    if (this.pending) return;
    this.pending = true;
    this.clock.defer(() => {
      if (!this.deps.canCheckpoint()) {
        this.pending = false;
        return;
      }
      if (cause === 'time') this.stats.timedCheckpoints++;
      else this.stats.walVolumeCheckpoints++;
      this.deps.log(`LOG:  checkpoint starting: ${cause}`);
      this.deps.runCheckpoint(cause).then(
        () => {
          this.pending = false;
        },
        (e: unknown) => {
          this.pending = false;
          this.deps.log(`LOG:  ${cause} checkpoint failed: ${(e as Error).message}`);
          this.start();
        },
      );
    });
  }

  /**
   * After a checkpoint or restartpoint whose REDO point is `redoLsn`, with WAL ending at `endLsn`:
   * remove the segments KeepLogSeg allows (`keepLsn`: the oldest flush position of a connected
   * standby, null for none). Returns the file names removed.
   */
  removeOldWal(redoLsn: Lsn, endLsn: Lsn, keepLsn: Lsn | null, timeline: number): string[] {
    const last = lastRemovableSegment(
      redoLsn,
      endLsn,
      keepLsn,
      this.deps.settings.walKeepSizeMb,
      this.deps.segmentSize,
    );
    if (last <= this.lastRemovedSegno) return [];
    const removed = removeOldSegments(this.deps.dataDir, last, this.deps.segmentSize, this.disk);
    this.lastRemovedSegno = last;
    this.stats.walFilesRemoved += removed.length;
    this.stats.lastRemovedSegment = segmentFileName(timeline, last, this.deps.segmentSize);
    if (removed.length > 0) {
      this.deps.log(
        `LOG:  removed ${removed.length} WAL file(s) up to ${removed[removed.length - 1]} (REDO ${formatLsn(redoLsn)}${keepLsn !== null ? `, a standby needs ${formatLsn(keepLsn)}` : ''})`,
      );
    }
    return removed;
  }
}
