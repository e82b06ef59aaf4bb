/**
 * The reader's WebAssembly memory and hot loop (scan.wat): the two read windows, the reassembly
 * buffer and the CRC-32C tables live in one WebAssembly.Memory, so the records read into them
 * are checked in WebAssembly (CRC-32C slice-by-16, ValidXLogRecordHeader, DecodeXLogRecord's
 * fragment checks) without copying. The memory is fixed at construction (it never grows, so no
 * view of it is ever detached while a read is in flight); a record larger than the reassembly
 * region is assembled in an ordinary Buffer and its CRC computed in TypeScript.
 *
 * The memory is shared: a `CrcWorker` (a worker thread) computes the CRC-32C verdicts of the
 * window read ahead while the main thread scans the other one (`verdicts` in scan.wat), and the
 * scan skips the CRC-32C of a record whose verdict says it matched. Each window's verdicts are
 * used only once the job for its current content has finished (a status word per window, set
 * with Atomics by the worker after the verdicts); any read into a window first invalidates them.
 *
 * Entry points: `ScanMemory` (`windows`, `asm`, `recordCrcOk`, `scanPage`, `columns`, `views`,
 * the verdict jobs), `CrcWorker`, `CRC_WORKER_CODE`, `SCAN_OUT_MAX`, `SCAN_VIEWS`.
 */
import { Worker } from 'node:worker_threads';
import { assert, fail } from '../common/assert.ts';
import { WalsimError } from '../common/errors.ts';
import { crc32cTables } from '../wal/crc32c.ts';
import { PgWalColumns } from './columns.ts';
import { recordCrcOk as recordCrcOkTs } from './record.ts';
import { SCAN_WASM_BASE64 } from './scan-wasm-bytes.ts';

const WASM_PAGE = 65536;
/** [0, 16 KB): CRC tables 0–15, read by scan.wat at fixed offsets (16–19: TABLES_HIGH_AT). */
const TABLES_AT = 0;
/** The scan's output columns (scan.wat's header says where each is), for this many records. */
export const SCAN_OUT_MAX = 4096;
const OUT = { address: 16384, fpi: 32768, tot: 49152, lsn: 65536, end: 98304, rmid: 131072 };
const OUT_INFO = 135168;
/** `views()`' output (scan's flag SCAN_VIEWS): per record, then per block slot. */
const OUT_VIEW = { main: 139264, first: 155648, count: 172032 };
/** Block slots of one scan: a page's records hold fewer (an 8-byte block header at least). */
export const SCAN_BLOCK_SLOTS = 1024;
const BLOCKS = { spc: 176128, db: 180224, rel: 184320, no: 188416, fork: 192512 };
/** CRC tables 16–19 (for a record header's 20 bytes in one step), after the block slots. */
const TABLES_HIGH_AT = BLOCKS.fork + SCAN_BLOCK_SLOTS;
const CRC_TABLES = 20;
const ASM_AT = TABLES_HIGH_AT + (CRC_TABLES - 16) * 1024;
/** Records up to this length are reassembled inside the memory (an FPI record is ~8 kB). */
const ASM_BYTES = 256 * 1024;
/** Windows start on a WebAssembly page (and so on an 8 kB WAL page: MAXALIGN holds). */
const WINDOWS_AT = Math.ceil((ASM_AT + ASM_BYTES) / WASM_PAGE) * WASM_PAGE;

interface ScanExports {
  crc(state: number, address: number, end: number): number;
  copy(to: number, from: number, length: number): void;
  recordCrcOk(address: number, totLen: number): number;
  recordFpi(address: number, totLen: number, flags: number): number;
  recordView(address: number, totLen: number, flags: number): number;
  scan(
    address: number,
    limit: number,
    prevLo: number,
    prevHi: number,
    baseLo: number,
    baseHi: number,
    out: number,
    max: number,
    flags: number,
    verdictBase: number,
  ): number;
}

/** scan.wat's flag: the window's verdicts are complete. */
const SCAN_VERDICTS = 4;
/** scan.wat's flag: write each record's block references and main data length (`ScanViews`). */
export const SCAN_VIEWS = 8;

/**
 * What scan.wat's fragment walk wrote for `views()` (flag SCAN_VIEWS): record i's main data
 * length, its block references in slots [first[i], first[i] + count[i]) of the block arrays.
 */
