/**
 * scripts/predict/ without servers: pg_waldump lines and pg_walinspect rows (copied from a real
 * PostgreSQL 15.18 standby) into records; the replay model's drop paths under the size-cached rule
 * (never-written relation, one-block tables, a relation not touched since the standby started,
 * DROP DATABASE forgetting every cached size, the NBuffers/32 threshold, > 20 relations); unknown
 * record types counted and priced generically; FSM/VM truncation lengths; the ranking against
 * Patroni's defaults; the held-out band; the version refusal.
 */
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import type pg from 'pg';
import { describe, expect, it } from 'vitest';
import { genericRecordSeconds } from '../../cost-model/price.ts';
import { loadProfile, profilePath, profileToJson } from '../../cost-model/profile.ts';
import { formatAccuracy, readAccuracy } from '../../scripts/predict/verify.ts';
import {
  profileMajor,
  profileNote,
  rankStandbys,
  type Prediction,
} from '../../scripts/predict/prediction.ts';
import {
  fsmBlocksAfterTruncate,
  pgKindOf,
  RecoveryModel,
  vmBlocksAfterTruncate,
  withDescriptorPageMap,
  type StandbyFiles,
} from '../../scripts/predict/replay-model.ts';
import { readStandbyState } from '../../scripts/predict/standby-state.ts';
import { pgDropRules } from '../../storage/pg-drop-rules.ts';
import { formatRanking } from '../../scripts/predict/format.ts';
import {
  parseWaldumpLine,
  recordFromWalinspect,
  type PgWalRecord,
} from '../../scripts/predict/wal-records.ts';

const L = {
  lock: 'rmgr: Standby     len (rec/tot):     42/    42, tx:        730, lsn: 0/0300F6F0, prev 0/0300F2C8, desc: LOCK xid 730 db 5 rel 16396 ',
  create:
    'rmgr: Storage     len (rec/tot):     42/    42, tx:        730, lsn: 0/0300F720, prev 0/0300F6F0, desc: CREATE base/5/16415',
  commit3:
    'rmgr: Transaction len (rec/tot):    266/   266, tx:        733, lsn: 0/030102C8, prev 0/03010238, desc: COMMIT 2026-12-02 01:01:51.083863 UTC; rels: base/5/16409 base/5/16408 base/5/16405; inval msgs: catcache 55 catcache 54 relcache 16405',
  commitStats:
    'rmgr: Transaction len (rec/tot):    469/   469, tx:        737, lsn: 0/03030908, prev 0/030308D0, desc: COMMIT 2026-12-02 01:01:51.103802 UTC; rels: base/5/16415; dropped stats: 2/5/16396; inval msgs: catcache 80',
  visible:
    'rmgr: Heap2       len (rec/tot):     59/    59, tx:          0, lsn: 0/0302F550, prev 0/0302F358, desc: VISIBLE cutoff xid 0 flags 0x03, blkref #0: rel 1663/5/16424 fork vm blk 0, blkref #1: rel 1663/5/16424 blk 0',
  truncate:
    'rmgr: Storage     len (rec/tot):     46/    46, tx:        736, lsn: 0/030304A8, prev 0/03030478, desc: TRUNCATE base/5/16424 to 0 blocks flags 7',
  insertInit:
    'rmgr: Heap        len (rec/tot):     59/    59, tx:        735, lsn: 0/03011960, prev 0/03011918, desc: INSERT+INIT off 1 flags 0x00, blkref #0: rel 1663/5/16424 blk 0',
};

const rec = (line: string) => parseWaldumpLine(line)!;

