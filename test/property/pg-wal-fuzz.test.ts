/**
 * The pg-wal/ reader on damaged WAL never crashes or loops, and every answer says where.
 * Method (fast-check, seed printed; rerun with FC_SEED=<seed>): random record sequences of a
 * random major (heap inserts of up to 12 kB, commits dropping relations, truncations, images),
 * laid on 64 kB segments so records cross pages and segments, then damaged: a bit flipped, bytes
 * overwritten with random ones, a segment cut short, a segment replaced by random bytes. The
 * reader must end (bounded: it is awaited under the test's timeout) with either records that are
 * a prefix of the originals and an end saying why at an LSN, or one WalsimError line naming the
 * file; a flip inside a record's own bytes ends reading at or before that record. Every read is
 * done three times, as records (`records()`), as columns (`columns()`, the WebAssembly checks
 * without decoding) and as views (`views()`, block references and main data decoded where the
 * records lie): all must give the same records, the same end and the same error.
 */
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { WalsimError } from '../../common/errors.ts';
import { PG_MAJORS } from '../../pg-wal/format.ts';
import { PgWalReader, type PgWalEnd } from '../../pg-wal/reader.ts';
import type { PgWalRecordView } from '../../pg-wal/view.ts';
import type { PgWalRecord } from '../../pg-wal/record.ts';
import { buildWal, MemorySegments, type BuildRecord } from '../helpers/pg-wal-build.ts';

const seed = Number(process.env.FC_SEED ?? Math.floor(Math.random() * 2 ** 31));
console.log(`pg-wal-fuzz: FC_SEED=${seed}`);
const SEG = 64 * 1024;
const REL = { spc: 1663, db: 5, rel: 16384 };

const recordArb: fc.Arbitrary<BuildRecord> = fc.oneof(
  fc
    .record({ len: fc.integer({ min: 0, max: 12000 }), off: fc.integer({ min: 1, max: 300 }) })
    .map(({ len, off }) => {
      const main = Buffer.alloc(3);
      main.writeUInt16LE(off);
      return {
        rmid: 10,
        info: 0,
        xid: 700,
        blocks: len > 0 ? [{ id: 0, node: REL, block: 1, data: Buffer.alloc(len, 9) }] : [],
        main,
      };
    }),
  fc.integer({ min: 0, max: 40 }).map((n) => {
    const main = Buffer.alloc(16 + 12 * n);
    main.writeUInt32LE(4, 8); // xinfo: relfilenodes
    main.writeUInt32LE(n, 12);
    for (let i = 0; i < n; i++) main.writeUInt32LE(16384 + i, 16 + 12 * i + 8);
    return { rmid: 1, info: 0x80, xid: 701, main };
  }),
  fc.integer({ min: 0, max: 1000 }).map((blkno) => {
    const main = Buffer.alloc(20);
    main.writeUInt32LE(blkno, 0);
    main.writeUInt32LE(7, 16);
    return { rmid: 2, info: 0x20, main };
  }),
  // Several block references: other forks, a second relation, BKPBLOCK_SAME_REL, an origin.
  fc
    .record({ blk: fc.nat(1 << 20), rel: fc.nat(1000), origin: fc.option(fc.nat(65535)) })
    .map(({ blk, rel, origin }) => ({
      rmid: 9,
      info: 0x40,
      xid: 702,
      blocks: [
        { id: 0, fork: 2, node: REL, block: blk >> 15 },
        { id: 1, node: { spc: 1664, db: 0, rel: 20000 + rel }, block: blk, data: Buffer.alloc(4) },
        { id: 3, fork: 1, sameRel: true, node: REL, block: blk >> 12 },
      ],
      ...(origin !== null ? { origin } : {}),
      main: Buffer.alloc(2, 1),
    })),
  fc.integer({ min: 1, max: 8000 }).map((hole) => ({
    rmid: 0,
    info: 0xb0,
    blocks: [
      { id: 0, node: REL, block: 2, image: { holeOffset: 24, holeLength: hole, apply: true } },
    ],
    main: Buffer.alloc(0),
  })),
);

const walArb = fc.record({
  major: fc.constantFrom(...PG_MAJORS),
  records: fc.array(recordArb, { minLength: 1, maxLength: 40 }),
});

