/**
 * psql against walsim, and seed 001's rel.sh/test.sh as shell scripts (psql + the pg_ctl shim).
 * Method: run the real psql binary (-c, -f with several statements, -At, -X, \timing, errors,
 * ON_ERROR_STOP, a libpq multi-host string with target_session_attrs) and compare its output with
 * the text PostgreSQL's psql prints; then run rel.sh's steps in the seed's order and check their
 * output and that the standby replayed the VACUUM's drop at failover; then run test.sh's whole
 * Test B (few tables) and check it prints the seed's tables. Skipped when psql is not installed.
 */
import { execFileSync, spawn } from 'node:child_process';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { clustersPerSuite, TestCluster } from '../helpers/cluster.ts';
import { PROJECT_ROOT } from '../helpers/cli.ts';

function hasPsql(): boolean {
  try {
    execFileSync('psql', ['--version'], { stdio: 'ignore' });
    return true;
  } catch {
    return false;
  }
}
const PSQL = hasPsql();
if (!PSQL)
  console.warn(
    'psql.test.ts skipped: psql is not installed (apt-get install postgresql-client-15)',
  );

interface Run {
  code: number | null;
  stdout: string;
  stderr: string;
}

/**
 * Run a command to completion. Asynchronously: this process is the servers' parent, and its event
 * loop must run to reap a server that exits (a zombie would still answer kill(pid, 0)).
 */