describe('pg_waldump lines and pg_walinspect rows', () => {
  it('parses type, lengths, block references and the drop-relevant descriptions', () => {
    expect(rec(L.lock)).toMatchObject({
      rmgr: 'Standby',
      type: 'LOCK',
      totalLength: 42,
      xid: 730,
      blocks: [],
    });
    expect(rec(L.create).create).toEqual({ node: { spc: 1663, db: 5, rel: 16415 }, fork: 0 });
    expect(rec(L.commit3).dropRels).toEqual([
      { spc: 1663, db: 5, rel: 16409 },
      { spc: 1663, db: 5, rel: 16408 },
      { spc: 1663, db: 5, rel: 16405 },
    ]);
    expect(rec(L.commitStats).dropRels).toEqual([{ spc: 1663, db: 5, rel: 16415 }]);
    expect(rec(L.visible).blocks).toEqual([
      { node: { spc: 1663, db: 5, rel: 16424 }, fork: 2, block: 0 },
      { node: { spc: 1663, db: 5, rel: 16424 }, fork: 0, block: 0 },
    ]);
    expect(rec(L.truncate).truncate).toEqual({
      node: { spc: 1663, db: 5, rel: 16424 },
      blkno: 0,
      flags: 7,
    });
    expect(rec(L.insertInit).type).toBe('INSERT+INIT');
    expect(parseWaldumpLine('')).toBeNull();
    expect(() => parseWaldumpLine('pg_waldump: error: something')).toThrow(
      /not a pg_waldump record line/,
    );
  });

  it('reads pg_get_wal_records_info rows into the same records', () => {
    const r = recordFromWalinspect({
      start_lsn: '0/302F550',
      xid: '0',
      resource_manager: 'Heap2',
      record_type: 'VISIBLE',
      record_length: 59,
      description: 'cutoff xid 0 flags 0x03',
      block_ref: 'blkref #0: rel 1663/5/16424 fork vm blk 0, blkref #1: rel 1663/5/16424 blk 0',
    });
    const w = rec(L.visible);
    expect({ ...r, lsn: 0 }).toEqual({ ...w, lsn: 0 });
  });

  it('maps record types to profile constants, and keeps unknown ones', () => {
    expect(pgKindOf('Heap', 'INSERT+INIT')).toBe('HEAP_INSERT');
    expect(pgKindOf('Transaction', 'COMMIT')).toBe('XACT_COMMIT');
    expect(pgKindOf('Standby', 'LOCK')).toBe('STANDBY_LOCK');
    // COPY's record: a page-level kind of its own (its tuples are counted apart: multiInsertTuples).
    expect(pgKindOf('Heap2', 'MULTI_INSERT+INIT')).toBe('HEAP2_MULTI_INSERT');
    // A HOT update is replayed by heap_xlog_update too (heap_redo: hot_update = true): one tuple,
    // one page. Priced as generic, a backlog of HOT updates was priced at a page-level record's cost.
    expect(pgKindOf('Heap', 'HOT_UPDATE')).toBe('HEAP_UPDATE');
    expect(pgKindOf('Heap', 'HOT_UPDATE+INIT')).toBe('HEAP_UPDATE');
    // heap_update's LOCK of the old tuple before it moves the row to another page (one per such
    // update: 264,032 of a 583,799-record backlog): one tuple header on one page, not page-level.
    expect(pgKindOf('Heap', 'LOCK')).toBe('HEAP_DELETE');
    expect(pgKindOf('Heap2', 'LOCK_UPDATED')).toBeNull();
    expect(pgKindOf('Btree', 'SPLIT_L')).toBeNull();
    expect(pgKindOf('Standby', 'RUNNING_XACTS')).toBeNull();
  });
});

const NB = 16384;
const node = (rel: number) => ({ spc: 1663, db: 5, rel });
const line = (
  lsn: number,
  rmgr: string,
  type: string,
  extra: Partial<PgWalRecord> = {},
): PgWalRecord => ({
  lsn,
  rmgr,
  type,
  totalLength: 50,
  xid: 1,
  blocks: [],
  ...extra,
});
const touch = (rel: number, block = 0, fork: 0 | 1 | 2 = 0) =>
  line(1, 'Heap', 'INSERT', { blocks: [{ node: node(rel), fork, block }] });
