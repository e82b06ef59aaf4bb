/**
 * The WAL writer: WAL buffers in memory, written and fsynced to segment files in `<dataDir>/pg_wal`.
 *
 * Entry points: `WalWriter.open`, `insert` (XLogInsert: frame a record into the WAL buffers),
 * `write` / `flush` (XLogWrite / XLogFlush), `appendRaw` (walreceiver: verbatim upstream WAL),
 * `switchTimeline` (promotion), `close`. Positions: insertLsn >= writeLsn >= flushLsn, all
 * MAXALIGNed record boundaries (INV-WAL-3).
 */
import * as path from 'node:path';
import { assert, fail, InvariantViolation } from '../common/assert.ts';
import type { Disk } from '../common/disk.ts';
import { FILE_MODE, makeDir } from '../common/durable-file.ts';
import { isWalsimError, WalsimError } from '../common/errors.ts';
import { ByteBuffer } from './byte-buffer.ts';
import { decodeRecord, InvalidWalRecordError, sharedRecordEncoder } from './codec.ts';
import { assertValidLsn, formatLsn, InvalidLsn, type Lsn, type TimeLineId } from './lsn.ts';
import type { TransactionId, WalRecord, WalRecordBody } from './records.ts';
import {
  checkSegmentSize,
  chooseSegmentFile,
  firstRecordLsn,
  fsyncDir,
  listSegmentFiles,
  readTimelineHistory,
  readTimelineHistoryFile,
  segmentFileName,
  segmentOf,
  segmentOffset,
  walDir,
  walFilePath,
  writeTimelineHistory,
} from './segment.ts';

export interface WalWriterOptions {
  segmentSize: number;
  timeline: TimeLineId;
  /**
   * Where the next record goes (end of valid WAL found by recovery). Omitted only for a fresh
   * cluster (no segment files yet): then the first record goes to firstRecordLsn(segmentSize).
   */
  startLsn?: Lsn;
  /** Start LSN of the record before startLsn (xl_prev of the next record); required with startLsn. */
  prevLsn?: Lsn;
  /** wal_buffers: insert() writes the buffers out when more than this is pending. Default 16 MB. */
  walBuffersBytes?: number;
  /** The file system for pg_wal (node:fs in the server process, the simulator's own in sim/). */
  disk: Disk;
}

export interface InsertResult {
  /** Where the record starts. */
  startLsn: Lsn;
  /** Where the next record starts (startLsn + MAXALIGN(xl_tot_len)); the LSN to flush for durability. */
  endLsn: Lsn;
}

/**
 * Run a WAL write or fsync of a node that writes its own WAL (a primary, or the end of recovery).
 * An I/O failure (ENOSPC, EIO) leaves what is on disk unknown, so like PostgreSQL's XLogWrite
 * ("PANIC: could not write to file") the process ends: `fatal` is called with a PANIC error whose
 * cause is the I/O error, then the error is rethrown. An InvariantViolation or a WalsimError passes
 * through unchanged. (A walreceiver's failed write is not this: it truncates and streams again.)
 */
export function walIoOrPanic<T>(fn: () => T, fatal: (error: unknown) => void): T {
  try {
    return fn();
  } catch (e) {
    if (!(e instanceof InvariantViolation) && !isWalsimError(e)) {
      fatal(new Error(`PANIC:  could not write to WAL: ${(e as Error).message}`, { cause: e }));
    }
    throw e;
  }
}

export class WalWriter {
  private readonly encoder = sharedRecordEncoder();
  /** WAL bytes in [writeLsn, insertLsn); starts small and doubles as needed (up to walBuffersBytes and a record). */
  private readonly buffers = new ByteBuffer(8 * 1024);
  private fd: number | null = null;
  private fdSegno = -1;
  private fdDirty = false;
  private insertPos: Lsn;
  private writePos: Lsn;
  private flushPos: Lsn;
  private lastRecord: Lsn;
  /** Start of the last record before flushPos (xl_prev of a record at flushPos). */
  private flushedLastRecord: Lsn;
  private tli: TimeLineId;
  private closed = false;
  /**
   * Fault injection (tests): called before each write to a segment file with the byte count; it
   * throws to simulate a failed write (ENOSPC, EIO). The caller then decides (see `truncate`).
   */
  writeFaultHook: ((bytes: number) => void) | null = null;

