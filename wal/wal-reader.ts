/**
 * Reading WAL back from segment files: records (replay, recovery) and raw bytes (walsender).
 *
 * Entry points: `readWal` -> WalReader (an iterator of WalRecord with `endReason` afterwards),
 * `findEndOfWal`, `readWalBytes`, `wholeRecordsLength`, `recordBoundaries`.
 *
 * Segment choice (PostgreSQL's XLogFileReadAnyTLI): for each segment, walk the target timeline's
 * history newest first, skip timelines that begin after the segment, and read the first file that
 * exists. A timeline switch copies the switch segment's prefix into the new timeline's file, so the
 * newest file always holds the right bytes.
 */
import { assert, fail } from '../common/assert.ts';
import type { Disk } from '../common/disk.ts';
import { WalsimError } from '../common/errors.ts';
import {
  decodeRecord,
  InvalidWalRecordError,
  isEndOfWalReason,
  isInvalidWalRecordError,
  MAX_RECORD_LENGTH,
  readRecordHeader,
  SIZE_OF_XLOG_RECORD,
} from './codec.ts';
import { assertValidLsn, formatLsn, type Lsn, type TimeLineId } from './lsn.ts';
import type { WalRecord } from './records.ts';
import {
  checkSegmentSize,
  chooseSegmentFile,
  readTimelineHistory,
  segmentFileName,
  segmentOf,
  segmentOffset,
  type TimelineHistoryEntry,
  walFilePath,
} from './segment.ts';

export interface WalReadOptions {
  /** The timeline whose history decides which segment files to read. */
  timeline: TimeLineId;
  segmentSize: number;
  /** xl_prev the first record must carry (its predecessor's start). Unchecked when omitted. */
  expectedPrev?: Lsn;
  /** Return no record that ends after this LSN (e.g. the flush LSN of WAL still being written). */
  stopLsn?: Lsn;
  /** The timeline history to use instead of reading `%08X.history` of `timeline`. */
  history?: readonly TimelineHistoryEntry[];
  /** The file system holding the segment files (node:fs in the server process, the simulator's in sim/). */
  disk: Disk;
}

/** Why reading stopped: clean end of WAL, or a record that failed validation (caller decides). */
export type WalEndReason = 'end_of_wal' | InvalidWalRecordError;

const READ_CHUNK_BYTES = 1024 * 1024;
/**
 * A reader with no stop LSN (start-up replay, the end-of-WAL search) reads its first chunk this
 * large and doubles it up to READ_CHUNK_BYTES: WAL since a REDO point is often a few hundred bytes
 * of a segment, and reading the rest of the segment at once sized (and zero-filled) a window as
 * large as the segment — up to a megabyte — at every start. A reader with a stop LSN reads up to
 * it at once, as before (what it holds in memory is `bufferedEndLsn`).
 */
const FIRST_UNBOUNDED_CHUNK_BYTES = 8 * 1024;
/** The window's capacity is a multiple of this (it was 8 KB at least, for a 200-byte stretch). */
const WINDOW_ROUND_BYTES = 512;

/**
 * Sequential reader of records from `fromLsn` (a record boundary). Iterate it (or call
 * readRecord()); when it returns no more records, `endReason` says why and `endLsn` is where
 * the next record would have started (the end of valid WAL when endReason is 'end_of_wal').
 */
export class WalReader implements Iterable<WalRecord> {
  /** null until reading has stopped. */
  endReason: WalEndReason | null = null;
  /** Start of the next record to read; after the end, the end of the valid WAL read. */
  endLsn: Lsn;
  /** Start LSN of the last record returned (or expectedPrev / 0 before the first). */
  lastRecordLsn: Lsn;
  /** Records returned so far. */
  recordCount = 0;

  private readonly history: readonly TimelineHistoryEntry[];
  private readonly disk: Disk;
  private readonly segmentSize: number;
  private readonly stopLsn: number;
  private readonly checkFirstPrev: boolean;
  /** Window of WAL bytes [winStartLsn, winStartLsn + winLen). */
  // Allocated at the first read and grown on demand (to a chunk, or a large record): a standby
  // opens a reader per stretch of flushed WAL, often a few hundred bytes, and a zero-filled 64 KB
  // window per reader was a visible share of a simulation's allocation.
  private win = new Uint8Array(0);
  private winStartLsn: Lsn;
  private winLen = 0;
  /** No more bytes beyond the window: missing file, short file, or stopLsn. */
  private eof = false;
  private fd: number | null = null;
  private fdSegno = -1;
  private readonly fileBySegno = new Map<number, string>();
  /** Bytes a fill reads ahead at least (grows for a reader with no stop LSN). */
  private chunkBytes: number;

