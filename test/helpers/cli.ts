/**
 * Run a user-facing CLI (scripts/*.ts) as a real child process, the way `npm run` does, and
 * collect its exit code, output and `--json` object (the last line of stdout).
 */
import { spawn } from 'node:child_process';
import * as path from 'node:path';
import { entryArgs, PROJECT_ROOT } from '../../server/entry.ts';

export { PROJECT_ROOT };

export interface CliRun {
  code: number | null;
  stdout: string;
  stderr: string;
  /** The last line of stdout parsed as JSON (null when it is not JSON). */
  json: any;
}

export function runScript(script: string, args: string[], timeoutMs = 120_000): Promise<CliRun> {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [...entryArgs(path.join('scripts', script)), ...args], {
      cwd: PROJECT_ROOT,
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (d) => (stdout += d));
    child.stderr.on('data', (d) => (stderr += d));
    const timer = setTimeout(() => {
      child.kill('SIGINT');
      reject(
        new Error(`${script} ${args.join(' ')} did not finish within ${timeoutMs} ms\n${stderr}`),
      );
    }, timeoutMs);
    child.on('error', reject);
    child.on('close', (code) => {
      clearTimeout(timer);
      const last = stdout.trimEnd().split('\n').at(-1) ?? '';
      let json: unknown = null;
      try {
        json = JSON.parse(last);
      } catch {
        /* not JSON */
      }
      resolve({ code, stdout, stderr, json });
    });
  });
}
