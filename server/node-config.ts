/**
 * A node's configuration files, read and written through the node's Disk (no node:fs here: the
 * simulator runs the same code on its in-memory disk, so ALTER SYSTEM there writes simulated files).
 *
 *   <dataDir>/walsim.conf.json       node settings (role, port, shared_buffers, ...): postgresql.conf
 *   <dataDir>/walsim.auto.conf.json  ALTER SYSTEM's settings, which override it: postgresql.auto.conf
 *
 * Entry points: `NodeConfig`, `loadNodeConfig`, `alterSystem` (ALTER SYSTEM SET/RESET),
 * `reloadableSetting` (the names ALTER SYSTEM accepts), `reloadConfig` (pg_reload_conf()),
 * `executeConfigStatement` (ALTER SYSTEM and SELECT pg_reload_conf() as statements),
 * `applyAutoConf`, `upstreamOf`, `walSettingsOf`, `copyDataDirectory` (a base backup's copy). The
 * cluster directory around the nodes (token, pid files, listing) is server/cluster-files.ts.
 */
import * as path from 'node:path';
import { readTextFile, type Disk } from '../common/disk.ts';
import { makeDir, writeFileAtomic } from '../common/durable-file.ts';
import { WalsimError } from '../common/errors.ts';
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
import type { WalSenderSet } from '../primary/walsender-set.ts';
import type { Statement } from '../sql/ast.ts';
import type { QueryResult } from '../protocol/messages.ts';

export type NodeName = string; // 'primary', 'standby', 'standby2', ...
export type Role = 'primary' | 'standby';

/** The node's settings file in its data directory (postgresql.conf). */
export const CONF_FILE = 'walsim.conf.json';

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
  /**
   * The real PostgreSQL major whose replay drop rules the node follows (`--pg-version`,
   * storage/pg-drop-rules.ts; its newest minor); `dropStrategy` and `thresholdDivisor` are then
   * that major's. Absent: walsim's own `dropStrategy`.
   */
  pgVersion?: number;
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

/**
 * The files of a data directory a base backup copies (data image, control file, WAL), into
 * `toDir` (created 0700 if missing); copies keep the source's 0600/0700 modes. `walFiles` names
 * the pg_wal files to take (a base backup's: walFilesForBaseBackup); all of pg_wal if absent.
 */
export function copyDataDirectory(
  fromDir: string,
  toDir: string,
  disk: Disk,
  walFiles?: readonly string[],
): void {
  makeDir(toDir, disk);
  for (const entry of walFiles === undefined ? ['pg_wal', 'base', 'global'] : ['base', 'global'])
    disk.copyTree(path.join(fromDir, entry), path.join(toDir, entry));
  if (walFiles === undefined) return;
  makeDir(path.join(toDir, 'pg_wal'), disk);
  for (const name of walFiles)
    disk.copyTree(path.join(fromDir, 'pg_wal', name), path.join(toDir, 'pg_wal', name));
}

/**
 * The node's settings by data directory: walsim.conf.json with ALTER SYSTEM's overrides applied
 * (the server reads its own at start and at pg_reload_conf(); the CLIs' readNodeConfig too).
 */
