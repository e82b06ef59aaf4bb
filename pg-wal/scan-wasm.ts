/**
 * The reader's WebAssembly memory and hot loop (scan.wat): the two read windows, the reassembly
 * buffer and the CRC-32C tables live in one WebAssembly.Memory, so the records read into them
 * are checked in WebAssembly (CRC-32C slice-by-16, ValidXLogRecordHeader, DecodeXLogRecord's
 * fragment checks) without copying. The memory is fixed at construction (it never grows, so no
 * view of it is ever detached while a read is in flight); a record larger than the reassembly
 * region is assembled in an ordinary Buffer and its CRC computed in TypeScript.
 *
 * Entry points: `ScanMemory` (`windows`, `asm`, `recordCrcOk`, `scanPage`, `out`), `SCAN_OUT_MAX`.
 */
import { assert } from '../common/assert.ts';
import { crc32cTables } from '../wal/crc32c.ts';
import { PgWalColumns } from './columns.ts';
import { recordCrcOk as recordCrcOkTs } from './record.ts';
import { SCAN_WASM_BASE64 } from './scan-wasm-bytes.ts';

const WASM_PAGE = 65536;
/** [0, 16 KB): the sixteen CRC tables scan.wat reads at fixed offsets. */
const TABLES_AT = 0;
/** The scan's output columns (scan.wat's header says where each is), for this many records. */
export const SCAN_OUT_MAX = 4096;
const OUT = { address: 16384, fpi: 32768, tot: 49152, lsn: 65536, end: 98304, rmid: 131072 };
const OUT_INFO = 135168;
const ASM_AT = OUT_INFO + SCAN_OUT_MAX;
/** Records up to this length are reassembled inside the memory (an FPI record is ~8 kB). */
const ASM_BYTES = 256 * 1024;
/** Windows start on a WebAssembly page (and so on an 8 kB WAL page: MAXALIGN holds). */
const WINDOWS_AT = Math.ceil((ASM_AT + ASM_BYTES) / WASM_PAGE) * WASM_PAGE;

interface ScanExports {
  recordCrcOk(address: number, totLen: number): number;
  recordFpi(address: number, totLen: number, flags: number): number;
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
  ): number;
}

let compiled: WebAssembly.Module | null = null;

function scanModule(): WebAssembly.Module {
  compiled ??= new WebAssembly.Module(Buffer.from(SCAN_WASM_BASE64, 'base64'));
  return compiled;
}

const TWO_32 = 0x1_0000_0000;
const lo32 = (v: number) => (((v % TWO_32) + TWO_32) % TWO_32) | 0;
const hi32 = (v: number) => Math.floor(v / TWO_32) | 0;

/** Slice-by-16's tables: TABLE[k * 256 + b], the CRC of byte b followed by k zero bytes. */
function sixteenTables(): Int32Array {
  const t = new Int32Array(16 * 256);
  t.set(crc32cTables());
  for (let k = 8; k < 16; k++)
    for (let n = 0; n < 256; n++) {
      const c = t[(k - 1) * 256 + n]!;
      t[k * 256 + n] = t[c & 0xff]! ^ (c >>> 8);
    }
  return t;
}

/** One reader's memory: two windows of `windowBytes` and the reassembly region. */
export class ScanMemory {
  readonly windows: [Buffer, Buffer];
  /** The reassembly region (ASM_BYTES), inside the memory. */
  readonly asm: Buffer;
  /** The scan's output: each record's window address. */
  readonly addresses: Int32Array;
  /** The scan's output as columns; `PgWalColumns` pushes into the same arrays. */
  readonly columns: PgWalColumns;
  private readonly memory: WebAssembly.Memory;
  private readonly wasm: ScanExports;

  constructor(windowBytes: number) {
    const windowSpan = Math.ceil(windowBytes / WASM_PAGE) * WASM_PAGE;
    const pages = (WINDOWS_AT + 2 * windowSpan) / WASM_PAGE;
    this.memory = new WebAssembly.Memory({ initial: pages, maximum: pages });
    const instance = new WebAssembly.Instance(scanModule(), { env: { memory: this.memory } });
    this.wasm = instance.exports as unknown as ScanExports;
    const buf = this.memory.buffer;
    new Int32Array(buf, TABLES_AT, 16 * 256).set(sixteenTables());
    this.addresses = new Int32Array(buf, OUT.address, SCAN_OUT_MAX);
    this.columns = new PgWalColumns(SCAN_OUT_MAX, {
      lsn: new Float64Array(buf, OUT.lsn, SCAN_OUT_MAX),
      endLsn: new Float64Array(buf, OUT.end, SCAN_OUT_MAX),
      rmid: new Uint8Array(buf, OUT.rmid, SCAN_OUT_MAX),
      info: new Uint8Array(buf, OUT_INFO, SCAN_OUT_MAX),
      totalLength: new Uint32Array(buf, OUT.tot, SCAN_OUT_MAX),
      fpiLength: new Uint32Array(buf, OUT.fpi, SCAN_OUT_MAX),
    });
    this.asm = Buffer.from(buf, ASM_AT, ASM_BYTES);
    this.windows = [
      Buffer.from(buf, WINDOWS_AT, windowBytes),
      Buffer.from(buf, WINDOWS_AT + windowSpan, windowBytes),
    ];
  }

  /** ValidXLogRecord over `b[off, off + totLen)`: in WebAssembly when `b` is in this memory. */
  recordCrcOk(b: Buffer, off: number, totLen: number): boolean {
    if (b.buffer === this.memory.buffer)
      return this.wasm.recordCrcOk(b.byteOffset + off, totLen) === 1;
    return recordCrcOkTs(b, off, totLen);
  }

  /**
   * DecodeXLogRecord's fragment checks of the record at `b[off…]` (xl_tot_len `totLen`), in
   * WebAssembly: its full-page image bytes, or -1 when they fail or `b` is not in this memory
   * (the caller then decodes it in TypeScript, which says why).
   */
  recordFpi(b: Buffer, off: number, totLen: number, flags: number): number {
    if (b.buffer !== this.memory.buffer) return -1;
    return this.wasm.recordFpi(b.byteOffset + off, totLen, flags);
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
    assert(win.buffer === this.memory.buffer, 'the scan reads a window of its memory');
    const w = win.byteOffset;
    const base = winLsn - w;
    const n = Math.min(max, SCAN_OUT_MAX - at);
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
    );
  }
}
