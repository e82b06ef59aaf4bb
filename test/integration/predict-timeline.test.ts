/**
 * `npm run predict` on a standby that has followed a timeline switch (real PostgreSQL 15; skipped
 * with the reason without it). A cascade: primary P → standby S1 → standby S2 (S2 streams from S1).
 * S2's last restartpoint is on timeline 1, in a segment before the switch; P stops, S1 is promoted
 * (timeline 2) and S2 follows it (recovery_target_timeline = latest, PostgreSQL's default). S2 is
 * paused with a backlog on timeline 2. The WAL predict reads, [restartpoint redo, receive LSN),
 * starts on timeline 1 and ends on timeline 2: segments before the switch exist only as timeline 1
 * files, so reading the whole range with `pg_waldump -t 2` fails ("could not find file"). Checked:
 * predict reads each part on the timeline current at its LSNs, and counts what pg_waldump counts
 * on each part.
 */
import * as fs from 'node:fs';
import * as path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { runScript } from '../helpers/cli.ts';
import { PgDirs, pgUnavailableReason } from '../helpers/postgres.ts';
import {
  initPgCluster,
  pgConnect,
  pgCtl,
  readPgEngine,
  runPgProgram,
} from '../../scripts/postgres/pg-cluster.ts';
import { parseWaldumpStats } from '../../scripts/postgres/pg-waldump.ts';
import { pollUntil } from '../../server/poll.ts';
import { freePort } from '../../server/ports.ts';
import pg from 'pg';

const reason = pgUnavailableReason();
const dirs = new PgDirs();

type Json = any; // eslint-disable-line @typescript-eslint/no-explicit-any

