/**
 * WAL retention arithmetic follows xlog.c: CalculateCheckpointSegments, XLogCheckpointNeeded,
 * KeepLogSeg (+ the `_logSegNo--` of CreateCheckPoint) and RemoveOldXlogFiles; the checkpointer
 * asks for a timed checkpoint only when WAL was written since the last one.
 * Method: exact values for PostgreSQL's defaults and the seed's settings; removal in a temp pg_wal;
 * the checkpoint_timeout timer under fake timers.
 */
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { afterEach, describe, expect, it, vi } from 'vitest';
import {
  checkpointNeeded,
  checkpointSegments,
  lastRemovableSegment,
  removeOldSegments,
} from '../../wal/wal-retention.ts';
import { segmentFileName, timelineHistoryFileName } from '../../wal/segment.ts';
import { Checkpointer } from '../../server/checkpointer.ts';
import {
  DEFAULT_WAL_SETTINGS,
  formatMb,
  formatSeconds,
  parseCheckpointTimeout,
  parseMaxWalSize,
  parseWalKeepSize,
} from '../../server/settings.ts';
import { nodeDisk } from '../../common/node-disk.ts';
import { systemClock } from '../../common/system-clock.ts';

const MB = 1024 * 1024;
const SEG16 = 16 * MB;

describe('WAL retention (xlog.c)', () => {
  it('CheckPointSegments = max_wal_size in segments / 1.9, at least 1', () => {
    expect(checkpointSegments(1024, SEG16)).toBe(33); // PostgreSQL's default 1GB
    expect(checkpointSegments(20 * 1024, SEG16)).toBe(673); // the seed's 20GB
    expect(checkpointSegments(2, MB)).toBe(1);
    expect(checkpointSegments(2, SEG16)).toBe(1);
  });

  it('XLogCheckpointNeeded: new segment >= REDO segment + CheckPointSegments - 1', () => {
    const redo = 10 * SEG16 + 500;
    expect(checkpointNeeded(redo, 42, SEG16, 33)).toBe(true);
    expect(checkpointNeeded(redo, 41, SEG16, 33)).toBe(false);
    expect(checkpointNeeded(redo, 10, SEG16, 1)).toBe(true);
  });

  it('KeepLogSeg: the REDO segment, a standby, wal_keep_size', () => {
    const seg = (n: number, off = 100) => n * SEG16 + off;
    // Nothing keeps: everything before the REDO segment goes.
    expect(lastRemovableSegment(seg(20), seg(20, 200), null, 0, SEG16)).toBe(19);
    // A standby at segment 12 keeps 12 on.
    expect(lastRemovableSegment(seg(20), seg(20, 200), seg(12), 0, SEG16)).toBe(11);
    // A standby ahead of the REDO point does not let more go.
    expect(lastRemovableSegment(seg(20), seg(22), seg(21), 0, SEG16)).toBe(19);
    // wal_keep_size = 64MB = 4 segments back from the end of WAL (segment 22) -> keep 18 on.
    expect(lastRemovableSegment(seg(20), seg(22), null, 64, SEG16)).toBe(17);
    // wal_keep_size does not override an older standby position; never below segment 1.
    expect(lastRemovableSegment(seg(20), seg(22), seg(5), 64, SEG16)).toBe(4);
    expect(lastRemovableSegment(seg(3), seg(3), null, 1024, SEG16)).toBe(0);
    // A standby that has not replied yet (apply 0) keeps everything.
    expect(lastRemovableSegment(seg(20), seg(20), 0, 0, SEG16)).toBe(-1);
  });

  it('RemoveOldXlogFiles removes segments of every timeline up to the cutoff, never history files', () => {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'walsim-retention-'));
    try {
      fs.mkdirSync(path.join(dir, 'pg_wal'));
      const names = [
        segmentFileName(1, 1, MB),
        segmentFileName(1, 2, MB),
        segmentFileName(2, 2, MB),
        segmentFileName(2, 3, MB),
        timelineHistoryFileName(2),
      ];
      for (const n of names) fs.writeFileSync(path.join(dir, 'pg_wal', n), '');
      expect(removeOldSegments(dir, 2, MB, nodeDisk)).toEqual([names[0], names[1], names[2]]);
      expect(fs.readdirSync(path.join(dir, 'pg_wal')).sort()).toEqual([names[3], names[4]].sort());
      expect(removeOldSegments(dir, 2, MB, nodeDisk)).toEqual([]);
    } finally {
      fs.rmSync(dir, { recursive: true, force: true });
    }
  });

  it('parses and shows the settings with PostgreSQL units and ranges', () => {
    expect(parseCheckpointTimeout('30min')).toBe(1800);
    expect(parseCheckpointTimeout('300')).toBe(300);
    expect(() => parseCheckpointTimeout('29s')).toThrow(/outside the valid range/);
    expect(() => parseCheckpointTimeout('5 minutes')).toThrow(/unknown unit "minutes"/);
    expect(parseMaxWalSize('20GB')).toBe(20480);
    expect(parseMaxWalSize('1024')).toBe(1024);
    expect(() => parseMaxWalSize('1MB')).toThrow(/outside the valid range/);
    expect(parseWalKeepSize('0')).toBe(0);
    expect(formatMb(20480)).toBe('20GB');
    expect(formatMb(DEFAULT_WAL_SETTINGS.maxWalSizeMb)).toBe('1GB');
    expect(formatSeconds(DEFAULT_WAL_SETTINGS.checkpointTimeoutS)).toBe('5min');
  });
});

describe('checkpointer timer', () => {
  afterEach(() => vi.useRealTimers());

  it('checkpoint_timeout starts a checkpoint only when WAL was written since the last one', async () => {
    vi.useFakeTimers();
    let wal = false;
    const causes: string[] = [];
    const cp = new Checkpointer({
      dataDir: path.join(os.tmpdir(), 'walsim-no-such-dir'),
      clock: systemClock,
      disk: nodeDisk,
      segmentSize: SEG16,
      settings: { ...DEFAULT_WAL_SETTINGS, checkpointTimeoutS: 30 },
      canCheckpoint: () => true,
      walSinceLastCheckpoint: () => wal,
      redoLsn: () => SEG16,
      runCheckpoint: async (cause) => {
        causes.push(cause);
        wal = false;
      },
      log: () => {},
    });
    cp.start();
    await vi.advanceTimersByTimeAsync(29_999);
    await vi.advanceTimersByTimeAsync(2);
    expect(causes).toEqual([]); // idle: skipped, re-armed
    wal = true;
    await vi.advanceTimersByTimeAsync(30_000);
    expect(causes).toEqual(['time']);
    expect(cp.stats.timedCheckpoints).toBe(1);
    cp.stop();
  });
});
