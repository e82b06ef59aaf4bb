/**
 * Hand-written msgpack for the payloads of the hot record kinds (heap inserts, deletes, prunes,
 * visibility, commits and aborts): the exact bytes msgpackr writes for them, written and read
 * without msgpackr's per-record machinery.
 *
 * Why not msgpackr on this path: a bulk INSERT or a VACUUM logs one of these records per heap
 * page, and the primary encodes it, the walreceiver validates it and the startup process decodes
 * it. Profiles of the end-to-end bench put msgpackr's `pack` at ~2.7 µs and `unpack` at ~1.2 µs
 * per record (object construction, string extraction, its structure transitions), the largest
 * single cost of replication (docs/history/benchmarks-2026-12-02.md). The format is unchanged: a
 * frame is still msgpackr's record encoding with the predeclared structures of codec.ts
 * (PAYLOAD_STRUCTURES), and msgpackr stays the reference — every other kind goes through it, and
 * the property tests compare these bytes with msgpackr's for random bodies of every hot kind.
 *
 * The encoding, as msgpackr 2.x writes a record of a predeclared structure (id = 0x40 + index):
 * one byte record id, then the values in structure order: the kind as a fixstr; an unsigned
 * 32-bit integer as a positive fixint below 0x40 (0x40..0x7f would read as record ids), else
 * uint8 0xcc / uint16 0xcd / uint32 0xce; a negative 32-bit integer as a negative fixint or int8
 * 0xd0 / int16 0xd1 / int32 0xd2; any other number as float64 0xcb; booleans 0xc2 / 0xc3; arrays
 * as fixarray 0x90 / array16 0xdc / array32 0xdd; multi-byte values big-endian.
 *
 * Decoding accepts exactly these encodings and only well-formed bodies (the checks of record-shape.ts's
 * BODY_FIELDS); anything else (another encoding of the same value, a wrong kind string, a field
 * of the wrong type, trailing bytes) returns null and the caller decodes with msgpackr, which
 * produces the same body or the precise error message.
 */
import { assert, fail } from '../common/assert.ts';
import type { WalRecordBody, WalRecordKind } from './records.ts';

/** Record ids: 0x40 + the structure's index in codec.ts's PAYLOAD_STRUCTURES. */
const ID_XACT = 0x43;
const ID_HEAP_INSERT = 0x47;
const ID_HEAP_DELETE = 0x48;
const ID_MULTI_INSERT = 0x49;
const ID_PRUNE = 0x4a;
const ID_VISIBLE = 0x4b;

/** The structure (its key list) each hot kind's record id stands for; codec.ts asserts them. */
export const HOT_STRUCTURES: ReadonlyArray<readonly [number, readonly string[]]> = [
  [ID_XACT, ['kind', 'xactTime', 'droppedRels']],
  [ID_HEAP_INSERT, ['kind', 'rel', 'block', 'offset', 'value', 'initPage']],
  [ID_HEAP_DELETE, ['kind', 'rel', 'block', 'offsets']],
  [ID_MULTI_INSERT, ['kind', 'rel', 'block', 'firstOffset', 'runs', 'initPage']],
  [ID_PRUNE, ['kind', 'rel', 'block', 'latestRemovedXid', 'offsets']],
  [ID_VISIBLE, ['kind', 'rel', 'block']],
];

/** The kind as msgpack writes it: a fixstr (every kind name is ASCII and shorter than 32). */
function fixstr(kind: string): Uint8Array {
  if (!(kind.length < 32)) fail(`INV-WAL-1: kind ${kind} too long for a fixstr`);
  const out = new Uint8Array(kind.length + 1);
  out[0] = 0xa0 | kind.length;
  for (let i = 0; i < kind.length; i++) out[i + 1] = kind.charCodeAt(i);
  return out;
}

const KIND_XACT_COMMIT = fixstr('XACT_COMMIT');
const KIND_XACT_ABORT = fixstr('XACT_ABORT');
const KIND_HEAP_INSERT = fixstr('HEAP_INSERT');
const KIND_HEAP_DELETE = fixstr('HEAP_DELETE');
const KIND_MULTI_INSERT = fixstr('HEAP2_MULTI_INSERT');
const KIND_PRUNE = fixstr('HEAP2_PRUNE');
const KIND_VISIBLE = fixstr('HEAP2_VISIBLE');

// Float64 bytes through a scratch array (the platform's byte order, checked once).
const f64 = new Float64Array(1);
const f64Bytes = new Uint8Array(f64.buffer);
f64[0] = 1;
const LITTLE_ENDIAN = f64Bytes[7] === 0x3f;
assert(LITTLE_ENDIAN || f64Bytes[0] === 0x3f, 'INV-WAL-1: unknown float64 byte order');