export interface ScanViews {
  readonly mainLength: Uint32Array;
  readonly first: Int32Array;
  readonly count: Uint8Array;
  readonly spc: Uint32Array;
  readonly db: Uint32Array;
  readonly rel: Uint32Array;
  readonly block: Uint32Array;
  readonly fork: Uint8Array;
}

let compiled: WebAssembly.Module | null = null;

function scanModule(): WebAssembly.Module {
  compiled ??= new WebAssembly.Module(Buffer.from(SCAN_WASM_BASE64, 'base64'));
  return compiled;
}

const TWO_32 = 0x1_0000_0000;
const lo32 = (v: number) => (((v % TWO_32) + TWO_32) % TWO_32) | 0;
const hi32 = (v: number) => Math.floor(v / TWO_32) | 0;

/** scan.wat's tables: TABLE[k * 256 + b], the CRC of byte b followed by k zero bytes. */
function crcTables(): Int32Array {
  const t = new Int32Array(CRC_TABLES * 256);
  t.set(crc32cTables());
  for (let k = 8; k < CRC_TABLES; k++)
    for (let n = 0; n < 256; n++) {
      const c = t[(k - 1) * 256 + n]!;
      t[k * 256 + n] = t[c & 0xff]! ^ (c >>> 8);
    }
  return t;
}

/**
 * One reader's memory: two windows of `windowBytes`, the reassembly region, and after the
 * windows a verdict table per window (a byte per 8 bytes of window) and the two status words.
 */
export class ScanMemory {
  readonly windows: [Buffer, Buffer];
  /** The worker computing verdicts, once `startCrcWorker` started it. */
  worker: CrcWorker | null = null;
  /** The reassembly region (ASM_BYTES), inside the memory. */
  readonly asm: Buffer;
  /** The scan's output: each record's window address. */
  readonly addresses: Int32Array;
  /** The scan's output as columns; `PgWalColumns` pushes into the same arrays. */
  readonly columns: PgWalColumns;
  /** The scan's block references and main data lengths (flag SCAN_VIEWS). */
  readonly views: ScanViews;
  private readonly memory: WebAssembly.Memory;
  /** The memory's buffer, read once (the memory never grows; the getter costs a call). */
  private readonly buffer: ArrayBuffer | SharedArrayBuffer;
  private readonly wasm: ScanExports;
  /** Where each window's verdict table starts. */
  private readonly tables: [number, number];
  /**
   * Per window, the worker's last finished job ([0], [1]) and the bytes that job read ([2], [3];
   * -1 when the read failed), written by the worker (Atomics).
   */
  private readonly status: Int32Array;
  private readonly statusAt: number;
  private readonly memoryBytes: Uint8Array;
  /** Per window, the job computing the verdicts of its current content (0: none). */
  private readonly expected = [0, 0];
  private jobs = 0;
  /** Jobs posted, and the most ever unfinished at once (bounded: one per window). */
  readonly jobStats = { started: false, posted: 0, maxInFlight: 0 };

  constructor(windowBytes: number) {
    const windowSpan = Math.ceil(windowBytes / WASM_PAGE) * WASM_PAGE;
    const tableSpan = windowSpan / 8;
    const tablesAt = WINDOWS_AT + 2 * windowSpan;
    this.statusAt = tablesAt + 2 * tableSpan;
    const pages = Math.ceil((this.statusAt + 16) / WASM_PAGE);
    this.memory = new WebAssembly.Memory({ initial: pages, maximum: pages, shared: true });
    this.tables = [tablesAt, tablesAt + tableSpan];
    const instance = new WebAssembly.Instance(scanModule(), { env: { memory: this.memory } });
    this.wasm = instance.exports as unknown as ScanExports;
    const buf = this.memory.buffer;
    this.buffer = buf;
    const tables = crcTables();
    new Int32Array(buf, TABLES_AT, 16 * 256).set(tables.subarray(0, 16 * 256));
    new Int32Array(buf, TABLES_HIGH_AT, (CRC_TABLES - 16) * 256).set(tables.subarray(16 * 256));
    this.addresses = new Int32Array(buf, OUT.address, SCAN_OUT_MAX);
    this.columns = new PgWalColumns(SCAN_OUT_MAX, {
      lsn: new Float64Array(buf, OUT.lsn, SCAN_OUT_MAX),
      endLsn: new Float64Array(buf, OUT.end, SCAN_OUT_MAX),
      rmid: new Uint8Array(buf, OUT.rmid, SCAN_OUT_MAX),
      info: new Uint8Array(buf, OUT_INFO, SCAN_OUT_MAX),
      totalLength: new Uint32Array(buf, OUT.tot, SCAN_OUT_MAX),
      fpiLength: new Uint32Array(buf, OUT.fpi, SCAN_OUT_MAX),
    });
    const slots = SCAN_BLOCK_SLOTS;
    this.views = {
      mainLength: new Uint32Array(buf, OUT_VIEW.main, SCAN_OUT_MAX),
      first: new Int32Array(buf, OUT_VIEW.first, SCAN_OUT_MAX),
      count: new Uint8Array(buf, OUT_VIEW.count, SCAN_OUT_MAX),
      spc: new Uint32Array(buf, BLOCKS.spc, slots),
      db: new Uint32Array(buf, BLOCKS.db, slots),
      rel: new Uint32Array(buf, BLOCKS.rel, slots),
      block: new Uint32Array(buf, BLOCKS.no, slots),
      fork: new Uint8Array(buf, BLOCKS.fork, slots),
    };
    this.asm = Buffer.from(buf, ASM_AT, ASM_BYTES);
    this.windows = [
      Buffer.from(buf, WINDOWS_AT, windowBytes),
      Buffer.from(buf, WINDOWS_AT + windowSpan, windowBytes),
    ];
    this.status = new Int32Array(buf, this.statusAt, 4);
    this.memoryBytes = new Uint8Array(buf);
  }

