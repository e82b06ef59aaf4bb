/**
 * The installable package: `npm run package` builds and packs it; the tarball is installed with
 * `npm install -g --prefix TMP` (offline: it has no dependencies to fetch) and its `walsim`
 * command runs from outside the repository with Node alone — no node_modules beside it, no tsx.
 * `walsim --help`, `walsim exporter --help`, `walsim predict --help` and an unknown command are
 * checked; then, on a real PostgreSQL 15 pair (skipped with the reason without it), `walsim
 * predict --json` answers and `walsim exporter` serves /metrics with the standby up and a
 * predicted time > 0.
 */
import { spawn, spawnSync } from 'node:child_process';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { runScript } from '../helpers/cli.ts';
import { PgDirs, pgUnavailableReason } from '../helpers/postgres.ts';
import { parsePromText, sampleValue } from '../helpers/prom-text.ts';
import { initPgCluster, pgConnectionString, pgDataDir } from '../../scripts/postgres/pg-cluster.ts';
import { pollUntil } from '../../server/poll.ts';
import { freePort } from '../../server/ports.ts';

const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'walsim-package-'));
const prefix = path.join(tmp, 'prefix');
const walsim = path.join(prefix, 'bin', 'walsim');
/** Node's own directory and the system's: no npm package bin on PATH, no NODE_PATH. */
const env = {
  PATH: `${path.dirname(process.execPath)}:/usr/bin:/bin`,
  HOME: tmp,
  LANG: 'C.UTF-8',
};
const run = (args: string[], timeout = 120_000) =>
  spawnSync(walsim, args, { cwd: tmp, env, encoding: 'utf8', timeout });

afterAll(() => fs.rmSync(tmp, { recursive: true, force: true }));

describe('the packed walsim command', () => {
  beforeAll(async () => {
    const r = await runScript('package.ts', ['--out', path.join(tmp, 'dist')], 180_000);
    expect(r.stderr).toBe('');
    expect(r.code).toBe(0);
    const tarball = r.stdout.trim().split('\n').at(-1)!;
    expect(tarball).toMatch(/walsim-\d+\.\d+\.\d+\.tgz$/);
    const i = spawnSync(
      'npm',
      ['install', '-g', '--prefix', prefix, tarball, '--offline', '--no-audit', '--no-fund'],
      { encoding: 'utf8', timeout: 120_000 },
    );
    expect(i.stderr + i.stdout).not.toMatch(/ERR!/);
    expect(i.status).toBe(0);
  }, 240_000);

  it('installs one file and the cost profiles, with no dependency to install', () => {
    const dir = path.join(prefix, 'lib', 'node_modules', 'walsim');
    expect(fs.readdirSync(dir).sort()).toEqual([
      'cost-model',
      'package.json',
      'walsim-exporter.service',
      'walsim.mjs',
    ]);
    expect(fs.readdirSync(path.join(dir, 'cost-model', 'profiles'))).toContain('seed-001.json');
    const pkg = JSON.parse(fs.readFileSync(path.join(dir, 'package.json'), 'utf8'));
    expect(pkg.bin).toEqual({ walsim: 'walsim.mjs' });
    expect(pkg.dependencies).toBeUndefined();
  });

  it('answers --help for itself and each command, and refuses an unknown one', () => {
    const top = run(['--help']);
    expect(top.status).toBe(0);
    expect(top.stdout).toMatch(/walsim exporter/);
    expect(top.stdout).toMatch(/walsim predict/);
    for (const cmd of ['exporter', 'predict']) {
      const h = run([cmd, '--help']);
      expect(h.status).toBe(0);
      expect(h.stdout).toMatch(/--standby URL/);
      // The command the user ran, not the checkout's npm script.
      expect(h.stdout).toMatch(new RegExp(`^usage: walsim ${cmd} --standby`));
      expect(h.stdout).not.toMatch(new RegExp(`npm run ${cmd}`));
    }
    const bad = run(['promote-everything']);
    expect(bad.status).toBe(2);
    expect(bad.stderr).toMatch(/unknown command "promote-everything"/);
    const usage = run(['exporter']);
    expect(usage.status).toBe(2);
    expect(usage.stderr).toMatch(/--standby URL is required/);
  });

  const reason = pgUnavailableReason();
  describe.skipIf(reason !== null)(
    `against a real PostgreSQL 15 pair${reason ? ` (skipped: ${reason})` : ''}`,
    () => {
      const dirs = new PgDirs();
      let dir = '';
      afterAll(() => dirs.removeAll());
      beforeAll(async () => {
        dir = dirs.fresh('package');
        await initPgCluster(dir, { sharedBuffers: '128MB', primarySharedBuffers: '128MB' });
      }, 240_000);

      it('walsim predict answers and walsim exporter serves the standby', async () => {
        const standby = pgConnectionString(dir, 'standby');
        const p = run([
          'predict',
          '--standby',
          standby,
          '--pgdata',
          pgDataDir(dir, 'standby'),
          '--profile',
          'pg15-calibrated-wall',
          '--json',
        ]);
        expect(p.stderr).toBe('');
        expect(p.status).toBe(0);
        const j = JSON.parse(p.stdout.trim().split('\n').at(-1)!);
        expect(j.predictions[0].predicted.writableS).toBeGreaterThan(0);
        expect(j.predictions[0].profile.name).toBe('pg15-calibrated-wall');

        const port = await freePort('127.0.0.1');
        const child = spawn(
          walsim,
          [
            'exporter',
            '--standby',
            standby,
            '--pgdata',
            pgDataDir(dir, 'standby'),
            '--listen',
            `127.0.0.1:${port}`,
            '--interval',
            '500ms',
          ],
          { cwd: tmp, env, stdio: ['ignore', 'pipe', 'pipe'] },
        );
        let stderr = '';
        child.stderr.on('data', (d) => (stderr += d));
        const exited = new Promise((r) => child.once('exit', r));
        try {
          await pollUntil(
            async () => {
              const r = await fetch(`http://127.0.0.1:${port}/metrics`).catch(() => null);
              if (r === null || !r.ok) return false;
              const s = parsePromText(await r.text());
              return (
                sampleValue(s, 'walsim_standby_up') === 1 &&
                (sampleValue(s, 'walsim_standby_predicted_writable_seconds') ?? 0) > 0
              );
            },
            `the installed exporter to serve the standby (stderr: ${stderr})`,
            90_000,
            250,
          );
        } finally {
          process.kill(child.pid!, 'SIGTERM');
          await exited;
        }
      }, 180_000);
    },
  );
});
