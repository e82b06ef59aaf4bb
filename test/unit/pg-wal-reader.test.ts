/**
 * The pg-wal/ reader on WAL built in memory (test/helpers/pg-wal-build.ts), one behaviour per
 * test: records inside a page, across pages and segments, a header split across pages; the end of
 * valid WAL and every way it is reached, in PostgreSQL's words; the range's end; the major from
 * the page magic and what differs between majors (names, image bits, block 252, stats items);
 * an overwritten contrecord; a start inside continuation data. Real WAL: the integration test.
 */
import { describe, expect, it } from 'vitest';
import { WalsimError } from '../../common/errors.ts';
import { PG_MAJORS, XLOG_PAGE_MAGIC, type PgMajor } from '../../pg-wal/format.ts';
import { PgWalReader, type PgWalReadOptions } from '../../pg-wal/reader.ts';
import type { PgWalRecord } from '../../pg-wal/record.ts';
import { recordTypeName } from '../../pg-wal/rmgr-names.ts';
import { formatLsn } from '../../wal/lsn.ts';
import {
  buildWal,
  encodeCrc,
  heapInsert as buildHeapInsert,
  MemorySegments,
  type BuildRecord,
} from '../helpers/pg-wal-build.ts';

const SEG = 1 << 20;
const REL = { spc: 1663, db: 5, rel: 16384 };

async function readAll(
  src: MemorySegments,
  opts: PgWalReadOptions,
): Promise<{ recs: PgWalRecord[]; reader: PgWalReader }> {
  const reader = new PgWalReader(src, opts);
  const recs: PgWalRecord[] = [];
  for await (const r of reader.records()) recs.push(r);
  return { recs, reader };
}

/** A Heap INSERT of `len` bytes of tuple data on one block. */
function heapInsert(len: number, offnum = 1, block = 0): BuildRecord {
  return buildHeapInsert({ node: REL, block, len, offnum, xid: 740, fill: 1 });
}

/** A Transaction COMMIT with xinfo: the parts given, in ParseCommitRecord's order. */
function commit(
  p: {
    rels?: (typeof REL)[];
    statsItems?: number;
    statsItemBytes?: number;
    invals?: number;
    twophase?: number;
    gid?: string;
    subxacts?: number[];
  },
  info = 0x80,
): BuildRecord {
  const parts: Buffer[] = [Buffer.alloc(8)];
  let xinfo = 0;
  const i32 = (v: number) => {
    const b = Buffer.alloc(4);
    b.writeUInt32LE(v);
    return b;
  };
  if (p.subxacts) {
    xinfo |= 2;
    parts.push(i32(p.subxacts.length), ...p.subxacts.map(i32));
  }
  if (p.rels) {
    xinfo |= 4;
    parts.push(i32(p.rels.length), ...p.rels.flatMap((r) => [i32(r.spc), i32(r.db), i32(r.rel)]));
  }
  if (p.statsItems !== undefined) {
    xinfo |= 1 << 8;
    parts.push(i32(p.statsItems), Buffer.alloc(p.statsItems * (p.statsItemBytes ?? 12), 7));
  }
  if (p.invals !== undefined) {
    xinfo |= 8;
    parts.push(i32(p.invals), Buffer.alloc(16 * p.invals, 3));
  }
  if (p.twophase !== undefined) {
    xinfo |= 16;
    parts.push(i32(p.twophase));
    if (p.gid !== undefined) {
      xinfo |= 128;
      parts.push(Buffer.from(p.gid + '\0'));
    }
  }
  const main = Buffer.concat([parts[0]!, i32(xinfo), ...parts.slice(1)]);
  return { rmid: 1, info, xid: 741, main };
}

const src = (w: ReturnType<typeof buildWal>) => new MemorySegments(w.segments, w.segmentSize);