  /** Bytes of the memory: fixed at construction (it never grows). */
  get bytes(): number {
    return this.memory.buffer.byteLength;
  }

  /** Start the worker that computes verdicts (`crcWorkerCode`: tests give a failing one). */
  startCrcWorker(crcWorkerCode?: string): void {
    this.jobStats.started = true;
    this.worker ??= new CrcWorker(scanModule(), this.memory, this.statusAt, crcWorkerCode);
  }

  /** Which of the two windows `win` is. */
  private indexOf(win: Buffer): 0 | 1 {
    return win.byteOffset === this.windows[0].byteOffset ? 0 : 1;
  }

  /** New content is about to be read into `win`: its verdicts are no longer the content's. */
  invalidate(win: Buffer): void {
    this.expected[this.indexOf(win)] = 0;
  }

  /** `win` holds `length` bytes of new content: the worker computes their verdicts. */
  computeVerdicts(win: Buffer, length: number): void {
    const w = this.worker;
    // Nothing waits for these jobs: one is posted only when none is unfinished, so a slow
    // worker never has a queue (that content is then checked here, as without the worker).
    if (w === null || w.failure !== null || this.inFlight() > 0) return;
    this.post(w, win, { len: length });
  }

  /** Jobs posted and not finished: the worker finishes them in order, ids increasing. */
  private inFlight(): number {
    return this.jobs - Math.max(Atomics.load(this.status, 0), Atomics.load(this.status, 1));
  }

  private post(w: CrcWorker, win: Buffer, job: { len: number; fd?: number; pos?: number }): number {
    const i = this.indexOf(win);
    const id = ++this.jobs;
    this.expected[i] = id;
    w.post({ ...job, i, id, win: win.byteOffset, table: this.tables[i] });
    this.jobStats.posted++;
    this.jobStats.maxInFlight = Math.max(this.jobStats.maxInFlight, this.inFlight());
    return id;
  }

  /** The worker can read for this reader (started, not failed). */
  workerReads(): boolean {
    return this.worker !== null && this.worker.failure === null;
  }

  /**
   * Read `length` bytes of the file `fd` at `position` into `win` on the worker thread, which
   * then computes their verdicts: the read completes there, not on this thread's event loop, so
   * the verdicts are ready when this thread, busy scanning the other window, comes to it. Bytes
   * read, or -1 when the read or the worker failed (the caller reads again and says why).
   */
  async readOnWorker(win: Buffer, fd: number, position: number, length: number): Promise<number> {
    const w = this.worker!;
    const i = this.indexOf(win);
    const id = this.post(w, win, { len: length, fd, pos: position });
    for (;;) {
      const v = Atomics.load(this.status, i);
      if (v === id) break;
      if (w.failure !== null || w.isClosed()) {
        this.expected[i] = 0;
        return -1;
      }
      const r = waitAsync(this.status, i, v);
      if (!r.async) continue;
      // A pending waitAsync does not keep the process alive; the worker does while it is waited on.
      w.hold(true);
      try {
        await Promise.race([r.value, w.stopped]);
      } finally {
        w.hold(false);
      }
    }
    const n = Atomics.load(this.status, 2 + i);
    // A failed or short read computed no verdicts: none are used for this content.
    if (n !== length) this.expected[i] = 0;
    return n;
  }

