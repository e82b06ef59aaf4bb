/**
 * Run a user-facing CLI (scripts/*.ts) as a real child process, the way `npm run` does, and
 * collect its exit code, output and `--json` object (the last line of stdout).
 */
import { spawn } from 'node:child_process';
import * as path from 'node:path';
import { expect } from 'vitest';
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
      // INV-SCRIPTS-4, checked on every CLI run a test makes: a successful `--json` run ends
      // stdout with exactly one JSON object (progress and logs went to stderr).
      if (code === 0 && args.includes('--json') && (json === null || typeof json !== 'object')) {
        reject(
          new Error(
            `INV-SCRIPTS-4: ${script} ${args.join(' ')} exited 0 but the last line of stdout is not one JSON object: ${JSON.stringify(last.slice(0, 200))}`,
          ),
        );
        return;
      }
      resolve({ code, stdout, stderr, json });
    });
  });
}

/**
 * A one-line error: the first stderr line says what is wrong; no stack trace; exit status `code`
 * (any non-zero status when not given). Returns that line, for checks one pattern cannot say.
 */
export function expectOneLineError(r: CliRun, pattern: RegExp, code?: number): string {
  if (code !== undefined) expect(r.code, r.stdout + r.stderr).toBe(code);
  else {
    expect(r.code, r.stdout + r.stderr).not.toBe(0);
    expect(r.code).not.toBeNull();
  }
  const first = r.stderr.split('\n')[0]!;
  expect(first).toMatch(/^error: /);
  expect(first).toMatch(pattern);
  expect(r.stderr).not.toMatch(/^\s+at /m);
  return first;
}