// ---------------------------------------------------------------------------------------------
// Encoding: each function writes at b[p] and returns the position after what it wrote. The
// caller reserved hotPayloadBound(body) bytes.

function writeKind(b: Uint8Array, p: number, k: Uint8Array): number {
  for (let i = 0; i < k.length; i++) b[p + i] = k[i]!;
  return p + k.length;
}

function writeNumber(b: Uint8Array, p: number, v: number): number {
  if (v >>> 0 === v) {
    if (v < 0x40) {
      b[p] = v;
      return p + 1;
    }
    if (v < 0x100) {
      b[p] = 0xcc;
      b[p + 1] = v;
      return p + 2;
    }
    if (v < 0x10000) {
      b[p] = 0xcd;
      b[p + 1] = v >>> 8;
      b[p + 2] = v & 0xff;
      return p + 3;
    }
    b[p] = 0xce;
    b[p + 1] = v >>> 24;
    b[p + 2] = (v >>> 16) & 0xff;
    b[p + 3] = (v >>> 8) & 0xff;
    b[p + 4] = v & 0xff;
    return p + 5;
  }
  if (v >> 0 === v) {
    if (v >= -0x20) {
      b[p] = 0x100 + v;
      return p + 1;
    }
    if (v >= -0x80) {
      b[p] = 0xd0;
      b[p + 1] = v + 0x100;
      return p + 2;
    }
    if (v >= -0x8000) {
      b[p] = 0xd1;
      b[p + 1] = (v >> 8) & 0xff;
      b[p + 2] = v & 0xff;
      return p + 3;
    }
    b[p] = 0xd2;
    b[p + 1] = (v >>> 24) & 0xff;
    b[p + 2] = (v >>> 16) & 0xff;
    b[p + 3] = (v >>> 8) & 0xff;
    b[p + 4] = v & 0xff;
    return p + 5;
  }
  b[p] = 0xcb;
  f64[0] = v;
  if (LITTLE_ENDIAN) for (let i = 0; i < 8; i++) b[p + 1 + i] = f64Bytes[7 - i]!;
  else for (let i = 0; i < 8; i++) b[p + 1 + i] = f64Bytes[i]!;
  return p + 9;
}

function writeArray(b: Uint8Array, p: number, a: readonly number[]): number {
  const n = a.length;
  if (n < 0x10) {
    b[p++] = 0x90 | n;
  } else if (n < 0x10000) {
    b[p] = 0xdc;
    b[p + 1] = n >>> 8;
    b[p + 2] = n & 0xff;
    p += 3;
  } else {
    b[p] = 0xdd;
    b[p + 1] = n >>> 24;
    b[p + 2] = (n >>> 16) & 0xff;
    b[p + 3] = (n >>> 8) & 0xff;
    b[p + 4] = n & 0xff;
    p += 5;
  }
  for (let i = 0; i < n; i++) p = writeNumber(b, p, a[i]!);
  return p;
}

/** Room the payload of `body` may take (an upper bound), or -1 when its kind is not hot. */
export function hotPayloadBound(body: WalRecordBody): number {
  switch (body.kind) {
    case 'XACT_COMMIT':
    case 'XACT_ABORT':
      return 32 + 9 * body.droppedRels.length;
    case 'HEAP_DELETE':
    case 'HEAP2_PRUNE':
      return 64 + 9 * body.offsets.length;
    case 'HEAP2_MULTI_INSERT':
      return 64 + 9 * body.runs.length;
    case 'HEAP_INSERT':
    case 'HEAP2_VISIBLE':
      return 64;
    default:
      return -1;
  }
}

/**
 * Write the payload of a hot-kind `body` (already checked well formed) at `b[p]`, with room for
 * hotPayloadBound(body) bytes; returns the end position. The kind's predeclared structure decides
 * the order of the values, whatever the key order of the object.
 */
