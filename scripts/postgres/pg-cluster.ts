/**
 * A real PostgreSQL primary + synchronous standby under a cluster directory, set up the way seed
 * 001 did: `initdb`, the seed's postgresql.conf settings, a base backup, `pg_ctl`. Both listen on
 * 127.0.0.1 only (no Unix socket), on free ports. Run as the `postgres` OS user when we are root.
 *
 * Any major 13–18 (pg-bin.ts `resolvePgBin`). The standby (`standbyMethod` in engine.json):
 * - `pg_basebackup`: `pg_basebackup -X stream` when one of the server's major or newer is at hand
 *   (Debian's 15 serves 13, 14 and 15; it refuses 16+). `-R`'s `primary_conninfo` carries every
 *   libpq 15 option, `sslsni` included, which a 13 walreceiver refuses ("invalid connection option
 *   "sslsni""), so below 15 standby.signal and a plain `primary_conninfo` are written here;
 * - `cold-copy`: otherwise (the npm packages ship no pg_basebackup) the primary is stopped
 *   cleanly, its data directory copied, standby.signal and `primary_conninfo` written, and both
 *   started: the standby begins at the shutdown checkpoint and streams from there, as
 *   PostgreSQL's documentation allows for a copy of a cleanly shut down cluster.
 * 18's initdb turns data checksums on by default; `--no-data-checksums` keeps every major alike
 * (13–17 default off), so checksum work never differs between the versions compared.
 *
 * Layout: `<dir>/engine.json` (which binaries, user, ports, settings), `<dir>/primary/` and
 * `<dir>/standby/` (PGDATA), `<dir>/primary.log` and `<dir>/standby.log` (pg_ctl -l; every line
 * starts with a millisecond UTC timestamp and the pid, `log_line_prefix = '%m [%p] '`).
 *
 * A pair can also start from a template (`stopAsTemplate`, `initPgClusterFromTemplate`: a loaded,
 * cleanly stopped primary kept between a sweep's runs): both nodes are then cold copies of it.
 *
 * Entry points: `initPgCluster`, `initPgClusterFromTemplate`, `stopAsTemplate`, `destroyPgCluster`,
 * `readPgEngine`, `isPgCluster`, `pgCtl`, `pgNodeRunning`, `stopPgNode`, `pgConnect`, `pgLogPath`,
 * `runPgProgram`.
 */
import { execFile } from 'node:child_process';
import * as fs from 'node:fs';
import * as path from 'node:path';
import pg from 'pg';
import { assert } from '../../common/assert.ts';
import { WalsimError } from '../../common/errors.ts';
import { writeFileAtomic } from '../../common/durable-file.ts';
import { parseSharedBuffers } from '../../storage/shared-buffers.ts';
import { pollUntil } from '../../server/poll.ts';
import { freePort } from '../../server/ports.ts';
import { pgServerUser, resolvePgBin, toolPath, type PgProgram, type PgUser } from './pg-bin.ts';
import { nodeDisk } from '../../common/node-disk.ts';
import { onInterrupt } from '../cli/interrupt.ts';
import { trimWalToShutdownCheckpoint } from './pg-control.ts';

export type PgNodeName = 'primary' | 'standby';

/** The seed's postgresql.conf (seed 001, "I used the following configurations"). */
export const SEED_SETTINGS: Readonly<Record<string, string>> = {
  autovacuum: 'off',
  full_page_writes: 'off',
  checkpoint_timeout: '30min',
  max_locks_per_transaction: '10000',
  max_wal_size: '20GB',
  synchronous_commit: 'remote_write',
  synchronous_standby_names: "'walreceiver'",
  hot_standby: 'on',
};

/** Ours: loopback only, timestamps to the millisecond in UTC, checkpoints logged (PG15 default). */
const HARNESS_SETTINGS: Readonly<Record<string, string>> = {
  listen_addresses: "'127.0.0.1'",
  unix_socket_directories: "''",
  log_line_prefix: "'%m [%p] '",
  log_timezone: "'UTC'",
  log_checkpoints: 'on',
  logging_collector: 'off',
};

