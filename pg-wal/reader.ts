/**
 * The streaming WAL reader: segment files → validated pages → records, as xlogreader.c's
 * XLogReadRecord / XLogDecodeNextRecord / XLogReaderValidatePageHeader do it, and
 * XLogFindNextRecord for a start that is not a record's. Reads a segment in chunks of
 * `chunkBytes`; a record that spans pages (or segments) is copied page by page into one
 * reassembly buffer, so memory is bounded by the chunk and the largest record, never by the range.
 * Stops cleanly at the end of valid WAL and says where and why, with PostgreSQL's message.
 *
 * Entry points: `PgWalReader` (`batches()`, `records()`, `columns()`, `views()`, `end`, `major`,
 * `firstRecordLsn`),
 * `PgWalReadOptions`, `PgWalEnd`.
 */
import { assert, fail } from '../common/assert.ts';
import { WalsimError } from '../common/errors.ts';
import { formatLsn, type Lsn } from '../wal/lsn.ts';
import {
  formatOf,
  KNOWN_MAGICS,
  majorOfMagic,
  SIZE_OF_LONG_PHD,
  SIZE_OF_SHORT_PHD,
  SIZE_OF_XLOG_RECORD,
  XLOG_BLCKSZ,
  XLP_ALL_FLAGS,
  XLP_FIRST_IS_CONTRECORD,
  XLP_FIRST_IS_OVERWRITE_CONTRECORD,
  XLP_LONG_HEADER,
  type PgMajor,
  type PgWalFormat,
} from './format.ts';
import { fmtLsn, PgWalInvalidRecord, u16, u32, u64 } from './bytes.ts';
import { PgWalColumns } from './columns.ts';
import {
  checkRecordHeader,
  decodeRecord,
  invalidLengthMessage,
  type PgWalRecord,
} from './record.ts';
import { recordTypeNames, RM_XLOG_ID } from './rmgr-names.ts';
import { crcWorkerError, ScanMemory, SCAN_OUT_MAX, SCAN_VIEWS } from './scan-wasm.ts';
import { decodeScannedInto, PgWalRecordView } from './view.ts';
import type { WalSegmentFile, WalSegmentSource } from './wal-dir.ts';

export interface PgWalReadOptions {
  /** Where to start: a record's start, or a page's (its first record is read). */
  startLsn: Lsn;
  /** Read the records that end at or before this LSN (pg_waldump -e); null: to the end of WAL. */
  endLsn?: Lsn | null;
  /** 'record' (default): startLsn is a record's start; 'find': the first record at or after it. */
  start?: 'record' | 'find';
  /** The major the WAL must be (e.g. from PG_VERSION); default: whatever the first page says. */
  major?: PgMajor;
  /** The cluster's system identifier (pg_control); long page headers must carry it. */
  systemIdentifier?: bigint;
  /** Bytes read from a segment file at once (a multiple of 8 kB; default 4 MB). */
  chunkBytes?: number;
  /**
   * CRC-32C verdicts on a second thread (scan-wasm.ts `CrcWorker`): 'off' (default) or 'on'.
   * Off by default: on this project's 2-vCPU machine it measured from 25 % slower to 5 % faster
   * over 1 GB and slower below 256 MiB (BENCHMARKS.md, "Reading PostgreSQL's WAL").
   */
  crcWorker?: 'on' | 'off';
  /** The worker thread's code instead of the real one (tests: a worker that fails). */
  crcWorkerCode?: string;
}

/** Why reading stopped. */
export interface PgWalEnd {
  reason: 'end_lsn' | 'invalid_record' | 'missing_segment';
  /** Where: the record (or page) that could not be read, or endLsn. */
  lsn: Lsn;
  /** PostgreSQL's words: "invalid record length at 0/3000060: wanted 24, got 0". */
  message: string;
}

/** Thrown inside the reader to stop at the end of valid WAL; never leaves it. */
class EndOfWal extends Error {
  constructor(readonly end: PgWalEnd) {
    super(end.message);
  }
}

const maxAlign = (n: number) => n + ((8 - (n % 8)) % 8);
const XLOG_SWITCH = 0x40;

export class PgWalReader {
  /** Why reading stopped; null while records remain. */
  end: PgWalEnd | null = null;
  /** The first record read (with start 'find', after skipping). */
  firstRecordLsn: Lsn | null = null;
  private fmt: PgWalFormat | null = null;
  private readonly segSize: number;
  private readonly endLsn: number;
  private readonly chunkBytes: number;
  /** The window in use: one of the memory's two (the other is being read ahead into). */
  private win: Buffer;
  private other: Buffer;
  private readonly mem: ScanMemory;
  /** The next chunk of the open segment, being read into `other`. */
  private ahead: ReadAhead | null = null;
  /** The columns `fill` is filling (records go there instead of being decoded), else null. */
  private cols: PgWalColumns | null = null;
  /** The view and callback being filled (views()), or null. */
  private visit: Visit | null = null;
  /** scan.wat's flags for the major (set with the format). */
  private scanFlags = 0;
  private winStart = -1;
  /** Chunks loaded into the window so far (readSpanning: did the window change under it). */
  private loads = 0;
  private winLen = 0;
  private file: WalSegmentFile | null = null;
  private fileSegno = -1;
  /** Pages [checkedFrom, checkedTo) are validated (reading moves forward: one range). */
  private checkedFrom = -1;
  private checkedTo = -1;
  private latestPagePtr = -1;
  private latestPageTli = 0;
  /** The reassembly buffer: the memory's region, or `bigAsm` for a record larger than it. */
  private asm: Buffer;
  private bigAsm: Buffer = Buffer.alloc(0);
  /** The record being reassembled (`readSpanning`): one object, refilled for each. */
  private readonly span: Spanning = {
    lsn: 0,
    o: 0,
    totLen: 0,
    gotLen: 0,
    pg: 0,
    lastPhs: 0,
    lastRem: 0,
    gotHeader: false,
    loadsAtStart: 0,
  };
  private next: Lsn;
  private prevLsn: Lsn | null = null;
  private started = false;

