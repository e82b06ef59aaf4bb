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

function fieldsOf(type: string): ReadonlyArray<readonly [string, FieldKind]> | undefined {
  return Object.prototype.hasOwnProperty.call(MESSAGE_FIELDS, type)
    ? (MESSAGE_FIELDS[type as StreamMessageType] as ReadonlyArray<readonly [string, FieldKind]>)
    : undefined;
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
  return packr.pack(arr);
}

/** Decode and validate one frame. Throws WalsimError('protocol_violation') on anything malformed. */
export function decodeMessage(bytes: Uint8Array): StreamMessage {
  if (!(bytes instanceof Uint8Array) || bytes.length === 0) throw violation('empty frame');
  let raw: unknown;
  try {
    raw = unpackr.unpack(bytes);
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
