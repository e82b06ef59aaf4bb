/**
 * WAL through segment files: write with WalWriter, read back with readWal/readWalBytes.
 * Method: 64 kB segments in temp dirs so records cross segment boundaries; then damage files
 * (flip, truncate, zero) and check the reader's endReason names the LSN and the segment file.
 */
import * as fs from 'node:fs';
import * as path from 'node:path';
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { WalWriter } from '../../wal/wal-writer.ts';
import {
  findEndOfWal,
  readWal,
  readWalBytes,
  recordBoundaries,
  wholeRecordsLength,
  type WalReadOptions,
} from '../../wal/wal-reader.ts';
import { InvalidWalRecordError } from '../../wal/codec.ts';
import {
  firstRecordLsn,
  readTimelineHistory,
  segmentFileName,
  segmentOf,
  walDir,
} from '../../wal/segment.ts';
import { formatLsn } from '../../wal/lsn.ts';
import type { WalRecord, WalRecordBody } from '../../wal/records.ts';
import { WalsimError } from '../../common/errors.ts';
import { ALL_BODIES, removeDir, tempDataDir } from './wal-helpers.ts';
import { nodeDisk } from '../../common/node-disk.ts';

const SEG = 64 * 1024;
const OPTS: WalReadOptions = { timeline: 1, segmentSize: SEG, disk: nodeDisk };

let dir = '';
beforeEach(() => {
  dir = tempDataDir();
});
afterEach(() => removeDir(dir));

/** n records cycling through every kind, with one big record every 50 so frames span segments. */
function bodies(n: number): WalRecordBody[] {
  const out: WalRecordBody[] = [];
  for (let i = 0; i < n; i++) {
    if (i % 50 === 49) {
      out.push({
        kind: 'XACT_COMMIT',
        xactTime: i,
        droppedRels: Array.from({ length: 3000 }, (_, k) => 16384 + k),
      });
    } else {
      out.push(ALL_BODIES[i % ALL_BODIES.length]!);
    }
  }
  return out;
}

function writeAll(
  list: WalRecordBody[],
  w = WalWriter.open(dir, { segmentSize: SEG, disk: nodeDisk, timeline: 1 }),
): { w: WalWriter; lsns: number[] } {
  const lsns: number[] = [];
  for (const [i, b] of list.entries()) lsns.push(w.insert(b, i + 3).startLsn);
  w.flush();
  return { w, lsns };
}

function readAll(
  from: number,
  opts: WalReadOptions = OPTS,
): { recs: WalRecord[]; reader: ReturnType<typeof readWal> } {
  const reader = readWal(dir, from, opts);
  return { recs: [...reader], reader };
}

function segPath(tli: number, segno: number): string {
  return path.join(walDir(dir), segmentFileName(tli, segno, SEG));
}

