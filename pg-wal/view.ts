/**
 * One record as values, refilled for every record `PgWalReader.views()` hands to its callback and
 * valid only during that call: the header's values, the block references in typed arrays, and
 * the main data predict reads (main-data.ts), decoded as `batches()` decodes it. What a consumer
 * that walks every record needs, without an object (or a block array) per record.
 *
 * Entry points: `PgWalRecordView`, `decodeRecordInto`.
 */
import type { Lsn } from '../wal/lsn.ts';
import { u16, u32 } from './bytes.ts';
import {
  BKPBLOCK_FORK_MASK,
  BKPBLOCK_HAS_IMAGE,
  BKPBLOCK_SAME_REL,
  BKPIMAGE_HAS_HOLE,
  SIZE_OF_XLOG_RECORD,
  XLR_BLOCK_ID_DATA_LONG,
  XLR_BLOCK_ID_DATA_SHORT,
  XLR_BLOCK_ID_ORIGIN,
  XLR_BLOCK_ID_TOPLEVEL_XID,
  XLR_MAX_BLOCK_ID,
  type PgWalFormat,
} from './format.ts';
import { decodeMainData, type PgWalMainData } from './main-data.ts';
import type { PgWalRecord } from './record.ts';
import { recordTypeName, rmgrName } from './rmgr-names.ts';

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
  /** The main data of the records predict needs (main-data.ts), null for the others. */
  data: PgWalMainData | null = null;
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
 * DecodeXLogRecord into a view, for a record whose header, CRC-32C and header fragments the
 * WebAssembly scan already checked (scan.wat `$fragments`): the walk here repeats its layout
 * without its checks, writing the block references into the view's arrays, then decodes the
 * main data as `decodeRecord` does (its own checks can still end reading, naming the record).
 */
export function decodeRecordInto(
  v: PgWalRecordView,
  b: Uint8Array,
  off: number,
  lsn: Lsn,
  endLsn: Lsn,
  fpiLength: number,
  fmt: PgWalFormat,
): void {
  const totLen = u32(b, off);
  const rmid = b[off + 17]!;
  const info = b[off + 16]!;
  v.lsn = lsn;
  v.endLsn = endLsn;
  v.xid = u32(b, off + 4);
  v.rmid = rmid;
  v.info = info;
  v.rmgr = rmgrName(rmid);
  v.type = recordTypeName(fmt.major, rmid, info);
  v.totalLength = totLen;
  v.fpiLength = fpiLength;
  const end = off + totLen;
  let p = off + SIZE_OF_XLOG_RECORD;
  let datatotal = 0;
  let main = 0;
  let n = 0;
  // The same loop as readFragments; each iteration consumes one fragment, so it is bounded.
  while (end - p > datatotal) {
    const id = b[p++]!;
    if (id === XLR_BLOCK_ID_DATA_SHORT) {
      main = b[p]!;
      break;
    } else if (id === XLR_BLOCK_ID_DATA_LONG) {
      main = u32(b, p);
      break;
    } else if (id === XLR_BLOCK_ID_ORIGIN) p += 2;
    else if (id === XLR_BLOCK_ID_TOPLEVEL_XID && fmt.hasToplevelXid) p += 4;
    else {
      const flags = b[p]!;
      datatotal += u16(b, p + 1);
      p += 3;
      if ((flags & BKPBLOCK_HAS_IMAGE) !== 0) {
        datatotal += u16(b, p);
        const bimgInfo = b[p + 4]!;
        p += 5;
        if ((bimgInfo & fmt.bkpImageCompressed) !== 0 && (bimgInfo & BKPIMAGE_HAS_HOLE) !== 0)
          p += 2;
      }
      if ((flags & BKPBLOCK_SAME_REL) === 0) {
        v.blockSpc[n] = u32(b, p);
        v.blockDb[n] = u32(b, p + 4);
        v.blockRel[n] = u32(b, p + 8);
        p += 12;
      } else {
        // The relation of the block before (every block names one or repeats it).
        v.blockSpc[n] = v.blockSpc[n - 1]!;
        v.blockDb[n] = v.blockDb[n - 1]!;
        v.blockRel[n] = v.blockRel[n - 1]!;
      }
      v.blockNo[n] = u32(b, p);
      v.blockFork[n] = flags & BKPBLOCK_FORK_MASK;
      p += 4;
      n++;
    }
  }
  v.blockCount = n;
  v.mainDataLength = main;
  v.data = null;
  v.data = decodeMainData(v, b, end - main, main, fmt);
}
