/**
 * Framing of the frontend's byte stream (pqcomm.c): start-up packets and typed messages, each
 * length checked against its limit when its header arrives, before the body is buffered; and a
 * bounds-checked reader of one message body. A malformed frame or body is a FatalError (08P01).
 */
import { WalsimError } from '../../common/errors.ts';

// Start-up packet codes (pqcomm.h).
export const CANCEL_REQUEST_CODE = 80877102;
export const SSL_REQUEST_CODE = 80877103;
export const GSSENC_REQUEST_CODE = 80877104;
/** MAX_STARTUP_PACKET_LENGTH in PostgreSQL. */
export const MAX_STARTUP_PACKET_LENGTH = 10000;
/** PQ_SMALL_MESSAGE_LIMIT: every message but the ones carrying SQL text. */
export const SMALL_MESSAGE_LIMIT = 10000;
/** Query, Parse and Bind carry SQL: walsim's statements are short, so 1 MiB (PostgreSQL: 1 GB). */
export const QUERY_MESSAGE_LIMIT = 1 << 20;
/** Prepared statements and portals a session may hold at once. */
export const MAX_NAMED_OBJECTS = 1000;
/** Stop reading from a client that does not read our replies once this much is queued. */
export const WRITE_HIGH_WATER = 1 << 20;

/** Frontend message types (protocol-message-formats) and the largest body each may have. */
export const MESSAGE_LIMITS: Record<string, number> = {
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

const code = (c: string) => c.charCodeAt(0);
export { code };

/** A protocol error that ends the session (FATAL). */
export class FatalError extends Error {
  constructor(
    readonly sqlstate: string,
    message: string,
  ) {
    super(message);
  }
}

/** What a backend ended by the postmaster's SIGTERM (fast shutdown) sends. */
export function terminated(): FatalError {
  return new FatalError('57P01', 'terminating connection due to administrator command');
}

export function protocolViolation(message: string): FatalError {
  return new FatalError('08P01', message);
}

/** Bounds-checked reader of one message body; a malformed body is a protocol violation. */
export class BodyReader {
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

/** A frame: a start-up packet (`type` null) or a typed message, header included. */
export interface Frame {
  type: string | null;
  frame: Buffer;
}

/**
 * The bytes received and not yet handled. `next` returns the next complete frame after checking
 * its length (before its body is buffered) and type.
 */
export class FrameBuffer {
  private buf: Buffer = Buffer.alloc(0);

  get length(): number {
    return this.buf.length;
  }

  append(chunk: Buffer): void {
    this.buf = this.buf.length === 0 ? chunk : Buffer.concat([this.buf, chunk]);
  }

  clear(): void {
    this.buf = Buffer.alloc(0);
  }

  /** `startup`: before the start-up packet, frames have no type byte. */
  next(startup: boolean): Frame | null {
    const b = this.buf;
    if (startup) {
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
}
