/**
 * `npx tsx dashboard/latency-bench.ts --dir DIR`: how responsive the dashboard and
 * the nodes' `status` stay during a failover. The cluster at DIR must be prepared up to the
 * `stop` step (`npm run multi -- create|insert|pause|truncate|stop`); this starts the dashboard
 * in-process (poll 250 ms), then runs `multi resume` (resume + promote) as a child process and,
 * until it ends, every 100 ms: GET /api/nodes, and a ping → pong on the page's socket. It prints
 * one JSON object: per measure the count, median, p95 and max in ms (the standby's `status`
 * round trips as the Collector timed them; the dashboard's HTTP and socket round trips), the
 * failover's own report and the load average. Timing: quote it with the load average.
 *
 * Figures: dashboard/README.md, "Responsiveness during a 100GB full-scan replay".
 */
import { spawn } from 'node:child_process';
import * as fs from 'node:fs';
import * as path from 'node:path';
import WebSocket from 'ws';
import { defaultCostProfile } from '../cost-model/profile.ts';
import { parseCli, UsageError } from '../scripts/cli/command.ts';
import type { ClusterSource, NodeSample } from './collector.ts';
import { startDashboard } from './server.ts';
import { WalsimSource } from './walsim-source.ts';

const PROBE_MS = 100;

/** The walsim source, each sample's round trip recorded per node. */
class TimedSource implements ClusterSource {
  readonly engine;
  readonly dir;
  readonly ms = new Map<string, number[]>();
  constructor(private readonly inner: ClusterSource) {
    this.engine = inner.engine;
    this.dir = inner.dir;
  }
  nodeNames(): string[] {
    return this.inner.nodeNames();
  }
  async sample(name: string): Promise<NodeSample> {
    const t0 = performance.now();
    const s = await this.inner.sample(name);
    if (s.state === 'running') {
      const list = this.ms.get(name) ?? [];
      list.push(performance.now() - t0);
      this.ms.set(name, list);
    }
    return s;
  }
  close() {
    return this.inner.close();
  }
}

function summary(xs: number[]) {
  const s = [...xs].sort((a, b) => a - b);
  const at = (q: number) => s[Math.min(s.length - 1, Math.floor(q * s.length))] ?? null;
  const r = (v: number | null) => (v === null ? null : Math.round(v * 10) / 10);
  return { n: s.length, medianMs: r(at(0.5)), p95Ms: r(at(0.95)), maxMs: r(s.at(-1) ?? null) };
}

const USAGE = 'usage: npx tsx dashboard/latency-bench.ts --dir DIR';
const { values } = parseCli(process.argv.slice(2), { dir: { type: 'string' } }, USAGE);
if (values.dir === undefined) throw new UsageError(`--dir is required\n${USAGE}`);
const dir = path.resolve(values.dir);
const source = new TimedSource(new WalsimSource(dir));
const d = await startDashboard({
  source,
  port: 0,
  listen: '127.0.0.1',
  password: null,
  pollMs: 250,
  profile: defaultCostProfile(),
  profileName: defaultCostProfile().name,
  resultsDir: dir,
});
const ws = new WebSocket(`ws://127.0.0.1:${d.port}/live?token=${d.token}`, {
  perMessageDeflate: false,
});
await new Promise((r) => ws.once('open', r));
await new Promise((r) => setTimeout(r, 2_000)); // the loops' first samples, connections made
for (const v of source.ms.values()) v.length = 0;

let pingAt = 0;
const wsMs: number[] = [];
ws.on('message', (m) => {
  if (String(m).startsWith('{"type":"pong"')) wsMs.push(performance.now() - pingAt);
});
const httpMs: number[] = [];
let done = false;
const load0 = fs.readFileSync('/proc/loadavg', 'utf8').trim();
const child = spawn(
  process.execPath,
  [
    '--import',
    'tsx',
    path.join(import.meta.dirname, '..', 'scripts', 'multi.ts'),
    'resume',
    '--dir',
    dir,
    '--json',
  ],
  { stdio: ['ignore', 'pipe', 'inherit'] },
);
let out = '';
child.stdout.on('data', (b) => (out += b));
const ended = new Promise<number | null>((r) => child.on('close', (c) => ((done = true), r(c))));
const probe = (async () => {
  while (!done) {
    const t0 = performance.now();
    await (await fetch(`http://127.0.0.1:${d.port}/api/nodes`)).text();
    httpMs.push(performance.now() - t0);
    pingAt = performance.now();
    ws.send('ping');
    await new Promise((r) => setTimeout(r, PROBE_MS));
  }
})();
const code = await ended;
await probe;
const load1 = fs.readFileSync('/proc/loadavg', 'utf8').trim();
ws.close();
await d.close();
const report = JSON.parse(out.trim().split('\n').at(-1) ?? 'null') as Record<
  string,
  unknown
> | null;
console.log(
  JSON.stringify({
    resumeExit: code,
    standbyStatus: summary(source.ms.get('standby') ?? []),
    dashboardHttp: summary(httpMs),
    dashboardSocket: summary(wsMs),
    requests: Object.fromEntries(d.collector.requests),
    loadavg: { before: load0, after: load1 },
    failover: report,
  }),
);