export function writeHotPayload(b: Uint8Array, p: number, body: WalRecordBody): number {
  switch (body.kind) {
    case 'HEAP2_MULTI_INSERT':
      b[p] = ID_MULTI_INSERT;
      p = writeKind(b, p + 1, KIND_MULTI_INSERT);
      p = writeNumber(b, p, body.rel);
      p = writeNumber(b, p, body.block);
      p = writeNumber(b, p, body.firstOffset);
      p = writeArray(b, p, body.runs);
      b[p] = body.initPage ? 0xc3 : 0xc2;
      return p + 1;
    case 'HEAP_INSERT':
      b[p] = ID_HEAP_INSERT;
      p = writeKind(b, p + 1, KIND_HEAP_INSERT);
      p = writeNumber(b, p, body.rel);
      p = writeNumber(b, p, body.block);
      p = writeNumber(b, p, body.offset);
      p = writeNumber(b, p, body.value);
      b[p] = body.initPage ? 0xc3 : 0xc2;
      return p + 1;
    case 'HEAP_DELETE':
      b[p] = ID_HEAP_DELETE;
      p = writeKind(b, p + 1, KIND_HEAP_DELETE);
      p = writeNumber(b, p, body.rel);
      p = writeNumber(b, p, body.block);
      return writeArray(b, p, body.offsets);
    case 'HEAP2_PRUNE':
      b[p] = ID_PRUNE;
      p = writeKind(b, p + 1, KIND_PRUNE);
      p = writeNumber(b, p, body.rel);
      p = writeNumber(b, p, body.block);
      p = writeNumber(b, p, body.latestRemovedXid);
      return writeArray(b, p, body.offsets);
    case 'HEAP2_VISIBLE':
      b[p] = ID_VISIBLE;
      p = writeKind(b, p + 1, KIND_VISIBLE);
      p = writeNumber(b, p, body.rel);
      return writeNumber(b, p, body.block);
    case 'XACT_COMMIT':
    case 'XACT_ABORT':
      b[p] = ID_XACT;
      p = writeKind(b, p + 1, body.kind === 'XACT_COMMIT' ? KIND_XACT_COMMIT : KIND_XACT_ABORT);
      p = writeNumber(b, p, body.xactTime);
      return writeArray(b, p, body.droppedRels);
    default:
      fail(`INV-WAL-1: ${body.kind} is not a hot kind`);
  }
}

// ---------------------------------------------------------------------------------------------
// Decoding. One reader at a time (synchronous); `pos` is its cursor. Number readers return NaN
// for anything but the encodings above: NaN is never a valid value of any numeric field.

let src: Uint8Array = new Uint8Array(0);
let pos = 0;
let end = 0;

function readNumber(): number {
  if (pos >= end) return NaN;
  const t = src[pos]!;
  if (t < 0x40) {
    pos++;
    return t;
  }
  if (t >= 0xe0) {
    pos++;
    return t - 0x100;
  }
  const b = src;
  const p = pos;
  switch (t) {
    case 0xcc:
      if (p + 2 > end) return NaN;
      pos = p + 2;
      return b[p + 1]!;
    case 0xcd:
      if (p + 3 > end) return NaN;
      pos = p + 3;
      return (b[p + 1]! << 8) | b[p + 2]!;
    case 0xce:
      if (p + 5 > end) return NaN;
      pos = p + 5;
      return ((b[p + 1]! << 24) | (b[p + 2]! << 16) | (b[p + 3]! << 8) | b[p + 4]!) >>> 0;
    case 0xd0:
      if (p + 2 > end) return NaN;
      pos = p + 2;
      return (b[p + 1]! << 24) >> 24;
    case 0xd1:
      if (p + 3 > end) return NaN;
      pos = p + 3;
      return (((b[p + 1]! << 8) | b[p + 2]!) << 16) >> 16;
    case 0xd2:
      if (p + 5 > end) return NaN;
      pos = p + 5;
      return (b[p + 1]! << 24) | (b[p + 2]! << 16) | (b[p + 3]! << 8) | b[p + 4]!;
    case 0xcb:
      if (p + 9 > end) return NaN;
      pos = p + 9;
      if (LITTLE_ENDIAN) for (let i = 0; i < 8; i++) f64Bytes[7 - i] = b[p + 1 + i]!;
      else for (let i = 0; i < 8; i++) f64Bytes[i] = b[p + 1 + i]!;
      return f64[0]!;
    default:
      return NaN;
  }
}

/** An unsigned 32-bit integer field, or -1. */
function readU32(): number {
  const v = readNumber();
  return v >>> 0 === v ? v : -1;
}

/** 1 for true, 0 for false, -1 for anything else. */
function readBool(): number {
  if (pos >= end) return -1;
  const t = src[pos++]!;
  return t === 0xc3 ? 1 : t === 0xc2 ? 0 : -1;
}

/** An array header's length, or -1. */
function readArrayLength(): number {
  if (pos >= end) return -1;
  const t = src[pos]!;
  if ((t & 0xf0) === 0x90) {
    pos++;
    return t & 0x0f;
  }
  const p = pos;
  if (t === 0xdc) {
    if (p + 3 > end) return -1;
    pos = p + 3;
    return (src[p + 1]! << 8) | src[p + 2]!;
  }
  if (t === 0xdd) {
    if (p + 5 > end) return -1;
    pos = p + 5;
    return ((src[p + 1]! << 24) | (src[p + 2]! << 16) | (src[p + 3]! << 8) | src[p + 4]!) >>> 0;
  }
  return -1;
}

/** The array length header plus at least one byte per element must fit. */
function readArrayHeader(): number {
  const n = readArrayLength();
  return n >= 0 && n <= end - pos ? n : -1;
}

