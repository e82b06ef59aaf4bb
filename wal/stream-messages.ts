/**
 * Streaming-replication protocol messages (walsender <-> walreceiver) and their binary encoding.
 *
 * Entry points: `StreamMessage` (discriminated union on `type`), `encodeMessage`, `decodeMessage`.
 * Each message is one msgpack array `[type, ...fields]` in a fixed field order: no shared state,
 * so any frame decodes on its own. `decodeMessage` treats its input as untrusted: it checks the
 * type and every field and throws WalsimError('protocol_violation') naming what was wrong. The
 * sockets live elsewhere; so do the control-plane (CLI) commands.
 *
 * PostgreSQL's codes, for orientation (replication protocol, walsender.c / walreceiver.c):
 *   IDENTIFY_SYSTEM, START_REPLICATION, TIMELINE_HISTORY: replication commands (simple query);
 *   XLogData 'w', PrimaryKeepalive 'k' (server -> standby CopyData);
 *   StandbyStatusUpdate 'r' (standby -> server CopyData); CopyDone 'c';
 *   EndOfTimeline: CopyDone followed by the (next TLI, switch point) result set;
 *   Error: ErrorResponse 'E' with SQLSTATE.
 */
import { Packr, Unpackr } from 'msgpackr';
import { WalsimError } from '../common/errors.ts';
import type { Lsn, TimeLineId } from './lsn.ts';

export type StreamMessage =
  /** Standby -> primary: who are you. */
  | { type: 'IDENTIFY_SYSTEM' }
  /** Primary -> standby: system identifier (uint64 as decimal text), current timeline, flush LSN. */
  | { type: 'IdentifySystemReply'; systemId: string; timeline: TimeLineId; xlogpos: Lsn }
  /** Standby -> primary: stream (slotless, physical) from startLsn on timeline. */
  | { type: 'START_REPLICATION'; startLsn: Lsn; timeline: TimeLineId; applicationName: string }
  /** 'w': WAL bytes [walStart, walStart + data.length), whole framed records; walEnd = sender's flush LSN. */
  | { type: 'XLogData'; walStart: Lsn; walEnd: Lsn; sendTime: number; data: Uint8Array }
  /** 'k': walEnd = sender's sent position; replyRequested asks for an immediate 'r'. */
  | { type: 'PrimaryKeepalive'; walEnd: Lsn; sendTime: number; replyRequested: boolean }
  /** 'r': the walreceiver's written, flushed and replayed positions. */
  | {
      type: 'StandbyStatusUpdate';
      writeLsn: Lsn;
      flushLsn: Lsn;
      applyLsn: Lsn;
      sendTime: number;
      replyRequested: boolean;
    }
  /** Streaming of the requested timeline ended at switchLsn; `timeline` is the next timeline. */
  | { type: 'EndOfTimeline'; timeline: TimeLineId; switchLsn: Lsn }
  /** Standby -> primary: send the history file of `timeline`. */
  | { type: 'TIMELINE_HISTORY'; timeline: TimeLineId }
  /** Primary -> standby: the history file's name and text. */
  | { type: 'TimelineHistoryReply'; timeline: TimeLineId; fileName: string; content: string }
  /** 'c': either side ends streaming. */
  | { type: 'CopyDone' }
  /** 'E': an error with its SQLSTATE. */
  | { type: 'Error'; code: string; message: string };

export type StreamMessageType = StreamMessage['type'];

type FieldKind = 'lsn' | 'tli' | 'time' | 'bool' | 'string' | 'bytes' | 'sqlstate' | 'systemId';

