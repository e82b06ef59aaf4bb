/**
 * `--engine postgres`: the dashboard graphs the standby's predicted time to writable over time
 * beside its lag, on the page, from the exporter's prediction cycle (dashboard/predictions.ts over
 * scripts/predict/). A real PostgreSQL 15 primary + standby and the dashboard in chromium; read
 * from the DOM: the prediction chart's series gets points and the card shows the seconds; after
 * pause (the button) and a backlog of TRUNCATEs on the primary, the predicted seconds rise above
 * what they were with nothing to replay. Skipped, with the reason, without the PostgreSQL
 * binaries or chromium.
 */
import type { Browser } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { chromiumSkipReason, launchChromium } from '../helpers/browser.ts';
import { DashboardPage, startTestDashboard } from '../helpers/dashboard.ts';
import { PgDirs, pgUnavailableReason } from '../helpers/postgres.ts';
import { DEFAULT_PROFILE, defaultCostProfile } from '../../cost-model/profile.ts';
import type { Dashboard } from '../../dashboard/server.ts';
import { PgSource } from '../../dashboard/pg-source.ts';
import { PgPredictions } from '../../dashboard/predictions.ts';
import { initPgCluster, pgConnect } from '../../scripts/postgres/pg-cluster.ts';

const reason = pgUnavailableReason() ?? chromiumSkipReason();
const TABLES = 40;

describe.skipIf(reason !== null)(
  `dashboard: predicted time to writable on real PostgreSQL${reason ? ` (skipped: ${reason})` : ''}`,
  () => {
    const dirs = new PgDirs();
    let dir = '';
    let dash: Dashboard;
    let browser: Browser;
    let ui: DashboardPage;

    const sql = async (node: 'primary' | 'standby', ...stmts: string[]) => {
      const c = await pgConnect(dir, node);
      try {
        for (const s of stmts) await c.query(s);
      } finally {
        await c.end();
      }
    };
    const chart = () => ui.node('standby').locator('[data-testid="prediction"]');
    const points = async () => Number((await chart().getAttribute('data-points')) ?? 0);
    const last = async () => Number((await chart().getAttribute('data-last')) || NaN);

    beforeAll(async () => {
      dir = dirs.fresh('dashboard-predict');
      await initPgCluster(dir, { sharedBuffers: '128MB', primarySharedBuffers: '128MB' });
      const stmts: string[] = [];
      for (let i = 1; i <= TABLES; i++)
        stmts.push(`CREATE TABLE t${i} (c text)`, `INSERT INTO t${i} VALUES ('x')`);
      await sql('primary', ...stmts);
      const profile = defaultCostProfile();
      dash = await startTestDashboard(new PgSource(dir), {
        predictions: new PgPredictions(dir, profile, DEFAULT_PROFILE, 1000),
      });
      browser = await launchChromium();
      const page = await browser.newPage({ viewport: { width: 1800, height: 1200 } });
      await page.goto(dash.url);
      ui = new DashboardPage(page);
    }, 180_000);

    afterAll(async () => {
      await browser?.close();
      await dash?.close();
      await dirs.removeAll();
    });

    it("graphs the standby's predicted time to writable beside its lag", async () => {
      await expect.poll(points, { timeout: 60_000 }).toBeGreaterThanOrEqual(2);
      expect(await ui.field('standby', 'predictedWritable')).toMatch(/^\d+\.\d{3} s \(seed-001\)$/);
      // The lag beside it, in the same chart's legend; no prediction chart on the primary.
      expect(await chart().locator('.u-legend').innerText()).toContain('lag (replay_lag)');
      expect(await ui.node('primary').locator('[data-testid="prediction"]').count()).toBe(0);
    });

    it('rises once a TRUNCATE backlog waits behind a paused replay', async () => {
      // Nothing to replay: the prediction is the end of recovery and opening for writes.
      await expect.poll(() => ui.field('standby', 'lagBytes'), { timeout: 30_000 }).toBe('0 B');
      const caughtUp = await points();
      // Two more cycles' points: a prediction made after replay caught up.
      await expect.poll(points, { timeout: 30_000 }).toBeGreaterThan(caughtUp + 2);
      const idle = await last();
      expect(idle).toBeGreaterThan(0);
      await ui.press('standby', 'pause');
      await expect
        .poll(() => ui.field('standby', 'pauseState'), { timeout: 30_000 })
        .toBe('paused');
      const before = await points();
      const backlog: string[] = [];
      for (let i = 1; i <= TABLES; i++) backlog.push(`TRUNCATE t${i}`);
      await sql('primary', ...backlog);
      await expect.poll(last, { timeout: 60_000 }).toBeGreaterThan(idle);
      expect(await points()).toBeGreaterThan(before);
      const risen = await last();
      await ui.press('standby', 'resume');
      await expect.poll(last, { timeout: 60_000 }).toBeLessThan(risen);
    });
  },
);
