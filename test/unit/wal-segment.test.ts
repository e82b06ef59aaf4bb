/**
 * Segment geometry, PostgreSQL file names and timeline history files.
 * Method: known names for 16 MB and 64 kB segments, parse round trips, history write/read in a temp dir.
 */
import * as fs from 'node:fs';
import * as path from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import {
  checkSegmentSize,
  parseSegmentSize,
  chooseSegmentFile,
  firstRecordLsn,
  parseSegmentFileName,
  parseTimelineHistory,
  readTimelineHistory,
  segmentFileName,
  timelineHistoryFileName,
  walDir,
  walFilePath,
  writeTimelineHistory,
  writeTimelineHistoryFile,
} from '../../wal/segment.ts';
import { WalsimError } from '../../common/errors.ts';
import { removeDir, tempDataDir } from './wal-helpers.ts';
import { nodeDisk } from '../../common/node-disk.ts';

const MB16 = 16 * 1024 * 1024;
const KB64 = 64 * 1024;

describe('segment file names', () => {
  it('are %08X%08X%08X of (TLI, segno / segsPerXlogId, segno % segsPerXlogId)', () => {
    expect(segmentFileName(1, 1, MB16)).toBe('000000010000000000000001');
    expect(segmentFileName(1, 255, MB16)).toBe('0000000100000000000000FF');
    expect(segmentFileName(1, 256, MB16)).toBe('000000010000000100000000');
    expect(segmentFileName(0x2a, 0x1234, MB16)).toBe('0000002A0000001200000034');
    expect(segmentFileName(1, 65536, KB64)).toBe('000000010000000100000000');
    expect(segmentFileName(3, 65535, KB64)).toBe('00000003000000000000FFFF');
  });

  it('parse back, and other names are not segments', () => {
    for (const segno of [0, 1, 255, 256, 99999]) {
      expect(parseSegmentFileName(segmentFileName(7, segno, MB16), MB16)).toEqual({
        tli: 7,
        segno,
      });
    }
    for (const bad of [
      '00000001.history',
      '000000010000000000000001.partial',
      '0000000100000000000001FF',
      'x'.repeat(24),
    ]) {
      expect(parseSegmentFileName(bad, MB16)).toBeNull();
    }
  });

  it('are kept once made: the same name for the same segment size, timeline and segno only', () => {
    // Computed afresh, as XLogFileName prints them.
    const fresh = (tli: number, segno: number, size: number) =>
      [tli, Math.floor(segno / (2 ** 32 / size)), segno % (2 ** 32 / size)]
        .map((n) => n.toString(16).toUpperCase().padStart(8, '0'))
        .join('');
    // Interleaved, so a cache keyed by less than all three would hand back another one's name.
    for (let round = 0; round < 2; round++) {
      for (const segno of [0, 1, 65536, 99999, 4097 * 3]) {
        for (const tli of [1, 2, 0x2a]) {
          expect(segmentFileName(tli, segno, KB64)).toBe(fresh(tli, segno, KB64));
          expect(segmentFileName(tli, segno, MB16)).toBe(fresh(tli, segno, MB16));
        }
      }
    }
    // Past the bound of kept names: still right.
    for (let segno = 0; segno < 5000; segno++)
      expect(segmentFileName(1, segno, KB64)).toBe(fresh(1, segno, KB64));
  });

  it('walFilePath is path.join(walDir(dataDir), name), the same string each time', () => {
    for (const dataDir of ['/data', '/data/', 'rel/dir', '/a//b/../c', '.']) {
      for (const name of ['000000010000000000000001', '00000002.history']) {
        const p = walFilePath(dataDir, name);
        expect(p).toBe(path.join(walDir(dataDir), name));
        expect(walFilePath(dataDir, name)).toBe(p);
      }
    }
    // Past the bound of kept paths: still right.
    for (let i = 0; i < 5000; i++)
      expect(walFilePath('/d', `f${i}`)).toBe(path.join('/d/pg_wal', `f${i}`));
  });

  it('a fresh cluster starts at segment 1 + 40 bytes, so LSN 0 stays invalid', () => {
    expect(firstRecordLsn(MB16)).toBe(0x0100_0028);
    expect(firstRecordLsn(KB64)).toBe(KB64 + 40);
  });

  it('segment sizes must be powers of two from 64 kB to 1 GB', () => {
    for (const ok of [KB64, MB16, 1024 ** 3]) expect(() => checkSegmentSize(ok)).not.toThrow();
    for (const bad of [32 * 1024, 3 * MB16, 2 * 1024 ** 3, 0, -1])
      expect(() => checkSegmentSize(bad)).toThrow(WalsimError);
  });
});