const commitDropping = (...rels: number[]) =>
  line(9, 'Transaction', 'COMMIT', { dropRels: rels.map(node) });
/** Files as --pgdata shows them: main forks of the given sizes, no other fork. */
const files = (sizes: Record<number, number>): StandbyFiles => ({
  diskBlocks: (n, f) => (f === 0 && sizes[n.rel] !== undefined ? sizes[n.rel]! : null),
  residentBlocks: () => undefined,
});

describe('the size-cached rule', () => {
  it('one-block tables replay touched since the start: lookup with one probe each', () => {
    const m = new RecoveryModel(NB, files({ 100: 1 }));
    m.learn(touch(100));
    m.replay(commitDropping(100));
    const r = m.result();
    expect(r.drops).toMatchObject([
      { fn: 'DropRelFileNodesAllBuffers', path: 'cached-lookup', probes: 1, invalidated: 1 },
    ]);
    expect(r.counts.drops.drops['cached-lookup']).toBe(1);
    expect(r.counts.controlFileUpdates).toBe(1);
  });

  it('INSERT redo that leaves < BLCKSZ/5 free reads the FSM: a filled one-block table is dropped by lookup', () => {
    // 59-byte INSERT records: 28-byte int tuples, 36 bytes a tuple with its line pointer.
    const ins = (off: number) =>
      `rmgr: Heap        len (rec/tot):     59/    59, tx:        735, lsn: 0/03011960, prev 0/03011918, desc: INSERT off ${off} flags 0x00, blkref #0: rel 1663/5/100 blk 0`;
    expect(rec(ins(181)).heapPageFreeAfter).toBe(8192 - 24 - 181 * 36); // 1,652 ≥ 1,638
    expect(rec(ins(182)).heapPageFreeAfter).toBe(8192 - 24 - 182 * 36); // 1,616 < 1,638
    expect(rec(L.insertInit).heapPageFreeAfter).toBe(8192 - 24 - 36);
    expect(rec(L.lock).heapPageFreeAfter).toBeUndefined();
    // The standby's files: main 1 block, and the FSM fork replay created (3 blocks).
    const withFsm: StandbyFiles = {
      diskBlocks: (n, f) => (n.rel === 100 ? ([1, 3, null, null][f] ?? null) : null),
      residentBlocks: () => undefined,
    };
    const filled = new RecoveryModel(NB, withFsm);
    for (let off = 1; off <= 226; off++) filled.learn(rec(ins(off)));
    filled.replay(commitDropping(100));
    expect(filled.result().drops[0]).toMatchObject({ path: 'cached-lookup' });
    // Only 181 rows: replay never read the FSM, so an FSM fork on disk is uncached → full scan.
    const partial = new RecoveryModel(NB, withFsm);
    for (let off = 1; off <= 181; off++) partial.learn(rec(ins(off)));
    partial.replay(commitDropping(100));
    expect(partial.result().drops[0]).toMatchObject({ path: 'full-scan' });
  });

  it('a never-written TOAST relation in the drop list forces the full scan of every descriptor', () => {
    const m = new RecoveryModel(NB, files({ 100: 1, 101: 0, 102: 1 }));
    m.learn(touch(100));
    m.learn(touch(102));
    m.replay(commitDropping(102, 101, 100));
    const r = m.result();
    expect(r.drops[0]).toMatchObject({ path: 'full-scan', descriptorsScanned: NB, probes: 0 });
    expect(r.drops[0]!.why).toMatch(/1663\/5\/101 main fork: size not cached/);
    expect(r.counts.drops.scannedByMatcher.linear).toBe(NB);
  });

  it('a relation touched only before the standby restarted (not in the learned WAL) takes the full scan', () => {
    // Dropped by a commit: no version asks its size first.
    const c = new RecoveryModel(NB, files({ 100: 1 }));
    c.replay(commitDropping(100));
    expect(c.result().drops[0]).toMatchObject({ path: 'full-scan' });
    expect(c.result().drops[0]!.why).toMatch(/not touched by replay since the standby started/);
    // Truncated, before the January 2025 minors (15.10): the main fork's size is not cached.
    const m = new RecoveryModel(
      NB,
      files({ 100: 1 }),
      false,
      pgDropRules({ major: 15, minor: 10 }),
    );
    m.replay(line(2, 'Storage', 'TRUNCATE', { truncate: { node: node(100), blkno: 0, flags: 7 } }));
    const r = m.result();
    expect(r.drops[0]).toMatchObject({ fn: 'DropRelFileNodeBuffers', path: 'full-scan' });
    expect(r.drops[0]!.why).toMatch(/not touched by replay since the standby started/);
    // smgrtruncate cached the new size: the next drop of the same relation looks up.
    m.replay(commitDropping(100));
    expect(m.result().drops[1]).toMatchObject({ path: 'cached-lookup', probes: 0 });
  });

  it('from 15.11 (and 14.16, 16.7, 17.3, 18) truncation replay caches the main fork first: lookup', () => {
    for (const v of [
      { major: 15, minor: 11 },
      { major: 15, minor: 18 },
      { major: 14, minor: 16 },
      { major: 18, minor: 0 },
    ]) {
      const m = new RecoveryModel(NB, files({ 100: 1 }), false, pgDropRules(v));
      m.replay(
        line(2, 'Storage', 'TRUNCATE', { truncate: { node: node(100), blkno: 0, flags: 7 } }),
      );
      expect(m.result().drops[0]).toMatchObject({ path: 'cached-lookup', probes: 1 });
      expect(m.result().counts.smgr.nblocks[0]).toBe(1);
    }
    // The default rules (15, minor unknown) are a current minor's.
    const d = new RecoveryModel(NB, files({ 100: 1 }));
    d.replay(line(2, 'Storage', 'TRUNCATE', { truncate: { node: node(100), blkno: 0, flags: 7 } }));
    expect(d.result().drops[0]).toMatchObject({ path: 'cached-lookup' });
  });

  it('DROP DATABASE scans the pool and forgets every cached size', () => {
    const m = new RecoveryModel(NB, files({ 100: 1 }));
    m.learn(touch(100));
    m.replay(line(3, 'Database', 'DROP', { dropDatabase: 7 }));
    m.replay(commitDropping(100));
    const r = m.result();
    expect(r.drops.map((d) => `${d.fn} ${d.path}`)).toEqual([
      'DropDatabaseBuffers full-scan',
      'DropRelFileNodesAllBuffers full-scan',
    ]);
  });

  it('NBuffers/32 blocks or more take the full scan; more than 20 relations use the bsearch matcher', () => {
    const m = new RecoveryModel(NB, files({ 100: 512, 101: 511 }));
    m.learn(touch(100));
    m.learn(touch(101));
    m.replay(commitDropping(100));
    m.replay(commitDropping(101));
    expect(m.result().drops.map((d) => d.path)).toEqual(['full-scan', 'cached-lookup']);
    const many = Array.from({ length: 21 }, (_, i) => 200 + i);
    const k = new RecoveryModel(NB, files(Object.fromEntries(many.map((r) => [r, 0]))));
    k.replay(commitDropping(...many));
    expect(k.result().counts.drops.scannedByMatcher.bsearch).toBe(NB);
  });

  it('a VACUUM truncation drops main, FSM and VM blocks past their new ends (PostgreSQL probed 7 for 5 pages)', () => {
    const m = new RecoveryModel(NB, {
      diskBlocks: (_n, f) => [5, 3, 1, null][f],
      residentBlocks: () => undefined,
    });
    for (let b = 0; b < 5; b++) m.learn(touch(100, b));
    m.learn(touch(100, 2, 1));
    m.learn(touch(100, 0, 2));
    m.replay(line(4, 'Storage', 'TRUNCATE', { truncate: { node: node(100), blkno: 0, flags: 7 } }));
    expect(m.result().drops[0]).toMatchObject({ path: 'cached-lookup', probes: 7 });
    expect(fsmBlocksAfterTruncate(0)).toBe(2);
    expect(fsmBlocksAfterTruncate(1)).toBe(3);
    expect(vmBlocksAfterTruncate(0)).toBe(0);
    expect(vmBlocksAfterTruncate(1)).toBe(1);
  });

  it('counts a record type the profile has no constant for, priced by the generic constant', () => {
    const m = new RecoveryModel(NB);
    m.replay(line(5, 'Btree', 'SPLIT_L'));
    m.replay(line(6, 'Sequence', 'UNKNOWN (f0)'));
    const r = m.result();
    expect(r.records).toBe(2);
    expect(r.genericRecords).toBe(2);
    expect(r.types.map((t) => `${t.rmgr}/${t.type}`)).toEqual([
      'Btree/SPLIT_L',
      'Sequence/UNKNOWN (f0)',
    ]);
    const p = loadProfile('seed-001');
    expect(genericRecordSeconds(p)).toBe(p.constants['record.HEAP_INSERT'].seconds);
  });
});

