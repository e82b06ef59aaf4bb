/** Server settings with PostgreSQL's names and accepted values, validated with clear errors. */
import { WalsimError } from '../common/errors.ts';
import { DROP_STRATEGIES, type DropStrategy } from '../storage/drop.ts';

/**
 * The PostgreSQL release whose behaviour walsim imitates (server_version / server_version_num; the
 * wire protocol reports it at start-up). The drop paths follow PostgreSQL 15, `full-scan` keeps the
 * pre-14 behaviour for the seed's comparison.
 */
export const PG_SERVER_VERSION = '15.0 (walsim)';
export const PG_SERVER_VERSION_NUM = 150000;

export type { SynchronousCommit } from '../protocol/messages.ts';
import type { SynchronousCommit } from '../protocol/messages.ts';
export const SYNCHRONOUS_COMMIT_VALUES: readonly SynchronousCommit[] = [
  'off',
  'local',
  'remote_write',
  'on',
  'remote_apply',
];

export { DROP_STRATEGIES, type DropStrategy } from '../storage/drop.ts';

export function parseSynchronousCommit(text: string): SynchronousCommit {
  if ((SYNCHRONOUS_COMMIT_VALUES as readonly string[]).includes(text))
    return text as SynchronousCommit;
  throw new WalsimError(
    'invalid_input',
    `invalid value for parameter "synchronous_commit": "${text}" (accepted: ${SYNCHRONOUS_COMMIT_VALUES.join(', ')})`,
  );
}

export function parseDropStrategy(text: string): DropStrategy {
  if ((DROP_STRATEGIES as readonly string[]).includes(text)) return text as DropStrategy;
  throw new WalsimError(
    'invalid_input',
    `invalid drop strategy "${text}" (accepted: ${DROP_STRATEGIES.join(', ')})`,
  );
}

/** primary_conninfo, as far as walsim's walreceiver uses it. */
export interface Conninfo {
  host: string | null;
  port: number | null;
  applicationName: string | null;
}

const CONNINFO_KEYS = [
  'host',
  'hostaddr',
  'port',
  'application_name',
  'user',
  'dbname',
  'password',
  'sslmode',
  'connect_timeout',
];

/**
 * Parse a libpq keyword/value connection string (`host=127.0.0.1 port=5433 application_name=s2`;
 * values may be single-quoted with \' and \\ escapes). Unknown keywords are refused as libpq does
 * ("invalid connection option"); walsim uses host, port and application_name.
 */
export function parseConninfo(text: string): Conninfo {
  const out: Conninfo = { host: null, port: null, applicationName: null };
  let i = 0;
  const bad = (why: string): never => {
    throw new WalsimError(
      'invalid_input',
      `invalid value for parameter "primary_conninfo": "${text}" (${why})`,
    );
  };
  while (i < text.length) {
    while (i < text.length && /\s/.test(text[i]!)) i++;
    if (i >= text.length) break;
    const eq = text.indexOf('=', i);
    if (eq < 0) bad(`missing "=" after "${text.slice(i)}" in connection info string`);
    const key = text.slice(i, eq).trim();
    i = eq + 1;
    while (i < text.length && /\s/.test(text[i]!)) i++;
    let value = '';
    if (text[i] === "'") {
      i++;
      for (;;) {
        if (i >= text.length) bad('unterminated quoted string in connection info string');
        const c = text[i]!;
        if (c === '\\') {
          value += text[i + 1] ?? '';
          i += 2;
          continue;
        }
        if (c === "'") {
          i++;
          break;
        }
        value += c;
        i++;
      }
    } else {
      while (i < text.length && !/\s/.test(text[i]!)) value += text[i++];
    }
    if (!CONNINFO_KEYS.includes(key)) bad(`invalid connection option "${key}"`);
    if (key === 'host' || key === 'hostaddr') out.host = value;
    if (key === 'application_name') out.applicationName = value;
    if (key === 'port') {
      const port = Number(value);
      if (!/^\d+$/.test(value) || port < 1 || port > 65535) bad(`invalid port number: "${value}"`);
      out.port = port;
    }
  }
  return out;
}

