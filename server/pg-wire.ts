/**
 * The PostgreSQL wire protocol (3.0) on every node, so psql, libpq and node-postgres connect to
 * walsim as to a PostgreSQL 15 server. Entry point: `startPgWireServer`.
 *
 * Who does what. pg-gateway's `PostgresConnection` handles the start-up packet, the SSLRequest
 * refusal ('N'), md5 password authentication (challenge, check, 28P01) and encodes ErrorResponse,
 * ParameterStatus and ReadyForQuery. pg-gateway 0.2.4 cannot do the rest, so walsim does it here:
 * - SCRAM-SHA-256 authentication (0.2.4 has no SASL), PostgreSQL 14+'s default;
 * - a frame guard in front of it: every message's length is checked against a limit before any of
 *   it is buffered, and start-up packets must be well formed (pg-gateway has no size limit, loops
 *   forever on a zero-length start-up packet and reads past unterminated strings);
 * - GSSENCRequest ('N'), CancelRequest, protocol versions other than 3.0 (3.x > 0 gets a
 *   NegotiateProtocolVersion like PostgreSQL's; other majors a FATAL 0A000);
 * - the post-authentication messages PostgreSQL sends (ParameterStatus, BackendKeyData);
 * - the simple query protocol (0.2.4 answers every Query "not implemented" and never calls its
 *   `onQuery`) and the extended protocol for parameterless statements (Parse, Bind, Describe,
 *   Execute, Close, Sync, Flush), which node-postgres uses for named/row-mode queries.
 *
 * Statements run through `PgWireBackend.execute`, which the process shell binds to the same
 * `ServerNode.execute` the control endpoint calls; result columns come from `describeStatement`,
 * so names and types are PostgreSQL's (count int8, LSNs pg_lsn, booleans t/f).
 *
 * Invariants: INV-WIRE-1 a statement's result has exactly the columns Describe announced;
 * INV-WIRE-2 a session handles one message at a time, in arrival order, and reads nothing more from
 * its socket while it does (the socket is paused), so a client cannot queue unbounded work.
 */
import * as net from 'node:net';
import {
  createHash,
  createHmac,
  pbkdf2Sync,
  randomBytes,
  randomInt,
  timingSafeEqual,
} from 'node:crypto';
import {
  hashMd5Password,
  PostgresConnection,
  type BackendError,
  type PostgresConnectionOptions,
} from 'pg-gateway';
import { assert, InvariantViolation } from '../common/assert.ts';
import { isWalsimError, WalsimError } from '../common/errors.ts';
import type { Notice, QueryResult, SqlValue } from './control-protocol.ts';
import { parseStatement, splitStatements, type Statement } from './sql-parser.ts';
import { describeStatement, type PgTypeName, type ResultColumn } from './sql-functions.ts';
import { PG_SERVER_VERSION } from './settings.ts';
import type { PgPassword } from './cluster-files.ts';

/** What a wire session needs from its node. */
export interface PgWireBackend {
  /** Run one statement (ServerNode.execute); `signal` fires on a cancel request. */
  execute(sql: string, signal: AbortSignal): Promise<QueryResult>;
  inRecovery(): boolean;
  /** True once a shutdown began: new connections get FATAL 57P03. */
  shuttingDown(): boolean;
  log(message: string): void;
  /** A programmer error (InvariantViolation): the process ends, as for the control endpoint. */
  fatal(e: unknown): never;
}

export interface PgWireOptions {
  host: string;
  port: number;
  /** The password every client must give and how (SCRAM-SHA-256 or md5); null = trust, loopback only. */
  password: PgPassword | null;
  backend: PgWireBackend;
  /** max_connections (PostgreSQL's default 100). */
  maxConnections?: number;
  /** authentication_timeout: a client that has not finished start-up by then is cut off. */
  authTimeoutMs?: number;
}

export interface PgWireHandle {
  port: number;
  /** Open sessions (authenticated or authenticating); a smart shutdown waits for them. */
  sessionCount(): number;
  /** Fast shutdown: end every session with FATAL 57P01, stop listening. */
  close(): Promise<void>;
}

// Start-up packet codes (pqcomm.h).
const CANCEL_REQUEST_CODE = 80877102;
const SSL_REQUEST_CODE = 80877103;
const GSSENC_REQUEST_CODE = 80877104;
/** MAX_STARTUP_PACKET_LENGTH in PostgreSQL. */
export const MAX_STARTUP_PACKET_LENGTH = 10000;
/** PQ_SMALL_MESSAGE_LIMIT: every message but the ones carrying SQL text. */
export const SMALL_MESSAGE_LIMIT = 10000;
/** Query, Parse and Bind carry SQL: walsim's statements are short, so 1 MiB (PostgreSQL: 1 GB). */
export const QUERY_MESSAGE_LIMIT = 1 << 20;
/** Prepared statements and portals a session may hold at once. */
const MAX_NAMED_OBJECTS = 1000;
/** Stop reading from a client that does not read our replies once this much is queued. */
const WRITE_HIGH_WATER = 1 << 20;

/** Frontend message types (protocol-message-formats) and the largest body each may have. */
const MESSAGE_LIMITS: Record<string, number> = {
  Q: QUERY_MESSAGE_LIMIT,
  P: QUERY_MESSAGE_LIMIT,
  B: QUERY_MESSAGE_LIMIT,
  D: SMALL_MESSAGE_LIMIT,
  E: SMALL_MESSAGE_LIMIT,
  C: SMALL_MESSAGE_LIMIT,
  S: SMALL_MESSAGE_LIMIT,
  H: SMALL_MESSAGE_LIMIT,
  X: SMALL_MESSAGE_LIMIT,
  F: SMALL_MESSAGE_LIMIT,
  p: SMALL_MESSAGE_LIMIT,
  d: QUERY_MESSAGE_LIMIT,
  c: SMALL_MESSAGE_LIMIT,
  f: SMALL_MESSAGE_LIMIT,
};

