/**
 * predict's reading path without an object per record: `pgWalRecords` reads the range with
 * `PgWalReader.views()` and hands the prediction one record object refilled per record
 * (`PredictRecordOfView`). Checked against the decoded path it replaced (`records()` →
 * `toPredictRecord`, a fresh object per record): every record equal, field for field, and the
 * replay model fed each way ends in the same result (counts, types, drops, assumptions). The WAL
 * is built in memory for 13, 15 and 17 and written as segment files: heap inserts alternating
 * between relations, updates over two pages, MULTI_INSERT+INIT, VISIBLE (VM and heap forks),
 * Storage CREATE/TRUNCATE, commits dropping relations, DROP DATABASE, a restore point, 17's
 * PRUNE_*, records spanning pages and segments (read by the reader's slow path).
 */
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { describe, expect, it } from 'vitest';
import type { PgMajor } from '../../pg-wal/format.ts';
import { PgWalReader } from '../../pg-wal/reader.ts';
import { pgWalRecords, toPredictRecord } from '../../scripts/predict/pg-wal-source.ts';
import { pgKindOf, RecoveryModel } from '../../scripts/predict/replay-model.ts';
import type { PgWalRecord } from '../../scripts/predict/wal-records.ts';
import { formatLsn } from '../../wal/lsn.ts';
import { segmentFileName } from '../../wal/segment.ts';
import { buildWal, heapInsert, MemorySegments, type BuildRecord } from '../helpers/pg-wal-build.ts';

const SEG = 1 << 20;
const rel = (n: number) => ({ spc: 1663, db: 5, rel: n });

const insert = (r: number, block: number, off: number, len = 40): BuildRecord =>
  heapInsert({ node: rel(r), block, len, offnum: off, xid: 800, fill: 3 });

const update = (r: number, newBlock: number, oldBlock: number, newOff: number): BuildRecord => {
  const main = Buffer.alloc(14);
  main.writeUInt16LE(3, 4);
  main.writeUInt16LE(newOff, 12);
  return {
    rmid: 10,
    info: 0x20,
    xid: 801,
    blocks: [
      { id: 0, node: rel(r), block: newBlock, data: Buffer.alloc(60, 4) },
      { id: 1, node: rel(r), sameRel: true, block: oldBlock },
    ],
    main,
  };
};

const multiInsertInit = (r: number, block: number, n: number): BuildRecord => {
  const main = Buffer.alloc(4);
  main.writeUInt16LE(n, 2);
  return {
    rmid: 9,
    info: 0x50 | 0x80,
    blocks: [{ id: 0, node: rel(r), block, willInit: true, data: Buffer.alloc(n * 48, 5) }],
    main,
  };
};

const visible = (r: number, block: number): BuildRecord => ({
  rmid: 9,
  info: 0x40,
  blocks: [
    { id: 0, fork: 2, node: rel(r), block: 0 },
    { id: 1, node: rel(r), sameRel: true, block },
  ],
  main: Buffer.alloc(5),
});

const smgrCreate = (r: number, fork: number): BuildRecord => {
  const main = Buffer.alloc(16);
  [1663, 5, r, fork].forEach((v, i) => main.writeUInt32LE(v, 4 * i));
  return { rmid: 2, info: 0x10, main };
};

const smgrTruncate = (r: number, blkno: number): BuildRecord => {
  const main = Buffer.alloc(20);
  [blkno, 1663, 5, r, 7].forEach((v, i) => main.writeUInt32LE(v, 4 * i));
  return { rmid: 2, info: 0x20, main };
};

/** COMMIT with xinfo HAS_RELFILENODES (XLOG_XACT_HAS_INFO in xl_info). */
const commitDropping = (...rels: number[]): BuildRecord => {
  const main = Buffer.alloc(16 + 12 * rels.length);
  main.writeUInt32LE(4, 8);
  main.writeUInt32LE(rels.length, 12);
  rels.forEach((r, i) =>
    [1663, 5, r].forEach((v, j) => main.writeUInt32LE(v, 16 + 12 * i + 4 * j)),
  );
  return { rmid: 1, info: 0x80, xid: 802, main };
};

const dropDatabase = (major: PgMajor, db: number): BuildRecord => {
  const main = Buffer.alloc(8);
  main.writeUInt32LE(db, 0);
  return { rmid: 4, info: major <= 14 ? 0x10 : 0x20, main };
};

const restorePoint = (name: string): BuildRecord => {
  const main = Buffer.alloc(72);
  main.write(name, 8);
  return { rmid: 0, info: 0x70, main };
};

