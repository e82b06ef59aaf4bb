/**
 * `npm run exporter` against a real PostgreSQL 15 primary + standby (skipped, naming the reason,
 * without the server binaries). The standby is paused with a backlog of TRUNCATEs of tables whose
 * TOAST relation was never written; the exporter watches it (as a pg_monitor role, its password in
 * the URL) and a second standby URL where nothing listens. Checked:
 * - /metrics parses; the good standby is up with a predicted time > 0 whose phases sum to it, the
 *   TRUNCATEs' drop calls counted, replay paused; the dead one is down with connect errors
 *   counted, and the good one is unaffected;
 * - the exporter's numbers equal `npm run predict --json` on the same paused state;
 * - the password is in no label, no metric and no log line;
 * - a web configuration's bearer token is required (401 without it);
 * - the standby stopped: up 0, an error counted, its prediction series gone, the exporter still
 *   serving; started again: up 1;
 * - a role without pg_monitor: a privileges error naming pg_monitor.
 * And, without PostgreSQL: run as `npm run exporter` runs it (tsx, not the suite's entry bundle),
 * its cycle thread loads and cycles (a standby where nothing listens: connect errors counted).
 * No timing is asserted.
 */
import * as fs from 'node:fs';
import * as path from 'node:path';
import bcrypt from 'bcryptjs';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { runScript } from '../helpers/cli.ts';
import { startExporter, type ExporterProcess } from '../helpers/exporter.ts';
import { PgDirs, pgUnavailableReason } from '../helpers/postgres.ts';
import { sampleValue, samples, type PromSample } from '../helpers/prom-text.ts';
import {
  initPgCluster,
  pgConnect,
  pgCtl,
  pgDataDir,
  readPgEngine,
} from '../../scripts/postgres/pg-cluster.ts';
import { pollUntil } from '../../server/poll.ts';
import { freePort } from '../../server/ports.ts';

describe('npm run exporter as tsx runs it', () => {
  it("starts its cycle thread through tsx's loader: cycles run, the thread never failed", async () => {
    const port = await freePort('127.0.0.1');
    const x = await startExporter(
      ['--standby', `postgresql://u@127.0.0.1:${port}/db`, '--interval', '200ms'],
      { tsx: true },
    );
    try {
      let last: PromSample[] = [];
      await pollUntil(
        async () => {
          last = (await x.scrape()).samples;
          return (sampleValue(last, 'walsim_exporter_cycles_total') ?? 0) >= 2;
        },
        'two cycles of the exporter run with tsx',
        45_000,
        100,
      );
      const sb = { standby: `127.0.0.1:${port}` };
      expect(sampleValue(last, 'walsim_exporter_cycle_thread_up')).toBe(1);
      expect(sampleValue(last, 'walsim_exporter_cycle_thread_restarts_total')).toBe(0);
      expect(sampleValue(last, 'walsim_standby_up', sb)).toBe(0);
      expect(
        sampleValue(last, 'walsim_standby_prediction_errors_total', { ...sb, reason: 'connect' }),
      ).toBeGreaterThanOrEqual(2);
      expect(x.output().stderr).not.toMatch(/cycle thread failed/);
    } finally {
      await x.stop();
    }
  });
});

const reason = pgUnavailableReason();
const dirs = new PgDirs();
const TABLES = 12;
const TOKEN = 'scrape-token-for-tests';