  constructor(
    private readonly source: WalSegmentSource,
    private readonly opts: PgWalReadOptions,
  ) {
    this.segSize = source.segmentSize;
    this.endLsn = opts.endLsn ?? Number.MAX_SAFE_INTEGER;
    this.chunkBytes = Math.max(XLOG_BLCKSZ, opts.chunkBytes ?? 4 * 1024 * 1024);
    assert(this.chunkBytes % XLOG_BLCKSZ === 0, 'INV-PGWAL-1: chunks are whole pages');
    if (!Number.isSafeInteger(opts.startLsn) || opts.startLsn <= 0)
      throw new WalsimError('invalid_input', `invalid start LSN ${opts.startLsn}`);
    this.mem = new ScanMemory(Math.min(this.chunkBytes, this.segSize));
    [this.win, this.other] = this.mem.windows;
    if (opts.crcWorker === 'on') this.mem.startCrcWorker(opts.crcWorkerCode);
    this.asm = this.mem.asm;
    this.next = opts.startLsn;
  }

  /**
   * What reading used: the memory's bytes (fixed when the reader is made) and the CRC worker's
   * jobs (posted, the most unfinished at once).
   */
  get scanStats(): { memoryBytes: number; worker: boolean; jobs: number; maxJobsInFlight: number } {
    const j = this.mem.jobStats;
    return {
      memoryBytes: this.mem.bytes,
      worker: j.started,
      jobs: j.posted,
      maxJobsInFlight: j.maxInFlight,
    };
  }

  /** The major of the WAL read (known once the first page was read). */
  get major(): PgMajor | null {
    return this.fmt?.major ?? null;
  }

  /** Every record, one at a time. */
  async *records(): AsyncGenerator<PgWalRecord> {
    for await (const batch of this.batches()) yield* batch;
  }

  /** Records in batches of up to `max` (one await per batch rather than per record). */
  async *batches(max = 256): AsyncGenerator<PgWalRecord[]> {
    try {
      while (this.end === null) {
        const out: PgWalRecord[] = [];
        await this.fill(max, out, null);
        if (out.length > 0) yield out;
      }
    } finally {
      await this.close();
    }
  }

  /**
   * The same records as columns (`PgWalColumns`: LSN, rmgr id, xl_info, lengths), one object
   * refilled per batch and valid until the next: what `pg_waldump --stats=record` needs, with
   * every check PostgreSQL makes, and no object per record (nor the main data predict decodes).
   */
  async *columns(max = SCAN_OUT_MAX): AsyncGenerator<PgWalColumns> {
    const cols = this.mem.columns;
    max = Math.min(max, cols.capacity);
    try {
      while (this.end === null) {
        cols.length = 0;
        await this.fill(max, null, cols);
        if (cols.length > 0) yield cols;
      }
    } finally {
      await this.close();
    }
  }

  /**
   * Every record as a view (`PgWalRecordView`: header values, block references in typed arrays,
   * the main data predict reads), passed to `fn` and valid only during the call: the records
   * `batches()` gives, ending the same way, without an object per record. Yields after each
   * `max` records (how many), so the caller can give the event loop a turn.
   */
  async *views(fn: (v: PgWalRecordView) => void, max = SCAN_OUT_MAX): AsyncGenerator<number> {
    const visit = { view: new PgWalRecordView(), fn };
    max = Math.min(max, SCAN_OUT_MAX);
    try {
      while (this.end === null) {
        const n = await this.fill(max, null, null, visit);
        if (n > 0) yield n;
      }
    } finally {
      await this.close();
    }
  }

  /** A record read by the slow path, into whichever of `out`, `cols`, `visit` is filled. */
  private deliver(
    r: PgWalRecord,
    out: PgWalRecord[] | null,
    cols: PgWalColumns | null,
    visit: Visit | null,
  ): void {
    if (out !== null) out.push(r);
    else if (cols !== null) cols.pushRecord(r);
    else visit!.fn(visit!.view.fromRecord(r));
  }

