/**
 * One PostgreSQL WAL record, decoded from its contiguous bytes: the 24-byte XLogRecord header
 * checked as ValidXLogRecordHeader does, the CRC-32C checked as ValidXLogRecord does, and the
 * block references, origin, top-level xid and main data laid out as DecodeXLogRecord reads them
 * (xlogreader.c). Pure; the reader (reader.ts) assembles the bytes across pages.
 *
 * Entry points: `decodeRecord`, `checkRecordHeader`, `recordCrcOk`, `PgWalRecord`,
 * `PgWalBlockRef`.
 */
import { assert } from '../common/assert.ts';
import { formatLsn, type Lsn } from '../wal/lsn.ts';
import { crc32cFinish, crc32cUpdate, CRC32C_INIT } from '../wal/crc32c.ts';
import {
  BKPBLOCK_FORK_MASK,
  BKPBLOCK_HAS_DATA,
  BKPBLOCK_HAS_IMAGE,
  BKPBLOCK_SAME_REL,
  BKPBLOCK_WILL_INIT,
  BKPIMAGE_HAS_HOLE,
  BLCKSZ,
  SIZE_OF_XLOG_RECORD,
  XLOG_RECORD_CRC_OFFSET,
  XLR_BLOCK_ID_DATA_LONG,
  XLR_BLOCK_ID_DATA_SHORT,
  XLR_BLOCK_ID_ORIGIN,
  XLR_BLOCK_ID_TOPLEVEL_XID,
  XLR_MAX_BLOCK_ID,
  type PgWalFormat,
} from './format.ts';
import { fmtLsn, PgWalInvalidRecord, u16, u32, u64, type RelFileNode } from './bytes.ts';
import { decodeMainData, type PgWalMainData } from './main-data.ts';
import { RM_MAX_BUILTIN_ID, RM_MIN_CUSTOM_ID, recordTypeName, rmgrName } from './rmgr-names.ts';

/** A block reference (DecodedBkpBlock). */
export type { RelFileNode };

export interface PgWalBlockRef {
  /** Block id within the record (0–32). */
  id: number;
  node: RelFileNode;
  /** ForkNumber: main 0, fsm 1, vm 2, init 3. */
  fork: number;
  block: number;
  /** fork_flags, BKPBLOCK_* bits included. */
  flags: number;
  willInit: boolean;
  /** Bytes of block data (BKPBLOCK_HAS_DATA). */
  dataLength: number;
  /** The full-page image, when the block carries one. */
  image: PgWalBlockImage | null;
}

export interface PgWalBlockImage {
  /** bimg_len: the image's bytes in the record (what pg_waldump counts as FPI size). */
  length: number;
  holeOffset: number;
  holeLength: number;
  /** bimg_info. */
  info: number;
  /** BKPIMAGE_APPLY: redo restores it (else it is there for wal_consistency_checking only). */
  apply: boolean;
  compressed: boolean;
}

export interface PgWalRecord {
  lsn: Lsn;
  /** Where the next record starts (after alignment, and page headers for a record that spans). */
  endLsn: Lsn;
  prev: Lsn;
  xid: number;
  rmid: number;
  /** xl_info. */
  info: number;
  rmgr: string;
  /** rm_identify's name, as `pg_waldump` prints it. */
  type: string;
  /** xl_tot_len. */
  totalLength: number;
  /** xl_tot_len less the full-page images: pg_waldump's "rec" length. */
  recordLength: number;
  /** Bytes of full-page images. */
  fpiLength: number;
  blocks: PgWalBlockRef[];
  mainDataLength: number;
  /** XLR_BLOCK_ID_ORIGIN's RepOriginId, 0 (InvalidRepOriginId) when absent. */
  origin: number;
  /** XLR_BLOCK_ID_TOPLEVEL_XID (14+), 0 when absent. */
  toplevelXid: number;
  /** The main data of the records predict needs (main-data.ts), null for the others. */
  data: PgWalMainData | null;
}

/**
 * ValidXLogRecordHeader: the message PostgreSQL gives, or null when the header is acceptable.
 * `expectedPrev` null = random access (the prev-link need only point backwards).
 */