/** pg_type OIDs and lengths of walsim's result types. */
const PG_TYPES: Record<PgTypeName, { oid: number; len: number }> = {
  bool: { oid: 16, len: 1 },
  int8: { oid: 20, len: 8 },
  int4: { oid: 23, len: 4 },
  text: { oid: 25, len: -1 },
  void: { oid: 2278, len: 4 },
  pg_lsn: { oid: 3220, len: 8 },
  json: { oid: 114, len: -1 },
};

const code = (c: string) => c.charCodeAt(0);

/** A protocol error that ends the session (FATAL). */
class FatalError extends Error {
  constructor(
    readonly sqlstate: string,
    message: string,
  ) {
    super(message);
  }
}

/** What a backend ended by the postmaster's SIGTERM (fast shutdown) sends. */
function terminated(): FatalError {
  return new FatalError('57P01', 'terminating connection due to administrator command');
}

function protocolViolation(message: string): FatalError {
  return new FatalError('08P01', message);
}

/** Bounds-checked reader of one message body; a malformed body is a protocol violation. */
class BodyReader {
  private off = 0;
  constructor(
    private readonly b: Buffer,
    private readonly what: string,
  ) {}
  private need(n: number): void {
    if (this.off + n > this.b.length)
      throw protocolViolation(`invalid ${this.what} message: ends early`);
  }
  byte(): string {
    this.need(1);
    return String.fromCharCode(this.b[this.off++]!);
  }
  int16(): number {
    this.need(2);
    const v = this.b.readInt16BE(this.off);
    this.off += 2;
    return v;
  }
  int32(): number {
    this.need(4);
    const v = this.b.readInt32BE(this.off);
    this.off += 4;
    return v;
  }
  bytes(n: number): Buffer {
    this.need(n);
    const v = this.b.subarray(this.off, this.off + n);
    this.off += n;
    return v;
  }
  cstring(): string {
    const end = this.b.indexOf(0, this.off);
    if (end < 0)
      throw protocolViolation(`invalid ${this.what} message: string is not NUL-terminated`);
    const v = this.b.toString('utf8', this.off, end);
    this.off = end + 1;
    return v;
  }
  /**
   * A string in the client encoding (UTF8): invalid bytes are an ERROR, as pg_client_to_server's
   * verification makes them (22021), not a protocol violation. The message is read to its end
   * first, so the session goes on after it.
   */
  text(): string | WalsimError {
    const start = this.off;
    const v = this.cstring();
    const bytes = this.b.subarray(start, this.off - 1);
    if (Buffer.from(v, 'utf8').equals(bytes)) return v;
    return invalidEncoding(bytes);
  }
  end(): void {
    if (this.off !== this.b.length)
      throw protocolViolation(
        `invalid ${this.what} message: ${this.b.length - this.off} trailing bytes`,
      );
  }
}

/** The start-up packet's parameters (pairs of NUL-terminated strings, then a NUL). */
const strictUtf8 = new TextDecoder('utf-8', { fatal: true });

/** The length of the UTF-8 sequence a lead byte starts (pg_utf_mblen); 0 for an invalid lead. */
function utf8Length(lead: number): number {
  if (lead < 0x80) return 1;
  if (lead >= 0xc2 && lead < 0xe0) return 2;
  if (lead >= 0xe0 && lead < 0xf0) return 3;
  return lead >= 0xf0 && lead < 0xf5 ? 4 : 0;
}

/** report_invalid_encoding: the first invalid sequence, its bytes as PostgreSQL prints them. */
function invalidEncoding(bytes: Buffer): WalsimError {
  let i = 0;
  while (i < bytes.length) {
    const len = utf8Length(bytes[i]!);
    const seq = bytes.subarray(i, i + Math.max(len, 1));
    let valid = len > 0 && seq.length === len;
    try {
      if (valid) strictUtf8.decode(seq);
    } catch {
      valid = false;
    }
    if (!valid) {
      const shown = [...seq].map((b) => `0x${b.toString(16).padStart(2, '0')}`).join(' ');
      return new WalsimError(
        'invalid_input',
        `invalid byte sequence for encoding "UTF8": ${shown}`,
        '22021',
      );
    }
    i += len;
  }
  return new WalsimError('invalid_input', 'invalid byte sequence for encoding "UTF8"', '22021');
}