describe('pg-wal reader: records, pages and segments', () => {
  it('reads records inside a page, across pages and across a segment boundary, each at its LSN', async () => {
    // 40 records of ~3 kB: some end inside a page, some cross pages; the run crosses into segment 2.
    const records = Array.from({ length: 40 }, (_, i) => heapInsert(3000 + i * 7, i + 1));
    const w = buildWal(records, { major: 15, segmentSize: SEG, startSegno: 1 });
    // Start near the end of segment 1 so the run crosses into segment 2.
    const late = buildWal([...Array.from({ length: 340 }, () => heapInsert(3000)), ...records], {
      major: 15,
      segmentSize: SEG,
      startSegno: 1,
    });
    expect(late.segments.size).toBe(2);
    for (const built of [w, late]) {
      const { recs, reader } = await readAll(src(built), { startLsn: built.records[0]!.lsn });
      expect(recs.map((r) => [r.lsn, r.totalLength, r.endLsn])).toEqual(
        built.records.map((r) => [r.lsn, r.totalLength, r.endLsn]),
      );
      expect(recs.some((r) => Math.floor(r.lsn / 8192) !== Math.floor((r.endLsn - 1) / 8192))).toBe(
        true,
      );
      expect(reader.end).toEqual({
        reason: 'invalid_record',
        lsn: built.end,
        message: `invalid record length at ${formatLsn(built.end)}: wanted 24, got 0`,
      });
    }
    const crossing = late.records.find(
      (r) => Math.floor(r.lsn / SEG) !== Math.floor(r.endLsn / SEG),
    );
    expect(crossing).toBeDefined();
    const r0 = (await readAll(src(w), { startLsn: w.records[0]!.lsn })).recs[0]!;
    expect(r0).toMatchObject({
      rmgr: 'Heap',
      type: 'INSERT',
      xid: 740,
      prev: 0,
      blocks: [{ id: 0, node: REL, fork: 0, block: 0, dataLength: 3000, image: null }],
      data: { kind: 'heap_insert', offnum: 1, flags: 0 },
    });
  });

  it('reads a record whose 24-byte header is split across two pages', async () => {
    // Fill so that a record starts 8 bytes before a page end: its header continues on the next page.
    const first = heapInsert(8192 - 40 - 24 - 20 - 2 - 3 - 8 - 4);
    const w = buildWal([first, heapInsert(100), heapInsert(100)], {
      major: 15,
      segmentSize: SEG,
      startSegno: 1,
    });
    const split = w.records.find((r) => 8192 - (r.lsn % 8192) < 24);
    expect(split).toBeDefined();
    const { recs } = await readAll(src(w), { startLsn: w.records[0]!.lsn });
    expect(recs.map((r) => r.lsn)).toEqual(w.records.map((r) => r.lsn));
  });

  it('stops at a flipped bit with "incorrect resource manager data checksum", keeping what came before', async () => {
    const w = buildWal(
      Array.from({ length: 10 }, (_, i) => heapInsert(500, i + 1)),
      { major: 15, segmentSize: SEG, startSegno: 1 },
    );
    const bad = w.records[6]!;
    w.segments.get(1)![(bad.lsn % SEG) + 30]! ^= 0x10;
    const { recs, reader } = await readAll(src(w), { startLsn: w.records[0]!.lsn });
    expect(recs.length).toBe(6);
    expect(reader.end).toEqual({
      reason: 'invalid_record',
      lsn: bad.lsn,
      message: `incorrect resource manager data checksum in record at ${formatLsn(bad.lsn)}`,
    });
  });

  it('stops at a wrong prev-link, a bad rmgr id, a page of another address, and says which', async () => {
    const build = () =>
      buildWal(
        Array.from({ length: 30 }, () => heapInsert(1000)),
        { major: 16, segmentSize: SEG, startSegno: 1 },
      );
    const w1 = build();
    const r5 = w1.records[5]!;
    w1.segments.get(1)!.writeUInt32LE(8, (r5.lsn % SEG) + 8); // xl_prev
    expect((await readAll(src(w1), { startLsn: w1.records[0]!.lsn })).reader.end?.message).toBe(
      `record with incorrect prev-link 0/8 at ${formatLsn(r5.lsn)}`,
    );
    const w2 = build();
    w2.segments.get(1)![(r5.lsn % SEG) + 17] = 60; // xl_rmid between built-in and custom ids
    expect((await readAll(src(w2), { startLsn: w2.records[0]!.lsn })).reader.end?.message).toBe(
      `invalid resource manager ID 60 at ${formatLsn(r5.lsn)}`,
    );
    const w3 = build();
    const page = SEG + 2 * 8192;
    w3.segments.get(1)!.writeUInt32LE(0xdead0000, 2 * 8192 + 8); // xlp_pageaddr
    const end3 = (await readAll(src(w3), { startLsn: w3.records[0]!.lsn })).reader.end!;
    expect(end3.message).toBe(
      `unexpected pageaddr 0/DEAD0000 in log segment 000000010000000000000001, offset ${page - SEG}`,
    );
    expect(end3.lsn).toBe(page);
  });

  it('16+ words the zero length as "expected at least", 13–15 as "wanted"', async () => {
    for (const major of [13, 16] as const) {
      const w = buildWal([heapInsert(10)], { major, segmentSize: SEG, startSegno: 1 });
      const { reader } = await readAll(src(w), { startLsn: w.records[0]!.lsn });
      expect(reader.end?.message).toBe(
        major === 13
          ? `invalid record length at ${formatLsn(w.end)}: wanted 24, got 0`
          : `invalid record length at ${formatLsn(w.end)}: expected at least 24, got 0`,
      );
    }
  });

  it('stops at the range end: records that end within it, not one that crosses it', async () => {
    const w = buildWal(
      Array.from({ length: 20 }, () => heapInsert(2000)),
      { major: 15, segmentSize: SEG, startSegno: 1 },
    );
    const r = w.records[8]!;
    for (const [endLsn, n] of [
      [r.lsn + r.totalLength, 9],
      [r.lsn + r.totalLength - 1, 8],
      [r.lsn, 8],
    ] as const) {
      const { recs, reader } = await readAll(src(w), { startLsn: w.records[0]!.lsn, endLsn });
      expect(recs.length).toBe(n);
      expect(reader.end?.reason).toBe('end_lsn');
    }
  });

  it('a range ending at a page boundary inside a record does not read the page after it', async () => {
    // A standby's received LSN can be a page start inside a record (the walreceiver writes what
    // the primary flushed: whole pages); what follows in the file is not WAL yet (zeros, or a
    // recycled segment's old pages). The range ends there: no page at or past it is read.
    const w = buildWal(
      Array.from({ length: 20 }, () => heapInsert(3000)),
      { major: 15, segmentSize: SEG, startSegno: 1 },
    );
    const crossing = w.records.findIndex((r) => r.spans.length > 1 && r.spans[1]![0] % 8192 !== 0);
    const r = w.records[crossing]!;
    const boundary = r.spans[1]![0] - (r.spans[1]![0] % 8192);
    w.segments.get(1)!.fill(0, boundary - SEG);
    for (const opts of [{}, { mode: 'views' }]) {
      const reader = new PgWalReader(src(w), { startLsn: w.records[0]!.lsn, endLsn: boundary });
      let n = 0;
      if ('mode' in opts) for await (const _ of reader.views(() => n++, 64));
      else for await (const _ of reader.records()) n++;
      expect(n).toBe(crossing);
      expect(reader.end?.reason).toBe('end_lsn');
    }
  });

  it('a missing next segment ends reading with its file name', async () => {
    const w = buildWal(
      Array.from({ length: 400 }, () => heapInsert(3000)),
      { major: 15, segmentSize: SEG, startSegno: 1 },
    );
    w.segments.delete(2);
    const { recs, reader } = await readAll(src(w), { startLsn: w.records[0]!.lsn });
    expect(recs.every((r) => r.endLsn <= 2 * SEG)).toBe(true);
    expect(reader.end?.reason).toBe('missing_segment');
    expect(reader.end?.message).toMatch(/could not find file "000000010000000000000002"/);
  });

  it('a segment shorter than the segment size is refused, naming the file', async () => {
    const w = buildWal([heapInsert(10)], { major: 15, segmentSize: SEG, startSegno: 1 });
    w.segments.set(1, w.segments.get(1)!.subarray(0, 5000));
    await expect(readAll(src(w), { startLsn: w.records[0]!.lsn })).rejects.toThrow(
      /WAL file 000000010000000000000001: could read only \d+ of \d+ bytes/,
    );
  });
});

