/**
 * The main data of the records the prediction needs, per major: Storage CREATE/TRUNCATE
 * (storage_xlog.h), Transaction COMMIT/ABORT(_PREPARED) as ParseCommitRecord/ParseAbortRecord
 * read them (xact.h, rmgrdesc/xactdesc.c), Database DROP (dbcommands_xlog.h), Heap INSERT/UPDATE
 * and Heap2 MULTI_INSERT (heapam_xlog.h), and the counts of Heap2's prune/vacuum records.
 *
 * Entry points: `decodeMainData`, `MainDataScratch`, `PgWalMainData`, `XACT_XINFO_*`.
 */
import { RM_DBASE_ID, RM_HEAP2_ID, RM_HEAP_ID, RM_SMGR_ID, RM_XACT_ID } from './rmgr-names.ts';
import type { PgWalFormat } from './format.ts';
import { PgWalInvalidRecord, u16, u32, u64, type RelFileNode } from './bytes.ts';
import { formatLsn } from '../wal/lsn.ts';

export const XACT_XINFO_HAS_DBINFO = 1 << 0;
export const XACT_XINFO_HAS_SUBXACTS = 1 << 1;
export const XACT_XINFO_HAS_RELFILENODES = 1 << 2;
export const XACT_XINFO_HAS_INVALS = 1 << 3;
export const XACT_XINFO_HAS_TWOPHASE = 1 << 4;
export const XACT_XINFO_HAS_ORIGIN = 1 << 5;
export const XACT_XINFO_HAS_AE_LOCKS = 1 << 6;
export const XACT_XINFO_HAS_GID = 1 << 7;
/** 15+. */
export const XACT_XINFO_HAS_DROPPED_STATS = 1 << 8;
const XLOG_XACT_HAS_INFO = 0x80;

/** A dropped-statistics item (15+): kind, database, object (objid_lo | objid_hi << 32 in 18). */
export interface DroppedStatsItem {
  kind: number;
  db: number;
  objid: number;
}

export interface XactEnd {
  kind: 'xact_commit' | 'xact_abort';
  /** xact_time: microseconds since 2000-01-01 00:00 UTC. */
  xactTime: number;
  xinfo: number;
  dbId: number;
  tsId: number;
  subxacts: number[];
  /** The relations whose files the commit/abort's redo drops (xl_xact_relfilenodes). */
  rels: RelFileNode[];
  droppedStats: DroppedStatsItem[];
  /** Number of shared invalidation messages (16 bytes each). */
  invalidations: number;
  /** The prepared transaction's xid for COMMIT_PREPARED/ABORT_PREPARED, else 0. */
  twophaseXid: number;
  gid: string | null;
  originLsn: number | null;
  originTimestamp: number | null;
}

/** What of the record the main data's decoding needs (the header, decoded first). */
interface RecordHead {
  lsn: number;
  rmid: number;
  info: number;
  rmgr: string;
  type: string;
}

export type PgWalMainData =
  | { kind: 'smgr_create'; node: RelFileNode; fork: number }
  | { kind: 'smgr_truncate'; node: RelFileNode; blkno: number; flags: number }
  | XactEnd
  | { kind: 'dbase_drop'; dbId: number; tablespaces: number[] }
  | { kind: 'heap_insert'; offnum: number; flags: number }
  | { kind: 'heap_update'; oldOffnum: number; newOffnum: number; flags: number }
  | { kind: 'heap_multi_insert'; ntuples: number; flags: number }
  /** XLOG RESTORE_POINT (pg_create_restore_point): rp_time (µs since 2000) and rp_name. */
  | { kind: 'xlog_restore_point'; time: number; name: string }
  /** 13 CLEAN, 14–16 PRUNE: line pointers redirected and made dead. */
  | { kind: 'heap_prune'; nredirected: number; ndead: number }
  /** 14–16 VACUUM: line pointers made unused. */
  | { kind: 'heap_vacuum'; nunused: number }
  /** 17+ PRUNE_*: xl_heap_prune's reason and flags (the counts are in the block data). */
  | { kind: 'heap_prune_17'; reason: number; flags: number };

const node = (b: Uint8Array, o: number): RelFileNode => ({
  spc: u32(b, o),
  db: u32(b, o + 4),
  rel: u32(b, o + 8),
});

/** A signed int64 (TimestampTz) as a number: exact within ±2^53 µs (±285 years). */
const i64 = (b: Uint8Array, o: number): number => u32(b, o) + (u32(b, o + 4) | 0) * 0x1_0000_0000;

type HeapInsert = Extract<PgWalMainData, { kind: 'heap_insert' }>;
type HeapUpdate = Extract<PgWalMainData, { kind: 'heap_update' }>;

/**
 * The main data of the records that come one per row (Heap INSERT, UPDATE), refilled instead of
 * allocated for a reader that hands each record out before decoding the next (`views()`): what
 * `decodeMainData` returns from it is valid until its next call with the same scratch.
 */
export class MainDataScratch {
  readonly heapInsert: HeapInsert = { kind: 'heap_insert', offnum: 0, flags: 0 };
  readonly heapUpdate: HeapUpdate = { kind: 'heap_update', oldOffnum: 0, newOffnum: 0, flags: 0 };
}