  /**
   * Up to `max` records into `out` (decoded), `cols` or `visit`; sets `end` when reading stops.
   * Returns how many.
   */
  private async fill(
    max: number,
    out: PgWalRecord[] | null,
    cols: PgWalColumns | null,
    visit: Visit | null = null,
  ): Promise<number> {
    let n = 0;
    try {
      if (!this.started) await this.begin();
      this.cols = cols;
      this.visit = visit;
      while (n < max) {
        if (this.pending !== null) {
          // The record `begin` found, handed out first.
          const p = this.pending;
          this.pending = null;
          this.deliver(p, out, cols, visit);
          n++;
          continue;
        }
        const want = max - n;
        const k = visit !== null ? this.scanViews(want, visit) : this.scanInPage(want, out, cols);
        n += k;
        if (k === want) continue;
        // Fewer than asked: the scan stopped before a record it does not take (at a page's end,
        // most often one that spans pages), and would refuse it again. readSlow rather than
        // tryInPage: the scan refused what tryInPage would take.
        const got = this.readSlow();
        const r = got instanceof Promise ? await got : got;
        if (r !== null) this.deliver(r, out, cols, visit);
        this.firstRecordLsn ??=
          r !== null ? r.lsn : visit !== null ? visit.view.lsn : cols!.lsn[cols!.length - 1]!;
        n++;
      }
    } catch (e) {
      if (e instanceof EndOfWal) this.end = e.end;
      else if (e instanceof PgWalInvalidRecord)
        this.end = { reason: 'invalid_record', lsn: e.lsn, message: e.message };
      else throw e;
    }
    // A worker that failed is reported even when reading ended without needing it again.
    const failure = this.end !== null ? this.mem.workerFailure() : null;
    if (failure !== null) throw crcWorkerError(failure);
    return n;
  }

  /** Stop reading: the open file, the read ahead and the CRC worker. */
  async close(): Promise<void> {
    await this.closeFile();
    await this.mem.close();
  }

  private async closeFile(): Promise<void> {
    await this.dropReadAhead();
    const f = this.file;
    this.file = null;
    this.fileSegno = -1;
    if (f !== null) await f.close();
  }

  private invalid(lsn: Lsn, message: string): never {
    throw new EndOfWal({ reason: 'invalid_record', lsn, message });
  }

  private reachedEnd(): never {
    throw new EndOfWal({
      reason: 'end_lsn',
      lsn: this.endLsn,
      message: `reached the end of the range at ${formatLsn(this.endLsn)}`,
    });
  }

  /** XLogFindNextRecord for start 'find'; the first page read also fixes the major. */
  private async begin(): Promise<void> {
    this.started = true;
    if (this.opts.start !== 'find') return;
    const target = this.opts.startLsn;
    let tmp = target;
    // Skip continuation data, which may fill whole pages; bounded by the segments present.
    for (;;) {
      const pagePtr = tmp - (tmp % XLOG_BLCKSZ);
      const p = this.page(pagePtr);
      const po = typeof p === 'number' ? p : await p;
      const phs = this.pageHeaderSize(po);
      if ((u16(this.win, po + 2) & XLP_FIRST_IS_CONTRECORD) !== 0) {
        const rem = maxAlign(u32(this.win, po + 16));
        if (rem >= XLOG_BLCKSZ - phs) {
          tmp = pagePtr + XLOG_BLCKSZ;
          continue;
        }
        tmp = pagePtr + phs + rem;
      } else tmp = pagePtr + phs;
      break;
    }
    this.next = tmp;
    // Read forward to the first record at or after the target (records before it are skipped).
    for (;;) {
      const r = this.tryInPage() ?? (await this.readSlow());
      assert(r !== null, 'no columns are filled before the start is found');
      if (r.lsn >= target) {
        this.firstRecordLsn = r.lsn;
        this.pending = r;
        return;
      }
    }
  }

  /**
   * The hot path: the records from `next` on that lie whole inside a validated page of the
   * window, checked in WebAssembly (scan.wat: header, CRC-32C, fragments) and decoded into `out`
   * or counted into `cols` where they lie. 0 leaves the next record to tryInPage/readSlow (the
   * first record, a page start, a record that spans, XLOG SWITCH, the range's end, any doubt).
   */
  private scanInPage(max: number, out: PgWalRecord[] | null, cols: PgWalColumns | null): number {
    if (!this.scanStart()) return 0;
    const { off: start, limit } = scanAt;
    const prev = this.prevLsn!;
    const win = this.win;
    if (cols !== null) {
      const at = cols.length;
      const k = this.mem.scanPage(win, start, limit, this.winStart, prev, at, max, this.scanFlags);
      if (k === 0) return 0;
      cols.length += k;
      this.prevLsn = cols.lsn[at + k - 1]!;
      this.next = cols.endLsn[at + k - 1]!;
      return k;
    }
    const n = this.mem.scanPage(win, start, limit, this.winStart, prev, 0, max, this.scanFlags);
    const addresses = this.mem.addresses;
    const w = win.byteOffset;
    const fmt = this.fmt!;
    for (let i = 0; i < n; i++) {
      const off = addresses[i]! - w;
      const l = this.winStart + off;
      const end = l + maxAlign(u32(win, off));
      out!.push(decodeRecord(win, off, l, end, fmt));
      this.prevLsn = l;
      this.next = end;
    }
    return n;
  }

