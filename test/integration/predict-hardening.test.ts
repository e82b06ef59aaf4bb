/**
 * `npm run predict` as a hostile user drives it, on a real PostgreSQL 15 primary + paused standby
 * with a backlog (skipped with the reason without the binaries): passwords in every libpq form
 * never reach stdout, stderr or `--json`; keyword/value conninfo is accepted; connection errors say
 * their own cause; the primary's data directory is refused as the standby's; `--verify` with
 * another server's log touches nothing; Ctrl-C during `--verify` says what was sent and what state
 * the standby is in, and so does a `--verify` that times out. No timing is asserted.
 */
import { spawn } from 'node:child_process';
import * as fs from 'node:fs';
import * as path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { runScript, PROJECT_ROOT } from '../helpers/cli.ts';
import { PgDirs, pgUnavailableReason } from '../helpers/postgres.ts';
import {
  initPgCluster,
  pgConnect,
  pgDataDir,
  pgLogPath,
  readPgEngine,
} from '../../scripts/postgres/pg-cluster.ts';
import { entryArgs } from '../../server/entry.ts';
import { pollUntil } from '../../server/poll.ts';
import { freePort } from '../../server/ports.ts';
import { findStartupPid } from '../../scripts/postgres/startup-sched.ts';

const reason = pgUnavailableReason();
const dirs = new PgDirs();
afterAll(() => dirs.removeAll());

type Json = any; // eslint-disable-line @typescript-eslint/no-explicit-any