describe('WalWriter + readWal', () => {
  it('round-trips every record kind across many segments and ends cleanly', () => {
    const list = bodies(600);
    const { w, lsns } = writeAll(list);
    expect(lsns[0]).toBe(firstRecordLsn(SEG));
    expect(segmentOf(w.flushLsn, SEG)).toBeGreaterThanOrEqual(3);
    const { recs, reader } = readAll(lsns[0]!);
    expect(recs.map((r) => r.body)).toEqual(list);
    expect(recs.map((r) => r.lsn)).toEqual(lsns);
    expect(recs.map((r) => r.header.xid)).toEqual(list.map((_, i) => i + 3));
    expect(reader.endReason).toBe('end_of_wal');
    expect(reader.endLsn).toBe(w.insertLsn);
    expect(reader.lastRecordLsn).toBe(w.lastRecordLsn);
    // Every record boundary is MAXALIGNed and chained.
    for (let i = 1; i < recs.length; i++) {
      expect(recs[i]!.header.prev).toBe(recs[i - 1]!.lsn);
      expect(recs[i]!.lsn).toBe(recs[i - 1]!.endLsn);
    }
    w.close();
  });

  it('keeps insert >= write >= flush, and write() alone makes WAL readable but not flushed', () => {
    const w = WalWriter.open(dir, { segmentSize: SEG, disk: nodeDisk, timeline: 1 });
    const start = w.insertLsn;
    const r = w.insert(ALL_BODIES[0]!, 1);
    expect(r.startLsn).toBe(start);
    expect(w.insertLsn).toBe(r.endLsn);
    expect(w.writeLsn).toBe(start);
    expect(w.flushLsn).toBe(start);
    expect(readAll(start).recs).toHaveLength(0);
    w.write();
    expect(w.writeLsn).toBe(r.endLsn);
    expect(w.flushLsn).toBe(start);
    expect(readAll(start).recs).toHaveLength(1);
    w.flush();
    expect(w.flushLsn).toBe(r.endLsn);
    w.close();
  });

  it('holds a window the size of what it reads: a few records of a segment, a short stretch', () => {
    const { lsns, w } = writeAll(bodies(5));
    w.close();
    // No stop LSN (start-up replay): it read the rest of the 64 kB segment into a window as large.
    const all = readAll(lsns[0]!);
    expect(all.recs).toHaveLength(5);
    expect(all.reader.windowBytes).toBeLessThanOrEqual(8 * 1024);
    // A stop LSN (a standby's stretch of flushed WAL): read up to it at once, as before, into a
    // window of that size (it was 8 kB for any stretch).
    const stretch = readAll(lsns[1]!, { ...OPTS, stopLsn: lsns[3]! });
    expect(stretch.recs).toHaveLength(2);
    expect(stretch.reader.bufferedEndLsn).toBe(lsns[3]);
    expect(stretch.reader.windowBytes).toBeLessThanOrEqual(
      Math.max(512, 2 * (lsns[3]! - lsns[1]!)),
    );
  });

  it('reads from any record boundary and honours stopLsn and expectedPrev', () => {
    const { lsns, w } = writeAll(bodies(200));
    w.close();
    expect(readAll(lsns[100]!).recs).toHaveLength(100);
    expect(readAll(lsns[100]!, { ...OPTS, expectedPrev: lsns[99] }).recs).toHaveLength(100);
    const stopped = readAll(lsns[0]!, { ...OPTS, stopLsn: lsns[10]! });
    expect(stopped.recs).toHaveLength(10);
    expect(stopped.reader.endReason).toBe('end_of_wal');
    const wrongPrev = readAll(lsns[100]!, { ...OPTS, expectedPrev: lsns[98] });
    expect(wrongPrev.recs).toHaveLength(0);
    expect((wrongPrev.reader.endReason as InvalidWalRecordError).reason).toBe('bad_prev_link');
  });

  it('detects a flipped byte at the right LSN and names the segment file', () => {
    const { lsns, w } = writeAll(bodies(300));
    w.close();
    const victim = 150;
    const lsn = lsns[victim]!;
    const file = segPath(1, segmentOf(lsn, SEG));
    const fd = fs.openSync(file, 'r+');
    const b = Buffer.alloc(1);
    const at = (lsn % SEG) + 26 < SEG ? (lsn % SEG) + 26 : lsn % SEG; // a payload byte when it fits in this file
    fs.readSync(fd, b, 0, 1, at);
    b[0]! ^= 0x40;
    fs.writeSync(fd, b, 0, 1, at);
    fs.closeSync(fd);
    const { recs, reader } = readAll(lsns[0]!);
    expect(recs).toHaveLength(victim);
    const err = reader.endReason as InvalidWalRecordError;
    expect(err).toBeInstanceOf(InvalidWalRecordError);
    expect(err.lsn).toBe(lsn);
    expect(['bad_crc', 'bad_length', 'bad_header']).toContain(err.reason);
    expect(err.message).toContain(formatLsn(lsn));
    expect(err.message).toContain(path.basename(file));
  });

  it('reads a truncated tail (torn last record) as a clean end of WAL', () => {
    const { lsns, w } = writeAll(bodies(120));
    w.close();
    const lastLsn = lsns[lsns.length - 1]!;
    const file = segPath(1, segmentOf(lastLsn, SEG));
    fs.truncateSync(file, (lastLsn % SEG) + 30);
    const { recs, reader } = readAll(lsns[0]!);
    expect(recs).toHaveLength(lsns.length - 1);
    expect(reader.endReason).toBe('end_of_wal');
    expect(reader.endLsn).toBe(lastLsn);
    expect(findEndOfWal(dir, lsns[0]!, OPTS)).toMatchObject({
      endLsn: lastLsn,
      lastRecordLsn: lsns[lsns.length - 2],
      endReason: 'end_of_wal',
    });
  });

  it('reads a zeroed tail as a clean end of WAL', () => {
    const { lsns, w } = writeAll(bodies(120));
    w.close();
    const cut = lsns[100]!;
    const file = segPath(1, segmentOf(cut, SEG));
    const size = fs.statSync(file).size;
    fs.writeFileSync(
      file,
      Buffer.concat([
        fs.readFileSync(file).subarray(0, cut % SEG),
        Buffer.alloc(size - (cut % SEG)),
      ]),
    );
    for (let s = segmentOf(cut, SEG) + 1; fs.existsSync(segPath(1, s)); s++)
      fs.writeFileSync(segPath(1, s), Buffer.alloc(SEG));
    const { recs, reader } = readAll(lsns[0]!);
    expect(recs).toHaveLength(100);
    expect(reader.endReason).toBe('end_of_wal');
  });

  it('reports a prev-link mismatch in the middle of otherwise valid WAL', () => {
    const w = WalWriter.open(dir, { segmentSize: SEG, disk: nodeDisk, timeline: 1 });
    const a = w.insert(ALL_BODIES[0]!, 1);
    w.insert(ALL_BODIES[1]!, 1);
    w.flush();
    w.close();
    // Re-open at the second record's start claiming a wrong predecessor: its xl_prev is then wrong.
    const b = a.endLsn;
    const w2 = WalWriter.open(dir, {
      segmentSize: SEG,
      disk: nodeDisk,
      timeline: 1,
      startLsn: b,
      prevLsn: firstRecordLsn(SEG) - 8,
    });
    w2.insert(ALL_BODIES[1]!, 1);
    w2.insert(ALL_BODIES[2]!, 1);
    w2.close();
    const { recs, reader } = readAll(a.startLsn);
    expect(recs).toHaveLength(1);
    const err = reader.endReason as InvalidWalRecordError;
    expect(err.reason).toBe('bad_prev_link');
    expect(err.lsn).toBe(b);
    expect(err.message).toContain(segmentFileName(1, 1, SEG));
  });

  it('re-opening after a crash cuts off everything past the given end of WAL', () => {
    const { lsns, w } = writeAll(bodies(300));
    w.close();
    const end = lsns[120]!;
    const w2 = WalWriter.open(dir, {
      segmentSize: SEG,
      disk: nodeDisk,
      timeline: 1,
      startLsn: end,
      prevLsn: lsns[119],
    });
    const r = w2.insert({ kind: 'NOOP' }, 0);
    w2.close();
    const { recs, reader } = readAll(lsns[0]!);
    expect(recs).toHaveLength(121);
    expect(recs[120]!.body).toEqual({ kind: 'NOOP' });
    expect(reader.endReason).toBe('end_of_wal');
    expect(reader.endLsn).toBe(r.endLsn);
  });

  it('refuses to open existing WAL without a start position, and asserts alignment', () => {
    writeAll(bodies(3)).w.close();
    expect(() => WalWriter.open(dir, { segmentSize: SEG, disk: nodeDisk, timeline: 1 })).toThrow(
      /startLsn/,
    );
    expect(() =>
      WalWriter.open(dir, {
        segmentSize: SEG,
        disk: nodeDisk,
        timeline: 1,
        startLsn: SEG + 44,
        prevLsn: SEG + 40,
      }),
    ).toThrow(/MAXALIGN/);
  });

  it('writes out the WAL buffers by itself when they exceed walBuffersBytes', () => {
    const w = WalWriter.open(dir, {
      segmentSize: SEG,
      disk: nodeDisk,
      timeline: 1,
      walBuffersBytes: 4096,
    });
    for (let i = 0; i < 500; i++) w.insert(ALL_BODIES[i % ALL_BODIES.length]!, 1);
    expect(w.writeLsn).toBeGreaterThan(w.insertLsn - 4096 - 64);
    expect(w.flushLsn).toBe(firstRecordLsn(SEG));
    w.close();
  });
});

