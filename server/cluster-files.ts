/**
 * On-disk layout of a walsim cluster directory (default `.walsim`) and the small files in it:
 * the access token (mode 0600), each node's configuration (like postgresql.conf) and its
 * postmaster.pid. Shared by the server process and the CLIs; no sockets here.
 *
 *   <dir>/token                      cluster access token, mode 0600
 *   <dir>/pg_password                PostgreSQL-protocol password (only with --password), mode 0600
 *   <dir>/<node>/walsim.conf.json    node settings (role, port, shared_buffers, ...): postgresql.conf
 *   <dir>/<node>/walsim.auto.conf.json  ALTER SYSTEM's settings, which override it: postgresql.auto.conf
 *   <dir>/cluster.lock               while a cluster-wide CLI operation runs (server/lock-files.ts)
 *   <dir>/<node>/postmaster.pid      the data directory's lock: JSON {pid, startedAt, marker,
 *                                    status 'starting'} from the server's first moment, then
 *                                    {pid, port, pgPort, role, startedAt, marker, status 'ready'}
 *   <dir>/<node>/server.log          the server's stdout/stderr
 *   <dir>/<node>/pg_wal/             WAL segments;  <dir>/<node>/base/  data files
 *   <dir>/<node>/global/pg_control   control file
 */
import { randomBytes } from 'node:crypto';
import * as fs from 'node:fs';
import * as path from 'node:path';
import { WalsimError } from '../common/errors.ts';
import { nodeDisk } from '../common/node-disk.ts';
import { FILE_MODE, makeDir, writeFileAtomic } from '../common/durable-file.ts';
import {
  CONF_FILE,
  loadNodeConfig,
  type NodeConfig,
  type NodeName,
  type Role,
} from './node-config.ts';

export { writeFileAtomic };
// A node's own files (settings, ALTER SYSTEM) go through its Disk: server/node-config.ts.
export {
  alterSystem,
  applyAutoConf,
  AUTO_CONF_FILE,
  checkSetting,
  copyDataDirectory,
  loadNodeConfig,
  primaryConninfoOf,
  readAutoConf,
  RELOADABLE_SETTINGS,
  upstreamOf,
  walSettingsOf,
  type AutoConf,
  type NodeConfig,
  type NodeName,
  type ReloadableSetting,
  type Role,
} from './node-config.ts';

/** Marker in the server's command line, checked before signalling a pid from a pid file. */
export const SERVER_MARKER = 'walsim-server';

/** postmaster.pid once the server listens (`status` 'ready'; absent in files of older servers). */
export interface PidFile {
  pid: number;
  port: number;
  /** The PostgreSQL wire-protocol port. */
  pgPort?: number;
  role: Role;
  startedAt: string;
  marker: string;
  status?: 'ready';
}

/**
 * postmaster.pid from the moment a server takes its data directory's lock (before it reads or
 * writes anything there) until its ports listen: PostgreSQL's PM_STATUS_STARTING.
 */
export interface StartingPidFile {
  pid: number;
  startedAt: string;
  marker: string;
  status: 'starting';
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
  makeDir(clusterDir, nodeDisk);
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
  makeDir(clusterDir, nodeDisk);
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
  return path.join(nodeDir(clusterDir, name), CONF_FILE);
}

/** The node's settings: walsim.conf.json with ALTER SYSTEM's overrides applied. */
export function readNodeConfig(clusterDir: string, name: NodeName): NodeConfig {
  const p = configPath(clusterDir, name);
  if (!fs.existsSync(p)) {
    const nodes = listNodes(clusterDir);
    throw new WalsimError(
      'not_connected',
      nodes.length > 0
        ? `no node "${name}" in ${clusterDir} (nodes: ${nodes.join(', ')}); pass one with --node`
        : `no node "${name}" in ${clusterDir}; run "npm run cluster -- start" first`,
    );
  }
  return loadNodeConfig(nodeDir(clusterDir, name), nodeDisk);
}

export function writeNodeConfig(clusterDir: string, config: NodeConfig): void {
  makeDir(nodeDir(clusterDir, config.name), nodeDisk);
  writeFileAtomic(
    configPath(clusterDir, config.name),
    JSON.stringify(config, null, 2) + '\n',
    nodeDisk,
  );
}

export function listNodes(clusterDir: string): NodeName[] {
  // A --dir naming a file holds no nodes; initdb's check then says what it is.
  if (!fs.existsSync(clusterDir) || !fs.statSync(clusterDir).isDirectory()) return [];
  return fs
    .readdirSync(clusterDir, { withFileTypes: true })
    .filter((d) => d.isDirectory() && fs.existsSync(configPath(clusterDir, d.name)))
    .map((d) => d.name)
    .sort();
}

export function pidFilePath(dataDir: string): string {
  return path.join(dataDir, 'postmaster.pid');
}

/** The pid file of a server that serves (its ports listen), or null (absent, starting, garbage). */
export function readPidFile(dataDir: string): PidFile | null {
  const v = readAnyPidFile(dataDir);
  return v !== null && v.status !== 'starting' && typeof v.port === 'number' ? v : null;
}

/** The pid file in either phase (starting or ready), or null (absent, half-written, garbage). */
export function readAnyPidFile(dataDir: string): PidFile | StartingPidFile | null {
  const p = pidFilePath(dataDir);
  if (!fs.existsSync(p)) return null;
  try {
    const v = JSON.parse(fs.readFileSync(p, 'utf8')) as PidFile | StartingPidFile;
    return typeof v.pid === 'number' ? v : null;
  } catch {
    return null; // garbage: treated as absent, never signalled
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
