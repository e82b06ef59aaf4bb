/**
 * An exception inside redo never leaves the startup process "inside a record":
 * a stop and a restartpoint that wait for a record boundary still complete, the failure is
 * recorded and handed to `fatal` (the server ends the process). Method: real WAL in a temp
 * directory, a redo whose steps yield once (the event loop runs, as during a long drop) and throw.
 */
import { afterEach, describe, expect, it } from 'vitest';
import { InvariantViolation } from '../../common/assert.ts';
import { WalWriter } from '../../wal/wal-writer.ts';
import type { WalRecord } from '../../wal/records.ts';
import { StartupProcess } from '../../standby/startup.ts';
import { removeDir, tempDataDir } from './wal-helpers.ts';
import { nodeDisk } from '../../common/node-disk.ts';
import { systemClock } from '../../common/system-clock.ts';

let dir = '';
afterEach(() => removeDir(dir));

describe('startup process: an exception inside redo', () => {
  it('resets "inside a record", wakes boundary waiters, records the error and calls fatal', async () => {
    dir = tempDataDir();
    const segmentSize = 1 << 20;
    const wal = WalWriter.open(dir, { segmentSize, timeline: 1, disk: nodeDisk });
    const start = wal.insertLsn;
    wal.insert({ kind: 'NOOP' }, 0);
    wal.insert({ kind: 'NOOP' }, 0);
    wal.flush();
    const applied: number[] = [];
    const fatalErrors: unknown[] = [];
    let failed!: () => void;
    const fatalCalled = new Promise<void>((r) => (failed = r));
    let n = 0;
    const startup = new StartupProcess(
      {
        dataDir: dir,
        clock: systemClock,
        readOptions: () => ({ timeline: 1, segmentSize, disk: nodeDisk }),
        flushedUpTo: () => wal.flushLsn,
        *applySteps(rec: WalRecord) {
          if (++n === 2) {
            yield; // half-applied: a long drop gives the event loop turns here
            throw new InvariantViolation('INV-TEST: redo failed');
          }
          applied.push(rec.lsn);
        },
        fatal: (e) => {
          fatalErrors.push(e);
          failed();
        },
        onProgress: () => {},
        pauseRequested: () => false,
        confirmPause: () => {},
        caughtUp: () => {},
        replaying: () => {},
        log: () => {},
      },
      { nextLsn: start, replayEndLsn: start, lastRecordLsn: 0 },
    );
    startup.start();
    await fatalCalled;
    // A restartpoint or a fast stop waits for a record boundary: it must come, not hang.
    const hung = () => new Promise((r) => setTimeout(() => r('hung'), 2000));
    expect(await Promise.race([startup.atRecordBoundary().then(() => 'boundary'), hung()])).toBe(
      'boundary',
    );
    expect(await Promise.race([startup.stop().then(() => 'stopped'), hung()])).toBe('stopped');
    expect(applied).toEqual([start]);
    expect(startup.recordsReplayed).toBe(1);
    expect(startup.error?.message).toBe('replay failed: INV-TEST: redo failed');
    expect(fatalErrors).toHaveLength(1);
    expect(fatalErrors[0]).toBeInstanceOf(InvariantViolation);
    wal.close();
  });
});
