/**
 * pg_basebackup from a running node (basebackup.c perform_base_backup): a checkpoint — a
 * restartpoint on a standby, as pg_basebackup from a standby does — under the shell's write lock,
 * then a copy of the data image, pg_control and the WAL from the checkpoint's REDO point on
 * (`-X stream`), made without yielding to the event loop so nothing changes in between, marked as a
 * standby (standby.signal). The copy streams the rest from whichever node it is pointed at.
 *
 * Entry points: `performBaseBackup`, `BaseBackupSource`.
 */
import * as path from 'node:path';
import type { Disk } from '../common/disk.ts';
import { writeFileSynced } from '../common/durable-file.ts';
import { WalsimError } from '../common/errors.ts';
import type { Mutex } from '../common/mutex.ts';
import { formatLsn, type TimeLineId } from '../wal/lsn.ts';
import type { ControlFile } from '../wal/control-file.ts';
import { walFilesForBaseBackup } from '../wal/wal-retention.ts';
import { copyDataDirectory } from './node-config.ts';
import { STANDBY_SIGNAL } from './startup-replay.ts';

/** The node a base backup is taken from, as the backup sees it. */
export interface BaseBackupSource {
  readonly dataDir: string;
  readonly disk: Disk;
  readonly segmentSize: number;
  /** Write statements, checkpoints and base backups take turns (server/README rule 5). */
  readonly writeLock: Mutex;
  control(): ControlFile;
  timeline(): TimeLineId;
  /** The backup checkpoint: CHECKPOINT_ONLINE on a primary, a restartpoint on a standby. */
  checkpoint(): Promise<void>;
}

export async function performBaseBackup(
  src: BaseBackupSource,
  targetDir: string,
): Promise<{ checkpointLsn: string; timeline: TimeLineId }> {
  const { disk } = src;
  if (disk.exists(targetDir) && disk.readdir(targetDir).some((f) => f !== 'walsim.conf.json')) {
    throw new WalsimError(
      'invalid_input',
      `base backup target "${targetDir}" exists and is not empty`,
      '58P02',
    );
  }
  const copy = () => {
    // pg_basebackup -X stream: only the WAL from the backup checkpoint's REDO point on.
    const walFiles = walFilesForBaseBackup(
      src.dataDir,
      src.segmentSize,
      src.control().redoLsn,
      src.timeline(),
      disk,
    );
    copyDataDirectory(src.dataDir, targetDir, disk, walFiles);
    writeFileSynced(path.join(targetDir, STANDBY_SIGNAL), '', disk);
    return { checkpointLsn: formatLsn(src.control().checkpointLsn), timeline: src.timeline() };
  };
  return src.writeLock.run(async () => {
    await src.checkpoint();
    return copy();
  });
}
