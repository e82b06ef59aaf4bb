/**
 * PostgreSQL's WAL format constants, 13 to 18: page magic per major, page and record header
 * layouts and flag bits (xlog_internal.h, xlogrecord.h), and what changed between majors.
 *
 * Entry points: `PG_MAJORS`, `majorOfMagic`, `formatOf`, `PgWalFormat`, the `XLP_*`, `BKP*` and
 * `XLR_*` constants.
 */

/** The majors this reader knows, oldest first. */
export const PG_MAJORS = [13, 14, 15, 16, 17, 18] as const;
export type PgMajor = (typeof PG_MAJORS)[number];

/** XLOG_PAGE_MAGIC of each major (xlog_internal.h of its stable branch). */
export const XLOG_PAGE_MAGIC: Readonly<Record<PgMajor, number>> = {
  13: 0xd106,
  14: 0xd10d,
  15: 0xd110,
  16: 0xd113,
  17: 0xd116,
  18: 0xd118,
};

const MAJOR_BY_MAGIC = new Map<number, PgMajor>(
  PG_MAJORS.map((m) => [XLOG_PAGE_MAGIC[m], m] as const),
);

/** The major whose WAL carries `magic`, or null for a magic no known major writes. */
export function majorOfMagic(magic: number): PgMajor | null {
  return MAJOR_BY_MAGIC.get(magic) ?? null;
}

/** The magics, as a message lists them: "13 0xD106, 14 0xD10D, …". */
export const KNOWN_MAGICS = PG_MAJORS.map(
  (m) => `${m} 0x${XLOG_PAGE_MAGIC[m].toString(16).toUpperCase()}`,
).join(', ');

/** XLOG_BLCKSZ: every build this reader meets uses 8 kB WAL pages (checked in the long header). */
export const XLOG_BLCKSZ = 8192;
/** BLCKSZ: the data page size a full-page image restores. */
export const BLCKSZ = 8192;

// Page header (XLogPageHeaderData / XLogLongPageHeaderData).
export const SIZE_OF_SHORT_PHD = 24;
export const SIZE_OF_LONG_PHD = 40;
export const XLP_FIRST_IS_CONTRECORD = 0x0001;
export const XLP_LONG_HEADER = 0x0002;
export const XLP_BKP_REMOVABLE = 0x0004;
/** 14+, backpatched to 13.5: the contrecord that should follow was abandoned (overwritten). */
export const XLP_FIRST_IS_OVERWRITE_CONTRECORD = 0x0008;
export const XLP_ALL_FLAGS = 0x000f;

// Record header (XLogRecord): 24 bytes, identical 13–18.
export const SIZE_OF_XLOG_RECORD = 24;
/** offsetof(XLogRecord, xl_crc): the header bytes the CRC covers after the data. */
export const XLOG_RECORD_CRC_OFFSET = 20;
export const XLR_INFO_MASK = 0x0f;

// Block references (XLogRecordBlockHeader and what follows it).
export const XLR_MAX_BLOCK_ID = 32;
export const XLR_BLOCK_ID_DATA_SHORT = 255;
export const XLR_BLOCK_ID_DATA_LONG = 254;
export const XLR_BLOCK_ID_ORIGIN = 253;
/** 14+. */
export const XLR_BLOCK_ID_TOPLEVEL_XID = 252;
export const BKPBLOCK_FORK_MASK = 0x0f;
export const BKPBLOCK_HAS_IMAGE = 0x10;
export const BKPBLOCK_HAS_DATA = 0x20;
export const BKPBLOCK_WILL_INIT = 0x40;
export const BKPBLOCK_SAME_REL = 0x80;
export const BKPIMAGE_HAS_HOLE = 0x01;

/** What differs between the majors in the bytes this reader decodes. */
export interface PgWalFormat {
  major: PgMajor;
  magic: number;
  /** BKPIMAGE_APPLY: 0x04 in 13/14, 0x02 from 15. */
  bkpImageApply: number;
  /** Any compression bit: 13/14 BKPIMAGE_IS_COMPRESSED 0x02; 15+ PGLZ 0x04 | LZ4 0x08 | ZSTD 0x10. */
  bkpImageCompressed: number;
  /** XLR_BLOCK_ID_TOPLEVEL_XID exists (14+). */
  hasToplevelXid: boolean;
  /** Custom resource managers 128–255 are valid ids (15+); before, ids above 21 are invalid. */
  hasCustomRmgrs: boolean;
  /** sizeof(xl_xact_stats_item) when XACT_XINFO_HAS_DROPPED_STATS can be set (15+), else 0. */
  xactStatsItemBytes: number;
  /** "invalid record length at X: wanted N, got M" (13–15) or "expected at least N" (16+). */
  lengthMessageWanted: boolean;
}

export function formatOf(major: PgMajor): PgWalFormat {
  return {
    major,
    magic: XLOG_PAGE_MAGIC[major],
    bkpImageApply: major <= 14 ? 0x04 : 0x02,
    bkpImageCompressed: major <= 14 ? 0x02 : 0x04 | 0x08 | 0x10,
    hasToplevelXid: major >= 14,
    hasCustomRmgrs: major >= 15,
    xactStatsItemBytes: major <= 14 ? 0 : major <= 17 ? 12 : 16,
    lengthMessageWanted: major <= 15,
  };
}