describe("the descriptor pages the startup process's first full scan maps", () => {
  const uncached = () => commitDropping(200); // never touched: size not cached → full scan
  it('counts the unmapped pages the page map reports, at the first full scan of the range only', () => {
    const m = new RecoveryModel(NB, files({ 200: 1, 201: 1 }));
    m.replay(uncached());
    m.replay(commitDropping(201));
    const r = withDescriptorPageMap(m.result(), 201);
    expect(r.counts.drops.drops['full-scan']).toBe(2);
    expect(r.counts.descriptorPagesMapped).toBe(201);
    expect(r.assumptions.join(' ')).not.toMatch(/descriptor array/);
    // No page map: the WAL's count stands; no full scan in the range: nothing to map.
    expect(withDescriptorPageMap(m.result(), null)).toEqual(m.result());
    const k = new RecoveryModel(NB, files({ 100: 1 }));
    k.learn(touch(100));
    k.replay(commitDropping(100));
    expect(withDescriptorPageMap(k.result(), 201).counts.descriptorPagesMapped).toBe(0);
  });

  it('without a page map: every page of the array (NBuffers × 64 B / 4 KiB), said as an assumption', () => {
    const m = new RecoveryModel(NB, files({ 200: 1 }));
    m.replay(uncached());
    expect(m.result().counts.descriptorPagesMapped).toBe((NB * 64) / 4096);
    expect(m.result().assumptions.join(' ')).toMatch(/descriptor array/);
  });

  it('none after a full scan in the WAL replayed since the startup process began, none on lookups', () => {
    const m = new RecoveryModel(NB, files({ 100: 1, 200: 1, 300: 1 }));
    m.learn(commitDropping(300));
    m.learn(touch(100));
    m.replay(uncached());
    expect(m.result().counts.descriptorPagesMapped).toBe(0);
    const k = new RecoveryModel(NB, files({ 100: 1 }));
    k.learn(touch(100));
    k.replay(commitDropping(100));
    expect(k.result().counts.drops.drops['cached-lookup']).toBe(1);
    expect(k.result().counts.descriptorPagesMapped).toBe(0);
  });
});