describe.skipIf(reason !== null)(
  `npm run exporter on real PostgreSQL 15${reason ? ` (skipped: ${reason})` : ''}`,
  () => {
    let dir = '';
    let standbyUrl = '';
    let primaryUrl = '';
    let good = '';
    let dead = '';
    let exporter: ExporterProcess | null = null;
    const auth = `Bearer ${TOKEN}`;

    const sql = async (node: 'primary' | 'standby', ...stmts: string[]) => {
      const c = await pgConnect(dir, node);
      try {
        let last: Array<Record<string, unknown>> = [];
        for (const s of stmts) last = (await c.query(s)).rows;
        return last;
      } finally {
        await c.end();
      }
    };
    /** Scrape until `ok` holds for the samples (the cycle runs every 300 ms). */
    const scrapeUntil = async (what: string, ok: (s: PromSample[]) => boolean) => {
      let last: PromSample[] = [];
      await pollUntil(
        async () => {
          last = (await exporter!.scrape(auth)).samples;
          return ok(last);
        },
        what,
        60_000,
        200,
      );
      return last;
    };

    beforeAll(async () => {
      dir = dirs.fresh('exporter');
      await initPgCluster(dir, { sharedBuffers: '128MB', primarySharedBuffers: '128MB' });
      const ports = readPgEngine(dir).ports;
      standbyUrl = `postgresql://walsim_mon:SECRETPW@127.0.0.1:${ports.standby}/postgres`;
      primaryUrl = `postgresql://walsim_mon:SECRETPW@127.0.0.1:${ports.primary}/postgres`;
      const stmts = [
        'CREATE ROLE walsim_mon LOGIN IN ROLE pg_monitor',
        'CREATE ROLE walsim_nopriv LOGIN',
      ];
      for (let i = 1; i <= TABLES; i++)
        stmts.push(`CREATE TABLE t${i} (c text)`, `INSERT INTO t${i} VALUES ('x')`);
      await sql('primary', ...stmts);
      const [p0] = await sql('primary', 'SELECT pg_current_wal_lsn()::text AS l');
      await pollUntil(
        async () =>
          (await sql('standby', `SELECT pg_last_wal_replay_lsn() >= '${p0!.l}' AS ok`))[0]!.ok ===
          true,
        'the standby to replay the tables',
        60_000,
        50,
      );
      await sql('standby', 'SELECT pg_wal_replay_pause()');
      await pollUntil(
        async () =>
          (await sql('standby', 'SELECT pg_get_wal_replay_pause_state() AS s'))[0]!.s === 'paused',
        'replay to pause',
        30_000,
        50,
      );
      const backlog: string[] = [];
      for (let i = 1; i <= TABLES; i++) backlog.push(`TRUNCATE t${i}`);
      await sql('primary', ...backlog);
      const [p] = await sql('primary', 'SELECT pg_current_wal_flush_lsn()::text AS l');
      await pollUntil(
        async () =>
          (await sql('standby', `SELECT pg_last_wal_receive_lsn() >= '${p!.l}' AS ok`))[0]!.ok ===
          true,
        'the standby to receive the backlog',
        30_000,
        50,
      );
      const webConfig = path.join(path.dirname(dir), 'web-config.yml');
      fs.writeFileSync(webConfig, `bearer_tokens:\n  - "${bcrypt.hashSync(TOKEN, 4)}"\n`);
      const deadPort = await freePort('127.0.0.1');
      good = `127.0.0.1:${ports.standby}`;
      dead = `127.0.0.1:${deadPort}`;
      exporter = await startExporter([
        '--standby',
        standbyUrl,
        '--pgdata',
        pgDataDir(dir, 'standby'),
        '--standby',
        `postgresql://walsim_mon:SECRETPW@127.0.0.1:${deadPort}/postgres`,
        '--primary',
        primaryUrl,
        '--interval',
        '300ms',
        '--web-config',
        webConfig,
      ]);
    }, 240_000);

    afterAll(async () => {
      await exporter?.stop();
      await dirs.removeAll();
    });

    it("serves the paused standby's prediction, and the dead standby as down", async () => {
      expect((await exporter!.scrape()).status).toBe(401);
      expect((await exporter!.scrape('Bearer wrong-token')).status).toBe(401);
      const s = await scrapeUntil(
        'both standbys to be predicted once',
        (x) =>
          sampleValue(x, 'walsim_standby_up', { standby: good }) === 1 &&
          (sampleValue(x, 'walsim_standby_prediction_errors_total', {
            standby: dead,
            reason: 'connect',
          }) ?? 0) >= 1,
      );
      const v = (name: string, labels: Record<string, string> = {}) =>
        sampleValue(s, name, { standby: good, ...labels });
      expect(sampleValue(s, 'walsim_standby_up', { standby: dead })).toBe(0);
      expect(v('walsim_standby_prediction_errors_total', { reason: 'connect' })).toBe(0);
      const total = v('walsim_standby_predicted_writable_seconds')!;
      expect(total).toBeGreaterThan(0);
      const phases = samples(s, 'walsim_standby_predicted_phase_seconds', { standby: good });
      expect(phases.map((x) => x.labels.phase).sort()).toEqual([
        'end_of_recovery',
        'open_for_writes',
        'replay',
      ]);
      expect(phases.reduce((a, x) => a + x.value, 0)).toBeCloseTo(total, 9);
      const parts = samples(s, 'walsim_standby_predicted_replay_part_seconds', { standby: good });
      expect(parts.reduce((a, x) => a + x.value, 0)).toBeCloseTo(
        v('walsim_standby_predicted_phase_seconds', { phase: 'replay' })!,
        9,
      );
      const fullScans = v('walsim_standby_replay_drop_calls', { path: 'full_scan' })!;
      const lookups = v('walsim_standby_replay_drop_calls', { path: 'cached_lookup' })!;
      // Each TRUNCATE's commit drops the old heap and its never-written TOAST relation and index.
      expect(fullScans + lookups).toBeGreaterThanOrEqual(TABLES);
      expect(fullScans).toBeGreaterThanOrEqual(TABLES);
      expect(v('walsim_standby_replay_drop_scanned_descriptors')).toBe(
        fullScans * v('walsim_standby_shared_buffers_buffers')!,
      );
      expect(v('walsim_standby_replay_paused')).toBe(1);
      expect(v('walsim_standby_unreplayed_wal_bytes')).toBeGreaterThan(0);
      expect(v('walsim_standby_unreceived_wal_bytes')).toBeGreaterThanOrEqual(0);
      // The fleet rules' inputs: positions as bytes, the primary's LSN at or past them.
      const receive = v('walsim_standby_wal_receive_lsn_bytes')!;
      expect(v('walsim_standby_wal_replay_lsn_bytes')).toBe(
        receive - v('walsim_standby_unreplayed_wal_bytes')!,
      );
      expect(v('walsim_standby_patroni_position_bytes')).toBe(receive);
      const primaryLsn = samples(s, 'walsim_primary_current_wal_lsn_bytes');
      expect(primaryLsn.map((x) => x.labels.primary)).toEqual([
        `127.0.0.1:${new URL(primaryUrl).port}`,
      ]);
      expect(primaryLsn[0]!.value).toBeGreaterThanOrEqual(receive);
      expect(v('walsim_standby_replay_records', { rmgr: 'Transaction', type: 'COMMIT' })).toBe(
        TABLES,
      );
      expect(v('walsim_standby_patroni_pick')).toBe(1);
      expect(v('walsim_standby_writable_first')).toBe(1);
      expect(sampleValue(s, 'walsim_standby_patroni_pick', { standby: dead })).toBeUndefined();
      expect(v('walsim_standby_prediction_duration_seconds')).toBeGreaterThan(0);
      expect(v('walsim_standby_last_good_prediction_age_seconds')).toBeGreaterThanOrEqual(0);
      expect(
        sampleValue(s, 'walsim_profile_info', { profile: 'seed-001', fitted_major: '14' }),
      ).toBe(1);
    });

    it('serves what npm run predict prints for the same standby', async () => {
      const r = await runScript('predict.ts', [
        '--standby',
        standbyUrl,
        '--pgdata',
        pgDataDir(dir, 'standby'),
        '--primary',
        primaryUrl,
        '--json',
      ]);
      expect(r.code).toBe(0);
      const p = r.json.predictions[0];
      const s = (await exporter!.scrape(auth)).samples;
      const v = (name: string, labels: Record<string, string> = {}) =>
        sampleValue(s, name, { standby: good, ...labels });
      expect(v('walsim_standby_predicted_writable_seconds')).toBeCloseTo(p.predicted.writableS, 12);
      expect(v('walsim_standby_unreplayed_wal_bytes')).toBe(p.range.bytes);
      expect(v('walsim_standby_replay_drop_calls', { path: 'full_scan' })).toBe(
        p.drops.calls.fullScan,
      );
      const records = samples(s, 'walsim_standby_replay_records', { standby: good });
      expect(
        Object.fromEntries(records.map((x) => [`${x.labels.rmgr}/${x.labels.type}`, x.value])),
      ).toEqual(
        Object.fromEntries(
          p.records.byType.map((t: { rmgr: string; type: string; count: number }) => [
            `${t.rmgr}/${t.type}`,
            t.count,
          ]),
        ),
      );
    });

    it('never shows the password', async () => {
      const { body } = await exporter!.scrape(auth);
      const { stdout, stderr } = exporter!.output();
      expect(stderr).toContain('connect'); // the dead standby's errors are logged…
      for (const text of [body, stdout, stderr]) expect(text).not.toContain('SECRETPW');
    });

    it('a standby that goes away: up 0, an error counted, still serving; back: up 1', async () => {
      const before = sampleValue(
        (await exporter!.scrape(auth)).samples,
        'walsim_standby_prediction_errors_total',
        { standby: good, reason: 'connect' },
      )!;
      await pgCtl(dir, 'standby', 'stop', { mode: 'fast' });
      const down = await scrapeUntil(
        'the stopped standby to be down',
        (x) => sampleValue(x, 'walsim_standby_up', { standby: good }) === 0,
      );
      expect(
        sampleValue(down, 'walsim_standby_prediction_errors_total', {
          standby: good,
          reason: 'connect',
        }),
      ).toBeGreaterThan(before);
      expect(
        sampleValue(down, 'walsim_standby_predicted_writable_seconds', { standby: good }),
      ).toBeUndefined();
      expect(
        sampleValue(down, 'walsim_standby_last_good_prediction_age_seconds', { standby: good }),
      ).toBeGreaterThan(0);
      await pgCtl(dir, 'standby', 'start');
      await scrapeUntil(
        'the restarted standby to be up again',
        (x) => sampleValue(x, 'walsim_standby_up', { standby: good }) === 1,
      );
    }, 120_000);

    it('a role without pg_monitor: a privileges error that names pg_monitor', async () => {
      const port = readPgEngine(dir).ports.standby;
      const e = await startExporter([
        '--standby',
        `postgresql://walsim_nopriv@127.0.0.1:${port}/postgres`,
        '--pgdata',
        pgDataDir(dir, 'standby'),
        '--interval',
        '300ms',
      ]);
      try {
        await pollUntil(
          async () =>
            (sampleValue((await e.scrape()).samples, 'walsim_standby_prediction_errors_total', {
              reason: 'privileges',
            }) ?? 0) >= 1,
          'a privileges error',
          60_000,
          200,
        );
        expect(e.output().stderr).toMatch(/privileges: .*pg_monitor/);
      } finally {
        await e.stop();
      }
    }, 120_000);
  },
);
