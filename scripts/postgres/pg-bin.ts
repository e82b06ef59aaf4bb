/**
 * Where the PostgreSQL server binaries are (`--pg-bin DIR`, or the newest
 * `/usr/lib/postgresql/<major>/bin` of the Debian packages) and which OS user runs them (the
 * server refuses to run as root, so a root caller runs them as `postgres`).
 *
 * Entry points: `findPgBin`, `pgServerUser`, `PgMissingError`.
 */
import { execFileSync } from 'node:child_process';
import * as fs from 'node:fs';
import * as path from 'node:path';
import { WalsimError } from '../../common/errors.ts';

/** The programs the postgres engine calls. */
export const PG_PROGRAMS = ['initdb', 'pg_ctl', 'pg_basebackup', 'postgres', 'pg_waldump'] as const;
/** Also pgbench, which only predict-bench's `pgbench -i` cell uses (it checks for it itself). */
export type PgProgram = (typeof PG_PROGRAMS)[number] | 'pgbench';

const DEBIAN_LIB = '/usr/lib/postgresql';

/** PostgreSQL is not installed (or `--pg-bin` is wrong): the message says what to install. */
export class PgMissingError extends WalsimError {
  constructor(message: string) {
    super('invalid_input', message);
    this.name = 'PgMissingError';
  }
}

export interface PgBin {
  dir: string;
  /** Major version from `postgres --version`, e.g. 15. */
  major: number;
  version: string;
  path(program: PgProgram): string;
}

function majorDirs(): string[] {
  if (!fs.existsSync(DEBIAN_LIB)) return [];
  return fs
    .readdirSync(DEBIAN_LIB)
    .filter((d) => /^\d+$/.test(d) && fs.existsSync(path.join(DEBIAN_LIB, d, 'bin', 'postgres')))
    .sort((a, b) => Number(b) - Number(a))
    .map((d) => path.join(DEBIAN_LIB, d, 'bin'));
}

/**
 * The binaries to use: `dir` if given (every program must be there), else the newest Debian
 * install. Throws PgMissingError with one line naming the package to install.
 */
export function findPgBin(dir?: string): PgBin {
  const candidates = dir !== undefined ? [path.resolve(dir)] : majorDirs();
  if (candidates.length === 0) {
    throw new PgMissingError(
      'PostgreSQL server binaries not found (no /usr/lib/postgresql/*/bin): install the Debian package ' +
        '"postgresql-15" (apt-get install -y postgresql-15) or pass --pg-bin DIR',
    );
  }
  const bin = candidates[0]!;
  const missing = PG_PROGRAMS.filter((p) => !fs.existsSync(path.join(bin, p)));
  if (missing.length > 0) {
    throw new PgMissingError(
      `--pg-bin ${bin} lacks ${missing.join(', ')}: point it at a PostgreSQL bin directory, or install the Debian package "postgresql-15"`,
    );
  }
  let version: string;
  try {
    version = execFileSync(path.join(bin, 'postgres'), ['--version'], { encoding: 'utf8' }).trim();
  } catch (e) {
    throw new PgMissingError(
      `${path.join(bin, 'postgres')} --version failed: ${(e as Error).message.split('\n')[0]}`,
    );
  }
  const m = /\(PostgreSQL\)\s+(\d+)/.exec(version);
  if (m === null)
    throw new PgMissingError(
      `cannot read the version of ${path.join(bin, 'postgres')}: "${version}"`,
    );
  return { dir: bin, major: Number(m[1]), version, path: (p) => path.join(bin, p) };
}

export interface PgUser {
  name: string;
  uid: number;
  gid: number;
}

/**
 * The OS user the server processes run as: null when we are not root (they run as us), else
 * the `postgres` user the Debian package creates.
 */
export function pgServerUser(name = 'postgres'): PgUser | null {
  if (typeof process.getuid !== 'function' || process.getuid() !== 0) return null;
  const line = fs
    .readFileSync('/etc/passwd', 'utf8')
    .split('\n')
    .find((l) => l.startsWith(`${name}:`));
  if (line === undefined) {
    throw new PgMissingError(
      `running as root, but there is no "${name}" OS user to run PostgreSQL as (the Debian package "postgresql-15" creates it)`,
    );
  }
  const f = line.split(':');
  return { name, uid: Number(f[2]), gid: Number(f[3]) };
}