export function loadNodeConfig(dataDir: string, disk: Disk): NodeConfig {
  const base = JSON.parse(readTextFile(disk, path.join(dataDir, CONF_FILE))) as NodeConfig;
  return applyAutoConf(base, readAutoConf(dataDir, disk));
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

export function readAutoConf(dataDir: string, disk: Disk): AutoConf {
  const p = path.join(dataDir, AUTO_CONF_FILE);
  if (!disk.exists(p)) return {};
  return JSON.parse(readTextFile(disk, p)) as AutoConf;
}

/** Check a value as the setting's check hook would; throws the setting's error. */
export function checkSetting(name: ReloadableSetting, value: string): void {
  if (name === 'synchronous_standby_names') parseSynchronousStandbyNames(value);
  else if (name === 'synchronous_commit') parseSynchronousCommit(value);
  else parseConninfo(value);
}

/**
 * The setting ALTER SYSTEM names, if walsim can change it (RELOADABLE_SETTINGS); else PostgreSQL's
 * 42704 for an unknown name, and 0A000 for one walsim knows but cannot change.
 */
export function reloadableSetting(name: string): ReloadableSetting {
  if ((RELOADABLE_SETTINGS as readonly string[]).includes(name)) return name as ReloadableSetting;
  const known = ['shared_buffers', 'wal_segment_size', 'hot_standby', 'autovacuum'].includes(name);
  if (known)
    throw new WalsimError(
      'invalid_input',
      `walsim cannot change "${name}" with ALTER SYSTEM (it can: ${RELOADABLE_SETTINGS.join(', ')})`,
      '0A000',
    );
  throw new WalsimError('invalid_input', `unrecognized configuration parameter "${name}"`, '42704');
}

/** ALTER SYSTEM SET name = value (null: RESET): validate, then rewrite the file atomically. */
export function alterSystem(
  dataDir: string,
  name: ReloadableSetting,
  value: string | null,
  disk: Disk,
): void {
  const conf = readAutoConf(dataDir, disk);
  if (value === null) delete conf[name];
  else {
    checkSetting(name, value);
    conf[name] = value;
  }
  writeFileAtomic(path.join(dataDir, AUTO_CONF_FILE), JSON.stringify(conf, null, 2) + '\n', disk);
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

/** The node pg_reload_conf() reloads: its settings in force and what applies a change. */
export interface ReloadTarget {
  readonly dataDir: string;
  readonly disk: Disk;
  /** The settings in force, and their replacement by the reloaded ones. */
  readonly config: NodeConfig;
  setConfig(next: NodeConfig): void;
  readonly walsenders: Pick<WalSenderSet, 'reload'>;
  /** The walreceiver a changed primary_conninfo restarts (null on a primary). */
  walReceiverToRestart(): { restartWalReceiver(): void } | null;
  log(message: string): void;
}

/**
 * SIGHUP / pg_reload_conf() (ProcessConfigFile): re-read the settings (walsim.conf.json + ALTER
 * SYSTEM's) and apply what changed: synchronous_standby_names (every walsender's priority, then
 * release), synchronous_commit, primary_conninfo (the walreceiver restarts towards the new upstream
 * at its flush LSN, as PostgreSQL 13+ does). A value that no longer parses is ignored with a log
 * line, like a bad postgresql.conf line on reload.
 */
export function reloadConfig(node: ReloadTarget): void {
  let next: NodeConfig;
  try {
    next = loadNodeConfig(node.dataDir, node.disk);
  } catch (e) {
    node.log(
      `LOG:  configuration file contains errors; unaffected changes were applied: ${(e as Error).message}`,
    );
    return;
  }
  const prev = node.config;
  node.setConfig(next);
  node.log('LOG:  received SIGHUP, reloading configuration files');
  if (next.synchronousStandbyNames !== prev.synchronousStandbyNames) {
    node.log(
      `LOG:  parameter "synchronous_standby_names" changed to "${next.synchronousStandbyNames}"`,
    );
    node.walsenders.reload(parseSynchronousStandbyNames(next.synchronousStandbyNames));
  }
  if (next.synchronousCommit !== prev.synchronousCommit)
    node.log(`LOG:  parameter "synchronous_commit" changed to "${next.synchronousCommit}"`);
  const upstreamChanged =
    next.primaryHost !== prev.primaryHost ||
    next.primaryPort !== prev.primaryPort ||
    next.applicationName !== prev.applicationName;
  const receiver = upstreamChanged ? node.walReceiverToRestart() : null;
  if (receiver !== null) {
    node.log(`LOG:  parameter "primary_conninfo" changed; restarting the walreceiver`);
    receiver.restartWalReceiver();
  }
}

/**
 * ALTER SYSTEM SET/RESET (AlterSystemSetConfigFile) and SELECT pg_reload_conf() as statements,
 * their results; null for any other statement.
 */
export function executeConfigStatement(
  stmt: Statement,
  dataDir: string,
  disk: Disk,
  reload: () => void,
): QueryResult | null {
  if (stmt.type === 'alter_system') {
    alterSystem(dataDir, reloadableSetting(stmt.name), stmt.value, disk);
    return { command: 'ALTER SYSTEM', columns: [], rows: [] };
  }
  if (stmt.type === 'select_function' && stmt.fn === 'pg_reload_conf') {
    if (stmt.args.length > 0)
      throw new WalsimError(
        'invalid_input',
        'function pg_reload_conf() takes no arguments',
        '42883',
      );
    reload();
    return { command: 'SELECT 1', columns: ['pg_reload_conf'], rows: [{ pg_reload_conf: true }] };
  }
  return null;
}