describe('timeline history files', () => {
  let dir = '';
  afterEach(() => removeDir(dir));

  it('timeline 1 needs no file; a child history copies the parent lines and adds its own', () => {
    dir = tempDataDir();
    fs.mkdirSync(walDir(dir));
    expect(readTimelineHistory(dir, 1, nodeDisk)).toEqual([{ tli: 1, beginLsn: 0, endLsn: null }]);
    writeTimelineHistory(
      dir,
      2,
      readTimelineHistory(dir, 1, nodeDisk),
      0x0300_0060,
      'promoted by pg_promote',
      nodeDisk,
    );
    expect(timelineHistoryFileName(2)).toBe('00000002.history');
    expect(fs.readFileSync(path.join(walDir(dir), '00000002.history'), 'utf8')).toBe(
      '1\t0/3000060\tpromoted by pg_promote\n',
    );
    writeTimelineHistory(
      dir,
      5,
      readTimelineHistory(dir, 2, nodeDisk),
      0x1_0000_0000,
      'again',
      nodeDisk,
    );
    expect(fs.readFileSync(path.join(walDir(dir), '00000005.history'), 'utf8')).toBe(
      '1\t0/3000060\tpromoted by pg_promote\n2\t1/0\tagain\n',
    );
    expect(readTimelineHistory(dir, 5, nodeDisk)).toEqual([
      { tli: 1, beginLsn: 0, endLsn: 0x0300_0060 },
      { tli: 2, beginLsn: 0x0300_0060, endLsn: 0x1_0000_0000 },
      { tli: 5, beginLsn: 0x1_0000_0000, endLsn: null },
    ]);
  });

  it('parses comments and blank lines; refuses non-increasing timelines or switch points, naming the file', () => {
    expect(parseTimelineHistory('# comment\n\n1\t0/100\treason\n', 2)).toHaveLength(2);
    expect(() => parseTimelineHistory('2\t0/100\tx\n1\t0/200\ty\n', 3)).toThrow(
      /00000003.history.*increasing/,
    );
    expect(() => parseTimelineHistory('1\t0/200\tx\n2\t0/100\ty\n', 3)).toThrow(/switch points/);
    expect(() => parseTimelineHistory('1\tnot-an-lsn\tx\n', 2)).toThrow(/switch point/);
    expect(() => parseTimelineHistory('3\t0/100\tx\n', 2)).toThrow(/less than child/);
    dir = tempDataDir();
    expect(() => writeTimelineHistoryFile(dir, 2, 'garbage\n', nodeDisk)).toThrow(WalsimError);
  });

  it('chooses the newest timeline in the history whose file exists and that began by that segment', () => {
    const history = [
      { tli: 1, beginLsn: 0, endLsn: 3 * KB64 + 96 },
      { tli: 2, beginLsn: 3 * KB64 + 96, endLsn: null },
    ];
    const files = new Set(
      [1, 2, 3]
        .map((s) => segmentFileName(1, s, KB64))
        .concat(segmentFileName(2, 3, KB64), segmentFileName(2, 4, KB64)),
    );
    const has = (n: string): boolean => files.has(n);
    expect(chooseSegmentFile('', 2, history, KB64, has)?.tli).toBe(1);
    expect(chooseSegmentFile('', 3, history, KB64, has)?.tli).toBe(2);
    expect(chooseSegmentFile('', 4, history, KB64, has)?.tli).toBe(2);
    expect(chooseSegmentFile('', 5, history, KB64, has)).toBeNull();
  });
});

describe('parseSegmentSize', () => {
  it('reads bytes and memory units, names wal_segment_size when refusing', () => {
    expect(parseSegmentSize('16MB')).toBe(16 * 1024 ** 2);
    expect(parseSegmentSize('64kB')).toBe(64 * 1024);
    expect(parseSegmentSize('1GB')).toBe(1024 ** 3);
    expect(parseSegmentSize('1048576')).toBe(1024 ** 2);
    for (const bad of ['12XB', '16mb', '1.5MB', '', '-16MB'])
      expect(() => parseSegmentSize(bad)).toThrow(/parameter "wal_segment_size": /);
    expect(() => parseSegmentSize('3MB')).toThrow(/WAL segment size must be a power of two/);
    expect(() => parseSegmentSize('2GB')).toThrow(/WAL segment size must be a power of two/);
  });
});
