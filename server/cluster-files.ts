/**
 * On-disk layout of a walsim cluster directory (default `.walsim`) and the small files in it:
 * the access token (mode 0600), each node's configuration (like postgresql.conf) and its
 * postmaster.pid. Shared by the server process and the CLIs; no sockets here.
 *
 *   <dir>/token                      cluster access token, mode 0600
 *   <dir>/pg_password                PostgreSQL-protocol password (only with --password), mode 0600
 *   <dir>/<node>/walsim.conf.json    node settings (role, port, shared_buffers, ...): postgresql.conf
 *   <dir>/<node>/walsim.auto.conf.json  ALTER SYSTEM's settings, which override it: postgresql.auto.conf
 *   <dir>/<node>/postmaster.pid      JSON {pid, port, role, startedAt, marker} while running
 *   <dir>/<node>/server.log          the server's stdout/stderr
 *   <dir>/<node>/pg_wal/             WAL segments;  <dir>/<node>/base/  data files
 *   <dir>/<node>/global/pg_control   control file
 */
import { randomBytes } from 'node:crypto';
import * as fs from 'node:fs';
import * as path from 'node:path';
import { WalsimError } from '../common/errors.ts';
import { nodeDisk, type Disk } from '../common/disk.ts';
import { FILE_MODE, makeDir, writeFileAtomic } from '../common/durable-file.ts';

export { writeFileAtomic };
import {
  DEFAULT_WAL_SETTINGS,
  formatConninfo,
  parseConninfo,
  parseSynchronousCommit,
  type DropStrategy,
  type SynchronousCommit,
  type WalSettings,
} from './settings.ts';
import { parseSynchronousStandbyNames } from '../primary/sync-standby-names.ts';

export type NodeName = string; // 'primary', 'standby', 'standby2', ...
export type Role = 'primary' | 'standby';

/** Marker in the server's command line, checked before signalling a pid from a pid file. */
export const SERVER_MARKER = 'walsim-server';

export interface NodeConfig {
  name: NodeName;
  /** Role the node was initialised with; a promoted standby records 'primary' in pg_control, not here. */
  role: Role;
  listen: string;
  port: number;
  /** PostgreSQL wire-protocol port (absent in clusters made before it existed: a free port). */
  pgPort?: number;
  sharedBuffers: string;
  dropStrategy: DropStrategy;
  thresholdDivisor: number;
  forceOptimized: boolean;
  synchronousCommit: SynchronousCommit;
  synchronousStandbyNames: string;
  /** Standby only: where to stream from, and the name it reports (application_name). */
  primaryHost: string | null;
  primaryPort: number | null;
  applicationName: string;
  walSegmentSize: number;
  hotStandby: boolean;
  /** checkpoint_timeout, max_wal_size, wal_keep_size; absent in clusters made before they existed. */
  wal?: WalSettings;
}

/** The node's checkpoint and WAL-retention settings (PostgreSQL's defaults where not set). */
export function walSettingsOf(config: NodeConfig): WalSettings {
  return { ...DEFAULT_WAL_SETTINGS, ...config.wal };
}

export interface PidFile {
  pid: number;
  port: number;
  /** The PostgreSQL wire-protocol port. */
  pgPort?: number;
  role: Role;
  startedAt: string;
  marker: string;
}

/**
 * The files of a data directory a base backup copies (data image, control file, WAL), into
 * `toDir` (created 0700 if missing); copies keep the source's 0600/0700 modes.
 */
export function copyDataDirectory(fromDir: string, toDir: string, disk: Disk = nodeDisk): void {
  makeDir(toDir, disk);
  for (const entry of ['pg_wal', 'base', 'global'])
    disk.copyTree(path.join(fromDir, entry), path.join(toDir, entry));
}

export function nodeDir(clusterDir: string, name: NodeName): string {
  return path.join(clusterDir, name);
}

export function tokenPath(clusterDir: string): string {
  return path.join(clusterDir, 'token');
}

