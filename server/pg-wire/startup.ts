/**
 * The start-up packet (postmaster.c ProcessStartupPacket): which request it is (SSLRequest,
 * GSSENCRequest, CancelRequest or a start-up message) and, for a start-up message, its checked
 * parameters: protocol 3.x, a user, no replication, `options` read as pg_split_opts reads them.
 * Also the ParameterStatus values every session reports.
 */
import {
  BodyReader,
  CANCEL_REQUEST_CODE,
  FatalError,
  GSSENC_REQUEST_CODE,
  protocolViolation,
  SSL_REQUEST_CODE,
} from './framing.ts';
import { PG_SERVER_VERSION } from '../settings.ts';

/** The start-up packet's parameters (pairs of NUL-terminated strings, then a NUL). */
export function parseStartupParameters(body: Buffer): Map<string, string> {
  if (body.length === 0 || body[body.length - 1] !== 0)
    throw protocolViolation('invalid startup packet layout: expected terminator as last byte');
  const r = new BodyReader(body.subarray(0, body.length - 1), 'startup');
  const params = new Map<string, string>();
  let left = body.length - 1;
  while (left > 0) {
    const name = r.cstring();
    const value = r.cstring();
    params.set(name, value);
    left -= Buffer.byteLength(name) + Buffer.byteLength(value) + 2;
  }
  return params;
}

export function isLoopback(address: string | undefined): boolean {
  if (address === undefined) return false;
  return address === '::1' || address.startsWith('127.') || address.startsWith('::ffff:127.');
}

/** The ParameterStatus values every session reports (GUC_REPORT), in PostgreSQL's order. */
export const FIXED_PARAMETERS: Array<[string, string]> = [
  ['client_encoding', 'UTF8'],
  ['DateStyle', 'ISO, MDY'],
  ['default_transaction_read_only', 'off'],
  ['integer_datetimes', 'on'],
  ['IntervalStyle', 'postgres'],
  ['is_superuser', 'on'],
  ['server_encoding', 'UTF8'],
  ['server_version', PG_SERVER_VERSION],
  ['standard_conforming_strings', 'on'],
  ['TimeZone', 'UTC'],
];
export const REPORTED_PARAMETERS = new Map(FIXED_PARAMETERS.map(([k, v]) => [k.toLowerCase(), v]));

/**
 * The `-c name=value` / `--name=value` settings of a start-up packet's `options` (pg_split_opts:
 * words split at unescaped whitespace, `\` escapes the next character; process_postgres_switches).
 * Any other switch is refused as PostgreSQL refuses it.
 */
export function sessionOptions(options: string): Array<[string, string]> {
  const words: string[] = [];
  let word: string | null = null;
  for (let i = 0; i < options.length; i++) {
    const c = options[i]!;
    if (/\s/.test(c)) {
      if (word !== null) words.push(word);
      word = null;
    } else word = (word ?? '') + (c === '\\' && i + 1 < options.length ? options[++i]! : c);
  }
  if (word !== null) words.push(word);
  const out: Array<[string, string]> = [];
  for (let i = 0; i < words.length; i++) {
    let setting = words[i]!;
    if (setting === '-c' && i + 1 < words.length) setting = words[++i]!;
    else if (setting.startsWith('-c')) setting = setting.slice(2);
    else if (setting.startsWith('--')) setting = setting.slice(2);
    else
      throw new FatalError(
        '42601',
        `invalid command-line argument for server process: ${setting} (walsim accepts -c name=value in options)`,
      );
    const eq = setting.indexOf('=');
    if (eq <= 0)
      throw new FatalError(
        '42601',
        `-c ${setting} requires a value (walsim accepts -c name=value in options)`,
      );
    out.push([setting.slice(0, eq).toLowerCase().replace(/-/g, '_'), setting.slice(eq + 1)]);
  }
  return out;
}

/** PostgreSQL's encoding names (pg_encname_tbl), cleaned as clean_encoding_name does. */
const PG_ENCODINGS = new Map<string, string>([
  ...['utf8', 'unicode'].map((n): [string, string] => [n, 'UTF8']),
  ['sqlascii', 'SQL_ASCII'],
  ...[1, 2, 3, 4, 5, 6, 7, 8, 9, 10].map((i): [string, string] => [`latin${i}`, `LATIN${i}`]),
  ...[5, 6, 7, 8].map((i): [string, string] => [`iso8859${i}`, `ISO_8859_${i}`]),
  ...[866, 874, 1250, 1251, 1252, 1253, 1254, 1255, 1256, 1257, 1258].map((i): [string, string] => [
    `win${i}`,
    `WIN${i}`,
  ]),
  ...['eucjp', 'euccn', 'euckr', 'euctw', 'eucjis2004', 'sjis', 'shiftjis2004', 'big5'].map(
    (n): [string, string] => [n, n.toUpperCase()],
  ),
  ...['gbk', 'gb18030', 'uhc', 'johab', 'koi8r', 'koi8u', 'muleinternal'].map(
    (n): [string, string] => [n, n.toUpperCase()],
  ),
]);