function run(cmd: string, args: string[], env: Record<string, string> = {}): Promise<Run> {
  return new Promise((resolve, reject) => {
    const child = spawn(cmd, args, {
      env: { ...process.env, ...env },
      cwd: PROJECT_ROOT,
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    let stdout = '';
    let stderr = '';
    child.stdout.on('data', (d) => (stdout += d));
    child.stderr.on('data', (d) => (stderr += d));
    child.on('error', reject);
    child.on('close', (code) => resolve({ code, stdout, stderr }));
  });
}

describe.skipIf(!PSQL)('psql against walsim', () => {
  const clusters = clustersPerSuite();
  let c: TestCluster;
  let psql: (node: 'primary' | 'standby', ...args: string[]) => Promise<Run>;
  let tmp: string;

  beforeAll(async () => {
    c = await clusters.start();
    tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'walsim-psql-'));
    psql = (node, ...args) =>
      run('psql', [
        '-X',
        '-h',
        '127.0.0.1',
        '-p',
        String(c.pgPort(node)),
        '-U',
        'postgres',
        ...args,
      ]);
  });
  afterAll(async () => {
    if (tmp) fs.rmSync(tmp, { recursive: true, force: true });
  });

  it("answers psql -c from the standby with psql's aligned output", async () => {
    const r = await psql('standby', '-c', 'SELECT pg_is_in_recovery()');
    expect(r).toEqual({
      code: 0,
      stderr: '',
      stdout: ' pg_is_in_recovery \n-------------------\n t\n(1 row)\n\n',
    });
  });

  it('runs a file of several statements (-f) and prints their tags and results', async () => {
    const file = path.join(tmp, 'steps.sql');
    fs.writeFileSync(
      file,
      [
        'CREATE TABLE p (c int);',
        'INSERT INTO p SELECT generate_series(1, 100);',
        'SELECT count(*) FROM p;',
        'SHOW synchronous_commit;',
        '-- a comment between statements',
        'DELETE FROM p WHERE c > 50; SELECT pg_current_wal_lsn() IS NULL;',
      ].join('\n'),
    );
    const r = await psql('primary', '-f', file);
    expect(r.stdout).toBe(
      [
        'CREATE TABLE',
        'INSERT 0 100',
        ' count ',
        '-------',
        '   100',
        '(1 row)',
        '',
        ' synchronous_commit ',
        '--------------------',
        ' remote_write',
        '(1 row)',
        '',
        'DELETE 50',
        '',
      ].join('\n'),
    );
    // Without ON_ERROR_STOP psql reports the error and goes on; the exit code stays 0, as with PostgreSQL.
    // PostgreSQL would answer it; walsim refuses the SELECT form it lacks with 0A000.
    expect(r.stderr).toContain(
      `psql:${file}:6: ERROR:  this SELECT is not supported by walsim: it answers SELECT count(*)`,
    );
    expect(r.stderr.trim().split('\n')).toHaveLength(1);
    expect(r.code).toBe(0);
    await c.waitForCatchup('replay');
    expect(await psql('standby', '-At', '-c', 'SELECT count(*) FROM p')).toEqual({
      code: 0,
      stdout: '50\n',
      stderr: '',
    });
  });

  it('stops at the first error with ON_ERROR_STOP and reports SQLSTATE errors as psql does', async () => {
    const file = path.join(tmp, 'stop.sql');
    fs.writeFileSync(file, 'SELECT count(*) FROM p;\nSELECT count(*) FROM nope;\nDELETE FROM p;\n');
    const r = await psql('primary', '-v', 'ON_ERROR_STOP=1', '-At', '-f', file);
    expect(r).toEqual({
      code: 3,
      stdout: '50\n',
      stderr: `psql:${file}:2: ERROR:  relation "nope" does not exist\n`,
    });
    expect((await psql('primary', '-At', '-c', 'SELECT count(*) FROM p')).stdout).toBe('50\n');
    expect(await psql('standby', '-c', 'INSERT INTO p VALUES (1)')).toEqual({
      code: 1,
      stdout: '',
      stderr: 'ERROR:  cannot execute INSERT in a read-only transaction\n',
    });
    expect((await psql('primary', '-c', 'VACUUM p; SELECT count(*) FROM p')).stderr).toBe(
      'ERROR:  VACUUM cannot run inside a transaction block\n',
    );
    expect((await psql('primary', '-c', "SELECT current_setting('nonexistent')")).stderr).toBe(
      'ERROR:  unrecognized configuration parameter "nonexistent"\n',
    );
  });

  it('supports -At, several -c, \\timing, and libpq target_session_attrs', async () => {
    expect(
      (
        await psql(
          'primary',
          '-At',
          '-c',
          'SHOW server_version_num',
          '-c',
          'SELECT pg_is_in_recovery()',
        )
      ).stdout,
    ).toBe('150000\nf\n');
    const timed = await psql('primary', '-c', '\\timing on', '-c', 'SELECT count(*) FROM p');
    expect(timed.code).toBe(0);
    expect(timed.stdout).toMatch(
      /^Timing is on\.\n count \n-------\n    50\n\(1 row\)\n\nTime: \d+\.\d{3} ms\n$/,
    );
    // libpq skips the standby (in_hot_standby=on) and lands on the primary.
    const both = `host=127.0.0.1,127.0.0.1 port=${c.pgPort('standby')},${c.pgPort('primary')} user=postgres target_session_attrs=read-write`;
    expect(
      (await run('psql', ['-X', '-At', '-c', 'SELECT pg_is_in_recovery()', both])).stdout,
    ).toBe('f\n');
    const standbyFirst = `host=127.0.0.1,127.0.0.1 port=${c.pgPort('primary')},${c.pgPort('standby')} user=postgres target_session_attrs=standby`;
    expect(
      (await run('psql', ['-X', '-At', '-c', 'SELECT pg_is_in_recovery()', standbyFirst])).stdout,
    ).toBe('t\n');
  });

  it('the pg_ctl shim promotes a standby', async () => {
    const r = await run(path.join(PROJECT_ROOT, 'scripts/seed/pg_ctl'), [
      'promote',
      '-D',
      c.dataDir('standby'),
    ]);
    expect(r).toEqual({
      code: 0,
      stdout: 'waiting for server to promote.... done\nserver promoted\n',
      stderr: '',
    });
    expect((await psql('standby', '-At', '-c', 'SELECT pg_is_in_recovery()')).stdout).toBe('f\n');
    const status = await run(path.join(PROJECT_ROOT, 'scripts/seed/pg_ctl'), [
      'status',
      '-D',
      c.dataDir('standby'),
    ]);
    expect(status.stdout).toBe(`pg_ctl: server is running (PID: ${c.pid('standby')})\n`);
  });
});

