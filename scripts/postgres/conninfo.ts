/**
 * libpq connection strings, both forms (libpq's fe-connect.c `conninfo_uri_parse_options` and
 * `conninfo_parse`): the URI `postgresql://[user[:password]@][host][:port][/dbname][?k=v&…]`
 * (percent-encoding in every part) and keyword/value `host=… port=… password='a b'` (values
 * quoted with single quotes, a backslash escaping the next character) — the form
 * `primary_conninfo` uses. Parsed into libpq keywords, turned into a node-postgres config (so
 * node-postgres never parses a string itself: no sslmode warning, keyword/value accepted), and the
 * one redaction every output of a CLI that takes a connection string goes through.
 *
 * Entry points: `parseConninfo`, `pgClientConfig`, `redact`, `rememberSecrets`, `redactConninfo`,
 * `Conninfo`.
 *
 * Redaction is structural and literal: every URI's password and every `password=` /
 * `sslpassword=` value in a text is replaced by `***`, and every password of a connection string
 * this process parsed is replaced wherever it appears (raw, percent-encoded, JSON-escaped) — an
 * error from a library that quotes it, a password containing `@` that a URI cut early. A secret
 * shorter than 4 characters is redacted only structurally (replacing "ab" everywhere would
 * mangle every message).
 */
import * as fs from 'node:fs';
import type pg from 'pg';
import { WalsimError } from '../../common/errors.ts';

/** A parsed connection string: libpq keywords (decoded values) and which form it was. */
export interface Conninfo {
  form: 'uri' | 'keyword';
  params: Record<string, string>;
}

/** libpq's connection keywords (PQconndefaults, PostgreSQL 15). */
const KEYWORDS = new Set([
  'host',
  'hostaddr',
  'port',
  'dbname',
  'user',
  'password',
  'passfile',
  'channel_binding',
  'connect_timeout',
  'client_encoding',
  'options',
  'application_name',
  'fallback_application_name',
  'keepalives',
  'keepalives_idle',
  'keepalives_interval',
  'keepalives_count',
  'tcp_user_timeout',
  'replication',
  'gssencmode',
  'sslmode',
  'requiressl',
  'sslcompression',
  'sslcert',
  'sslkey',
  'sslpassword',
  'sslrootcert',
  'sslcrl',
  'sslcrldir',
  'sslsni',
  'requirepeer',
  'ssl_min_protocol_version',
  'ssl_max_protocol_version',
  'krbsrvname',
  'gsslib',
  'service',
  'target_session_attrs',
]);
const SECRET_KEYWORDS = new Set(['password', 'sslpassword']);
const URI_PREFIX = /^postgres(?:ql)?:\/\//;

const secrets = new Set<string>();

function bad(what: string, text: string, why: string): WalsimError {
  return new WalsimError(
    'invalid_input',
    `${what} ${JSON.stringify(redactConninfo(text))}: ${why} (libpq forms: postgresql://user@host:port/dbname or 'host=… port=… user=…')`,
  );
}

/** libpq's conninfo_uri_decode: %XX only, no %00. */
function decode(s: string, what: string, text: string): string {
  if (!/^(?:[^%]|%[0-9A-Fa-f]{2})*$/.test(s))
    throw bad(what, text, `invalid percent-encoded token "${redactConninfo(s)}"`);
  if (/%00/.test(s)) throw bad(what, text, 'forbidden value %00 in percent-encoded value');
  return Buffer.from(
    s.replace(/%([0-9A-Fa-f]{2})/g, (_m, h: string) => String.fromCharCode(parseInt(h, 16))),
    'latin1',
  ).toString('utf8');
}

function store(params: Record<string, string>, k: string, v: string, what: string, text: string) {
  if (!KEYWORDS.has(k)) throw bad(what, text, `invalid connection option "${k}"`);
  params[k] = v;
}

/**
 * A connection string in either libpq form; `what` names it in errors (`--standby`). Throws one
 * line saying what is wrong, with the string redacted.
 */
