/**
 * The dashboard in a real browser (Debian's chromium through playwright-core) against a real
 * walsim primary + standby: everything asserted is read from the page's DOM. The seed's
 * procedure runs through the page's buttons (pause, stop immediate, resume), each behind its
 * confirmation; the promotion through `cluster promote --json`, whose drop counters the page's
 * failover report must equal. Skipped, with the reason, when chromium is absent.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Browser, Page } from 'playwright-core';
import { chromiumSkipReason, launchChromium } from '../helpers/browser.ts';
import { TestCluster } from '../helpers/cluster.ts';
import { runScript } from '../helpers/cli.ts';
import { startDashboard, type Dashboard } from '../../dashboard/server.ts';
import { WalsimSource } from '../../dashboard/walsim-source.ts';
import { defaultCostProfile } from '../../cost-model/profile.ts';
import { parseLsn } from '../../wal/lsn.ts';

const reason = chromiumSkipReason();

describe.skipIf(reason !== null)(
  `dashboard in chromium${reason ? ` (skipped: ${reason})` : ''}`,
  () => {
    let cluster: TestCluster;
    let dash: Dashboard;
    let browser: Browser;
    let page: Page;

    beforeAll(async () => {
      cluster = await TestCluster.start();
      dash = await startDashboard({
        source: new WalsimSource(cluster.dir),
        port: 0,
        listen: '127.0.0.1',
        password: null,
        pollMs: 250,
        profile: defaultCostProfile(),
        profileName: defaultCostProfile().name,
        resultsDir: cluster.dir,
      });
      browser = await launchChromium();
      page = await browser.newPage({ viewport: { width: 1800, height: 1200 } });
      await page.goto(dash.url);
    }, 120_000);

    afterAll(async () => {
      await browser?.close();
      await dash?.close();
      await cluster?.destroy();
    });

    const node = (name: string) => page.locator(`[data-node="${name}"]`);
    const fieldText = (name: string, f: string) =>
      node(name).locator(`[data-field="${f}"]`).first().innerText();
    const lsnOnPage = async (name: string, f: string) =>
      parseLsn((await fieldText(name, f)).trim());
    /** Click a node's button and accept its confirmation. */
    const press = async (name: string, action: string) => {
      await node(name).locator(`button[data-action="${action}"]`).click();
      await expect.poll(() => page.locator('#confirm').getAttribute('open')).not.toBeNull();
      await page.locator('[data-testid="confirm-ok"]').click();
    };

    it('lists both nodes with their roles', async () => {
      await expect.poll(() => page.locator('[data-node]').count(), { timeout: 20_000 }).toBe(2);
      expect(await fieldText('primary', 'role')).toBe('primary');
      expect(await fieldText('standby', 'role')).toBe('standby');
      expect(await fieldText('standby', 'upstream')).toBe('primary');
      await expect.poll(() => fieldText('standby', 'syncState'), { timeout: 10_000 }).toBe('sync');
      expect(await page.locator('[data-testid="connection"]').innerText()).toBe('live');
    });

    it("shows the standby's replayed LSN advancing after an INSERT on the primary", async () => {
      await cluster.sql('primary', 'CREATE TABLE t (c int)');
      await cluster.waitForCatchup();
      await expect
        .poll(async () => (await lsnOnPage('standby', 'replayed')) > 0n, { timeout: 10_000 })
        .toBe(true);
      const before = await lsnOnPage('standby', 'replayed');
      await cluster.sql('primary', 'INSERT INTO t SELECT generate_series(1, 5000)');
      const target = parseLsn(String((await cluster.status('primary')).flushLsn));
      expect(target).toBeGreaterThan(before);
      await expect
        .poll(() => lsnOnPage('standby', 'replayed'), { timeout: 15_000 })
        .toBeGreaterThanOrEqual(target);
    });

    it('after pause (the button) and an INSERT, received passes replayed and the pause shows', async () => {
      await press('standby', 'pause');
      await expect
        .poll(() => fieldText('standby', 'pauseState'), { timeout: 10_000 })
        .toBe('paused');
      await expect.poll(() => node('standby').locator('[data-field="paused"]').count()).toBe(1);
      expect((await cluster.status('standby')).pauseState).toBe('paused');
      await cluster.sql('primary', 'INSERT INTO t SELECT generate_series(1, 5000)');
      await cluster.sql('primary', 'TRUNCATE t'); // a drop for the failover to replay
      const flushed = parseLsn(String((await cluster.status('primary')).flushLsn));
      await expect
        .poll(() => lsnOnPage('standby', 'received'), { timeout: 15_000 })
        .toBeGreaterThanOrEqual(flushed);
      expect(await lsnOnPage('standby', 'received')).toBeGreaterThan(
        await lsnOnPage('standby', 'replayed'),
      );
      expect(Number((await fieldText('standby', 'lagBytes')).split(' ')[0])).toBeGreaterThan(0);
    });

    it('after stop (the button), resume (the button) and promote, the role, lifecycle and failover report change', async () => {
      await press('primary', 'stop-immediate');
      await expect
        .poll(() => node('primary').getAttribute('data-state'), { timeout: 20_000 })
        .toBe('stopped');
      expect(cluster.pid('primary')).toBeNull();
      await expect
        .poll(() => page.locator('[data-topology-node="primary"]').textContent())
        .toContain('stopped');
      await press('standby', 'resume');
      await expect
        .poll(() => fieldText('standby', 'pauseState'), { timeout: 10_000 })
        .toBe('not paused');
      const r = await runScript('cluster.ts', ['promote', '--dir', cluster.dir, '--json']);
      expect(r.code, r.stderr).toBe(0);
      const f = r.json.failover;
      expect(r.json.promoted).toBe(true);
      expect(f.drop.drops['cached-lookup'] + f.drop.drops['full-scan']).toBeGreaterThan(0);

      await expect.poll(() => fieldText('standby', 'role'), { timeout: 15_000 }).toBe('primary');
      await expect
        .poll(() => fieldText('standby', 'lifecycle'), { timeout: 15_000 })
        .toMatch(/^primary\./);
      expect(await fieldText('standby', 'timeline')).toBe(String(f.newTimeline));
      const failover = page.locator('[data-testid="failover"]');
      await expect
        .poll(() => failover.locator('[data-testid="failover-timeline"]').count(), {
          timeout: 15_000,
        })
        .toBe(1);
      const drops = Object.entries(f.drop.drops as Record<string, number>)
        .filter(([, n]) => n > 0)
        .map(([p, n]) => `${p}: ${n}`)
        .join(', ');
      const foField = (k: string) => failover.locator(`[data-field="${k}"]`).innerText();
      expect(await foField('fo-drops')).toBe(drops);
      expect(await foField('fo-scanned')).toBe(Number(f.drop.scanned).toLocaleString('en-US'));
      expect(await foField('fo-probes')).toBe(Number(f.drop.probes).toLocaleString('en-US'));
      expect(await foField('fo-invalidated')).toBe(
        Number(f.drop.invalidated).toLocaleString('en-US'),
      );
      expect(await foField('fo-records')).toBe(Number(f.recordsReplayed).toLocaleString('en-US'));
      expect(await foField('fo-failover-ms')).toBe(`${(f.failoverMs / 1000).toFixed(3)} s`);
      expect(await foField('fo-modeled-s')).toBe(`${f.model.failoverS.toFixed(3)} s`);
      // The machine lit the new state and drew the promotion's transitions as they fired.
      await page.locator('#machine-node').selectOption('standby');
      await expect
        .poll(() => page.locator('#machine .state.lit[data-state="lifecycle.primary"]').count())
        .toBe(1);
      const fired = await page
        .locator('[data-transition-node="standby"]')
        .evaluateAll((els) => els.map((e) => e.getAttribute('data-event')));
      expect(fired).toContain('PROMOTE');
      expect(fired).toContain('RESUME');
    });
  },
);
