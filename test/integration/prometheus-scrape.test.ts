/**
 * A real Prometheus scraping the exporter that watches a real PostgreSQL 15 pair (skipped, naming
 * the reason, without PostgreSQL or the prometheus server). Prometheus runs on 127.0.0.1 with a
 * 1 s scrape and evaluation interval and prometheus/walsim-rules.yml with `for: 2s`; the RTO is
 * set once the caught-up standby's predicted time is known (a little above it, then reloaded).
 * Checked through Prometheus's HTTP API: the predicted time is scraped; the RTO alert is not
 * firing; replay paused and a backlog of TRUNCATEs of tables with a never-written TOAST relation
 * built → the predicted time read back rises above the RTO and the alert fires. Every process the
 * test starts is stopped by its pid. No timing is asserted.
 */
import * as fs from 'node:fs';
import * as path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { startExporter, type ExporterProcess } from '../helpers/exporter.ts';
import { PgDirs, pgUnavailableReason } from '../helpers/postgres.ts';
import {
  prometheusUnavailableReason,
  startPrometheus,
  type PrometheusProcess,
} from '../helpers/prometheus.ts';
import {
  initPgCluster,
  pgConnect,
  pgConnectionString,
  pgDataDir,
} from '../../scripts/postgres/pg-cluster.ts';
import { pollUntil } from '../../server/poll.ts';
import { PROJECT_ROOT } from '../../server/entry.ts';

const reason = pgUnavailableReason() ?? prometheusUnavailableReason();
const dirs = new PgDirs();
const TABLES = 60;
const ALERT = 'WalsimStandbyTimeToWritableAboveRTO';

/** The shipped rules with a test RTO and a short `for:`. */
function testRules(rtoSeconds: number): string {
  const rules = fs.readFileSync(path.join(PROJECT_ROOT, 'prometheus', 'walsim-rules.yml'), 'utf8');
  if (!rules.includes('expr: vector(60)') || !rules.includes('for: 5m'))
    throw new Error('walsim-rules.yml no longer has the RTO recording rule or for: 5m');
  return rules
    .replace('expr: vector(60)', `expr: vector(${rtoSeconds})`)
    .replaceAll('for: 5m', 'for: 2s');
}

describe.skipIf(reason !== null)(
  `a real Prometheus scraping the exporter${reason ? ` (skipped: ${reason})` : ''}`,
  () => {
    let dir = '';
    let promDir = '';
    let exporter: ExporterProcess | null = null;
    let prom: PrometheusProcess | null = null;

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
    const predicted = async () =>
      (await prom!.query('walsim_standby_predicted_writable_seconds'))[0]?.value;
    const standbyAt = async (what: 'replay' | 'receive', lsn: string) =>
      pollUntil(
        async () =>
          (await sql('standby', `SELECT pg_last_wal_${what}_lsn() >= '${lsn}' AS ok`))[0]!.ok ===
          true,
        `the standby to ${what} ${lsn}`,
        60_000,
        50,
      );

    beforeAll(async () => {
      dir = dirs.fresh('prometheus');
      // 1GB on the standby: each full-scan drop visits 131,072 descriptors.
      await initPgCluster(dir, { sharedBuffers: '1GB', primarySharedBuffers: '128MB' });
      const stmts: string[] = [];
      for (let i = 1; i <= TABLES; i++)
        stmts.push(`CREATE TABLE t${i} (c text)`, `INSERT INTO t${i} VALUES ('x')`);
      await sql('primary', ...stmts);
      const [p] = await sql('primary', 'SELECT pg_current_wal_lsn()::text AS l');
      await standbyAt('replay', p!.l as string);
      exporter = await startExporter([
        '--standby',
        pgConnectionString(dir, 'standby'),
        '--pgdata',
        pgDataDir(dir, 'standby'),
        '--interval',
        '500ms',
      ]);
      promDir = path.join(path.dirname(dir), 'prometheus');
      fs.mkdirSync(promDir);
      fs.writeFileSync(path.join(promDir, 'walsim-rules.yml'), testRules(1e9));
      prom = await startPrometheus(
        promDir,
        [
          'global:',
          '  scrape_interval: 1s',
          '  evaluation_interval: 1s',
          'rule_files:',
          '  - walsim-rules.yml',
          'scrape_configs:',
          '  - job_name: walsim',
          '    static_configs:',
          `      - targets: ['127.0.0.1:${exporter.port}']`,
          '',
        ].join('\n'),
      );
    }, 240_000);

    afterAll(async () => {
      await prom?.stop();
      await exporter?.stop();
      await dirs.removeAll();
    });

    it('scrapes the predicted time, then sees it rise above the RTO and the alert fire', async () => {
      let baseline = 0;
      await pollUntil(
        async () => {
          const v = await predicted();
          if (v === undefined) return false;
          baseline = v;
          return true;
        },
        'Prometheus to scrape a prediction',
        60_000,
        250,
      );
      expect(baseline).toBeGreaterThan(0);
      expect((await prom!.query('walsim_standby_up'))[0]?.value).toBe(1);

      // The RTO: a little above the caught-up standby's time (end of recovery only).
      const rto = baseline * 1.2;
      fs.writeFileSync(path.join(promDir, 'walsim-rules.yml'), testRules(rto));
      await prom!.reload();
      await pollUntil(
        async () => (await prom!.query('walsim:recovery_time_objective_seconds'))[0]?.value === rto,
        'the reloaded rules to record the test RTO',
        30_000,
        250,
      );
      // Several evaluations (1 s apart, `for: 2s`) without the alert.
      for (let i = 0; i < 4; i++) {
        await new Promise((r) => setTimeout(r, 1000));
        expect((await prom!.alerts()).filter((a) => a.labels.alertname === ALERT)).toEqual([]);
      }

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
      await standbyAt('receive', p!.l as string);

      let risen = 0;
      await pollUntil(
        async () => {
          risen = (await predicted()) ?? 0;
          return risen > rto;
        },
        'the predicted time read through Prometheus to pass the RTO',
        60_000,
        250,
      );
      expect(risen).toBeGreaterThan(baseline);
      // A cycle may have read part of the backlog while it arrived: the next ones read all of it.
      await pollUntil(
        async () =>
          ((await prom!.query('walsim_standby_replay_drop_calls{path="full_scan"}'))[0]?.value ??
            0) >= TABLES,
        `Prometheus to read ${TABLES} full-scan drop calls`,
        60_000,
        250,
      );
      expect((await prom!.query('walsim_standby_replay_paused'))[0]?.value).toBe(1);
      await pollUntil(
        async () =>
          (await prom!.alerts()).some((a) => a.labels.alertname === ALERT && a.state === 'firing'),
        `${ALERT} to fire`,
        60_000,
        250,
      );
      const [alert] = (await prom!.alerts()).filter((a) => a.labels.alertname === ALERT);
      expect(alert!.labels.standby).toBe(
        `127.0.0.1:${new URL(pgConnectionString(dir, 'standby')).port}`,
      );
      expect(Number(alert!.value)).toBeGreaterThan(rto);
    }, 180_000);
  },
);