export interface PgClusterSettings {
  /** The standby's shared_buffers: the pool whose drops are measured. */
  sharedBuffers: string;
  primarySharedBuffers: string;
  /** `--pg-bin`; default: the newest /usr/lib/postgresql/<major>/bin (or `pgVersion`'s). */
  pgBin?: string;
  /** `--pg-version`: that major from pg-install.ts's cache (installed on first use). */
  pgVersion?: string | number;
}

/** How the standby was made (see the file comment). */
export type StandbyMethod = 'pg_basebackup' | 'cold-copy';

export interface PgEngineFile {
  engine: 'postgres';
  binDir: string;
  version: string;
  major: number;
  /** Absent in files written before versions: pg_basebackup. */
  standbyMethod?: StandbyMethod;
  user: PgUser | null;
  ports: Record<PgNodeName, number>;
  sharedBuffers: Record<PgNodeName, string>;
}

const ENGINE_FILE = 'engine.json';

export function isPgCluster(dir: string): boolean {
  return fs.existsSync(path.join(dir, ENGINE_FILE));
}

export function readPgEngine(dir: string): PgEngineFile {
  const p = path.join(dir, ENGINE_FILE);
  if (!fs.existsSync(p))
    throw new WalsimError(
      'invalid_input',
      `no PostgreSQL cluster at ${dir} (no ${ENGINE_FILE}); start one with --engine postgres`,
    );
  return JSON.parse(fs.readFileSync(p, 'utf8')) as PgEngineFile;
}

/**
 * `pg_get_wal_replay_pause_state()` (14+). 13 has only `pg_is_wal_replay_paused()`, true once a
 * pause is requested; its redo loop checks that flag before every record, so no record is replayed
 * after it: 'paused' for the steps' purpose.
 */
export function pauseStateSql(major: number): string {
  return major >= 14
    ? 'SELECT pg_get_wal_replay_pause_state()'
    : "SELECT CASE WHEN pg_is_wal_replay_paused() THEN 'paused' ELSE 'not paused' END";
}

export const pgDataDir = (dir: string, name: PgNodeName) => path.join(dir, name);
export const pgLogPath = (dir: string, name: PgNodeName) => path.join(dir, `${name}.log`);

export interface ProgramResult {
  code: number;
  stdout: string;
  stderr: string;
  wallMs: number;
}

/**
 * Run a PostgreSQL program of the cluster's installation as the server user, without blocking the
 * event loop. A non-zero exit throws unless `allowFail`.
 */
export function runPgProgram(
  engine: Pick<PgEngineFile, 'binDir' | 'user'> & { major?: number },
  program: PgProgram,
  args: string[],
  opts: { cwd?: string; allowFail?: boolean; timeoutMs?: number } = {},
): Promise<ProgramResult> {
  const t0 = performance.now();
  return new Promise((resolve, reject) => {
    execFile(
      engine.major === undefined
        ? path.join(engine.binDir, program)
        : toolPath(engine.binDir, engine.major, program),
      args,
      {
        cwd: opts.cwd ?? '/',
        encoding: 'utf8',
        maxBuffer: 64 * 1024 * 1024,
        timeout: opts.timeoutMs ?? 0,
        env: {
          ...process.env,
          LC_ALL: 'C',
          PGTZ: 'UTC',
          ...(engine.user ? { HOME: '/tmp', USER: engine.user.name } : {}),
        },
        ...(engine.user ? { uid: engine.user.uid, gid: engine.user.gid } : {}),
      },
      (err, stdout, stderr) => {
        const wallMs = performance.now() - t0;
        const code =
          err === null
            ? 0
            : typeof (err as { code?: unknown }).code === 'number'
              ? (err as { code: number }).code
              : -1;
        if (code !== 0 && !opts.allowFail) {
          reject(
            new WalsimError(
              'io_error',
              `${program} ${args.join(' ')} failed (exit ${code}): ${(stderr || err?.message || '').trim().split('\n').slice(-3).join(' | ')}`,
            ),
          );
          return;
        }
        resolve({ code, stdout, stderr, wallMs });
      },
    );
  });
}

