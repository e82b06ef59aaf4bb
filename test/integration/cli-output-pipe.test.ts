/**
 * A CLI's output arrives whole through a pipe whose reader is slower than the writer (a `--json`
 * of ~1 MB into jq or grep): the exit path waits for stdout and stderr to be flushed.
 * Method: a CLI on runCli (test/fixtures/big-json-cli.ts) prints ~1 MB of JSON; the test reads
 * nothing from the pipe until the CLI's main has returned (its stderr says so), then reads it all:
 * the last line parses and holds every row. The same for ~1 MB of stderr before a failure.
 */
import { spawn } from 'node:child_process';
import * as path from 'node:path';
import { describe, expect, it } from 'vitest';
import { entryArgs, PROJECT_ROOT } from '../../server/entry.ts';

interface Run {
  code: number | null;
  stdout: string;
  stderr: string;
}

/** Run the fixture; stdout is not read until "main returned" arrives on stderr. */
function runSlowReader(args: string[]): Promise<Run> {
  return new Promise((resolve, reject) => {
    const fixture = path.join(PROJECT_ROOT, 'test', 'fixtures', 'big-json-cli.ts');
    const child = spawn(process.execPath, [...entryArgs(fixture), ...args], {
      cwd: PROJECT_ROOT,
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    child.stdout.pause();
    let stdout = '';
    let stderr = '';
    let reading = false;
    child.stderr.on('data', (d) => {
      stderr += d;
      if (!reading && stderr.includes('main returned\n')) {
        reading = true;
        child.stdout.on('data', (c) => (stdout += c));
        child.stdout.resume();
      }
    });
    child.on('error', reject);
    child.on('close', (code) => resolve({ code, stdout, stderr }));
  });
}

describe('output through a slow pipe', () => {
  it('a ~1 MB --json arrives whole', async () => {
    const r = await runSlowReader(['--json']);
    expect(r.code).toBe(0);
    expect(r.stdout.length).toBeGreaterThan(1 << 20);
    const last = r.stdout.trimEnd().split('\n').at(-1)!;
    const v = JSON.parse(last) as { rows: Array<{ i: number }> };
    expect(v.rows).toHaveLength(40_000);
    expect(v.rows.at(-1)!.i).toBe(39_999);
  });

  it('a failure after ~1 MB of stderr still prints its error line, and stdout is whole', async () => {
    const r = await runSlowReader(['--json', 'fail']);
    expect(r.code).toBe(2);
    expect(r.stderr.trimEnd().split('\n').at(-1)).toBe('error: the last line after 1 MB of stderr');
    expect(JSON.parse(r.stdout.trimEnd()).rows).toHaveLength(40_000);
  });
});