/** 17+'s PRUNE_VACUUM_SCAN with the given xl_heap_prune flags. */
const prune17 = (r: number, block: number, flags: number): BuildRecord => ({
  rmid: 9,
  info: 0x20,
  blocks: [{ id: 0, node: rel(r), block, data: Buffer.alloc(8, 1) }],
  main: Buffer.from([2, flags]),
});

/** A backlog of every kind above, > 1 segment, with records spanning pages. */
function backlog(major: PgMajor): BuildRecord[] {
  const out: BuildRecord[] = [smgrCreate(30000, 0), restorePoint('before')];
  for (let i = 0; i < 9000; i++) {
    const r = 30000 + (i % 3);
    out.push(insert(r, i >> 6, (i % 64) + 1, i % 500 === 0 ? 12000 : 40 + (i % 90)));
    if (i % 7 === 0) out.push(update(r, i >> 6, i >> 7, (i % 60) + 1));
    if (i % 1000 === 999) out.push(multiInsertInit(30003, i >> 6, 30), visible(30003, i >> 6));
    if (major >= 17 && i % 400 === 0) out.push(prune17(r, i >> 6, i % 800 === 0 ? 1 << 6 : 1 << 4));
  }
  out.push(smgrTruncate(30001, 3), commitDropping(30000, 30002), insert(30002, 0, 1));
  out.push(dropDatabase(major, 5), insert(30001, 0, 1), commitDropping(30001));
  return out;
}

/** The backlog read both ways, each record's copy kept, and a model fed each way. */
async function bothWays(major: PgMajor) {
  const w = buildWal(backlog(major), { major, segmentSize: SEG, startSegno: 2 });
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'walsim-views-'));
  try {
    for (const [segno, bytes] of w.segments)
      fs.writeFileSync(path.join(dir, segmentFileName(1, segno, SEG)), bytes);
    const from = w.records[0]!.lsn;
    const decoded: PgWalRecord[] = [];
    const modelDecoded = new RecoveryModel(4096);
    const reader = new PgWalReader(new MemorySegments(w.segments, SEG), {
      startLsn: from,
      endLsn: w.end,
    });
    for await (const r of reader.records()) {
      const p = toPredictRecord(r);
      decoded.push(structuredClone(p));
      modelDecoded.replay(p);
    }
    // A text source's records (pg_waldump, pg_walinspect) carry no typeKey.
    const modelByName = new RecoveryModel(4096);
    for (const p of decoded) modelByName.replay({ ...p, typeKey: undefined });
    const viewed: PgWalRecord[] = [];
    const modelViewed = new RecoveryModel(4096);
    const history = [{ tli: 1, beginLsn: 0, endLsn: null }];
    const read = await pgWalRecords(dir, history, formatLsn(from), formatLsn(w.end), (r) => {
      viewed.push(structuredClone(r));
      modelViewed.replay(r);
    });
    return { w, decoded, viewed, read, modelDecoded, modelViewed, modelByName };
  } finally {
    fs.rmSync(dir, { recursive: true, force: true });
  }
}

describe('predict reads the range through views(), one record object refilled', () => {
  for (const major of [13, 15, 17] as const)
    it(`${major}: the same records and the same model result as a fresh object per record`, async () => {
      const { w, decoded, viewed, read, modelDecoded, modelViewed, modelByName } =
        await bothWays(major);
      expect(decoded.length).toBe(w.records.length);
      expect(w.segments.size).toBeGreaterThan(1);
      expect(viewed).toEqual(decoded);
      expect(read.nextLsn).toBe(formatLsn(w.end));
      const a = modelDecoded.result();
      expect(modelViewed.result()).toEqual(a);
      // The backlog exercises what the refilled object must not leak into the model's state.
      expect(a.drops.map((d) => d.record)).toEqual([
        'Storage/TRUNCATE',
        'Transaction/COMMIT',
        'Database/DROP',
        'Transaction/COMMIT',
      ]);
      expect(a.counts.fsmUpdates).toBeGreaterThan(0);
      expect(a.counts.multiInsertTuples).toBe(9 * 30);
      // The tally found by typeKey (rmid, xl_info) equals the one found by the names, key order
      // included; pgRecords (summed from the types when read) equals a count per record.
      expect(JSON.stringify(modelByName.result())).toBe(JSON.stringify(a));
      const perRecord: Record<string, number> = {};
      for (const r of decoded) {
        const k = pgKindOf(r.rmgr, r.type);
        if (k !== null) perRecord[k] = (perRecord[k] ?? 0) + 1;
      }
      expect(JSON.stringify(a.counts.pgRecords)).toBe(JSON.stringify(perRecord));
      expect(Object.keys(perRecord).length).toBeGreaterThan(4);
    });
});

