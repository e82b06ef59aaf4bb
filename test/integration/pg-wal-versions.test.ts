/**
 * The pg-wal/ reader on real WAL of every installed major, 13 to 18 (the embedded binaries the
 * installer caches; a major not installed is skipped with the reason). Method: one server per
 * major with 1 MB segments runs statements whose records are known in number — 5000 inserts,
 * an UPDATE and a DELETE of counted rows, COPY of 1000 rows, a VACUUM that truncates, 40 tables
 * created then dropped in one commit, an aborted CREATE, a TRUNCATE, CREATE/DROP DATABASE — and
 * ends with a marker message; the reader's records over [start, marker) must count exactly that,
 * with the dropped relations' own relfilenodes. On 16–18, every record and block reference also
 * equals pg_walinspect's (`pg_get_wal_records_info`, `pg_get_wal_block_info`) over the same
 * range; on 15, every record equals `pg_get_wal_records_info` (blocks: the pg_waldump test).
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type pg from 'pg';
import { PG_MAJORS, type PgMajor } from '../../pg-wal/format.ts';
import { PgWalReader } from '../../pg-wal/reader.ts';
import type { PgWalRecord } from '../../pg-wal/record.ts';
import { detectSegmentSize, readHistory, WalDirectory } from '../../pg-wal/wal-dir.ts';
import { cachedPgBinDir, pgCacheRoot } from '../../scripts/postgres/pg-install.ts';
import { parseLsn } from '../../wal/lsn.ts';
import { startOneServer, type OneServer } from '../helpers/pg-one-server.ts';
import { PgDirs } from '../helpers/postgres.ts';

const C_TABLES = Array.from({ length: 40 }, (_, i) => `c${i}`);

interface Facts {
  start: string;
  end: string;
  oid: Record<string, number>;
  updated: number;
  deleted: number;
  abortedRel: number;
  db2: number;
  walinspect: Array<Record<string, unknown>> | null;
  blocks: Array<Record<string, unknown>> | null;
}

const one = async (c: pg.Client, sql: string): Promise<unknown> =>
  Object.values((await c.query(sql)).rows[0] as object)[0];

async function workload(c: pg.Client, major: PgMajor): Promise<Facts> {
  if (major >= 15) await c.query('CREATE EXTENSION pg_walinspect');
  const start = (await one(c, 'SELECT pg_current_wal_insert_lsn()::text')) as string;
  const oid: Record<string, number> = {};
  const filenode = async (rel: string) =>
    (oid[rel] = Number(await one(c, `SELECT pg_relation_filenode('${rel}')`)));
  await c.query('CREATE TABLE a (c int, t text)');
  await c.query('CREATE TABLE b (c int PRIMARY KEY)');
  for (const r of ['a', 'b', 'b_pkey']) await filenode(r);
  await c.query("INSERT INTO a SELECT g, 'x' || g FROM generate_series(1, 5000) g");
  await c.query('INSERT INTO b SELECT generate_series(1, 3000)');
  await c.query("ALTER SYSTEM SET wal_compression = 'on'");
  await c.query('SELECT pg_reload_conf()');
  await c.query('CHECKPOINT');
  const updated = (await c.query('UPDATE a SET c = c + 1 WHERE c % 10 = 0')).rowCount!;
  const deleted = (await c.query('DELETE FROM a WHERE c > 2500')).rowCount!;
  await c.query('VACUUM a');
  await c.query(`BEGIN; ${C_TABLES.map((t) => `CREATE TABLE ${t} (x int)`).join('; ')}; COMMIT`);
  for (const t of C_TABLES) await filenode(t);
  await c.query(`DROP TABLE ${C_TABLES.join(', ')}`);
  await c.query('BEGIN');
  await c.query('CREATE TABLE e1 (x int)');
  const abortedRel = Number(await one(c, "SELECT pg_relation_filenode('e1')"));
  await c.query('ROLLBACK');
  await c.query("COPY b FROM PROGRAM 'seq 3001 4000'");
  await c.query('TRUNCATE b');
  await c.query('CREATE DATABASE db2');
  const db2 = Number(await one(c, "SELECT oid FROM pg_database WHERE datname = 'db2'"));
  await c.query('DROP DATABASE db2');
  // The marker: a transactional message, so its commit flushes it (pg_walinspect reads flushed
  // WAL only); the range ends at the message's end.
  await c.query('BEGIN');
  const end = (await one(
    c,
    "SELECT pg_logical_emit_message(true, 'walsim', 'end')::text",
  )) as string;
  await c.query('COMMIT');
  let walinspect = null;
  let blocks = null;
  if (major >= 15)
    walinspect = (
      await c.query(
        `SELECT start_lsn::text, end_lsn::text, prev_lsn::text, xid::text, resource_manager,
                record_type, record_length, main_data_length, fpi_length
           FROM pg_get_wal_records_info($1, $2) ORDER BY start_lsn`,
        [start, end],
      )
    ).rows;
  if (major >= 16)
    blocks = (
      await c.query(
        `SELECT start_lsn::text, block_id, reltablespace, reldatabase, relfilenode, relforknumber,
                relblocknumber, block_data_length, block_fpi_length
           FROM pg_get_wal_block_info($1, $2, false) ORDER BY start_lsn, block_id`,
        [start, end],
      )
    ).rows;
  return { start, end, oid, updated, deleted, abortedRel, db2, walinspect, blocks };
}

async function readRange(walDir: string, f: Facts, major: PgMajor) {
  const src = new WalDirectory(walDir, detectSegmentSize(walDir), readHistory(walDir, 1));
  const reader = new PgWalReader(src, {
    startLsn: parseLsn(f.start),
    endLsn: parseLsn(f.end),
    start: 'find',
    major,
  });
  const recs: PgWalRecord[] = [];
  for await (const r of reader.records()) recs.push(r);
  return { recs, reader };
}

const lsnText = (l: number) => {
  const hi = Math.floor(l / 0x1_0000_0000);
  return `${hi.toString(16).toUpperCase()}/${(l - hi * 0x1_0000_0000).toString(16).toUpperCase()}`;
};

for (const major of PG_MAJORS) {
  const bin = cachedPgBinDir(major);
  const why =
    bin === null ? ` (skipped: PostgreSQL ${major} is not installed in ${pgCacheRoot()})` : '';
  describe.skipIf(bin === null)(`pg-wal reader on real PostgreSQL ${major} WAL${why}`, () => {
    const dirs = new PgDirs();
    let server: OneServer;
    let facts: Facts;
    let recs: PgWalRecord[];
    let reader: PgWalReader;

    beforeAll(async () => {
      server = await startOneServer(dirs, bin!, {
        autovacuum: 'off',
        wal_keep_size: '1GB',
        max_wal_size: '1GB',
      });
      const c = await server.client();
      try {
        facts = await workload(c, major);
      } finally {
        await c.end();
      }
      await server.stop();
      ({ recs, reader } = await readRange(server.walDir, facts, major));
    }, 300_000);
    afterAll(() => dirs.removeAll());

    it('reads the range to its end, knowing the major from the page magic', () => {
      expect(reader.major).toBe(major);
      expect(reader.end?.reason).toBe('end_lsn');
      expect(recs.length).toBeGreaterThan(10000);
    });

    it("counts the statements' records: inserts, updates, deletes, COPY's tuples, the truncation", () => {
      const on = (rel: number, rmgr: string, types: RegExp) =>
        recs.filter((r) => r.rmgr === rmgr && types.test(r.type) && r.blocks[0]?.node.rel === rel);
      const a = facts.oid.a!;
      const b = facts.oid.b!;
      expect(on(a, 'Heap', /^INSERT(\+INIT)?$/).length).toBe(5000);
      expect(on(a, 'Heap', /^(HOT_)?UPDATE(\+INIT)?$/).length).toBe(facts.updated);
      expect(on(a, 'Heap', /^DELETE$/).length).toBe(facts.deleted);
      const copied = on(b, 'Heap2', /^MULTI_INSERT(\+INIT)?$/).map((r) =>
        r.data?.kind === 'heap_multi_insert' ? r.data.ntuples : NaN,
      );
      expect(copied.reduce((x, y) => x + y, 0)).toBe(1000);
      const truncs = recs.flatMap((r) => (r.data?.kind === 'smgr_truncate' ? [r.data] : []));
      expect(truncs.filter((t) => t.node.rel === a).length).toBe(1);
    });

    it('the dropped relations are the ones created: 40 in one commit, the aborted one, TRUNCATE, DROP DATABASE', () => {
      const ends = recs.flatMap((r) =>
        r.data?.kind === 'xact_commit' || r.data?.kind === 'xact_abort' ? [r.data] : [],
      );
      const withRels = ends.filter((e) => e.rels.length > 0);
      const cRels = C_TABLES.map((t) => facts.oid[t]!).sort();
      expect(withRels.map((e) => [e.kind, e.rels.map((n) => n.rel).sort()])).toEqual([
        ['xact_commit', cRels],
        ['xact_abort', [facts.abortedRel]],
        ['xact_commit', [facts.oid.b!, facts.oid.b_pkey!].sort()],
      ]);
      const creates = recs.flatMap((r) => (r.data?.kind === 'smgr_create' ? [r.data] : []));
      expect(creates.filter((x) => cRels.includes(x.node.rel)).length).toBe(40);
      const drops = recs.flatMap((r) => (r.data?.kind === 'dbase_drop' ? [r.data.dbId] : []));
      expect(drops).toEqual([facts.db2]);
    });

    it.skipIf(major < 15)(
      `every record equals pg_get_wal_records_info${major < 15 ? ' (no pg_walinspect before 15)' : ''}`,
      () => {
        const mine = recs.map((r) => ({
          start_lsn: lsnText(r.lsn),
          end_lsn: lsnText(r.endLsn),
          prev_lsn: lsnText(r.prev),
          xid: String(r.xid),
          resource_manager: r.rmgr,
          record_type: r.type,
          record_length: r.totalLength,
          main_data_length: r.mainDataLength,
          fpi_length: r.fpiLength,
        }));
        expect(mine).toEqual(facts.walinspect);
      },
    );

    it.skipIf(major < 16)(
      `every block reference equals pg_get_wal_block_info${major < 16 ? ' (16+ only)' : ''}`,
      () => {
        const mine = recs.flatMap((r) =>
          r.blocks.map((b) => ({
            start_lsn: lsnText(r.lsn),
            block_id: b.id,
            reltablespace: b.node.spc,
            reldatabase: b.node.db,
            relfilenode: b.node.rel,
            relforknumber: b.fork,
            relblocknumber: b.block,
            block_data_length: b.dataLength,
            block_fpi_length: b.image?.length ?? 0,
          })),
        );
        const theirs = facts.blocks!.map((x) => ({
          start_lsn: x.start_lsn,
          block_id: Number(x.block_id),
          reltablespace: Number(x.reltablespace),
          reldatabase: Number(x.reldatabase),
          relfilenode: Number(x.relfilenode),
          relforknumber: Number(x.relforknumber),
          relblocknumber: Number(x.relblocknumber),
          block_data_length: Number(x.block_data_length),
          block_fpi_length: Number(x.block_fpi_length),
        }));
        expect(mine.length).toBeGreaterThan(10000);
        expect(mine).toEqual(theirs);
      },
    );
  });
}