/** [firstOffset, count, ...] of 1-based line pointers: positive u32s, even length. */
function readRanges(): number[] | null {
  const n = readArrayHeader();
  if (n < 0 || (n & 1) !== 0) return null;
  const out = new Array<number>(n);
  for (let i = 0; i < n; i++) {
    const v = readU32();
    if (v <= 0) return null;
    out[i] = v;
  }
  return out;
}

/** [firstValue, count, ...]: safe-integer values, u32 counts >= 1, even length. */
function readRuns(): number[] | null {
  const n = readArrayHeader();
  if (n < 0 || (n & 1) !== 0) return null;
  const out = new Array<number>(n);
  for (let i = 0; i < n; i += 2) {
    const v = readNumber();
    if (!Number.isSafeInteger(v)) return null;
    const c = readU32();
    if (c <= 0) return null;
    out[i] = v;
    out[i + 1] = c;
  }
  return out;
}

function readU32List(): number[] | null {
  const n = readArrayHeader();
  if (n < 0) return null;
  const out = new Array<number>(n);
  for (let i = 0; i < n; i++) {
    const v = readU32();
    if (v < 0) return null;
    out[i] = v;
  }
  return out;
}

function kindMatches(k: Uint8Array): boolean {
  if (pos + k.length > end) return false;
  for (let i = 0; i < k.length; i++) if (src[pos + i] !== k[i]) return false;
  pos += k.length;
  return true;
}

/**
 * Decode the payload `buf[start, stop)` of a record whose header names `kind`, when it is a hot
 * kind encoded as above and well formed; null otherwise (decode it with msgpackr instead).
 */
export function readHotPayload(
  buf: Uint8Array,
  start: number,
  stop: number,
  kind: WalRecordKind,
): WalRecordBody | null {
  if (start >= stop) return null;
  src = buf;
  pos = start + 1;
  end = stop;
  const body = readBody(buf[start]!, kind);
  src = EMPTY; // keep no reference to the caller's buffer
  return body !== null && pos === stop ? body : null;
}

const EMPTY = new Uint8Array(0);

function readBody(id: number, kind: WalRecordKind): WalRecordBody | null {
  switch (kind) {
    case 'HEAP2_MULTI_INSERT': {
      if (id !== ID_MULTI_INSERT || !kindMatches(KIND_MULTI_INSERT)) return null;
      const rel = readU32();
      const block = readU32();
      const firstOffset = readU32();
      if (rel < 0 || block < 0 || firstOffset < 0) return null;
      const runs = readRuns();
      const initPage = readBool();
      if (runs === null || initPage < 0) return null;
      return { kind, rel, block, firstOffset, runs, initPage: initPage === 1 };
    }
    case 'HEAP_INSERT': {
      if (id !== ID_HEAP_INSERT || !kindMatches(KIND_HEAP_INSERT)) return null;
      const rel = readU32();
      const block = readU32();
      const offset = readU32();
      const value = readNumber();
      const initPage = readBool();
      if (rel < 0 || block < 0 || offset < 0 || !Number.isSafeInteger(value) || initPage < 0)
        return null;
      return { kind, rel, block, offset, value, initPage: initPage === 1 };
    }
    case 'HEAP_DELETE': {
      if (id !== ID_HEAP_DELETE || !kindMatches(KIND_HEAP_DELETE)) return null;
      const rel = readU32();
      const block = readU32();
      if (rel < 0 || block < 0) return null;
      const offsets = readRanges();
      return offsets === null ? null : { kind, rel, block, offsets };
    }
    case 'HEAP2_PRUNE': {
      if (id !== ID_PRUNE || !kindMatches(KIND_PRUNE)) return null;
      const rel = readU32();
      const block = readU32();
      const latestRemovedXid = readU32();
      if (rel < 0 || block < 0 || latestRemovedXid < 0) return null;
      const offsets = readRanges();
      return offsets === null ? null : { kind, rel, block, latestRemovedXid, offsets };
    }
    case 'HEAP2_VISIBLE': {
      if (id !== ID_VISIBLE || !kindMatches(KIND_VISIBLE)) return null;
      const rel = readU32();
      const block = readU32();
      return rel < 0 || block < 0 ? null : { kind, rel, block };
    }
    case 'XACT_COMMIT':
    case 'XACT_ABORT': {
      const k = kind === 'XACT_COMMIT' ? KIND_XACT_COMMIT : KIND_XACT_ABORT;
      if (id !== ID_XACT || !kindMatches(k)) return null;
      const xactTime = readNumber();
      if (!Number.isFinite(xactTime)) return null;
      const droppedRels = readU32List();
      return droppedRels === null ? null : { kind, xactTime, droppedRels };
    }
    default:
      return null;
  }
}