describe('the tally by typeKey across takeTally and clone', () => {
  const rec = (lsn: number, rmgr: string, type: string, typeKey?: number): PgWalRecord => ({
    lsn,
    rmgr,
    type,
    totalLength: 100,
    xid: 1,
    blocks: [],
    ...(typeKey !== undefined ? { typeKey } : {}),
  });
  it('each tally counts only its own records, a clone its original and its own', () => {
    const m = new RecoveryModel(4096);
    m.replay(rec(1, 'Heap', 'INSERT', 10 * 256));
    m.replay(rec(2, 'Btree', 'INSERT_LEAF', 11 * 256));
    m.replay(rec(3, 'Heap', 'INSERT', 10 * 256 + 1));
    const first = m.takeTally();
    expect(first.counts.pgRecords).toEqual({ HEAP_INSERT: 2, BTREE_INSERT_LEAF: 1 });
    expect(first.types.map((t) => [t.rmgr, t.type, t.count])).toEqual([
      ['Heap', 'INSERT', 2],
      ['Btree', 'INSERT_LEAF', 1],
    ]);
    m.replay(rec(4, 'Btree', 'INSERT_LEAF', 11 * 256));
    const c = m.clone();
    c.replay(rec(5, 'Btree', 'INSERT_LEAF'));
    expect(m.peekTally().counts.pgRecords).toEqual({ BTREE_INSERT_LEAF: 1 });
    expect(c.peekTally().counts.pgRecords).toEqual({ BTREE_INSERT_LEAF: 2 });
    expect(c.peekTally().types.map((t) => t.count)).toEqual([2]);
  });
});

describe("the replay model's shortcut for the relation named last", () => {
  const node = { spc: 1663, db: 5, rel: 100 };
  const touch = (lsn: number): PgWalRecord => ({
    lsn,
    rmgr: 'Heap',
    type: 'INSERT',
    totalLength: 80,
    xid: 1,
    blocks: [{ node, fork: 0, block: 0 }],
  });
  it('a relation dropped and then written again is a new relation (size asked, block appended)', () => {
    const m = new RecoveryModel(4096);
    m.learn(touch(1));
    const drop: PgWalRecord = { ...touch(2), rmgr: 'Transaction', type: 'COMMIT', blocks: [] };
    drop.dropRels = [{ ...node }];
    m.replay(drop);
    m.replay(touch(3));
    const c = m.result().counts.smgr;
    expect([c.nblocks[0], c.extend[0], c.unlink[0]]).toEqual([1, 1, 1]);
  });

  // The block added last per relation and fork is remembered (no hash lookup for a run of
  // records on one page); whatever removes blocks from the resident sets must forget it.
  const at = (lsn: number, block: number): PgWalRecord => ({
    ...touch(lsn),
    blocks: [{ node, fork: 0, block }],
  });
  const dropIt = (lsn: number): PgWalRecord => ({
    ...touch(lsn),
    rmgr: 'Transaction',
    type: 'COMMIT',
    blocks: [],
    dropRels: [{ ...node }],
  });
  it('a block truncated away and written again is resident again (its drop invalidates it)', () => {
    const m = new RecoveryModel(4096);
    m.replay(at(1, 5));
    m.replay(at(2, 5));
    const trunc: PgWalRecord = { ...touch(3), rmgr: 'Storage', type: 'TRUNCATE', blocks: [] };
    trunc.truncate = { node: { ...node }, blkno: 0, flags: 1 };
    m.replay(trunc);
    m.replay(at(4, 5));
    m.replay(dropIt(5));
    expect(m.result().drops.map((d) => [d.record, d.invalidated])).toEqual([
      ['Storage/TRUNCATE', 1],
      ['Transaction/COMMIT', 1],
    ]);
  });
  it('a block removed from the states handed out (the exporter) and written again is resident again', () => {
    const m = new RecoveryModel(4096);
    m.replay(at(1, 7));
    for (const st of m.relStates().values()) st.forks[0].resident.delete(7);
    m.replay(at(2, 7));
    m.replay(dropIt(3));
    expect(m.result().drops.map((d) => d.invalidated)).toEqual([1]);
  });
});
