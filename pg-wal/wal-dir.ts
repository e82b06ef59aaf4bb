/**
 * Segment files of a pg_wal directory as the reader consumes them: which timeline's file holds a
 * segment (PostgreSQL's XLogFileReadAnyTLI rule over the timeline history), its size checked
 * against the segment size, and chunked reads at a file offset. The only file in pg-wal/ that
 * touches the file system.
 *
 * Entry points: `WalDirectory`, `WalSegmentSource`, `WalSegmentFile`, `detectSegmentSize`.
 */
import * as fs from 'node:fs';
import * as path from 'node:path';
import { WalsimError } from '../common/errors.ts';
import { type TimeLineId } from '../wal/lsn.ts';
import {
  chooseSegmentFile,
  parseSegmentFileName,
  parseTimelineHistory,
  segmentFileName,
  timelineHistoryFileName,
  type TimelineHistoryEntry,
} from '../wal/segment.ts';
import { SIZE_OF_LONG_PHD, XLP_LONG_HEADER } from './format.ts';

/** One open segment file. */
export interface WalSegmentFile {
  name: string;
  tli: TimeLineId;
  /** Read up to `length` bytes at file offset `position` into `buf[offset…]`; bytes read. */
  read(buf: Uint8Array, offset: number, length: number, position: number): Promise<number>;
  close(): Promise<void>;
  /** The open file's descriptor, when it is a file: the CRC worker thread reads ahead with it. */
  fd?: number;
}

/** Where the reader gets segments from (a directory here; tests may give bytes in memory). */
export interface WalSegmentSource {
  readonly segmentSize: number;
  /** The file of segment `segno`, or null when no timeline of the history has it. */
  open(segno: number): Promise<WalSegmentFile | null>;
  /** The file name a missing segment would have on the newest timeline (for messages). */
  expectedName(segno: number): string;
}

const SEGMENT_NAME = /^[0-9A-F]{24}$/;

/**
 * The segment size a pg_wal directory's files were written with: xlp_seg_size of the long page
 * header of the first segment file found (as pg_waldump does), checked against the file's size.
 */
export function detectSegmentSize(walDir: string): number {
  let names: string[];
  try {
    names = fs
      .readdirSync(walDir)
      .filter((n) => SEGMENT_NAME.test(n))
      .sort();
  } catch (e) {
    throw new WalsimError('invalid_input', `cannot read WAL directory ${walDir}: ${errText(e)}`);
  }
  const name = names[0];
  if (name === undefined)
    throw new WalsimError('invalid_input', `no WAL segment files in ${walDir}`);
  const file = path.join(walDir, name);
  const head = Buffer.alloc(SIZE_OF_LONG_PHD);
  let size: number;
  try {
    const fd = fs.openSync(file, 'r');
    try {
      fs.readSync(fd, head, 0, SIZE_OF_LONG_PHD, 0);
      size = fs.fstatSync(fd).size;
    } finally {
      fs.closeSync(fd);
    }
  } catch (e) {
    throw new WalsimError('invalid_input', `cannot read WAL file ${file}: ${errText(e)}`);
  }
  const segSize = head.readUInt32LE(32);
  const valid = segSize >= 1 << 20 && segSize <= 1 << 30 && (segSize & (segSize - 1)) === 0;
  if ((head.readUInt16LE(2) & XLP_LONG_HEADER) === 0 || !valid)
    throw new WalsimError(
      'invalid_input',
      `WAL file ${file}: its first page has no valid long header (xlp_seg_size ${segSize}): not a WAL segment`,
    );
  if (size !== segSize)
    throw new WalsimError(
      'invalid_input',
      `WAL file ${file} is ${size} bytes, but its header says segments are ${segSize} bytes`,
    );
  return segSize;
}

const errText = (e: unknown) => (e as NodeJS.ErrnoException).code ?? (e as Error).message;

/**
 * The timeline history of `tli` from `<walDir>/%08X.history` (timeline 1, or no file: one
 * timeline from 0).
 */
export function readHistory(walDir: string, tli: TimeLineId): TimelineHistoryEntry[] {
  const file = path.join(walDir, timelineHistoryFileName(tli));
  let text: string;
  try {
    text = fs.readFileSync(file, 'utf8');
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code === 'ENOENT' && tli === 1)
      return [{ tli: 1, beginLsn: 0, endLsn: null }];
    throw new WalsimError(
      'invalid_input',
      `cannot read the history of timeline ${tli} (${file}): ${errText(e)}`,
    );
  }
  return parseTimelineHistory(text, tli, file);
}

/** A pg_wal directory read along a timeline history. */
export class WalDirectory implements WalSegmentSource {
  private readonly names: Set<string>;

  constructor(
    readonly walDir: string,
    readonly segmentSize: number,
    readonly history: readonly TimelineHistoryEntry[],
  ) {
    const last = history[history.length - 1];
    if (last === undefined || last.endLsn !== null)
      throw new WalsimError(
        'invalid_input',
        `the timeline history given for ${walDir} does not end with an open timeline`,
      );
    try {
      this.names = new Set(fs.readdirSync(walDir).filter((n) => SEGMENT_NAME.test(n)));
    } catch (e) {
      throw new WalsimError('invalid_input', `cannot read WAL directory ${walDir}: ${errText(e)}`);
    }
    for (const n of this.names) {
      const p = parseSegmentFileName(n, segmentSize);
      if (p === null) this.names.delete(n);
    }
  }

  expectedName(segno: number): string {
    const tli = this.history[this.history.length - 1]!.tli;
    return segmentFileName(tli, segno, this.segmentSize);
  }

  async open(segno: number): Promise<WalSegmentFile | null> {
    // A file created after the listing (a standby still receiving) is looked for on disk too.
    const found = chooseSegmentFile(
      this.walDir,
      segno,
      this.history,
      this.segmentSize,
      (n) => this.names.has(n) || fs.existsSync(path.join(this.walDir, n)),
    );
    if (found === null) return null;
    const file = path.join(this.walDir, found.name);
    // Opened here, not on the thread pool: the reader opens the next segment while it parses
    // the last chunk of this one and reads its first chunk ahead; an open (and stat) on the pool
    // would complete only when the busy parsing thread next turns the event loop, so that read
    // would start only when it is needed. An open of a cached file takes microseconds.
    let fd: number;
    try {
      fd = fs.openSync(file, 'r');
    } catch (e) {
      if ((e as NodeJS.ErrnoException).code === 'ENOENT') return null;
      throw new WalsimError('invalid_input', `cannot open WAL file ${file}: ${errText(e)}`);
    }
    let size: number;
    try {
      size = fs.fstatSync(fd).size;
    } catch (e) {
      fs.closeSync(fd);
      throw new WalsimError('invalid_input', `cannot open WAL file ${file}: ${errText(e)}`);
    }
    if (size !== this.segmentSize) {
      fs.closeSync(fd);
      throw new WalsimError(
        'invalid_input',
        `WAL file ${file} is ${size} bytes, not the segment size ${this.segmentSize}`,
      );
    }
    return {
      name: found.name,
      tli: found.tli,
      read: (buf, offset, length, position) =>
        new Promise((resolve, reject) =>
          fs.read(fd, buf, offset, length, position, (e, n) => (e ? reject(e) : resolve(n))),
        ),
      // Closed here too: the reader closes a segment where it opens the next.
      close: async () => fs.closeSync(fd),
      fd,
    };
  }
}
