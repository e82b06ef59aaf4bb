/**
 * A real Prometheus server (Debian's `prometheus` package) in tests: started on a free loopback
 * port with its own temporary configuration and storage, queried through its HTTP API
 * (`/api/v1/query`, `/api/v1/alerts`), reloaded (`/-/reload`), and stopped by its pid.
 */
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import * as fs from 'node:fs';
import * as path from 'node:path';
import { freePort } from '../../server/ports.ts';
import { pollUntil, StopPolling } from '../../server/poll.ts';

export const PROMETHEUS_BIN = '/usr/bin/prometheus';

/** null when a prometheus server binary runs here, else why not (the test title carries it). */
export function prometheusUnavailableReason(): string | null {
  const r = spawnSync(PROMETHEUS_BIN, ['--version'], { encoding: 'utf8' });
  return r.error !== undefined || r.status !== 0
    ? `${PROMETHEUS_BIN} not found (apt-get install prometheus)`
    : null;
}

export interface PromAlert {
  labels: Record<string, string>;
  state: 'pending' | 'firing' | 'inactive';
  value: string;
}

export interface PrometheusProcess {
  port: number;
  child: ChildProcess;
  log(): string;
  /** An instant query: each result's labels and value. */
  query(expr: string): Promise<Array<{ metric: Record<string, string>; value: number }>>;
  alerts(): Promise<PromAlert[]>;
  /** Re-read the configuration and rule files (POST /-/reload). */
  reload(): Promise<void>;
  stop(): Promise<void>;
}

/** Start Prometheus with `config` (prometheus.yml text) in `dir` (rule files beside it). */
export async function startPrometheus(dir: string, config: string): Promise<PrometheusProcess> {
  const port = await freePort('127.0.0.1');
  fs.writeFileSync(path.join(dir, 'prometheus.yml'), config);
  const child = spawn(
    PROMETHEUS_BIN,
    [
      `--config.file=${path.join(dir, 'prometheus.yml')}`,
      `--storage.tsdb.path=${path.join(dir, 'data')}`,
      `--web.listen-address=127.0.0.1:${port}`,
      '--web.enable-lifecycle',
    ],
    { cwd: dir, stdio: ['ignore', 'pipe', 'pipe'] },
  );
  let log = '';
  child.stdout!.on('data', (d) => (log += d));
  child.stderr!.on('data', (d) => (log += d));
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  const base = `http://127.0.0.1:${port}`;
  const api = async (p: string) => {
    const r = await fetch(`${base}${p}`);
    const j = (await r.json()) as { status: string; data: unknown; error?: string };
    if (j.status !== 'success') throw new Error(`${p}: ${j.error}`);
    return j.data;
  };
  const p: PrometheusProcess = {
    port,
    child,
    log: () => log,
    async query(expr) {
      const d = (await api(`/api/v1/query?query=${encodeURIComponent(expr)}`)) as {
        result: Array<{ metric: Record<string, string>; value: [number, string] }>;
      };
      return d.result.map((x) => ({ metric: x.metric, value: Number(x.value[1]) }));
    },
    async alerts() {
      return ((await api('/api/v1/alerts')) as { alerts: PromAlert[] }).alerts;
    },
    async reload() {
      const r = await fetch(`${base}/-/reload`, { method: 'POST' });
      if (!r.ok) throw new Error(`reload: ${r.status} ${await r.text()}\n${log}`);
    },
    async stop() {
      if (child.exitCode === null && child.signalCode === null) {
        process.kill(child.pid!, 'SIGTERM');
        const t = setTimeout(() => child.kill('SIGKILL'), 15_000);
        await exited;
        clearTimeout(t);
      }
    },
  };
  try {
    await pollUntil(
      async () => {
        if (child.exitCode !== null) throw new StopPolling(new Error(`prometheus exited: ${log}`));
        return (await fetch(`${base}/-/ready`).catch(() => null))?.ok === true;
      },
      'prometheus to be ready',
      60_000,
      200,
    );
  } catch (e) {
    await p.stop();
    throw e;
  }
  return p;
}