/** The conninfo text for a host, port and application_name (values quoted when needed). */
export function formatConninfo(c: Conninfo): string {
  const q = (v: string) =>
    /^[^\s'\\]+$/.test(v) ? v : `'${v.replace(/\\/g, '\\\\').replace(/'/g, "\\'")}'`;
  const parts: string[] = [];
  if (c.host !== null) parts.push(`host=${q(c.host)}`);
  if (c.port !== null) parts.push(`port=${c.port}`);
  if (c.applicationName !== null) parts.push(`application_name=${q(c.applicationName)}`);
  return parts.join(' ');
}

// ---------------------------------------------------------------------------------------------
// WAL volume and checkpoint settings (guc_tables.c): max_wal_size and wal_keep_size are
// GUC_UNIT_MB integers, checkpoint_timeout a GUC_UNIT_S integer.

/** Checkpoint and WAL-retention settings of a node, in base units. */
export interface WalSettings {
  /** checkpoint_timeout in seconds (PostgreSQL: 5min, range 30s..1d). */
  checkpointTimeoutS: number;
  /** max_wal_size in MB (PostgreSQL: 1GB, at least 2 segments). */
  maxWalSizeMb: number;
  /** wal_keep_size in MB (PostgreSQL: 0). */
  walKeepSizeMb: number;
}

export const DEFAULT_WAL_SETTINGS: Readonly<WalSettings> = {
  checkpointTimeoutS: 300,
  maxWalSizeMb: 1024,
  walKeepSizeMb: 0,
};

const MEMORY_UNITS_MB: Readonly<Record<string, number>> = {
  kB: 1 / 1024,
  MB: 1,
  GB: 1024,
  TB: 1024 * 1024,
};
const TIME_UNITS_S: Readonly<Record<string, number>> = {
  ms: 1 / 1000,
  s: 1,
  min: 60,
  h: 3600,
  d: 86400,
};

function parseWithUnit(
  name: string,
  text: string,
  units: Readonly<Record<string, number>>,
  baseUnit: string,
): number {
  const m = /^\s*(\d+(?:\.\d+)?)\s*([a-zA-Z]*)\s*$/.exec(text);
  const unitNames = Object.keys(units).join(', ');
  if (!m)
    throw new WalsimError(
      'invalid_input',
      `invalid value for parameter "${name}": "${text}" (expected a number with an optional unit: ${unitNames}; no unit means ${baseUnit})`,
    );
  const unit = m[2] === '' ? baseUnit : m[2]!;
  const factor = units[unit];
  if (factor === undefined)
    throw new WalsimError(
      'invalid_input',
      `invalid value for parameter "${name}": "${text}": unknown unit "${unit}" (valid units: ${unitNames}; units are case-sensitive)`,
    );
  return Math.round(Number(m[1]) * factor);
}

/** checkpoint_timeout: 30s .. 1d, like PostgreSQL. Returns seconds. */
export function parseCheckpointTimeout(text: string): number {
  const s = parseWithUnit('checkpoint_timeout', text, TIME_UNITS_S, 's');
  if (s < 30 || s > 86400)
    throw new WalsimError(
      'invalid_input',
      `${s} s is outside the valid range for parameter "checkpoint_timeout" (30 s .. 86400 s)`,
    );
  return s;
}

/** max_wal_size: at least 2 MB (PostgreSQL also requires 2 segments: checked against the segment size). Returns MB. */
export function parseMaxWalSize(text: string): number {
  const mb = parseWithUnit('max_wal_size', text, MEMORY_UNITS_MB, 'MB');
  if (mb < 2 || mb > 2 ** 31 - 1)
    throw new WalsimError(
      'invalid_input',
      `${mb} MB is outside the valid range for parameter "max_wal_size" (2 MB .. ${2 ** 31 - 1} MB)`,
    );
  return mb;
}

/** wal_keep_size: 0 or more MB. Returns MB. */
export function parseWalKeepSize(text: string): number {
  const mb = parseWithUnit('wal_keep_size', text, MEMORY_UNITS_MB, 'MB');
  if (mb > 2 ** 31 - 1)
    throw new WalsimError(
      'invalid_input',
      `${mb} MB is outside the valid range for parameter "wal_keep_size" (0 .. ${2 ** 31 - 1} MB)`,
    );
  return mb;
}

/** SHOW's form of a MB setting: the largest unit that divides it (1GB, 20GB, 80MB, 0). */
export function formatMb(mb: number): string {
  if (mb === 0) return '0';
  if (mb % (1024 * 1024) === 0) return `${mb / (1024 * 1024)}TB`;
  if (mb % 1024 === 0) return `${mb / 1024}GB`;
  return `${mb}MB`;
}

/** SHOW's form of a seconds setting (5min, 30min, 1h, 45s). */
export function formatSeconds(s: number): string {
  if (s % 86400 === 0) return `${s / 86400}d`;
  if (s % 3600 === 0) return `${s / 3600}h`;
  if (s % 60 === 0) return `${s / 60}min`;
  return `${s}s`;
}
