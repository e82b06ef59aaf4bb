/**
 * Every bad argument to a user-facing CLI gives a one-line error and a non-zero exit, and a stale
 * pid file never makes `cluster stop` signal a process that is not a walsim server.
 * Method: run the CLIs as real child processes against missing, uninitialised and initialised-but-
 * stopped clusters (initdb only, no servers), with pid files naming a dead pid, a live unrelated
 * process, and garbage; check exit codes, the first stderr line, the absence of stack traces, and
 * that the unrelated process is still alive.
 */
import { spawn, spawnSync } from 'node:child_process';
import * as fs from 'node:fs';
import * as net from 'node:net';
import * as os from 'node:os';
import * as path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { expectOneLineError, runScript } from '../helpers/cli.ts';
import { initCluster } from '../../server/initdb.ts';
import { SERVER_MARKER } from '../../server/cluster-files.ts';
import { freePort } from '../../server/ports.ts';

let tmp: string;
let cluster: string; // initialised, never started
beforeAll(async () => {
  tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'walsim-cli-'));
  cluster = path.join(tmp, 'c');
  await initCluster(cluster, {
    sharedBuffers: '16MB',
    standbySharedBuffers: '16MB',
    synchronousCommit: 'remote_write',
    dropStrategy: 'cached-lookup',
    thresholdDivisor: 32,
    forceOptimized: false,
    walSegmentSize: 1 << 20,
    listen: '127.0.0.1',
  });
});
afterAll(() => fs.rmSync(tmp, { recursive: true, force: true }));

function writePidFile(node: string, pid: number): void {
  fs.writeFileSync(
    path.join(cluster, node, 'postmaster.pid'),
    JSON.stringify({
      pid,
      port: 1,
      role: node === 'primary' ? 'primary' : 'standby',
      startedAt: new Date().toISOString(),
      marker: SERVER_MARKER,
    }) + '\n',
  );
}

