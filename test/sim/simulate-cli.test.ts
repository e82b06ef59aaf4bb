/**
 * `npm run simulate` answers --help, refuses bad numbers with a one-line error (no stack), refuses
 * a seed range past the 32-bit seed space instead of silently running fewer seeds (seeds alias
 * modulo 2^32), accepts --dir (every CLI takes it) with a note that it is ignored, and replays a
 * seed of several nodes to the same trace hash in two processes (seed 65 once logged a temp file
 * name holding the process id). Absurd numbers are refused naming the bound (`--steps 1e12`,
 * `--jobs 0`), the summary counts the seeds it ran, two jobs taking blocks in turn run every seed
 * once (the totals of one job), an interrupted run (SIGINT) still prints the
 * summary of the seeds it finished, and its workers end when it is SIGKILLed.
 * Method: the CLI as a child process; exit codes and the first stderr line.
 */
import { spawn } from 'node:child_process';
import * as fs from 'node:fs';
import * as path from 'node:path';
import { describe, expect, it } from 'vitest';
import { expectOneLineError, runScript } from '../helpers/cli.ts';
import { entryArgs, PROJECT_ROOT } from '../../server/entry.ts';
import { pollUntil } from '../../server/poll.ts';

/** The simulation workers among the child processes of `pid` (Linux /proc). */
function workersOf(pid: number): number[] {
  try {
    const text = fs.readFileSync(`/proc/${pid}/task/${pid}/children`, 'utf8').trim();
    const children = text === '' ? [] : text.split(/\s+/).map(Number);
    // Not the loader's own helper (esbuild's service): the processes started with --worker.
    return children.filter((c) =>
      fs.readFileSync(`/proc/${c}/cmdline`, 'utf8').includes('--worker'),
    );
  } catch {
    return [];
  }
}

const alive = (pid: number) => fs.existsSync(`/proc/${pid}`);

describe('simulate CLI', () => {
  it('prints its usage for --help', async () => {
    const r = await runScript('simulate.ts', ['--help']);
    expect(r.code).toBe(0);
    expect(r.stdout).toMatch(/^usage: npm run simulate/);
    expect(r.stdout).toMatch(/--dir DIR/);
  });

  it('refuses negative and unknown values with one line', async () => {
    expectOneLineError(await runScript('simulate.ts', ['--seeds', '-1']), /--seeds .*"-1"/, 2);
    expectOneLineError(await runScript('simulate.ts', ['--bogus']), /Unknown option '--bogus'/, 2);
  });

  it('refuses a seed range past the last 32-bit seed', async () => {
    expectOneLineError(
      await runScript('simulate.ts', ['--from', '9007199254740991', '--seeds', '2']),
      /--from must be at most 4294967295/,
      2,
    );
    expectOneLineError(
      await runScript('simulate.ts', ['--from', '4294967295', '--seeds', '2']),
      /runs past the last seed/,
      2,
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

  it('refuses absurd --steps and --jobs, naming the bound', async () => {
    expectOneLineError(
      await runScript('simulate.ts', ['--steps', '1e12']),
      /--steps must be at most 10000 \(commands per scenario; run more seeds\), got "1e12"/,
      2,
    );
    expectOneLineError(
      await runScript('simulate.ts', ['--jobs', '0']),
      /--jobs must be at least 1, got "0"/,
      2,
    );
    expectOneLineError(
      await runScript('simulate.ts', ['--jobs', '100000']),
      /--jobs must be at most 256, got "100000"/,
      2,
    );
  });

  it('counts the seeds it ran in the summary', async () => {
    const r = await runScript('simulate.ts', ['--seeds', '2', '--jobs', '1', '--steps', '5']);
    expect(r.code, r.stderr).toBe(0);
    expect(r.stdout).toMatch(/^2 seeds \(1\.\.2\)/m);
    expect(r.stdout).toMatch(/^invariant violations: none in 2 seeds$/m);
  });

  it('with two jobs taking blocks in turn, it runs every seed once: the totals of one job', async () => {
    // 40 seeds on 2 jobs: blocks of 3 seeds, so each worker asks for the next one many times.
    const args = ['--seeds', '40', '--from', '7001', '--steps', '4', '--json'];
    const [one, two] = await Promise.all([
      runScript('simulate.ts', [...args, '--jobs', '1']),
      runScript('simulate.ts', [...args, '--jobs', '2']),
    ]);
    expect(one.code, one.stderr).toBe(0);
    expect(two.code, two.stderr).toBe(0);
    const pick = (out: string) => {
      const s = JSON.parse(out.trim().split('\n').at(-1)!) as Record<string, unknown>;
      return [s.seeds, s.events, s.acknowledged, s.failovers, s.replicaComparisons];
    };
    expect(pick(two.stdout)).toEqual(pick(one.stdout));
    expect(pick(two.stdout)[0]).toBe(40);
  });

  it('interrupted by SIGINT, it prints the summary of the seeds it finished and exits 130', async () => {
    const parent = spawn(
      process.execPath,
      [...entryArgs(path.join('scripts', 'simulate.ts')), '--seeds', '100000', '--jobs', '2'],
      { cwd: PROJECT_ROOT, stdio: ['ignore', 'pipe', 'pipe'] },
    );
    let out = '';
    parent.stdout!.on('data', (d: Buffer) => (out += d.toString()));
    const exited = new Promise<number | null>((resolve) => parent.on('exit', resolve));
    let workers: number[] = [];
    try {
      await pollUntil(
        async () => (workers = workersOf(parent.pid!)).length === 2,
        'two simulation workers',
        60_000,
        100,
      );
      parent.kill('SIGINT');
      expect(await exited, out).toBe(130);
      expect(out).toMatch(
        /^interrupted \(SIGINT\) after (\d+) of 100000 seeds \(2 jobs took blocks of 200 seeds/m,
      );
      const ran = Number(/after (\d+) of/.exec(out)![1]);
      expect(out).toMatch(new RegExp(`^invariant violations: none in ${ran} seeds$`, 'm'));
      await pollUntil(async () => !workers.some(alive), 'the workers to end', 30_000, 100);
    } finally {
      parent.kill('SIGKILL');
      for (const w of workers.filter(alive)) process.kill(w, 'SIGKILL');
    }
  }, 120_000);

  it('its workers end when it is killed with SIGKILL', async () => {
    const parent = spawn(
      process.execPath,
      [...entryArgs(path.join('scripts', 'simulate.ts')), '--seeds', '100000', '--jobs', '2'],
      { cwd: PROJECT_ROOT, stdio: 'ignore' },
    );
    let workers: number[] = [];
    try {
      await pollUntil(
        async () => (workers = workersOf(parent.pid!)).length === 2,
        'two simulation workers',
        60_000,
        100,
      );
      parent.kill('SIGKILL');
      await pollUntil(async () => !workers.some(alive), 'the workers to end', 30_000, 100);
    } finally {
      parent.kill('SIGKILL');
      for (const w of workers.filter(alive)) process.kill(w, 'SIGKILL');
    }
  }, 120_000);
});