  /** The verdicts of `win`'s current content are complete (the worker finished its job). */
  verdictsReady(win: Buffer): boolean {
    const i = this.indexOf(win);
    const id = this.expected[i]!;
    return id !== 0 && Atomics.load(this.status, i) === id;
  }

  /** The verdict at window offset `off` of `win` says a CRC-32C matched (verdicts complete). */
  verdictAt(win: Buffer, off: number): boolean {
    if (!this.verdictsReady(win)) return false;
    return this.memoryBytes[this.tables[this.indexOf(win)] + (off >> 3)] === 1;
  }

  /** The worker's failure as one line, when it failed. */
  workerFailure(): string | null {
    return this.worker?.failure ?? null;
  }

  async close(): Promise<void> {
    const w = this.worker;
    this.worker = null;
    if (w !== null) await w.close();
  }

  /**
   * COMP_CRC32C in WebAssembly over `b[start, end)`, `b` a view of this memory: the running
   * (unfinished) state in, the new one out, as wal/crc32c.ts `crc32cUpdate` (which it equals).
   */
  crc32cUpdate(state: number, b: Buffer, start: number, end: number): number {
    assert(
      b.buffer === this.buffer && start >= 0 && start <= end && end <= b.length,
      'crc32cUpdate reads a range of its memory',
    );
    return this.wasm.crc(state | 0, b.byteOffset + start, b.byteOffset + end) >>> 0;
  }

  /**
   * `src.copy(dst, at, start, end)`, by WebAssembly's memory.copy when both lie in this memory
   * (a call of Buffer.copy costs more than copying a small record's bytes).
   */
  copy(src: Buffer, start: number, end: number, dst: Buffer, at: number): void {
    const n = end - start;
    if (!(start >= 0 && n >= 0 && end <= src.length && at >= 0 && at + n <= dst.length))
      fail(`copy of [${start}, ${end}) of ${src.length} bytes to ${at} of ${dst.length}`);
    if (src.buffer === this.buffer && dst.buffer === this.buffer)
      this.wasm.copy(dst.byteOffset + at, src.byteOffset + start, n);
    else src.copy(dst, at, start, end);
  }

  /** ValidXLogRecord over `b[off, off + totLen)`: in WebAssembly when `b` is in this memory. */
  recordCrcOk(b: Buffer, off: number, totLen: number): boolean {
    if (b.buffer === this.buffer) return this.wasm.recordCrcOk(b.byteOffset + off, totLen) === 1;
    return recordCrcOkTs(b, off, totLen);
  }

  /**
   * DecodeXLogRecord's fragment checks of the record at `b[off…]` (xl_tot_len `totLen`), in
   * WebAssembly: its full-page image bytes, or -1 when they fail or `b` is not in this memory
   * (the caller then decodes it in TypeScript, which says why).
   */
  recordFpi(b: Buffer, off: number, totLen: number, flags: number): number {
    if (b.buffer !== this.buffer) return -1;
    return this.wasm.recordFpi(b.byteOffset + off, totLen, flags);
  }

  /**
   * `recordFpi` for a view: the record's block references and main data length also written as
   * record 0 of `views` (its fragments walked once, in WebAssembly). -1 as for recordFpi.
   */
  recordView(b: Buffer, off: number, totLen: number, flags: number): number {
    if (b.buffer !== this.buffer) return -1;
    return this.wasm.recordView(b.byteOffset + off, totLen, flags);
  }

  /**
   * scan.wat's `scan` over window `win` from offset `off` up to offset `limit`: how many records
   * it accepted (at most `max`), their values written into `columns` from index `at` on (and their window
   * addresses into `addresses`). `winLsn`: the LSN of the window's first byte; `prev`: the LSN
   * the first xl_prev must equal.
   */
  scanPage(
    win: Buffer,
    off: number,
    limit: number,
    winLsn: number,
    prev: number,
    at: number,
    max: number,
    flags: number,
  ): number {
    assert(win.buffer === this.buffer, 'the scan reads a window of its memory');
    const w = win.byteOffset;
    const base = winLsn - w;
    const n = Math.min(max, SCAN_OUT_MAX - at);
    let verdictBase = 0;
    if (this.verdictsReady(win)) {
      flags |= SCAN_VERDICTS;
      // The verdict of address a is at verdictBase + a / 8 (windows start 8-byte aligned).
      verdictBase = (this.tables[this.indexOf(win)] - w / 8) | 0;
    }
    return this.wasm.scan(
      w + off,
      w + limit,
      lo32(prev),
      hi32(prev),
      lo32(base),
      hi32(base),
      at,
      n,
      flags,
      verdictBase,
    );
  }
}

