/**
 * PostgreSQL WAL bytes built in memory, for tests of the pg-wal/ reader without a server: records
 * encoded as XLogRecordAssemble lays them out (header, block headers, main data header, payloads,
 * CRC-32C over data then header) and placed on 8 kB pages with short and long page headers,
 * XLP_FIRST_IS_CONTRECORD and xlp_rem_len, across segments. And a segment source over them.
 */
import { crc32cFinish, crc32cUpdate, CRC32C_INIT } from '../../wal/crc32c.ts';
import { segmentFileName } from '../../wal/segment.ts';
import { XLOG_PAGE_MAGIC, type PgMajor } from '../../pg-wal/format.ts';
import type { WalSegmentFile, WalSegmentSource } from '../../pg-wal/wal-dir.ts';

export interface BuildBlock {
  id: number;
  fork?: number;
  node: { spc: number; db: number; rel: number };
  block: number;
  sameRel?: boolean;
  willInit?: boolean;
  data?: Uint8Array;
  /** An uncompressed image with a hole: `8192 - holeLength` bytes stored. */
  image?: { holeOffset: number; holeLength: number; apply: boolean };
}

export interface BuildRecord {
  rmid: number;
  info: number;
  xid?: number;
  blocks?: BuildBlock[];
  origin?: number;
  toplevelXid?: number;
  main: Uint8Array;
}

const BLCKSZ = 8192;

/** The record's bytes (xl_prev filled in), CRC computed. */
export function encodeRecord(r: BuildRecord, prev: number, major: PgMajor): Buffer {
  const hdr: number[] = [];
  const payload: Buffer[] = [];
  const u16 = (v: number) => hdr.push(v & 0xff, (v >>> 8) & 0xff);
  const u32 = (v: number) => hdr.push(v & 0xff, (v >>> 8) & 0xff, (v >>> 16) & 0xff, v >>> 24);
  for (const b of r.blocks ?? []) {
    const data = b.data ?? new Uint8Array(0);
    let flags = (b.fork ?? 0) | (data.length > 0 ? 0x20 : 0) | (b.willInit ? 0x40 : 0);
    if (b.image) flags |= 0x10;
    if (b.sameRel) flags |= 0x80;
    hdr.push(b.id, flags);
    u16(data.length);
    if (b.image) {
      const len = BLCKSZ - b.image.holeLength;
      const apply = b.image.apply ? (major <= 14 ? 0x04 : 0x02) : 0;
      u16(len);
      u16(b.image.holeOffset);
      hdr.push((b.image.holeLength > 0 ? 0x01 : 0) | apply);
      payload.push(Buffer.alloc(len, 0x5a));
    }
    if (!b.sameRel) [b.node.spc, b.node.db, b.node.rel].forEach(u32);
    u32(b.block);
    if (data.length > 0) payload.push(Buffer.from(data));
  }
  if (r.origin !== undefined) (hdr.push(253), u16(r.origin));
  if (r.toplevelXid !== undefined) (hdr.push(252), u32(r.toplevelXid));
  if (r.main.length > 0) {
    if (r.main.length < 256) hdr.push(255, r.main.length);
    else (hdr.push(254), u32(r.main.length));
  }
  const body = Buffer.concat([Buffer.from(hdr), ...payload, Buffer.from(r.main)]);
  const rec = Buffer.alloc(24 + body.length);
  rec.writeUInt32LE(rec.length, 0);
  rec.writeUInt32LE(r.xid ?? 0, 4);
  rec.writeUInt32LE(prev % 0x1_0000_0000, 8);
  rec.writeUInt32LE(Math.floor(prev / 0x1_0000_0000), 12);
  rec[16] = r.info;
  rec[17] = r.rmid;
  body.copy(rec, 24);
  let c = crc32cUpdate(CRC32C_INIT, rec, 24, rec.length);
  c = crc32cUpdate(c, rec, 0, 20);
  rec.writeUInt32LE(crc32cFinish(c), 20);
  return rec;
}

export interface BuiltWal {
  segments: Map<number, Buffer>;
  segmentSize: number;
  /**
   * Start LSN, total length and end (next record) LSN of each record, and the LSN ranges its own
   * bytes occupy (page headers and alignment padding excluded).
   */
  records: Array<{
    lsn: number;
    totalLength: number;
    endLsn: number;
    spans: Array<[number, number]>;
  }>;
  /** Where the next record would go: the end of valid WAL. */
  end: number;
}

/**
 * Lay `records` out from `startLsn` (a page start, or after the previous record) on pages of
 * segments of `segmentSize` bytes. Pages from the first to the last written exist; the rest of
 * the last segment is zeros, as a preallocated segment is.
 */
