/**
 * WAL retention, as PostgreSQL's xlog.c decides it: when WAL volume asks for a checkpoint
 * (`checkpointSegments` = CalculateCheckpointSegments, `checkpointNeeded` = XLogCheckpointNeeded),
 * which segments a checkpoint or restartpoint may remove (`lastRemovableSegment` = KeepLogSeg plus
 * CreateCheckPoint's `_logSegNo--`), and the removal itself (`removeOldSegments` =
 * RemoveOldXlogFiles with wal_recycle off). Pure functions and one directory scan; no timers.
 *
 * walsim removes old segments and never recycles them (PostgreSQL renames them to future segment
 * names when `wal_recycle` is on): without page headers a recycled file's old records could be
 * read as new ones, and a fresh file costs nothing here.
 */
import type { Disk } from '../common/disk.ts';
import * as path from 'node:path';
import { assert } from '../common/assert.ts';
import { fsyncDir } from '../common/durable-file.ts';
import type { Lsn, TimeLineId } from './lsn.ts';
import {
  listSegmentFiles,
  readTimelineHistory,
  segmentOf,
  timelineHistoryFileName,
  walDir,
} from './segment.ts';

/** checkpoint_completion_target (PostgreSQL's default since 14). */
export const CHECKPOINT_COMPLETION_TARGET = 0.9;

const MB = 1024 * 1024;

/**
 * CalculateCheckpointSegments: a checkpoint is requested after this many segments of WAL since
 * the last REDO point — max_wal_size in segments / (1 + checkpoint_completion_target), at least 1.
 * With 16 MB segments, 1GB gives 33 and the seed's 20GB gives 673.
 */
export function checkpointSegments(maxWalSizeMb: number, segmentSize: number): number {
  const target = Math.floor((maxWalSizeMb * MB) / segmentSize) / (1 + CHECKPOINT_COMPLETION_TARGET);
  return Math.max(1, Math.floor(target));
}

/** XLogCheckpointNeeded: has WAL reached segment `newSegno`, far enough past the REDO point? */
export function checkpointNeeded(
  redoLsn: Lsn,
  newSegno: number,
  segmentSize: number,
  segments: number,
): boolean {
  return newSegno >= segmentOf(redoLsn, segmentSize) + (segments - 1);
}

/**
 * KeepLogSeg(recptr, &segno) followed by `segno--`: the highest segment number a checkpoint whose
 * REDO point is `redoLsn` may remove, given the end of WAL `recptr` (the checkpoint record, or on a
 * standby the later of receive and replay), the oldest LSN a connected standby still needs
 * (`keepLsn`, null when none: PostgreSQL's replication-slot minimum, see README) and wal_keep_size.
 * Returns -1 (or less) when nothing may go.
 */
export function lastRemovableSegment(
  redoLsn: Lsn,
  recptr: Lsn,
  keepLsn: Lsn | null,
  walKeepSizeMb: number,
  segmentSize: number,
): number {
  assert(redoLsn <= recptr, 'INV-WAL-9: the REDO point is never after the end of WAL');
  const currSegno = segmentOf(recptr, segmentSize);
  let segno = currSegno;
  if (keepLsn !== null && keepLsn < recptr) segno = segmentOf(keepLsn, segmentSize);
  const keepSegs = Math.floor((walKeepSizeMb * MB) / segmentSize);
  if (keepSegs > 0 && currSegno - segno < keepSegs)
    segno = currSegno <= keepSegs ? 1 : currSegno - keepSegs;
  // Never newer than the REDO point's segment: replay after a crash starts there.
  return Math.min(segno, segmentOf(redoLsn, segmentSize)) - 1;
}

/**
 * RemoveOldXlogFiles: unlink every segment file (of any timeline) numbered `lastRemovable` or
 * less; timeline history files stay. Returns the names removed, oldest first.
 */
export function removeOldSegments(
  dataDir: string,
  lastRemovable: number,
  segmentSize: number,
  disk: Disk,
): string[] {
  const removed: string[] = [];
  for (const seg of listSegmentFiles(dataDir, segmentSize, disk)) {
    if (seg.segno > lastRemovable) break; // sorted by segno
    disk.rmrf(path.join(walDir(dataDir), seg.name));
    removed.push(seg.name);
  }
  if (removed.length > 0) fsyncDir(walDir(dataDir), disk);
  return removed;
}

/** The oldest segment number present in pg_wal (any timeline), or null when there is none. */
export function oldestSegment(dataDir: string, segmentSize: number, disk: Disk): number | null {
  const segs = listSegmentFiles(dataDir, segmentSize, disk);
  return segs.length === 0 ? null : segs[0]!.segno;
}

/**
 * The pg_wal files a base backup needs, as pg_basebackup's default `-X stream` takes them: the
 * segments from the REDO point's segment on, of the timelines from the one holding the REDO point
 * to `timeline` (per `timeline`'s history; one timeline on a primary, whose backup checkpoint is on
 * its own timeline), and those timelines' history files (each holds its whole ancestry). Older
 * segments and other timelines' leftovers (the old timeline's copy of every switch segment,
 * every ancestor's history file) stay behind: a copy of all of pg_wal grew with every failover.
 */
export function walFilesForBaseBackup(
  dataDir: string,
  segmentSize: number,
  redoLsn: Lsn,
  timeline: TimeLineId,
  disk: Disk,
): string[] {
  const history = readTimelineHistory(dataDir, timeline, disk);
  const redoTli = history.find((e) => e.endLsn === null || redoLsn < e.endLsn)?.tli ?? timeline;
  const needed = new Set(history.filter((e) => e.tli >= redoTli).map((e) => e.tli));
  const redoSegno = segmentOf(redoLsn, segmentSize);
  const names = listSegmentFiles(dataDir, segmentSize, disk)
    .filter((s) => s.segno >= redoSegno && needed.has(s.tli))
    .map((s) => s.name);
  for (const tli of needed)
    if (tli > 1 && disk.exists(path.join(walDir(dataDir), timelineHistoryFileName(tli))))
      names.push(timelineHistoryFileName(tli));
  return names;
}
