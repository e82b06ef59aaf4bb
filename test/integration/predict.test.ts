/**
 * `npm run predict` against a real PostgreSQL 15 primary + standby (skipped, naming the reason,
 * without the server binaries). One paused backlog holds every case of the size-cached rule:
 * TRUNCATE of one-block int tables (sizes cached → lookup), TRUNCATE of tables with a never-written
 * TOAST table (→ full scan), TRUNCATE of a table replay touched only before the standby restarted
 * (→ full scan), a VACUUM truncation (DropRelFileNodeBuffers, lookup), DROP TABLE of a
 * relfilenode created in the backlog and never written (→ full scan) and TRUNCATE of a table whose
 * one block INSERT filled (its FSM fork read by insert redo → lookup). Checked:
 * - the records predict counted equal `pg_waldump --stats=record` over the same range, and the
 *   primary's pg_walinspect gives the same counts as the standby's pg_wal;
 * - the drop path of every call equals PostgreSQL's own, observed with gdb on the startup process
 *   (test/helpers/pg-drop-trace.ts; skipped with the reason without gdb or root);
 * - `--verify` promotes and reports measured phases; `--accuracy` summarises the log;
 * - every bad input (an unreachable standby, a primary, no WAL source, an unreadable data
 *   directory, …) is refused with one message.
 * No timing is asserted.
 */
import * as fs from 'node:fs';
import * as path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { runScript } from '../helpers/cli.ts';
import { PgDirs, pgUnavailableReason } from '../helpers/postgres.ts';
import { gdbUnavailableReason, traceDrops, type DropTrace } from '../helpers/pg-drop-trace.ts';
import {
  initPgCluster,
  pgConnect,
  pgConnectionString,
  pgCtl,
  pgDataDir,
  pgLogPath,
  readPgEngine,
  runPgProgram,
} from '../../scripts/postgres/pg-cluster.ts';
import { parseWaldumpStats } from '../../scripts/postgres/pg-waldump.ts';
import { pollUntil } from '../../server/poll.ts';
import { freePort } from '../../server/ports.ts';

const reason = pgUnavailableReason();
const gdbReason = gdbUnavailableReason();
const dirs = new PgDirs();
afterAll(() => dirs.removeAll());

type Json = any; // eslint-disable-line @typescript-eslint/no-explicit-any