describe('pg-wal reader: majors', () => {
  it('takes the major from the first page magic, refuses an unknown magic and a mismatch', async () => {
    for (const major of PG_MAJORS) {
      const w = buildWal([heapInsert(10)], { major, segmentSize: SEG, startSegno: 1 });
      const { reader } = await readAll(src(w), { startLsn: w.records[0]!.lsn });
      expect(reader.major).toBe(major);
    }
    const w = buildWal([heapInsert(10)], { major: 15, segmentSize: SEG, startSegno: 1 });
    w.segments.get(1)!.writeUInt16LE(0xd120, 0);
    const err = await readAll(src(w), { startLsn: w.records[0]!.lsn }).catch((e: unknown) => e);
    expect(err).toBeInstanceOf(WalsimError);
    expect((err as Error).message).toBe(
      'WAL file 000000010000000000000001 at 0/100000: page magic D120 is no PostgreSQL major this reader knows (13 0xD106, 14 0xD10D, 15 0xD110, 16 0xD113, 17 0xD116, 18 0xD118)',
    );
    w.segments.get(1)!.writeUInt16LE(XLOG_PAGE_MAGIC[17], 0);
    await expect(readAll(src(w), { startLsn: w.records[0]!.lsn, major: 15 })).rejects.toThrow(
      'was written by PostgreSQL 17 (page magic D116), not 15',
    );
  });

  it('names record types per major as pg_waldump does', () => {
    const names = (rmid: number, info: number) =>
      PG_MAJORS.map((m) => recordTypeName(m, rmid, info));
    expect(names(9, 0x10)).toEqual([
      'CLEAN',
      'PRUNE',
      'PRUNE',
      'PRUNE',
      'PRUNE_ON_ACCESS',
      'PRUNE_ON_ACCESS',
    ]);
    expect(names(9, 0x20)).toEqual([
      'FREEZE_PAGE',
      'VACUUM',
      'VACUUM',
      'VACUUM',
      'PRUNE_VACUUM_SCAN',
      'PRUNE_VACUUM_SCAN',
    ]);
    expect(names(4, 0x10)).toEqual([
      'DROP',
      'DROP',
      'CREATE_WAL_LOG',
      'CREATE_WAL_LOG',
      'CREATE_WAL_LOG',
      'CREATE_WAL_LOG',
    ]);
    expect(names(4, 0x20).slice(2)).toEqual(['DROP', 'DROP', 'DROP', 'DROP']);
    expect(names(1, 0x60)).toEqual(['UNKNOWN (60)', ...Array(5).fill('INVALIDATIONS')]);
    expect(names(1, 0x80)).toEqual(Array(6).fill('COMMIT'));
    expect(names(0, 0xe0)).toEqual([
      ...Array(4).fill('UNKNOWN (e0)'),
      'CHECKPOINT_REDO',
      'CHECKPOINT_REDO',
    ]);
    expect(names(10, 0x80)[0]).toBe('INSERT+INIT');
    expect(names(9, 0xd0)[0]).toBe('MULTI_INSERT+INIT');
  });

  it('decodes a Database DROP at 0x10 in 13/14 and 0x20 from 15', async () => {
    const main = Buffer.alloc(12);
    main.writeUInt32LE(16400, 0);
    main.writeUInt32LE(1, 4);
    main.writeUInt32LE(1663, 8);
    for (const [major, info] of [
      [13, 0x10],
      [14, 0x10],
      [15, 0x20],
      [18, 0x20],
    ] as const) {
      const w = buildWal([{ rmid: 4, info, main }], { major, segmentSize: SEG, startSegno: 1 });
      const { recs } = await readAll(src(w), { startLsn: w.records[0]!.lsn });
      expect(recs[0]).toMatchObject({
        rmgr: 'Database',
        type: 'DROP',
        data: { kind: 'dbase_drop', dbId: 16400, tablespaces: [1663] },
      });
    }
  });

  it('reads a commit: dropped relations, 15–17 stats items of 12 bytes, 18 of 16, then what follows', async () => {
    const rels = [REL, { ...REL, rel: 16390 }, { spc: 1664, db: 0, rel: 1262 }];
    const cases: Array<[PgMajor, number]> = [
      [14, 0],
      [15, 12],
      [17, 12],
      [18, 16],
    ];
    for (const [major, itemBytes] of cases) {
      const rec = commit({
        rels,
        subxacts: [742, 743],
        ...(itemBytes > 0 ? { statsItems: 2, statsItemBytes: itemBytes } : {}),
        invals: 3,
        twophase: 800,
        gid: 'tx-1',
      });
      const w = buildWal([{ ...rec, info: 0x30 | 0x80 }], {
        major,
        segmentSize: SEG,
        startSegno: 1,
      });
      const { recs, reader } = await readAll(src(w), { startLsn: w.records[0]!.lsn });
      expect(reader.end?.reason).toBe('invalid_record');
      expect(recs[0]).toMatchObject({
        rmgr: 'Transaction',
        type: 'COMMIT_PREPARED',
        data: {
          kind: 'xact_commit',
          rels,
          subxacts: [742, 743],
          invalidations: 3,
          twophaseXid: 800,
          gid: 'tx-1',
        },
      });
      expect(recs[0]!.data).toMatchObject({ droppedStats: { length: itemBytes > 0 ? 2 : 0 } });
    }
  });

  it('reads the image bits of 13/14 (apply 0x04) and 15+ (apply 0x02), and block 252 from 14 only', async () => {
    for (const major of [13, 14, 15, 18] as const) {
      const rec: BuildRecord = {
        ...heapInsert(50),
        blocks: [
          { id: 0, node: REL, block: 3, image: { holeOffset: 200, holeLength: 4000, apply: true } },
          { id: 1, node: REL, block: 4, sameRel: true, data: Buffer.alloc(10) },
        ],
      };
      const w = buildWal([rec], { major, segmentSize: SEG, startSegno: 1 });
      const { recs } = await readAll(src(w), { startLsn: w.records[0]!.lsn });
      expect(
        recs[0]!.blocks.map((b) => [b.node, b.block, b.image?.apply, b.image?.length]),
      ).toEqual([
        [REL, 3, true, 4192],
        [REL, 4, undefined, undefined],
      ]);
      expect(recs[0]!.fpiLength).toBe(4192);
      expect(recs[0]!.recordLength).toBe(recs[0]!.totalLength - 4192);
      const top = buildWal([{ ...heapInsert(5), toplevelXid: 99 }], {
        major,
        segmentSize: SEG,
        startSegno: 1,
      });
      const t = await readAll(src(top), { startLsn: top.records[0]!.lsn });
      if (major === 13) {
        expect(t.recs).toEqual([]);
        expect(t.reader.end?.message).toBe(
          `invalid block_id 252 at ${formatLsn(top.records[0]!.lsn)}`,
        );
      } else expect(t.recs[0]!.toplevelXid).toBe(99);
    }
  });
});