function confLines(settings: Record<string, string>): string {
  return (
    Object.entries(settings)
      .map(([k, v]) => `${k} = ${v}`)
      .join('\n') + '\n'
  );
}

/** pg_ctl start|stop|status|promote for one node. */
export async function pgCtl(
  dir: string,
  name: PgNodeName,
  action: 'start' | 'stop' | 'status' | 'promote',
  opts: { mode?: 'smart' | 'fast' | 'immediate'; timeoutS?: number; allowFail?: boolean } = {},
): Promise<ProgramResult> {
  const engine = readPgEngine(dir);
  const args = [action, '-D', pgDataDir(dir, name)];
  if (action === 'start')
    args.push('-l', pgLogPath(dir, name), '-w', '-t', String(opts.timeoutS ?? 120));
  if (action === 'stop')
    args.push('-m', opts.mode ?? 'fast', '-w', '-t', String(opts.timeoutS ?? 120));
  if (action === 'promote') args.push('-w', '-t', String(opts.timeoutS ?? 3600));
  return runPgProgram(engine, 'pg_ctl', args, {
    cwd: dir,
    allowFail: opts.allowFail ?? action === 'status',
  });
}

/**
 * `cluster stop --engine postgres` of one node: pg_ctl stop when it runs. Returns whether it was
 * running (pg_ctl stop of a stopped server would fail).
 */
export async function stopPgNode(
  dir: string,
  name: PgNodeName,
  mode: 'smart' | 'fast' | 'immediate',
): Promise<boolean> {
  if (!(await pgNodeRunning(dir, name))) return false;
  await pgCtl(dir, name, 'stop', { mode });
  return true;
}

/** pg_ctl status: 0 = running, 3 = not running. */
export async function pgNodeRunning(dir: string, name: PgNodeName): Promise<boolean> {
  if (!fs.existsSync(path.join(pgDataDir(dir, name), 'postmaster.pid'))) return false;
  return (await pgCtl(dir, name, 'status', { allowFail: true })).code === 0;
}

/**
 * A connection to one node as the superuser (`application_name` says who we are);
 * `connectTimeoutMs` bounds the connection attempt (default: none, as libpq).
 */
export async function pgConnect(
  dir: string,
  name: PgNodeName,
  role = 'walsim-experiment',
  opts: { connectTimeoutMs?: number } = {},
): Promise<pg.Client> {
  const engine = readPgEngine(dir);
  const c = new pg.Client({
    host: '127.0.0.1',
    port: engine.ports[name],
    user: 'postgres',
    database: 'postgres',
    application_name: role,
    connectionTimeoutMillis: opts.connectTimeoutMs ?? 0,
  });
  c.on('error', () => {}); // a server stopped under us surfaces on the next query
  await c.connect();
  return c;
}

export function pgConnectionString(dir: string, name: PgNodeName): string {
  return `postgresql://postgres@127.0.0.1:${readPgEngine(dir).ports[name]}/postgres`;
}

/**
 * initdb a primary, start it, base-backup a standby from it (`-R -X stream`), start it, and wait
 * until the standby streams as the synchronous standby `walreceiver`. `dir` must not exist or be
 * empty; on failure everything started is stopped again.
 */