describe.skipIf(!PSQL)('seed 001 scripts through psql', () => {
  const clusters = clustersPerSuite();
  let c: TestCluster;
  let env: Record<string, string>;

  beforeAll(async () => {
    c = await clusters.start();
    env = {
      PGPORT: String(c.pgPort('primary')),
      STANDBY_PGPORT: String(c.pgPort('standby')),
      PGDATA: c.dataDir('primary'),
      STANDBY_PGDATA: c.dataDir('standby'),
      PG_CTL: path.join(PROJECT_ROOT, 'scripts/seed/pg_ctl'),
      PGUSER: 'postgres',
    };
  });

  it("rel.sh runs the seed's steps; the standby replays the VACUUM's drop at failover", async () => {
    const step = (...args: string[]) => run('bash', ['scripts/seed/rel.sh', ...args], env);
    const out: string[] = [];
    for (const s of [
      ['create'],
      ['insert', 'NB/64'],
      ['delete'],
      ['count'],
      ['pause'],
      ['vacuum'],
      ['stop'],
      ['resume'],
      ['count'],
    ]) {
      const r = await step(...s);
      expect(r.stderr, `rel.sh ${s.join(' ')}`).toBe('');
      expect(r.code, `rel.sh ${s.join(' ')}`).toBe(0);
      out.push(...r.stdout.trimEnd().split('\n'));
    }
    expect(out.join('\n')).toMatch(
      new RegExp(
        [
          'created rel_t',
          'inserted 7232 rows \\(32 pages, NB/64 of NBuffers 2048\\) into rel_t',
          'deleted all rows of rel_t',
          'rel_t: 0 rows on the standby',
          'standby replay paused at [0-9A-F]+/[0-9A-F]+',
          'vacuumed rel_t',
          'waiting for server to shut down.... done',
          'server stopped',
          'resume:   \\d{4}-\\d\\d-\\d\\d \\d\\d:\\d\\d:\\d\\d\\.\\d{3}',
          'promoted: \\d{4}-\\d\\d-\\d\\d \\d\\d:\\d\\d:\\d\\d\\.\\d{3}',
          'failover: \\d+\\.\\d{3} s',
          'rel_t: 0 rows on the standby',
        ].join('\n'),
      ),
    );
    expect(c.pid('primary')).toBe(null);
    const report = (await c.status('standby')).failover;
    // 32 blocks < NBuffers/32 = 64: the truncation's drop took the cached-lookup path during the failover.
    expect(report.drop.drops['cached-lookup']).toBe(1);
    expect(report.recordsReplayed).toBeGreaterThan(0);
    // Out of order: the primary is gone, so a second stop fails the way pg_ctl does.
    const again = await step('stop');
    expect(again.code).toBe(1);
    expect(again.stderr).toContain('Is server running?');
  });

  it("test.sh with no step reproduces Test B on fresh clusters and prints the seed's tables", async () => {
    const tmpdir = fs.mkdtempSync(path.join(os.tmpdir(), 'walsim-test-b-'));
    const r = await run('bash', ['scripts/seed/test.sh'], {
      NTABLES: '10',
      SHARED_BUFFERS: '32MB',
      TMPDIR: tmpdir,
    });
    expect(r.code, r.stderr).toBe(0);
    const row = '\\| 32MB \\| \\d+\\.\\d{3} \\| \\d+\\.\\d{3} \\| -?\\d+\\.\\d\\d% \\|';
    expect(r.stdout).toMatch(
      new RegExp(
        [
          'seed 001 Test B through psql: 10 one-block relations, shared_buffers 32MB, one run per cell',
          '',
          '### VACUUM recovery performance for 10 relations',
          '',
          '\\| s_b \\| Master \\(full-scan\\) \\| Patched \\(cached-lookup\\) \\| %reg \\|',
          '\\| --- \\| ---: \\| ---: \\| ---: \\|',
          row,
          '',
          '### TRUNCATE recovery performance for 10 relations',
          '',
          '\\| s_b \\| Master \\(full-scan\\) \\| Patched \\(cached-lookup\\) \\| %reg \\|',
          '\\| --- \\| ---: \\| ---: \\| ---: \\|',
          row,
        ].join('\n'),
      ),
    );
    expect(r.stderr.match(/failover \d+\.\d{3} s/g)).toHaveLength(4);
    // Every fresh cluster was stopped and removed.
    expect(fs.readdirSync(tmpdir).filter((f) => f.startsWith('walsim-test-b.'))).toEqual([]);
    fs.rmSync(tmpdir, { recursive: true, force: true });
  }, 300_000);
});