/** Field order on the wire, per type. The mapped type keeps this in step with the union. */
const MESSAGE_FIELDS: {
  readonly [T in StreamMessageType]: ReadonlyArray<
    readonly [Exclude<keyof Extract<StreamMessage, { type: T }>, 'type'>, FieldKind]
  >;
} = {
  IDENTIFY_SYSTEM: [],
  IdentifySystemReply: [
    ['systemId', 'systemId'],
    ['timeline', 'tli'],
    ['xlogpos', 'lsn'],
  ],
  START_REPLICATION: [
    ['startLsn', 'lsn'],
    ['timeline', 'tli'],
    ['applicationName', 'string'],
  ],
  XLogData: [
    ['walStart', 'lsn'],
    ['walEnd', 'lsn'],
    ['sendTime', 'time'],
    ['data', 'bytes'],
  ],
  PrimaryKeepalive: [
    ['walEnd', 'lsn'],
    ['sendTime', 'time'],
    ['replyRequested', 'bool'],
  ],
  StandbyStatusUpdate: [
    ['writeLsn', 'lsn'],
    ['flushLsn', 'lsn'],
    ['applyLsn', 'lsn'],
    ['sendTime', 'time'],
    ['replyRequested', 'bool'],
  ],
  EndOfTimeline: [
    ['timeline', 'tli'],
    ['switchLsn', 'lsn'],
  ],
  TIMELINE_HISTORY: [['timeline', 'tli']],
  TimelineHistoryReply: [
    ['timeline', 'tli'],
    ['fileName', 'string'],
    ['content', 'string'],
  ],
  CopyDone: [],
  Error: [
    ['code', 'sqlstate'],
    ['message', 'string'],
  ],
};

/** Largest |time| a JavaScript Date represents (ECMAScript TimeClip). */
export const MAX_TIME_MS = 8.64e15;

const packr = new Packr({ useRecords: false, variableMapSize: true });
const unpackr = new Unpackr({ useRecords: false, mapsAsObjects: true });

function violation(message: string): WalsimError {
  return new WalsimError('protocol_violation', `invalid replication message: ${message}`);
}

function checkField(kind: FieldKind, v: unknown): string | null {
  switch (kind) {
    case 'lsn':
      return typeof v === 'number' && Number.isSafeInteger(v) && v >= 0
        ? null
        : 'an LSN (a safe non-negative integer)';
    case 'tli':
      return typeof v === 'number' && v >>> 0 === v && v >= 1
        ? null
        : 'a timeline ID (1 .. 2^32-1)';
    case 'time':
      // Milliseconds since 1970 within the range of a JavaScript Date (TimeClip: |t| <= 8.64e15),
      // so a receiver can always turn it into a timestamp.
      return typeof v === 'number' && Number.isFinite(v) && Math.abs(v) <= MAX_TIME_MS
        ? null
        : 'a time in ms since 1970 within +-8.64e15';
    case 'bool':
      return typeof v === 'boolean' ? null : 'a boolean';
    case 'string':
      return typeof v === 'string' ? null : 'a string';
    case 'bytes':
      return v instanceof Uint8Array ? null : 'binary data';
    case 'sqlstate':
      return typeof v === 'string' && /^[0-9A-Z]{5}$/.test(v) ? null : 'a 5-character SQLSTATE';
    case 'systemId':
      return typeof v === 'string' && /^[0-9]{1,20}$/.test(v)
        ? null
        : 'a decimal system identifier';
  }
}

function describe(v: unknown): string {
  if (v === undefined) return 'nothing';
  if (v instanceof Uint8Array) return `${v.length} bytes`;
  if (typeof v === 'string') return JSON.stringify(v.length > 40 ? `${v.slice(0, 40)}...` : v);
  if (typeof v === 'bigint') return `bigint ${v}`;
  return typeof v === 'object'
    ? v === null
      ? 'null'
      : Array.isArray(v)
        ? 'an array'
        : 'an object'
    : String(v);
}

/** MESSAGE_FIELDS by type name, for names read off the wire (a Map: no prototype keys). */
const FIELDS_BY_TYPE = new Map<string, ReadonlyArray<readonly [string, FieldKind]>>(
  Object.entries(MESSAGE_FIELDS),
);

function fieldsOf(type: string): ReadonlyArray<readonly [string, FieldKind]> | undefined {
  return FIELDS_BY_TYPE.get(type);
}

/**
 * The bytes `packr.pack(arr)` gives, written directly, for the values that take one form there:
 * non-negative numbers (positive fixint, uint8/16/32, else float64 as msgpackr writes integers
 * beyond 32 bits), booleans, ASCII strings under 32 characters (fixstr) and byte arrays (bin
 * 8/16/32); null for anything else (the caller packs it with msgpackr). A message is encoded at
 * every send — status replies, keepalives, WAL — and msgpackr's general encoder was about 2 % of
 * a simulation's CPU time. `test/unit/wal-stream-messages.test.ts` holds the two to the same
 * bytes.
 */