export function checkRecordHeader(
  b: Uint8Array,
  off: number,
  lsn: Lsn,
  expectedPrev: Lsn | null,
  fmt: PgWalFormat,
): string | null {
  const totLen = u32(b, off);
  if (totLen < SIZE_OF_XLOG_RECORD) return invalidLengthMessage(lsn, totLen, fmt);
  const rmid = b[off + 17]!;
  const valid = fmt.hasCustomRmgrs
    ? rmid <= RM_MAX_BUILTIN_ID || rmid >= RM_MIN_CUSTOM_ID
    : rmid <= RM_MAX_BUILTIN_ID;
  if (!valid) return `invalid resource manager ID ${rmid} at ${formatLsn(lsn)}`;
  const prev = u64(b, off + 8);
  if (expectedPrev === null ? !(prev < lsn) : prev !== expectedPrev)
    return `record with incorrect prev-link ${fmtLsn(prev)} at ${formatLsn(lsn)}`;
  return null;
}

export function invalidLengthMessage(lsn: Lsn, totLen: number, fmt: PgWalFormat): string {
  return fmt.lengthMessageWanted
    ? `invalid record length at ${formatLsn(lsn)}: wanted ${SIZE_OF_XLOG_RECORD}, got ${totLen}`
    : `invalid record length at ${formatLsn(lsn)}: expected at least ${SIZE_OF_XLOG_RECORD}, got ${totLen}`;
}

/**
 * ValidXLogRecord: CRC-32C over the data after the header, then over the header up to xl_crc
 * (INIT_CRC32C, COMP_CRC32C twice, FIN_CRC32C), equal to xl_crc.
 */
export function recordCrcOk(b: Uint8Array, off: number, totLen: number): boolean {
  let c = crc32cUpdate(CRC32C_INIT, b, off + SIZE_OF_XLOG_RECORD, off + totLen);
  c = crc32cUpdate(c, b, off, off + XLOG_RECORD_CRC_OFFSET);
  return crc32cFinish(c) === u32(b, off + XLOG_RECORD_CRC_OFFSET);
}

/**
 * DecodeXLogRecord over `b[off, off + xl_tot_len)`, header and CRC already checked. Throws
 * PgWalInvalidRecord with xlogreader.c's message when the block headers do not add up.
 */
export function decodeRecord(
  b: Uint8Array,
  off: number,
  lsn: Lsn,
  endLsn: Lsn,
  fmt: PgWalFormat,
): PgWalRecord {
  const totLen = u32(b, off);
  const rmid = b[off + 17]!;
  const info = b[off + 16]!;
  const blocks: PgWalBlockRef[] = [];
  let p = off + SIZE_OF_XLOG_RECORD;
  const end = off + totLen;
  let datatotal = 0;
  let mainDataLength = 0;
  let origin = 0;
  let toplevelXid = 0;
  let fpiLength = 0;
  let maxBlockId = -1;
  let lastNode: RelFileNode | null = null;
  // Each iteration consumes one header fragment; `end - p` shrinks, so the loop is bounded.
  while (end - p > datatotal) {
    const id = b[p++]!;
    if (id === XLR_BLOCK_ID_DATA_SHORT) {
      if (end - p < 1) fail(lsn, 'record with invalid length at ');
      mainDataLength = b[p++]!;
      datatotal += mainDataLength;
      break; // the main data header is always last
    } else if (id === XLR_BLOCK_ID_DATA_LONG) {
      if (end - p < 4) fail(lsn, 'record with invalid length at ');
      mainDataLength = u32(b, p);
      p += 4;
      datatotal += mainDataLength;
      break;
    } else if (id === XLR_BLOCK_ID_ORIGIN) {
      if (end - p < 2) fail(lsn, 'record with invalid length at ');
      origin = u16(b, p);
      p += 2;
    } else if (id === XLR_BLOCK_ID_TOPLEVEL_XID && fmt.hasToplevelXid) {
      if (end - p < 4) fail(lsn, 'record with invalid length at ');
      toplevelXid = u32(b, p);
      p += 4;
    } else if (id <= XLR_MAX_BLOCK_ID) {
      if (id <= maxBlockId) fail(lsn, `out-of-order block_id ${id} at `);
      maxBlockId = id;
      if (end - p < 3) fail(lsn, 'record with invalid length at ');
      const flags = b[p]!;
      const dataLength = u16(b, p + 1);
      p += 3;
      const hasData = (flags & BKPBLOCK_HAS_DATA) !== 0;
      if (hasData && dataLength === 0) fail(lsn, `BKPBLOCK_HAS_DATA set, but no data included at `);
      if (!hasData && dataLength !== 0)
        fail(lsn, `BKPBLOCK_HAS_DATA not set, but data length is ${dataLength} at `);
      datatotal += dataLength;
      let image: PgWalBlockImage | null = null;
      if ((flags & BKPBLOCK_HAS_IMAGE) !== 0) {
        if (end - p < 5) fail(lsn, 'record with invalid length at ');
        image = readImageHeader(b, p, fmt);
        p += 5;
        if (image.compressed && (image.info & BKPIMAGE_HAS_HOLE) !== 0) {
          if (end - p < 2) fail(lsn, 'record with invalid length at ');
          image.holeLength = u16(b, p);
          p += 2;
        }
        checkImage(image, fmt, lsn);
        datatotal += image.length;
        fpiLength += image.length;
      }
      let node: RelFileNode;
      if ((flags & BKPBLOCK_SAME_REL) === 0) {
        if (end - p < 12) fail(lsn, 'record with invalid length at ');
        node = { spc: u32(b, p), db: u32(b, p + 4), rel: u32(b, p + 8) };
        p += 12;
        lastNode = node;
      } else {
        if (lastNode === null) fail(lsn, `BKPBLOCK_SAME_REL set but no previous rel at `);
        node = lastNode!;
      }
      if (end - p < 4) fail(lsn, 'record with invalid length at ');
      const block = u32(b, p);
      p += 4;
      blocks.push({
        id,
        node,
        fork: flags & BKPBLOCK_FORK_MASK,
        block,
        flags,
        willInit: (flags & BKPBLOCK_WILL_INIT) !== 0,
        dataLength,
        image,
      });
    } else {
      fail(lsn, `invalid block_id ${id} at `);
    }
  }
  if (end - p !== datatotal) fail(lsn, 'record with invalid length at ');
  // The payloads follow in block order (image, then data), then the main data: it is last.
  const mainOff = end - mainDataLength;
  assert(mainOff >= p, 'INV-PGWAL-4: the main data lies inside the record');
  const rmgr = rmgrName(rmid);
  const type = recordTypeName(fmt.major, rmid, info);
  const rec: PgWalRecord = {
    lsn,
    endLsn,
    prev: u64(b, off + 8),
    xid: u32(b, off + 4),
    rmid,
    info,
    rmgr,
    type,
    totalLength: totLen,
    recordLength: totLen - fpiLength,
    fpiLength,
    blocks,
    mainDataLength,
    origin,
    toplevelXid,
    data: null,
  };
  rec.data = decodeMainData(rec, b, mainOff, mainDataLength, fmt);
  return rec;
}