describe('pg-wal reader: continuation', () => {
  it('skips an abandoned record at XLP_FIRST_IS_OVERWRITE_CONTRECORD and reads on from that page', async () => {
    // A record spans pages 0→1; rewrite page 1 as a fresh page flagged OVERWRITE_CONTRECORD
    // holding one new record, as PostgreSQL does after a crash left the record incomplete.
    const w = buildWal([heapInsert(100), heapInsert(9000)], {
      major: 15,
      segmentSize: SEG,
      startSegno: 1,
    });
    const tail = buildWal([heapInsert(100, 9)], { major: 15, segmentSize: SEG, startSegno: 1 });
    const seg = w.segments.get(1)!;
    const page1 = 8192;
    seg.fill(0, page1);
    const fresh = tail.segments.get(1)!;
    // The new record (placed after a 40-byte header in `tail`) goes after a 24-byte header here.
    const rec = fresh.subarray(40, 40 + tail.records[0]!.totalLength);
    seg.writeUInt16LE(XLOG_PAGE_MAGIC[15], page1);
    seg.writeUInt16LE(0x0008, page1 + 2);
    seg.writeUInt32LE(1, page1 + 4);
    seg.writeUInt32LE(SEG + page1, page1 + 8);
    // Its prev-link: the last record read before the abandoned one.
    const patched = Buffer.from(rec);
    patched.writeUInt32LE(w.records[0]!.lsn, 8);
    encodeCrc(patched);
    patched.copy(seg, page1 + 24);
    const { recs, reader } = await readAll(src(w), { startLsn: w.records[0]!.lsn });
    expect(recs.map((r) => r.lsn)).toEqual([w.records[0]!.lsn, SEG + page1 + 24]);
    expect(recs[1]!.data).toMatchObject({ offnum: 9 });
    expect(reader.end?.reason).toBe('invalid_record');
  });

  it("'find' starts at the first record after continuation data, as XLogFindNextRecord", async () => {
    const w = buildWal(
      Array.from({ length: 12 }, (_, i) => heapInsert(5000, i + 1)),
      { major: 15, segmentSize: SEG, startSegno: 1 },
    );
    const page = SEG + 3 * 8192;
    const first = w.records.find((r) => r.lsn >= page)!;
    const { recs, reader } = await readAll(src(w), { startLsn: page, start: 'find' });
    expect(reader.firstRecordLsn).toBe(first.lsn);
    expect(recs[0]!.lsn).toBe(first.lsn);
    expect(recs.length).toBe(w.records.filter((r) => r.lsn >= page).length);
  });
});