interface Outcome {
  recs: PgWalRecord[];
  end: PgWalEnd | null;
  error: string | null;
}

async function read(src: MemorySegments, startLsn: number): Promise<Outcome> {
  const reader = new PgWalReader(src, { startLsn, chunkBytes: 16 * 1024 });
  const recs: PgWalRecord[] = [];
  let out: Outcome;
  try {
    // Small batches, the same size as the columns' below: a WalsimError ends the batch it
    // interrupts, so both must hand out the same records before it.
    for await (const batch of reader.batches(7)) recs.push(...batch);
    out = { recs, end: reader.end, error: null };
  } catch (e) {
    if (!(e instanceof WalsimError)) throw e;
    out = { recs, end: null, error: e.message };
  }
  const cols = await readColumns(src, startLsn);
  expect(cols.rows).toEqual(recs.map(row));
  expect({ end: cols.end, error: cols.error }).toEqual({ end: out.end, error: out.error });
  const views = await readViews(src, startLsn);
  // A WalsimError loses the batch it interrupts, while views() handed each record out already.
  if (out.error !== null) expect(views.rows.slice(0, recs.length)).toEqual(recs.map(viewRow));
  else expect(views.rows).toEqual(recs.map(viewRow));
  expect({ end: views.end, error: views.error }).toEqual({ end: out.end, error: out.error });
  return out;
}

/** Everything `views()` gives of a record, from a decoded record. */
const viewRow = (r: PgWalRecord) => ({
  head: [r.lsn, r.endLsn, r.xid, r.rmid, r.info, r.rmgr, r.type, r.totalLength, r.fpiLength],
  main: [r.recordLength, r.mainDataLength, r.data],
  blocks: r.blocks.map((b) => [b.node.spc, b.node.db, b.node.rel, b.fork, b.block]),
});

/** The same range through `views()`, each view's values as `viewRow` gives them. */
async function readViews(src: MemorySegments, startLsn: number) {
  const reader = new PgWalReader(src, { startLsn, chunkBytes: 16 * 1024 });
  const rows: ReturnType<typeof viewRow>[] = [];
  const take = (v: PgWalRecordView) => {
    const blocks: number[][] = [];
    for (let i = 0; i < v.blockCount; i++)
      blocks.push([v.blockSpc[i]!, v.blockDb[i]!, v.blockRel[i]!, v.blockFork[i]!, v.blockNo[i]!]);
    rows.push({
      head: [v.lsn, v.endLsn, v.xid, v.rmid, v.info, v.rmgr, v.type, v.totalLength, v.fpiLength],
      // The view and its data are valid only during the call (a heap row's data is refilled).
      main: [v.recordLength, v.mainDataLength, structuredClone(v.data)],
      blocks,
    });
  };
  try {
    for await (const n of reader.views(take, 7)) expect(n).toBeGreaterThan(0);
  } catch (e) {
    if (!(e instanceof WalsimError)) throw e;
    return { rows, end: null, error: e.message };
  }
  return { rows, end: reader.end, error: null };
}

const row = (r: PgWalRecord) => [r.lsn, r.endLsn, r.rmid, r.info, r.totalLength, r.fpiLength];

/** The same range through `columns()`: each record's values as `row` gives them. */
async function readColumns(src: MemorySegments, startLsn: number) {
  const reader = new PgWalReader(src, { startLsn, chunkBytes: 16 * 1024 });
  const rows: number[][] = [];
  try {
    for await (const c of reader.columns(7))
      for (let i = 0; i < c.length; i++)
        rows.push([
          c.lsn[i]!,
          c.endLsn[i]!,
          c.rmid[i]!,
          c.info[i]!,
          c.totalLength[i]!,
          c.fpiLength[i]!,
        ]);
  } catch (e) {
    if (!(e instanceof WalsimError)) throw e;
    return { rows, end: null, error: e.message };
  }
  return { rows, end: reader.end, error: null };
}