  constructor(
    readonly dataDir: string,
    fromLsn: Lsn,
    opts: WalReadOptions,
  ) {
    checkSegmentSize(opts.segmentSize);
    assertValidLsn(fromLsn, 'fromLsn');
    if (fromLsn % 8 !== 0)
      fail(
        `INV-WAL-2: readWal must start at a MAXALIGNed record boundary, got ${formatLsn(fromLsn)}`,
      );
    this.segmentSize = opts.segmentSize;
    this.disk = opts.disk;
    this.history = opts.history ?? readTimelineHistory(dataDir, opts.timeline, this.disk);
    this.stopLsn = opts.stopLsn ?? Number.MAX_SAFE_INTEGER;
    this.endLsn = fromLsn;
    this.winStartLsn = fromLsn;
    this.lastRecordLsn = opts.expectedPrev ?? 0;
    this.checkFirstPrev = opts.expectedPrev !== undefined;
    this.chunkBytes = opts.stopLsn === undefined ? FIRST_UNBOUNDED_CHUNK_BYTES : READ_CHUNK_BYTES;
  }

  /** Bytes of memory its window holds (what it read ahead, rounded up; for tests). */
  get windowBytes(): number {
    return this.win.length;
  }

  /** End of the WAL bytes this reader holds in memory: bytes before it are not read from disk again. */
  get bufferedEndLsn(): Lsn {
    return this.winStartLsn + this.winLen;
  }

  [Symbol.iterator](): Iterator<WalRecord> {
    return {
      next: (): IteratorResult<WalRecord> => {
        const rec = this.readRecord();
        return rec === null ? { done: true, value: undefined } : { done: false, value: rec };
      },
    };
  }

  /** The next record, or null at the end (then see endReason). */
  readRecord(): WalRecord | null {
    if (this.endReason !== null) return null;
    const lsn = this.endLsn;
    if (lsn >= this.stopLsn) return this.finish('end_of_wal');
    if (!this.ensure(lsn, SIZE_OF_XLOG_RECORD) && this.available(lsn) < 4)
      return this.finish('end_of_wal');
    const off = lsn - this.winStartLsn;
    const winEnd = this.winLen;
    const expectedPrev =
      this.checkFirstPrev || this.recordCount > 0 ? this.lastRecordLsn : undefined;
    let totalLength: number;
    try {
      totalLength = readRecordHeader(this.win, off, lsn, expectedPrev, winEnd);
    } catch (e) {
      return this.fail(e, lsn);
    }
    const space = (totalLength + 7) & ~7;
    if (lsn + space > this.stopLsn) return this.finish('end_of_wal'); // not flushed yet
    if (!this.ensure(lsn, space)) return this.finish('end_of_wal'); // torn record at the tail
    let rec: WalRecord;
    try {
      rec = decodeRecord(this.win, lsn - this.winStartLsn, lsn, expectedPrev, this.winLen);
    } catch (e) {
      return this.fail(e, lsn);
    }
    this.endLsn = rec.endLsn;
    this.lastRecordLsn = lsn;
    this.recordCount++;
    return rec;
  }

  /** Release the open segment file (also done automatically at the end). */
  close(): void {
    if (this.fd !== null) this.disk.close(this.fd);
    this.fd = null;
    this.fdSegno = -1;
  }

  private finish(reason: WalEndReason): null {
    this.endReason = reason;
    this.close();
    return null;
  }

  private fail(e: unknown, lsn: Lsn): null {
    if (!isInvalidWalRecordError(e)) throw e;
    // A zero length or a header cut short by the end of the files is the end of WAL.
    if (isEndOfWalReason(e.reason)) return this.finish('end_of_wal');
    return this.finish(e.inFile(this.describeFiles(lsn)));
  }

  /** The segment file(s) a record at lsn was read from, for error messages. */
  private describeFiles(lsn: Lsn): string {
    const segno = segmentOf(lsn, this.segmentSize);
    const first = this.fileBySegno.get(segno) ?? '(unknown)';
    const len = readRecordLengthOrZero(this.win, lsn - this.winStartLsn, this.winLen);
    const endSegno = segmentOf(lsn + Math.max(len, 1) - 1, this.segmentSize);
    if (endSegno > segno && this.fileBySegno.has(endSegno)) {
      return `${first} (record continues in ${this.fileBySegno.get(endSegno)})`;
    }
    return first;
  }