function readImageHeader(b: Uint8Array, p: number, fmt: PgWalFormat): PgWalBlockImage {
  const length = u16(b, p);
  const holeOffset = u16(b, p + 2);
  const info = b[p + 4]!;
  const compressed = (info & fmt.bkpImageCompressed) !== 0;
  return {
    length,
    holeOffset,
    // Uncompressed: the hole is whatever the image lacks of a page; compressed: stored after.
    holeLength: compressed ? 0 : BLCKSZ - length,
    info,
    apply: (info & fmt.bkpImageApply) !== 0,
    compressed,
  };
}

/** Stop at an invalid record: `what` is xlogreader.c's message up to its final "at %X/%X". */
function fail(lsn: Lsn, what: string): never {
  throw new PgWalInvalidRecord(what + formatLsn(lsn), lsn);
}

/** DecodeXLogRecord's four cross-checks of an image header, with its messages. */
function checkImage(img: PgWalBlockImage, fmt: PgWalFormat, lsn: Lsn): void {
  const hasHole = (img.info & BKPIMAGE_HAS_HOLE) !== 0;
  const compressedName = fmt.major <= 14 ? 'BKPIMAGE_IS_COMPRESSED' : 'BKPIMAGE_COMPRESSED';
  if (hasHole && (img.holeOffset === 0 || img.holeLength === 0 || img.length === BLCKSZ))
    fail(
      lsn,
      `BKPIMAGE_HAS_HOLE set, but hole offset ${img.holeOffset} length ${img.holeLength} block image length ${img.length} at `,
    );
  if (!hasHole && (img.holeOffset !== 0 || img.holeLength !== 0))
    fail(
      lsn,
      `BKPIMAGE_HAS_HOLE not set, but hole offset ${img.holeOffset} length ${img.holeLength} at `,
    );
  if (img.compressed && img.length === BLCKSZ)
    fail(lsn, `${compressedName} set, but block image length ${img.length} at `);
  if (!hasHole && !img.compressed && img.length !== BLCKSZ)
    fail(
      lsn,
      `neither BKPIMAGE_HAS_HOLE nor ${compressedName} set, but block image length is ${img.length} at `,
    );
}
