/**
 * `npm run simulate` answers --help, refuses bad numbers with a one-line error (no stack), refuses
 * a seed range past the 32-bit seed space instead of silently running fewer seeds (seeds alias
 * modulo 2^32), accepts --dir (every CLI takes it) with a note that it is ignored, and replays a
 * seed of several nodes to the same trace hash in two processes (seed 65 once logged a temp file
 * name holding the process id).
 * Method: the CLI as a child process; exit codes and the first stderr line.
 */
import { describe, expect, it } from 'vitest';
import { runScript, type CliRun } from '../helpers/cli.ts';

function expectOneLineError(r: CliRun, pattern: RegExp): void {
  expect(r.code, r.stdout + r.stderr).toBe(2);
  const first = r.stderr.split('\n')[0]!;
  expect(first).toMatch(/^error: /);
  expect(first).toMatch(pattern);
  expect(r.stderr).not.toMatch(/^\s+at /m);
}

describe('simulate CLI', () => {
  it('prints its usage for --help', async () => {
    const r = await runScript('simulate.ts', ['--help']);
    expect(r.code).toBe(0);
    expect(r.stdout).toMatch(/^usage: npm run simulate/);
    expect(r.stdout).toMatch(/--dir DIR/);
  });

  it('refuses negative and unknown values with one line', async () => {
    expectOneLineError(await runScript('simulate.ts', ['--seeds', '-1']), /--seeds .*"-1"/);
    expectOneLineError(await runScript('simulate.ts', ['--bogus']), /Unknown option '--bogus'/);
  });

  it('refuses a seed range past the last 32-bit seed', async () => {
    expectOneLineError(
      await runScript('simulate.ts', ['--from', '9007199254740991', '--seeds', '2']),
      /--from must be at most 4294967295/,
    );
    expectOneLineError(
      await runScript('simulate.ts', ['--from', '4294967295', '--seeds', '2']),
      /runs past the last seed/,
    );
  });

  it('accepts --dir and says it is ignored', async () => {
    const r = await runScript('simulate.ts', ['--seed', '3', '--dir', 'nowhere']);
    expect(r.code, r.stderr).toBe(0);
    expect(r.stderr).toMatch(/--dir ignored/);
    expect(r.stdout).toMatch(/^seed 3: ok/);
  });

  it('replays a seed of several nodes to the same trace hash in another process', async () => {
    const hash = async () => {
      const r = await runScript('simulate.ts', ['--seed', '65', '--json']);
      expect(r.code, r.stderr).toBe(0);
      return (JSON.parse(r.stdout.trim().split('\n').pop()!) as { traceHash: string }).traceHash;
    };
    expect(await hash()).toBe(await hash());
  }, 60_000);
});