describe('files a relation-dropping commit removes', () => {
  it('counts the unlinked forks that held blocks apart from the empty ones', () => {
    // 100: one block on disk; 101: an empty main fork; 102: two blocks.
    const m = new RecoveryModel(NB, files({ 100: 1, 101: 0, 102: 2 }));
    m.replay(commitDropping(100, 101, 102));
    const c = m.result().counts;
    expect(c.smgr.unlink[0]).toBe(3);
    expect(c.unlinkedNonEmptyForks).toBe(2);
  });

  it('blocks replay wrote to a file empty or absent on disk are not counted (no extent to free)', () => {
    // 100: one block on disk; 101: empty on disk, written by replay; 103: no file before the range.
    const m = new RecoveryModel(NB, files({ 100: 1, 101: 0 }));
    m.replay(touch(100, 3));
    m.replay(touch(101, 5));
    m.replay(touch(103, 2));
    m.replay(commitDropping(100, 101, 103));
    expect(m.result().counts.smgr.unlink[0]).toBe(3);
    expect(m.result().counts.unlinkedNonEmptyForks).toBe(1);
    // Without the standby's files, the blocks the model knows of.
    const k = new RecoveryModel(NB);
    k.replay(touch(101, 5));
    k.replay(commitDropping(101));
    expect(k.result().counts.unlinkedNonEmptyForks).toBe(1);
  });
});

