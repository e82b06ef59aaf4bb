/**
 * WAL record framing: an XLogRecord-like 24-byte header, a msgpack payload, CRC-32C, MAXALIGN.
 *
 * Entry points: `encodeRecord` (one frame), `RecordEncoder.append` (many frames into a ByteBuffer,
 * the hot path of the WAL writer), `decodeRecord` (validate + decode one frame), `readRecordHeader`
 * (header-only checks, used by the reader before it has the whole record), `validateRecordBody`
 * (the payload shape check of record-shape.ts as an InvalidWalRecordError, reused by the network
 * layer), `isEndOfWalAt`.
 *
 * Frame layout (little-endian), as PostgreSQL's XLogRecord (xlogrecord.h):
 *
 *   0  xl_tot_len u32   whole framed record incl. header (not incl. alignment padding)
 *   4  xl_xid     u32
 *   8  xl_prev    u64   written as two u32 (lo, hi); walsim LSNs are < 2^53
 *  16  xl_info    u8
 *  17  xl_rmid    u8
 *  18  pad        2 bytes, zero
 *  20  xl_crc     u32   CRC-32C over the payload, then over header bytes [0, 20)
 *  24  payload    msgpack of the WalRecordBody
 *      zero padding up to MAXALIGN(xl_tot_len)
 *
 * Payload encoding choice. msgpackr records with a fixed, predeclared `structures` list that the
 * encoder and every decoder share (PAYLOAD_STRUCTURES, append-only). A frame then starts with a
 * one-byte record id and carries only values, so it decodes on its own in any process, after any
 * restart, with no stream state. The alternative, records with the structure embedded in every
 * frame (a fresh Packr per frame), writes every key name in every frame: measured here ~2.3x
 * larger payloads (70 vs 30 bytes) and about a quarter of the decode rate, i.e. ~75% slower
 * (wal/README.md has the figures). An object whose key order matches no
 * predeclared structure still encodes, as a self-describing inline record definition, because
 * `maxSharedStructures` equals the list length so the encoder can never add a shared structure a
 * later process would not know. Each predeclared structure is flagged `isShared`, which makes
 * msgpackr restore it if an (untrusted) frame carries an inline definition with the same id.
 */
import { Packr, Unpackr, REUSE_BUFFER_MODE } from 'msgpackr';
import { fail } from '../common/assert.ts';
import { WalsimError } from '../common/errors.ts';
import { crc32cFinish, crc32cUpdate, CRC32C_INIT } from './crc32c.ts';
import { ByteBuffer } from './byte-buffer.ts';
import {
  HOT_STRUCTURES,
  hotPayloadBound,
  readHotPayload,
  writeHotPayload,
} from './payload-codec.ts';
import { formatLsn, InvalidLsn, type Lsn } from './lsn.ts';
import { describeRecordBodyProblem, isU32 } from './record-shape.ts';
import {
  RMGR_INFO,
  XLOG_HEAP_INIT_PAGE,
  type WalRecord,
  type WalRecordBody,
  type WalRecordKind,
} from './records.ts';

/** SizeOfXLogRecord: the fixed header. */
export const SIZE_OF_XLOG_RECORD = 24;
/** Offset of xl_crc in the header; the CRC covers header bytes before it. */
const XL_CRC_OFFSET = 20;
/** MAXIMUM_ALIGNOF. */
export const MAXALIGN_BYTES = 8;
/** Largest xl_tot_len accepted (PostgreSQL's XLogRecordMaxSize is 1020 MB; 1 GB here). */
export const MAX_RECORD_LENGTH = 1024 * 1024 * 1024;

const TWO_32 = 0x1_0000_0000;
/** hi word limit so that hi * 2^32 + lo stays a safe integer. */
const MAX_PREV_HI = 0x20_0000;

/** MAXALIGN: round up to 8 bytes (safe for LSNs beyond 2^32, unlike bit operations). */
export function maxAlign(n: number): number {
  return Math.ceil(n / MAXALIGN_BYTES) * MAXALIGN_BYTES;
}

