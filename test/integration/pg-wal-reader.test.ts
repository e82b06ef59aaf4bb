/**
 * The pg-wal/ reader record for record against PostgreSQL's own pg_waldump, on real WAL.
 * Method: initdb a real server with 1 MB segments, run a workload that writes every record the
 * prediction reads (FPIs plain and pglz-compressed after checkpoints, updates, prune and vacuum,
 * a VACUUM truncation, TRUNCATE, commits and aborts dropping many relations, two-phase commit,
 * COPY's multi-inserts, DROP DATABASE, a 200 kB record across pages and segments, a WAL switch),
 * stop it, then read the same range with pg_waldump and with the reader: every record's LSN,
 * rmgr, type, lengths, xid, prev-link and block references (relation, fork, block, FPW) are
 * equal, the decoded main data equals what pg_waldump's description says, the stats agree, and
 * both stop at the end of WAL with the same message.
 */
import * as fs from 'node:fs';
import * as path from 'node:path';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { PgWalReader } from '../../pg-wal/reader.ts';
import type { PgWalRecord } from '../../pg-wal/record.ts';
import { waldumpBlockRefs, waldumpPrefix } from '../../pg-wal/waldump-text.ts';
import { detectSegmentSize, readHistory, WalDirectory } from '../../pg-wal/wal-dir.ts';
import { findPgBin, pgServerUser } from '../../scripts/postgres/pg-bin.ts';
import { runPgProgram } from '../../scripts/postgres/pg-cluster.ts';
import { parseWaldumpStats, readerStats } from '../../scripts/postgres/pg-waldump.ts';
import { toPredictRecord } from '../../scripts/predict/pg-wal-source.ts';
import { parseWaldumpLine, relKey } from '../../scripts/predict/wal-records.ts';
import { freePort } from '../../server/ports.ts';
import { formatLsn, parseLsn } from '../../wal/lsn.ts';
import { pgUnavailableReason, PgDirs } from '../helpers/postgres.ts';

const unavailable =
  pgUnavailableReason() ??
  (fs.existsSync(path.join(findPgBin().dir, 'pg_waldump')) ? null : 'no pg_waldump');

const WORKLOAD = [
  'CREATE TABLE a (c int, t text)',
  'CREATE TABLE b (c int PRIMARY KEY, t text)',
  "INSERT INTO a SELECT g, repeat('x', g % 300) FROM generate_series(1, 20000) g",
  "INSERT INTO b SELECT g, 'y' FROM generate_series(1, 5000) g",
  'CHECKPOINT',
  'UPDATE a SET c = c + 1 WHERE c % 7 = 0',
  'DELETE FROM b WHERE c % 3 = 0',
  'VACUUM a',
  'VACUUM b',
  'DELETE FROM a WHERE c > 10000',
  'VACUUM a',
  "ALTER SYSTEM SET wal_compression = 'pglz'",
  'SELECT pg_reload_conf()',
  'CHECKPOINT',
  "UPDATE b SET t = 'z'",
  'ALTER SYSTEM RESET wal_compression',
  'SELECT pg_reload_conf()',
  `BEGIN; ${Array.from({ length: 60 }, (_, i) => `CREATE TABLE c${i} (x int)`).join('; ')}; COMMIT`,
  `DROP TABLE ${Array.from({ length: 60 }, (_, i) => `c${i}`).join(', ')}`,
  'BEGIN; CREATE TABLE d1 (x int); SAVEPOINT s; CREATE TABLE d2 (x int); ROLLBACK TO s; COMMIT',
  'BEGIN; CREATE TABLE e1 (x int); ROLLBACK',
  "BEGIN; CREATE TABLE p1 (x int); PREPARE TRANSACTION 'p1'",
  "COMMIT PREPARED 'p1'",
  "BEGIN; DROP TABLE p1, d1; PREPARE TRANSACTION 'p2'",
  "COMMIT PREPARED 'p2'",
  "BEGIN; CREATE TABLE p3 (x int); PREPARE TRANSACTION 'p3'",
  "ROLLBACK PREPARED 'p3'",
  "COPY a (c) FROM PROGRAM 'seq 1 3000'",
  'TRUNCATE b',
  'CREATE DATABASE db2',
  'DROP DATABASE db2',
  "SELECT pg_logical_emit_message(false, 'walsim', repeat('m', 200000))",
  'SELECT pg_switch_wal()',
  "INSERT INTO a VALUES (1, 'after the switch')",
];