describe("each major's drop rules in the replay model", () => {
  const rules = (major: number, minor: number | null = null) => pgDropRules({ major, minor });
  const backlog = (m: RecoveryModel) => {
    m.learn(touch(100));
    m.learn(touch(101));
    m.replay(commitDropping(100));
    m.replay(line(2, 'Storage', 'TRUNCATE', { truncate: { node: node(101), blkno: 0, flags: 7 } }));
    m.replay(line(3, 'Database', 'DROP', { dropDatabase: 7 }));
    return m.result().drops.map((d) => `${d.fn} ${d.path}`);
  };

  it('13 scans every descriptor at every drop, cached or not, and asks the size at every block read', () => {
    const m = new RecoveryModel(NB, files({ 100: 1, 101: 1 }), false, rules(13, 23));
    expect(backlog(m)).toEqual([
      'DropRelFileNodesAllBuffers full-scan',
      'DropRelFileNodeBuffers full-scan',
      'DropDatabaseBuffers full-scan',
    ]);
    expect(m.result().drops[0]!.why).toMatch(/PostgreSQL 13 has no cached-size lookup/);
    expect(m.result().counts.drops.scanned).toBe(3 * NB);
    // No size cache in 13: every block reference asks mdnblocks.
    const k = new RecoveryModel(NB, files({ 100: 1 }), false, rules(13));
    k.replay(touch(100));
    k.replay(touch(100));
    expect(k.result().counts.smgr.nblocks[0]).toBe(2);
  });

  it('14–15 call DropRelFileNode*Buffers, 16–18 DropRelation*Buffers, with the same paths', () => {
    const paths = ['cached-lookup', 'cached-lookup', 'full-scan'];
    for (const major of [14, 15, 16, 17, 18]) {
      const got = backlog(new RecoveryModel(NB, files({ 100: 1, 101: 1 }), false, rules(major)));
      const [all, one] =
        major >= 16
          ? ['DropRelationsAllBuffers', 'DropRelationBuffers']
          : ['DropRelFileNodesAllBuffers', 'DropRelFileNodeBuffers'];
      expect(got).toEqual([all, one, 'DropDatabaseBuffers'].map((f, i) => `${f} ${paths[i]}`));
    }
  });

  it('CREATE DATABASE FILE_COPY and DROP TABLESPACE forget cached sizes from 15 (SMGRRELEASE), not in 14', () => {
    for (const [major, rmgr, type, path] of [
      [14, 'Database', 'CREATE', 'cached-lookup'],
      [14, 'Tablespace', 'DROP', 'cached-lookup'],
      [15, 'Database', 'CREATE_FILE_COPY', 'full-scan'],
      [15, 'Database', 'CREATE_WAL_LOG', 'cached-lookup'],
      [17, 'Tablespace', 'DROP', 'full-scan'],
    ] as const) {
      const m = new RecoveryModel(NB, files({ 100: 1 }), false, rules(major));
      m.learn(touch(100));
      m.replay(line(2, rmgr, type));
      m.replay(commitDropping(100));
      expect([major, type, m.result().drops[0]!.path]).toEqual([major, type, path]);
    }
  });
});