  private constructor(
    readonly dataDir: string,
    readonly segmentSize: number,
    timeline: TimeLineId,
    startLsn: Lsn,
    prevLsn: Lsn,
    private readonly walBuffersBytes: number,
    readonly disk: Disk,
  ) {
    this.tli = timeline;
    this.insertPos = this.writePos = this.flushPos = startLsn;
    this.lastRecord = prevLsn;
    this.flushedLastRecord = prevLsn;
  }

  /**
   * Open the WAL of `dataDir` for writing at `startLsn`. Anything in the segment file at or after
   * startLsn is cut off (it is past the end of valid WAL), so a reader sees end-of-WAL there. If
   * this timeline has no file for startLsn's segment, its bytes before startLsn are copied from the
   * file the history says holds them (or zero-filled for a fresh cluster).
   */
  static open(dataDir: string, opts: WalWriterOptions): WalWriter {
    checkSegmentSize(opts.segmentSize);
    if (!(opts.timeline >>> 0 === opts.timeline && opts.timeline >= 1))
      fail(`INV-WAL-5: bad timeline ${opts.timeline}`);
    const segmentSize = opts.segmentSize;
    const disk = opts.disk;
    makeDir(walDir(dataDir), disk);
    let startLsn = opts.startLsn;
    let prevLsn = opts.prevLsn;
    if (startLsn === undefined) {
      if (listSegmentFiles(dataDir, segmentSize, disk).length > 0) {
        throw new WalsimError(
          'invalid_input',
          `WAL already exists in ${walDir(dataDir)}: pass startLsn/prevLsn (the end of WAL found by recovery)`,
        );
      }
      startLsn = firstRecordLsn(segmentSize);
      prevLsn = InvalidLsn;
    }
    assertValidLsn(startLsn, 'startLsn');
    if (!(startLsn % 8 === 0 && startLsn > 0))
      fail(`INV-WAL-2: startLsn ${formatLsn(startLsn)} is not a MAXALIGNed record boundary`);
    if (prevLsn === undefined) {
      if (startLsn !== firstRecordLsn(segmentSize))
        fail(`INV-WAL-4: prevLsn is required when opening WAL at ${formatLsn(startLsn)}`);
      prevLsn = InvalidLsn;
    }
    if (!(prevLsn < startLsn))
      fail(
        `INV-WAL-4: prevLsn ${formatLsn(prevLsn)} must be before startLsn ${formatLsn(startLsn)}`,
      );
    const w = new WalWriter(
      dataDir,
      segmentSize,
      opts.timeline,
      startLsn,
      prevLsn,
      opts.walBuffersBytes ?? 16 * 1024 * 1024,
      disk,
    );
    w.prepareSegmentAt(startLsn);
    return w;
  }

  get insertLsn(): Lsn {
    return this.insertPos;
  }
  get writeLsn(): Lsn {
    return this.writePos;
  }
  get flushLsn(): Lsn {
    return this.flushPos;
  }
  /** Start LSN of the last record inserted (or appended): xl_prev of the next one. */
  get lastRecordLsn(): Lsn {
    return this.lastRecord;
  }
  get timeline(): TimeLineId {
    return this.tli;
  }

