/**
 * What a cleanly stopped PostgreSQL data directory's global/pg_control says about where its WAL
 * starts, and trimming its pg_wal to that: how a loaded primary becomes a template that each run
 * copies (experiment/loaded-template.ts) without copying gigabytes of recycled segments.
 *
 * The start of ControlFileData is the same in 13–18 (src/include/catalog/pg_control.h; little-endian
 * here): system_identifier u64 @0, pg_control_version u32 @8, catalog_version_no u32 @12, state
 * (DBState, int) @16, time (pg_time_t) @24, checkPoint (XLogRecPtr) @32, then checkPointCopy
 * (CheckPoint) @40, whose first fields are redo (XLogRecPtr) @40 and ThisTimeLineID u32 @48.
 *
 * After a clean shutdown (state DB_SHUTDOWNED) the last checkpoint is the shutdown checkpoint, whose
 * redo pointer is its own record: starting the server (or a standby made by copying the directory)
 * reads WAL from that record on and nothing before it. The other segment files in pg_wal are
 * either older ones a checkpoint had not yet removed or, mostly, old segments the checkpoints
 * recycled under future names (with max_wal_size = 20GB, as much as the load wrote); the server
 * creates or recycles new ones as it needs them, so they can go.
 *
 * Entry points: `readPgControl`, `trimWalToShutdownCheckpoint`, `DB_SHUTDOWNED`.
 */
import * as fs from 'node:fs';
import * as path from 'node:path';
import { WalsimError } from '../../common/errors.ts';
import { formatLsn, type Lsn } from '../../wal/lsn.ts';
import { parseSegmentFileName, segmentFileName } from '../../wal/segment.ts';
import { detectSegmentSize } from '../../pg-wal/wal-dir.ts';

/** DBState's DB_SHUTDOWNED (pg_control.h, 13–18: DB_STARTUP = 0, DB_SHUTDOWNED = 1, …). */
export const DB_SHUTDOWNED = 1;

/** The fields of pg_control this file reads. */
export interface PgControlStart {
  state: number;
  /** The last checkpoint record's location. */
  checkPoint: Lsn;
  /** Its redo pointer (equal to `checkPoint` for a shutdown checkpoint). */
  redo: Lsn;
  timeline: number;
}

const OFF_STATE = 16;
const OFF_CHECKPOINT = 32;
const OFF_REDO = 40;
const OFF_TIMELINE = 48;
/** A checkpoint record is ~100 bytes; one that starts this close to a segment end ends in the next. */
const CHECKPOINT_RECORD_MAX = 1024;

export function readPgControl(dataDir: string): PgControlStart {
  const file = path.join(dataDir, 'global', 'pg_control');
  let b: Buffer;
  try {
    b = fs.readFileSync(file);
  } catch (e) {
    throw new WalsimError('invalid_input', `cannot read ${file}: ${(e as Error).message}`);
  }
  if (b.length < OFF_TIMELINE + 4)
    throw new WalsimError('invalid_input', `${file} is ${b.length} bytes, not a pg_control file`);
  return {
    state: b.readInt32LE(OFF_STATE),
    checkPoint: Number(b.readBigUInt64LE(OFF_CHECKPOINT)),
    redo: Number(b.readBigUInt64LE(OFF_REDO)),
    timeline: b.readUInt32LE(OFF_TIMELINE),
  };
}

/**
 * Remove every WAL segment file of a cleanly stopped data directory except the one(s) holding its
 * shutdown checkpoint record. Refuses (removing nothing) unless pg_control says the cluster was
 * shut down cleanly with a shutdown checkpoint (redo = checkpoint) and that segment file exists.
 * Returns the names kept and how many files were removed.
 */
export function trimWalToShutdownCheckpoint(dataDir: string): { kept: string[]; removed: number } {
  const c = readPgControl(dataDir);
  const walDir = path.join(dataDir, 'pg_wal');
  const refuse = (why: string) =>
    new WalsimError('invalid_input', `${dataDir} is not a cleanly stopped cluster: ${why}`);
  if (c.state !== DB_SHUTDOWNED) throw refuse(`pg_control state is ${c.state}, not shut down`);
  if (c.redo !== c.checkPoint)
    throw refuse(
      `its last checkpoint (${formatLsn(c.checkPoint)}) is not a shutdown checkpoint (redo ${formatLsn(c.redo)})`,
    );
  const segmentSize = detectSegmentSize(walDir);
  const first = Math.floor(c.checkPoint / segmentSize);
  const last = Math.floor((c.checkPoint + CHECKPOINT_RECORD_MAX) / segmentSize);
  const names = fs.readdirSync(walDir);
  const kept = [first, last]
    .filter((s, i, a) => a.indexOf(s) === i)
    .map((s) => segmentFileName(c.timeline, s, segmentSize))
    .filter((n, i) => i === 0 || names.includes(n));
  if (!names.includes(kept[0]!))
    throw refuse(`its checkpoint's segment ${kept[0]} is not in ${walDir}`);
  let removed = 0;
  for (const n of names) {
    if (parseSegmentFileName(n, segmentSize) === null || kept.includes(n)) continue;
    fs.rmSync(path.join(walDir, n));
    removed++;
  }
  return { kept, removed };
}
