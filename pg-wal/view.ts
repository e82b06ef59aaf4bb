/**
 * One record as values, refilled for every record `PgWalReader.views()` hands to its callback and
 * valid only during that call: the header's values, the block references in typed arrays, and
 * the main data predict reads (main-data.ts), decoded as `batches()` decodes it. What a consumer
 * that walks every record needs, without an object (or a block array) per record.
 *
 * Entry points: `PgWalRecordView`, `decodeScannedInto`.
 */
import type { Lsn } from '../wal/lsn.ts';
import { u32 } from './bytes.ts';
import { XLR_MAX_BLOCK_ID, type PgWalFormat } from './format.ts';
import { decodeMainData, MainDataScratch, type PgWalMainData } from './main-data.ts';
import type { PgWalRecord } from './record.ts';
import { recordTypeName, rmgrName } from './rmgr-names.ts';
import type { ScanViews } from './scan-wasm.ts';

const MAX_BLOCKS = XLR_MAX_BLOCK_ID + 1;

export class PgWalRecordView {
  lsn: Lsn = 0;
  /** Where the next record starts (after alignment, page headers, an XLOG SWITCH). */
  endLsn: Lsn = 0;
  xid = 0;
  rmid = 0;
  /** xl_info. */
  info = 0;
  rmgr = '';
  /** rm_identify's name, as `pg_waldump` prints it. */
  type = '';
  /** xl_tot_len. */
  totalLength = 0;
  /** Bytes of full-page images. */
  fpiLength = 0;
  mainDataLength = 0;
  /**
   * The main data of the records predict needs (main-data.ts), null for the others; valid, like
   * the rest of the view, only during the callback (a Heap INSERT's or UPDATE's is refilled).
   */
  data: PgWalMainData | null = null;
  /** The objects a Heap INSERT's and UPDATE's `data` are refilled in. */
  readonly scratch = new MainDataScratch();
  /** Block references of this record: entries [0, blockCount) of the arrays below. */
  blockCount = 0;
  readonly blockSpc = new Uint32Array(MAX_BLOCKS);
  readonly blockDb = new Uint32Array(MAX_BLOCKS);
  readonly blockRel = new Uint32Array(MAX_BLOCKS);
  /** ForkNumber: main 0, fsm 1, vm 2, init 3. */
  readonly blockFork = new Uint8Array(MAX_BLOCKS);
  readonly blockNo = new Uint32Array(MAX_BLOCKS);

  /** xl_tot_len less the full-page images: pg_waldump's "rec" length. */
  get recordLength(): number {
    return this.totalLength - this.fpiLength;
  }

  /** The values of a decoded record (the reader's slow path, or a caller's record). */
  fromRecord(r: PgWalRecord): this {
    this.lsn = r.lsn;
    this.endLsn = r.endLsn;
    this.xid = r.xid;
    this.rmid = r.rmid;
    this.info = r.info;
    this.rmgr = r.rmgr;
    this.type = r.type;
    this.totalLength = r.totalLength;
    this.fpiLength = r.fpiLength;
    this.mainDataLength = r.mainDataLength;
    this.data = r.data;
    const n = r.blocks.length;
    for (let i = 0; i < n; i++) {
      const b = r.blocks[i]!;
      this.blockSpc[i] = b.node.spc;
      this.blockDb[i] = b.node.db;
      this.blockRel[i] = b.node.rel;
      this.blockFork[i] = b.fork;
      this.blockNo[i] = b.block;
    }
    this.blockCount = n;
    return this;
  }
}

/**
 * DecodeXLogRecord into a view, for record `i` of a scan with SCAN_VIEWS (or record 0 of
 * `ScanMemory.recordView`), at `b[off…]`: the WebAssembly checked its header, CRC-32C and header
 * fragments, and its one walk of the fragments (scan.wat `$fragments`) wrote the block
 * references and the main data length, which are copied here; then the main data is decoded as
 * `decodeRecord` does (its own checks can still end reading, naming the record). `typeNames`:
 * `recordTypeNames(fmt.major)`.
 */
export function decodeScannedInto(
  v: PgWalRecordView,
  b: Uint8Array,
  off: number,
  lsn: Lsn,
  endLsn: Lsn,
  fpiLength: number,
  i: number,
  sv: ScanViews,
  fmt: PgWalFormat,
  typeNames: Array<string | undefined>,
): void {
  const rmid = b[off + 17]!;
  const info = b[off + 16]!;
  const totLen = u32(b, off);
  v.lsn = lsn;
  v.endLsn = endLsn;
  v.xid = u32(b, off + 4);
  v.rmid = rmid;
  v.info = info;
  v.rmgr = rmgrName(rmid);
  v.type = typeNames[rmid * 256 + info] ?? recordTypeName(fmt.major, rmid, info);
  v.totalLength = totLen;
  v.fpiLength = fpiLength;
  const n = sv.count[i]!;
  const first = sv.first[i]!;
  for (let j = 0; j < n; j++) {
    const k = first + j;
    v.blockSpc[j] = sv.spc[k]!;
    v.blockDb[j] = sv.db[k]!;
    v.blockRel[j] = sv.rel[k]!;
    v.blockFork[j] = sv.fork[k]!;
    v.blockNo[j] = sv.block[k]!;
  }
  v.blockCount = n;
  const main = sv.mainLength[i]!;
  v.mainDataLength = main;
  v.data = null;
  v.data = decodeMainData(v, b, off + totLen - main, main, fmt, v.scratch);
}