  /** XLogInsert: frame `body` into the WAL buffers at insertLsn. Nothing reaches disk until write(). */
  insert(body: WalRecordBody, xid: TransactionId): InsertResult {
    assert(!this.closed, 'INV-WAL-3: insert on a closed WAL writer');
    const startLsn = this.insertPos;
    const before = this.buffers.length;
    this.encoder.append(this.buffers, body, xid, this.lastRecord);
    const endLsn = startLsn + (this.buffers.length - before);
    if (endLsn % 8 !== 0) fail(`INV-WAL-2: record at ${formatLsn(startLsn)} ends off MAXALIGN`);
    this.insertPos = endLsn;
    this.lastRecord = startLsn;
    if (this.buffers.length > this.walBuffersBytes) this.write();
    return { startLsn, endLsn };
  }

  /**
   * A standby's walreceiver: append WAL received from upstream verbatim at `startLsn`, which must
   * be this writer's end (insertLsn). The bytes must be whole records chained by prev-links from
   * lastRecordLsn; every record is validated (CRC, header, payload) before anything is buffered.
   * Throws InvalidWalRecordError ('gap' | 'overlap' | a decode reason) and changes nothing on refusal.
   * Returns the decoded records.
   */
  appendRaw(bytes: Uint8Array, startLsn: Lsn): WalRecord[] {
    assert(!this.closed, 'INV-WAL-3: appendRaw on a closed WAL writer');
    if (startLsn !== this.insertPos) {
      throw new InvalidWalRecordError(
        startLsn,
        startLsn > this.insertPos ? 'gap' : 'overlap',
        `received WAL starts at ${formatLsn(startLsn)} but local WAL ends at ${formatLsn(this.insertPos)}`,
      );
    }
    const records: WalRecord[] = [];
    let offset = 0;
    let prev = this.lastRecord;
    while (offset < bytes.length) {
      const rec = decodeRecord(bytes, offset, startLsn + offset, prev, bytes.length);
      records.push(rec);
      prev = rec.lsn;
      offset = rec.endLsn - startLsn;
    }
    assert(offset === bytes.length, 'INV-WAL-4: appendRaw consumed a partial record');
    this.buffers.append(bytes);
    this.insertPos += bytes.length;
    this.lastRecord = prev;
    if (this.buffers.length > this.walBuffersBytes) this.write();
    return records;
  }

  /** XLogWrite: write the WAL buffers to segment files (no fsync). Completed segments are fsynced and closed. */
  write(): void {
    assert(!this.closed, 'INV-WAL-3: write on a closed WAL writer');
    const bytes = this.buffers.bytes;
    const total = this.buffers.length;
    assert(
      this.writePos + total === this.insertPos,
      'INV-WAL-3: WAL buffers do not span [writeLsn, insertLsn)',
    );
    let done = 0;
    while (done < total) {
      const segno = segmentOf(this.writePos, this.segmentSize);
      const offset = segmentOffset(this.writePos, this.segmentSize);
      const n = Math.min(total - done, this.segmentSize - offset);
      const fd = this.segmentFd(segno, offset);
      this.writeFaultHook?.(n);
      let written = 0;
      while (written < n)
        written += this.disk.write(fd, bytes, done + written, n - written, offset + written);
      this.fdDirty = true;
      done += n;
      this.writePos += n;
      if (offset + n === this.segmentSize) this.closeSegment(true); // finished segment: fsync now, like XLogWrite
    }
    this.buffers.clear();
  }

  /** XLogFlush: write, then fsync; flushLsn = insertLsn. */
  flush(): void {
    this.write();
    if (this.fd !== null && this.fdDirty) {
      this.disk.fsync(this.fd);
      this.fdDirty = false;
    }
    this.flushPos = this.writePos;
    this.flushedLastRecord = this.lastRecord;
    assert(this.flushPos === this.insertPos, 'INV-WAL-3: flush must reach insertLsn');
  }

  /** Start LSN of the last record before flushLsn. */
  get lastFlushedRecordLsn(): Lsn {
    return this.flushedLastRecord;
  }