export function parseConninfo(text: string, what = 'connection string'): Conninfo {
  const c = URI_PREFIX.test(text) ? parseUri(text, what) : parseKeywords(text, what);
  for (const k of SECRET_KEYWORDS) if (c.params[k] !== undefined) secrets.add(c.params[k]!);
  return c;
}

/** conninfo_uri_parse_options: userinfo ends at the first '@' before any '/'. */
function parseUri(text: string, what: string): Conninfo {
  const params: Record<string, string> = {};
  let rest = text.replace(URI_PREFIX, '');
  const at = rest.search(/[@/]/);
  if (at >= 0 && rest[at] === '@') {
    const userinfo = rest.slice(0, at);
    const colon = userinfo.indexOf(':');
    const user = colon < 0 ? userinfo : userinfo.slice(0, colon);
    if (user !== '') params.user = decode(user, what, text);
    if (colon >= 0) params.password = decode(userinfo.slice(colon + 1), what, text);
    rest = rest.slice(at + 1);
  }
  const q = rest.indexOf('?');
  const query = q < 0 ? '' : rest.slice(q + 1);
  if (q >= 0) rest = rest.slice(0, q);
  const slash = rest.indexOf('/');
  const netloc = slash < 0 ? rest : rest.slice(0, slash);
  const db = slash < 0 ? '' : rest.slice(slash + 1);
  if (db !== '') params.dbname = decode(db, what, text);
  const hosts: string[] = [];
  const ports: string[] = [];
  for (const h of netloc === '' ? [] : netloc.split(',')) {
    const m = /^(\[[^\]]*\]|[^:[\]]*)(?::(.*))?$/.exec(h);
    if (m === null) throw bad(what, text, `invalid host "${h}"`);
    hosts.push(decode(m[1]!.replace(/^\[(.*)\]$/, '$1'), what, text));
    ports.push(m[2] === undefined ? '' : decode(m[2], what, text));
  }
  if (hosts.some((h) => h !== '')) params.host = hosts.join(',');
  if (ports.some((p) => p !== '')) params.port = ports.join(',');
  for (const kv of query === '' ? [] : query.split('&')) {
    const eq = kv.indexOf('=');
    if (eq < 0) throw bad(what, text, `missing key/value separator "=" in URI query parameter`);
    let k = decode(kv.slice(0, eq), what, text);
    let v = decode(kv.slice(eq + 1), what, text);
    if (k === 'ssl' && v === 'true') [k, v] = ['sslmode', 'require']; // libpq's JDBC alias
    store(params, k, v, what, text);
  }
  return { form: 'uri', params };
}

/** conninfo_parse: `keyword = value`, values unquoted (backslash escapes) or in single quotes. */
function parseKeywords(text: string, what: string): Conninfo {
  const params: Record<string, string> = {};
  let i = 0;
  const n = text.length;
  const space = (ch: string | undefined) => ch !== undefined && /\s/.test(ch);
  for (;;) {
    while (space(text[i])) i++;
    if (i >= n) break;
    let k = '';
    while (i < n && text[i] !== '=' && !space(text[i])) k += text[i++];
    while (space(text[i])) i++;
    if (text[i] !== '=')
      throw bad(
        what,
        text,
        `missing "=" after "${k}" (not a postgresql:// URI, so it is read as keyword=value)`,
      );
    i++;
    while (space(text[i])) i++;
    let v = '';
    if (text[i] !== "'") {
      while (i < n && !space(text[i])) {
        if (text[i] === '\\') i++;
        if (i < n) v += text[i++];
      }
    } else {
      i++;
      for (;;) {
        if (i >= n) throw bad(what, text, 'unterminated quoted string');
        if (text[i] === '\\') {
          i++;
          if (i < n) v += text[i++];
        } else if (text[i] === "'") {
          i++;
          break;
        } else v += text[i++];
      }
    }
    store(params, k, v, what, text);
  }
  if (Object.keys(params).length === 0) throw bad(what, text, 'empty');
  return { form: 'keyword', params };
}

/** Read a file a keyword names (sslcert …), with one line when it cannot be read. */
function readKeywordFile(k: string, file: string): string {
  try {
    return fs.readFileSync(file, 'utf8');
  } catch (e) {
    throw new WalsimError(
      'invalid_input',
      `${k}=${file} cannot be read (${(e as NodeJS.ErrnoException).code ?? (e as Error).message})`,
    );
  }
}