describe('CLI errors', () => {
  it('refuses unknown commands, steps and options', async () => {
    const runs = await Promise.all([
      runScript('cluster.ts', ['frobnicate']),
      runScript('cluster.ts', []),
      runScript('cluster.ts', ['start', '--bogus']),
      runScript('rel.ts', ['frobnicate', '--dir', cluster]),
      runScript('multi.ts', [], 60_000),
      runScript('sql.ts', ['--dir', cluster]),
      runScript('cluster.ts', ['stop', '--mode', 'sideways', '--dir', cluster]),
    ]);
    expectOneLineError(runs[0]!, /unknown command "frobnicate"/);
    expectOneLineError(runs[1]!, /missing command/);
    expectOneLineError(runs[2]!, /Unknown option '--bogus'/);
    expectOneLineError(runs[3]!, /unknown step "frobnicate" \(steps: create, insert/);
    expectOneLineError(runs[4]!, /missing step/);
    expectOneLineError(runs[5]!, /expected exactly one statement, got 0/);
    expectOneLineError(runs[6]!, /invalid shutdown mode "sideways"/);
  });

  it('answers --help and -h with the usage on stdout and exit 0, running nothing', async () => {
    const scripts = [
      'cluster.ts',
      'sql.ts',
      'rel.ts',
      'multi.ts',
      'sweep.ts',
      'torture.ts',
      'bench.ts',
      'calibrate.ts', // once: "Unknown option '--help'"
      'fit-seed.ts',
    ];
    const runs = await Promise.all([
      ...scripts.map((s) => runScript(s, ['--help'])),
      runScript('sweep.ts', ['multi', '-h']),
      runScript('cluster.ts', ['start', '--help']),
    ]);
    for (const [i, r] of runs.entries()) {
      expect(r.code, `${scripts[i] ?? 'sub-command'}: ${r.stderr}`).toBe(0);
      expect(r.stdout).toMatch(
        /^usage: npm run (cluster|sql|rel|multi|sweep|torture|bench|calibrate|fit-seed) -- /,
      );
      expect(r.stderr).toBe('');
    }
    expect(runs[0]!.stdout).toMatch(/--node NAME\]  start one node of an existing cluster/);
  });

  it('cluster start --node needs an existing cluster', async () => {
    const r = await runScript('cluster.ts', [
      'start',
      '--node',
      'primary',
      '--dir',
      path.join(tmp, 'none'),
    ]);
    expectOneLineError(
      r,
      /no cluster at .*none; create it with "npm run cluster -- start" \(without --node\) first/,
    );
    expect(fs.existsSync(path.join(tmp, 'none'))).toBe(false);
  });

  it('refuses bad sizes, bad shared_buffers and bad settings before creating anything', async () => {
    const dir = path.join(tmp, 'never');
    const runs = await Promise.all([
      runScript('cluster.ts', ['start', '--dir', dir, '--shared-buffers', '12XB']),
      runScript('cluster.ts', ['start', '--dir', dir, '--shared-buffers', '64kB']),
      runScript('cluster.ts', ['start', '--dir', dir, '--standby-shared-buffers=-1MB']),
      runScript('cluster.ts', ['start', '--dir', dir, '--wal-segment-size', '3MB']),
      runScript('cluster.ts', ['start', '--dir', dir, '--synchronous-commit', 'maybe']),
      runScript('cluster.ts', ['start', '--dir', dir, '--drop-strategy', 'fastest']),
      runScript('cluster.ts', ['start', '--dir', dir, '--threshold-divisor', '0']),
      runScript('cluster.ts', ['start', '--dir', dir, '--listen', 'everywhere']),
      runScript('rel.ts', ['insert', '--size', 'lots', '--dir', cluster]),
      runScript('multi.ts', ['create', '--tables', 'many', '--dir', cluster]),
      runScript('cluster.ts', ['promote', '--wait-seconds', '0', '--dir', cluster]),
      runScript('cluster.ts', ['start', '--dir', dir, '--wal-segment-size', '12XB']),
    ]);
    expectOneLineError(
      runs[0]!,
      /invalid value for parameter "shared_buffers": "12XB": unknown unit "XB"/,
    );
    expectOneLineError(runs[1]!, /"64kB": .* outside the valid range/);
    expectOneLineError(runs[2]!, /invalid value for parameter "shared_buffers": "-1MB"/);
    expectOneLineError(runs[3]!, /WAL segment size must be a power of two/);
    expectOneLineError(runs[4]!, /"synchronous_commit": "maybe"/);
    expectOneLineError(runs[5]!, /fastest/);
    expectOneLineError(runs[6]!, /--threshold-divisor must be a positive integer/);
    expectOneLineError(runs[7]!, /--listen must be an IP address/);
    // The step order is checked first; a bad --size on an existing table is steps.test.ts ('NB/x').
    expectOneLineError(
      runs[8]!,
      /no rel tables in the cluster at .*run "npm run rel -- create" first/,
    );
    expectOneLineError(runs[9]!, /--tables must be a positive integer/);
    expectOneLineError(runs[10]!, /--wait-seconds must be a positive integer/);
    // Named as the setting it is (was reported as an invalid "shared_buffers").
    expectOneLineError(runs[11]!, /invalid value for parameter "wal_segment_size": "12XB"/);
    // Nothing half-made: no token, no node directory.
    expect(fs.existsSync(dir)).toBe(false);
  });

  it('a busy --pg-port is refused before initdb and leaves nothing behind', async () => {
    const busy = await freePort('127.0.0.1');
    const holder = net.createServer();
    await new Promise<void>((r) => holder.listen(busy, '127.0.0.1', () => r()));
    try {
      const dir = path.join(tmp, 'busy');
      // The primary's port busy, then the standby's (the base's next port).
      for (const base of [busy, busy - 1]) {
        const r = await runScript('cluster.ts', [
          'start',
          '--dir',
          dir,
          '--shared-buffers',
          '16MB',
          '--pg-port',
          String(base),
        ]);
        expectOneLineError(
          r,
          new RegExp(
            `--pg-port ${base}: port ${busy} on 127\\.0\\.0\\.1 is in use .*pick another base`,
          ),
        );
        expect(fs.existsSync(dir)).toBe(false);
        expect(fs.readdirSync(tmp).filter((f) => f.startsWith('.busy'))).toEqual([]);
      }
    } finally {
      holder.close();
    }
  });

  it('start on an existing cluster refuses the initdb options it would ignore, naming them', async () => {
    const r = await runScript('cluster.ts', [
      'start',
      '--dir',
      cluster,
      '--pg-port',
      '6432',
      '--shared-buffers',
      '1GB',
    ]);
    expectOneLineError(
      r,
      /the cluster at .* exists; --pg-port, --shared-buffers only apply when a cluster is created and would be ignored/,
    );
    expect(fs.readdirSync(path.join(cluster, 'primary'))).not.toContain('postmaster.pid'); // nothing started
  });

  it('paper cuts: negative numbers, --dir on a file, unknown nodes listed, the sweep usage', async () => {
    const file = path.join(tmp, 'a-file');
    fs.writeFileSync(file, 'not a directory\n');
    const runs = await Promise.all([
      runScript('cluster.ts', ['start', '--standbys', '-1', '--dir', path.join(tmp, 'neg')]),
      runScript('cluster.ts', ['start', '--dir', path.join(file, 'sub')]),
      runScript('cluster.ts', ['promote', '--node', 'nosuch', '--dir', cluster]),
      runScript('sql.ts', ['--node', 'nosuch', '--dir', cluster, 'SELECT 1']),
      runScript('sweep.ts', ['--help']),
    ]);
    expectOneLineError(runs[0]!, /--standbys must be an integer from 0 to 16, got "-1"/);
    expectOneLineError(runs[1]!, /ENOTDIR: not a directory/);
    expectOneLineError(
      runs[2]!,
      /no node "nosuch" in .* \(nodes: primary, standby\); pass one with --node/,
    );
    expectOneLineError(runs[3]!, /no node "nosuch" in .* \(nodes: primary, standby\)/);
    expect(runs[4]!.stdout).not.toMatch(/^  engines /m); // an option group, not a sweep
    expect(fs.existsSync(path.join(tmp, 'neg'))).toBe(false);
  });

  it('takes options before the command, as git -C and pg_ctl -D do', async () => {
    const runs = await Promise.all([
      runScript('cluster.ts', ['--dir', cluster, 'stop']),
      runScript('cluster.ts', [`--dir=${cluster}`, '--json', 'status']),
      runScript('cluster.ts', ['--mode', 'fast', 'stop', '--dir', cluster, '--node', 'standby']),
      runScript('sweep.ts', ['--model-only', '--json', 'threshold', '--shared-buffers', '1TB']),
    ]);
    expect(runs[0]!.code, runs[0]!.stderr).toBe(0);
    expect(runs[0]!.stdout).toMatch(/^primary: not running$/m);
    expect(runs[0]!.stdout).toMatch(/^standby: not running$/m);
    expect(runs[1]!.code, runs[1]!.stderr).toBe(0);
    expect(runs[1]!.json.nodes.primary.running).toBe(false);
    expect(runs[2]!.code, runs[2]!.stderr).toBe(0);
    expect(runs[2]!.stdout.trim()).toBe('standby: not running');
    // The sweep read its options before "threshold" and names what the user typed.
    expectOneLineError(
      runs[3]!,
      /^error: --shared-buffers 1TB does not fit the default --rel-sizes 512,256,128,64,32,16,8: NB\/8 = 16777216 pages, .* Give --rel-sizes with k from 15 to 134217728 there, or a smaller --shared-buffers$/,
    );
  });

  it('sweep threshold names the --shared-buffers and --rel-sizes typed, not a default it made up', async () => {
    const typed = await runScript('sweep.ts', [
      'threshold',
      '--shared-buffers',
      '128MB,1TB',
      '--rel-sizes',
      '64,8',
      '--model-only',
    ]);
    expectOneLineError(
      typed,
      /^error: --shared-buffers 1TB does not fit --rel-sizes 64,8: NB\/8 = 16777216 pages, whose 3791650816 rows overflow the test table's int column \(at most 9502140 pages\)/,
    );
    const tiny = await runScript('sweep.ts', ['threshold', '--shared-buffers', '128kB']);
    expectOneLineError(
      tiny,
      /^error: --shared-buffers 128kB does not fit the default --rel-sizes .*: NB\/512 is less than one page \(NBuffers = 16\)\. Give --rel-sizes with k from 1 to 16 there, or a larger --shared-buffers$/,
    );
  });

  it('sweep --template refuses Test B and runs without PostgreSQL, in one line', async () => {
    const runs = await Promise.all([
      runScript('sweep.ts', ['multi', '--engine', 'postgres', '--template']),
      runScript('sweep.ts', ['threshold', '--template', '--model-only']),
    ]);
    expectOneLineError(
      runs[0]!,
      /^error: --template applies to threshold \(Test A\) only: a TRUNCATE run from a template would find its standby without the tables' sizes cached/,
      2,
    );
    expectOneLineError(
      runs[1]!,
      /^error: --template applies to PostgreSQL runs \(--engine postgres\)$/,
      2,
    );
  });

  it('bench refuses a bad --shared-buffers, --runs or --replay-pages with one line, no stack, no NaN', async () => {
    const runs = await Promise.all([
      runScript('bench.ts', ['--shared-buffers', '0']),
      runScript('bench.ts', ['--runs', '0']),
      runScript('bench.ts', ['--replay-pages', 'many']),
    ]);
    expectOneLineError(runs[0]!, /invalid value for parameter "shared_buffers": "0"/);
    expectOneLineError(runs[1]!, /--runs must be a positive integer, got "0"/);
    expectOneLineError(runs[2]!, /--replay-pages must be a positive integer, got "many"/);
    for (const r of runs) {
      expect(r.code).toBe(2);
      expect(r.stdout).not.toMatch(/NaN/);
    }
  });

  it('says clearly when the cluster is missing or not running', async () => {
    const missing = path.join(tmp, 'missing');
    const runs = await Promise.all([
      runScript('cluster.ts', ['stop', '--dir', missing]),
      runScript('cluster.ts', ['status', '--dir', missing]),
      runScript('cluster.ts', ['promote', '--dir', missing]),
      runScript('sql.ts', ['--dir', missing, 'SELECT 1']),
      runScript('rel.ts', ['count', '--dir', missing]),
      runScript('sql.ts', ['--dir', cluster, 'SELECT 1']),
      runScript('sql.ts', ['--dir', cluster, '--node', 'nosuch', 'SELECT 1']),
      runScript('cluster.ts', ['stop', '--node', 'nosuch', '--dir', cluster]),
    ]);
    expectOneLineError(runs[0]!, /no cluster at/);
    expectOneLineError(runs[1]!, /no cluster at .*run "npm run cluster -- start" first/);
    expectOneLineError(runs[2]!, /no node "standby"/);
    expectOneLineError(runs[3]!, /no node "primary"/);
    expectOneLineError(runs[4]!, /missing|no cluster|no node|not running|create/);
    expectOneLineError(runs[5]!, /node "primary" of the cluster at .* is not running/);
    expectOneLineError(runs[6]!, /no node "nosuch"/);
    expectOneLineError(runs[7]!, /no node "nosuch"/);
  });

  it('never signals a stale pid file: dead pid, a live unrelated process, garbage', async () => {
    const dead = spawnSync('true').pid!;
    writePidFile('primary', dead);
    // A live process that is not a walsim server (its pid could have been reused for anything).
    const bystander = spawn('sleep', ['60'], { stdio: 'ignore' });
    writePidFile('standby', bystander.pid!);
    try {
      const stop = await runScript('cluster.ts', ['stop', '--mode', 'immediate', '--dir', cluster]);
      expect(stop.code).toBe(0); // every node is down afterwards
      expect(stop.stdout).toContain('primary: not running');
      expect(stop.stdout).toContain('standby: not running');
      expect(() => process.kill(bystander.pid!, 0)).not.toThrow(); // still alive
      expect(bystander.exitCode).toBeNull();
      const sql = await runScript('sql.ts', ['--dir', cluster, '--node', 'standby', 'SELECT 1']);
      expectOneLineError(sql, /node "standby" of the cluster at .* is not running/);
      const status = await runScript('cluster.ts', ['status', '--json', '--dir', cluster]);
      expect(status.code).toBe(0);
      expect(status.json.nodes).toEqual({
        primary: { running: false },
        standby: { running: false },
      });
      fs.writeFileSync(path.join(cluster, 'primary', 'postmaster.pid'), '{"pid": 1, "po'); // half-written
      const garbage = await runScript('cluster.ts', [
        'stop',
        '--node',
        'primary',
        '--dir',
        cluster,
      ]);
      expect(garbage.code).toBe(0);
      expect(garbage.stdout).toContain('primary: not running');
      expect(() => process.kill(1, 0)).not.toThrow();
    } finally {
      bystander.kill('SIGKILL');
    }
  });
});