  /**
   * Whether the next record may be scanned in WebAssembly (it starts inside a validated page of
   * the window, not at its start, after a record read before); `scanAt` says from where to where.
   */
  private scanStart(): boolean {
    const lsn = this.next;
    const recOff = lsn % XLOG_BLCKSZ;
    const pagePtr = lsn - recOff;
    if (this.prevLsn === null || recOff === 0) return false;
    if (pagePtr < this.checkedFrom || pagePtr >= this.checkedTo) return false;
    if (pagePtr < this.winStart || pagePtr >= this.winStart + this.winLen) return false;
    const pageOff = pagePtr - this.winStart;
    scanAt.limit = Math.min(pageOff + XLOG_BLCKSZ, this.endLsn - this.winStart);
    scanAt.off = pageOff + recOff;
    return scanAt.limit >= scanAt.off + SIZE_OF_XLOG_RECORD;
  }

  /**
   * scanInPage for `views()`: each record the WebAssembly accepted is decoded into the view where
   * it lies and handed to the callback before the next (the window cannot change meanwhile).
   */
  private scanViews(max: number, visit: Visit): number {
    if (!this.scanStart()) return 0;
    const win = this.win;
    const k = this.mem.scanPage(
      win,
      scanAt.off,
      scanAt.limit,
      this.winStart,
      this.prevLsn!,
      0,
      max,
      this.scanFlags | SCAN_VIEWS,
    );
    const { addresses, columns: cols, views: sv } = this.mem;
    const w = win.byteOffset;
    const fmt = this.fmt!;
    const names = (this.typeNames ??= recordTypeNames(fmt.major));
    const v = visit.view;
    for (let i = 0; i < k; i++) {
      const off = addresses[i]! - w;
      decodeScannedInto(
        v,
        win,
        off,
        cols.lsn[i]!,
        cols.endLsn[i]!,
        cols.fpiLength[i]!,
        i,
        sv,
        fmt,
        names,
      );
      this.prevLsn = v.lsn;
      this.next = v.endLsn;
      visit.fn(v);
    }
    return k;
  }

  /** The record `begin` found, handed out first. */
  private pending: PgWalRecord | null = null;
  /** The major's record type names (`recordTypeNames`), once the first page fixed it. */
  private typeNames: Array<string | undefined> | null = null;

  /**
   * The common case without awaiting: the next record lies whole inside a validated page of the
   * chunk in memory. Null hands it to readSlow (page start, spanning, end of range, any error).
   */
  private tryInPage(): PgWalRecord | null {
    const lsn = this.next;
    const recOff = lsn % XLOG_BLCKSZ;
    const pagePtr = lsn - recOff;
    if (recOff === 0 || recOff > XLOG_BLCKSZ - SIZE_OF_XLOG_RECORD) return null;
    if (pagePtr < this.checkedFrom || pagePtr >= this.checkedTo) return null;
    if (pagePtr < this.winStart || pagePtr >= this.winStart + this.winLen) return null;
    const o = pagePtr - this.winStart + recOff;
    const b = this.win;
    const totLen = u32(b, o);
    if (recOff + totLen > XLOG_BLCKSZ || lsn + totLen > this.endLsn) return null;
    const fmt = this.fmt!;
    if (checkRecordHeader(b, o, lsn, this.prevLsn, fmt) !== null) return null;
    if (!this.mem.recordCrcOk(b, o, totLen)) return null;
    return this.accept(decodeRecord(b, o, lsn, lsn + maxAlign(totLen), fmt));
  }

  /** After a record: the prev-link to expect, and where the next one starts (XLOG SWITCH). */
  private accept(r: PgWalRecord): PgWalRecord {
    r.endLsn = this.acceptAt(r.lsn, r.prev, r.rmid, r.info, r.endLsn);
    return r;
  }

  /** accept() by values: moves past the record; where the next one starts. */
  private acceptAt(lsn: Lsn, prev: Lsn, rmid: number, info: number, endLsn: Lsn): Lsn {
    // The message is built only on failure: this runs once per record.
    if (!(lsn >= this.next && (this.prevLsn === null || prev === this.prevLsn)))
      fail(`INV-PGWAL-2: records out of order or unlinked at ${formatLsn(lsn)}`);
    this.prevLsn = lsn;
    let next = endLsn;
    if (rmid === RM_XLOG_ID && (info & 0xf0) === XLOG_SWITCH) {
      next += this.segSize - 1;
      next -= next % this.segSize;
    }
    this.next = next;
    return next;
  }

  /**
   * A record whose header and CRC passed, at `b[o…]`: counted into the columns being filled
   * (null; its fragments checked in WebAssembly) or decoded (DecodeXLogRecord's checks and
   * messages in TypeScript: also what a record the WebAssembly refuses gets).
   */
  private finish(b: Buffer, o: number, lsn: Lsn, end: Lsn, fmt: PgWalFormat): PgWalRecord | null {
    const cols = this.cols;
    const visit = this.visit;
    if (visit !== null) {
      // For views() (null: handed to the callback), the fragments walked once in WebAssembly.
      const v = visit.view;
      const fpi = this.mem.recordView(b, o, u32(b, o), this.scanFlags);
      if (fpi >= 0) {
        const names = (this.typeNames ??= recordTypeNames(fmt.major));
        decodeScannedInto(v, b, o, lsn, end, fpi, 0, this.mem.views, fmt, names);
        v.endLsn = this.acceptAt(lsn, u64(b, o + 8), v.rmid, v.info, end);
        visit.fn(v);
        return null;
      }
    } else if (cols !== null) {
      const tot = u32(b, o);
      const fpi = this.mem.recordFpi(b, o, tot, this.scanFlags);
      if (fpi >= 0) {
        const rmid = b[o + 17]!;
        const info = b[o + 16]!;
        cols.push(lsn, this.acceptAt(lsn, u64(b, o + 8), rmid, info, end), rmid, info, tot, fpi);
        return null;
      }
    }
    return this.accept(decodeRecord(b, o, lsn, end, fmt));
  }