describe('appendRaw (walreceiver)', () => {
  function primaryWal(n: number): { bytes: Uint8Array; lsns: number[]; end: number } {
    const src = tempDataDir();
    try {
      const w = WalWriter.open(src, { segmentSize: SEG, disk: nodeDisk, timeline: 1 });
      const lsns = bodies(n).map((b) => w.insert(b, 1).startLsn);
      w.close();
      return { bytes: readWalBytes(src, lsns[0]!, w.insertLsn, OPTS), lsns, end: w.insertLsn };
    } finally {
      removeDir(src);
    }
  }

  it('writes upstream WAL verbatim, in pieces of whole records, readable as the same records', () => {
    const { bytes, lsns, end } = primaryWal(200);
    const w = WalWriter.open(dir, { segmentSize: SEG, disk: nodeDisk, timeline: 1 });
    let at = lsns[0]!;
    let decoded = 0;
    while (at < end) {
      const chunk = bytes.subarray(at - lsns[0]!, at - lsns[0]! + 10_000);
      const n = wholeRecordsLength(chunk, 5000);
      decoded += w.appendRaw(chunk.subarray(0, n), at).length;
      w.flush();
      at += n;
    }
    expect(decoded).toBe(200);
    expect(w.flushLsn).toBe(end);
    expect(readAll(lsns[0]!).recs.map((r) => r.lsn)).toEqual(lsns);
    w.close();
  });

  it('refuses gaps, overlaps, corrupt and partial frames without writing anything', () => {
    const { bytes, lsns } = primaryWal(20);
    const w = WalWriter.open(dir, { segmentSize: SEG, disk: nodeDisk, timeline: 1 });
    const second = lsns[1]! - lsns[0]!;
    w.appendRaw(bytes.subarray(0, second), lsns[0]!);
    const before = { insert: w.insertLsn, last: w.lastRecordLsn };
    const reasonOf = (f: () => unknown): string => {
      try {
        f();
      } catch (e) {
        expect(e).toBeInstanceOf(InvalidWalRecordError);
        return (e as InvalidWalRecordError).reason;
      }
      return 'accepted';
    };
    expect(reasonOf(() => w.appendRaw(bytes.subarray(second + 8), lsns[1]! + 8))).toBe('gap');
    expect(reasonOf(() => w.appendRaw(bytes, lsns[0]!))).toBe('overlap');
    const corrupt = bytes.slice(second);
    corrupt[corrupt.length - 3]! ^= 0xff;
    expect(reasonOf(() => w.appendRaw(corrupt, lsns[1]!))).toMatch(/bad_crc|bad_header/);
    expect(reasonOf(() => w.appendRaw(bytes.subarray(second, bytes.length - 8), lsns[1]!))).toBe(
      'truncated',
    );
    expect(reasonOf(() => w.appendRaw(bytes.subarray(lsns[2]! - lsns[0]!), lsns[1]!))).toBe(
      'bad_prev_link',
    );
    expect({ insert: w.insertLsn, last: w.lastRecordLsn }).toEqual(before);
    w.flush();
    expect(readAll(lsns[0]!).recs).toHaveLength(1);
    expect(w.appendRaw(bytes.subarray(second), lsns[1]!)).toHaveLength(19);
    w.close();
  });
});

