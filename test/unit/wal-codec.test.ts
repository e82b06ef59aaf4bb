/**
 * The record frame: XLogRecord-like header, CRC order, MAXALIGN, and one typed error per kind of
 * damage. Method: encode every record kind, check header bytes by hand, then damage frames one
 * field at a time and check decodeRecord's reason and message (LSN in X/X form).
 */
import { describe, expect, it } from 'vitest';
import {
  decodeRecord,
  encodeRecord,
  InvalidWalRecordError,
  isEndOfWalAt,
  maxAlign,
  PAYLOAD_STRUCTURES,
  readRecordHeader,
  RecordEncoder,
  SIZE_OF_XLOG_RECORD,
  validateRecordBody,
  type InvalidWalReason,
} from '../../wal/codec.ts';
import { BODY_FIELDS, describeRecordBodyProblem } from '../../wal/record-shape.ts';
import { ByteBuffer } from '../../wal/byte-buffer.ts';
import { crc32cFinish, crc32cUpdate, CRC32C_INIT } from '../../wal/crc32c.ts';
import { RMGR_INFO, XLOG_HEAP_INIT_PAGE } from '../../wal/records.ts';
import { ALL_BODIES, SAMPLE_BODIES } from './wal-helpers.ts';

const LSN = 0x1_0100_0028; // above 2^32 so the hi word of LSNs is exercised

function u32(b: Uint8Array, o: number): number {
  return new DataView(b.buffer, b.byteOffset, b.byteLength).getUint32(o, true);
}

function expectInvalid(
  f: () => unknown,
  reason: InvalidWalReason,
  lsn = LSN,
): InvalidWalRecordError {
  let err: unknown;
  try {
    f();
  } catch (e) {
    err = e;
  }
  expect(err).toBeInstanceOf(InvalidWalRecordError);
  const e = err as InvalidWalRecordError;
  expect(e.reason).toBe(reason);
  expect(e.kind).toBe('invalid_wal');
  expect(e.lsn).toBe(lsn);
  expect(e.message).toContain('1/1000028');
  return e;
}

describe('encodeRecord / decodeRecord', () => {
  it.each(ALL_BODIES.map((b) => [b.kind, b] as const))('round-trips %s', (_kind, body) => {
    const frame = encodeRecord(body, 1234, LSN - 64);
    expect(frame.length % 8).toBe(0);
    const rec = decodeRecord(frame, 0, LSN, LSN - 64);
    expect(rec.body).toEqual(body);
    expect(rec.lsn).toBe(LSN);
    expect(rec.endLsn).toBe(LSN + frame.length);
    expect(rec.header).toMatchObject({
      xid: 1234,
      prev: LSN - 64,
      rmid: RMGR_INFO[body.kind].rmid,
    });
    expect(maxAlign(rec.header.totalLength)).toBe(frame.length);
  });

  it('lays out the header like XLogRecord and computes the CRC over payload then header[0,20)', () => {
    const frame = encodeRecord(SAMPLE_BODIES.HEAP2_MULTI_INSERT, 77, 0x2_0000_1000);
    const totLen = u32(frame, 0);
    expect(u32(frame, 4)).toBe(77);
    expect(u32(frame, 8)).toBe(0x1000);
    expect(u32(frame, 12)).toBe(2);
    expect(frame[16]).toBe(0x50);
    expect(frame[17]).toBe(9);
    expect([frame[18], frame[19]]).toEqual([0, 0]);
    let crc = crc32cUpdate(CRC32C_INIT, frame, SIZE_OF_XLOG_RECORD, totLen);
    crc = crc32cFinish(crc32cUpdate(crc, frame, 0, 20));
    expect(u32(frame, 20)).toBe(crc);
    expect([...frame.subarray(totLen)].every((b) => b === 0)).toBe(true);
  });

  it('sets XLOG_HEAP_INIT_PAGE in xl_info for page-initialising inserts', () => {
    expect(encodeRecord({ ...SAMPLE_BODIES.HEAP2_MULTI_INSERT, initPage: true }, 0, 0)[16]).toBe(
      0x50 | XLOG_HEAP_INIT_PAGE,
    );
    expect(encodeRecord({ ...SAMPLE_BODIES.HEAP_INSERT, initPage: true }, 0, 0)[16]).toBe(
      XLOG_HEAP_INIT_PAGE,
    );
    expect(encodeRecord({ ...SAMPLE_BODIES.HEAP_INSERT, initPage: false }, 0, 0)[16]).toBe(0);
  });

  it('uses one predeclared structure per hot kind: payloads carry values, not key names', () => {
    const frame = encodeRecord(SAMPLE_BODIES.HEAP2_MULTI_INSERT, 0, 0);
    expect(new TextDecoder().decode(frame)).not.toContain('firstOffset');
    expect(frame.length).toBeLessThanOrEqual(64);
  });

  it('still encodes (self-describing) a body whose key order matches no predeclared structure', () => {
    const body = { block: 7, kind: 'HEAP2_VISIBLE', rel: 16384 } as const;
    const frame = encodeRecord(body, 0, 0);
    expect(decodeRecord(frame, 0, LSN).body).toEqual({
      kind: 'HEAP2_VISIBLE',
      rel: 16384,
      block: 7,
    });
    // ...and the shared decoder still decodes predeclared frames afterwards.
    const again = encodeRecord(SAMPLE_BODIES.HEAP2_VISIBLE, 0, 0);
    expect(decodeRecord(again, 0, LSN).body).toEqual(SAMPLE_BODIES.HEAP2_VISIBLE);
  });

  it('appends many frames into one growing buffer that decodes as a chain', () => {
    const enc = new RecordEncoder();
    const out = new ByteBuffer(16);
    const lsns: number[] = [];
    let prev = 0;
    for (let i = 0; i < 1000; i++) {
      const lsn = LSN + out.length;
      enc.append(out, ALL_BODIES[i % ALL_BODIES.length]!, i, prev);
      lsns.push(lsn);
      prev = lsn;
    }
    let off = 0;
    prev = 0;
    for (let i = 0; i < 1000; i++) {
      const rec = decodeRecord(out.bytes, off, LSN + off, i === 0 ? undefined : prev, out.length);
      expect(rec.lsn).toBe(lsns[i]);
      expect(rec.body).toEqual(ALL_BODIES[i % ALL_BODIES.length]);
      prev = rec.lsn;
      off = rec.endLsn - LSN;
    }
    expect(off).toBe(out.length);
  });

  it('asserts (programmer error) on a malformed body instead of writing it', () => {
    expect(() =>
      encodeRecord({ kind: 'HEAP_DELETE', rel: 1, block: -1, offsets: [] } as never, 0, 0),
    ).toThrow(/INV-WAL-1/);
  });
});