  /**
   * XLogDecodeNextRecord in full: every check, its message, pages and segments crossed. Answered
   * at once, not as a promise, when every page the record needs is in the window: this path reads
   * a record or two of every page (a page's first record, a record spanning pages), and a promise
   * and an await each cost more than the rest of such a record.
   */
  private readSlow(restarts = 0): Soon<PgWalRecord | null> {
    assert(restarts < 2, 'INV-PGWAL-3: an overwritten contrecord restarts reading once');
    const lsn = this.next;
    if (lsn >= this.endLsn) this.reachedEnd();
    const pagePtr = lsn - (lsn % XLOG_BLCKSZ);
    const p = this.page(pagePtr);
    return typeof p === 'number'
      ? this.readOnPage(pagePtr, p, restarts)
      : p.then((po) => this.readOnPage(pagePtr, po, restarts));
  }

  /** readSlow once the page the next record starts on is at window offset `po`. */
  private readOnPage(pagePtr: Lsn, po: number, restarts: number): Soon<PgWalRecord | null> {
    let lsn = this.next;
    let recOff = lsn % XLOG_BLCKSZ;
    const phs = this.pageHeaderSize(po);
    if (recOff === 0) {
      lsn += phs;
      recOff = phs;
      this.next = lsn;
      if (lsn >= this.endLsn) this.reachedEnd();
    } else if (recOff < phs) {
      this.invalid(lsn, this.offsetMessage(lsn, phs, recOff));
    }
    if ((u16(this.win, po + 2) & XLP_FIRST_IS_CONTRECORD) !== 0 && recOff === phs)
      this.invalid(lsn, `contrecord is requested by ${formatLsn(lsn)}`);
    const fmt = this.fmt!;
    const o = po + recOff;
    const totLen = u32(this.win, o);
    const onPage = XLOG_BLCKSZ - recOff;
    if (lsn + Math.min(onPage, SIZE_OF_XLOG_RECORD) > this.endLsn) this.reachedEnd();
    const gotHeader = onPage >= SIZE_OF_XLOG_RECORD;
    if (gotHeader) {
      const err = checkRecordHeader(this.win, o, lsn, this.prevLsn, fmt);
      if (err !== null) this.invalid(lsn, err);
    } else if (totLen < SIZE_OF_XLOG_RECORD) {
      this.invalid(lsn, invalidLengthMessage(lsn, totLen, fmt));
    }
    if (totLen <= onPage) {
      if (lsn + totLen > this.endLsn) this.reachedEnd();
      if (!this.mem.recordCrcOk(this.win, o, totLen)) this.invalid(lsn, crcMessage(lsn));
      return this.finish(this.win, o, lsn, lsn + maxAlign(totLen), fmt);
    }
    this.asm = this.mem.asm;
    this.ensureAsm(onPage);
    this.mem.copy(this.win, o, o + onPage, this.asm, 0);
    // One Spanning, refilled: a record spans pages on almost every page.
    const s = this.span;
    s.lsn = lsn;
    s.o = o;
    s.totLen = totLen;
    s.gotLen = onPage;
    s.pg = pagePtr;
    s.lastPhs = s.lastRem = 0;
    s.gotHeader = gotHeader;
    s.loadsAtStart = this.loads;
    const r = this.readSpanning(s);
    return r instanceof Promise
      ? r.then((x) => this.afterSpanning(x, restarts))
      : this.afterSpanning(r, restarts);
  }

  /** XLP_FIRST_IS_OVERWRITE_CONTRECORD: the record was abandoned; read again from that page. */
  private afterSpanning(
    r: PgWalRecord | null | typeof OVERWRITTEN,
    restarts: number,
  ): Soon<PgWalRecord | null> {
    return r === OVERWRITTEN ? this.readSlow(restarts + 1) : r;
  }

