/**
 * INV-SCRIPTS-3: a sweep stops the clusters it started whatever happens, Ctrl-C included.
 * Method: start a real `npm run sweep` (walsim engine, 16MB, 6 tables) as a child process, wait
 * until its first cell's nodes have written their postmaster.pid files, send SIGINT, and check
 * that it exits 130 and that every server process it started is gone (dead or a zombie waiting
 * for its parent to reap it: either way it serves nothing).
 */
import { spawn } from 'node:child_process';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { readAnyPidFile } from '../../server/cluster-files.ts';
import { entryArgs, PROJECT_ROOT } from '../../server/entry.ts';
import { pollUntil } from '../../server/poll.ts';

const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'walsim-sweep-interrupt-'));
afterAll(() => fs.rmSync(tmp, { recursive: true, force: true }));

/** The pids of the servers whose postmaster.pid is under `dir` (starting or ready). */
function serverPids(dir: string): number[] {
  if (!fs.existsSync(dir)) return [];
  const pids: number[] = [];
  for (const f of fs.readdirSync(dir, { recursive: true, encoding: 'utf8' })) {
    if (path.basename(f) !== 'postmaster.pid') continue;
    try {
      const pid = readAnyPidFile(path.dirname(path.join(dir, f)))?.pid;
      if (pid !== undefined) pids.push(pid);
    } catch {
      /* removed meanwhile */
    }
  }
  return pids;
}

/** Running means: the pid exists and is not a zombie. */
function running(pid: number): boolean {
  try {
    const stat = fs.readFileSync(`/proc/${pid}/stat`, 'utf8');
    return stat.slice(stat.lastIndexOf(')') + 2, stat.lastIndexOf(')') + 3) !== 'Z';
  } catch {
    return false;
  }
}

describe('npm run sweep, interrupted', () => {
  it('INV-SCRIPTS-3: Ctrl-C stops every cluster it started, removes its work directory, says so and exits 130', async () => {
    const workDir = path.join(tmp, 'work');
    const args = ['multi', '--shared-buffers', '16MB', '--tables', '6', '--runs', '1'];
    const child = spawn(
      process.execPath,
      [
        ...entryArgs(path.join('scripts', 'sweep.ts')),
        ...args,
        '--work-dir',
        workDir,
        '--out',
        path.join(tmp, 'out'),
      ],
      { cwd: PROJECT_ROOT, stdio: ['ignore', 'pipe', 'pipe'] },
    );
    let stderr = '';
    child.stderr.on('data', (d) => (stderr += d));
    child.stdout.resume();
    const exited = new Promise<number | null>((resolve) => child.on('close', resolve));

    // A server of the first cell is up (the primary first, then its standby).
    let pids: number[] = [];
    await pollUntil(
      async () => {
        pids = serverPids(workDir).filter(running);
        return pids.length >= 1;
      },
      'a server of the first cell',
      120_000,
    );
    child.kill('SIGINT');
    expect(await exited, stderr).toBe(130);
    for (const pid of pids) expect(running(pid), `server pid ${pid} still running`).toBe(false);
    expect(serverPids(workDir).filter(running)).toEqual([]);
    // Its working directory is gone, and it said what it cleaned.
    expect(fs.existsSync(workDir)).toBe(false);
    expect(stderr).toMatch(
      /sweep interrupted: stopped the servers of \d+ clusters? it had started and removed .*work; no results written/,
    );
  }, 180_000);
});