/** Create the token file (mode 0600) if missing; return the token. */
export function ensureToken(clusterDir: string): string {
  const p = tokenPath(clusterDir);
  if (fs.existsSync(p)) return readToken(clusterDir);
  makeDir(clusterDir);
  const token = randomBytes(24).toString('hex');
  fs.writeFileSync(p, token + '\n', { mode: FILE_MODE, flag: 'wx' });
  fs.chmodSync(p, FILE_MODE);
  return token;
}

/** How PostgreSQL-port clients prove the password (PostgreSQL's password_encryption). */
export type PasswordEncryption = 'scram-sha-256' | 'md5';
export const PASSWORD_ENCRYPTIONS: readonly PasswordEncryption[] = ['scram-sha-256', 'md5'];

export interface PgPassword {
  passwordEncryption: PasswordEncryption;
  password: string;
}

/**
 * The password every PostgreSQL-protocol client must give, when the cluster was started with
 * --password; absent means trust (loopback clients only). JSON, mode 0600, like the token.
 */
export function pgPasswordPath(clusterDir: string): string {
  return path.join(clusterDir, 'pg_password');
}

export function writePgPassword(clusterDir: string, value: PgPassword): void {
  makeDir(clusterDir);
  fs.writeFileSync(pgPasswordPath(clusterDir), JSON.stringify(value) + '\n', { mode: FILE_MODE });
  fs.chmodSync(pgPasswordPath(clusterDir), FILE_MODE);
}

export function readPgPassword(clusterDir: string): PgPassword | null {
  const p = pgPasswordPath(clusterDir);
  if (!fs.existsSync(p)) return null;
  const v = JSON.parse(fs.readFileSync(p, 'utf8')) as PgPassword;
  if (
    !PASSWORD_ENCRYPTIONS.includes(v.passwordEncryption) ||
    typeof v.password !== 'string' ||
    v.password === ''
  ) {
    throw new WalsimError(
      'invalid_input',
      `${p} does not hold a password (expected {"passwordEncryption": "scram-sha-256"|"md5", "password": "…"})`,
    );
  }
  return v;
}

export function readToken(clusterDir: string): string {
  const p = tokenPath(clusterDir);
  if (!fs.existsSync(p)) {
    throw new WalsimError(
      'not_connected',
      `no cluster at ${clusterDir} (token file missing); run "npm run cluster -- start" first`,
    );
  }
  return fs.readFileSync(p, 'utf8').trim();
}

export function configPath(clusterDir: string, name: NodeName): string {
  return path.join(nodeDir(clusterDir, name), 'walsim.conf.json');
}

/** The node's settings: walsim.conf.json with ALTER SYSTEM's overrides applied. */
export function readNodeConfig(clusterDir: string, name: NodeName): NodeConfig {
  const p = configPath(clusterDir, name);
  if (!fs.existsSync(p)) {
    throw new WalsimError(
      'not_connected',
      `no node "${name}" in ${clusterDir}; run "npm run cluster -- start" first`,
    );
  }
  return loadNodeConfig(nodeDir(clusterDir, name));
}

/** readNodeConfig by data directory (the server reads its own at start and at pg_reload_conf()). */
export function loadNodeConfig(dataDir: string): NodeConfig {
  const base = JSON.parse(
    fs.readFileSync(path.join(dataDir, 'walsim.conf.json'), 'utf8'),
  ) as NodeConfig;
  return applyAutoConf(base, readAutoConf(dataDir));
}

// ---------------------------------------------------------------------------------------------
// ALTER SYSTEM (postgresql.auto.conf)

/** Settings walsim can change with ALTER SYSTEM and apply with pg_reload_conf() (all PGC_SIGHUP or less). */
export const RELOADABLE_SETTINGS = [
  'synchronous_standby_names',
  'primary_conninfo',
  'synchronous_commit',
] as const;
export type ReloadableSetting = (typeof RELOADABLE_SETTINGS)[number];
export type AutoConf = Partial<Record<ReloadableSetting, string>>;

export const AUTO_CONF_FILE = 'walsim.auto.conf.json';