  /**
   * The rest of a record that continues on the next pages (its bytes on its first page are in
   * the reassembly buffer): each must say XLP_FIRST_IS_CONTRECORD with xlp_rem_len equal to what
   * is missing. OVERWRITTEN when a page says the record was overwritten (this.next then points at
   * that page); null when it went into the columns. At once while the pages are in the window.
   */
  private readSpanning(s: Spanning): Soon<PgWalRecord | null | typeof OVERWRITTEN> {
    // Each page adds at least one byte (xlp_rem_len > 0), so at most totLen pages.
    while (s.gotLen < s.totLen) {
      s.pg += XLOG_BLCKSZ;
      // The record goes on past the range's end (a received LSN at a page start inside it):
      // the page there is not WAL yet (zeros, or a recycled segment's old page), so not read.
      if (s.pg >= this.endLsn) this.reachedEnd();
      const p = this.page(s.pg);
      if (typeof p !== 'number')
        return p.then((po) => (this.spanPage(s, po) ? OVERWRITTEN : this.readSpanning(s)));
      if (this.spanPage(s, p)) return OVERWRITTEN;
    }
    // The CRC worker's verdict on these bytes, when every page read came from the window the
    // record starts in (no chunk was loaded meanwhile: `o` still points at its start there).
    const spared = this.loads === s.loadsAtStart && this.mem.verdictAt(this.win, s.o);
    if (!spared && !this.mem.recordCrcOk(this.asm, 0, s.totLen))
      this.invalid(s.lsn, crcMessage(s.lsn));
    const endLsn = s.pg + s.lastPhs + maxAlign(s.lastRem);
    return this.finish(this.asm, 0, s.lsn, endLsn, this.fmt!);
  }

  /**
   * One continuation page of a spanning record (at window offset `po`): its bytes appended to
   * the reassembly buffer after the checks. True when the page says the record was overwritten.
   */
  private spanPage(s: Spanning, po: number): boolean {
    const { lsn, totLen } = s;
    const info = u16(this.win, po + 2);
    if ((info & XLP_FIRST_IS_OVERWRITE_CONTRECORD) !== 0) {
      this.next = s.pg;
      return true;
    }
    if ((info & XLP_FIRST_IS_CONTRECORD) === 0)
      this.invalid(lsn, `there is no contrecord flag at ${formatLsn(lsn)}`);
    const rem = u32(this.win, po + 16);
    if (rem === 0 || totLen !== rem + s.gotLen)
      this.invalid(
        lsn,
        `invalid contrecord length ${rem} (expected ${totLen - s.gotLen}) at ${formatLsn(lsn)}`,
      );
    const phs = this.pageHeaderSize(po);
    const len = Math.min(rem, XLOG_BLCKSZ - phs);
    if (s.pg + phs + len > this.endLsn) this.reachedEnd();
    this.ensureAsm(s.gotLen + len);
    this.mem.copy(this.win, po + phs, po + phs + len, this.asm, s.gotLen);
    s.gotLen += len;
    s.lastPhs = phs;
    s.lastRem = rem;
    if (!s.gotHeader && s.gotLen >= SIZE_OF_XLOG_RECORD) {
      const err = checkRecordHeader(this.asm, 0, lsn, this.prevLsn, this.fmt!);
      if (err !== null) this.invalid(lsn, err);
      s.gotHeader = true;
    }
    return false;
  }

  /**
   * Grow the reassembly buffer to `n`: only ever by bytes copied from checked pages. Past the
   * memory's region, an ordinary Buffer (kept for the next large record).
   */
  private ensureAsm(n: number): void {
    if (this.asm.length >= n) return;
    if (this.bigAsm.length < n) {
      const bigger = Buffer.alloc(Math.max(n, this.bigAsm.length * 2, this.asm.length * 2));
      if (this.asm === this.bigAsm) this.bigAsm.copy(bigger);
      this.bigAsm = bigger;
    }
    if (this.asm !== this.bigAsm) this.asm.copy(this.bigAsm);
    this.asm = this.bigAsm;
  }

  private pageHeaderSize(po: number): number {
    return (u16(this.win, po + 2) & XLP_LONG_HEADER) !== 0 ? SIZE_OF_LONG_PHD : SIZE_OF_SHORT_PHD;
  }

  private offsetMessage(lsn: Lsn, phs: number, recOff: number): string {
    return this.fmt!.lengthMessageWanted
      ? `invalid record offset at ${formatLsn(lsn)}`
      : `invalid record offset at ${formatLsn(lsn)}: expected at least ${phs}, got ${recOff}`;
  }

  /**
   * The window offset of the validated page at `pagePtr`, reading a chunk of its segment when it
   * is not in memory (and the segment's first page, so a recycled file is caught early). A page
   * in the window is answered at once, not as a promise: the slow path asks for one or two pages
   * of every page's records (spanning records), and a promise and an await each cost more than
   * the rest of the call.
   */
  private page(pagePtr: Lsn): number | Promise<number> {
    if (pagePtr < this.winStart || pagePtr >= this.winStart + this.winLen)
      return this.pageRead(pagePtr);
    return this.pageInWindow(pagePtr);
  }

  /** `page` for a page not in the window: its chunk read first. */
  private async pageRead(pagePtr: Lsn): Promise<number> {
    const segno = Math.floor(pagePtr / this.segSize);
    const segStart = segno * this.segSize;
    if (this.fileSegno !== segno) {
      await this.openSegment(segno, pagePtr);
      if (pagePtr !== segStart) {
        await this.load(segStart, XLOG_BLCKSZ);
        this.validatePage(segStart, 0);
      }
    }
    await this.load(pagePtr, Math.min(this.win.length, segStart + this.segSize - pagePtr));
    return this.pageInWindow(pagePtr);
  }

