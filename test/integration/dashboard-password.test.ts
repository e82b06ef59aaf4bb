/**
 * The dashboard asks for the cluster's password whenever the cluster has one, on loopback too
 * (INV-DASH-4): `npm run dashboard` as a real process over a walsim primary + standby started with
 * a password. Method: every route — the page (which carries the action token), the API, the
 * assets, the buttons, the live socket — is refused 401 without the password and with a wrong one,
 * and a stop or promote sent without it changes nothing; with it the page, the API, the socket and
 * the buttons work (pause, stop immediate, resume, promote, as the seed's procedure). In chromium
 * with the password given, the page shows both nodes and its buttons work unchanged (the browser
 * sends the credentials on its fetches and its socket).
 */
import { spawn, type ChildProcess } from 'node:child_process';
import * as path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import WebSocket from 'ws';
import { chromiumSkipReason, launchChromium } from '../helpers/browser.ts';
import { clustersPerSuite, type TestCluster } from '../helpers/cluster.ts';
import { DashboardPage } from '../helpers/dashboard.ts';
import { entryArgs, PROJECT_ROOT } from '../../server/entry.ts';

const PASSWORD = 'dash s3cret:with colon';
const basic = (user: string, pw: string) => ({
  authorization: `Basic ${Buffer.from(`${user}:${pw}`).toString('base64')}`,
});
const GOOD = basic('postgres', PASSWORD);

/** `npm run dashboard -- --dir DIR --interval 200` as a child; resolves with it and its URL. */
function startDashboardProcess(dir: string): Promise<{ child: ChildProcess; url: string }> {
  return new Promise((resolve, reject) => {
    const child = spawn(
      process.execPath,
      [...entryArgs(path.join('dashboard', 'main.ts')), '--dir', dir, '--interval', '200'],
      { cwd: PROJECT_ROOT, stdio: ['ignore', 'pipe', 'pipe'] },
    );
    let out = '';
    let err = '';
    child.stdout!.on('data', (d) => {
      out += d;
      const m = /(http:\/\/127\.0\.0\.1:\d+\/)/.exec(out);
      if (m) resolve({ child, url: m[1]! });
    });
    child.stderr!.on('data', (d) => (err += d));
    child.on('exit', (code) => reject(new Error(`dashboard exited ${code}: ${err}`)));
  });
}

/** The socket's opening: the HTTP status of a refused upgrade, or 101 once open. */
function upgradeStatus(url: string, headers: Record<string, string>): Promise<number> {
  return new Promise((resolve, reject) => {
    const ws = new WebSocket(url, { headers });
    ws.on('unexpected-response', (_req, res) => {
      resolve(res.statusCode ?? 0);
      ws.terminate();
    });
    ws.on('open', () => {
      resolve(101);
      ws.close();
    });
    ws.on('error', reject);
  });
}

describe('the dashboard of a cluster with a password', () => {
  const clusters = clustersPerSuite();
  let cluster: TestCluster;
  let dash: { child: ChildProcess; url: string };

  beforeAll(async () => {
    cluster = await clusters.start({ password: PASSWORD });
    dash = await startDashboardProcess(cluster.dir);
  }, 120_000);

  afterAll(() => {
    dash?.child.kill('SIGTERM');
  });

  const action = (body: object, headers: Record<string, string>) =>
    fetch(`${dash.url}api/action`, {
      method: 'POST',
      headers: { 'content-type': 'application/json', ...headers },
      body: JSON.stringify(body),
    });

  it('refuses every route and the socket without the password, on loopback', async () => {
    for (const p of ['', 'index.html', 'app.js', 'api/nodes', 'api/graph', 'api/results']) {
      for (const h of [{}, basic('postgres', 'wrong'), basic('postgres', '')]) {
        const r = await fetch(`${dash.url}${p}`, { headers: h });
        expect(r.status, `/${p}`).toBe(401);
        expect(r.headers.get('www-authenticate')).toMatch(/^Basic realm=/);
        // Neither the page's token nor any node's state is in a refusal.
        const body = await r.text();
        expect(body).not.toMatch(/dashboard-token|primary|standby/);
      }
    }
    const live = dash.url.replace('http:', 'ws:') + 'live?token=x';
    expect(await upgradeStatus(live, {})).toBe(401);
    expect(await upgradeStatus(live, basic('x', 'nope'))).toBe(401);
  });

  it('cannot stop or promote without the password: both nodes keep their roles', async () => {
    // The token a local user would have read from GET / before: even the right one is not enough.
    const page = await (await fetch(dash.url, { headers: GOOD })).text();
    const token = /name="dashboard-token" content="([0-9a-f]+)"/.exec(page)![1]!;
    const t = { 'x-dashboard-token': token };
    for (const h of [t, { ...t, ...basic('postgres', 'wrong') }]) {
      expect((await action({ action: 'stop-immediate', node: 'primary' }, h)).status).toBe(401);
      expect((await action({ action: 'promote', node: 'standby' }, h)).status).toBe(401);
    }
    expect((await cluster.status('primary')).inRecovery).toBe(false);
    expect((await cluster.status('standby')).inRecovery).toBe(true);
  });

  it('with the password: the page, the API, the socket and the buttons work', async () => {
    const page = await fetch(dash.url, { headers: basic('anyone', PASSWORD) });
    expect(page.status).toBe(200);
    const token = /name="dashboard-token" content="([0-9a-f]+)"/.exec(await page.text())![1]!;
    const nodes = await fetch(`${dash.url}api/nodes`, { headers: GOOD });
    expect(nodes.status).toBe(200);
    expect(
      ((await nodes.json()) as { nodes: Array<{ name: string }> }).nodes.map((n) => n.name).sort(),
    ).toEqual(['primary', 'standby']);
    const live = `${dash.url.replace('http:', 'ws:')}live?token=${token}`;
    expect(await upgradeStatus(live, GOOD)).toBe(101);

    const h = { ...GOOD, 'x-dashboard-token': token };
    expect((await action({ action: 'stop-immediate', node: 'primary' }, h)).status).toBe(200);
    expect(cluster.pid('primary')).toBeNull();
    const promoted = await action({ action: 'promote', node: 'standby' }, h);
    expect(promoted.status).toBe(200);
    expect(((await promoted.json()) as { ok: boolean }).ok).toBe(true);
    expect((await cluster.status('standby')).inRecovery).toBe(false);
  }, 120_000);
});

const reason = chromiumSkipReason();

describe.skipIf(reason !== null)(
  `the password-guarded dashboard in chromium${reason ? ` (skipped: ${reason})` : ''}`,
  () => {
    const clusters = clustersPerSuite();

    it('shows the nodes and runs a button once the password is given', async () => {
      const cluster = await clusters.start({ password: PASSWORD });
      const dash = await startDashboardProcess(cluster.dir);
      const browser = await launchChromium();
      try {
        const ctx = await browser.newContext({
          httpCredentials: { username: 'postgres', password: PASSWORD },
        });
        const ui = new DashboardPage(await ctx.newPage());
        await ui.page.goto(dash.url);
        await ui.page.locator('[data-node]').nth(1).waitFor({ timeout: 20_000 });
        await expect.poll(() => ui.field('standby', 'role'), { timeout: 20_000 }).toBe('standby');
        await ui.press('standby', 'pause');
        await expect
          .poll(() => ui.field('standby', 'pauseState'), { timeout: 10_000 })
          .toBe('paused');
      } finally {
        await browser.close();
        dash.child.kill('SIGTERM');
      }
    }, 120_000);
  },
);
