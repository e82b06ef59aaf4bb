/**
 * The dashboard's controls and bounds against a real walsim primary + standby, in chromium, read
 * from the DOM: the poll bound (INV-DASH-1, counted, with several pages and API readers open), a
 * node restarted through the CLI followed (INV-DASH-3), the Results view of a finished sweep (the
 * committed fixture: a real 12-cell `npm run sweep -- multi` at 16MB/32MB/64MB), the promote
 * button behind its confirmation (INV-DASH-8), and `--listen` refused without the cluster's
 * password (INV-DASH-4). Skipped, with the reason, when chromium is absent.
 */
import * as fs from 'node:fs';
import * as path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Browser } from 'playwright-core';
import { chromiumSkipReason, launchChromium } from '../helpers/browser.ts';
import { DashboardPage, startTestDashboard } from '../helpers/dashboard.ts';
import { TestCluster } from '../helpers/cluster.ts';
import { runScript } from '../helpers/cli.ts';
import type { Dashboard } from '../../dashboard/server.ts';
import { MIN_POLL_MS } from '../../dashboard/collector.ts';
import { WalsimSource } from '../../dashboard/walsim-source.ts';

const reason = chromiumSkipReason();
const RESULTS = path.join(import.meta.dirname, '..', 'fixtures', 'dashboard', 'sweeps');
const SWEEP = '2026-12-02T04-17-35Z';

interface Cell {
  variant: string;
  sharedBuffers: string;
  strategy: string;
  failoverMsMean: number;
  modeledMsMean: number;
}