  private available(lsn: Lsn): number {
    return this.winStartLsn + this.winLen - lsn;
  }

  /** Make [lsn, lsn + n) present in the window; false if the WAL ends before that. */
  private ensure(lsn: Lsn, n: number): boolean {
    const want = Math.min(lsn + n, this.stopLsn);
    while (this.winStartLsn + this.winLen < want && !this.eof) this.fill(lsn, want);
    return this.winStartLsn + this.winLen >= lsn + n;
  }

  /** Read the next chunk of WAL into the window, first dropping bytes before `keepFrom`. */
  private fill(keepFrom: Lsn, want: Lsn): void {
    const drop = keepFrom - this.winStartLsn;
    if (drop > 0) {
      this.win.copyWithin(0, drop, this.winLen);
      this.winLen -= drop;
      this.winStartLsn = keepFrom;
    }
    const at = this.winStartLsn + this.winLen;
    const segno = segmentOf(at, this.segmentSize);
    const offset = segmentOffset(at, this.segmentSize);
    const toRead = Math.min(
      this.segmentSize - offset,
      Math.max(want - at, this.chunkBytes),
      this.stopLsn - at,
    );
    this.chunkBytes = Math.min(this.chunkBytes * 2, READ_CHUNK_BYTES);
    if (this.winLen + toRead > this.win.length) {
      const need = this.winLen + toRead;
      const cap = Math.max(
        this.win.length * 2,
        Math.ceil(need / WINDOW_ROUND_BYTES) * WINDOW_ROUND_BYTES,
      );
      const grown = new Uint8Array(cap);
      grown.set(this.win.subarray(0, this.winLen));
      this.win = grown;
    }
    const fd = this.segmentFd(segno);
    if (fd === null) {
      this.eof = true;
      return;
    }
    const n = this.disk.read(fd, this.win, this.winLen, toRead, offset);
    this.winLen += n;
    if (n < toRead) this.eof = true; // a short file ends the WAL (INV-WAL-6 keeps nothing after it)
    if (this.winStartLsn + this.winLen >= this.stopLsn) this.eof = true;
  }

  private segmentFd(segno: number): number | null {
    if (this.fdSegno === segno) return this.fd;
    this.close();
    const chosen = chooseSegmentFile(this.dataDir, segno, this.history, this.segmentSize, (name) =>
      this.disk.exists(walFilePath(this.dataDir, name)),
    );
    if (chosen === null) return null;
    this.fileBySegno.set(segno, chosen.name);
    this.fd = this.disk.open(walFilePath(this.dataDir, chosen.name), 'r');
    this.fdSegno = segno;
    return this.fd;
  }
}

function readRecordLengthOrZero(buf: Uint8Array, off: number, end: number): number {
  if (end - off < 4) return 0;
  const len =
    (buf[off]! | (buf[off + 1]! << 8) | (buf[off + 2]! << 16) | (buf[off + 3]! << 24)) >>> 0;
  return len <= MAX_RECORD_LENGTH ? len : 0;
}

/**
 * Read records of `dataDir`'s WAL from `fromLsn` (a record boundary) on `opts.timeline`. Iterate
 * the result; afterwards `endReason` is 'end_of_wal' (zero length, missing segment, torn tail, or
 * stopLsn) or the InvalidWalRecordError of the first bad record, naming its LSN and segment file.
 * Crash recovery treats a bad record as the end of WAL; a standby stops replay and reports it.
 */
export function readWal(dataDir: string, fromLsn: Lsn, opts: WalReadOptions): WalReader {
  return new WalReader(dataDir, fromLsn, opts);
}

export interface EndOfWal {
  /** Where the next record goes: the end of the valid WAL. */
  endLsn: Lsn;
  /** Start of the last valid record (xl_prev for the next). */
  lastRecordLsn: Lsn;
  records: number;
  endReason: WalEndReason;
}

