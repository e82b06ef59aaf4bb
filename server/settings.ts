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
export const SYNCHRONOUS_COMMIT_VALUES: readonly SynchronousCommit[] = ['off', 'local', 'remote_write', 'on', 'remote_apply'];

export { DROP_STRATEGIES, type DropStrategy } from '../storage/drop.ts';

export function parseSynchronousCommit(text: string): SynchronousCommit {
  if ((SYNCHRONOUS_COMMIT_VALUES as readonly string[]).includes(text)) return text as SynchronousCommit;
  throw new WalsimError(
    'invalid_input',
    `invalid value for parameter "synchronous_commit": "${text}" (accepted: ${SYNCHRONOUS_COMMIT_VALUES.join(', ')})`,
  );
}

export function parseDropStrategy(text: string): DropStrategy {
  if ((DROP_STRATEGIES as readonly string[]).includes(text)) return text as DropStrategy;
  throw new WalsimError('invalid_input', `invalid drop strategy "${text}" (accepted: ${DROP_STRATEGIES.join(', ')})`);
}

/** primary_conninfo, as far as walsim's walreceiver uses it. */
export interface Conninfo { host: string | null; port: number | null; applicationName: string | null }

const CONNINFO_KEYS = ['host', 'hostaddr', 'port', 'application_name', 'user', 'dbname', 'password', 'sslmode', 'connect_timeout'];

/**
 * Parse a libpq keyword/value connection string (`host=127.0.0.1 port=5433 application_name=s2`;
 * values may be single-quoted with \' and \\ escapes). Unknown keywords are refused as libpq does
 * ("invalid connection option"); walsim uses host, port and application_name.
 */
export function parseConninfo(text: string): Conninfo {
  const out: Conninfo = { host: null, port: null, applicationName: null };
  let i = 0;
  const bad = (why: string): never => {
    throw new WalsimError('invalid_input', `invalid value for parameter "primary_conninfo": "${text}" (${why})`);
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
        if (c === '\\') { value += text[i + 1] ?? ''; i += 2; continue; }
        if (c === "'") { i++; break; }
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
  const q = (v: string) => (/^[^\s'\\]+$/.test(v) ? v : `'${v.replace(/\\/g, '\\\\').replace(/'/g, "\\'")}'`);
  const parts: string[] = [];
  if (c.host !== null) parts.push(`host=${q(c.host)}`);
  if (c.port !== null) parts.push(`port=${c.port}`);
  if (c.applicationName !== null) parts.push(`application_name=${q(c.applicationName)}`);
  return parts.join(' ');
}