/** Either an end at an LSN, with one line of PostgreSQL's words, or one line naming a WAL file. */
function expectClearAnswer(o: Outcome, original: PgWalRecord[]): void {
  if (o.error !== null) {
    expect(o.error).not.toContain('\n');
    expect(o.error).toMatch(/^WAL file [0-9A-F]{24}/);
  } else {
    expect(o.end).not.toBeNull();
    expect(o.end!.message).not.toContain('\n');
    expect(o.end!.message).toMatch(/[0-9A-F]+\/[0-9A-F]+|log segment [0-9A-F]{24}, offset \d+/);
    expect(['invalid_record', 'missing_segment']).toContain(o.end!.reason);
  }
  const key = (r: PgWalRecord) => `${r.lsn} ${r.totalLength} ${r.rmgr}/${r.type} ${r.xid}`;
  expect(o.recs.map(key)).toEqual(original.slice(0, o.recs.length).map(key));
}

function built(records: BuildRecord[], major: (typeof PG_MAJORS)[number]) {
  const w = buildWal(records, { major, segmentSize: SEG, startSegno: 3 });
  return w;
}

describe('pg-wal reader on damaged WAL (fast-check)', () => {
  it('undamaged: every record, then the end of valid WAL', async () => {
    await fc.assert(
      fc.asyncProperty(walArb, async ({ major, records }) => {
        const w = built(records, major);
        const o = await read(new MemorySegments(w.segments, SEG), w.records[0]!.lsn);
        expect(o.error).toBeNull();
        expect(o.recs.map((r) => [r.lsn, r.totalLength, r.endLsn])).toEqual(
          w.records.map((r) => [r.lsn, r.totalLength, r.endLsn]),
        );
        expect(o.end?.lsn).toBe(w.end);
      }),
      { seed, numRuns: 40 },
    );
  });

  it('a flipped bit: a prefix of the records, stopping at or before the record it hit', async () => {
    await fc.assert(
      fc.asyncProperty(
        walArb,
        fc.double({ min: 0, max: 1, noNaN: true }),
        fc.integer({ min: 0, max: 7 }),
        async ({ major, records }, where, bit) => {
          const w = built(records, major);
          const src = new MemorySegments(w.segments, SEG);
          const start = w.records[0]!.lsn;
          const original = (await read(src, start)).recs;
          const first = 3 * SEG;
          const pos = first + Math.floor(where * (w.end - first));
          w.segments.get(Math.floor(pos / SEG))![pos % SEG]! ^= 1 << bit;
          const o = await read(src, start);
          expectClearAnswer(o, original);
          const hit = w.records.findIndex((r) => r.spans.some(([a, b]) => pos >= a && pos < b));
          if (hit >= 0) expect(o.recs.length).toBeLessThanOrEqual(hit);
        },
      ),
      { seed, numRuns: 150 },
    );
  });

  it('random bytes over a range, a segment cut short, a segment of random bytes: a clear answer', async () => {
    const damage = fc.oneof(
      fc.record({
        kind: fc.constant('overwrite' as const),
        at: fc.double({ min: 0, max: 1, noNaN: true }),
        bytes: fc.uint8Array({ minLength: 1, maxLength: 300 }),
      }),
      fc.record({
        kind: fc.constant('cut' as const),
        at: fc.double({ min: 0, max: 1, noNaN: true }),
        bytes: fc.constant(new Uint8Array(0)),
      }),
      fc.record({
        kind: fc.constant('random' as const),
        at: fc.double({ min: 0, max: 1, noNaN: true }),
        bytes: fc.uint8Array({ minLength: SEG, maxLength: SEG }),
      }),
    );
    await fc.assert(
      fc.asyncProperty(walArb, damage, async ({ major, records }, d) => {
        const w = built(records, major);
        const src = new MemorySegments(w.segments, SEG);
        const start = w.records[0]!.lsn;
        const original = (await read(src, start)).recs;
        const first = 3 * SEG;
        const pos = first + Math.floor(d.at * (w.end - first));
        const segno = Math.floor(pos / SEG);
        const seg = w.segments.get(segno)!;
        if (d.kind === 'overwrite') seg.set(d.bytes.subarray(0, SEG - (pos % SEG)), pos % SEG);
        else if (d.kind === 'cut') w.segments.set(segno, seg.subarray(0, pos % SEG));
        else w.segments.set(segno, Buffer.from(d.bytes));
        expectClearAnswer(await read(src, start), original);
      }),
      { seed, numRuns: 150 },
    );
  });
});