  /**
   * Make `endLsn` (a record boundary at or below flushLsn, after the record at `prevLsn`) the end
   * of WAL: unwritten buffers are dropped and this timeline's segment file is cut there, so no
   * reader can see bytes after it (INV-WAL-6). Two callers: a walreceiver whose write failed
   * (`endLsn` = flushLsn: a half-written batch is forgotten and streamed again), and promotion
   * after replay stopped at an invalid record (EndOfLog = the end of the last valid record, so
   * the new timeline does not start after garbage).
   */
  truncate(endLsn: Lsn, prevLsn: Lsn): void {
    assert(!this.closed, 'INV-WAL-3: truncate on a closed WAL writer');
    assertValidLsn(endLsn, 'endLsn');
    if (!(endLsn % 8 === 0 && endLsn <= this.flushPos))
      fail(`INV-WAL-3: truncate to ${formatLsn(endLsn)} beyond flush ${formatLsn(this.flushPos)}`);
    if (!(prevLsn < endLsn))
      fail(`INV-WAL-4: prevLsn ${formatLsn(prevLsn)} must be before ${formatLsn(endLsn)}`);
    this.buffers.clear();
    this.closeSegment(false);
    this.insertPos = this.writePos = this.flushPos = endLsn;
    this.lastRecord = this.flushedLastRecord = prevLsn;
    this.prepareSegmentAt(endLsn);
  }

  /**
   * Promotion: continue on timeline `newTli` at insertLsn (the switch point). Flushes first, makes
   * sure `%08X.history` of newTli exists (writing it with `reason` if not), then, like
   * PostgreSQL's XLogInitNewTimeline, creates newTli's file for the current segment holding a copy
   * of the bytes before the switch point, taken from the file this writer wrote them to (the end
   * of log's segment). Later writes go to newTli files.
   *
   * The parent is the timeline of this history on which the switch point lies — the current one,
   * unless WAL ends before the current timeline began: a standby that followed its upstream onto
   * a timeline before replaying up to its switch point, then found a damaged record below it and
   * was promoted. PostgreSQL's end-of-recovery record names that timeline (PrevTimeLineID =
   * lastRecTLI, the timeline of the last record replayed); its history file copies the recovery
   * target timeline's and appends `target\tEndOfLog`, a switch point before the target's own
   * start, which would place WAL between the two on timelines this node never wrote. The parent
   * here is the one the record names, so the history file and the record agree and stay ordered.
   * Returns the parent.
   */
  switchTimeline(newTli: TimeLineId, reason = 'no recovery target specified'): TimeLineId {
    if (!(newTli >>> 0 === newTli && newTli > this.tli))
      fail(`INV-WAL-5: new timeline ${newTli} must be above ${this.tli}`);
    this.flush();
    const switchLsn = this.insertPos;
    const own = readTimelineHistory(this.dataDir, this.tli, this.disk);
    // tliOfPointInHistory: the newest timeline of the history that began at or before switchLsn.
    let k = own.length - 1;
    while (k > 0 && own[k]!.beginLsn > switchLsn) k--;
    const parentTli = own[k]!.tli;
    if (readTimelineHistoryFile(this.dataDir, newTli, this.disk) === null) {
      writeTimelineHistory(
        this.dataDir,
        newTli,
        [...own.slice(0, k), { ...own[k]!, endLsn: null }],
        switchLsn,
        reason,
        this.disk,
      );
    }
    const history = readTimelineHistory(this.dataDir, newTli, this.disk);
    const parent = history[history.length - 2];
    if (parent === undefined || parent.tli !== parentTli || parent.endLsn !== switchLsn) {
      throw new WalsimError(
        'invalid_wal',
        `history file of timeline ${newTli} does not branch from timeline ${parentTli} at ${formatLsn(switchLsn)}`,
      );
    }
    this.closeSegment(false);
    const from = this.tli;
    this.tli = newTli;
    this.prepareSegmentAt(switchLsn, from);
    return parentTli;
  }

  /** Flush and close the current segment file. The writer cannot be used afterwards. */
  close(): void {
    if (this.closed) return;
    this.flush();
    this.closeSegment(false);
    this.closed = true;
  }

  // -------------------------------------------------------------------------------------------