describe.skipIf(reason !== null)(
  `dashboard controls in chromium${reason ? ` (skipped: ${reason})` : ''}`,
  () => {
    let cluster: TestCluster;
    let dash: Dashboard;
    let browser: Browser;
    let ui: DashboardPage;

    beforeAll(async () => {
      cluster = await TestCluster.start();
      dash = await startTestDashboard(new WalsimSource(cluster.dir), {
        pollMs: MIN_POLL_MS,
        resultsDir: RESULTS,
      });
      browser = await launchChromium();
      const page = await browser.newPage({ viewport: { width: 1800, height: 1200 } });
      await page.goto(dash.url);
      ui = new DashboardPage(page);
      await page.locator('[data-node]').nth(1).waitFor({ timeout: 20_000 });
    }, 120_000);

    afterAll(async () => {
      await browser?.close();
      await dash?.close();
      await cluster?.destroy();
    });

    it('asks no node more than once per 200 ms, however many pages and API readers there are', async () => {
      const pages = await Promise.all([1, 2, 3].map(() => browser.newPage()));
      await Promise.all(pages.map((p) => p.goto(dash.url)));
      const before = new Map(dash.collector.requests);
      const polledSince = () =>
        Math.min(
          ...['primary', 'standby'].map((n) => dash.collector.requests.get(n)! - before.get(n)!),
        );
      const t0 = performance.now();
      // Readers of the dashboard's own API, as fast as they can: none of it reaches a node. The
      // window is counted, not timed: at least READS reads and POLLS polls of each node (a loaded
      // machine makes it longer, never shorter); the deadline only ends a collector that stopped.
      const READS = 100;
      const POLLS = 10;
      const deadline = t0 + 30_000;
      let reads = 0;
      while ((reads < READS || polledSince() < POLLS) && performance.now() < deadline) {
        await Promise.all(
          Array.from({ length: 10 }, () => fetch(`${dash.url}api/nodes`).then((r) => r.text())),
        );
        reads += 10;
      }
      const elapsed = performance.now() - t0;
      const after = new Map(dash.collector.requests);
      await Promise.all(pages.map((p) => p.close()));
      expect(reads).toBeGreaterThanOrEqual(READS);
      for (const name of ['primary', 'standby']) {
        const sent = after.get(name)! - before.get(name)!;
        expect(sent, `${name}: polls in the window`).toBeGreaterThanOrEqual(POLLS);
        // One request in flight at the window's start may be counted before it: + 1.
        expect(sent, name).toBeLessThanOrEqual(Math.floor(elapsed / MIN_POLL_MS) + 1);
      }
    });

    it('follows a node stopped and started by the CLI: stopped (not an error), then live with its new pid', async () => {
      const pidBefore = await ui.field('standby', 'pid');
      const stop = await runScript('cluster.ts', [
        'stop',
        '--node',
        'standby',
        '--dir',
        cluster.dir,
      ]);
      expect(stop.code, stop.stderr).toBe(0);
      await expect.poll(() => ui.state('standby'), { timeout: 15_000 }).toBe('stopped');
      expect(await ui.node('standby').locator('[data-field="error"]').count()).toBe(0);
      expect(await ui.field('standby', 'role')).toBe('standby');
      expect(await ui.page.locator('[data-testid="connection"]').innerText()).toBe('live');
      const start = await runScript('cluster.ts', ['start', '--dir', cluster.dir]);
      expect(start.code, start.stderr).toBe(0);
      await expect.poll(() => ui.state('standby'), { timeout: 30_000 }).toBe('running');
      await expect.poll(() => ui.field('standby', 'pid'), { timeout: 10_000 }).not.toBe(pidBefore);
      expect(await ui.field('standby', 'pid')).toBe(String(cluster.pid('standby')));
      await expect.poll(() => ui.field('standby', 'syncState'), { timeout: 20_000 }).toBe('sync');
    });

    it('shows a finished sweep: its tables, and charts with hover values, series toggles and a log scale', async () => {
      const fixture = JSON.parse(
        fs.readFileSync(path.join(RESULTS, SWEEP, 'results.json'), 'utf8'),
      ) as { cells: Cell[] };
      const md = fs.readFileSync(path.join(RESULTS, SWEEP, 'tables.md'), 'utf8');
      const page = await browser.newPage({ viewport: { width: 1800, height: 1600 } });
      try {
        await page.goto(dash.url);
        await page.locator('#tab-results').click();
        const item = page.locator(`[data-sweep="${SWEEP}"]`);
        await expect.poll(() => item.count(), { timeout: 10_000 }).toBe(1);
        expect(await item.innerText()).toBe(`${SWEEP} — multi, 12 cells`);
        await item.click();
        await expect
          .poll(() => page.locator('#results-title').innerText())
          .toBe(`${SWEEP} — multi`);

        // tables.md: every markdown table row is a <tr>, the figures as written.
        const mdRows = md.split('\n').filter((l) => l.startsWith('|') && !/^\|\s*-/.test(l));
        await expect.poll(() => page.locator('#results-tables tr').count()).toBe(mdRows.length);
        const tablesText = await page.locator('#results-tables').innerText();
        for (const l of mdRows)
          for (const c of l
            .split('|')
            .map((x) => x.trim())
            .filter(Boolean))
            expect(tablesText).toContain(c);

        // One chart per variant, one series per strategy × (measured, modeled).
        const blocks = page.locator('#results-charts .chart-block');
        await expect.poll(() => blocks.count()).toBe(2);
        const block = page.locator('[data-chart="truncate"]');
        const labels = await block.locator('.u-legend .u-series .u-label').allInnerTexts();
        expect(labels).toEqual([
          'shared_buffers',
          'walsim full-scan measured',
          'walsim full-scan modeled PostgreSQL',
          'walsim cached-lookup measured',
          'walsim cached-lookup modeled PostgreSQL',
        ]);

        // Hover: sweeping the cursor over the plot shows every cell's measured seconds.
        const want = fixture.cells
          .filter((c) => c.variant === 'truncate' && c.strategy === 'full-scan')
          .map((c) => `${(c.failoverMsMean / 1000).toFixed(3)} s`);
        expect(want).toHaveLength(3);
        const over = block.locator('.u-over');
        const box = (await over.boundingBox())!;
        const seen = new Set<string>();
        const value = block.locator('.u-legend .u-series').nth(1).locator('.u-value');
        for (let x = 1; x < box.width; x += 8) {
          await page.mouse.move(box.x + x, box.y + box.height / 2);
          seen.add(await value.innerText());
        }
        for (const w of want) expect(seen).toContain(w);
        const xLabels = new Set<string>();
        const xValue = block.locator('.u-legend .u-series').nth(0).locator('.u-value');
        for (let x = 1; x < box.width; x += 8) {
          await page.mouse.move(box.x + x, box.y + box.height / 2);
          xLabels.add(await xValue.innerText());
        }
        expect([...xLabels].filter((l) => /MB$/.test(l)).sort()).toEqual(['16MB', '32MB', '64MB']);

        // Toggle: clicking a legend entry hides its series, clicking again shows it.
        const entry = block.locator('.u-legend .u-series').nth(2);
        expect(await entry.getAttribute('class')).not.toContain('u-off');
        await entry.locator('.u-label').click();
        expect(await entry.getAttribute('class')).toContain('u-off');
        await entry.locator('.u-label').click();
        expect(await entry.getAttribute('class')).not.toContain('u-off');

        // Log scale (the default) and back: the charts are redrawn with the other y scale.
        expect(
          await blocks.evaluateAll((b) => b.map((e) => e.getAttribute('data-y-scale'))),
        ).toEqual(['log', 'log']);
        const logImage = await block.locator('canvas').screenshot();
        await page.locator('#log-scale').uncheck();
        await expect
          .poll(() => blocks.evaluateAll((b) => b.map((e) => e.getAttribute('data-y-scale'))))
          .toEqual(['linear', 'linear']);
        const linImage = await page.locator('[data-chart="truncate"] canvas').screenshot();
        expect(linImage.equals(logImage)).toBe(false);
      } finally {
        await page.close();
      }
    });

    it('refuses --listen off loopback without the password, and asks for it with one', async () => {
      const cli = await runScript('../dashboard/main.ts', [
        '--dir',
        cluster.dir,
        '--listen',
        '0.0.0.0',
      ]);
      expect(cli.code).toBe(2);
      expect(cli.stderr).toMatch(/--listen 0\.0\.0\.0 opens the dashboard to other hosts/);
      await expect(
        startTestDashboard(new WalsimSource(cluster.dir), { listen: '0.0.0.0', password: null }),
      ).rejects.toThrow(/needs the cluster's password/);

      const guarded = await startTestDashboard(new WalsimSource(cluster.dir), {
        listen: '0.0.0.0',
        password: 'sekret',
      });
      try {
        const at = `http://127.0.0.1:${guarded.port}/api/nodes`;
        const basic = (pw: string) => ({
          authorization: `Basic ${Buffer.from(`any:${pw}`).toString('base64')}`,
        });
        const none = await fetch(at);
        expect(none.status).toBe(401);
        expect(none.headers.get('www-authenticate')).toMatch(/^Basic /);
        expect((await fetch(at, { headers: basic('wrong') })).status).toBe(401);
        expect((await fetch(at, { headers: basic('sekret') })).status).toBe(200);
      } finally {
        await guarded.close();
      }
    });

    it('promotes through the promote button only once its confirmation is accepted', async () => {
      // The seed's procedure: pause, write, stop the primary, resume, promote.
      await ui.press('standby', 'pause');
      await expect
        .poll(() => ui.field('standby', 'pauseState'), { timeout: 10_000 })
        .toBe('paused');
      await cluster.sql('primary', 'CREATE TABLE p (c int)');
      await cluster.sql('primary', 'INSERT INTO p SELECT generate_series(1, 2000)');
      await cluster.sql('primary', 'TRUNCATE p');
      await ui.press('primary', 'stop-immediate');
      await expect.poll(() => ui.state('primary'), { timeout: 20_000 }).toBe('stopped');
      await ui.press('standby', 'resume');
      await expect
        .poll(() => ui.field('standby', 'pauseState'), { timeout: 10_000 })
        .toBe('not paused');
      await ui.press('standby', 'promote', 'cancel');
      expect((await cluster.status('standby')).inRecovery).toBe(true);
      expect(await ui.field('standby', 'role')).toBe('standby');

      const answer = await ui.pressAndAnswer('standby', 'promote');
      expect(answer.ok).toBe(true);
      const r = answer.result as {
        promoted: boolean;
        failover: { newTimeline: number; recordsReplayed: number; failoverMs: number };
      };
      expect(r.promoted).toBe(true);
      expect((await cluster.status('standby')).inRecovery).toBe(false);
      await expect.poll(() => ui.field('standby', 'role'), { timeout: 15_000 }).toBe('primary');
      expect(await ui.field('standby', 'timeline')).toBe(String(r.failover.newTimeline));
      const fo = (k: string) =>
        ui.page.locator(`[data-testid="failover"] [data-field="${k}"]`).innerText();
      await expect
        .poll(() => fo('fo-records'), { timeout: 15_000 })
        .toBe(Number(r.failover.recordsReplayed).toLocaleString('en-US'));
      expect(await fo('fo-failover-ms')).toBe(`${(r.failover.failoverMs / 1000).toFixed(3)} s`);
      await expect
        .poll(() => ui.field('standby', 'lifecycle'), { timeout: 15_000 })
        .toMatch(/^primary\./);
    });
  },
);