describe('ranking and the profile band', () => {
  const pred = (standby: string, writableS: number, recv: string, replay: string): Prediction =>
    ({
      standby,
      paused: false,
      state: { receiveLsn: recv, replayLsn: replay },
      range: { bytes: 0 },
      predicted: { writableS },
      primary: { url: 'p', currentLsn: '0/3000000', walNotReceivedBytes: 0 },
      patroniPosition: recv,
    }) as unknown as Prediction;

  it("names Patroni's pick (within 1MB by max(received, replayed), furthest ahead) beside the first writable", () => {
    const r = rankStandbys([
      pred('a', 30, '0/3000000', '0/1000000'), // received everything, 32 MB to replay
      pred('b', 0.1, '0/2F80000', '0/2F80000'), // 512 kB behind, nothing to replay
      pred('c', 0.05, '0/1000000', '0/1000000'), // 32 MB behind: not eligible
    ]);
    expect(r.patroniPick).toBe('a');
    expect(r.writableFirst).toBe('c');
    expect(r.rows.map((x) => [x.standby, x.patroniEligible])).toEqual([
      ['c', false],
      ['b', true],
      ['a', true],
    ]);
  });

  it('says "tie" when Patroni would race equal candidates, whatever the --standby order', () => {
    const a = pred('a', 1, '0/3000000', '0/3000000');
    const b = pred('b', 2, '0/3000000', '0/2000000');
    for (const order of [
      [a, b],
      [b, a],
    ]) {
      const r = rankStandbys(order);
      expect(r.patroniPick).toBeNull();
      expect(r.patroniTie).toEqual(['a', 'b']);
      expect(formatRanking(r).join('\n')).toMatch(
        /would promote: tie between a and b \(equal positions: Patroni's members race for the leader key\)/,
      );
    }
  });

  it("reads the held-out band of a calibration's fit with the profile, once", () => {
    // The shipped calibration's fit: 26 held-out cells, 19 of them within 25% by the band's rule.
    const b = loadProfile('pg15-calibrated-wall').fitBand;
    expect(b?.cells).toBe(26);
    expect(b?.within25Pct).toBe(19);
    expect(loadProfile('seed-001').fitBand).toBeNull();
  });
});

describe("the profile's PostgreSQL major", () => {
  it('reads pgMajor, else fit.postgres, else none; predict warns on another major and says "read as 15"', () => {
    const wall = loadProfile('pg15-calibrated-wall');
    expect(wall.pgMajor).toBe(15); // from fit.postgres "postgres (PostgreSQL) 15.18 (Debian …)"
    const seed = loadProfile('seed-001');
    expect(seed.pgMajor).toBeNull();
    expect(profileMajor(wall, 15)).toEqual({ pgMajor: 15, majorNote: null });
    expect(profileMajor(wall, 17).majorNote).toBe(
      "profile pg15-calibrated-wall was fitted on PostgreSQL 15, this standby runs 17: its seconds are 15's constants on 17's counts — calibrate on 17 (npm run calibrate -- --pg-version 17) and pass it with --profile, or pass the shipped pg17-calibrated-uncontended (fitted on 17, on the project's calibration machine)",
    );
    // No shipped profile of the standby's major: only the calibration is suggested.
    expect(profileMajor(wall, 12).majorNote).toMatch(/and pass it with --profile$/);
    expect(profileMajor(seed, 15)).toEqual({
      pgMajor: 15,
      majorNote: 'profile seed-001 names no PostgreSQL major: read as 15',
    });
    expect(profileMajor(seed, 13).majorNote).toMatch(
      /^profile seed-001 was fitted on PostgreSQL 15 \(it names no major: read as 15\), this standby runs 13/,
    );
    // Written and read back: pgMajor is a field of the file.
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'walsim-major-'));
    const f = path.join(dir, 'p17.json');
    fs.writeFileSync(f, profileToJson({ ...wall, name: 'p17', pgMajor: 17 }));
    expect(loadProfile(f).pgMajor).toBe(17);
    fs.writeFileSync(
      f,
      profileToJson({ ...wall, name: 'p17', pgMajor: 17 }).replace('17,', '"x",'),
    );
    expect(() => loadProfile(f)).toThrow(/"pgMajor" must be a PostgreSQL major such as 15/);
    fs.rmSync(dir, { recursive: true, force: true });
  });
});