export type InvalidWalReason =
  | 'zero' // xl_tot_len is 0: the zeroed tail after the last record (end of WAL)
  | 'truncated' // the frame runs past the bytes available (torn tail)
  | 'bad_length' // xl_tot_len below the header size or above MAX_RECORD_LENGTH
  | 'bad_header' // non-zero padding, unknown rmid, rmid/info not matching the body's kind
  | 'bad_prev_link' // xl_prev differs from the previous record's start
  | 'bad_crc'
  | 'bad_payload' // msgpack garbage or a body of the wrong shape
  | 'gap' // appendRaw: bytes start after the current end
  | 'overlap'; // appendRaw: bytes start before the current end

/** A WAL record failed validation at `lsn`. `segmentFile` names the file when it came from disk. */
export class InvalidWalRecordError extends WalsimError {
  constructor(
    readonly lsn: Lsn,
    readonly reason: InvalidWalReason,
    override readonly detail: string,
    readonly segmentFile?: string,
  ) {
    super(
      'invalid_wal',
      `invalid WAL record at ${formatLsn(lsn)}${segmentFile ? ` in segment file ${segmentFile}` : ''}: ${detail} (${reason})`,
    );
    this.name = 'InvalidWalRecordError';
  }

  /** The same error, naming the segment file the record was read from. */
  inFile(segmentFile: string): InvalidWalRecordError {
    return new InvalidWalRecordError(this.lsn, this.reason, this.detail, segmentFile);
  }
}

export function isInvalidWalRecordError(e: unknown): e is InvalidWalRecordError {
  return e instanceof InvalidWalRecordError;
}

// ---------------------------------------------------------------------------------------------
// Payload structures and the shape check (record-shape.ts)

/**
 * The predeclared msgpackr record structures, in a fixed order that is part of the on-disk format:
 * APPEND ONLY (a record id is the index + 0x40). Kinds sharing a key list share a structure.
 */
export const PAYLOAD_STRUCTURES: readonly (readonly string[])[] = [
  ['kind'],
  ['kind', 'redo', 'timeline', 'prevTimeline', 'nextXid', 'nextRelFileNumber', 'time'],
  ['kind', 'newTimeline', 'prevTimeline', 'time'],
  ['kind', 'xactTime', 'droppedRels'],
  ['kind', 'rel', 'fork'],
  ['kind', 'rel', 'blkno', 'flags'],
  ['kind', 'rel'],
  ['kind', 'rel', 'block', 'offset', 'value', 'initPage'],
  ['kind', 'rel', 'block', 'offsets'],
  ['kind', 'rel', 'block', 'firstOffset', 'runs', 'initPage'],
  ['kind', 'rel', 'block', 'latestRemovedXid', 'offsets'],
  ['kind', 'rel', 'block'],
  ['kind', 'relname', 'rel'],
  ['kind', 'rel', 'fork', 'block'],
];

// The hand-written hot-kind codec (payload-codec.ts) must name the same structures.
for (const [id, keys] of HOT_STRUCTURES) {
  if (!(PAYLOAD_STRUCTURES[id - 0x40]?.join() === keys.join()))
    fail(`INV-WAL-1: record id 0x${id.toString(16)} is not the structure ${keys.join()}`);
}

/**
 * Check that an untrusted value is a WalRecordBody (every field present with the right type) and
 * return it typed. Throws InvalidWalRecordError('bad_payload') naming `lsn` (InvalidLsn if unknown).
 */
export function validateRecordBody(body: unknown, lsn: Lsn = InvalidLsn): WalRecordBody {
  const problem = describeRecordBodyProblem(body);
  if (problem !== null) throw new InvalidWalRecordError(lsn, 'bad_payload', problem);
  return body as WalRecordBody;
}

/** xl_info for a body: the kind's opcode, plus XLOG_HEAP_INIT_PAGE for page-initialising inserts. */
export function recordInfo(body: WalRecordBody): number {
  const info = RMGR_INFO[body.kind].info;
  if ((body.kind === 'HEAP_INSERT' || body.kind === 'HEAP2_MULTI_INSERT') && body.initPage) {
    return info | XLOG_HEAP_INIT_PAGE;
  }
  return info;
}

