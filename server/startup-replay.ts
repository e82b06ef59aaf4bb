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
import { injectedBugs } from '../common/injected-bugs.ts';
import { isInvalidWalRecordError, maxAlign } from '../wal/codec.ts';
import { readControlFile, type ControlFile } from '../wal/control-file.ts';
import { formatLsn, type Lsn, type TimeLineId } from '../wal/lsn.ts';
import { readTimelineHistory } from '../wal/segment.ts';
import { readWal, readWalBytes, type WalEndReason, type WalReader } from '../wal/wal-reader.ts';
import { WalWriter } from '../wal/wal-writer.ts';
import { dropSettingsForRules, runSteps, type DropSettings } from '../storage/drop.ts';
import { pgDropRules } from '../storage/pg-drop-rules.ts';
import { NodeStorage } from '../storage/node-storage.ts';
import { replayRecordSteps } from '../storage/redo.ts';
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

/** The node's drop settings: its major's rules when it follows one, else its own strategy. */
export function dropSettingsOf(config: NodeConfig): DropSettings {
  if (config.pgVersion !== undefined)
    return dropSettingsForRules(
      pgDropRules({ major: config.pgVersion, minor: null }),
      config.forceOptimized,
    );
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

/** Where start-up replay has got to: the next record's start, the last record's start and end. */
interface ReplayPosition {
  nextLsn: Lsn;
  lastRecordLsn: Lsn;
  endLsn: Lsn;
  records: number;
}

/** Replay every record `reader` returns (no restartpoints during start-up replay). */
function replayRecords(storage: NodeStorage, reader: WalReader, at: ReplayPosition): void {
  for (const rec of reader) {
    runSteps(replayRecordSteps(storage, rec));
    at.lastRecordLsn = rec.lsn;
    at.endLsn = rec.endLsn;
    at.nextLsn = maxAlign(rec.endLsn);
    at.records++;
  }
}

/** Only with the planted bug: a record whose CRC failed is taken for one to skip. */
function skipsBadRecord(reason: WalEndReason | null): boolean {
  return (
    injectedBugs.recoverySkipsBadCrcRecord &&
    isInvalidWalRecordError(reason) &&
    reason.reason === 'bad_crc'
  );
}

/**
 * pg_control as start-up replays from it, and whether the node starts as a standby: a standby
 * follows the newest timeline whose history holds pg_control's (recovery_target_timeline = 'latest').
 */
function startupControl(
  dataDir: string,
  disk: Disk,
  log: (message: string) => void,
): { control: ControlFile; standby: boolean } {
  const control = readControlFile(dataDir, disk);
  const standby = disk.exists(path.join(dataDir, STANDBY_SIGNAL));
  if (!standby) return { control, standby };
  const latest = latestTimeline(dataDir, control.timeline, disk);
  if (latest === control.timeline) return { control, standby };
  log(
    `LOG:  recovery follows the latest timeline ${latest} (pg_control names ${control.timeline})`,
  );
  return { control: { ...control, timeline: latest }, standby };
}

/**
 * Load the data image into a pool of `nBuffers` buffers (the size the node's assembly chose),
 * replay local WAL from its REDO point, open WAL for writing at its end.
 */
export function replayLocalWal(
  dataDir: string,
  config: NodeConfig,
  nBuffers: number,
  disk: Disk,
  log: (message: string) => void,
): LocalWalReplay {
  const { control, standby } = startupControl(dataDir, disk, log);
  const { storage, header } = NodeStorage.loadImage(
    dataDir,
    nBuffers,
    dropSettingsOf(config),
    disk,
  );
  storage.smgr.inRecovery = true; // startup replay runs "in recovery" on every role
  const crashRecovery = control.state !== 'shut down' && control.state !== 'shut down in recovery';
  const opts = { timeline: control.timeline, segmentSize: config.walSegmentSize, disk };
  const at: ReplayPosition = {
    nextLsn: header.redoLsn,
    lastRecordLsn: header.redoPrevLsn,
    endLsn: header.redoLsn,
    records: 0,
  };
  let reader = readWal(dataDir, header.redoLsn, opts);
  replayRecords(storage, reader, at);
  while (crashRecovery && !standby && skipsBadRecord(reader.endReason)) {
    // The planted bug of common/injected-bugs.ts: step over the record by its xl_tot_len.
    const bad = at.nextLsn;
    const len = readWalBytes(dataDir, bad, bad + 4, opts);
    at.lastRecordLsn = bad;
    at.endLsn = at.nextLsn = maxAlign(bad + new DataView(len.buffer).getUint32(0, true));
    reader = readWal(dataDir, at.nextLsn, { ...opts, expectedPrev: bad });
    replayRecords(storage, reader, at);
  }
  const { nextLsn, lastRecordLsn, endLsn, records } = at;
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