describe('decodeRecord refuses damaged frames with a typed reason', () => {
  const good = (): Uint8Array => encodeRecord(SAMPLE_BODIES.HEAP2_PRUNE, 5, LSN - 48);

  it('bad_crc: a flipped payload byte', () => {
    const f = good();
    f[SIZE_OF_XLOG_RECORD + 3]! ^= 0x10;
    expect(expectInvalid(() => decodeRecord(f, 0, LSN), 'bad_crc').message).toMatch(/checksum/);
  });

  it('bad_crc: a flipped xl_xid byte (the header is covered too)', () => {
    const f = good();
    f[4]! ^= 1;
    expectInvalid(() => decodeRecord(f, 0, LSN), 'bad_crc');
  });

  it('bad_prev_link: xl_prev differs from the expected predecessor', () => {
    const e = expectInvalid(() => decodeRecord(good(), 0, LSN, LSN - 96), 'bad_prev_link');
    expect(e.message).toContain('prev-link 1/FFFFF8, expected 1/FFFFC8');
  });

  it('bad_length: below the header size or above the maximum', () => {
    const f = good();
    new DataView(f.buffer).setUint32(0, 10, true);
    expectInvalid(() => decodeRecord(f, 0, LSN), 'bad_length');
    new DataView(f.buffer).setUint32(0, 0x7000_0000, true);
    expectInvalid(() => decodeRecord(f, 0, LSN), 'bad_length');
  });

  it('truncated: the frame runs past the bytes available', () => {
    const f = good();
    expectInvalid(() => decodeRecord(f.subarray(0, f.length - 8), 0, LSN), 'truncated');
    expectInvalid(() => decodeRecord(f.subarray(0, 10), 0, LSN), 'truncated');
  });

  it('zero: xl_tot_len 0 is the end of WAL, recognisable without an exception too', () => {
    const z = new Uint8Array(64);
    expectInvalid(() => decodeRecord(z, 0, LSN), 'zero');
    expect(isEndOfWalAt(z, 0)).toBe(true);
    expect(isEndOfWalAt(good(), 0)).toBe(false);
    expect(isEndOfWalAt(good(), 0, 2)).toBe(true);
  });

  it('bad_header: non-zero pad bytes, unknown rmid, rmid/info not matching the body', () => {
    let f = good();
    f[18] = 1;
    expectInvalid(() => decodeRecord(f, 0, LSN), 'bad_header');
    f = good();
    f[17] = 77;
    expectInvalid(() => readRecordHeader(f, 0, LSN), 'bad_header');
    // A CRC-valid frame whose rmid/info claim another kind: re-sign it after changing xl_info.
    f = good();
    f[16] = 0x40;
    const totLen = u32(f, 0);
    let crc = crc32cUpdate(CRC32C_INIT, f, SIZE_OF_XLOG_RECORD, totLen);
    crc = crc32cFinish(crc32cUpdate(crc, f, 0, 20));
    new DataView(f.buffer).setUint32(20, crc, true);
    expect(expectInvalid(() => decodeRecord(f, 0, LSN), 'bad_header').message).toMatch(
      /HEAP2_PRUNE/,
    );
  });

  it('bad_header: non-zero alignment padding after the record', () => {
    const f = good();
    const totLen = u32(f, 0);
    if (totLen % 8 !== 0) {
      f[f.length - 1] = 9;
      expectInvalid(() => decodeRecord(f, 0, LSN), 'bad_header');
    }
  });
});