/** The kind for each valid (rmid << 8 | xl_info), including XLOG_HEAP_INIT_PAGE variants. */
const KIND_BY_RMID_INFO: (WalRecordKind | undefined)[] = new Array<WalRecordKind | undefined>(
  65536,
).fill(undefined);
for (const [kind, { rmid, info }] of Object.entries(RMGR_INFO) as [
  WalRecordKind,
  { rmid: number; info: number },
][]) {
  const key = (rmid << 8) | info;
  if (KIND_BY_RMID_INFO[key] !== undefined)
    fail(`INV-WAL-1: kinds ${kind} and ${KIND_BY_RMID_INFO[key]} share rmid/info`);
  KIND_BY_RMID_INFO[key] = kind;
  if (kind === 'HEAP_INSERT' || kind === 'HEAP2_MULTI_INSERT')
    KIND_BY_RMID_INFO[key | XLOG_HEAP_INIT_PAGE] = kind;
}

/** KNOWN_RMID[rmid] is 1 for the resource managers walsim writes. */
const KNOWN_RMID = new Uint8Array(256);
for (const { rmid } of Object.values(RMGR_INFO)) KNOWN_RMID[rmid] = 1;

// ---------------------------------------------------------------------------------------------
// msgpackr instances

function sharedStructures(): string[][] {
  return PAYLOAD_STRUCTURES.map((keys) => Object.assign([...keys], { isShared: true }));
}

/** A Packr that only uses the predeclared structures (see the file header). */
export function createPayloadPackr(): Packr {
  const structures = sharedStructures();
  return new Packr({
    useRecords: true,
    structures,
    maxSharedStructures: structures.length,
    shouldShareStructure: () => false,
  });
}

export function createPayloadUnpackr(): Unpackr {
  const structures = sharedStructures();
  return new Unpackr({ useRecords: true, structures, maxSharedStructures: structures.length });
}

// ---------------------------------------------------------------------------------------------
// Encoding

function writeU32(b: Uint8Array, o: number, v: number): void {
  b[o] = v;
  b[o + 1] = v >>> 8;
  b[o + 2] = v >>> 16;
  b[o + 3] = v >>> 24;
}

function readU32(b: Uint8Array, o: number): number {
  return (b[o]! | (b[o + 1]! << 8) | (b[o + 2]! << 16) | (b[o + 3]! << 24)) >>> 0;
}

/**
 * Encodes records into frames. Not re-entrant; one per process (`sharedRecordEncoder`): `append` runs
 * to its end synchronously, and a frame's bytes do not depend on the frames encoded before it (the
 * predeclared structures only), so every WAL writer can use the same one.
 */
export class RecordEncoder {
  private readonly packr = createPayloadPackr();

  /**
   * Append the frame of `body` (with xl_xid `xid`, xl_prev `prev`) to `out`, zero-padded to
   * MAXALIGN. Returns xl_tot_len; the frame occupies maxAlign(xl_tot_len) bytes.
   */
  append(out: ByteBuffer, body: WalRecordBody, xid: number, prev: Lsn): number {
    const problem = describeRecordBodyProblem(body);
    if (problem !== null) fail(`INV-WAL-1: refusing to encode a malformed record body: ${problem}`);
    if (!isU32(xid)) fail(`INV-WAL-1: xid ${xid} is not an unsigned 32-bit integer`);
    if (!(Number.isSafeInteger(prev) && prev >= 0)) fail(`INV-WAL-1: prev ${prev} is not an LSN`);
    const bound = hotPayloadBound(body);
    let totalLength: number;
    if (bound >= 0) {
      // A hot kind: its payload is written in place (payload-codec.ts), no copy.
      out.reserve(SIZE_OF_XLOG_RECORD + bound + 8);
      const o = out.length;
      const payloadEnd = writeHotPayload(out.bytes, o + SIZE_OF_XLOG_RECORD, body);
      totalLength = payloadEnd - o;
      if (totalLength > MAX_RECORD_LENGTH)
        fail(`INV-WAL-1: record of ${totalLength} bytes exceeds the maximum`);
    } else {
      totalLength = this.packInto(out, body);
    }
    const space = (totalLength + 7) & ~7;
    const b = out.bytes;
    const o = out.length;
    writeU32(b, o, totalLength);
    writeU32(b, o + 4, xid);
    writeU32(b, o + 8, prev >>> 0);
    writeU32(b, o + 12, Math.floor(prev / TWO_32));
    b[o + 16] = recordInfo(body);
    b[o + 17] = RMGR_INFO[body.kind].rmid;
    b[o + 18] = 0;
    b[o + 19] = 0;
    for (let i = o + totalLength; i < o + space; i++) b[i] = 0;
    let crc = crc32cUpdate(CRC32C_INIT, b, o + SIZE_OF_XLOG_RECORD, o + totalLength);
    crc = crc32cFinish(crc32cUpdate(crc, b, o, o + XL_CRC_OFFSET));
    writeU32(b, o + XL_CRC_OFFSET, crc);
    out.length = o + space;
    return totalLength;
  }

