/**
 * Start-up of a node, before any role runs (StartupXLOG up to the end of local WAL): read
 * pg_control, follow the latest timeline when the node is a standby (recovery_target_timeline =
 * 'latest'), load the last data image, replay the local WAL from the image's REDO point to the end
 * of valid WAL, and open the WAL writer there. After an unclean stop this replay is crash recovery.
 * A standby then goes on with its startup process (standby/standby-role.ts) from that end.
 *
 * Entry points: `replayLocalWal`, `latestTimeline`, `dropSettingsOf`, `STANDBY_SIGNAL`.
 */
import * as path from 'node:path';
import type { Disk } from '../common/disk.ts';
import { isWalsimError } from '../common/errors.ts';
import { maxAlign } from '../wal/codec.ts';
import { readControlFile, type ControlFile } from '../wal/control-file.ts';
import { formatLsn, type TimeLineId } from '../wal/lsn.ts';
import { readTimelineHistory } from '../wal/segment.ts';
import { readWal } from '../wal/wal-reader.ts';
import { WalWriter } from '../wal/wal-writer.ts';
import { runSteps, type DropSettings } from '../storage/drop.ts';
import { NodeStorage } from '../storage/node-storage.ts';
import { replayRecordSteps } from '../storage/redo.ts';
import { parseSharedBuffers } from '../storage/shared-buffers.ts';
import type { NodeConfig } from './node-config.ts';
import type { StartupReplayStatus } from './node-status.ts';

/** Present in a data directory while the node is (to start as) a standby. */
export const STANDBY_SIGNAL = 'standby.signal';

/** findNewestTimeLine for recovery: the newest timeline with a history file that contains `tli`. */
export function latestTimeline(dataDir: string, tli: TimeLineId, disk: Disk): TimeLineId {
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

export function dropSettingsOf(config: NodeConfig): DropSettings {
  return {
    strategy: config.dropStrategy,
    thresholdDivisor: config.thresholdDivisor,
    forceOptimized: config.forceOptimized,
  };
}

export interface LocalWalReplay {
  storage: NodeStorage;
  wal: WalWriter;
  control: ControlFile;
  startupReplay: StartupReplayStatus;
}

/** Load the data image, replay local WAL from its REDO point, open WAL for writing at its end. */
export function replayLocalWal(
  dataDir: string,
  config: NodeConfig,
  disk: Disk,
  log: (message: string) => void,
): LocalWalReplay {
  let control = readControlFile(dataDir, disk);
  if (disk.exists(path.join(dataDir, STANDBY_SIGNAL))) {
    // recovery_target_timeline = 'latest': follow the newest timeline whose history holds ours.
    const latest = latestTimeline(dataDir, control.timeline, disk);
    if (latest !== control.timeline) {
      log(
        `LOG:  recovery follows the latest timeline ${latest} (pg_control names ${control.timeline})`,
      );
      control = { ...control, timeline: latest };
    }
  }
  const { nBuffers } = parseSharedBuffers(config.sharedBuffers);
  const { storage, header } = NodeStorage.loadImage(
    dataDir,
    nBuffers,
    dropSettingsOf(config),
    disk,
  );
  storage.smgr.inRecovery = true; // startup replay runs "in recovery" on every role
  const crashRecovery = control.state !== 'shut down' && control.state !== 'shut down in recovery';
  let nextLsn = header.redoLsn;
  let lastRecordLsn = header.redoPrevLsn;
  let endLsn = header.redoLsn;
  let records = 0;
  const reader = readWal(dataDir, header.redoLsn, {
    timeline: control.timeline,
    segmentSize: config.walSegmentSize,
    disk,
  });
  for (const rec of reader) {
    runSteps(replayRecordSteps(storage, rec)); // no restartpoints during start-up replay
    lastRecordLsn = rec.lsn;
    endLsn = rec.endLsn;
    nextLsn = maxAlign(rec.endLsn);
    records++;
  }
  if (isWalsimError(reader.endReason)) {
    // Like PostgreSQL, an invalid record ends local WAL; a standby streams the rest again.
    log(
      `LOG:  invalid record at ${formatLsn(nextLsn)} ends local WAL: ${reader.endReason.message}`,
    );
  }
  const wal = WalWriter.open(dataDir, {
    segmentSize: config.walSegmentSize,
    timeline: control.timeline,
    startLsn: nextLsn,
    prevLsn: lastRecordLsn,
    disk,
  });
  log(
    `LOG:  ${crashRecovery ? 'crash recovery' : 'startup'} replayed ${records} records from ${formatLsn(header.redoLsn)} to ${formatLsn(endLsn)}`,
  );
  return {
    storage,
    wal,
    control,
    startupReplay: {
      records,
      fromLsn: formatLsn(header.redoLsn),
      toLsn: formatLsn(endLsn),
      crashRecovery,
    },
  };
}