/**
 * The start-up packet's client_encoding, as PostgreSQL takes it (check_client_encoding, then
 * InitializeClientEncoding): an unknown name is FATAL 22023; UTF8 and SQL_ASCII need no
 * conversion from walsim's UTF8 and are reported as named; any other encoding would need one,
 * which walsim does not have: FATAL 0A000 with PostgreSQL's words for a missing conversion
 * (PostgreSQL itself converts LATIN1 and the others; server/README.md says so).
 */
export function clientEncodingOf(value: string | undefined): string {
  if (value === undefined) return 'UTF8';
  const name = PG_ENCODINGS.get(value.toLowerCase().replace(/[^a-z0-9]/g, ''));
  if (name === undefined)
    throw new FatalError('22023', `invalid value for parameter "client_encoding": "${value}"`);
  if (name !== 'UTF8' && name !== 'SQL_ASCII')
    throw new FatalError('0A000', `conversion between ${name} and UTF8 is not supported`);
  return name;
}

/** What a start-up packet asks for. */
export type StartupRequest =
  | { kind: 'ssl' }
  | { kind: 'gssenc' }
  | { kind: 'cancel'; pid: number; secretKey: number }
  | {
      kind: 'startup';
      minor: number;
      user: string;
      applicationName: string;
      /** client_encoding as reported (UTF8 or SQL_ASCII: no conversion from UTF8 either way). */
      clientEncoding: string;
      /** `_pq_.` protocol options: walsim knows none (NegotiateProtocolVersion lists them). */
      unrecognized: string[];
    };

/** Read and check a start-up packet; what PostgreSQL refuses is a FatalError. */
export function readStartupPacket(packet: Buffer): StartupRequest {
  const len = packet.length;
  const requestCode = packet.readInt32BE(4);
  if (requestCode === SSL_REQUEST_CODE || requestCode === GSSENC_REQUEST_CODE) {
    const kind = requestCode === SSL_REQUEST_CODE ? 'ssl' : 'gssenc';
    if (len !== 8)
      throw protocolViolation(`invalid length of ${kind.toUpperCase()} request packet: ${len}`);
    return { kind };
  }
  if (requestCode === CANCEL_REQUEST_CODE) {
    if (len !== 16) throw protocolViolation(`invalid length of cancel request packet: ${len}`);
    return { kind: 'cancel', pid: packet.readInt32BE(8), secretKey: packet.readInt32BE(12) };
  }
  const major = requestCode >>> 16;
  const minor = requestCode & 0xffff;
  if (major !== 3)
    throw new FatalError(
      '0A000',
      `unsupported frontend protocol ${major}.${minor}: server supports 3.0 to 3.0`,
    );
  const params = parseStartupParameters(packet.subarray(8));
  const user = params.get('user') ?? '';
  if (user === '')
    throw new FatalError('28000', 'no PostgreSQL user name specified in startup packet');
  let applicationName = params.get('application_name') ?? '';
  for (const [name, value] of sessionOptions(params.get('options') ?? '')) {
    if (name === 'application_name') applicationName = value;
    else if (REPORTED_PARAMETERS.get(name)?.toLowerCase() !== value.toLowerCase())
      throw new FatalError(
        '0A000',
        `walsim cannot apply "-c ${name}=${value}" from the start-up packet's options: its sessions have no settings of their own (application_name is applied; others only if equal to the node's value)`,
      );
  }
  const replication = (params.get('replication') ?? 'false').toLowerCase();
  if (!['false', 'off', 'no', '0'].includes(replication)) {
    throw new FatalError(
      '0A000',
      "walsim does not accept replication connections on its PostgreSQL port: its standbys stream over walsim's own replication endpoint (pg_basebackup, pg_receivewal and logical replication are not supported)",
    );
  }
  const unrecognized = [...params.keys()].filter((k) => k.startsWith('_pq_.'));
  const clientEncoding = clientEncodingOf(params.get('client_encoding'));
  return { kind: 'startup', minor, user, applicationName, clientEncoding, unrecognized };
}