describe.skipIf(reason !== null)(
  `predict on a standby that followed a timeline switch${reason ? ` (skipped: ${reason})` : ''}`,
  () => {
    let dir = '';
    let s2Dir = '';
    let s2Port = 0;
    let s2Url = '';

    const query = async (c: pg.Client, ...stmts: string[]) => {
      let last: Json[] = [];
      for (const s of stmts) last = (await c.query(s)).rows;
      return last;
    };
    const onNode = async (node: 'primary' | 'standby', ...stmts: string[]) => {
      const c = await pgConnect(dir, node);
      try {
        return await query(c, ...stmts);
      } finally {
        await c.end();
      }
    };
    const onS2 = async (...stmts: string[]) => {
      const c = new pg.Client({ connectionString: s2Url });
      c.on('error', () => {});
      await c.connect();
      try {
        return await query(c, ...stmts);
      } finally {
        await c.end();
      }
    };
    const s2Has = (lsn: string, what: 'replay' | 'receive', why: string) =>
      pollUntil(
        async () =>
          (await onS2(`SELECT pg_last_wal_${what}_lsn() >= '${lsn}'::pg_lsn AS ok`))[0].ok === true,
        why,
        60_000,
        50,
      );
    const pgCtlS2 = (args: string[]) =>
      runPgProgram(readPgEngine(dir), 'pg_ctl', ['-D', s2Dir, ...args], { cwd: dir });

    beforeAll(async () => {
      dir = dirs.fresh('predict-tli');
      await initPgCluster(dir, { sharedBuffers: '128MB', primarySharedBuffers: '128MB' });
      const engine = readPgEngine(dir);
      // S2: a base backup of P, streaming from S1 (cascading).
      s2Dir = path.join(dir, 'standby2');
      s2Port = await freePort('127.0.0.1');
      await runPgProgram(
        engine,
        'pg_basebackup',
        [
          ...['-D', s2Dir, '-R', '-X', 'stream', '-c', 'fast', '-h', '127.0.0.1'],
          ...['-p', String(engine.ports.primary), '-U', 'postgres', '--no-sync'],
        ],
        { cwd: dir },
      );
      fs.appendFileSync(
        path.join(s2Dir, 'postgresql.conf'),
        `\nport = ${s2Port}\nsynchronous_standby_names = ''\n`,
      );
      fs.appendFileSync(
        path.join(s2Dir, 'postgresql.auto.conf'),
        `primary_conninfo = 'host=127.0.0.1 port=${engine.ports.standby} user=postgres application_name=s2'\n`,
      );
      await pgCtlS2(['start', '-l', path.join(dir, 'standby2.log'), '-w', '-t', '120']);
      s2Url = `postgresql://postgres@127.0.0.1:${s2Port}/postgres`;
      // Timeline 1: writes over three segments, so S2's restartpoint (the backup's checkpoint)
      // lies segments before the switch point.
      await onNode(
        'primary',
        'CREATE TABLE a (c int)',
        'INSERT INTO a SELECT generate_series(1, 1000)',
        'SELECT pg_switch_wal()',
        'INSERT INTO a SELECT generate_series(1, 1000)',
        'SELECT pg_switch_wal()',
        'INSERT INTO a SELECT generate_series(1, 1000)',
      );
      const [p1] = await onNode('primary', 'SELECT pg_current_wal_lsn()::text AS l');
      await s2Has(p1.l, 'replay', 'S2 to replay timeline 1');
      await pgCtl(dir, 'primary', 'stop', { mode: 'fast' });
      await pgCtl(dir, 'standby', 'promote');
      await onNode('standby', 'CREATE TABLE b (c int)', 'INSERT INTO b VALUES (1)');
      const [s1] = await onNode('standby', 'SELECT pg_current_wal_lsn()::text AS l');
      await s2Has(s1.l, 'replay', 'S2 to follow S1 onto timeline 2');
      await onS2('SELECT pg_wal_replay_pause()');
      await pollUntil(
        async () => (await onS2('SELECT pg_get_wal_replay_pause_state() AS s'))[0].s === 'paused',
        'S2 to pause',
        30_000,
        50,
      );
      await onNode('standby', 'TRUNCATE a', 'INSERT INTO b VALUES (2)');
      const [s1b] = await onNode('standby', 'SELECT pg_current_wal_lsn()::text AS l');
      await s2Has(s1b.l, 'receive', 'S2 to receive the backlog');
    }, 300_000);

    afterAll(async () => {
      if (s2Dir !== '') await pgCtlS2(['stop', '-m', 'immediate', '-w']).catch(() => {});
      await dirs.removeAll();
    });

    it('reads each part of the range on the timeline current at its LSNs', async () => {
      const [cp] = await onS2(
        `SELECT redo_lsn::text AS redo, timeline_id AS tli,
                (SELECT received_tli FROM pg_stat_wal_receiver) AS rtli
           FROM pg_control_checkpoint()`,
      );
      // The set-up is what the test claims: the restartpoint is on timeline 1, replay on 2.
      expect(cp.tli).toBe(1);
      expect(cp.rtli).toBe(2);
      const r = await runScript('predict.ts', ['--standby', s2Url, '--pgdata', s2Dir, '--json']);
      expect(r.stderr).toBe('');
      expect(r.code).toBe(0);
      const p = r.json.predictions[0];
      expect(p.paused).toBe(true);
      expect(p.source.learnedRecords).toBeGreaterThan(0);
      // The backlog (timeline 2 only) counted as pg_waldump -t 2 counts it.
      const stats = parseWaldumpStats(
        (
          await runPgProgram(readPgEngine(dir), 'pg_waldump', [
            '--stats=record',
            '-p',
            path.join(s2Dir, 'pg_wal'),
            '-t',
            '2',
            '-s',
            p.range.from,
            '-e',
            p.range.to,
          ])
        ).stdout,
      );
      expect(p.records.total).toBe(stats.total.count);
      // TRUNCATE a: a's size was cached by replay on timeline 1 (read across the switch).
      expect(p.drops.list.map((d: Json) => d.path)).toEqual(['cached-lookup']);
    }, 120_000);
  },
);