  /**
   * msgpackr's encoding of `body` placed after the header slot at `out.length` (room for the
   * padding reserved too); returns xl_tot_len.
   */
  private packInto(out: ByteBuffer, body: WalRecordBody): number {
    // REUSE_BUFFER_MODE returns msgpackr's whole target buffer with the frame at [start, end).
    const packed = this.packr.pack(body, REUSE_BUFFER_MODE) as unknown as Uint8Array & {
      start: number;
      end: number;
    };
    const pStart = packed.start;
    const pEnd = packed.end;
    const totalLength = SIZE_OF_XLOG_RECORD + (pEnd - pStart);
    if (totalLength > MAX_RECORD_LENGTH)
      fail(`INV-WAL-1: record of ${totalLength} bytes exceeds the maximum`);
    out.reserve((totalLength + 7) & ~7);
    const b = out.bytes;
    // A byte loop beats Buffer#copy / set(subarray) for the typical 30-100 byte payload.
    for (let i = pStart, j = out.length + SIZE_OF_XLOG_RECORD; i < pEnd; i++, j++)
      b[j] = packed[i]!;
    return totalLength;
  }
}

let sharedEncoder: RecordEncoder | undefined;
let scratch: ByteBuffer | undefined;

/**
 * The process's RecordEncoder. A node start made its own: a msgpackr Packr each, whose encode
 * closure V8 allocates in the old generation (msgpackr assigns it to a property), so every one
 * kept its structures and transition tables through young-generation collections until a full one.
 */
export function sharedRecordEncoder(): RecordEncoder {
  sharedEncoder ??= new RecordEncoder();
  return sharedEncoder;
}

/** One framed record (MAXALIGN-padded, so frames can be concatenated into a WAL stream). */
export function encodeRecord(body: WalRecordBody, xid: number, prev: Lsn): Uint8Array {
  scratch ??= new ByteBuffer(4096);
  scratch.clear();
  sharedRecordEncoder().append(scratch, body, xid, prev);
  return scratch.bytes.slice(0, scratch.length);
}

// ---------------------------------------------------------------------------------------------
// Decoding

/** True when `buf` at `offset` holds the end of WAL: no room for a length word, or xl_tot_len 0. */
export function isEndOfWalAt(buf: Uint8Array, offset: number, end = buf.length): boolean {
  return end - offset < 4 || readU32(buf, offset) === 0;
}

/** True for the two failures that mean "no more WAL here" rather than corruption. */
export function isEndOfWalReason(reason: InvalidWalReason): boolean {
  return reason === 'zero' || reason === 'truncated';
}

/**
 * Check the header of the record at `buf[offset]` (LSN `lsn`) without needing the payload:
 * length sanity, zero padding, known rmid, prev-link (PostgreSQL's ValidXLogRecordHeader).
 * Needs SIZE_OF_XLOG_RECORD bytes (else 'truncated'). Returns xl_tot_len.
 */