  /** `page` for a page in the window: validated once. */
  private pageInWindow(pagePtr: Lsn): number {
    const po = pagePtr - this.winStart;
    if (pagePtr < this.checkedFrom || pagePtr >= this.checkedTo) {
      this.validatePage(pagePtr, po);
      if (pagePtr === this.checkedTo) this.checkedTo += XLOG_BLCKSZ;
      else {
        this.checkedFrom = pagePtr;
        this.checkedTo = pagePtr + XLOG_BLCKSZ;
      }
    }
    return po;
  }

  private async openSegment(segno: number, pagePtr: Lsn): Promise<void> {
    const ahead = this.ahead;
    let f: WalSegmentFile | null;
    if (ahead !== null && ahead.opening !== null && ahead.opening.segno === segno) {
      // The segment was opened ahead (and its first chunk is being read): adopt both.
      this.ahead = null;
      await this.closeFile();
      f = await ahead.opening.file;
      this.ahead = { ...ahead, opening: null };
    } else {
      await this.closeFile();
      f = await this.source.open(segno);
    }
    if (f === null)
      throw new EndOfWal({
        reason: 'missing_segment',
        lsn: Math.max(pagePtr, this.next),
        message: `could not find file "${this.source.expectedName(segno)}" (segment of ${formatLsn(pagePtr)})`,
      });
    this.file = f;
    this.fileSegno = segno;
  }

  private async load(lsn: Lsn, length: number): Promise<void> {
    const segStart = this.fileSegno * this.segSize;
    assert(
      lsn % XLOG_BLCKSZ === 0 && lsn >= segStart && lsn - segStart + length <= this.segSize,
      'INV-PGWAL-1: the window holds whole pages of one segment',
    );
    assert(length <= this.win.length, 'INV-PGWAL-5: a read never exceeds the chunk');
    const ahead = this.ahead;
    this.ahead = null;
    let n = -1;
    if (ahead !== null) {
      const got = await ahead.done;
      if (ahead.lsn === lsn && ahead.length === length && got === length) {
        [this.win, this.other] = [this.other, this.win];
        n = got;
      }
    }
    const failure = this.mem.workerFailure();
    if (failure !== null) throw crcWorkerError(failure);
    if (n < 0) {
      this.mem.invalidate(this.win);
      n = await this.file!.read(this.win, 0, length, lsn - segStart);
      if (n === length) this.mem.computeVerdicts(this.win, length);
    }
    if (n < length)
      throw new WalsimError(
        'invalid_input',
        `WAL file ${this.file!.name}: could read only ${n} of ${length} bytes at offset ${lsn - segStart} (the file is shorter than the segment size ${this.segSize})`,
      );
    this.winStart = lsn;
    this.loads++;
    this.winLen = length;
    // The window was replaced: pages validated earlier stay valid (their bytes were checked).
    this.readAhead(lsn + length, segStart);
  }

  /**
   * Start reading the chunk after [.., next) of the open segment into the other window while the
   * records of this one are parsed. A failed read ahead is read again, in order, by `load`
   * (which then reports the error).
   */
  private readAhead(next: Lsn, segStart: Lsn): void {
    const left = segStart + this.segSize - next;
    if (this.file === null || next >= this.endLsn) return;
    const into = this.other;
    this.mem.invalidate(into);
    if (left > 0) {
      const length = Math.min(into.length, left);
      const done = this.readAheadInto(this.file, into, length, next - segStart);
      this.ahead = { lsn: next, length, done, opening: null };
      return;
    }
    // The segment is read to its end: open the next one and read its first chunk meanwhile.
    const segno = this.fileSegno + 1;
    const file = this.source.open(segno);
    file.catch(() => {}); // an error is the adopter's (openSegment awaits it) or nobody's
    const length = Math.min(into.length, this.segSize);
    const done = file
      .then((f) => (f === null ? -1 : this.readAheadInto(f, into, length, 0)))
      .catch(() => -1);
    this.ahead = { lsn: next, length, done, opening: { segno, file } };
  }

  /**
   * A chunk read ahead into window `into`, and its CRC-32C verdicts computed while the other
   * window is parsed: by the worker thread, reading too, when the file has a descriptor (the
   * read then completes without waiting for this thread's event loop); else read here and the
   * verdicts computed after. -1 when the read failed (`load` reads again and says why).
   */
  private readAheadInto(
    f: WalSegmentFile,
    into: Buffer,
    length: number,
    position: number,
  ): Promise<number> {
    if (f.fd !== undefined && this.mem.workerReads())
      return this.mem.readOnWorker(into, f.fd, position, length);
    return f.read(into, 0, length, position).then(
      (n) => {
        if (n === length) this.mem.computeVerdicts(into, length);
        return n;
      },
      () => -1,
    );
  }

  /** Wait out a read ahead nobody will use (its window is about to be reused or its file closed). */
  private async dropReadAhead(): Promise<void> {
    const ahead = this.ahead;
    this.ahead = null;
    if (ahead === null) return;
    await ahead.done;
    if (ahead.opening !== null) {
      const f = await ahead.opening.file.catch(() => null);
      if (f !== null) await f.close();
    }
  }

  /** Where a page is, for a message (built only when one is needed: pages are validated often). */
  private where(segOff: number): string {
    return `in log segment ${this.file!.name}, offset ${segOff}`;
  }