/**
 * libpq's sslmode in node-postgres's terms. disable, allow and prefer: no TLS (node-postgres cannot
 * fall back from TLS to plain as libpq's prefer does); require: TLS without verification (verify-ca
 * when sslrootcert is given, as libpq); verify-ca: the chain, not the name; verify-full: both.
 */
function sslConfig(p: Record<string, string>): pg.ClientConfig['ssl'] {
  const mode = p.sslmode ?? (p.requiressl === '1' ? 'require' : 'prefer');
  const modes = ['disable', 'allow', 'prefer', 'require', 'verify-ca', 'verify-full'];
  if (!modes.includes(mode))
    throw new WalsimError(
      'invalid_input',
      `invalid sslmode value: "${mode}" (one of ${modes.join(', ')})`,
    );
  if (mode === 'disable' || mode === 'allow' || mode === 'prefer') return false;
  const tls: Exclude<pg.ClientConfig['ssl'], boolean | undefined> = {};
  if (p.sslrootcert !== undefined && p.sslrootcert !== 'system')
    tls.ca = readKeywordFile('sslrootcert', p.sslrootcert);
  if (p.sslcert !== undefined) tls.cert = readKeywordFile('sslcert', p.sslcert);
  if (p.sslkey !== undefined) tls.key = readKeywordFile('sslkey', p.sslkey);
  if (p.sslpassword !== undefined) tls.passphrase = p.sslpassword;
  if (mode === 'require' && tls.ca === undefined) tls.rejectUnauthorized = false;
  else if (mode !== 'verify-full') tls.checkServerIdentity = () => undefined;
  return tls;
}

/**
 * The node-postgres config of a parsed connection string. One host only (node-postgres has no
 * host list); `options` is appended to the caller's (`-c …` settings).
 */
export function pgClientConfig(
  c: Conninfo,
  base: { application_name: string; options?: string; connectTimeoutS: number },
): pg.ClientConfig {
  const p = c.params;
  const host = p.host ?? p.hostaddr;
  if (host?.includes(',') || p.port?.includes(','))
    throw new WalsimError(
      'invalid_input',
      `several hosts (${host}) in one connection string: give one host and port`,
    );
  if (p.service !== undefined)
    throw new WalsimError(
      'invalid_input',
      `service=${p.service}: connection service files are not read here; give host, port, user and dbname`,
    );
  const port = p.port === undefined ? undefined : Number(p.port);
  if (port !== undefined && (!Number.isInteger(port) || port < 1 || port > 65535))
    throw new WalsimError('invalid_input', `invalid port number: "${p.port}"`);
  if (p.passfile !== undefined && p.password === undefined) process.env.PGPASSFILE = p.passfile;
  const timeoutS =
    p.connect_timeout === undefined ? base.connectTimeoutS : Number(p.connect_timeout);
  if (!Number.isFinite(timeoutS) || timeoutS < 0)
    throw new WalsimError('invalid_input', `invalid connect_timeout: "${p.connect_timeout}"`);
  const options = [base.options, p.options].filter((o) => o !== undefined).join(' ');
  return {
    host,
    port,
    user: p.user,
    password: p.password,
    database: p.dbname,
    application_name: p.application_name ?? base.application_name,
    ...(options === '' ? {} : { options }),
    ...(p.client_encoding === undefined ? {} : { client_encoding: p.client_encoding }),
    // libpq: 0 = wait forever, and anything under 2 s is 2 s.
    connectionTimeoutMillis: timeoutS === 0 ? 0 : Math.max(2, timeoutS) * 1000,
    ssl: sslConfig(p),
    keepAlive: p.keepalives !== '0',
  };
}

/** The last '@' of a URI's userinfo, generously: a password may hold '@' (and libpq cuts it). */
function userinfoEnd(rest: string): number {
  const slash = rest.indexOf('/');
  const head = slash < 0 ? rest : rest.slice(0, slash);
  if (head.includes('@')) return head.lastIndexOf('@');
  // No '@' before the first '/': a password holding '/' ("u:a/b@host"), when "user:" starts it.
  if (/^[^@/:]*:/.test(rest)) return rest.lastIndexOf('@');
  return -1;
}