const dirs = new PgDirs();
let walDir = '';
let startLsn = '';
let waldumpText = '';
let waldumpError = '';
/** The whole range read once by the reader (to the end of WAL). */
let whole: { recs: PgWalRecord[]; reader: PgWalReader };

async function waldump(args: string[]): Promise<{ stdout: string; stderr: string }> {
  const bin = findPgBin();
  const r = await runPgProgram({ binDir: bin.dir, user: null }, 'pg_waldump', args, {
    allowFail: true,
  });
  return r;
}

async function readRange(
  start: string,
  end: string | null,
): Promise<{ recs: PgWalRecord[]; reader: PgWalReader }> {
  const src = new WalDirectory(walDir, detectSegmentSize(walDir), readHistory(walDir, 1));
  const reader = new PgWalReader(src, {
    startLsn: parseLsn(start),
    endLsn: end === null ? null : parseLsn(end),
    start: 'find',
    major: 15,
    // Small chunks: the window moves many times inside a segment.
    chunkBytes: 64 * 1024,
  });
  const recs: PgWalRecord[] = [];
  for await (const r of reader.records()) recs.push(r);
  return { recs, reader };
}

/** pg_waldump's line without the description: prefix through the type, then the block refs. */
function withoutDesc(line: string): string {
  const m = /^(.*?desc: )(UNKNOWN \([0-9a-f]+\)|\S+)\s?(.*)$/.exec(line)!;
  const rest = m[3]!;
  const cut = rest.search(/(^|, )blkref #\d+:/);
  const refs = cut < 0 ? '' : rest.slice(cut).replace(/^blkref/, ', blkref');
  return m[1]! + m[2]! + refs;
}

describe.skipIf(unavailable !== null)(
  `pg-wal reader against pg_waldump on real WAL${unavailable ? ` (skipped: ${unavailable})` : ''}`,
  () => {
    beforeAll(async () => {
      const bin = findPgBin();
      const user = pgServerUser();
      const engine = { binDir: bin.dir, user };
      const data = dirs.fresh('pgwal');
      fs.mkdirSync(data, { mode: 0o700 });
      if (user !== null) fs.chownSync(data, user.uid, user.gid);
      await runPgProgram(engine, 'initdb', ['-D', data, '-U', 'postgres', '--wal-segsize=1']);
      const port = await freePort('127.0.0.1');
      const opts = [
        `-p ${port}`,
        '-c listen_addresses=127.0.0.1',
        "-c unix_socket_directories=''",
        '-c autovacuum=off',
        '-c wal_keep_size=1GB',
        '-c max_wal_size=1GB',
        '-c max_prepared_transactions=5',
      ].join(' ');
      const log = path.join(path.dirname(data), 'server.log');
      fs.writeFileSync(log, '');
      if (user !== null) fs.chownSync(log, user.uid, user.gid);
      await runPgProgram(engine, 'pg_ctl', ['start', '-D', data, '-o', opts, '-l', log, '-w']);
      const c = new pg.Client({ host: '127.0.0.1', port, user: 'postgres', database: 'postgres' });
      await c.connect();
      try {
        startLsn = (await c.query('SELECT pg_current_wal_lsn()::text AS l')).rows[0].l as string;
        for (const sql of WORKLOAD) await c.query(sql);
      } finally {
        await c.end();
      }
      await runPgProgram(engine, 'pg_ctl', ['stop', '-D', data, '-m', 'fast', '-w']);
      walDir = path.join(data, 'pg_wal');
      const r = await waldump(['-p', walDir, '-s', startLsn]);
      waldumpText = r.stdout;
      waldumpError = r.stderr;
      whole = await readRange(startLsn, null);
    }, 240_000);

    afterAll(() => dirs.removeAll());

    it('every record equals pg_waldump: LSN, rmgr, type, rec/tot length, xid, prev, block refs with FPW', async () => {
      const lines = waldumpText.split('\n').filter((l) => l.startsWith('rmgr: '));
      const { recs } = whole;
      expect(lines.length).toBeGreaterThan(20000);
      expect(recs.map((r) => waldumpPrefix(r) + waldumpBlockRefs(r))).toEqual(
        lines.map(withoutDesc),
      );
      // The range exercised what it is meant to: pages and segments crossed, images, a switch.
      const seg = detectSegmentSize(walDir);
      const page = (l: number) => Math.floor(l / 8192);
      expect(recs.filter((r) => page(r.lsn) !== page(r.endLsn - 1)).length).toBeGreaterThan(100);
      expect(recs.some((r) => Math.floor(r.lsn / seg) !== Math.floor((r.endLsn - 1) / seg))).toBe(
        true,
      );
      expect(recs.some((r) => r.totalLength > 200000)).toBe(true);
      const images = recs.flatMap((r) => r.blocks.filter((b) => b.image !== null));
      expect(images.some((b) => b.image!.compressed)).toBe(true);
      expect(images.some((b) => !b.image!.compressed)).toBe(true);
      expect(recs.some((r) => r.rmgr === 'XLOG' && r.type === 'SWITCH')).toBe(true);
    });

    it("the decoded main data equals pg_waldump's description: dropped relations, creates, truncations, DROP DATABASE, tuples, offsets", async () => {
      const lines = waldumpText.split('\n').filter((l) => l.startsWith('rmgr: '));
      const { recs } = whole;
      const seen = new Map<string, number>();
      recs.forEach((r, i) => {
        const theirs = parseWaldumpLine(lines[i]!)!;
        const d = r.data;
        const key = `${r.rmgr}/${r.type}`;
        if (d?.kind === 'xact_commit' || d?.kind === 'xact_abort') {
          expect(d.rels.map(relKey)).toEqual((theirs.dropRels ?? []).map(relKey));
          if (d.rels.length > 0)
            seen.set(`${key} rels`, Math.max(seen.get(`${key} rels`) ?? 0, d.rels.length));
        } else if (d?.kind === 'smgr_create') {
          expect({ node: d.node, fork: d.fork }).toEqual(theirs.create);
        } else if (d?.kind === 'smgr_truncate') {
          expect({ node: d.node, blkno: d.blkno, flags: d.flags }).toEqual(theirs.truncate);
        } else if (d?.kind === 'dbase_drop') {
          expect(d.dbId).toBe(theirs.dropDatabase);
        } else if (d?.kind === 'heap_multi_insert') {
          expect(d.ntuples).toBe(theirs.multiInsertTuples);
        } else if (d?.kind === 'heap_insert') {
          expect(lines[i]).toMatch(
            new RegExp(`desc: ${r.type.replace('+', '\\+')} off ${d.offnum} `),
          );
        } else if (d?.kind === 'heap_update') {
          expect(lines[i]).toContain(`; new off ${d.newOffnum} `);
        }
        if (d !== null) seen.set(key, (seen.get(key) ?? 0) + 1);
      });
      const required = [
        'Transaction/COMMIT rels',
        'Transaction/ABORT rels',
        'Transaction/COMMIT_PREPARED rels',
        'Transaction/ABORT_PREPARED rels',
        'Storage/CREATE',
        'Storage/TRUNCATE',
        'Database/DROP',
        'Heap2/MULTI_INSERT',
        'Heap/INSERT',
        'Heap/UPDATE',
        'Heap/HOT_UPDATE',
        'Heap2/PRUNE',
        'Heap2/VACUUM',
      ];
      expect(
        required.filter((k) => !seen.has(k)),
        JSON.stringify([...seen]),
      ).toEqual([]);
      expect(seen.get('Transaction/COMMIT rels')).toBeGreaterThanOrEqual(60);
    });

    it("the prediction's records from the reader equal those parsed from pg_waldump's lines, field for field", () => {
      const lines = waldumpText.split('\n').filter((l) => l.startsWith('rmgr: '));
      const mine = whole.recs.map(toPredictRecord);
      const theirs = lines.map((l) => parseWaldumpLine(l)!);
      expect(mine.length).toBe(theirs.length);
      for (let i = 0; i < mine.length; i++) {
        // The reader's own fields (pg_waldump's line has none of them in this form): the end LSN,
        // where the next record starts; a commit's/abort's xid and time; a restore point's name;
        // the rmid and xl_info the replay model's tally keys types by.
        const { endLsn, xactEnd, restorePoint, typeKey, ...rest } = mine[i]!;
        expect(rest, lines[i]).toEqual(theirs[i]);
        expect(typeKey).toBe(whole.recs[i]!.rmid * 256 + whole.recs[i]!.info);
        if (/^(COMMIT|ABORT)$/.test(rest.type)) expect(xactEnd?.xid, lines[i]).toBe(rest.xid);
        if (restorePoint !== undefined) expect(lines[i]).toContain(restorePoint);
        expect(endLsn).toBe(whole.recs[i]!.endLsn);
        if (i + 1 < mine.length) expect(mine[i + 1]!.lsn).toBeGreaterThanOrEqual(endLsn!);
      }
      expect(mine.filter((r) => r.heapPageFreeAfter !== undefined).length).toBeGreaterThan(1000);
    });

    it('stops where pg_waldump stops, with the same message', async () => {
      const { reader } = whole;
      const m = /error in WAL record at [0-9A-F/]+: (.*)$/m.exec(waldumpError);
      expect(m, waldumpError).not.toBeNull();
      expect(reader.end?.reason).toBe('invalid_record');
      expect(reader.end?.message).toBe(m![1]);
    });

    it('an end LSN inside a record: the records pg_waldump -e shows, no more', async () => {
      const all = whole.recs;
      const big = all.find((r) => r.totalLength > 200000)!;
      const end = formatLsn(big.lsn + 1000);
      const r = await waldump(['-p', walDir, '-s', startLsn, '-e', end]);
      const lines = r.stdout.split('\n').filter((l) => l.startsWith('rmgr: '));
      const { recs, reader } = await readRange(startLsn, end);
      expect(recs.map((x) => waldumpPrefix(x))).toEqual(
        lines.map((l) => withoutDesc(l).replace(/, blkref.*$/, '')),
      );
      expect(recs[recs.length - 1]!.endLsn).toBeLessThanOrEqual(big.lsn);
      expect(reader.end?.reason).toBe('end_lsn');
    });

    it('pg_waldump --stats=record: the same counts and bytes per rmgr/type', async () => {
      const r = await waldump(['-p', walDir, '-s', startLsn, '--stats=record']);
      const stats = parseWaldumpStats(r.stdout);
      const { recs } = whole;
      const theirs = new Map<string, [number, number, number]>();
      for (const row of stats.rows) {
        const k = `${row.rmgr}/${row.type}`;
        const t = theirs.get(k) ?? [0, 0, 0];
        theirs.set(k, [t[0] + row.count, t[1] + row.recordBytes, t[2] + row.fpiBytes]);
      }
      const mine = new Map<string, [number, number, number]>();
      for (const x of recs) {
        const k = `${x.rmgr}/${x.type}`;
        const t = mine.get(k) ?? [0, 0, 0];
        mine.set(k, [t[0] + 1, t[1] + x.recordLength, t[2] + x.fpiLength]);
      }
      expect(Object.fromEntries(mine)).toEqual(Object.fromEntries(theirs));
      // The same from the reader's columns (no object per record), as the bench and PgEngine count.
      const to = formatLsn(recs[recs.length - 1]!.endLsn);
      const viaColumns = new Map<string, [number, number, number]>();
      for (const row of (await readerStats(walDir, startLsn, to, 15)).rows)
        viaColumns.set(`${row.rmgr}/${row.type}`, [row.count, row.recordBytes, row.fpiBytes]);
      expect(Object.fromEntries(viaColumns)).toEqual(Object.fromEntries(theirs));
    });
  },
);