describe('server checks', () => {
  it('refuses a server outside PostgreSQL 13–18, naming its version', async () => {
    const fake = { query: async () => ({ rows: [{ server_version: '12.4', num: '120004' }] }) };
    await expect(
      readStandbyState(fake as unknown as pg.Client, 'postgresql://u:secret@h:1/db'),
    ).rejects.toThrow(
      'postgresql://u:***@h:1/db runs PostgreSQL 12.4; predict reads PostgreSQL 13, 14, 15, 16, 17, 18 (their WAL record formats and drop rules) — point --standby at a standby of one of them',
    );
  });
});

describe('profile and accuracy-log input', () => {
  const tmp = () => fs.mkdtempSync(path.join(os.tmpdir(), 'walsim-predict-in-'));
  const seed = JSON.parse(fs.readFileSync(profilePath('seed-001').file, 'utf8'));

  it('refuses absurd constants, naming the field', () => {
    const d = tmp();
    try {
      for (const [v, re] of [
        [1e308, /constants\["record\.HEAP_INSERT"\]\.seconds must be .* at most 60/],
        [-1, /constants\["record\.HEAP_INSERT"\]\.seconds must be/],
        ['Infinity', /constants\["record\.HEAP_INSERT"\]\.seconds must be/],
      ] as const) {
        const f = path.join(d, 'p.json');
        const j = structuredClone(seed);
        j.constants['record.HEAP_INSERT'].seconds = v;
        fs.writeFileSync(f, JSON.stringify(j));
        expect(() => loadProfile(f)).toThrow(re);
      }
      const f = path.join(d, 'c.json');
      fs.writeFileSync(f, JSON.stringify({ ...seed, cache: { ...seed.cache, llcBytes: 1e300 } }));
      expect(() => loadProfile(f)).toThrow(/cache\.llcBytes must be/);
    } finally {
      fs.rmSync(d, { recursive: true, force: true });
    }
  });

  it('does not echo a file that is not JSON (--profile /etc/passwd)', () => {
    const d = tmp();
    try {
      const f = path.join(d, 'passwd');
      fs.writeFileSync(f, 'root:x:0:0:root:/root:/bin/bash\n');
      expect(() => loadProfile(f)).toThrow(/is not valid JSON/);
      expect(() => loadProfile(f)).not.toThrow(/root/);
    } finally {
      fs.rmSync(d, { recursive: true, force: true });
    }
  });

  it('says a shipped profile was fitted on another machine, and which', () => {
    expect(profileNote('seed-001')).toMatch(
      /fitted on the seed's 2020 machine .* run npm run calibrate for this machine/,
    );
    expect(profileNote('test/fixtures/postgres/calibration-17-cells.json')).toBeNull();
  });

  it('refuses an accuracy-log line of another shape, naming the line, with no TypeError', () => {
    const d = tmp();
    try {
      const f = path.join(d, 'acc.jsonl');
      fs.writeFileSync(f, '{"hello": 1}\n');
      expect(() => formatAccuracy(readAccuracy(f))).toThrow(
        /acc\.jsonl line 1 is not a --verify entry: "predicted" is missing/,
      );
      fs.writeFileSync(f, '[1,2]\n');
      expect(() => readAccuracy(f)).toThrow(/line 1 is not a --verify entry/);
    } finally {
      fs.rmSync(d, { recursive: true, force: true });
    }
  });
});