/**
 * The main data of `rec` at `b[off, off + len)`, or null for a record predict does not read.
 * Throws PgWalInvalidRecord when the main data is shorter than its structure says. With
 * `scratch`, a Heap INSERT's or UPDATE's is that scratch's object, refilled.
 */
export function decodeMainData(
  rec: RecordHead,
  b: Uint8Array,
  off: number,
  len: number,
  fmt: PgWalFormat,
  scratch: MainDataScratch | null = null,
): PgWalMainData | null {
  const op = rec.info & 0xf0;
  if (rec.rmid === 0 && op === 0x70) return restorePoint(rec, b, off, len);
  if (rec.rmid > RM_HEAP_ID || rec.rmid === 0 || rec.rmid === 3) return null;
  switch (rec.rmid) {
    case RM_SMGR_ID:
      if (op === 0x10) {
        needBytes(rec, len, 16, 'xl_smgr_create');
        return { kind: 'smgr_create', node: node(b, off), fork: u32(b, off + 12) };
      }
      if (op === 0x20) {
        needBytes(rec, len, 20, 'xl_smgr_truncate');
        return {
          kind: 'smgr_truncate',
          blkno: u32(b, off),
          node: node(b, off + 4),
          flags: u32(b, off + 16),
        };
      }
      return null;
    case RM_XACT_ID: {
      const xop = rec.info & 0x70;
      if (xop === 0x00 || xop === 0x30 || xop === 0x20 || xop === 0x40)
        return parseXactEnd(rec, b, off, len, fmt, xop === 0x00 || xop === 0x30);
      return null;
    }
    case RM_DBASE_ID:
      if (op === (fmt.major <= 14 ? 0x10 : 0x20)) {
        needBytes(rec, len, 8, 'xl_dbase_drop_rec');
        const n = u32(b, off + 4) | 0;
        needBytes(rec, len, 8 + 4 * Math.max(0, n), `xl_dbase_drop_rec with ${n} tablespaces`);
        const tablespaces: number[] = [];
        for (let i = 0; i < n; i++) tablespaces.push(u32(b, off + 8 + 4 * i));
        return { kind: 'dbase_drop', dbId: u32(b, off), tablespaces };
      }
      return null;
    case RM_HEAP_ID:
      return heapData(rec, op & 0x70, b, off, len, scratch);
    case RM_HEAP2_ID:
      return heap2Data(rec, op & 0x70, b, off, len, fmt);
    default:
      return null;
  }
}

/** xl_restore_point: TimestampTz rp_time, char rp_name[MAXFNAMELEN = 64] (NUL-terminated). */
function restorePoint(rec: RecordHead, b: Uint8Array, off: number, len: number): PgWalMainData {
  needBytes(rec, len, 8 + 64, 'xl_restore_point');
  const name = b.subarray(off + 8, off + 8 + 64);
  const nul = name.indexOf(0);
  return {
    kind: 'xlog_restore_point',
    time: i64(b, off),
    name: Buffer.from(name.subarray(0, nul < 0 ? 64 : nul)).toString('utf8'),
  };
}

function needBytes(rec: RecordHead, len: number, n: number, what: string): void {
  if (len < n)
    throw new PgWalInvalidRecord(
      `${rec.rmgr}/${rec.type} record at ${formatLsn(rec.lsn)}: main data of ${len} bytes is too short for ${what} (${n} bytes)`,
      rec.lsn,
    );
}

/** Heap INSERT and UPDATE (heap_xlog_insert, heap_xlog_update): the offsets predict reads. */
function heapData(
  rec: RecordHead,
  hop: number,
  b: Uint8Array,
  off: number,
  len: number,
  scratch: MainDataScratch | null,
): PgWalMainData | null {
  if (hop === 0x00) {
    needBytes(rec, len, 3, 'xl_heap_insert');
    const d: HeapInsert = scratch?.heapInsert ?? { kind: 'heap_insert', offnum: 0, flags: 0 };
    d.offnum = u16(b, off);
    d.flags = b[off + 2]!;
    return d;
  }
  if (hop === 0x20 || hop === 0x40) {
    needBytes(rec, len, 14, 'xl_heap_update');
    const d: HeapUpdate = scratch?.heapUpdate ?? {
      kind: 'heap_update',
      oldOffnum: 0,
      newOffnum: 0,
      flags: 0,
    };
    d.oldOffnum = u16(b, off + 4);
    d.flags = b[off + 7]!;
    d.newOffnum = u16(b, off + 12);
    return d;
  }
  return null;
}

