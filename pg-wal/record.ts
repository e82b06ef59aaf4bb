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
 * DecodeXLogRecord's running state over one record's header fragments. One object for the module,
 * reset per record: the hot path allocates only what it hands out (the record, its blocks).
 */
const frag = {
  p: 0,
  end: 0,
  datatotal: 0,
  mainDataLength: 0,
  origin: 0,
  toplevelXid: 0,
  fpiLength: 0,
  maxBlockId: -1,
  lastNode: null as RelFileNode | null,
};

/**
 * The RelFileNode of the latest block reference that named one: the next record naming the same
 * relation shares the object (most records touch the relation the one before did). Values only;
 * nobody mutates a RelFileNode.
 */
let nodeCache: RelFileNode = { spc: -1, db: -1, rel: -1 };

/** A record without block references shares this (frozen: nobody pushes onto a record's blocks). */
const NO_BLOCKS: PgWalBlockRef[] = Object.freeze([]) as unknown as PgWalBlockRef[];

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
  const blocks = readFragments(b, off, totLen, lsn, fmt);
  const mainDataLength = frag.mainDataLength;
  // The payloads follow in block order (image, then data), then the main data: it is last.
  const mainOff = off + totLen - mainDataLength;
  assert(mainOff >= frag.p, 'INV-PGWAL-4: the main data lies inside the record');
  const rec: PgWalRecord = {
    lsn,
    endLsn,
    prev: u64(b, off + 8),
    xid: u32(b, off + 4),
    rmid,
    info,
    rmgr: rmgrName(rmid),
    type: recordTypeName(fmt.major, rmid, info),
    totalLength: totLen,
    recordLength: totLen - frag.fpiLength,
    fpiLength: frag.fpiLength,
    blocks,
    mainDataLength,
    origin: frag.origin,
    toplevelXid: frag.toplevelXid,
    data: null,
  };
  rec.data = decodeMainData(rec, b, mainOff, mainDataLength, fmt);
  return rec;
}

/**
 * The header fragments after the XLogRecord header, in order: block headers, origin, top-level
 * xid, and the main data's length (always last). Leaves the totals in `frag`.
 */
function readFragments(
  b: Uint8Array,
  off: number,
  totLen: number,
  lsn: Lsn,
  fmt: PgWalFormat,
): PgWalBlockRef[] {
  const f = frag;
  f.p = off + SIZE_OF_XLOG_RECORD;
  f.end = off + totLen;
  f.datatotal = f.mainDataLength = f.origin = f.toplevelXid = f.fpiLength = 0;
  f.maxBlockId = -1;
  f.lastNode = null;
  let blocks = NO_BLOCKS;
  // Each iteration consumes one header fragment; `end - p` shrinks, so the loop is bounded.
  while (f.end - f.p > f.datatotal) {
    const id = b[f.p++]!;
    if (id === XLR_BLOCK_ID_DATA_SHORT) {
      need(1, lsn);
      f.mainDataLength = b[f.p++]!;
      f.datatotal += f.mainDataLength;
      break; // the main data header is always last
    } else if (id === XLR_BLOCK_ID_DATA_LONG) {
      need(4, lsn);
      f.mainDataLength = u32(b, f.p);
      f.p += 4;
      f.datatotal += f.mainDataLength;
      break;
    } else if (id === XLR_BLOCK_ID_ORIGIN) {
      need(2, lsn);
      f.origin = u16(b, f.p);
      f.p += 2;
    } else if (id === XLR_BLOCK_ID_TOPLEVEL_XID && fmt.hasToplevelXid) {
      need(4, lsn);
      f.toplevelXid = u32(b, f.p);
      f.p += 4;
    } else if (id <= XLR_MAX_BLOCK_ID) {
      if (blocks === NO_BLOCKS) blocks = [];
      blocks.push(readBlockRef(b, id, lsn, fmt));
    } else {
      fail(lsn, `invalid block_id ${id} at `);
    }
  }
  if (f.end - f.p !== f.datatotal) fail(lsn, 'record with invalid length at ');
  return blocks;
}

/** At least `n` more bytes of header fragments, else xlogreader.c's "record with invalid length". */
function need(n: number, lsn: Lsn): void {
  if (frag.end - frag.p < n) fail(lsn, 'record with invalid length at ');
}

/** One block header (block id 0–32): flags, data length, image header, RelFileNode, block. */
function readBlockRef(b: Uint8Array, id: number, lsn: Lsn, fmt: PgWalFormat): PgWalBlockRef {
  const f = frag;
  if (id <= f.maxBlockId) fail(lsn, `out-of-order block_id ${id} at `);
  f.maxBlockId = id;
  need(3, lsn);
  const flags = b[f.p]!;
  const dataLength = u16(b, f.p + 1);
  f.p += 3;
  const hasData = (flags & BKPBLOCK_HAS_DATA) !== 0;
  if (hasData && dataLength === 0) fail(lsn, `BKPBLOCK_HAS_DATA set, but no data included at `);
  if (!hasData && dataLength !== 0)
    fail(lsn, `BKPBLOCK_HAS_DATA not set, but data length is ${dataLength} at `);
  f.datatotal += dataLength;
  let image: PgWalBlockImage | null = null;
  if ((flags & BKPBLOCK_HAS_IMAGE) !== 0) {
    need(5, lsn);
    image = readImageHeader(b, f.p, fmt);
    f.p += 5;
    if (image.compressed && (image.info & BKPIMAGE_HAS_HOLE) !== 0) {
      need(2, lsn);
      image.holeLength = u16(b, f.p);
      f.p += 2;
    }
    checkImage(image, fmt, lsn);
    f.datatotal += image.length;
    f.fpiLength += image.length;
  }
  let node: RelFileNode;
  if ((flags & BKPBLOCK_SAME_REL) === 0) {
    need(12, lsn);
    node = nodeAt(b, f.p);
    f.p += 12;
    f.lastNode = node;
  } else {
    if (f.lastNode === null) fail(lsn, `BKPBLOCK_SAME_REL set but no previous rel at `);
    node = f.lastNode;
  }
  need(4, lsn);
  const block = u32(b, f.p);
  f.p += 4;
  const fork = flags & BKPBLOCK_FORK_MASK;
  const willInit = (flags & BKPBLOCK_WILL_INIT) !== 0;
  return { id, node, fork, block, flags, willInit, dataLength, image };
}

/** The 12-byte RelFileNode at `p`, the cached object when it names the same relation. */
function nodeAt(b: Uint8Array, p: number): RelFileNode {
  const spc = u32(b, p);
  const db = u32(b, p + 4);
  const rel = u32(b, p + 8);
  const c = nodeCache;
  if (c.rel === rel && c.db === db && c.spc === spc) return c;
  nodeCache = { spc, db, rel };
  return nodeCache;
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