function packFast(arr: readonly unknown[]): Uint8Array | null {
  if (arr.length > 15) return null;
  let size = 1;
  for (const v of arr) {
    const n = fastSize(v);
    if (n < 0) return null;
    size += n;
  }
  const out = Buffer.allocUnsafe(size);
  out[0] = 0x90 | arr.length;
  let at = 1;
  for (const v of arr) at = writeFast(out, at, v);
  return out;
}

/** Bytes `v` takes in packFast, or -1 if it is not one of its forms. */
function fastSize(v: unknown): number {
  if (typeof v === 'number') {
    if (!(v >= 0)) return -1;
    if (v >>> 0 === v) return v < 0x80 ? 1 : v < 0x100 ? 2 : v < 0x10000 ? 3 : 5;
    return 9;
  }
  if (typeof v === 'boolean') return 1;
  if (typeof v === 'string') {
    if (v.length >= 32) return -1;
    for (let i = 0; i < v.length; i++) if (v.charCodeAt(i) >= 0x80) return -1;
    return 1 + v.length;
  }
  if (v instanceof Uint8Array) {
    const n = v.length;
    return n + (n < 0x100 ? 2 : n < 0x10000 ? 3 : 5);
  }
  return -1;
}

function writeFast(out: Buffer, at: number, v: unknown): number {
  if (typeof v === 'number') {
    if (v >>> 0 !== v) {
      out[at] = 0xcb;
      out.writeDoubleBE(v, at + 1);
      return at + 9;
    }
    if (v < 0x80) {
      out[at] = v;
      return at + 1;
    }
    if (v < 0x100) {
      out[at] = 0xcc;
      out[at + 1] = v;
      return at + 2;
    }
    if (v < 0x10000) {
      out[at] = 0xcd;
      out.writeUInt16BE(v, at + 1);
      return at + 3;
    }
    out[at] = 0xce;
    out.writeUInt32BE(v, at + 1);
    return at + 5;
  }
  if (typeof v === 'boolean') {
    out[at] = v ? 0xc3 : 0xc2;
    return at + 1;
  }
  if (typeof v === 'string') {
    out[at] = 0xa0 | v.length;
    for (let i = 0; i < v.length; i++) out[at + 1 + i] = v.charCodeAt(i);
    return at + 1 + v.length;
  }
  const b = v as Uint8Array;
  const n = b.length;
  if (n < 0x100) {
    out[at] = 0xc4;
    out[at + 1] = n;
    at += 2;
  } else if (n < 0x10000) {
    out[at] = 0xc5;
    out.writeUInt16BE(n, at + 1);
    at += 3;
  } else {
    out[at] = 0xc6;
    out.writeUInt32BE(n, at + 1);
    at += 5;
  }
  out.set(b, at);
  return at + n;
}

/** One binary frame for `m`. Asserts (as a protocol_violation) that `m` itself is well formed. */
export function encodeMessage(m: StreamMessage): Uint8Array {
  const fields = fieldsOf(m.type);
  if (fields === undefined)
    throw violation(`cannot encode unknown message type ${describe(m.type)}`);
  const o = m as unknown as Record<string, unknown>;
  const arr: unknown[] = [m.type];
  for (const [name, kind] of fields) {
    const problem = checkField(kind, o[name]);
    if (problem !== null)
      throw violation(`${m.type}.${name} must be ${problem}, got ${describe(o[name])}`);
    arr.push(o[name]);
  }
  return packFast(arr) ?? packr.pack(arr);
}

/** Scratch for a big-endian float 64 (msgpack's 0xcb), as msgpackr's DataView reads it. */
const f64View = new DataView(new ArrayBuffer(8));

/**
 * What `unpackr.unpack(b)` returns for a frame in packFast's forms — a fixarray of positive
 * fixints, uint 8/16/32, float 64, booleans, ASCII fixstrs and bin 8/16/32 (a subarray of `b`,
 * as msgpackr gives it), with nothing after it — read directly; null for any other frame, which
 * the caller hands to msgpackr (the one that reports a malformed frame). Every message is decoded
 * at its arrival, and msgpackr's general decoder was about 1.5 % of a simulation's CPU time.
 */