/** One URI with its password and `password=` / `sslpassword=` query values hidden. */
function redactUri(uri: string): string {
  const prefix = URI_PREFIX.exec(uri)![0];
  let rest = uri.slice(prefix.length);
  const at = userinfoEnd(rest);
  let out = prefix;
  if (at >= 0) {
    const userinfo = rest.slice(0, at);
    const colon = userinfo.indexOf(':');
    out += colon < 0 ? userinfo : `${userinfo.slice(0, colon)}:***`;
    out += '@';
    rest = rest.slice(at + 1);
  }
  const q = rest.indexOf('?');
  if (q < 0) return out + rest;
  const query = rest
    .slice(q + 1)
    .split('&')
    .map((kv) => {
      const eq = kv.indexOf('=');
      let k = kv.slice(0, eq < 0 ? kv.length : eq);
      try {
        k = decodeURIComponent(k);
      } catch {
        /* keep it as written */
      }
      return eq >= 0 && SECRET_KEYWORDS.has(k.toLowerCase()) ? `${kv.slice(0, eq)}=***` : kv;
    });
  return `${out}${rest.slice(0, q)}?${query.join('&')}`;
}

const URI_IN_TEXT = /postgres(?:ql)?:\/\/[^\s'"`<>]*/g;
const KEYWORD_SECRET = /\b((?:ssl)?password)(\s*=\s*)('(?:[^'\\]|\\.)*'?|(?:[^\s\\]|\\.)*)/gi;

/** A text with every connection string's secrets hidden (structural only: no remembered secrets). */
export function redactConninfo(text: string): string {
  let out = '';
  let last = 0;
  for (const m of text.matchAll(URI_IN_TEXT)) {
    out += text.slice(last, m.index).replace(KEYWORD_SECRET, '$1$2***');
    out += redactUri(m[0]);
    last = m.index + m[0].length;
  }
  return out + text.slice(last).replace(KEYWORD_SECRET, '$1$2***');
}

/**
 * Remember a connection string's passwords, so `redact` hides them wherever they appear: the one
 * libpq reads and, in a URI, everything up to the last '@' of the userinfo (a password holding an
 * unencoded '@' is cut by libpq at the first one; its tail would otherwise show as the host).
 */
export function rememberSecrets(text: string): void {
  try {
    parseConninfo(text);
  } catch {
    /* unparsable: the generous reading below still applies */
  }
  if (!URI_PREFIX.test(text)) return;
  const rest = text.replace(URI_PREFIX, '');
  const at = userinfoEnd(rest);
  const colon = rest.indexOf(':');
  if (at < 0 || colon < 0 || colon > at) return;
  const pw = rest.slice(colon + 1, at);
  secrets.add(pw);
  try {
    secrets.add(decodeURIComponent(pw));
  } catch {
    /* not percent-decodable: the raw form is remembered */
  }
  for (const part of pw.split('@')) if (part.length >= 4) secrets.add(part);
}

/**
 * Everything a CLI prints or writes: connection-string secrets hidden structurally, and every
 * remembered password (raw, percent-encoded, JSON-escaped) wherever it appears.
 */
export function redact(text: string): string {
  let out = redactConninfo(text);
  for (const s of secrets) {
    if (s.length < 4) continue;
    for (const form of new Set([s, encodeURIComponent(s), JSON.stringify(s).slice(1, -1)]))
      out = out.split(form).join('***');
  }
  return out;
}

/** `redact` applied to every string inside a value (for `--json` and logs: JSON stays valid). */
export function redactValue<T>(v: T): T {
  if (typeof v === 'string') return redact(v) as T;
  if (Array.isArray(v)) return v.map((x: unknown) => redactValue(x)) as T;
  if (typeof v === 'object' && v !== null)
    return Object.fromEntries(
      Object.entries(v as Record<string, unknown>).map(([k, x]) => [k, redactValue(x)]),
    ) as T;
  return v;
}