describe.skipIf(reason !== null)(
  `npm run predict on real PostgreSQL 15${reason ? ` (skipped: ${reason})` : ''}`,
  () => {
    let dir = '';
    let standby = '';
    let primary = '';
    let prediction: Json = null;

    const sql = async (node: 'primary' | 'standby', ...stmts: string[]) => {
      const c = await pgConnect(dir, node);
      try {
        let last: Json[] = [];
        for (const s of stmts) last = (await c.query(s)).rows;
        return last;
      } finally {
        await c.end();
      }
    };
    const caughtUp = () =>
      pollUntil(
        async () => {
          const [p] = await sql('primary', 'SELECT pg_current_wal_lsn()::text AS l');
          const [s] = await sql(
            'standby',
            'SELECT pg_last_wal_replay_lsn() >= $$' + p.l + '$$::pg_lsn AS ok',
          );
          return s.ok === true;
        },
        'the standby to replay what the primary wrote',
        60_000,
        50,
      );

    beforeAll(async () => {
      dir = dirs.fresh('predict');
      await initPgCluster(dir, { sharedBuffers: '128MB', primarySharedBuffers: '128MB' });
      standby = pgConnectionString(dir, 'standby');
      primary = pgConnectionString(dir, 'primary');
      await sql('primary', 'CREATE EXTENSION pg_walinspect', 'CREATE EXTENSION pg_buffercache');
      // r: written, replayed, then the standby restarts (a restartpoint after it): replay never
      // touches r again, so its size is not cached when its TRUNCATE is replayed.
      await sql('primary', 'CREATE TABLE r (c int)', 'INSERT INTO r VALUES (1)', 'CHECKPOINT');
      await caughtUp();
      await sql('standby', 'CHECKPOINT');
      await pgCtl(dir, 'standby', 'stop', { mode: 'fast' });
      await pgCtl(dir, 'standby', 'start');
      const stmts: string[] = [];
      for (let i = 1; i <= 4; i++)
        stmts.push(`CREATE TABLE i${i} (c int)`, `INSERT INTO i${i} VALUES (${i})`);
      for (let i = 1; i <= 2; i++)
        stmts.push(`CREATE TABLE t${i} (c text)`, `INSERT INTO t${i} VALUES ('x')`);
      stmts.push(
        'CREATE TABLE v (c int)',
        'INSERT INTO v SELECT generate_series(1, 1000)',
        'CREATE TABLE d (c int)',
        // f: one block filled by INSERT (226 int rows): the last inserts leave < BLCKSZ/5 free, so
        // their redo reads (creates, caches) the FSM fork (heap_xlog_insert).
        'CREATE TABLE f (c int)',
        'INSERT INTO f SELECT generate_series(1, 226)',
      );
      await sql('primary', ...stmts);
      await caughtUp();
      await sql('standby', 'SELECT pg_wal_replay_pause()');
      await pollUntil(
        async () =>
          (await sql('standby', 'SELECT pg_get_wal_replay_pause_state() AS s'))[0].s === 'paused',
        'replay to pause',
        30_000,
        50,
      );
      const backlog: string[] = [];
      for (let i = 1; i <= 4; i++) backlog.push(`TRUNCATE i${i}`);
      for (let i = 1; i <= 2; i++) backlog.push(`TRUNCATE t${i}`);
      backlog.push(
        'TRUNCATE r',
        'DELETE FROM v',
        'VACUUM v',
        'TRUNCATE d',
        'DROP TABLE d',
        'TRUNCATE f',
      );
      await sql('primary', ...backlog);
      // The standby has received it all (synchronous standby, remote_write).
      const [p] = await sql('primary', 'SELECT pg_current_wal_flush_lsn()::text AS l');
      await pollUntil(
        async () =>
          (await sql('standby', `SELECT pg_last_wal_receive_lsn() >= '${p.l}'::pg_lsn AS ok`))[0]
            .ok === true,
        'the standby to receive the backlog',
        30_000,
        50,
      );
    }, 240_000);

    it("counts the records pg_waldump --stats counts, from pg_wal and from the primary's pg_walinspect", async () => {
      const r = await runScript('predict.ts', [
        '--standby',
        standby,
        '--pgdata',
        pgDataDir(dir, 'standby'),
        '--primary',
        primary,
        '--json',
      ]);
      expect(r.stderr).toBe('');
      expect(r.code).toBe(0);
      prediction = r.json.predictions[0];
      const p = prediction;
      expect(p.paused).toBe(true);
      expect(p.source.source).toBe('pg-wal');
      expect(p.range.bytes).toBeGreaterThan(0);
      expect(p.primary.walNotReceivedBytes).toBeGreaterThanOrEqual(0);
      // pg_waldump's counts over one prediction's own range: each run of predict reads up to what
      // the standby has received then, and the primary's background records (a RUNNING_XACTS
      // every 15 s) may arrive between two runs.
      const waldumpStats = async (range: { from: string; to: string }) =>
        parseWaldumpStats(
          (
            await runPgProgram(readPgEngine(dir), 'pg_waldump', [
              '--stats=record',
              '-p',
              path.join(pgDataDir(dir, 'standby'), 'pg_wal'),
              '-t',
              String(p.state.timeline),
              '-s',
              range.from,
              '-e',
              range.to,
            ])
          ).stdout,
        );
      const byType = (rows: { rmgr: string; type: string | null; count: number }[]) =>
        Object.fromEntries(rows.map((x) => [`${x.rmgr}/${x.type}`, x.count]));
      const stats = await waldumpStats(p.range);
      const theirs = byType(stats.rows);
      const ours = Object.fromEntries(
        p.records.byType.map((x: Json) => [`${x.rmgr}/${x.type}`, x.count]),
      );
      expect(ours).toEqual(theirs);
      expect(p.records.total).toBe(stats.total.count);
      expect(p.records.bytes).toBe(stats.total.combinedBytes);

      // The standby's own pg_walinspect cannot read past its replay LSN (README "Reading the range").
      await expect(
        sql(
          'standby',
          `SELECT count(*) FROM pg_get_wal_records_info('${p.range.from}', '${p.range.to}')`,
        ),
      ).rejects.toThrow(/cannot accept future start LSN/);
      const w = await runScript('predict.ts', [
        '--standby',
        standby,
        '--primary',
        primary,
        '--json',
      ]);
      expect(w.code).toBe(0);
      const q = w.json.predictions[0];
      expect(q.source.source).toBe('pg_walinspect');
      expect(byType(q.records.byType)).toEqual(byType((await waldumpStats(q.range)).rows));
      expect(q.drops.list.map((d: Json) => d.path)).toEqual(p.drops.list.map((d: Json) => d.path));

      // The human form names the phases, the dominant cost and the profile.
      const h = await runScript('predict.ts', [
        '--standby',
        standby,
        '--pgdata',
        pgDataDir(dir, 'standby'),
      ]);
      expect(h.code).toBe(0);
      expect(h.stdout).toMatch(/predicted time to writable: \d+\.\d{3} s/);
      expect(h.stdout).toMatch(/end of recovery/);
      expect(h.stdout).toMatch(/dominate/);
      expect(h.stdout).toMatch(/replay is paused/);
    }, 120_000);

    it('predicts the drop path the size-cached rule gives in each case', () => {
      const p = prediction;
      const byRel = (paths: Json[]) => paths.map((d) => `${d.fn} ${d.path}`);
      // Order of the backlog: 4 int TRUNCATEs, 2 TOAST TRUNCATEs, r, VACUUM v, TRUNCATE d, DROP d,
      // TRUNCATE f.
      expect(byRel(p.drops.list)).toEqual([
        ...Array(4).fill('DropRelFileNodesAllBuffers cached-lookup'),
        ...Array(2).fill('DropRelFileNodesAllBuffers full-scan'),
        'DropRelFileNodesAllBuffers full-scan',
        'DropRelFileNodeBuffers cached-lookup',
        'DropRelFileNodesAllBuffers full-scan',
        'DropRelFileNodesAllBuffers full-scan',
        'DropRelFileNodesAllBuffers cached-lookup',
      ]);
      // f: main (1 block) and the FSM replay created (3 blocks: root, level 1, leaf).
      expect(p.drops.list[10].probes).toBe(4);
      expect(p.drops.list[4].why).toMatch(/size not cached/);
      expect(p.drops.list[6].why).toMatch(/not touched by replay since the standby started/);
      expect(p.drops.descriptorsScanned).toBe(5 * 16384);
      // pg_control: one per relation-dropping commit and per truncation.
      expect(p.counts.replay.controlFileUpdates).toBe(11);
    });

    it('refuses each bad input with one message naming what was wrong', async () => {
      const run = async (args: string[]) => {
        const r = await runScript('predict.ts', args);
        expect(r.code).not.toBe(0);
        expect(r.stderr.trim().split('\n')).toHaveLength(1);
        return r.stderr;
      };
      const port = await freePort('127.0.0.1');
      expect(await run(['--standby', `postgresql://postgres@127.0.0.1:${port}/postgres`])).toMatch(
        /cannot connect to the standby postgresql:\/\/postgres@127\.0\.0\.1:\d+\/postgres/,
      );
      expect(await run(['--standby', primary, '--pgdata', pgDataDir(dir, 'primary')])).toMatch(
        /is not in recovery/,
      );
      expect(await run(['--standby', standby])).toMatch(
        /no way to read the WAL range .* pass --pgdata DIR .* or --primary URL/,
      );
      expect(await run(['--standby', standby, '--pgdata', '/nonexistent'])).toMatch(
        /--pgdata \/nonexistent: cannot read PG_VERSION/,
      );
      // A data directory whose pg_wal cannot be read (here: not a directory).
      const fake = path.join(path.dirname(dir), 'fake-pgdata');
      fs.mkdirSync(path.join(fake, 'global'), { recursive: true });
      fs.writeFileSync(path.join(fake, 'PG_VERSION'), '15\n');
      fs.copyFileSync(
        path.join(pgDataDir(dir, 'standby'), 'global', 'pg_control'),
        path.join(fake, 'global', 'pg_control'),
      );
      // postmaster.pid too: the directory must look like the running standby's own.
      fs.copyFileSync(
        path.join(pgDataDir(dir, 'standby'), 'postmaster.pid'),
        path.join(fake, 'postmaster.pid'),
      );
      fs.writeFileSync(path.join(fake, 'pg_wal'), '');
      expect(await run(['--standby', standby, '--pgdata', fake])).toMatch(
        /pg_wal cannot be read \(ENOTDIR\)/,
      );
      // A pg_wal from which the range's segments were removed.
      fs.rmSync(path.join(fake, 'pg_wal'));
      fs.mkdirSync(path.join(fake, 'pg_wal'));
      expect(await run(['--standby', standby, '--pgdata', fake])).toMatch(
        /no WAL segment of timeline 1 \(the one holding \S+ first\) is in \S+: the range \S+ → \S+ on timeline 1 needs it .*; pass --primary URL/,
      );
      const bad = path.join(path.dirname(dir), 'bad-profile.json');
      fs.writeFileSync(bad, '{"format": ');
      expect(await run(['--standby', standby, '--profile', bad])).toMatch(
        /cost profile .* is not valid JSON/,
      );
      expect(
        await run(['--accuracy', '--accuracy-log', path.join(path.dirname(dir), 'none.jsonl')]),
      ).toMatch(/no accuracy log at/);
    }, 120_000);

    it.skipIf(gdbReason !== null)(
      `matches PostgreSQL's own drop path, call by call (gdb on the startup process)${gdbReason ? ` (skipped: ${gdbReason})` : ''}, then --verify promotes and --accuracy summarises`,
      async () => {
        const [{ pid }] = await sql(
          'standby',
          "SELECT pid FROM pg_stat_activity WHERE backend_type = 'startup'",
        );
        let trace: DropTrace | null = await traceDrops(Number(pid));
        try {
          const log = path.join(path.dirname(dir), 'accuracy.jsonl');
          const v = await runScript(
            'predict.ts',
            [
              '--standby',
              standby,
              '--pgdata',
              pgDataDir(dir, 'standby'),
              '--verify',
              '--log',
              pgLogPath(dir, 'standby'),
              '--accuracy-log',
              log,
              '--json',
            ],
            180_000,
          );
          expect(v.code, v.stderr).toBe(0);
          expect(v.stderr).toMatch(/verify: resuming replay on and promoting .* now/);
          expect(v.json.verify.newTimeline).toBe(2);
          expect(v.json.verify.measured.writableS).toBeGreaterThan(0);
          const observed = await trace.finish();
          trace = null;
          const predicted = v.json.prediction.drops.list;
          expect(observed.map((o) => `${o.fn} ${o.path}`)).toEqual(
            predicted.map((d: Json) => `${d.fn} ${d.path}`),
          );
          // On the lookup path PostgreSQL probes exactly the blocks the cached sizes give.
          observed.forEach((o, i) => {
            if (o.path === 'cached-lookup') expect(o.lookups).toBe(predicted[i].probes);
          });
          const a = await runScript('predict.ts', ['--accuracy', '--accuracy-log', log]);
          expect(a.code).toBe(0);
          expect(a.stdout).toMatch(/1 verified promotions/);
          const [rec] = await sql('standby', 'SELECT pg_is_in_recovery() AS r');
          expect(rec.r).toBe(false);
        } finally {
          trace?.kill();
        }
      },
      240_000,
    );
  },
);
