/**
 * `npm run predict` on a standby with a recovery target (real PostgreSQL 15; skipped with the
 * reason without it). The standby runs with recovery_target_lsn in the middle of a backlog it has
 * received while paused, recovery_target_action = pause. Checked: predict counts only the records
 * up to PostgreSQL's stop (recoveryStopsAfter: the first record starting at or after the target),
 * says the target bounds the range, and the stop it names is where PostgreSQL's replay then
 * really stops (pg_last_wal_replay_lsn() once paused at the target). Then the standby paused at its
 * target: nothing more to replay — while streaming, and after a restart that reached the target in
 * its own pg_wal without streaming (pg_last_wal_receive_lsn() NULL), which predict used to refuse
 * as "has received no WAL yet". No timing is asserted.
 */
import * as fs from 'node:fs';
import * as path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { runScript } from '../helpers/cli.ts';
import { DEFAULT_PROFILE, loadProfile } from '../../cost-model/profile.ts';
import { IncrementalPredictor } from '../../scripts/exporter/incremental.ts';
import { PgDirs, pgUnavailableReason } from '../helpers/postgres.ts';
import {
  initPgCluster,
  pgConnect,
  pgCtl,
  pgDataDir,
  readPgEngine,
  runPgProgram,
} from '../../scripts/postgres/pg-cluster.ts';
import { parseWaldumpStats } from '../../scripts/postgres/pg-waldump.ts';
import { pollUntil } from '../../server/poll.ts';
import { formatLsn, parseLsn } from '../../wal/lsn.ts';

const reason = pgUnavailableReason();
const dirs = new PgDirs();
afterAll(() => dirs.removeAll());

type Json = any; // eslint-disable-line @typescript-eslint/no-explicit-any

