/**
 * The exporter (scripts/exporter.ts) as a real child process in tests: started on a free loopback
 * port, its output kept, scraped over HTTP, and stopped by its pid.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import * as path from 'node:path';
import { ENTRY_BUNDLE_ENV, entryArgs, PROJECT_ROOT } from '../../server/entry.ts';
import { freePort } from '../../server/ports.ts';
import { parsePromText, type PromSample } from './prom-text.ts';

export interface ExporterProcess {
  port: number;
  child: ChildProcess;
  output(): { stdout: string; stderr: string };
  /** GET /metrics (with an Authorization header when given): status and parsed samples. */
  scrape(authorization?: string): Promise<{ status: number; body: string; samples: PromSample[] }>;
  stop(): Promise<void>;
}

/**
 * `tsx`: run it as `npm run exporter` does (tsx's loader, its cycle thread registering tsx too)
 * instead of the test suite's prebuilt entry bundle.
 */
export async function startExporter(
  args: string[],
  opts: { tsx?: boolean } = {},
): Promise<ExporterProcess> {
  const port = await freePort('127.0.0.1');
  const env = { ...process.env };
  if (opts.tsx) delete env[ENTRY_BUNDLE_ENV];
  const entry = opts.tsx
    ? ['--import', 'tsx', path.join(PROJECT_ROOT, 'scripts', 'exporter.ts')]
    : entryArgs('scripts/exporter.ts');
  const child = spawn(process.execPath, [...entry, '--listen', `127.0.0.1:${port}`, ...args], {
    cwd: PROJECT_ROOT,
    env,
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let stdout = '';
  let stderr = '';
  child.stdout!.on('data', (d) => (stdout += d));
  child.stderr!.on('data', (d) => (stderr += d));
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()));
  await new Promise<void>((resolve, reject) => {
    const timer = setTimeout(
      () => reject(new Error(`exporter did not start within 60 s: ${stderr}`)),
      60_000,
    );
    const check = () => {
      if (stdout.includes('serving http://')) {
        clearTimeout(timer);
        resolve();
      }
    };
    child.stdout!.on('data', check);
    child.once('exit', (code) => {
      clearTimeout(timer);
      reject(new Error(`exporter exited ${code} before serving: ${stderr}`));
    });
  });
  return {
    port,
    child,
    output: () => ({ stdout, stderr }),
    async scrape(authorization) {
      const r = await fetch(`http://127.0.0.1:${port}/metrics`, {
        headers: authorization === undefined ? {} : { Authorization: authorization },
      });
      const body = await r.text();
      return { status: r.status, body, samples: r.status === 200 ? parsePromText(body) : [] };
    },
    async stop() {
      if (child.exitCode === null && child.signalCode === null) {
        process.kill(child.pid!, 'SIGTERM');
        const t = setTimeout(() => child.kill('SIGKILL'), 10_000);
        await exited;
        clearTimeout(t);
      }
    },
  };
}