export async function initPgCluster(dir: string, s: PgClusterSettings): Promise<PgEngineFile> {
  parseSharedBuffers(s.sharedBuffers);
  parseSharedBuffers(s.primarySharedBuffers);
  const bin = await resolvePgBin({ pgBin: s.pgBin, pgVersion: s.pgVersion });
  const user = pgServerUser();
  assert(
    user !== null || process.getuid?.() !== 0,
    'INV-SCRIPTS-6 PostgreSQL servers never run as root',
  );
  await prepareClusterDir(dir, bin, user);
  const engine: PgEngineFile = {
    engine: 'postgres',
    binDir: bin.dir,
    version: bin.version,
    major: bin.major,
    standbyMethod: fs.existsSync(bin.path('pg_basebackup')) ? 'pg_basebackup' : 'cold-copy',
    user,
    ports: { primary: await freePort('127.0.0.1'), standby: await freePort('127.0.0.1') },
    sharedBuffers: { primary: s.primarySharedBuffers, standby: s.sharedBuffers },
  };
  writeFileAtomic(path.join(dir, ENGINE_FILE), JSON.stringify(engine, null, 2) + '\n', nodeDisk);
  try {
    await buildPgCluster(dir, engine, s);
  } catch (e) {
    await stopPgCluster(dir);
    throw e;
  }
  return engine;
}

/** A fresh directory the PostgreSQL OS user owns and can reach through its parents. */
async function prepareClusterDir(
  dir: string,
  bin: { dir: string; major: number },
  user: ReturnType<typeof pgServerUser>,
): Promise<void> {
  if (fs.existsSync(dir) && fs.readdirSync(dir).length > 0)
    throw new WalsimError(
      'invalid_input',
      `${dir} is not empty; a PostgreSQL cluster needs a fresh directory`,
    );
  fs.mkdirSync(dir, { recursive: true });
  if (user) {
    fs.chownSync(dir, user.uid, user.gid);
    // The server user must be able to reach the directory through its parents.
    try {
      await runPgProgram(
        { binDir: bin.dir, major: bin.major, user },
        'pg_ctl',
        ['status', '-D', dir],
        {
          cwd: dir,
          allowFail: true,
        },
      );
    } catch (e) {
      throw new WalsimError(
        'invalid_input',
        `the "${user.name}" OS user cannot enter ${dir}; choose a directory it can reach: ${(e as Error).message}`,
      );
    }
  }
}

/** initdb and start the primary, make the standby from it and start it. */
async function buildPgCluster(
  dir: string,
  engine: PgEngineFile,
  s: PgClusterSettings,
): Promise<void> {
  const primary = pgDataDir(dir, 'primary');
  await runPgProgram(
    engine,
    'initdb',
    [
      '-D',
      primary,
      '-U',
      'postgres',
      '-A',
      'trust',
      '--locale=C',
      '-E',
      'UTF8',
      '--no-sync',
      ...(engine.major >= 18 ? ['--no-data-checksums'] : []),
    ],
    { cwd: dir },
  );
  fs.appendFileSync(
    path.join(primary, 'postgresql.conf'),
    '\n# walsim --engine postgres (seed 001 settings)\n' +
      confLines({
        ...SEED_SETTINGS,
        ...HARNESS_SETTINGS,
        port: String(engine.ports.primary),
        shared_buffers: s.primarySharedBuffers,
      }),
  );
  await pgCtl(dir, 'primary', 'start');
  if (engine.standbyMethod === 'cold-copy') await coldCopy(dir, engine);
  else await baseBackup(dir, engine);
  appendStandbyConf(dir, engine);
  await pgCtl(dir, 'standby', 'start');
  await waitSyncStreaming(dir);
}

/** The standby's own settings after the primary's: its port and shared_buffers. */
function appendStandbyConf(dir: string, engine: PgEngineFile): void {
  // The seed: synchronous_commit/synchronous_standby_names are for the primary only.
  fs.appendFileSync(
    path.join(pgDataDir(dir, 'standby'), 'postgresql.conf'),
    '\n# the standby\n' +
      confLines({
        port: String(engine.ports.standby),
        shared_buffers: engine.sharedBuffers.standby,
        synchronous_standby_names: "''",
      }),
  );
}

