/**
 * pg_ctl stop must see a server that exited but was never reaped as gone. In a container whose
 * init does not reap orphans (a server started by `cluster start`, whose CLI has exited), or under a
 * parent blocked in spawnSync, the exited server stays a zombie: `kill(pid, 0)` still succeeds, so
 * a stop that polled only that waited its whole 60 s timeout.
 *
 * Method: a stand-in server process (its command line carries the server marker and the data
 * directory, like a real one) is started as the child of a shell that then execs `sleep`, which
 * never reaps it; stopNode signals it; it exits and stays a zombie; stopNode must return promptly.
 */
import { spawn } from 'node:child_process';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { isWalsimServer, nodeDir, pidFilePath, SERVER_MARKER } from '../../server/cluster-files.ts';
import { stopNode } from '../../server/pg-ctl.ts';
import { pollUntil } from '../../server/poll.ts';

const isZombie = (pid: number): boolean => {
  try {
    // /proc/<pid>/stat: "pid (comm) S ..."; the state follows the last ')'.
    const stat = fs.readFileSync(`/proc/${pid}/stat`, 'utf8');
    return stat.slice(stat.lastIndexOf(')') + 2, stat.lastIndexOf(')') + 3) === 'Z';
  } catch {
    return false;
  }
};

describe('pg_ctl stop and unreaped servers', () => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'walsim-zombie-'));
  const shells: number[] = []; // the shells and their stand-ins, killed at the end
  afterAll(() => {
    for (const pid of shells)
      try {
        process.kill(pid, 'SIGKILL');
      } catch {
        /* already gone */
      }
    fs.rmSync(dir, { recursive: true, force: true });
  });

  it('returns as soon as the signalled server has exited, even if nobody reaps it', async () => {
    const dataDir = nodeDir(dir, 'primary');
    fs.mkdirSync(dataDir, { recursive: true });
    const pidOut = path.join(dir, 'child.pid');
    const ready = path.join(dir, 'ready');
    // Ready only once its SIGINT handler is installed: a signal that came earlier would be lost.
    const fake = `process.on('SIGINT', () => process.exit(0)); require('fs').writeFileSync(${JSON.stringify(ready)}, '1'); setInterval(() => {}, 1000)`;
    const q = (s: string) => `'${s.replace(/'/g, `'\\''`)}'`;
    // The shell starts the stand-in, records its pid, then becomes `sleep`, which never waits for it.
    const shell = spawn(
      'sh',
      [
        '-c',
        `${q(process.execPath)} -e ${q(fake)} ${SERVER_MARKER} --datadir ${q(path.resolve(dataDir))} & echo $! > ${q(pidOut)}; exec sleep 60`,
      ],
      { stdio: 'ignore' },
    );
    shells.push(shell.pid!);
    await pollUntil(
      async () => fs.existsSync(pidOut) && fs.readFileSync(pidOut, 'utf8').trim() !== '',
      'the stand-in server pid',
      10_000,
    );
    const pid = Number(fs.readFileSync(pidOut, 'utf8'));
    shells.push(pid); // if the test fails before the stop, the stand-in must not outlive it
    await pollUntil(
      async () => fs.existsSync(ready),
      'the stand-in server to install its SIGINT handler',
      10_000,
    );
    // Until the forked shell has exec'd node, /proc/<pid>/cmdline is the shell's (whose script text
    // mentions the marker): wait for the stand-in's own command line, element by element.
    await pollUntil(async () => isWalsimServer(pid, dataDir), 'the stand-in server to run', 10_000);
    // And until the shell has exec'd `sleep`, it would reap the stand-in itself: wait for that too.
    await pollUntil(
      async () => fs.readFileSync(`/proc/${shell.pid}/cmdline`, 'utf8').split('\0')[0] === 'sleep',
      'the shell to become sleep',
      10_000,
    );
    fs.writeFileSync(
      pidFilePath(dataDir),
      JSON.stringify({
        pid,
        port: 1,
        role: 'primary',
        startedAt: new Date().toISOString(),
        marker: SERVER_MARKER,
      }),
    );

    const t0 = Date.now();
    expect(await stopNode(dir, 'primary', 'fast', 10_000)).toBe(true);
    const tookMs = Date.now() - t0;
    // The stand-in exited and is left unreaped: the case this test is about. (Its command line is
    // emptied when its memory is released, a moment before the kernel marks it a zombie.)
    await pollUntil(
      async () => isZombie(pid),
      'the stopped stand-in to be an unreaped zombie',
      5_000,
    );
    // Behaviour, not timing: with the old kill(0) poll this call timed out (10 s) and threw.
    expect(tookMs).toBeLessThan(10_000);
  });
});