describe.skipIf(reason !== null)(
  `predict with a recovery target on real PostgreSQL 15${reason ? ` (skipped: ${reason})` : ''}`,
  () => {
    it('counts only the WAL up to the target, names the stop PostgreSQL makes, and predicts a standby paused at its target', async () => {
      const dir = dirs.fresh('predict-target');
      await initPgCluster(dir, { sharedBuffers: '128MB', primarySharedBuffers: '128MB' });
      const sData = pgDataDir(dir, 'standby');
      const sql = async (node: 'primary' | 'standby', ...stmts: string[]) => {
        const c = await pgConnect(dir, node);
        try {
          let rows: Json[] = [];
          for (const s of stmts) rows = (await c.query(s)).rows;
          return rows;
        } finally {
          await c.end();
        }
      };
      const one = async (node: 'primary' | 'standby', q: string) => (await sql(node, q))[0];
      await sql(
        'primary',
        'CREATE TABLE t (c int)',
        'INSERT INTO t SELECT generate_series(1, 500)',
      );
      const start = String((await one('primary', 'SELECT pg_current_wal_lsn()::text AS l')).l);
      // The target: 40 kB into the backlog written below (an LSN need not be a record's start).
      const target = formatLsn(parseLsn(start) + 40_000);
      fs.appendFileSync(
        path.join(sData, 'postgresql.auto.conf'),
        `recovery_target_lsn = '${target}'\nrecovery_target_action = 'pause'\n`,
      );
      await pgCtl(dir, 'standby', 'stop', { mode: 'fast' });
      await pgCtl(dir, 'standby', 'start');
      await sql('standby', 'SELECT pg_wal_replay_pause()');
      await pollUntil(
        async () =>
          (await one('standby', 'SELECT pg_get_wal_replay_pause_state() AS p')).p === 'paused',
        'replay to pause',
        60_000,
        50,
      );
      // The backlog: past the target, then a TRUNCATE that a promotion would not replay.
      await sql('primary', 'INSERT INTO t SELECT generate_series(1, 3000)', 'TRUNCATE t');
      const end = String((await one('primary', 'SELECT pg_current_wal_flush_lsn()::text AS l')).l);
      await pollUntil(
        async () =>
          (await one('standby', `SELECT pg_last_wal_receive_lsn() >= '${end}' AS ok`)).ok === true,
        'the standby to receive the backlog',
        60_000,
        50,
      );
      const predict = () =>
        runScript('predict.ts', [
          ...[
            '--standby',
            `postgresql://postgres@127.0.0.1:${readPgEngine(dir).ports.standby}/postgres`,
          ],
          ...['--pgdata', sData, '--json'],
        ]);
      const r = await predict();
      expect(r.stderr).toBe('');
      const p = r.json.predictions[0];
      expect(p.recoveryTarget.stop).toMatchObject({ when: 'after', reached: false });
      expect(parseLsn(p.recoveryTarget.stop.lsn)).toBeGreaterThanOrEqual(parseLsn(target));
      expect(p.note).toMatch(/a recovery target bounds the range: recovery_target_lsn = /);
      expect(parseLsn(p.range.to)).toBeLessThan(parseLsn(end));
      expect(p.drops.list).toEqual([]); // the TRUNCATE lies past the target
      // Counted: exactly what pg_waldump counts from the replay LSN to the stop.
      const dump = await runPgProgram(readPgEngine(dir), 'pg_waldump', [
        ...['-p', path.join(sData, 'pg_wal'), '-s', p.range.from, '-e', p.range.to],
        '--stats=record',
      ]);
      expect(p.records.total).toBe(parseWaldumpStats(dump.stdout).total.count);
      // The exporter's cycle stops where predict does (it predicts whole while a target is set).
      const inc = new IncrementalPredictor();
      const profile = loadProfile(DEFAULT_PROFILE);
      const cycle = await inc.predict({
        standby: `postgresql://postgres@127.0.0.1:${readPgEngine(dir).ports.standby}/postgres`,
        ...{ pgdata: sData, profile, profileRef: DEFAULT_PROFILE, pgWaldump: '' },
      });
      expect(cycle.range).toEqual(p.range);
      expect(cycle.records.total).toBe(p.records.total);
      expect(inc.restarts.not_incremental).toBe(1);
      // PostgreSQL stops where predict said: resumed, it replays to the target and pauses there.
      await sql('standby', 'SELECT pg_wal_replay_resume()');
      await pollUntil(
        async () =>
          (await one('standby', 'SELECT pg_get_wal_replay_pause_state() AS p')).p === 'paused',
        'replay to pause at the recovery target',
        60_000,
        50,
      );
      expect(String((await one('standby', 'SELECT pg_last_wal_replay_lsn()::text AS l')).l)).toBe(
        p.range.to,
      );
      // Paused at its target: nothing more is replayed by a promotion.
      const atTarget = (await predict()).json.predictions[0];
      expect(atTarget.records.total).toBe(0);
      expect(atTarget.range.to).toBe(atTarget.range.from);
      expect(atTarget.recoveryTarget.stop).toMatchObject({ when: 'after', reached: true });
      expect(atTarget.note).toMatch(/was reached after .* replay is paused there/);
      // Restarted: it reaches the target in its own pg_wal and pauses without streaming.
      await pgCtl(dir, 'standby', 'stop', { mode: 'fast' });
      await pgCtl(dir, 'standby', 'start');
      await pollUntil(
        async () =>
          (await one('standby', 'SELECT pg_get_wal_replay_pause_state() AS p')).p === 'paused',
        'replay to pause at the recovery target after the restart',
        60_000,
        50,
      );
      expect((await one('standby', 'SELECT pg_last_wal_receive_lsn() AS l')).l).toBeNull();
      const restarted = await predict();
      expect(restarted.stderr).toBe('');
      expect(restarted.code).toBe(0);
      const q = restarted.json.predictions[0];
      expect(q.records.total).toBe(0);
      expect(q.recoveryTarget.stop.reached).toBe(true);
    }, 400_000);
  },
);
