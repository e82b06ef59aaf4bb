/**
 * Locks: a node's data directory is held by its server's postmaster.pid, so a
 * second server started on it is refused before it touches anything (PostgreSQL's
 * CreateDataDirLockFile); cluster-wide CLI operations take the cluster lock, so two concurrent
 * switchovers run one after the other and never leave two read-write nodes, and two concurrent
 * `add-standby --name s3` build s3 once.
 * Method: real processes; the second server is spawned by hand exactly as pg_ctl.ts spawns one;
 * the data directory's files (size and mtime) are compared before and after; the concurrent
 * operations are real CLI processes started together, then `cluster status --json` is read.
 */
import { spawn } from 'node:child_process';
import * as fs from 'node:fs';
import * as path from 'node:path';
import { describe, expect, it } from 'vitest';
import { clustersPerTest } from '../helpers/cluster.ts';
import { PROJECT_ROOT, runScript, type CliRun } from '../helpers/cli.ts';
import { readPidFile, SERVER_MARKER } from '../../server/cluster-files.ts';
import { clusterLockPath } from '../../server/lock-files.ts';
import { entryArgs } from '../../server/entry.ts';

const clusters = clustersPerTest();

/** Every file under `dir` with its size and mtime, except the log (a refused server appends to it). */
function snapshot(dir: string): Record<string, string> {
  const out: Record<string, string> = {};
  const walk = (d: string) => {
    for (const e of fs.readdirSync(d, { withFileTypes: true })) {
      const p = path.join(d, e.name);
      if (e.isDirectory()) walk(p);
      else if (e.name !== 'server.log') {
        const st = fs.statSync(p);
        out[path.relative(dir, p)] = `${st.size}@${st.mtimeMs}`;
      }
    }
  };
  walk(dir);
  return out;
}

/** Start a server process on `dataDir` as pg_ctl.ts does; resolve with its exit code and output. */
function runServer(
  dataDir: string,
  clusterDir: string,
): Promise<{ code: number | null; out: string }> {
  return new Promise((resolve) => {
    const child = spawn(
      process.execPath,
      [
        ...entryArgs('server/main.ts'),
        SERVER_MARKER,
        '--datadir',
        dataDir,
        '--cluster-dir',
        clusterDir,
      ],
      { cwd: PROJECT_ROOT, stdio: ['ignore', 'pipe', 'pipe'] },
    );
    let out = '';
    child.stdout.on('data', (d) => (out += d));
    child.stderr.on('data', (d) => (out += d));
    const timer = setTimeout(() => child.kill('SIGQUIT'), 30_000);
    child.on('close', (code) => {
      clearTimeout(timer);
      resolve({ code, out });
    });
  });
}

/** The running nodes that are read-write, from `cluster status --json`. */
async function readWriteNodes(
  dir: string,
): Promise<{ rw: string[]; running: string[]; tli: number[] }> {
  const st = await runScript('cluster.ts', ['status', '--json', '--dir', dir]);
  expect(st.code, st.stderr).toBe(0);
  const nodes = st.json.nodes as Record<
    string,
    { running: boolean; inRecovery?: boolean; timeline?: number }
  >;
  const running = Object.keys(nodes).filter((n) => nodes[n]!.running);
  return {
    running,
    rw: running.filter((n) => nodes[n]!.inRecovery === false),
    tli: running.map((n) => nodes[n]!.timeline!),
  };
}

describe('postmaster.pid: one server per data directory', () => {
  it('refuses a second server on a running data directory before it touches anything', async () => {
    const cl = await clusters.start();
    await cl.sql('primary', 'CREATE TABLE t (c int)');
    await cl.sql('primary', 'INSERT INTO t SELECT generate_series(1, 1000)');
    await cl.waitForCatchup('replay');
    for (const name of ['primary', 'standby']) {
      const dataDir = cl.dataDir(name);
      const first = readPidFile(dataDir)!;
      const before = snapshot(dataDir);
      const second = await runServer(dataDir, cl.dir);
      expect(second.code).toBe(1);
      expect(second.out).toContain('FATAL:  lock file "postmaster.pid" already exists');
      expect(second.out).toContain(
        `HINT:  Is another walsim server (PID ${first.pid}) running in data directory "${dataDir}"?`,
      );
      expect(second.out).not.toMatch(/crash recovery|redo|listening/);
      expect(snapshot(dataDir)).toEqual(before); // nothing read-modified, nothing written
      expect(readPidFile(dataDir)).toEqual(first);
      expect((await cl.status(name)).pid).toBe(first.pid);
    }
    expect(await cl.scalar('standby', 'SELECT count(*) FROM t')).toBe(1000);
    // A stale lock file (its pid is dead) is removed and replaced, as PostgreSQL does.
    await cl.stopNode('standby', 'immediate');
    const dead = spawn('true');
    await new Promise((r) => dead.on('close', r));
    fs.writeFileSync(
      path.join(cl.dataDir('standby'), 'postmaster.pid'),
      JSON.stringify({ pid: dead.pid, startedAt: '', marker: SERVER_MARKER, status: 'starting' }),
    );
    await cl.startNode('standby');
    expect(readPidFile(cl.dataDir('standby'))!.pid).not.toBe(dead.pid);
  });
});