function heap2Data(
  rec: RecordHead,
  op: number,
  b: Uint8Array,
  off: number,
  len: number,
  fmt: PgWalFormat,
): PgWalMainData | null {
  if (op === 0x50) {
    needBytes(rec, len, 4, 'xl_heap_multi_insert');
    return { kind: 'heap_multi_insert', flags: b[off]!, ntuples: u16(b, off + 2) };
  }
  if (fmt.major >= 17) {
    if (op >= 0x10 && op <= 0x30) {
      needBytes(rec, len, 2, 'xl_heap_prune');
      return { kind: 'heap_prune_17', reason: b[off]!, flags: b[off + 1]! };
    }
    return null;
  }
  if (op === 0x10) {
    needBytes(rec, len, 8, fmt.major === 13 ? 'xl_heap_clean' : 'xl_heap_prune');
    return { kind: 'heap_prune', nredirected: u16(b, off + 4), ndead: u16(b, off + 6) };
  }
  if (op === 0x20 && fmt.major >= 14) {
    needBytes(rec, len, 2, 'xl_heap_vacuum');
    return { kind: 'heap_vacuum', nunused: u16(b, off) };
  }
  return null;
}

/** A read position inside one record's main data: `take` refuses to pass its end. */
class MainDataCursor {
  constructor(
    private readonly rec: RecordHead,
    public p: number,
    readonly end: number,
  ) {}

  /** The offset of the next `n` bytes (`what` they are, for the message), and moves past them. */
  take(n: number, what: string): number {
    if (n < 0 || this.end - this.p < n)
      throw new PgWalInvalidRecord(
        `${this.rec.rmgr}/${this.rec.type} record at ${formatLsn(this.rec.lsn)}: main data ends inside ${what}`,
        this.rec.lsn,
      );
    const at = this.p;
    this.p += n;
    return at;
  }
}

/** ParseCommitRecord / ParseAbortRecord: the parts in xinfo's order (commit has invalidations). */
function parseXactEnd(
  rec: RecordHead,
  b: Uint8Array,
  off: number,
  len: number,
  fmt: PgWalFormat,
  commit: boolean,
): XactEnd {
  const c = new MainDataCursor(rec, off, off + len);
  const out: XactEnd = {
    kind: commit ? 'xact_commit' : 'xact_abort',
    xactTime: i64(b, c.take(8, 'xact_time')),
    xinfo: 0,
    dbId: 0,
    tsId: 0,
    subxacts: [],
    rels: [],
    droppedStats: [],
    invalidations: 0,
    twophaseXid: 0,
    gid: null,
    originLsn: null,
    originTimestamp: null,
  };
  if ((rec.info & XLOG_XACT_HAS_INFO) !== 0) out.xinfo = u32(b, c.take(4, 'xinfo'));
  const x = out.xinfo;
  if (x & XACT_XINFO_HAS_DBINFO) {
    const o = c.take(8, 'xl_xact_dbinfo');
    out.dbId = u32(b, o);
    out.tsId = u32(b, o + 4);
  }
  if (x & XACT_XINFO_HAS_SUBXACTS) {
    const n = u32(b, c.take(4, 'nsubxacts')) | 0;
    const o = c.take(4 * n, `${n} subxacts`);
    for (let i = 0; i < n; i++) out.subxacts.push(u32(b, o + 4 * i));
  }
  if (x & XACT_XINFO_HAS_RELFILENODES) {
    const n = u32(b, c.take(4, 'nrels')) | 0;
    const o = c.take(12 * n, `${n} relfilenodes`);
    for (let i = 0; i < n; i++) out.rels.push(node(b, o + 12 * i));
  }
  parseXactTail(b, c, fmt, commit, out);
  return out;
}

/** The parts after the dropped relations: dropped stats (15+), invalidations, 2PC, origin. */
function parseXactTail(
  b: Uint8Array,
  c: MainDataCursor,
  fmt: PgWalFormat,
  commit: boolean,
  out: XactEnd,
): void {
  const x = out.xinfo;
  if (x & XACT_XINFO_HAS_DROPPED_STATS && fmt.xactStatsItemBytes > 0) {
    const n = u32(b, c.take(4, 'nitems')) | 0;
    const size = fmt.xactStatsItemBytes;
    const o = c.take(size * n, `${n} dropped stats items`);
    for (let i = 0; i < n; i++) {
      const q = o + size * i;
      const objid = size === 16 ? u64(b, q + 8) : u32(b, q + 8);
      out.droppedStats.push({ kind: u32(b, q), db: u32(b, q + 4), objid });
    }
  }
  if (commit && x & XACT_XINFO_HAS_INVALS) {
    const n = u32(b, c.take(4, 'nmsgs')) | 0;
    c.take(16 * n, `${n} invalidation messages`);
    out.invalidations = n;
  }
  if (x & XACT_XINFO_HAS_TWOPHASE) {
    out.twophaseXid = u32(b, c.take(4, 'twophase xid'));
    if (x & XACT_XINFO_HAS_GID) {
      const z = b.indexOf(0, c.p);
      if (z < 0 || z >= c.end) c.take(c.end - c.p + 1, 'gid');
      out.gid = Buffer.from(b.buffer, b.byteOffset + c.p, z - c.p).toString('utf8');
      c.p = z + 1;
    }
  }
  if (x & XACT_XINFO_HAS_ORIGIN) {
    const o = c.take(16, 'xl_xact_origin');
    out.originLsn = u64(b, o);
    out.originTimestamp = i64(b, o + 8);
  }
}