  private segmentPath(tli: TimeLineId, segno: number): string {
    return walFilePath(this.dataDir, segmentFileName(tli, segno, this.segmentSize));
  }

  /** The fd of this timeline's file for `segno`, positioned writes at `offset`. */
  private segmentFd(segno: number, offset: number): number {
    if (this.fd !== null && this.fdSegno === segno) return this.fd;
    this.closeSegment(true);
    const p = this.segmentPath(this.tli, segno);
    if (offset === 0) {
      // A new segment: start from an empty file so stale bytes from an earlier life can never
      // follow our records (INV-WAL-6).
      this.fd = this.disk.open(p, 'w', FILE_MODE);
      fsyncDir(walDir(this.dataDir), this.disk);
    } else {
      this.fd = this.disk.open(p, 'r+'); // prepareSegmentAt created it
    }
    this.fdSegno = segno;
    this.fdDirty = false;
    return this.fd;
  }

  private closeSegment(sync: boolean): void {
    if (this.fd === null) return;
    if (sync && this.fdDirty) this.disk.fsync(this.fd);
    this.disk.close(this.fd);
    this.fd = null;
    this.fdSegno = -1;
    this.fdDirty = false;
  }

  /**
   * Make this timeline's file for lsn's segment hold exactly the bytes before `lsn` (INV-WAL-6):
   * cut an existing file there, or create it from the file that holds that segment for an
   * ancestor timeline — `copyFrom`'s first, the timeline the bytes were written on before a
   * switch — (or zeros when there is none: a fresh cluster).
   */
  private prepareSegmentAt(lsn: Lsn, copyFrom?: TimeLineId): void {
    const segno = segmentOf(lsn, this.segmentSize);
    const offset = segmentOffset(lsn, this.segmentSize);
    const p = this.segmentPath(this.tli, segno);
    if (offset === 0) {
      // segmentFd creates the file empty on first write; drop a stale one now so that no reader
      // sees old records at our end of WAL meanwhile.
      if (this.disk.exists(p)) this.disk.truncate(p, 0);
      return;
    }
    if (this.disk.exists(p)) {
      const size = this.disk.size(p);
      if (size < offset) {
        throw new WalsimError(
          'invalid_wal',
          `WAL segment file ${path.basename(p)} has ${size} bytes, fewer than the ${offset} before ${formatLsn(lsn)}`,
        );
      }
      if (size > offset) this.disk.truncate(p, offset);
    } else {
      const prefix = new Uint8Array(offset);
      const history = readTimelineHistory(this.dataDir, this.tli, this.disk);
      const exists = (name: string): boolean => this.disk.exists(walFilePath(this.dataDir, name));
      const own =
        copyFrom === undefined ? null : segmentFileName(copyFrom, segno, this.segmentSize);
      const src =
        own !== null && exists(own)
          ? { name: own }
          : chooseSegmentFile(this.dataDir, segno, history, this.segmentSize, exists);
      if (src !== null) {
        const fd = this.disk.open(walFilePath(this.dataDir, src.name), 'r');
        try {
          const n = this.disk.read(fd, prefix, 0, offset, 0);
          if (n < offset) {
            throw new WalsimError(
              'invalid_wal',
              `WAL segment file ${src.name} is too short to copy up to ${formatLsn(lsn)}`,
            );
          }
        } finally {
          this.disk.close(fd);
        }
      }
      const tmp = `${p}.tmp`;
      const fd = this.disk.open(tmp, 'w', FILE_MODE);
      try {
        let done = 0;
        while (done < offset) done += this.disk.write(fd, prefix, done, offset - done, done);
        this.disk.fsync(fd);
      } finally {
        this.disk.close(fd);
      }
      this.disk.rename(tmp, p);
      fsyncDir(walDir(this.dataDir), this.disk);
    }
    if (this.disk.size(p) !== offset)
      fail(`INV-WAL-6: ${path.basename(p)} must end at ${formatLsn(lsn)}`);
  }
}