describe('readWalBytes and record boundaries (walsender)', () => {
  it('returns the bytes between two LSNs across segments, and finds whole records in them', () => {
    const { lsns, w } = writeAll(bodies(300));
    w.close();
    const bytes = readWalBytes(dir, lsns[10]!, lsns[250]!, OPTS);
    expect(bytes.length).toBe(lsns[250]! - lsns[10]!);
    expect(recordBoundaries(bytes, lsns[10]!)).toEqual(lsns.slice(10, 250));
    const cut = bytes.subarray(0, bytes.length - 3);
    expect(wholeRecordsLength(cut)).toBe(lsns[249]! - lsns[10]!);
    expect(wholeRecordsLength(bytes, 1)).toBe(lsns[11]! - lsns[10]!); // at least one record
    expect(wholeRecordsLength(bytes, lsns[13]! - lsns[10]! + 7)).toBe(lsns[13]! - lsns[10]!);
  });

  it('names the missing or short file when asked for WAL that is not there', () => {
    const { w } = writeAll(bodies(5));
    w.close();
    expect(() => readWalBytes(dir, 20 * SEG, 20 * SEG + 8, OPTS)).toThrow(WalsimError);
    expect(() => readWalBytes(dir, SEG + 40, 2 * SEG - 8, OPTS)).toThrow(
      new RegExp(segmentFileName(1, 1, SEG)),
    );
  });
});

