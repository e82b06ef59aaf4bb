/**
 * The exporter (scripts/exporter.ts) as a real child process in tests: started on a free loopback
 * port, its output kept, scraped over HTTP, and stopped by its pid.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { entryArgs, PROJECT_ROOT } from '../../server/entry.ts';
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

export async function startExporter(args: string[]): Promise<ExporterProcess> {
  const port = await freePort('127.0.0.1');
  const child = spawn(
    process.execPath,
    [...entryArgs('scripts/exporter.ts'), '--listen', `127.0.0.1:${port}`, ...args],
    { cwd: PROJECT_ROOT, stdio: ['ignore', 'pipe', 'pipe'] },
  );
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
