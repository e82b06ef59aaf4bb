/**
 * The dashboard in a real browser (Debian's chromium through playwright-core) against a real
 * walsim primary + standby: everything asserted is read from the page's DOM. The seed's
 * procedure runs through the page's buttons (pause, stop immediate, resume), each behind its
 * confirmation; the promotion through `cluster promote --json`, whose drop counters the page's
 * failover report must equal. Skipped, with the reason, when chromium is absent.
 */
import * as net from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import WebSocket from 'ws';
import type { Browser, Page } from 'playwright-core';
import { chromiumSkipReason, launchChromium } from '../helpers/browser.ts';
import { clustersPerSuite, TestCluster } from '../helpers/cluster.ts';
import { runScript } from '../helpers/cli.ts';
import { startDashboard, type Dashboard } from '../../dashboard/server.ts';
import { WalsimSource } from '../../dashboard/walsim-source.ts';
import { defaultCostProfile } from '../../cost-model/profile.ts';
import { parseLsn } from '../../wal/lsn.ts';

const reason = chromiumSkipReason();

describe.skipIf(reason !== null)(
  `dashboard in chromium${reason ? ` (skipped: ${reason})` : ''}`,
  () => {
    const clusters = clustersPerSuite();
    let cluster: TestCluster;
    let dash: Dashboard;
    let browser: Browser;
    let page: Page;

    beforeAll(async () => {
      cluster = await clusters.start();
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
      // The lag field is drawn from the same sample on the page's next render: wait for it.
      await expect
        .poll(async () => Number((await fieldText('standby', 'lagBytes')).split(' ')[0]), {
          timeout: 10_000,
        })
        .toBeGreaterThan(0);
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

/** One raw HTTP exchange over TCP; resolves with what the server sent before closing (or 2 s). */
function rawHttp(port: number, request: string | Buffer): Promise<string> {
  return new Promise((resolve) => {
    const s = net.connect(port, '127.0.0.1', () => s.write(request));
    let got = '';
    const done = () => {
      s.destroy();
      resolve(got);
    };
    s.on('data', (d) => (got += d.toString('latin1')));
    s.on('close', done);
    s.on('error', done);
    setTimeout(done, 2000);
  });
}

describe.skipIf(reason !== null)(
  `dashboard under hostile input${reason ? ` (skipped: ${reason})` : ''}`,
  () => {
    const clusters = clustersPerSuite();
    let cluster: TestCluster;
    let dash: Dashboard;
    const url = (p: string) => `http://127.0.0.1:${dash.port}${p}`;

    beforeAll(async () => {
      cluster = await clusters.start();
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
    }, 120_000);
    afterAll(async () => {
      await dash?.close();
    });

    const action = (body: string, headers: Record<string, string> = {}) =>
      fetch(url('/api/action'), {
        method: 'POST',
        headers: {
          'content-type': 'application/json',
          'x-dashboard-token': dash.token,
          ...headers,
        },
        body,
      });

    it('refuses bad paths, methods, hosts, headers and requests', async () => {
      expect((await fetch(url('/nope'))).status).toBe(404);
      expect(
        await rawHttp(
          dash.port,
          'GET /../../etc/passwd HTTP/1.1\r\nHost: 127.0.0.1:' + dash.port + '\r\n\r\n',
        ),
      ).toMatch(/^HTTP\/1.1 404/);
      const trav = await fetch(url('/api/results/..%2F..%2Fetc'));
      expect(trav.status).toBe(404);
      expect((await fetch(url('/'), { method: 'PUT' })).status).toBe(405);
      expect(
        await rawHttp(dash.port, `GET / HTTP/1.1\r\nHost: evil.example:${dash.port}\r\n\r\n`),
      ).toMatch(/^HTTP\/1.1 421/);
      const huge = `GET / HTTP/1.1\r\nHost: 127.0.0.1:${dash.port}\r\nX-Big: ${'a'.repeat(20_000)}\r\n\r\n`;
      expect(await rawHttp(dash.port, huge)).toMatch(/^HTTP\/1.1 431/);
      expect(await rawHttp(dash.port, 'GARBAGE\x00\x01\r\n\r\n')).toMatch(/^HTTP\/1.1 400/);
    });

    it('refuses actions without the token, from another origin, malformed or too large', async () => {
      const noToken = await fetch(url('/api/action'), { method: 'POST', body: '{}' });
      expect(noToken.status).toBe(403);
      expect(
        (await action('{"action":"pause","node":"standby"}', { origin: 'http://evil.example' }))
          .status,
      ).toBe(403);
      const bad = await action('{not json');
      expect(bad.status).toBe(400);
      expect(((await bad.json()) as { error: string }).error).toBe('body is not valid JSON');
      const unknown = await action('{"action":"drop-database","node":"standby"}');
      expect(((await unknown.json()) as { error: string }).error).toMatch(
        /"action" must be one of/,
      );
      const ghost = await action('{"action":"pause","node":"ghost"}');
      expect(((await ghost.json()) as { error: string }).error).toMatch(/"node" must be one of/);
      expect((await action('x'.repeat(10_000))).status).toBe(413);
      expect((await cluster.status('standby')).pauseState).toBe('not paused');
    });

    it('refuses sockets without the token and closes on garbage frames', async () => {
      const opened = (u: string) =>
        new Promise<{ ws: WebSocket | null; status: number | null }>((resolve) => {
          const ws = new WebSocket(u, { perMessageDeflate: false });
          ws.once('open', () => resolve({ ws, status: null }));
          ws.once('unexpected-response', (_req, res) =>
            resolve({ ws: null, status: res.statusCode ?? null }),
          );
          ws.once('error', () => resolve({ ws: null, status: -1 }));
        });
      const live = `ws://127.0.0.1:${dash.port}/live?token=${dash.token}`;
      expect((await opened(`ws://127.0.0.1:${dash.port}/live`)).status).toBe(403);
      expect((await opened(`ws://127.0.0.1:${dash.port}/other?token=${dash.token}`)).status).toBe(
        404,
      );
      const closeCode = (ws: WebSocket) =>
        new Promise<number>((r) => ws.once('close', (c) => r(c)));
      const a = (await opened(live)).ws!;
      const ca = closeCode(a);
      a.send('DROP TABLE t');
      expect(await ca).toBe(4000);
      const b = (await opened(live)).ws!;
      const cb = closeCode(b);
      b.send('x'.repeat(5000));
      expect(await cb).toBe(1009);
      // An unmasked frame with a reserved opcode, written straight to the upgraded socket.
      const c = (await opened(live)).ws!;
      const cc = closeCode(c);
      (c as unknown as { _socket: net.Socket })._socket.write(
        Buffer.from([0x83, 0x02, 0x41, 0x42]),
      );
      expect([1002, 1006]).toContain(await cc);
    });

    it('bounds connections and sockets, and keeps serving', async () => {
      const tcp = await Promise.all(
        Array.from(
          { length: 100 },
          () =>
            new Promise<net.Socket>((resolve) => {
              const s = net.connect(dash.port, '127.0.0.1', () => resolve(s));
              s.on('error', () => resolve(s));
            }),
        ),
      );
      const socks: WebSocket[] = [];
      const statuses: Array<number | null> = [];
      for (let i = 0; i < 20; i++) {
        const r = await new Promise<number | null>((resolve) => {
          const ws = new WebSocket(`ws://127.0.0.1:${dash.port}/live?token=${dash.token}`, {
            perMessageDeflate: false,
          });
          ws.once('open', () => (socks.push(ws), resolve(null)));
          ws.once('unexpected-response', (_q, res) => resolve(res.statusCode ?? 0));
          ws.once('error', () => resolve(-1));
        });
        statuses.push(r);
      }
      for (const s of tcp) s.destroy();
      expect(socks.length).toBeLessThanOrEqual(16);
      expect(statuses.filter((s) => s !== null).length).toBeGreaterThanOrEqual(4);
      for (const ws of socks) ws.close();
      // The dashboard and the nodes are still there.
      await expect
        .poll(async () => (await fetch(url('/api/nodes'))).status, { timeout: 10_000 })
        .toBe(200);
      const nodes = (
        (await (await fetch(url('/api/nodes'))).json()) as {
          nodes: Array<{ name: string; state: string }>;
        }
      ).nodes;
      expect(nodes.map((n) => [n.name, n.state])).toEqual([
        ['primary', 'running'],
        ['standby', 'running'],
      ]);
      expect((await cluster.status('standby')).inRecovery).toBe(true);
      expect((await cluster.sql('primary', 'SELECT pg_is_in_recovery()')).rows).toBeDefined();
    });
  },
);