describe('timeline switch', () => {
  it('continues on the new timeline after copying the switch segment, readable across the switch', () => {
    const w = WalWriter.open(dir, { segmentSize: SEG, disk: nodeDisk, timeline: 1 });
    const before = bodies(150).map((b) => w.insert(b, 1).startLsn);
    const switchLsn = w.insertLsn;
    w.switchTimeline(2, 'promoted');
    expect(w.timeline).toBe(2);
    w.insert({ kind: 'END_OF_RECOVERY', newTimeline: 2, prevTimeline: 1, time: 5 }, 0);
    const after = bodies(150).map((b) => w.insert(b, 2).startLsn);
    w.close();

    expect(readTimelineHistory(dir, 2, nodeDisk)).toEqual([
      { tli: 1, beginLsn: 0, endLsn: switchLsn },
      { tli: 2, beginLsn: switchLsn, endLsn: null },
    ]);
    const switchSeg = segmentOf(switchLsn, SEG);
    // The new timeline's first segment starts with a copy of the old one up to the switch point.
    const oldBytes = fs.readFileSync(segPath(1, switchSeg)).subarray(0, switchLsn % SEG);
    expect(
      Buffer.compare(fs.readFileSync(segPath(2, switchSeg)).subarray(0, switchLsn % SEG), oldBytes),
    ).toBe(0);
    expect(fs.existsSync(segPath(2, switchSeg - 1))).toBe(false);

    const onTwo = readAll(before[0]!, { timeline: 2, segmentSize: SEG, disk: nodeDisk });
    expect(onTwo.recs.map((r) => r.lsn)).toEqual([...before, switchLsn, ...after]);
    expect(onTwo.reader.endReason).toBe('end_of_wal');
    // Timeline 1 alone ends at the switch point.
    const onOne = readAll(before[0]!, { timeline: 1, segmentSize: SEG, disk: nodeDisk });
    expect(onOne.recs.map((r) => r.lsn)).toEqual(before);
    expect(
      readWalBytes(dir, before[0]!, w.insertLsn, { timeline: 2, segmentSize: SEG, disk: nodeDisk })
        .length,
    ).toBe(w.insertLsn - before[0]!);
  });

  it('a restarted writer on the new timeline picks up where it was', () => {
    const w = WalWriter.open(dir, { segmentSize: SEG, disk: nodeDisk, timeline: 1 });
    const first = w.insert(ALL_BODIES[0]!, 1).startLsn;
    w.switchTimeline(2);
    const r = w.insert(ALL_BODIES[1]!, 1);
    w.close();
    const end = findEndOfWal(dir, first, { timeline: 2, segmentSize: SEG, disk: nodeDisk });
    expect(end.endLsn).toBe(r.endLsn);
    const w2 = WalWriter.open(dir, {
      segmentSize: SEG,
      disk: nodeDisk,
      timeline: 2,
      startLsn: end.endLsn,
      prevLsn: end.lastRecordLsn,
    });
    w2.insert(ALL_BODIES[2]!, 1);
    w2.close();
    expect(readAll(first, { timeline: 2, segmentSize: SEG, disk: nodeDisk }).recs).toHaveLength(3);
  });

  it('branches from the ancestor timeline when WAL ends before the current timeline began', () => {
    // A standby followed its upstream onto timeline 2 before replaying up to the switch point,
    // then ended its WAL at a damaged record below it (truncate) and was promoted: the new
    // timeline's parent is timeline 1, the one the end of WAL lies on (PostgreSQL's lastRecTLI),
    // and its first segment is copied from the file the writer wrote (timeline 2's), even when
    // timeline 1's file for that segment is gone.
    const w = WalWriter.open(dir, { segmentSize: SEG, disk: nodeDisk, timeline: 1 });
    const lsns = bodies(40).map((b) => w.insert(b, 1).startLsn);
    const switchLsn = w.insertLsn;
    expect(w.switchTimeline(2)).toBe(1);
    w.insert(ALL_BODIES[0]!, 1);
    w.flush();
    const end = lsns[20]!;
    w.truncate(end, lsns[19]!);
    fs.rmSync(segPath(1, segmentOf(end, SEG)));
    expect(w.switchTimeline(3, 'promoted')).toBe(1);
    expect(readTimelineHistory(dir, 3, nodeDisk)).toEqual([
      { tli: 1, beginLsn: 0, endLsn: end },
      { tli: 3, beginLsn: end, endLsn: null },
    ]);
    expect(end).toBeLessThan(switchLsn);
    const next = w.insert(ALL_BODIES[1]!, 1).startLsn;
    w.close();
    const onThree = readAll(lsns[0]!, { timeline: 3, segmentSize: SEG, disk: nodeDisk });
    expect(onThree.recs.map((r) => r.lsn)).toEqual([...lsns.slice(0, 20), next]);
    expect(onThree.reader.endReason).toBe('end_of_wal');
  });

  it('refuses a history file that does not branch at the current position', () => {
    const w = WalWriter.open(dir, { segmentSize: SEG, disk: nodeDisk, timeline: 1 });
    w.insert(ALL_BODIES[0]!, 1);
    fs.writeFileSync(path.join(walDir(dir), '00000002.history'), '1\t0/28\tsomewhere else\n');
    expect(() => w.switchTimeline(2)).toThrow(/does not branch/);
    w.close();
  });
});
