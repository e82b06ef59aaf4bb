/**
 * The dashboard's `--engine postgres` sampler and buttons against a real PostgreSQL primary +
 * synchronous standby (scripts/postgres/pg-cluster.ts), opened in chromium; everything asserted
 * is read from the page's DOM. What PostgreSQL does not expose (the lifecycle machine's state,
 * drop counters, the failover report) must read "unavailable". Skipped, with the reason, when the
 * PostgreSQL server binaries or chromium are absent.
 */
import * as fs from 'node:fs';
import * as path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Browser } from 'playwright-core';
import type pg from 'pg';
import { chromiumSkipReason, launchChromium } from '../helpers/browser.ts';
import { DashboardPage, startTestDashboard } from '../helpers/dashboard.ts';
import { PgDirs, pgUnavailableReason } from '../helpers/postgres.ts';
import type { Dashboard } from '../../dashboard/server.ts';
import { PgSource } from '../../dashboard/pg-source.ts';
import { initPgCluster, pgConnect, pgCtl, pgDataDir } from '../../scripts/postgres/pg-cluster.ts';
import { parseLsn } from '../../wal/lsn.ts';

const reason = pgUnavailableReason() ?? chromiumSkipReason();

/** A node's postmaster (postmaster.pid) and its children, from /proc. */
function serverProcesses(dir: string, name: 'primary' | 'standby'): number[] {
  const postmaster = Number(
    fs.readFileSync(path.join(pgDataDir(dir, name), 'postmaster.pid'), 'utf8').split('\n')[0],
  );
  const children = fs
    .readdirSync('/proc')
    .filter((d) => /^\d+$/.test(d))
    .filter((d) => {
      try {
        const stat = fs.readFileSync(`/proc/${d}/stat`, 'utf8');
        return Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[1]) === postmaster;
      } catch {
        return false;
      }
    })
    .map(Number);
  return [postmaster, ...children];
}