/**
 * `primary_conninfo` without libpq options a walreceiver older than the tools may refuse; no
 * application_name, so the walreceiver is "walreceiver" (synchronous_standby_names), as with -R.
 */
function writeStandbyConfig(standby: string, engine: PgEngineFile): void {
  fs.writeFileSync(path.join(standby, 'standby.signal'), '');
  fs.appendFileSync(
    path.join(standby, 'postgresql.auto.conf'),
    `primary_conninfo = 'host=127.0.0.1 port=${engine.ports.primary} user=postgres'\n`,
  );
  if (engine.user) {
    for (const f of ['standby.signal', 'postgresql.auto.conf'])
      fs.chownSync(path.join(standby, f), engine.user.uid, engine.user.gid);
  }
}

/** pg_basebackup -X stream (with -R for 15+, whose walreceiver accepts the string it writes). */
async function baseBackup(dir: string, engine: PgEngineFile): Promise<void> {
  const standby = pgDataDir(dir, 'standby');
  const ownConninfo = engine.major < 15;
  const args = ['-D', standby, ...(ownConninfo ? [] : ['-R']), '-X', 'stream', '-c', 'fast'];
  args.push('-h', '127.0.0.1', '-p', String(engine.ports.primary), '-U', 'postgres', '--no-sync');
  await runPgProgram(engine, 'pg_basebackup', args, { cwd: dir });
  if (ownConninfo) writeStandbyConfig(standby, engine);
}

/** A cold copy: stop the primary cleanly, copy its data directory, start the primary again. */
async function coldCopy(dir: string, engine: PgEngineFile): Promise<void> {
  const standby = pgDataDir(dir, 'standby');
  await pgCtl(dir, 'primary', 'stop', { mode: 'fast' });
  await copyDataDir(pgDataDir(dir, 'primary'), standby, engine);
  writeStandbyConfig(standby, engine);
  await pgCtl(dir, 'primary', 'start');
}

/** `cp -a` of a stopped data directory as the server's OS user, without its postmaster files. */
async function copyDataDir(from: string, to: string, engine: PgEngineFile): Promise<void> {
  await new Promise<void>((resolve, reject) =>
    execFile(
      'cp',
      ['-a', from, to],
      engine.user ? { uid: engine.user.uid, gid: engine.user.gid } : {},
      (err, _o, stderr) =>
        err === null
          ? resolve()
          : reject(new WalsimError('io_error', `copying ${from} failed: ${stderr.trim()}`)),
    ),
  );
  for (const f of ['postmaster.opts', 'postmaster.pid'])
    fs.rmSync(path.join(to, f), { force: true });
}

/**
 * Turn a running pair into the template of its loaded primary (experiment/loaded-template.ts): the
 * standby stopped (immediate) and removed with its log, then the primary stopped cleanly (fast: its
 * shutdown checkpoint writes every dirty page) and its pg_wal trimmed to the segment of that
 * checkpoint (pg-control.ts; refused unless pg_control says shut down). Left in `dir`: engine.json,
 * the primary's data directory and log, and whatever the caller keeps there (experiment.json).
 */
export async function stopAsTemplate(dir: string): Promise<void> {
  // The standby first: with it gone, the primary's walsender has nothing to wait for at shutdown.
  await stopPgNode(dir, 'standby', 'immediate');
  // Its shutdown checkpoint fsyncs the whole relation (2.5 GB at 20GB NB/8): no 2-minute limit.
  await pgCtl(dir, 'primary', 'stop', { mode: 'fast', timeoutS: 3600 });
  fs.rmSync(pgDataDir(dir, 'standby'), { recursive: true, force: true });
  fs.rmSync(pgLogPath(dir, 'standby'), { force: true });
  trimWalToShutdownCheckpoint(pgDataDir(dir, 'primary'));
}