export function readAutoConf(dataDir: string): AutoConf {
  const p = path.join(dataDir, AUTO_CONF_FILE);
  if (!fs.existsSync(p)) return {};
  return JSON.parse(fs.readFileSync(p, 'utf8')) as AutoConf;
}

/** Check a value as the setting's check hook would; throws the setting's error. */
export function checkSetting(name: ReloadableSetting, value: string): void {
  if (name === 'synchronous_standby_names') parseSynchronousStandbyNames(value);
  else if (name === 'synchronous_commit') parseSynchronousCommit(value);
  else parseConninfo(value);
}

/** ALTER SYSTEM SET name = value (null: RESET): validate, then rewrite the file atomically. */
export function alterSystem(dataDir: string, name: ReloadableSetting, value: string | null): void {
  const conf = readAutoConf(dataDir);
  if (value === null) delete conf[name];
  else {
    checkSetting(name, value);
    conf[name] = value;
  }
  writeFileAtomic(path.join(dataDir, AUTO_CONF_FILE), JSON.stringify(conf, null, 2) + '\n');
}

export function applyAutoConf(base: NodeConfig, auto: AutoConf): NodeConfig {
  const c = { ...base };
  if (auto.synchronous_standby_names !== undefined)
    c.synchronousStandbyNames = auto.synchronous_standby_names;
  if (auto.synchronous_commit !== undefined)
    c.synchronousCommit = parseSynchronousCommit(auto.synchronous_commit);
  if (auto.primary_conninfo !== undefined) {
    const ci = parseConninfo(auto.primary_conninfo);
    c.primaryPort = ci.port;
    c.primaryHost = ci.port === null ? null : (ci.host ?? '127.0.0.1');
    if (ci.applicationName !== null) c.applicationName = ci.applicationName;
  }
  return c;
}

/** primary_conninfo of a configuration as host, port and application name; null without an upstream. */
export function upstreamOf(
  c: NodeConfig,
): { host: string; port: number; applicationName: string } | null {
  return c.primaryPort === null
    ? null
    : {
        host: c.primaryHost ?? '127.0.0.1',
        port: c.primaryPort,
        applicationName: c.applicationName,
      };
}

/** SHOW primary_conninfo of a configuration. */
export function primaryConninfoOf(c: NodeConfig): string {
  const u = upstreamOf(c);
  return u === null ? '' : formatConninfo(u);
}

export function writeNodeConfig(clusterDir: string, config: NodeConfig): void {
  makeDir(nodeDir(clusterDir, config.name));
  writeFileAtomic(configPath(clusterDir, config.name), JSON.stringify(config, null, 2) + '\n');
}

export function listNodes(clusterDir: string): NodeName[] {
  if (!fs.existsSync(clusterDir)) return [];
  return fs
    .readdirSync(clusterDir, { withFileTypes: true })
    .filter((d) => d.isDirectory() && fs.existsSync(configPath(clusterDir, d.name)))
    .map((d) => d.name)
    .sort();
}

export function pidFilePath(dataDir: string): string {
  return path.join(dataDir, 'postmaster.pid');
}

export function readPidFile(dataDir: string): PidFile | null {
  const p = pidFilePath(dataDir);
  if (!fs.existsSync(p)) return null;
  try {
    const v = JSON.parse(fs.readFileSync(p, 'utf8')) as PidFile;
    return typeof v.pid === 'number' ? v : null;
  } catch {
    return null; // half-written or garbage: treated as absent, never signalled
  }
}

/**
 * Is `pid` alive and a walsim server for `dataDir`? A stale pid file may name a pid the kernel has
 * since given to an unrelated process; we only ever signal a pid whose command line carries our
 * marker and this data directory.
 */
export function isWalsimServer(pid: number, dataDir: string): boolean {
  try {
    process.kill(pid, 0);
  } catch {
    return false;
  }
  try {
    const cmdline = fs.readFileSync(`/proc/${pid}/cmdline`, 'utf8').split('\0');
    return cmdline.includes(SERVER_MARKER) && cmdline.includes(path.resolve(dataDir));
  } catch {
    return false;
  }
}