/** Scan WAL from `fromLsn` to its end without keeping the records (recovery's end-of-WAL search). */
export function findEndOfWal(dataDir: string, fromLsn: Lsn, opts: WalReadOptions): EndOfWal {
  const reader = readWal(dataDir, fromLsn, opts);
  while (reader.readRecord() !== null) {
    // only the end position matters
  }
  assert(reader.endReason !== null, 'INV-WAL-7: reader stopped without a reason');
  return {
    endLsn: reader.endLsn,
    lastRecordLsn: reader.lastRecordLsn,
    records: reader.recordCount,
    endReason: reader.endReason,
  };
}

/**
 * WalSndSegmentOpen's error for a segment file that is gone (removed by a checkpoint), naming the
 * file of the timeline the history assigns to `segno`.
 */
export function walSegmentRemovedMessage(
  segno: number,
  history: readonly TimelineHistoryEntry[],
  segmentSize: number,
): string {
  let tli = history[history.length - 1]!.tli;
  for (let i = history.length - 1; i >= 0; i--) {
    tli = history[i]!.tli;
    if (segno >= segmentOf(history[i]!.beginLsn, segmentSize)) break;
  }
  return `requested WAL segment ${segmentFileName(tli, segno, segmentSize)} has already been removed`;
}

/**
 * The raw WAL bytes [startLsn, endLsn) from segment files (the walsender's XLogRead). The range
 * must be WAL that exists (at or below the flush LSN): a missing or short file is an error
 * WalsimError('io_error') naming the file.
 */
export function readWalBytes(
  dataDir: string,
  startLsn: Lsn,
  endLsn: Lsn,
  opts: Pick<WalReadOptions, 'timeline' | 'segmentSize' | 'history' | 'disk'>,
): Uint8Array {
  const disk = opts.disk;
  checkSegmentSize(opts.segmentSize);
  assertValidLsn(startLsn, 'startLsn');
  assertValidLsn(endLsn, 'endLsn');
  if (!(startLsn <= endLsn))
    fail(`INV-WAL-7: readWalBytes range ${formatLsn(startLsn)}..${formatLsn(endLsn)} is reversed`);
  const history = opts.history ?? readTimelineHistory(dataDir, opts.timeline, disk);
  const out = new Uint8Array(endLsn - startLsn);
  let at = startLsn;
  while (at < endLsn) {
    const segno = segmentOf(at, opts.segmentSize);
    const offset = segmentOffset(at, opts.segmentSize);
    const n = Math.min(endLsn - at, opts.segmentSize - offset);
    const chosen = chooseSegmentFile(dataDir, segno, history, opts.segmentSize, (name) =>
      disk.exists(walFilePath(dataDir, name)),
    );
    if (chosen === null)
      throw new WalsimError('io_error', walSegmentRemovedMessage(segno, history, opts.segmentSize));
    const fd = disk.open(walFilePath(dataDir, chosen.name), 'r');
    try {
      let got = 0;
      while (got < n) {
        const r = disk.read(fd, out, at - startLsn + got, n - got, offset + got);
        if (r === 0) {
          throw new WalsimError(
            'io_error',
            `could not read from WAL segment ${chosen.name} at offset ${offset + got}: file ends before ${formatLsn(endLsn)}`,
          );
        }
        got += r;
      }
    } finally {
      disk.close(fd);
    }
    at += n;
  }
  return out;
}

/**
 * Bytes of the longest prefix of `bytes` (starting at a record boundary) made of whole records,
 * judged by xl_tot_len only (no CRC). `maxBytes` caps it, but the first record is always
 * included when complete so that a record larger than the cap can still be sent.
 */
export function wholeRecordsLength(bytes: Uint8Array, maxBytes = bytes.length): number {
  let pos = 0;
  while (pos + 4 <= bytes.length) {
    const len = readRecordLengthOrZero(bytes, pos, bytes.length);
    if (len < SIZE_OF_XLOG_RECORD) break;
    const next = pos + ((len + 7) & ~7);
    if (next > bytes.length || (next > maxBytes && pos > 0)) break;
    pos = next;
  }
  return pos;
}

/** Start LSNs of the whole records in `bytes`, which begin at `startLsn` (a record boundary). */
export function recordBoundaries(bytes: Uint8Array, startLsn: Lsn): Lsn[] {
  const out: Lsn[] = [];
  let pos = 0;
  const end = wholeRecordsLength(bytes);
  while (pos < end) {
    out.push(startLsn + pos);
    pos += (readRecordLengthOrZero(bytes, pos, bytes.length) + 7) & ~7;
  }
  return out;
}