describe.skipIf(reason !== null)(
  `predict's hardening on real PostgreSQL 15${reason ? ` (skipped: ${reason})` : ''}`,
  () => {
    let dir = '';
    let sPort = 0;
    let pPort = 0;
    let sData = '';

    const sql = async (node: 'primary' | 'standby', ...stmts: string[]) => {
      const c = await pgConnect(dir, node);
      try {
        let last: Json[] = [];
        for (const s of stmts) last = (await c.query(s)).rows;
        return last;
      } finally {
        await c.end();
      }
    };
    const standbyState = async () =>
      (
        await sql(
          'standby',
          `SELECT pg_is_in_recovery() AS rec,
                  CASE WHEN pg_is_in_recovery() THEN pg_get_wal_replay_pause_state() END AS pause`,
        )
      )[0] as { rec: boolean; pause: string | null };

    beforeAll(async () => {
      dir = dirs.fresh('predict-hard');
      await initPgCluster(dir, { sharedBuffers: '128MB', primarySharedBuffers: '128MB' });
      const e = readPgEngine(dir);
      sPort = e.ports.standby;
      pPort = e.ports.primary;
      sData = pgDataDir(dir, 'standby');
      await sql(
        'primary',
        'CREATE TABLE t (c int)',
        'INSERT INTO t SELECT generate_series(1, 500)',
      );
      const [p] = await sql('primary', 'SELECT pg_current_wal_lsn()::text AS l');
      await pollUntil(
        async () =>
          (await sql('standby', `SELECT pg_last_wal_replay_lsn() >= '${p.l}'::pg_lsn AS ok`))[0]
            .ok === true,
        'the standby to replay the set-up',
        60_000,
        50,
      );
      await sql('standby', 'SELECT pg_wal_replay_pause()');
      await pollUntil(
        async () => (await standbyState()).pause === 'paused',
        'replay to pause',
        30_000,
        50,
      );
      await sql('primary', 'TRUNCATE t', 'INSERT INTO t VALUES (1)');
      const [q] = await sql('primary', 'SELECT pg_current_wal_flush_lsn()::text AS l');
      await pollUntil(
        async () =>
          (await sql('standby', `SELECT pg_last_wal_receive_lsn() >= '${q.l}'::pg_lsn AS ok`))[0]
            .ok === true,
        'the standby to receive the backlog',
        30_000,
        50,
      );
    }, 240_000);

    const SECRETS = ['Sekr1t', 'pw@tail9', 'QueryPw9', 'ColonPw7', 'a b Kw9', 'SslPw55'];
    const noSecret = (r: { stdout: string; stderr: string }) => {
      for (const s of SECRETS) {
        expect(r.stdout).not.toContain(s);
        expect(r.stderr).not.toContain(s);
      }
      for (const s of ['pw%40tail9', 'a%20b%20Kw9']) expect(r.stdout + r.stderr).not.toContain(s);
    };

    it('keeps every password form secret, on success and on error, and accepts keyword/value', async () => {
      // Keyword/value (primary_conninfo's form) with a quoted password: accepted (trust auth).
      const kw = `host=127.0.0.1 port=${sPort} user=postgres dbname=postgres password='a b Kw9' sslpassword=SslPw55`;
      const ok = await runScript('predict.ts', [
        '--standby',
        kw,
        '--pgdata',
        sData,
        '--primary',
        `postgresql://postgres:QueryPw9@127.0.0.1:${pPort}/postgres?password=QueryPw9&sslmode=disable`,
        '--json',
      ]);
      expect(ok.stderr).toBe('');
      expect(ok.code).toBe(0);
      noSecret(ok);
      expect(ok.json.predictions[0].standby).toContain('password=***');
      const human = await runScript('predict.ts', ['--standby', kw, '--pgdata', sData]);
      expect(human.code).toBe(0);
      noSecret(human);
      // The profile: its name, the file read, and that the default was fitted on another machine.
      expect(human.stdout).toMatch(/\(profile seed-001, file \S+\/seed-001\.json\)/);
      expect(human.stdout).toMatch(/seed's 2020 machine.*run npm run calibrate for this machine/);
      // Errors: a password holding '@' (libpq cuts the userinfo at the first one), an empty user,
      // a ?password= parameter, an unparsable keyword string.
      const port = await freePort('127.0.0.1');
      for (const url of [
        `postgresql://postgres:Sekr1t@pw@tail9@127.0.0.1:${port}/postgres`,
        `postgresql://:ColonPw7@127.0.0.1:${port}/postgres`,
        `postgresql://postgres@127.0.0.1:${port}/postgres?sslmode=disable&password=QueryPw9`,
        `host=127.0.0.1 port=${port} password='a b Kw9' bogus`,
        `postgresql://postgres:pw%40tail9@127.0.0.1:${port}/postgres`,
      ]) {
        const r = await runScript('predict.ts', ['--standby', url, '--pgdata', sData, '--json']);
        expect(r.code).not.toBe(0);
        expect(r.stderr.trim().split('\n'), r.stderr).toHaveLength(1);
        noSecret(r);
      }
    }, 120_000);

    it('says the cause of each connection failure, keeps an unreachable primary its reason', async () => {
      const port = await freePort('127.0.0.1');
      const one = async (args: string[]) => {
        const r = await runScript('predict.ts', args);
        expect(r.code).not.toBe(0);
        expect(r.stderr.trim().split('\n'), r.stderr).toHaveLength(1);
        expect(r.stderr).not.toMatch(/TypeError|    at /);
        return r.stderr;
      };
      expect(await one(['--standby', `postgresql://postgres@127.0.0.1:${port}/postgres`])).toMatch(
        /ECONNREFUSED.*check the host and port/,
      );
      expect(
        await one(['--standby', 'postgresql://postgres@no-such-host.invalid:5432/postgres']),
      ).toMatch(/host "no-such-host\.invalid" not found.*check the host name/);
      expect(await one(['--standby', 'postgresql://postgres@127.0.0.1:notaport/postgres'])).toMatch(
        /--standby .*invalid port number: "notaport"/,
      );
      expect(await one(['--standby', 'postgresql://%zz@127.0.0.1/postgres'])).toMatch(
        /--standby .*invalid percent-encoded token/,
      );
      // sslmode=require on a server without SSL: the server's answer, no node-postgres warning.
      const ssl = await one([
        '--standby',
        `postgresql://postgres@127.0.0.1:${sPort}/postgres?sslmode=require`,
      ]);
      expect(ssl).toMatch(/does not support SSL.*sslmode/);
      // A wrong password: a role that needs one (scram) on the primary.
      const hba = path.join(pgDataDir(dir, 'primary'), 'pg_hba.conf');
      fs.writeFileSync(
        hba,
        `host all pwuser 127.0.0.1/32 scram-sha-256\n${fs.readFileSync(hba, 'utf8')}`,
      );
      await sql('primary', "CREATE ROLE pwuser LOGIN PASSWORD 'right1'", 'SELECT pg_reload_conf()');
      expect(
        await one([
          '--standby',
          `postgresql://postgres@127.0.0.1:${sPort}/postgres`,
          '--primary',
          `postgresql://pwuser:wrong1@127.0.0.1:${pPort}/postgres`,
        ]),
      ).toMatch(/password authentication failed for user "pwuser".*check the password/);
      // Unreachable --primary beside --pgdata: the prediction says why, whole.
      const r = await runScript('predict.ts', [
        '--standby',
        `postgresql://postgres@127.0.0.1:${sPort}/postgres`,
        '--pgdata',
        sData,
        '--primary',
        `postgresql://postgres@127.0.0.1:${port}/postgres`,
      ]);
      expect(r.code).toBe(0);
      expect(r.stdout).toMatch(
        /primary postgresql:\/\/postgres@127\.0\.0\.1:\d+\/postgres not reachable \(cannot connect to the primary .*ECONNREFUSED/,
      );
    }, 120_000);

    it("refuses the primary's data directory as the standby's --pgdata", async () => {
      const r = await runScript('predict.ts', [
        ...['--standby', `postgresql://postgres@127.0.0.1:${sPort}/postgres`],
        ...['--pgdata', pgDataDir(dir, 'primary')],
      ]);
      expect(r.code).not.toBe(0);
      expect(r.stderr.trim().split('\n'), r.stderr).toHaveLength(1);
      expect(r.stderr).toMatch(/--pgdata \S+ is not this standby's data directory: /);
    }, 60_000);

    it("--verify with another server's log sends nothing and says so", async () => {
      const acc = path.join(path.dirname(dir), 'acc.jsonl');
      const r = await runScript('predict.ts', [
        ...['--standby', `postgresql://postgres@127.0.0.1:${sPort}/postgres`],
        ...['--pgdata', sData, '--verify', '--log', pgLogPath(dir, 'primary')],
        ...['--accuracy-log', acc],
      ]);
      expect(r.code).not.toBe(0);
      expect(r.stderr.trim().split('\n'), r.stderr).toHaveLength(1);
      expect(r.stderr).toMatch(/is not .*'s log: .*nothing was sent to the standby/);
      expect(r.stdout).not.toMatch(/promoting/);
      expect(await standbyState()).toEqual({ rec: true, pause: 'paused' });
      expect(fs.existsSync(acc)).toBe(false);
    }, 120_000);

    it('--verify that times out says which statements it sent and the state it left', async () => {
      // The standby's startup process stopped (SIGSTOP): resume and promote are still answered
      // (shared memory, a signal file), but the promotion cannot end, so no "ready" line comes
      // within --verify-timeout.
      const postmaster = Number(
        fs.readFileSync(path.join(sData, 'postmaster.pid'), 'utf8').split('\n')[0],
      );
      const startup = findStartupPid(postmaster);
      expect(startup, 'the standby has a startup process').not.toBeNull();
      const acc = path.join(path.dirname(dir), 'acc3.jsonl');
      process.kill(startup!, 'SIGSTOP');
      let r: Awaited<ReturnType<typeof runScript>>;
      try {
        r = await runScript('predict.ts', [
          ...['--standby', `postgresql://postgres@127.0.0.1:${sPort}/postgres`],
          ...['--pgdata', sData, '--verify', '--log', pgLogPath(dir, 'standby')],
          ...['--verify-timeout', '3', '--accuracy-log', acc],
        ]);
      } finally {
        // The next test needs the standby in recovery: withdraw the promotion request (the startup
        // process acts on its signal only while the promote file exists) before it runs again.
        fs.rmSync(path.join(sData, 'promote'), { force: true });
        process.kill(startup!, 'SIGCONT');
      }
      // What it will say must be what the standby is: in recovery, not paused. Then paused again
      // for the next test.
      const state = await standbyState();
      await sql('standby', 'SELECT pg_wal_replay_pause()');
      await pollUntil(
        async () => (await standbyState()).pause === 'paused',
        'replay to pause',
        30_000,
        50,
      );
      expect(state).toEqual({ rec: true, pause: 'not paused' });
      expect(r.code, r.stderr).not.toBe(0);
      expect(r.stderr.trim().split('\n'), r.stderr).toHaveLength(1);
      expect(r.stderr).not.toMatch(/    at /);
      expect(r.stderr.trim()).toMatch(
        /no "database system is ready to accept connections" in \S+ within 3 s \(--verify-timeout\): sent pg_wal_replay_resume\(\), then pg_promote\(false\); the standby is in recovery, replay not paused \(the promotion requested will proceed on its own\)$/,
      );
      expect(fs.existsSync(acc)).toBe(false);
      // A bad value is refused before any server is asked.
      const bad = await runScript('predict.ts', [
        ...['--standby', `postgresql://postgres@127.0.0.1:${sPort}/postgres`, '--verify'],
        ...['--verify-timeout', '0'],
      ]);
      expect(bad.code).not.toBe(0);
      expect(bad.stderr).toMatch(/--verify-timeout must be seconds .* got "0"/);
      expect(await standbyState()).toEqual({ rec: true, pause: 'paused' });
    }, 120_000);

    it('Ctrl-C during --verify says which statements were sent and the state it left', async () => {
      const child = spawn(
        process.execPath,
        [
          ...entryArgs(path.join('scripts', 'predict.ts')),
          ...['--standby', `postgresql://postgres@127.0.0.1:${sPort}/postgres`],
          ...['--pgdata', sData, '--verify', '--log', pgLogPath(dir, 'standby')],
          ...['--accuracy-log', path.join(path.dirname(dir), 'acc2.jsonl')],
        ],
        { cwd: PROJECT_ROOT, stdio: ['ignore', 'pipe', 'pipe'] },
      );
      let stdout = '';
      let stderr = '';
      child.stderr.on('data', (d) => (stderr += d));
      const exited = new Promise<number | null>((resolve) => child.on('close', resolve));
      // The controlled point: predict has said it resumes and promotes now (or it ended first:
      // then the exit code below fails with its stderr instead of a hang).
      await new Promise<void>((resolve) => {
        child.on('close', () => resolve());
        child.stdout.on('data', (d) => {
          stdout += d;
          if (/verify: resuming replay on and promoting/.test(stdout)) resolve();
        });
      });
      child.kill('SIGINT');
      expect(await exited, stderr).toBe(130);
      expect(stderr).not.toMatch(/    at /);
      const m =
        /interrupted during --verify: (nothing was sent to the standby \(no resume, no promote\)|sent [^;]*); (the standby [^\n]*)/.exec(
          stderr,
        );
      expect(m, stderr).not.toBeNull();
      // What it says is what happened.
      if (m![1]!.startsWith('nothing')) {
        expect(m![2]).toMatch(/in recovery, replay paused/);
        expect(await standbyState()).toEqual({ rec: true, pause: 'paused' });
      } else if (/pg_promote\(false\)/.test(m![1]!)) {
        await pollUntil(
          async () => (await standbyState()).rec === false,
          'the promotion predict reported as sent',
          60_000,
          50,
        );
      } else {
        expect(m![1]).toMatch(/^sent pg_wal_replay_resume\(\)/);
        expect(m![2]).toMatch(/in recovery, replay not paused|promoted/);
      }
    }, 120_000);
  },
);