/**
 * The worker thread's code (CommonJS, evaluated: the bundled `walsim` has no file for it): it
 * instantiates the same module on the shared memory, runs `verdicts` for each job in order and
 * then stores the job's id in the window's status word.
 */
export const CRC_WORKER_CODE = `
const fs = require('node:fs');
const { parentPort } = require('node:worker_threads');
let wasm = null;
let memory = null;
let status = null;
function read(m) {
  const buf = new Uint8Array(memory.buffer, m.win, m.len);
  let n = 0;
  try {
    while (n < m.len) {
      const k = fs.readSync(m.fd, buf, n, m.len - n, m.pos + n);
      if (k === 0) break;
      n += k;
    }
  } catch {
    return -1;
  }
  return n;
}
parentPort.on('message', (m) => {
  if (m.module !== undefined) {
    memory = m.memory;
    wasm = new WebAssembly.Instance(m.module, { env: { memory } }).exports;
    status = new Int32Array(memory.buffer, m.statusAt, 4);
    return;
  }
  const n = m.fd === undefined ? m.len : read(m);
  if (m.fd !== undefined) Atomics.store(status, 2 + m.i, n);
  if (n === m.len) wasm.verdicts(m.win, m.len, m.table);
  Atomics.store(status, m.i, m.id);
  Atomics.notify(status, m.i);
});
`;

/**
 * A verdict job: window `i`'s `len` bytes at `win` (first read from file descriptor `fd` at
 * `pos`, when given), verdicts into `table`, then status = `id`.
 */
interface VerdictJob {
  i: number;
  id: number;
  win: number;
  len: number;
  table: number;
  fd?: number;
  pos?: number;
}

/** Atomics.waitAsync (Node 16+; not in the ES2022 typings). */
const waitAsync = (
  Atomics as unknown as {
    waitAsync(
      a: Int32Array,
      i: number,
      v: number,
    ): { async: false; value: string } | { async: true; value: Promise<string> };
  }
).waitAsync;

/**
 * The worker thread computing CRC-32C verdicts for a reader's memory. It holds at most one job
 * per window (a job is posted only after a read into that window, which waits for the window's
 * previous content to be scanned), so the work in flight is bounded by the two windows. A failure
 * (the thread throws or exits) is kept as one line for the reader to report; jobs posted after it
 * are dropped and nothing waits for them, so reading never hangs on the worker.
 */
export class CrcWorker {
  failure: string | null = null;
  /** Settles when the thread stopped (failed, exited or was closed): nobody waits past it. */
  readonly stopped: Promise<void>;
  private readonly thread: Worker;
  private closed = false;
  private holds = 0;

  constructor(
    module: WebAssembly.Module,
    memory: WebAssembly.Memory,
    statusAt: number,
    code?: string,
  ) {
    this.thread = new Worker(code ?? CRC_WORKER_CODE, { eval: true });
    // The reader closes it; an abandoned reader must not keep the process alive.
    this.thread.unref();
    let stop = () => {};
    this.stopped = new Promise((resolve) => (stop = resolve));
    this.thread.on('error', (e: Error) => {
      this.failure ??= `the CRC-32C worker thread failed: ${e.message.split('\n')[0]}`;
      stop();
    });
    this.thread.on('exit', (code) => {
      if (!this.closed) this.failure ??= `the CRC-32C worker thread exited with code ${code}`;
      stop();
    });
    this.thread.postMessage({ module, memory, statusAt });
  }

  post(job: VerdictJob): void {
    if (!this.closed && this.failure === null) this.thread.postMessage(job);
  }

  isClosed(): boolean {
    return this.closed;
  }

  /** Keep the process alive while this thread is waited on (else it may not: unref). */
  hold(on: boolean): void {
    this.holds += on ? 1 : -1;
    if (this.holds > 0) this.thread.ref();
    else this.thread.unref();
  }

  async close(): Promise<void> {
    if (this.closed) return;
    this.closed = true;
    await this.thread.terminate();
  }
}

/** The error a reader raises for a failed worker (one line, no stack). */
export function crcWorkerError(failure: string): WalsimError {
  return new WalsimError('io_error', `pg-wal reader: ${failure}`);
}