export function readRecordHeader(
  buf: Uint8Array,
  offset: number,
  lsn: Lsn,
  expectedPrev?: Lsn,
  end = buf.length,
): number {
  const avail = end - offset;
  if (avail >= 4 && readU32(buf, offset) === 0) {
    throw new InvalidWalRecordError(lsn, 'zero', 'record length is zero: end of WAL');
  }
  if (avail < SIZE_OF_XLOG_RECORD) {
    throw new InvalidWalRecordError(
      lsn,
      'truncated',
      `only ${avail} bytes available, header needs ${SIZE_OF_XLOG_RECORD}`,
    );
  }
  const totalLength = readU32(buf, offset);
  if (totalLength < SIZE_OF_XLOG_RECORD || totalLength > MAX_RECORD_LENGTH) {
    throw new InvalidWalRecordError(
      lsn,
      'bad_length',
      `invalid record length ${totalLength}: expected at least ${SIZE_OF_XLOG_RECORD} and at most ${MAX_RECORD_LENGTH}`,
    );
  }
  if (buf[offset + 18] !== 0 || buf[offset + 19] !== 0) {
    throw new InvalidWalRecordError(lsn, 'bad_header', 'header padding bytes are not zero');
  }
  const rmid = buf[offset + 17]!;
  if (KNOWN_RMID[rmid] !== 1) {
    throw new InvalidWalRecordError(lsn, 'bad_header', `invalid resource manager ID ${rmid}`);
  }
  const hi = readU32(buf, offset + 12);
  if (hi >= MAX_PREV_HI) {
    throw new InvalidWalRecordError(
      lsn,
      'bad_header',
      `xl_prev high word ${hi} is beyond walsim's 2^53 LSN limit`,
    );
  }
  if (expectedPrev !== undefined) {
    const prev = hi * TWO_32 + readU32(buf, offset + 8);
    if (prev !== expectedPrev) {
      throw new InvalidWalRecordError(
        lsn,
        'bad_prev_link',
        `record with incorrect prev-link ${formatLsn(prev)}, expected ${formatLsn(expectedPrev)}`,
      );
    }
  }
  return totalLength;
}

let sharedUnpackr: Unpackr | undefined;
/**
 * Small payloads are copied here before unpacking: msgpackr decodes strings in JS only when the
 * source ends before byte 140, and otherwise calls the native extractor per string, which
 * measured slower than this copy for the `kind` string every record carries.
 */
const SMALL_PAYLOAD_BYTES = 128;
const smallPayload = new Uint8Array(SMALL_PAYLOAD_BYTES);

function unpackPayload(buf: Uint8Array, start: number, end: number, lsn: Lsn): unknown {
  if (start === end) return undefined;
  sharedUnpackr ??= createPayloadUnpackr();
  try {
    const n = end - start;
    if (n <= SMALL_PAYLOAD_BYTES) {
      for (let i = 0; i < n; i++) smallPayload[i] = buf[start + i]!;
      return sharedUnpackr.unpack(smallPayload, { start: 0, end: n });
    }
    return sharedUnpackr.unpack(buf, { start, end });
  } catch (e) {
    throw new InvalidWalRecordError(
      lsn,
      'bad_payload',
      `payload is not valid msgpack: ${(e as Error).message.slice(0, 100)}`,
    );
  }
}

/**
 * Validate and decode the frame at `buf[offset]`, which lives at `lsn` in the WAL stream. Checks,
 * in PostgreSQL's order: header (readRecordHeader), the whole MAXALIGNed frame available, zero
 * alignment padding, CRC, payload (msgpack + shape), rmid/info against the body's kind.
 * Throws InvalidWalRecordError with the reason; never anything else for bad bytes.
 */