/**
 * A pair whose primary and standby are both copies of a template's stopped primary
 * (`stopAsTemplate`), as `coldCopy` makes a standby: fresh ports, the standby with standby.signal,
 * `primary_conninfo` and `sharedBuffers`; both started, then the wait for synchronous streaming of
 * `initPgCluster`. The template is only read. `dir` must not exist or be empty; on failure
 * everything started is stopped again.
 */
export async function initPgClusterFromTemplate(
  dir: string,
  templateDir: string,
  s: { sharedBuffers: string },
): Promise<PgEngineFile> {
  parseSharedBuffers(s.sharedBuffers);
  const t = readPgEngine(templateDir);
  assert(
    t.user !== null || process.getuid?.() !== 0,
    'INV-SCRIPTS-6 PostgreSQL servers never run as root',
  );
  await prepareClusterDir(dir, { dir: t.binDir, major: t.major }, t.user);
  const engine: PgEngineFile = {
    ...t,
    standbyMethod: 'cold-copy',
    ports: { primary: await freePort('127.0.0.1'), standby: await freePort('127.0.0.1') },
    sharedBuffers: { primary: t.sharedBuffers.primary, standby: s.sharedBuffers },
  };
  writeFileAtomic(path.join(dir, ENGINE_FILE), JSON.stringify(engine, null, 2) + '\n', nodeDisk);
  try {
    const source = pgDataDir(templateDir, 'primary');
    const primary = pgDataDir(dir, 'primary');
    const standby = pgDataDir(dir, 'standby');
    await Promise.all([copyDataDir(source, primary, engine), copyDataDir(source, standby, engine)]);
    // A later line wins in postgresql.conf: the template's port was its own build's.
    fs.appendFileSync(
      path.join(primary, 'postgresql.conf'),
      '\n# this copy of the template\n' + confLines({ port: String(engine.ports.primary) }),
    );
    writeStandbyConfig(standby, engine);
    appendStandbyConf(dir, engine);
    await pgCtl(dir, 'primary', 'start');
    await pgCtl(dir, 'standby', 'start');
    await waitSyncStreaming(dir);
  } catch (e) {
    await stopPgCluster(dir);
    throw e;
  }
  return engine;
}

/** Until the standby streams as the synchronous standby `walreceiver`. */
async function waitSyncStreaming(dir: string): Promise<void> {
  const c = await pgConnect(dir, 'primary');
  try {
    await pollUntil(
      async () => {
        const r = await c.query(
          "SELECT state, sync_state FROM pg_stat_replication WHERE application_name = 'walreceiver'",
        );
        return r.rows[0]?.state === 'streaming' && r.rows[0]?.sync_state === 'sync';
      },
      'the standby to stream as the synchronous standby "walreceiver"',
      120_000,
      50,
    );
  } finally {
    await c.end();
  }
}

/** Stop every running node immediately (pg_ctl stop -m immediate). */
export async function stopPgCluster(dir: string): Promise<void> {
  if (!isPgCluster(dir)) return;
  for (const name of ['primary', 'standby'] as const) {
    if (await pgNodeRunning(dir, name))
      await pgCtl(dir, name, 'stop', { mode: 'immediate', allowFail: true });
  }
}

/**
 * Ctrl-C (SIGINT/SIGTERM) during a run that builds clusters under `workDir`: destroy the cluster of
 * every entry there (`clusterOf` names its directory), then exit 130.
 */
export function destroyPgClustersOnSignal(
  workDir: string,
  clusterOf: (entry: string) => string = (entry) => entry,
): void {
  onInterrupt(async () => {
    if (fs.existsSync(workDir))
      for (const d of fs.readdirSync(workDir))
        await destroyPgCluster(path.join(workDir, clusterOf(d))).catch(() => {});
  });
}

/** Stop the cluster's servers and remove its directory. */
export async function destroyPgCluster(dir: string): Promise<void> {
  await stopPgCluster(dir);
  fs.rmSync(dir, { recursive: true, force: true });
}