function unpackFast(b: Uint8Array): unknown[] | null {
  const len = b.length;
  const head = b[0]!;
  if (head < 0x90 || head > 0x9f) return null;
  const out: unknown[] = [];
  let at = 1;
  for (let i = head & 0x0f; i > 0; i--) {
    if (at >= len) return null;
    const t = b[at]!;
    if (t < 0x80) {
      out.push(t);
      at += 1;
    } else if (t >= 0xa0 && t <= 0xbf) {
      const end = at + 1 + (t & 0x1f);
      if (end > len) return null;
      let s = '';
      for (let k = at + 1; k < end; k++) {
        const c = b[k]!;
        if (c >= 0x80) return null;
        s += String.fromCharCode(c);
      }
      out.push(s);
      at = end;
    } else {
      at = unpackFastTagged(b, at, t, out);
      if (at < 0) return null;
    }
  }
  return at === len ? out : null;
}

/** unpackFast's other forms: the value of tag `t` at `at` pushed to `out`; its end, or -1. */
function unpackFastTagged(b: Uint8Array, at: number, t: number, out: unknown[]): number {
  const len = b.length;
  switch (t) {
    case 0xc2:
    case 0xc3:
      out.push(t === 0xc3);
      return at + 1;
    case 0xcc:
      if (at + 2 > len) return -1;
      out.push(b[at + 1]!);
      return at + 2;
    case 0xcd:
      if (at + 3 > len) return -1;
      out.push((b[at + 1]! << 8) | b[at + 2]!);
      return at + 3;
    case 0xce:
      if (at + 5 > len) return -1;
      out.push(b[at + 1]! * 0x100_0000 + ((b[at + 2]! << 16) | (b[at + 3]! << 8) | b[at + 4]!));
      return at + 5;
    case 0xcb:
      if (at + 9 > len) return -1;
      for (let k = 0; k < 8; k++) f64View.setUint8(k, b[at + 1 + k]!);
      out.push(f64View.getFloat64(0));
      return at + 9;
    case 0xc4:
    case 0xc5:
    case 0xc6: {
      const w = t === 0xc4 ? 1 : t === 0xc5 ? 2 : 4;
      if (at + 1 + w > len) return -1;
      let n = 0;
      for (let k = 1; k <= w; k++) n = n * 256 + b[at + k]!;
      const start = at + 1 + w;
      if (start + n > len) return -1;
      out.push(b.subarray(start, start + n));
      return start + n;
    }
    default:
      return -1;
  }
}

/** Decode and validate one frame. Throws WalsimError('protocol_violation') on anything malformed. */
export function decodeMessage(bytes: Uint8Array): StreamMessage {
  if (!(bytes instanceof Uint8Array) || bytes.length === 0) throw violation('empty frame');
  let raw: unknown;
  try {
    raw = unpackFast(bytes) ?? unpackr.unpack(bytes);
  } catch (e) {
    throw violation(`frame is not valid msgpack (${(e as Error).message.slice(0, 80)})`);
  }
  if (!Array.isArray(raw) || raw.length === 0)
    throw violation(`frame is ${describe(raw)}, expected [type, ...fields]`);
  const type: unknown = raw[0];
  if (typeof type !== 'string')
    throw violation(`message type is ${describe(type)}, expected a string`);
  const fields = fieldsOf(type);
  if (fields === undefined) throw violation(`unknown message type ${describe(type)}`);
  if (raw.length !== fields.length + 1) {
    throw violation(`${type} has ${raw.length - 1} fields, expected ${fields.length}`);
  }
  const out: Record<string, unknown> = { type };
  for (let i = 0; i < fields.length; i++) {
    const [name, kind] = fields[i]!;
    const v: unknown = raw[i + 1];
    const problem = checkField(kind, v);
    if (problem !== null) throw violation(`${type}.${name} must be ${problem}, got ${describe(v)}`);
    out[name] = v;
  }
  return out as unknown as StreamMessage;
}