export function decodeRecord(
  buf: Uint8Array,
  offset: number,
  lsn: Lsn,
  expectedPrev?: Lsn,
  end = buf.length,
): WalRecord {
  const totalLength = readRecordHeader(buf, offset, lsn, expectedPrev, end);
  const space = (totalLength + 7) & ~7;
  const storedCrc = checkFrame(buf, offset, lsn, totalLength, space, end);
  const info = buf[offset + 16]!;
  const rmid = buf[offset + 17]!;
  const body = decodeBody(buf, offset + SIZE_OF_XLOG_RECORD, offset + totalLength, lsn, info, rmid);
  return {
    lsn,
    endLsn: lsn + space,
    header: {
      totalLength,
      xid: readU32(buf, offset + 4),
      prev: readU32(buf, offset + 12) * TWO_32 + readU32(buf, offset + 8),
      info,
      rmid,
      crc: storedCrc,
    },
    body,
  };
}

/**
 * decodeRecord's checks of the whole frame after its header: all `space` (MAXALIGNed) bytes
 * available, zero alignment padding, then the CRC. Returns the stored xl_crc.
 */
function checkFrame(
  buf: Uint8Array,
  offset: number,
  lsn: Lsn,
  totalLength: number,
  space: number,
  end: number,
): number {
  if (end - offset < space) {
    throw new InvalidWalRecordError(
      lsn,
      'truncated',
      `record of ${totalLength} bytes (${space} aligned) runs past the ${end - offset} bytes available`,
    );
  }
  for (let i = offset + totalLength; i < offset + space; i++) {
    if (buf[i] !== 0)
      throw new InvalidWalRecordError(
        lsn,
        'bad_header',
        'alignment padding after the record is not zero',
      );
  }
  const storedCrc = readU32(buf, offset + XL_CRC_OFFSET);
  let crc = crc32cUpdate(CRC32C_INIT, buf, offset + SIZE_OF_XLOG_RECORD, offset + totalLength);
  crc = crc32cFinish(crc32cUpdate(crc, buf, offset, offset + XL_CRC_OFFSET));
  if (crc !== storedCrc) {
    throw new InvalidWalRecordError(
      lsn,
      'bad_crc',
      `incorrect resource manager data checksum: stored ${storedCrc.toString(16)}, computed ${crc.toString(16)}`,
    );
  }
  return storedCrc;
}

/**
 * decodeRecord's payload at [payloadStart, payloadEnd): the body, checked against the header's
 * rmid/info, with `kind` the interned constant of the header's kind.
 */
function decodeBody(
  buf: Uint8Array,
  payloadStart: number,
  payloadEnd: number,
  lsn: Lsn,
  info: number,
  rmid: number,
): WalRecordBody {
  // The header names the kind; compare instead of looking RMGR_INFO up by the decoded string (a
  // fresh, non-internalized string makes keyed lookups slow), then store the interned constant
  // so that the callers' switches and lookups on body.kind are fast too.
  const headerKind = KIND_BY_RMID_INFO[(rmid << 8) | info];
  // Hot kinds decode in place (payload-codec.ts); anything it does not accept goes through
  // msgpackr and the full shape check, which give the same body or the precise error.
  let body =
    headerKind === undefined ? null : readHotPayload(buf, payloadStart, payloadEnd, headerKind);
  if (body === null) {
    const decoded = unpackPayload(buf, payloadStart, payloadEnd, lsn);
    const problem = describeRecordBodyProblem(decoded);
    if (problem !== null) throw new InvalidWalRecordError(lsn, 'bad_payload', problem);
    body = decoded as WalRecordBody;
  }
  const initFlag = (info & XLOG_HEAP_INIT_PAGE) !== 0;
  if (
    headerKind === undefined ||
    headerKind !== body.kind ||
    ((body.kind === 'HEAP2_MULTI_INSERT' || body.kind === 'HEAP_INSERT') &&
      body.initPage !== initFlag)
  ) {
    throw new InvalidWalRecordError(
      lsn,
      'bad_header',
      `rmid ${rmid} / info 0x${info.toString(16)} do not match a ${body.kind} record ` +
        `(expected ${RMGR_INFO[body.kind].rmid} / 0x${recordInfo(body).toString(16)})`,
    );
  }
  (body as { kind: WalRecordKind }).kind = headerKind;
  return body;
}