describe.skipIf(reason !== null)(
  `dashboard on real PostgreSQL in chromium${reason ? ` (skipped: ${reason})` : ''}`,
  () => {
    const dirs = new PgDirs();
    let dir: string;
    let dash: Dashboard;
    let browser: Browser;
    let ui: DashboardPage;
    let primary: pg.Client;

    beforeAll(async () => {
      dir = dirs.fresh('dashboard');
      await initPgCluster(dir, { sharedBuffers: '128MB', primarySharedBuffers: '128MB' });
      primary = await pgConnect(dir, 'primary');
      dash = await startTestDashboard(new PgSource(dir));
      browser = await launchChromium();
      const page = await browser.newPage({ viewport: { width: 1800, height: 1200 } });
      await page.goto(dash.url);
      ui = new DashboardPage(page);
    }, 180_000);

    afterAll(async () => {
      await primary?.end().catch(() => {});
      await browser?.close();
      await dash?.close();
      await dirs.removeAll();
    });

    const primaryFlush = async () =>
      parseLsn(
        String((await primary.query('SELECT pg_current_wal_flush_lsn()::text AS l')).rows[0].l),
      );

    it('lists both nodes with their roles, and what PostgreSQL does not expose as unavailable', async () => {
      await expect.poll(() => ui.page.locator('[data-node]').count(), { timeout: 20_000 }).toBe(2);
      await expect.poll(() => ui.field('primary', 'role'), { timeout: 10_000 }).toBe('primary');
      await expect.poll(() => ui.field('standby', 'role'), { timeout: 10_000 }).toBe('standby');
      expect(await ui.field('standby', 'upstream')).toBe('primary');
      await expect.poll(() => ui.field('standby', 'syncState'), { timeout: 10_000 }).toBe('sync');
      expect(await ui.field('standby', 'receiver')).toBe('streaming');
      expect(await ui.field('standby', 'timeline')).toBe('1');
      expect(await ui.field('primary', 'sharedBuffers')).toBe('128MB');
      expect(await ui.field('standby', 'lifecycle')).toBe('unavailable');
      expect(await ui.field('standby', 'recordsReplayed')).toBe('unavailable');
      expect(await ui.page.locator('[data-testid="connection"]').innerText()).toBe('live');
    });

    it("shows the standby's replayed LSN advancing after an INSERT on the primary", async () => {
      await primary.query('CREATE TABLE t (c int)');
      const before = await primaryFlush();
      await expect
        .poll(() => ui.lsn('standby', 'replayed'), { timeout: 15_000 })
        .toBeGreaterThanOrEqual(before);
      await primary.query('INSERT INTO t SELECT generate_series(1, 5000)');
      const target = await primaryFlush();
      expect(target).toBeGreaterThan(before);
      await expect
        .poll(() => ui.lsn('standby', 'replayed'), { timeout: 15_000 })
        .toBeGreaterThanOrEqual(target);
      await expect
        .poll(() => ui.lsn('primary', 'flush'), { timeout: 10_000 })
        .toBeGreaterThanOrEqual(target);
    });

    it('after pause (the button) and an INSERT, received passes replayed and the pause shows; resume (the button) catches up', async () => {
      await ui.press('standby', 'pause');
      await primary.query('INSERT INTO t SELECT generate_series(1, 5000)');
      await expect
        .poll(() => ui.field('standby', 'pauseState'), { timeout: 15_000 })
        .toBe('paused');
      await expect.poll(() => ui.node('standby').locator('[data-field="paused"]').count()).toBe(1);
      await primary.query('INSERT INTO t SELECT generate_series(1, 5000)');
      // synchronous_commit = remote_write: the commit returned once the standby wrote it.
      const written = await primaryFlush();
      await expect
        .poll(() => ui.lsn('standby', 'received'), { timeout: 15_000 })
        .toBeGreaterThanOrEqual(written);
      expect(await ui.lsn('standby', 'received')).toBeGreaterThan(
        await ui.lsn('standby', 'replayed'),
      );
      await expect
        .poll(async () => Number((await ui.field('standby', 'lagBytes')).split(' ')[0]), {
          timeout: 10_000,
        })
        .toBeGreaterThan(0);

      await ui.press('standby', 'resume');
      await expect
        .poll(() => ui.field('standby', 'pauseState'), { timeout: 15_000 })
        .toBe('not paused');
      await expect
        .poll(() => ui.lsn('standby', 'replayed'), { timeout: 15_000 })
        .toBeGreaterThanOrEqual(written);
    });

    it('follows a restarted standby: stopped (not an error) while down, live again with its new pid', async () => {
      const pidBefore = await ui.field('standby', 'pid');
      await pgCtl(dir, 'standby', 'stop', { mode: 'fast' });
      await expect.poll(() => ui.state('standby'), { timeout: 15_000 }).toBe('stopped');
      expect(await ui.node('standby').locator('[data-field="error"]').count()).toBe(0);
      expect(await ui.field('standby', 'role')).toBe('standby');
      await pgCtl(dir, 'standby', 'start');
      await expect.poll(() => ui.state('standby'), { timeout: 30_000 }).toBe('running');
      await expect.poll(() => ui.field('standby', 'pid'), { timeout: 10_000 }).not.toBe(pidBefore);
      await expect
        .poll(() => ui.field('standby', 'receiver'), { timeout: 30_000 })
        .toBe('streaming');
      expect(await ui.page.locator('[data-testid="connection"]').innerText()).toBe('live');
    });

    it('shows a standby that does not answer (SIGSTOP) as unreachable within the sample bound, then live again', async () => {
      const pids = serverProcesses(dir, 'standby');
      expect(pids.length).toBeGreaterThan(1);
      for (const p of pids) process.kill(p, 'SIGSTOP');
      try {
        await expect.poll(() => ui.state('standby'), { timeout: 20_000 }).toBe('unreachable');
        expect(await ui.field('standby', 'error')).toMatch(/no answer within 5000 ms/);
        expect(await ui.field('standby', 'role')).toBe('standby');
        expect(await ui.state('primary')).toBe('running');
      } finally {
        for (const p of pids) process.kill(p, 'SIGCONT');
      }
      await expect.poll(() => ui.state('standby'), { timeout: 20_000 }).toBe('running');
      await expect.poll(() => ui.field('standby', 'syncState'), { timeout: 10_000 }).toBe('sync');
    });

    it('stops the primary (the button) and promotes the standby (the button, after a cancelled confirmation)', async () => {
      await primary.query('INSERT INTO t SELECT generate_series(1, 100)');
      await primary.end();
      const stop = await ui.pressAndAnswer('primary', 'stop-immediate');
      expect(stop).toMatchObject({ ok: true, result: { stopped: true } });
      await expect.poll(() => ui.state('primary'), { timeout: 15_000 }).toBe('stopped');

      // Cancel first: nothing is sent, the standby stays in recovery.
      await ui.press('standby', 'promote', 'cancel');
      const c = await pgConnect(dir, 'standby');
      try {
        expect((await c.query('SELECT pg_is_in_recovery() AS r')).rows[0].r).toBe(true);
      } finally {
        await c.end();
      }

      const promote = await ui.pressAndAnswer('standby', 'promote');
      expect(promote).toMatchObject({ ok: true, result: { promoted: true } });
      await expect.poll(() => ui.field('standby', 'role'), { timeout: 15_000 }).toBe('primary');
      await expect.poll(() => ui.field('standby', 'timeline'), { timeout: 15_000 }).toBe('2');
      const s = await pgConnect(dir, 'standby');
      try {
        expect((await s.query('SELECT pg_is_in_recovery() AS r')).rows[0].r).toBe(false);
        expect((await s.query('SELECT count(*)::int AS n FROM t')).rows[0].n).toBe(15_100);
      } finally {
        await s.end();
      }
      // PostgreSQL writes no failover report the dashboard could read.
      expect(await ui.page.locator('[data-testid="failover"]').innerText()).toContain(
        'unavailable',
      );
    });
  },
);
