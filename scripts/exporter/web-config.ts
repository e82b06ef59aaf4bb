/**
 * Who may scrape: the `--web-config` file, in the form Prometheus exporters read (exporter-toolkit's
 * web configuration: YAML, `basic_auth_users: {name: bcrypt hash}`), plus walsim's
 * `bearer_tokens: [bcrypt hash, …]` for `Authorization: Bearer TOKEN`. Only hashes are stored.
 * `tls_server_config` is refused (terminate TLS in front of the exporter) and so is any other key,
 * so a file meant to restrict access never silently restricts nothing.
 *
 * Entry points: `loadWebConfig`, `parseWebConfig`, `WebAuth`, `isLoopbackHost`, `parseListen`.
 */
import { createHash } from 'node:crypto';
import * as fs from 'node:fs';
import * as net from 'node:net';
import bcrypt from 'bcryptjs';
import { parse as parseYaml } from 'yaml';
import { WalsimError } from '../../common/errors.ts';

const BCRYPT = /^\$2[aby]\$\d\d\$[./A-Za-z0-9]{53}$/;

export interface WebConfig {
  basicAuthUsers: Map<string, string>;
  bearerTokens: string[];
}

const bad = (file: string, what: string) =>
  new WalsimError('invalid_input', `--web-config ${file}: ${what}`);

/** The parsed file; every mistake is one message naming the file and the key. */
export function parseWebConfig(text: string, file: string): WebConfig {
  let doc: unknown;
  try {
    doc = parseYaml(text);
  } catch (e) {
    throw bad(file, `not YAML (${(e as Error).message.split('\n')[0]})`);
  }
  if (doc === null || typeof doc !== 'object' || Array.isArray(doc))
    throw bad(file, 'expected a mapping with basic_auth_users and/or bearer_tokens');
  const out: WebConfig = { basicAuthUsers: new Map(), bearerTokens: [] };
  for (const [k, v] of Object.entries(doc as Record<string, unknown>)) {
    if (k === 'basic_auth_users') {
      if (v === null || typeof v !== 'object' || Array.isArray(v))
        throw bad(file, 'basic_auth_users must map user names to bcrypt hashes');
      for (const [user, hash] of Object.entries(v as Record<string, unknown>)) {
        if (typeof hash !== 'string' || !BCRYPT.test(hash))
          throw bad(
            file,
            `basic_auth_users.${user} is not a bcrypt hash ($2y$10$…, 60 characters)`,
          );
        out.basicAuthUsers.set(user, hash);
      }
    } else if (k === 'bearer_tokens') {
      if (!Array.isArray(v)) throw bad(file, 'bearer_tokens must be a list of bcrypt hashes');
      v.forEach((hash, i) => {
        if (typeof hash !== 'string' || !BCRYPT.test(hash))
          throw bad(file, `bearer_tokens[${i}] is not a bcrypt hash ($2y$10$…, 60 characters)`);
        out.bearerTokens.push(hash);
      });
    } else if (k === 'tls_server_config')
      throw bad(file, 'tls_server_config is not supported: terminate TLS in front of the exporter');
    else throw bad(file, `unknown key "${k}" (known: basic_auth_users, bearer_tokens)`);
  }
  if (out.basicAuthUsers.size === 0 && out.bearerTokens.length === 0)
    throw bad(file, 'no credentials: give basic_auth_users or bearer_tokens');
  return out;
}

export function loadWebConfig(file: string): WebConfig {
  let text: string;
  try {
    text = fs.readFileSync(file, 'utf8');
  } catch (e) {
    throw bad(
      file,
      `cannot read it (${(e as NodeJS.ErrnoException).code ?? (e as Error).message})`,
    );
  }
  return parseWebConfig(text, file);
}

/**
 * Checks an Authorization header. bcrypt is slow on purpose (~0.1 s a check in JavaScript), so a
 * credential that passed once is remembered by its SHA-256 (as exporter-toolkit caches).
 */
export class WebAuth {
  private readonly passed = new Set<string>();
  constructor(private readonly config: WebConfig) {}

  async allows(authorization: string | undefined): Promise<boolean> {
    if (authorization === undefined) return false;
    const key = createHash('sha256').update(authorization).digest('hex');
    if (this.passed.has(key)) return true;
    const ok = await this.check(authorization);
    if (ok && this.passed.size < 1024) this.passed.add(key);
    return ok;
  }

  private async check(authorization: string): Promise<boolean> {
    const m = /^(Basic|Bearer)\s+(\S+)$/i.exec(authorization.trim());
    if (m === null) return false;
    if (m[1]!.toLowerCase() === 'bearer') {
      for (const h of this.config.bearerTokens) if (await bcrypt.compare(m[2]!, h)) return true;
      return false;
    }
    const decoded = Buffer.from(m[2]!, 'base64').toString('utf8');
    const colon = decoded.indexOf(':');
    if (colon < 0) return false;
    const hash = this.config.basicAuthUsers.get(decoded.slice(0, colon));
    return hash !== undefined && bcrypt.compare(decoded.slice(colon + 1), hash);
  }
}

/** 127.0.0.0/8, ::1, localhost. */
export function isLoopbackHost(host: string): boolean {
  if (host === 'localhost' || host === '::1') return true;
  return net.isIPv4(host) && host.startsWith('127.');
}

/** `HOST:PORT`, `[V6]:PORT` or `:PORT` (every interface) → host and port. */
export function parseListen(text: string): { host: string; port: number } {
  const m = /^(?:\[([^\]]+)\]|([^:[\]]*)):(\d+)$/.exec(text.trim());
  const port = m === null ? NaN : Number(m[3]);
  if (m === null || !Number.isInteger(port) || port < 0 || port > 65535)
    throw new WalsimError(
      'invalid_input',
      `--listen "${text}" is not HOST:PORT (e.g. 127.0.0.1:9187, [::1]:9187, 0.0.0.0:9187)`,
    );
  const host = m[1] ?? m[2]!;
  return { host: host === '' ? '0.0.0.0' : host, port };
}