export function buildWal(
  records: BuildRecord[],
  opts: { major: PgMajor; segmentSize: number; startSegno: number; tli?: number },
): BuiltWal {
  const { segmentSize } = opts;
  const segments = new Map<number, Buffer>();
  const tli = opts.tli ?? 1;
  const magic = XLOG_PAGE_MAGIC[opts.major];
  const seg = (lsn: number) => {
    const no = Math.floor(lsn / segmentSize);
    let s = segments.get(no);
    if (s === undefined) segments.set(no, (s = Buffer.alloc(segmentSize)));
    return { s, off: lsn % segmentSize };
  };
  /** Write the page header at page `lsn`; returns its size. */
  const pageHeader = (lsn: number, remLen: number): number => {
    const { s, off } = seg(lsn);
    const long = off === 0;
    s.writeUInt16LE(magic, off);
    s.writeUInt16LE((remLen > 0 ? 0x01 : 0) | (long ? 0x02 : 0), off + 2);
    s.writeUInt32LE(tli, off + 4);
    s.writeUInt32LE(lsn % 0x1_0000_0000, off + 8);
    s.writeUInt32LE(Math.floor(lsn / 0x1_0000_0000), off + 12);
    s.writeUInt32LE(remLen, off + 16);
    if (!long) return 24;
    s.writeBigUInt64LE(7000000000000000001n, off + 24);
    s.writeUInt32LE(segmentSize, off + 32);
    s.writeUInt32LE(BLCKSZ, off + 36);
    return 40;
  };
  let pos = opts.startSegno * segmentSize;
  pos += pageHeader(pos, 0);
  let prev = 0;
  const out: BuiltWal['records'] = [];
  for (const r of records) {
    const bytes = encodeRecord(r, prev, opts.major);
    const lsn = pos;
    const spans: Array<[number, number]> = [];
    let done = 0;
    while (done < bytes.length) {
      if (pos % BLCKSZ === 0) pos += pageHeader(pos, bytes.length - done);
      const room = BLCKSZ - (pos % BLCKSZ);
      const n = Math.min(room, bytes.length - done);
      const { s, off } = seg(pos);
      bytes.copy(s, off, done, done + n);
      spans.push([pos, pos + n]);
      done += n;
      pos += n;
    }
    pos += (8 - (pos % 8)) % 8;
    // EndRecPtr: the aligned end, before the next page's header (as xlogreader.c reports it).
    out.push({ lsn, totalLength: bytes.length, endLsn: pos, spans });
    if (pos % BLCKSZ === 0) pos += pageHeader(pos, 0);
    prev = lsn;
  }
  return { segments, segmentSize, records: out, end: pos };
}

/** A segment source over in-memory segments (a missing key is a missing file). */
export class MemorySegments implements WalSegmentSource {
  constructor(
    readonly segments: Map<number, Uint8Array>,
    readonly segmentSize: number,
    private readonly tli = 1,
  ) {}

  expectedName(segno: number): string {
    return segmentFileName(this.tli, segno, this.segmentSize);
  }

  async open(segno: number): Promise<WalSegmentFile | null> {
    const s = this.segments.get(segno);
    if (s === undefined) return null;
    const name = this.expectedName(segno);
    // A short segment is read short: the reader must refuse it (WalDirectory checks sizes first).
    return {
      name,
      tli: this.tli,
      read: async (buf, offset, length, position) => {
        const n = Math.max(0, Math.min(length, s.length - position));
        buf.set(s.subarray(position, position + n), offset);
        return n;
      },
      close: async () => {},
    };
  }
}

/** Recompute a record's xl_crc in place (after editing its bytes, e.g. its prev-link). */
export function encodeCrc(rec: Buffer): void {
  let c = crc32cUpdate(CRC32C_INIT, rec, 24, rec.readUInt32LE(0));
  c = crc32cUpdate(c, rec, 0, 20);
  rec.writeUInt32LE(crc32cFinish(c), 20);
}

/**
 * A Heap INSERT (rmid 10, info 0): xl_heap_insert's offnum and flags as main data, block 0 with
 * `len` bytes of tuple data filled with `fill`.
 */
export function heapInsert(p: {
  node: BuildBlock['node'];
  block: number;
  len: number;
  offnum: number;
  xid: number;
  fill: number;
}): BuildRecord {
  const main = Buffer.alloc(3);
  main.writeUInt16LE(p.offnum, 0);
  return {
    rmid: 10,
    info: 0,
    xid: p.xid,
    blocks: [{ id: 0, node: p.node, block: p.block, data: Buffer.alloc(p.len, p.fill) }],
    main,
  };
}

/**
 * `count` heap inserts over several segments: offsets 1..200, tuple data of 20..169 bytes with
 * every 997th 9000 bytes (so some records span pages), `perBlock` records a heap block. `xid`,
 * `rel` and `fill` give each record's transaction, relfilenode and data byte from its index.
 */
export function heapInsertRun(
  count: number,
  p: {
    node: BuildBlock['node'];
    perBlock: number;
    xid: (i: number) => number;
    rel: (i: number) => number;
    fill: (i: number) => number;
  },
): BuildRecord[] {
  return Array.from({ length: count }, (_, i) =>
    heapInsert({
      node: { ...p.node, rel: p.rel(i) },
      block: Math.floor(i / p.perBlock),
      len: i % 997 === 0 ? 9000 : 20 + (i % 150),
      offnum: (i % 200) + 1,
      xid: p.xid(i),
      fill: p.fill(i),
    }),
  );
}