  /** XLogReaderValidatePageHeader, and the major from the first page's magic. */
  private validatePage(pagePtr: Lsn, po: number): void {
    const b = this.win;
    const magic = u16(b, po);
    const info = u16(b, po + 2);
    const segOff = pagePtr % this.segSize;
    if (this.fmt === null) {
      this.fmt = this.formatFromMagic(magic, pagePtr);
      this.scanFlags =
        (this.fmt.hasToplevelXid ? 1 : 0) |
        (this.fmt.hasCustomRmgrs ? 2 : 0) |
        (this.fmt.bkpImageCompressed << 8);
    }
    if (magic !== this.fmt.magic)
      this.invalid(pagePtr, `invalid magic number ${hex4(magic)} ${this.where(segOff)}`);
    if ((info & ~XLP_ALL_FLAGS) !== 0)
      this.invalid(pagePtr, `invalid info bits ${hex4(info)} ${this.where(segOff)}`);
    if ((info & XLP_LONG_HEADER) !== 0) {
      const sysid = b.readBigUInt64LE(po + 24);
      const bad = 'WAL file is from different database system';
      if (this.opts.systemIdentifier !== undefined && sysid !== this.opts.systemIdentifier)
        this.invalid(
          pagePtr,
          `${bad}: WAL file database system identifier is ${sysid}, pg_control database system identifier is ${this.opts.systemIdentifier} ${this.where(segOff)}`,
        );
      if (u32(b, po + 32) !== this.segSize)
        this.invalid(
          pagePtr,
          `${bad}: incorrect segment size in page header ${this.where(segOff)}`,
        );
      if (u32(b, po + 36) !== XLOG_BLCKSZ)
        this.invalid(pagePtr, `${bad}: incorrect XLOG_BLCKSZ in page header ${this.where(segOff)}`);
    } else if (segOff === 0) {
      this.invalid(pagePtr, `invalid info bits ${hex4(info)} ${this.where(segOff)}`);
    }
    const pageaddr = u64(b, po + 8);
    if (pageaddr !== pagePtr)
      this.invalid(pagePtr, `unexpected pageaddr ${fmtLsn(pageaddr)} ${this.where(segOff)}`);
    const tli = u32(b, po + 4);
    if (pagePtr > this.latestPagePtr) {
      if (tli < this.latestPageTli)
        this.invalid(
          pagePtr,
          `out-of-sequence timeline ID ${tli} (after ${this.latestPageTli}) ${this.where(segOff)}`,
        );
    }
    this.latestPagePtr = pagePtr;
    this.latestPageTli = tli;
  }

  /** The first page fixes the major; an unknown magic is refused, naming it and the file. */
  private formatFromMagic(magic: number, pagePtr: Lsn): PgWalFormat {
    const major = majorOfMagic(magic);
    const expected = this.opts.major;
    if (major === null) {
      if (magic === 0 && expected !== undefined) return formatOf(expected);
      throw new WalsimError(
        'invalid_input',
        `WAL file ${this.file!.name} at ${formatLsn(pagePtr)}: page magic ${hex4(magic)} is no PostgreSQL major this reader knows (${KNOWN_MAGICS})`,
      );
    }
    if (expected !== undefined && expected !== major)
      throw new WalsimError(
        'invalid_input',
        `WAL file ${this.file!.name} at ${formatLsn(pagePtr)} was written by PostgreSQL ${major} (page magic ${hex4(magic)}), not ${expected}`,
      );
    return formatOf(major);
  }
}

/** Where scanStart says the WebAssembly scan may run (window offsets); one for the module. */
const scanAt = { off: 0, limit: 0 };

/** `views()`' view and callback. */
interface Visit {
  view: PgWalRecordView;
  fn: (v: PgWalRecordView) => void;
}

/** readSpanning's answer for a record abandoned by XLP_FIRST_IS_OVERWRITE_CONTRECORD. */
const OVERWRITTEN = Symbol('overwritten contrecord');

/** A value now, or a promise of it once a chunk was read. */
type Soon<T> = T | Promise<T>;

/** A record spanning pages while it is reassembled (`readSpanning`). */
interface Spanning {
  lsn: Lsn;
  /** Its window offset on its first page. */
  o: number;
  totLen: number;
  /** Bytes in the reassembly buffer. */
  gotLen: number;
  /** The page read last. */
  pg: Lsn;
  /** That page's header size and xlp_rem_len. */
  lastPhs: number;
  lastRem: number;
  gotHeader: boolean;
  /** Chunks loaded when it began (`loads`): the CRC worker's verdict holds while unchanged. */
  loadsAtStart: number;
}

/** A chunk being read ahead into the other window. */
interface ReadAhead {
  lsn: Lsn;
  length: number;
  /** Bytes read; -1 when the read failed (load reads it again and says why). */
  done: Promise<number>;
  /** The next segment's file, opened ahead (null: the chunk is of the open segment). */
  opening: { segno: number; file: Promise<WalSegmentFile | null> } | null;
}

const hex4 = (n: number) => n.toString(16).toUpperCase().padStart(4, '0');
const crcMessage = (lsn: Lsn) =>
  `incorrect resource manager data checksum in record at ${formatLsn(lsn)}`;