function parseStartupParameters(body: Buffer): Map<string, string> {
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

function isLoopback(address: string | undefined): boolean {
  if (address === undefined) return false;
  return address === '::1' || address.startsWith('127.') || address.startsWith('::ffff:127.');
}

/**
 * A SCRAM-SHA-256 verifier (RFC 5802/7677), computed once per server start like the one PostgreSQL
 * stores in pg_authid: salt, iterations, StoredKey, ServerKey.
 */
export interface ScramVerifier {
  salt: Buffer;
  iterations: number;
  storedKey: Buffer;
  serverKey: Buffer;
}

const hmac = (key: Buffer, text: string) => createHmac('sha256', key).update(text).digest();

export function scramVerifier(
  password: string,
  salt = randomBytes(16),
  iterations = 4096,
): ScramVerifier {
  // walsim passes the password through as is (PostgreSQL applies SASLprep, a no-op for ASCII).
  const salted = pbkdf2Sync(password, salt, iterations, 32, 'sha256');
  return {
    salt,
    iterations,
    storedKey: createHash('sha256').update(hmac(salted, 'Client Key')).digest(),
    serverKey: hmac(salted, 'Server Key'),
  };
}

/** One SCRAM-SHA-256 exchange (auth-scram.c): client-first → server-first → client-final → server-final. */
class ScramExchange {
  private clientFirstBare = '';
  private serverFirst = '';
  private nonce = '';
  private gs2Header = '';
  constructor(private readonly verifier: ScramVerifier) {}

  /** SASLInitialResponse: mechanism, then client-first-message. Returns server-first-message. */
  first(body: Buffer): string {
    const r = new BodyReader(body, 'SASLInitialResponse');
    const mechanism = r.cstring();
    if (mechanism !== 'SCRAM-SHA-256') {
      throw new FatalError(
        '28000',
        `client selected an invalid SASL authentication mechanism "${mechanism}" (walsim offers SCRAM-SHA-256 only)`,
      );
    }
    const len = r.int32();
    if (len < 0)
      throw protocolViolation('malformed SCRAM message: the client-first-message is missing');
    const message = r.bytes(len).toString('utf8');
    r.end();
    // gs2-header: "n,," (no channel binding) or "y,," (client could but server does not); "p=" needs TLS.
    const m = /^([ny]),(?:a=[^,]*)?,(n=[^,]*,r=([^,]+)(?:,.*)?)$/.exec(message);
    if (m === null) {
      if (message.startsWith('p='))
        throw new FatalError(
          '28000',
          'channel binding is not supported: walsim has no TLS (connect with channel_binding=disable)',
        );
      throw protocolViolation(
        `malformed SCRAM message: unexpected client-first-message "${message}"`,
      );
    }
    this.gs2Header = message.slice(0, message.length - m[2]!.length);
    this.clientFirstBare = m[2]!;
    this.nonce = m[3]! + randomBytes(18).toString('base64');
    this.serverFirst = `r=${this.nonce},s=${this.verifier.salt.toString('base64')},i=${this.verifier.iterations}`;
    return this.serverFirst;
  }

  /** SASLResponse: client-final-message. Returns server-final-message, or null for a wrong password. */
  final(body: Buffer): string | null {
    const message = body.toString('utf8');
    const m = /^c=([^,]*),r=([^,]*)(?:,.*)?,p=([A-Za-z0-9+/=]+)$/.exec(message);
    if (m === null)
      throw protocolViolation('malformed SCRAM message: unexpected client-final-message');
    if (Buffer.from(m[1]!, 'base64').toString('utf8') !== this.gs2Header)
      throw protocolViolation('malformed SCRAM message: unexpected channel-binding data');
    if (m[2] !== this.nonce)
      throw protocolViolation('malformed SCRAM message: the nonce does not match');
    const withoutProof = message.slice(0, message.lastIndexOf(',p='));
    const authMessage = `${this.clientFirstBare},${this.serverFirst},${withoutProof}`;
    const proof = Buffer.from(m[3]!, 'base64');
    const signature = hmac(this.verifier.storedKey, authMessage);
    if (proof.length !== signature.length) return null;
    const clientKey = Buffer.alloc(proof.length);
    for (let i = 0; i < proof.length; i++) clientKey[i] = proof[i]! ^ signature[i]!;
    if (!timingSafeEqual(createHash('sha256').update(clientKey).digest(), this.verifier.storedKey))
      return null;
    return `v=${hmac(this.verifier.serverKey, authMessage).toString('base64')}`;
  }
}

/** The ParameterStatus values every session reports (GUC_REPORT), in PostgreSQL's order. */
const FIXED_PARAMETERS: Array<[string, string]> = [
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
const REPORTED_PARAMETERS = new Map(FIXED_PARAMETERS.map(([k, v]) => [k.toLowerCase(), v]));

/**
 * The `-c name=value` / `--name=value` settings of a start-up packet's `options` (pg_split_opts:
 * words split at unescaped whitespace, `\` escapes the next character; process_postgres_switches).
 * Any other switch is refused as PostgreSQL refuses it.
 */
function sessionOptions(options: string): Array<[string, string]> {
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

/** pg-gateway's connection with PostgreSQL's post-authentication sequence instead of its own. */
class GatewayConnection extends PostgresConnection {
  afterAuthentication: () => void = () => {};
  override async completeAuthentication(): Promise<void> {
    this.isAuthenticated = true;
    this.sendAuthenticationOk();
    this.afterAuthentication(); // ParameterStatus..., BackendKeyData, ReadyForQuery
  }
}

interface Prepared {
  sql: string;
  /** null: an empty query string (Execute answers EmptyQueryResponse). */
  stmt: Statement | null;
  columns: ResultColumn[];
  /** Declared parameter type OIDs: Bind supplies one value each (walsim's statements use none). */
  paramTypes: number[];
}

/**
 * A bound statement (portalmem.c). A statement without result rows runs to completion at its first
 * Execute and is then done (PORTAL_MULTI_QUERY → PORTAL_DONE: "cannot be run" again); one with
 * rows runs once and each Execute fetches on from `sent` (PORTAL_ONE_SELECT / PORTAL_UTIL_SELECT).
 */
interface Portal {
  prepared: Prepared;
  result: QueryResult | null;
  sent: number;
  done: boolean;
}

type Phase = 'startup' | 'auth' | 'ready' | 'closed';

class PgWireSession {
  readonly secretKey = randomInt(1, 0x7fffffff);
  /** This session's "backend pid" in BackendKeyData: distinct per session, as PostgreSQL's are. */
  readonly backendPid: number;
  private readonly conn: GatewayConnection;
  private phase: Phase = 'startup';
  private buf: Buffer = Buffer.alloc(0);
  private pumping = false;
  private negotiations = 0;
  private user = '';
  private applicationName = '';
  private reportedHotStandby: boolean | null = null;
  /** After an error in the extended protocol, messages are skipped until Sync. */
  private skipTillSync = false;
  private readonly prepared = new Map<string, Prepared>();
  private readonly portals = new Map<string, Portal>();
  private running: AbortController | null = null;
  private readonly authTimer: NodeJS.Timeout;
  /** SCRAM: the exchange in progress, and the start-up packet pg-gateway gets once it succeeds. */
  private scram: ScramExchange | null = null;
  private scramStartup: Buffer | null = null;
  private scramFirstDone = false;

  constructor(
    private readonly socket: net.Socket,
    private readonly server: PgWireServer,
  ) {
    const opts: PostgresConnectionOptions = {
      serverVersion: PG_SERVER_VERSION,
      // SCRAM is done here (pg-gateway 0.2.4 has no SASL): pg-gateway sees the start-up packet only
      // once the exchange succeeded, and then completes authentication without a password.
      authMode: server.opts.password?.passwordEncryption === 'md5' ? 'md5Password' : 'none',
      validateCredentials: async (cred) => {
        const pw = server.opts.password;
        if (cred.authMode !== 'md5Password' || pw === null || pw.passwordEncryption !== 'md5')
          return false;
        const expected = Buffer.from(await hashMd5Password(cred.user, pw.password, cred.salt));
        const given = Buffer.from(cred.hash);
        return expected.length === given.length && timingSafeEqual(expected, given);
      },
    };
    this.backendPid = server.allocatePid();
    this.conn = new GatewayConnection(socket, opts);
    // Our frame guard is the socket's only reader; pg-gateway sees whole, checked messages.
    this.conn.removeSocketHandlers(socket);
    this.conn.afterAuthentication = () => this.afterAuthentication();
    socket.setNoDelay(true);
    socket.on('data', (chunk: Buffer) => this.onData(chunk));
    socket.on('error', () => {});
    socket.on('close', () => this.onClose());
    this.authTimer = setTimeout(() => {
      if (this.phase === 'startup' || this.phase === 'auth')
        this.fatal(new FatalError('08006', 'canceling authentication due to timeout'));
    }, server.opts.authTimeoutMs ?? 60_000);
    this.authTimer.unref();
  }

  get open(): boolean {
    return this.phase !== 'closed';
  }

  /** Cancel request from another connection: interrupt the running statement, if any. */
  cancel(): void {
    this.running?.abort();
  }

  /** Fast shutdown: PostgreSQL's message for a terminated backend. */
  terminate(): void {
    this.fatal(terminated());
  }

  private onData(chunk: Buffer): void {
    if (this.phase === 'closed') return;
    this.buf = this.buf.length === 0 ? chunk : Buffer.concat([this.buf, chunk]);
    // Before authentication a client has nothing to pipeline: a start-up packet and a password.
    if (this.phase !== 'ready' && this.buf.length > 2 * MAX_STARTUP_PACKET_LENGTH) {
      this.fatal(
        protocolViolation(`client sent ${this.buf.length} bytes before authentication completed`),
      );
      return;
    }
    void this.pump();
  }

  private onClose(): void {
    this.phase = 'closed';
    clearTimeout(this.authTimer);
    this.running?.abort();
    this.server.forget(this);
  }

  /** INV-WIRE-2: one message at a time; the socket stays paused while a message is handled. */
  private async pump(): Promise<void> {
    if (this.pumping) return;
    this.pumping = true;
    this.socket.pause();
    try {
      for (;;) {
        const frame = this.nextFrame();
        if (frame === null) break;
        await this.handleFrame(frame);
        if (this.phase === 'closed' || this.socket.writableEnded) break;
        if (this.socket.writableLength > WRITE_HIGH_WATER) {
          await new Promise((r) => {
            this.socket.once('drain', r);
            this.socket.once('close', r);
          });
        }
      }
    } catch (e) {
      if (e instanceof InvariantViolation) this.server.opts.backend.fatal(e);
      if (e instanceof FatalError) this.fatal(e);
      else {
        this.server.opts.backend.log(
          `ERROR:  wire protocol internal error: ${(e as Error).stack ?? String(e)}`,
        );
        this.fatal(new FatalError('XX000', `internal error: ${(e as Error).message}`));
      }
    } finally {
      this.pumping = false;
      if (this.socket.writableEnded) this.phase = 'closed';
      if (this.phase !== 'closed') this.socket.resume();
    }
  }

  /** The next complete message, after checking its length (before buffering it) and type. */
  private nextFrame(): { type: string | null; frame: Buffer } | null {
    const b = this.buf;
    if (this.phase === 'startup') {
      if (b.length < 4) return null;
      const len = b.readInt32BE(0);
      if (len < 8 || len > MAX_STARTUP_PACKET_LENGTH) {
        throw protocolViolation(
          `invalid length of startup packet: ${len} (accepted: 8 to ${MAX_STARTUP_PACKET_LENGTH})`,
        );
      }
      if (b.length < len) return null;
      this.buf = b.subarray(len);
      return { type: null, frame: b.subarray(0, len) };
    }
    if (b.length < 5) return null;
    const type = String.fromCharCode(b[0]!);
    const len = b.readInt32BE(1);
    const limit = MESSAGE_LIMITS[type];
    if (limit === undefined)
      throw protocolViolation(`invalid frontend message type ${b[0]} (${JSON.stringify(type)})`);
    if (len < 4)
      throw protocolViolation(`invalid message length ${len} for message type "${type}"`);
    if (len - 4 > limit)
      throw protocolViolation(
        `message of type "${type}" is ${len - 4} bytes, larger than the limit of ${limit} bytes`,
      );
    if (b.length < 1 + len) return null;
    this.buf = b.subarray(1 + len);
    return { type, frame: b.subarray(0, 1 + len) };
  }

  private async handleFrame({
    type,
    frame,
  }: {
    type: string | null;
    frame: Buffer;
  }): Promise<void> {
    if (type === null) return this.handleStartupPacket(frame);
    if (this.phase === 'auth') {
      if (type === 'X') return this.close();
      if (type !== 'p')
        throw protocolViolation(`expected password response, got message type "${type}"`);
      if (this.scram !== null) return this.scramStep(frame.subarray(5));
      if (frame[frame.length - 1] !== 0)
        throw protocolViolation('invalid password packet: not NUL-terminated');
      await this.conn.handleData(Buffer.from(frame));
      return;
    }
    return this.handleMessage(type, frame.subarray(5));
  }

  private async handleStartupPacket(packet: Buffer): Promise<void> {
    const len = packet.length;
    const requestCode = packet.readInt32BE(4);
    if (requestCode === SSL_REQUEST_CODE || requestCode === GSSENC_REQUEST_CODE) {
      if (len !== 8)
        throw protocolViolation(
          `invalid length of ${requestCode === SSL_REQUEST_CODE ? 'SSL' : 'GSSENC'} request packet: ${len}`,
        );
      if (++this.negotiations > 2)
        throw protocolViolation('too many encryption negotiation requests');
      if (requestCode === SSL_REQUEST_CODE)
        await this.conn.handleData(Buffer.from(packet)); // pg-gateway answers 'N'
      else this.write('N'); // walsim has no GSSAPI encryption either
      return;
    }
    if (requestCode === CANCEL_REQUEST_CODE) {
      if (len !== 16) throw protocolViolation(`invalid length of cancel request packet: ${len}`);
      this.server.cancel(packet.readInt32BE(8), packet.readInt32BE(12));
      // Like PostgreSQL: no reply, the connection just closes.
      this.close();
      return;
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
    this.user = user;
    this.applicationName = params.get('application_name') ?? '';
    for (const [name, value] of sessionOptions(params.get('options') ?? '')) {
      if (name === 'application_name') this.applicationName = value;
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
    this.server.admit(this);
    const unrecognized = [...params.keys()].filter((k) => k.startsWith('_pq_.'));
    if (minor > 0 || unrecognized.length > 0) {
      // NegotiateProtocolVersion: we speak 3.0 and none of the protocol options.
      const w = this.conn.writer.addInt32(0).addInt32(unrecognized.length);
      for (const k of unrecognized) w.addCString(k);
      this.write(w.flush(code('v')));
    }
    this.phase = 'auth';
    const forGateway = Buffer.from(packet);
    forGateway.writeInt32BE(3 << 16, 4); // pg-gateway accepts exactly 3.0
    const verifier = this.server.scramVerifier;
    if (verifier !== null) {
      // AuthenticationSASL: the mechanisms we offer.
      this.scram = new ScramExchange(verifier);
      this.scramStartup = forGateway;
      this.write(
        this.conn.writer.addInt32(10).addCString('SCRAM-SHA-256').addCString('').flush(code('R')),
      );
      return;
    }
    await this.conn.handleData(forGateway);
  }

  /** A SASLInitialResponse or SASLResponse ('p') of the SCRAM exchange. */
  private async scramStep(body: Buffer): Promise<void> {
    const scram = this.scram!;
    if (!this.scramFirstDone) {
      const serverFirst = scram.first(body);
      this.scramFirstDone = true;
      this.write(this.conn.writer.addInt32(11).add(Buffer.from(serverFirst)).flush(code('R'))); // AuthenticationSASLContinue
      return;
    }
    const serverFinal = scram.final(body);
    if (serverFinal === null)
      throw new FatalError('28P01', `password authentication failed for user "${this.user}"`);
    this.write(this.conn.writer.addInt32(12).add(Buffer.from(serverFinal)).flush(code('R'))); // AuthenticationSASLFinal
    this.scram = null;
    const startup = this.scramStartup!;
    this.scramStartup = null;
    await this.conn.handleData(startup); // pg-gateway (authMode none): AuthenticationOk and the rest
  }

  /** AuthenticationOk was sent: report parameters, the cancel key, and become ready. */
  private afterAuthentication(): void {
    clearTimeout(this.authTimer);
    this.phase = 'ready';
    const params: Array<[string, string]> = [
      ['application_name', this.applicationName],
      ...FIXED_PARAMETERS.slice(0, 6),
      ['session_authorization', this.user],
      ...FIXED_PARAMETERS.slice(6),
    ];
    for (const [k, v] of params) this.conn.sendParameterStatus(k, v);
    this.write(
      this.conn.writer.addInt32(this.backendPid).addInt32(this.secretKey).flush(code('K')),
    );
    this.readyForQuery();
  }

  /** Write to the client unless the session ended (a WARNING-and-close, a FATAL). */
  private write(data: Buffer | string): void {
    if (this.phase !== 'closed' && !this.socket.writableEnded) this.socket.write(data);
  }

  /** ReadyForQuery, after reporting in_hot_standby if it changed (GUC_REPORT, e.g. after promotion). */
  private readyForQuery(): void {
    if (this.phase === 'closed') return;
    const hot = this.server.opts.backend.inRecovery();
    if (hot !== this.reportedHotStandby) {
      this.conn.sendParameterStatus('in_hot_standby', hot ? 'on' : 'off');
      this.reportedHotStandby = hot;
    }
    this.conn.sendReadyForQuery('idle'); // walsim has no transaction blocks: always idle
  }

  private async handleMessage(type: string, body: Buffer): Promise<void> {
    if (this.skipTillSync && type !== 'S' && type !== 'X') return;
    switch (type) {
      case 'Q': {
        const r = new BodyReader(body, 'Query');
        const sql = r.text();
        r.end();
        if (typeof sql === 'string') return this.simpleQuery(sql);
        this.portals.clear(); // the failed Query still ends the implicit transaction
        this.sendStatementError(sql);
        this.readyForQuery();
        return;
      }
      case 'P':
        return this.extended(() => this.parse(body));
      case 'B':
        return this.extended(() => this.bind(body));
      case 'D':
        return this.extended(() => this.describe(body));
      case 'E':
        return this.extended(() => this.execute(body));
      case 'C':
        return this.extended(() => this.closeObject(body));
      case 'S':
        this.skipTillSync = false;
        this.portals.clear(); // the implicit transaction ends: its portals go
        this.readyForQuery();
        return;
      case 'H':
        return; // Flush: replies are written as they are made
      case 'X':
        return this.close();
      case 'F':
        this.sendError({
          severity: 'ERROR',
          code: '0A000',
          message: 'walsim does not support the function call protocol',
        });
        this.readyForQuery();
        return;
      case 'd':
      case 'c':
      case 'f':
        return; // copy messages outside COPY are ignored, as PostgreSQL does
      default:
        throw protocolViolation(`invalid frontend message type "${type}" after authentication`);
    }
  }

  /** An extended-protocol step: an error is reported once and later messages skipped until Sync. */
  private async extended(step: () => Promise<void> | void): Promise<void> {
    try {
      await step();
    } catch (e) {
      if (e instanceof FatalError) throw e;
      this.sendStatementError(e);
      this.skipTillSync = true;
    }
  }

  private async simpleQuery(sql: string): Promise<void> {
    // exec_simple_query drops the unnamed statement; the Query ends the (implicit) transaction the
    // extended messages before it ran in, and every portal with it.
    this.prepared.delete('');
    this.portals.clear();
    let pieces: string[];
    let stmts: Statement[];
    const notices: Notice[] = [];
    try {
      pieces = splitStatements(sql);
      // PostgreSQL parses the whole string before running any of it: a syntax error runs nothing,
      // and the parser's NOTICEs (identifier truncation) come before any result.
      stmts = pieces.map((p) => parseStatement(p, notices));
      this.sendNotices(notices);
      if (stmts.length > 1) {
        // Several statements form one implicit transaction block (exec_simple_query).
        const vacuum = stmts.find((s) => s.type === 'vacuum');
        if (vacuum)
          throw new WalsimError(
            'invalid_input',
            'VACUUM cannot run inside a transaction block',
            '25001',
          );
      }
    } catch (e) {
      this.sendNotices(notices);
      this.sendStatementError(e);
      this.readyForQuery();
      return;
    }
    if (stmts.length === 0) this.write(this.conn.writer.flush(code('I'))); // EmptyQueryResponse
    for (let i = 0; i < stmts.length; i++) {
      try {
        const columns = describeStatement(stmts[i]!);
        const result = await this.run(pieces[i]!, columns);
        if (columns.length > 0) this.sendRowDescription(columns);
        this.sendRows(columns, result, 0, result.rows.length);
        this.sendNotices(result.notices);
        this.sendCommandComplete(result.command);
      } catch (e) {
        this.sendStatementError(e);
        break;
      }
      if (this.phase === 'closed') return;
    }
    this.readyForQuery();
  }

  private async run(sql: string, columns: ResultColumn[]): Promise<QueryResult> {
    const ac = new AbortController();
    this.running = ac;
    try {
      const result = await this.server.opts.backend.execute(sql, ac.signal);
      assert(
        result.columns.length === columns.length &&
          result.columns.every((c, i) => c === columns[i]!.name),
        `INV-WIRE-1: result columns ${JSON.stringify(result.columns)} differ from the described ${JSON.stringify(columns.map((c) => c.name))}`,
      );
      return result;
    } catch (e) {
      // The node began its shutdown (a fast stop, or a smart one once the sessions it waited
      // for ended): PostgreSQL has terminated every backend by then, so an established session
      // gets FATAL 57P01; 57P03 is the answer to a connection attempt.
      if (isWalsimError(e) && e.sqlstate === '57P03') throw terminated();
      throw e;
    } finally {
      this.running = null;
    }
  }

  private parse(body: Buffer): void {
    const r = new BodyReader(body, 'Parse');
    const name = r.cstring();
    const sql = r.text();
    const nParams = r.int16();
    const paramTypes: number[] = [];
    for (let i = 0; i < nParams; i++) paramTypes.push(r.int32());
    r.end();
    if (typeof sql !== 'string') throw sql;
    // walsim's statements reference no parameter ($n is refused by the lexer): a declared type
    // stands (Bind must supply a value for it), an unspecified one cannot be inferred.
    const unknown = paramTypes.indexOf(0);
    if (unknown >= 0)
      throw new WalsimError(
        'invalid_input',
        `could not determine data type of parameter $${unknown + 1}`,
        '42P18',
      );
    if (name !== '' && this.prepared.has(name))
      throw new WalsimError(
        'invalid_input',
        `prepared statement "${name}" already exists`,
        '42P05',
      );
    if (name !== '' && this.prepared.size >= MAX_NAMED_OBJECTS) {
      throw new WalsimError(
        'invalid_input',
        `too many prepared statements (walsim allows ${MAX_NAMED_OBJECTS} per session)`,
        '53400',
      );
    }
    const pieces = splitStatements(sql);
    if (pieces.length > 1)
      throw new WalsimError(
        'syntax_error',
        'cannot insert multiple commands into a prepared statement',
        '42601',
      );
    const notices: Notice[] = [];
    try {
      const stmt = pieces.length === 0 ? null : parseStatement(pieces[0]!, notices);
      const columns = stmt === null ? [] : describeStatement(stmt);
      this.prepared.set(name, { sql, stmt, columns, paramTypes });
    } finally {
      this.sendNotices(notices);
    }
    this.write(this.conn.writer.flush(code('1'))); // ParseComplete
  }

  private bind(body: Buffer): void {
    const r = new BodyReader(body, 'Bind');
    const portalName = r.cstring();
    const stmtName = r.cstring();
    const nFormats = r.int16();
    for (let i = 0; i < nFormats; i++) r.int16();
    const nParams = r.int16();
    for (let i = 0; i < nParams; i++) {
      const len = r.int32();
      if (len > 0) r.bytes(len);
    }
    const nResultFormats = r.int16();
    const resultFormats: number[] = [];
    for (let i = 0; i < nResultFormats; i++) resultFormats.push(r.int16());
    r.end();
    const prepared = this.preparedStatement(stmtName);
    if (nParams !== prepared.paramTypes.length) {
      throw new WalsimError(
        'protocol_violation',
        `bind message supplies ${nParams} parameters, but prepared statement "${stmtName}" requires ${prepared.paramTypes.length}`,
        '08P01',
      );
    }
    if (resultFormats.some((f) => f !== 0))
      throw new WalsimError(
        'invalid_input',
        'walsim sends results in text format only (format code 0)',
        '0A000',
      );
    // CreatePortal: a named portal must be new; the unnamed one is replaced silently.
    if (portalName !== '' && this.portals.has(portalName))
      throw new WalsimError('invalid_input', `cursor "${portalName}" already exists`, '42P03');
    if (portalName !== '' && this.portals.size >= MAX_NAMED_OBJECTS) {
      throw new WalsimError(
        'invalid_input',
        `too many portals (walsim allows ${MAX_NAMED_OBJECTS} per session)`,
        '53400',
      );
    }
    this.portals.set(portalName, { prepared, result: null, sent: 0, done: false });
    this.write(this.conn.writer.flush(code('2'))); // BindComplete
  }

  /** FetchPreparedStatement, or the unnamed statement (exec_bind_message's own message for it). */
  private preparedStatement(name: string): Prepared {
    const p = this.prepared.get(name);
    if (p !== undefined) return p;
    const what = name === '' ? 'unnamed prepared statement' : `prepared statement "${name}"`;
    throw new WalsimError('invalid_input', `${what} does not exist`, '26000');
  }

  private describe(body: Buffer): void {
    const r = new BodyReader(body, 'Describe');
    const kind = r.byte();
    const name = r.cstring();
    r.end();
    let columns: ResultColumn[];
    if (kind === 'S') {
      const p = this.preparedStatement(name);
      const w = this.conn.writer.addInt16(p.paramTypes.length); // ParameterDescription
      for (const t of p.paramTypes) w.addInt32(t);
      this.write(w.flush(code('t')));
      columns = p.columns;
    } else if (kind === 'P') {
      const p = this.portals.get(name);
      if (p === undefined)
        throw new WalsimError('invalid_input', `portal "${name}" does not exist`, '34000');
      columns = p.prepared.columns;
    } else {
      // postgres.c: an ERROR (08P01), not FATAL; the subtype printed as its byte value.
      throw new WalsimError(
        'protocol_violation',
        `invalid DESCRIBE message subtype ${kind.charCodeAt(0)}`,
        '08P01',
      );
    }
    if (columns.length > 0) this.sendRowDescription(columns);
    else this.write(this.conn.writer.flush(code('n'))); // NoData
  }

  private async execute(body: Buffer): Promise<void> {
    const r = new BodyReader(body, 'Execute');
    const name = r.cstring();
    const maxRows = r.int32();
    r.end();
    const portal = this.portals.get(name);
    if (portal === undefined)
      throw new WalsimError('invalid_input', `portal "${name}" does not exist`, '34000');
    const { prepared } = portal;
    if (prepared.stmt === null) {
      this.write(this.conn.writer.flush(code('I'))); // EmptyQueryResponse
      return;
    }
    if (portal.done)
      throw new WalsimError('invalid_input', `portal "${name}" cannot be run`, '55000');
    if (portal.result === null) {
      portal.result = await this.run(prepared.sql, prepared.columns);
      this.sendNotices(portal.result.notices); // raised while it ran, before any row
    }
    const result = portal.result;
    if (prepared.columns.length === 0) {
      portal.done = true;
      this.sendCommandComplete(result.command);
      return;
    }
    const left = result.rows.length - portal.sent;
    const n = maxRows > 0 ? Math.min(maxRows, left) : left;
    this.sendRows(prepared.columns, result, portal.sent, n);
    portal.sent += n;
    // PortalRunSelect: a fetch that filled its row limit suspends, even if no row is left; the
    // tag counts this fetch's rows (SHOW's has no count).
    if (maxRows > 0 && n === maxRows)
      this.write(this.conn.writer.flush(code('s'))); // PortalSuspended
    else
      this.sendCommandComplete(
        result.command.startsWith('SELECT ') ? `SELECT ${n}` : result.command,
      );
  }

  private closeObject(body: Buffer): void {
    const r = new BodyReader(body, 'Close');
    const kind = r.byte();
    const name = r.cstring();
    r.end();
    if (kind === 'S') this.prepared.delete(name);
    else if (kind === 'P') this.portals.delete(name);
    else
      throw new WalsimError(
        'protocol_violation',
        `invalid CLOSE message subtype ${kind.charCodeAt(0)}`,
        '08P01',
      );
    this.write(this.conn.writer.flush(code('3'))); // CloseComplete
  }

  private sendRowDescription(columns: ResultColumn[]): void {
    const w = this.conn.writer.addInt16(columns.length);
    for (const c of columns) {
      const t = PG_TYPES[c.type];
      w.addCString(c.name)
        .addInt32(0)
        .addInt16(0)
        .addInt32(t.oid)
        .addInt16(t.len)
        .addInt32(-1)
        .addInt16(0);
    }
    this.write(w.flush(code('T')));
  }

  private sendRows(
    columns: ResultColumn[],
    result: QueryResult,
    from: number,
    count: number,
  ): void {
    for (let i = from; i < from + count; i++) {
      const row = result.rows[i]!;
      const w = this.conn.writer.addInt16(columns.length);
      for (const c of columns) {
        const text = textOf(row[c.name] ?? null);
        if (text === null) w.addInt32(-1);
        else {
          const bytes = Buffer.from(text, 'utf8');
          w.addInt32(bytes.length).add(bytes);
        }
      }
      this.write(w.flush(code('D')));
    }
  }

  private sendCommandComplete(tag: string): void {
    this.write(this.conn.writer.addCString(tag).flush(code('C')));
  }

  /** NoticeResponse per WARNING the statement raised (a cancelled synchronous-replication wait). */
  private sendNotices(notices: Notice[] | undefined): void {
    for (const n of notices ?? []) {
      const w = this.conn.writer;
      w.addString('S')
        .addCString(n.severity)
        .addString('V')
        .addCString(n.severity)
        .addString('C')
        .addCString(n.code)
        .addString('M')
        .addCString(n.message);
      if (n.detail !== undefined) w.addString('D').addCString(n.detail);
      this.write(w.addCString('').flush(code('N')));
    }
  }

  private sendError(e: BackendError): void {
    if (this.phase !== 'closed' && !this.socket.writableEnded) this.conn.sendError(e);
  }

  /**
   * An error a statement raised: WalsimErrors carry their SQLSTATE (and DETAIL); an
   * InvariantViolation ends the process; anything else is an internal error of this statement.
   */
  private sendStatementError(e: unknown): void {
    if (e instanceof InvariantViolation) this.server.opts.backend.fatal(e);
    if (e instanceof FatalError) return this.fatal(e);
    if (isWalsimError(e)) {
      if ((e as { severity?: string }).severity === 'WARNING') {
        // A fast shutdown ended a synchronous-replication wait: PostgreSQL warns and drops the
        // connection without a command tag (the commit may or may not have reached the standby).
        this.sendNotices([
          {
            severity: 'WARNING',
            code: e.sqlstate,
            message: e.message,
            ...(e.detail !== undefined ? { detail: e.detail } : {}),
          },
        ]);
        this.close();
        return;
      }
      this.sendError({
        severity: 'ERROR',
        code: e.sqlstate,
        message: e.message,
        ...(e.detail !== undefined ? { detail: e.detail } : {}),
        ...(e.hint !== undefined ? { hint: e.hint } : {}),
      });
      return;
    }
    this.server.opts.backend.log(`ERROR:  internal error: ${(e as Error).stack ?? String(e)}`);
    this.sendError({ severity: 'ERROR', code: 'XX000', message: (e as Error).message });
  }

  fatal(e: FatalError): void {
    if (this.phase === 'closed') return;
    this.sendError({ severity: 'FATAL', code: e.sqlstate, message: e.message });
    this.close();
  }

  private close(): void {
    if (this.phase === 'closed') return;
    this.phase = 'closed';
    this.buf = Buffer.alloc(0);
    this.socket.end();
    // A client that never reads must not keep the socket (and us) around.
    setTimeout(() => this.socket.destroy(), 5000).unref();
  }
}

function textOf(v: SqlValue): string | null {
  if (v === null) return null;
  if (typeof v === 'boolean') return v ? 't' : 'f';
  return String(v);
}

class PgWireServer {
  private readonly sessions = new Set<PgWireSession>();
  private readonly admitted = new Set<PgWireSession>();
  /** Computed once, like the verifier PostgreSQL keeps in pg_authid. */
  readonly scramVerifier: ScramVerifier | null;
  constructor(readonly opts: PgWireOptions) {
    this.scramVerifier =
      opts.password?.passwordEncryption === 'scram-sha-256'
        ? scramVerifier(opts.password.password)
        : null;
  }

  accept(socket: net.Socket): void {
    const session = new PgWireSession(socket, this);
    this.sessions.add(session);
    if (this.opts.password === null && !isLoopback(socket.remoteAddress)) {
      session.fatal(
        new FatalError(
          '28000',
          `no pg_hba.conf entry for host "${socket.remoteAddress}": walsim trusts loopback clients only; start the cluster with --password to accept others`,
        ),
      );
    }
  }

  /** A start-up packet arrived: the server-wide checks PostgreSQL's postmaster makes. */
  admit(session: PgWireSession): void {
    if (this.opts.backend.shuttingDown())
      throw new FatalError('57P03', 'the database system is shutting down');
    if (this.admitted.size >= (this.opts.maxConnections ?? 100))
      throw new FatalError('53300', 'sorry, too many clients already');
    this.admitted.add(session);
  }

  forget(session: PgWireSession): void {
    this.sessions.delete(session);
    this.admitted.delete(session);
  }

  /**
   * A backend pid for a new session: walsim's sessions share one process, so each gets its own
   * number (from the server's pid on, skipping the ones in use) to tell them apart, as libpq's
   * PQbackendPID and cancel requests expect.
   */
  allocatePid(): number {
    const inUse = new Set([...this.sessions].map((s) => s.backendPid));
    do this.lastPid = this.lastPid >= 0x7fffffff ? 1 : this.lastPid + 1;
    while (inUse.has(this.lastPid));
    return this.lastPid;
  }
  private lastPid = process.pid;

  cancel(pid: number, secretKey: number): void {
    for (const s of this.admitted)
      if (s.backendPid === pid && s.secretKey === secretKey) s.cancel();
  }

  count(): number {
    return this.admitted.size;
  }

  terminateAll(): void {
    for (const s of this.sessions) s.terminate();
  }
}

/** Listen for PostgreSQL clients on host:port (port 0: any free port). */
export async function startPgWireServer(opts: PgWireOptions): Promise<PgWireHandle> {
  const wire = new PgWireServer(opts);
  const server = net.createServer((socket) => wire.accept(socket));
  server.on('error', (e) =>
    opts.backend.log(`LOG:  PostgreSQL protocol listener error: ${e.message}`),
  );
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(opts.port, opts.host, () => {
      server.off('error', reject);
      resolve();
    });
  });
  const port = (server.address() as net.AddressInfo).port;
  return {
    port,
    sessionCount: () => wire.count(),
    close: async () => {
      // Stop listening and end every session; the sockets finish flushing on their own.
      server.close();
      wire.terminateAll();
    },
  };
}