describe('validateRecordBody', () => {
  it('accepts every sample body and returns it', () => {
    for (const b of ALL_BODIES) expect(validateRecordBody(b)).toBe(b);
  });

  it.each([
    [null, /not an object/],
    [[1, 2], /not an object/],
    [{ kind: 'NOPE' }, /unknown record kind/],
    [{ kind: 10n }, /unknown record kind bigint 10/],
    [new Map([['kind', 'NOOP']]), /unknown record kind nothing/],
    [{ kind: 'HEAP_DELETE', rel: 1, block: 2 }, /HEAP_DELETE.offsets .*missing/],
    [{ kind: 'HEAP_DELETE', rel: 1, block: 2, offsets: [1] }, /even-length/],
    [{ kind: 'HEAP_DELETE', rel: 1, block: 2, offsets: [0, 1] }, /positive/],
    [
      {
        kind: 'HEAP2_MULTI_INSERT',
        rel: 1,
        block: 2,
        firstOffset: 1,
        runs: [5, 0],
        initPage: true,
      },
      /counts >= 1/,
    ],
    [
      { kind: 'HEAP2_MULTI_INSERT', rel: 1, block: 2, firstOffset: 1, runs: [5, 1], initPage: 1 },
      /boolean/,
    ],
    [{ kind: 'SMGR_CREATE', rel: 1, fork: 4 }, /fork/],
    [{ kind: 'SMGR_TRUNCATE', rel: 2 ** 32, blkno: 0, flags: 0 }, /rel must be an unsigned 32-bit/],
    [{ ...SAMPLE_BODIES.CHECKPOINT_SHUTDOWN, kind: 'CHECKPOINT_ONLINE', redo: 2 ** 53 }, /LSN/],
    [{ kind: 'CATALOG_UPDATE', relname: 5, rel: 1 }, /string/],
    [{ kind: 'XACT_COMMIT', xactTime: Number.NaN, droppedRels: [] }, /finite/],
    [{ kind: 'HEAP_INSERT', rel: 1, block: 1, offset: 1, value: 10n, initPage: false }, /bigint/],
  ])('refuses malformed body #%#', (body, message) => {
    const e = expectInvalid(() => validateRecordBody(body, LSN), 'bad_payload');
    expect(e.message).toMatch(message);
    expect(describeRecordBodyProblem(body)).toMatch(message);
  });
});

describe('payload format', () => {
  it('has a predeclared structure for every kind (key lists in records.ts order)', () => {
    const lists = PAYLOAD_STRUCTURES.map((k) => k.join(','));
    for (const [kind, fields] of Object.entries(BODY_FIELDS)) {
      expect(lists, kind).toContain(['kind', ...fields.map((f) => f[0])].join(','));
    }
  });

  it('keeps the structure list append-only (record ids are on disk)', () => {
    expect(PAYLOAD_STRUCTURES.slice(0, 3).map((k) => k.join(','))).toEqual([
      'kind',
      'kind,redo,timeline,prevTimeline,nextXid,nextRelFileNumber,time',
      'kind,newTimeline,prevTimeline,time',
    ]);
  });
});