describe('the cluster lock', () => {
  it('serializes concurrent switchovers: exactly one read-write node every time', async () => {
    const cl = await clusters.start({
      standbys: ['standby1', 'standby2'],
      synchronousCommit: 'on',
    });
    await cl.sql('primary', 'CREATE TABLE t (c int)');
    let rows = 0;
    let primary = 'primary';
    for (let round = 1; round <= 3; round++) {
      const targets = ['primary', 'standby1', 'standby2'].filter((n) => n !== primary);
      const runs: CliRun[] = await Promise.all(
        targets.map((to) =>
          runScript('cluster.ts', ['switchover', '--to', to, '--json', '--dir', cl.dir]),
        ),
      );
      // Both ran, one after the other: each target was a streaming standby when its turn came.
      for (const r of runs) expect(r.code, r.stdout + r.stderr).toBe(0);
      expect(
        runs.some((r) => /waiting for the cluster operation "switchover"/.test(r.stderr)),
      ).toBe(true);
      const { rw, running, tli } = await readWriteNodes(cl.dir);
      expect(running.sort()).toEqual(['primary', 'standby1', 'standby2']);
      expect(rw, `round ${round}`).toHaveLength(1);
      expect(new Set(tli).size).toBe(1); // everybody follows the one new timeline
      expect(tli[0]).toBe(1 + 2 * round);
      primary = rw[0]!;
      // The last switchover's target is the primary; the cluster still replicates synchronously.
      expect(targets).toContain(primary);
      await cl.sql(primary, `INSERT INTO t SELECT generate_series(1, 100)`);
      rows += 100;
      for (const n of running) {
        await cl.pollUntil(
          async () => (await cl.scalar(n, 'SELECT count(*) FROM t')) === rows,
          `${n} has ${rows} rows`,
        );
      }
    }
    expect(fs.existsSync(clusterLockPath(cl.dir))).toBe(false); // released
  }, 300_000);

  it('builds a standby once when two add-standby --name s3 run at the same time', async () => {
    const cl = await clusters.start();
    await cl.sql('primary', 'CREATE TABLE t (c int)');
    await cl.sql('primary', 'INSERT INTO t SELECT generate_series(1, 500)');
    const runs = await Promise.all(
      [1, 2].map(() => runScript('cluster.ts', ['add-standby', '--name', 's3', '--dir', cl.dir])),
    );
    const ok = runs.filter((r) => r.code === 0);
    const refused = runs.filter((r) => r.code !== 0);
    expect(ok).toHaveLength(1);
    expect(refused).toHaveLength(1);
    expect(refused[0]!.stderr.split('\n').filter((l) => l.startsWith('error: '))).toEqual([
      `error: node "s3" already exists in ${cl.dir}`,
    ]);
    // One base backup, one start: s3's log shows a single server start (its recovery from the
    // backup's checkpoint) and no refused second server.
    const log = cl.serverLog('s3');
    expect(log.match(/listening on/g)).toHaveLength(1);
    expect(log.match(/crash recovery replayed/g)).toHaveLength(1);
    expect(log).not.toMatch(/FATAL/);
    expect(await cl.scalar('s3', 'SELECT count(*) FROM t')).toBe(500);
    expect(fs.readdirSync(cl.dir).filter((f) => f.startsWith('s3'))).toEqual(['s3']);
  });

  it('takes over a stale lock (a dead holder) and refuses nothing else', async () => {
    const cl = await clusters.start();
    const dead = spawn('true');
    await new Promise((r) => dead.on('close', r));
    fs.writeFileSync(
      clusterLockPath(cl.dir),
      JSON.stringify({ pid: dead.pid, startTime: '1', operation: 'switchover', since: '' }),
    );
    const r = await runScript('cluster.ts', ['stop', '--node', 'standby', '--dir', cl.dir]);
    expect(r.stderr).toBe('');
    expect(r.code).toBe(0);
    expect(fs.existsSync(clusterLockPath(cl.dir))).toBe(false);
  });
});
