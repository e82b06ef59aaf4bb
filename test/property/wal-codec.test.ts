/**
 * Properties of the WAL codec, reader and stream messages over random inputs (fast-check, seed
 * printed; rerun with FC_SEED=<seed>). Method: random record sequences through segment files,
 * frames cut or corrupted at every offset, random mutations of bodies and of message frames.
 */
import * as fs from 'node:fs';
import * as path from 'node:path';
import fc from 'fast-check';
import { afterAll, describe, expect, it } from 'vitest';
import {
  createPayloadPackr,
  createPayloadUnpackr,
  decodeRecord,
  encodeRecord,
  InvalidWalRecordError,
  validateRecordBody,
} from '../../wal/codec.ts';
import { BODY_FIELDS, describeRecordBodyProblem } from '../../wal/record-shape.ts';
import { hotPayloadBound, readHotPayload, writeHotPayload } from '../../wal/payload-codec.ts';
import { WalWriter } from '../../wal/wal-writer.ts';
import { readWal } from '../../wal/wal-reader.ts';
import { segmentFileName, segmentOf, walDir } from '../../wal/segment.ts';
import { decodeMessage, encodeMessage, type StreamMessage } from '../../wal/stream-messages.ts';
import { WalsimError } from '../../common/errors.ts';
import type { WalRecordBody } from '../../wal/records.ts';
import { removeDir, tempDataDir } from '../unit/wal-helpers.ts';
import { nodeDisk } from '../../common/node-disk.ts';

const seed = Number(process.env.FC_SEED ?? Math.floor(Math.random() * 2 ** 31));
console.log(`wal-codec properties: FC_SEED=${seed}`);
const params = { seed, numRuns: 60 };

const u32 = fc.nat({ max: 0xffffffff });
const rel = fc.integer({ min: 16384, max: 20000 });
const lsn = fc.nat({ max: Number.MAX_SAFE_INTEGER });
// -0 is excluded: msgpack writes it as the integer 0, which is the same instant.
const time = fc.oneof(
  fc.nat({ max: 2 ** 45 }),
  fc.double({ noNaN: true, noDefaultInfinity: true }).filter((x) => !Object.is(x, -0)),
);
const ranges = fc
  .array(fc.tuple(fc.integer({ min: 1, max: 300 }), fc.integer({ min: 1, max: 300 })), {
    maxLength: 20,
  })
  .map((a) => a.flat());
const runs = fc
  .array(
    fc.tuple(fc.integer({ min: -(2 ** 40), max: 2 ** 40 }), fc.integer({ min: 1, max: 226 })),
    { maxLength: 10 },
  )
  .map((a) => a.flat());
const fork = fc.constantFrom(0 as const, 1 as const, 2 as const, 3 as const);

const bodyArb: fc.Arbitrary<WalRecordBody> = fc.oneof(
  fc.record({
    kind: fc.constantFrom('CHECKPOINT_SHUTDOWN' as const, 'CHECKPOINT_ONLINE' as const),
    redo: lsn,
    timeline: u32,
    prevTimeline: u32,
    nextXid: u32,
    nextRelFileNumber: u32,
    time,
  }),
  fc.record({
    kind: fc.constant('END_OF_RECOVERY' as const),
    newTimeline: u32,
    prevTimeline: u32,
    time,
  }),
  fc.constant({ kind: 'NOOP' as const }),
  fc.record({ kind: fc.constant('FPI' as const), rel, fork, block: u32 }),
  fc.record({
    kind: fc.constantFrom('XACT_COMMIT' as const, 'XACT_ABORT' as const),
    xactTime: time,
    droppedRels: fc.array(u32, { maxLength: 5 }),
  }),
  fc.record({ kind: fc.constant('SMGR_CREATE' as const), rel, fork }),
  fc.record({
    kind: fc.constant('SMGR_TRUNCATE' as const),
    rel,
    blkno: u32,
    flags: fc.integer({ min: 0, max: 7 }),
  }),
  fc.record({
    kind: fc.constant('CATALOG_UPDATE' as const),
    relname: fc.string({ maxLength: 64 }),
    rel: u32,
  }),
  fc.record({ kind: fc.constant('STANDBY_LOCK' as const), rel }),
  fc.record({
    kind: fc.constant('HEAP_INSERT' as const),
    rel,
    block: u32,
    offset: fc.integer({ min: 1, max: 291 }),
    value: fc.maxSafeInteger(),
    initPage: fc.boolean(),
  }),
  fc.record({ kind: fc.constant('HEAP_DELETE' as const), rel, block: u32, offsets: ranges }),
  fc.record({
    kind: fc.constant('HEAP2_MULTI_INSERT' as const),
    rel,
    block: u32,
    firstOffset: fc.integer({ min: 1, max: 226 }),
    runs,
    initPage: fc.boolean(),
  }),
  fc.record({
    kind: fc.constant('HEAP2_PRUNE' as const),
    rel,
    block: u32,
    latestRemovedXid: u32,
    offsets: ranges,
  }),
  fc.record({ kind: fc.constant('HEAP2_VISIBLE' as const), rel, block: u32 }),
);

/** Hot-kind bodies with values at every msgpack encoding boundary. */
const edgeU32 = fc.constantFrom(
  0,
  1,
  0x1f,
  0x20,
  0x3f,
  0x40,
  0x7f,
  0x80,
  0xff,
  0x100,
  0xffff,
  0x10000,
  0xffffffff,
);
const edgeInt = fc.oneof(
  edgeU32,
  fc.constantFrom(-1, -32, -33, -128, -129, -32768, -32769, -(2 ** 31), -(2 ** 31) - 1, 2 ** 32),
  fc.constantFrom(2 ** 53 - 1, -(2 ** 53) + 1),
);
const edgePositive = edgeU32.filter((v) => v > 0);
const edgeArray = (v: fc.Arbitrary<number>) =>
  fc.oneof(
    fc.array(v, { maxLength: 3 }),
    fc.integer({ min: 14, max: 17 }).chain((n) => fc.array(v, { minLength: n, maxLength: n })),
  );
const edgePairs = (a: fc.Arbitrary<number>, b: fc.Arbitrary<number>) =>
  fc
    .oneof(
      fc.array(fc.tuple(a, b), { maxLength: 2 }),
      fc.array(fc.tuple(a, b), { minLength: 7, maxLength: 9 }),
    )
    .map((x) => x.flat());
const edgeBodyArb: fc.Arbitrary<WalRecordBody> = fc.oneof(
  fc.record({
    kind: fc.constantFrom('XACT_COMMIT' as const, 'XACT_ABORT' as const),
    xactTime: fc.oneof(edgeInt, fc.constantFrom(1.5, -0.25, 1764646800123.5, 1e300)),
    droppedRels: edgeArray(edgeU32),
  }),
  fc.record({
    kind: fc.constant('HEAP_INSERT' as const),
    rel: edgeU32,
    block: edgeU32,
    offset: edgeU32,
    value: edgeInt,
    initPage: fc.boolean(),
  }),
  fc.record({
    kind: fc.constant('HEAP_DELETE' as const),
    rel: edgeU32,
    block: edgeU32,
    offsets: edgePairs(edgePositive, edgePositive),
  }),
  fc.record({
    kind: fc.constant('HEAP2_MULTI_INSERT' as const),
    rel: edgeU32,
    block: edgeU32,
    firstOffset: edgeU32,
    runs: edgePairs(edgeInt, edgePositive),
    initPage: fc.boolean(),
  }),
  fc.record({
    kind: fc.constant('HEAP2_PRUNE' as const),
    rel: edgeU32,
    block: edgeU32,
    latestRemovedXid: edgeU32,
    offsets: edgePairs(edgePositive, edgePositive),
  }),
  fc.record({ kind: fc.constant('HEAP2_VISIBLE' as const), rel: edgeU32, block: edgeU32 }),
);

const dirs: string[] = [];
afterAll(() => dirs.forEach(removeDir));

/** decodeRecord may only succeed or throw InvalidWalRecordError. */
function decodeOrTypedError(buf: Uint8Array, at: number): 'ok' | InvalidWalRecordError {
  try {
    decodeRecord(buf, 0, at);
    return 'ok';
  } catch (e) {
    if (e instanceof InvalidWalRecordError) return e;
    throw e;
  }
}

describe('WAL codec properties', () => {
  it('random record sequences round-trip through segment files, with writes and flushes anywhere', () => {
    fc.assert(
      fc.property(
        fc.array(fc.tuple(bodyArb, u32, fc.constantFrom('none', 'write', 'flush')), {
          minLength: 1,
          maxLength: 300,
        }),
        (ops) => {
          const dir = tempDataDir();
          dirs.push(dir);
          const w = WalWriter.open(dir, {
            segmentSize: 64 * 1024,
            timeline: 1,
            walBuffersBytes: 8192,
            disk: nodeDisk,
          });
          const lsns = ops.map(([b, xid, action]) => {
            const r = w.insert(b, xid);
            if (action === 'write') w.write();
            if (action === 'flush') w.flush();
            return r.startLsn;
          });
          w.close();
          const reader = readWal(dir, lsns[0]!, {
            timeline: 1,
            segmentSize: 64 * 1024,
            disk: nodeDisk,
          });
          const recs = [...reader];
          expect(reader.endReason).toBe('end_of_wal');
          expect(recs.map((r) => r.lsn)).toEqual(lsns);
          expect(recs.map((r) => r.body)).toEqual(ops.map(([b]) => b));
          expect(recs.map((r) => r.header.xid)).toEqual(ops.map(([, x]) => x));
          removeDir(dir);
        },
      ),
      { ...params, numRuns: 25 },
    );
  });

  it('a frame cut at any offset never crashes the decoder: truncated/zero error or (whole) success', () => {
    fc.assert(
      fc.property(bodyArb, u32, (body, xid) => {
        const frame = encodeRecord(body, xid, 0x1000);
        for (let cut = 0; cut <= frame.length; cut++) {
          const r = decodeOrTypedError(frame.subarray(0, cut), 0x2000);
          if (cut === frame.length) expect(r).toBe('ok');
          else expect((r as InvalidWalRecordError).reason).toMatch(/^(truncated|zero)$/);
        }
      }),
      params,
    );
  });

  it('any corrupted byte of a frame is caught by a typed error, never an exception of another kind', () => {
    fc.assert(
      fc.property(bodyArb, fc.nat(), fc.integer({ min: 1, max: 255 }), (body, pos, mask) => {
        const frame = encodeRecord(body, 9, 0x1000);
        const i = pos % frame.length;
        frame[i]! ^= mask;
        const r = decodeOrTypedError(frame, 0x2000);
        // Header fields decide the reason; a changed payload or CRC byte is a CRC failure.
        if (i >= 20) expect(r === 'ok' ? 'ok' : r.reason).toMatch(/bad_crc|bad_header|truncated/);
        else expect(r).not.toBe('ok');
      }),
      { ...params, numRuns: 300 },
    );
  });

  it('random bytes never crash the decoder', () => {
    fc.assert(
      fc.property(fc.uint8Array({ minLength: 0, maxLength: 200 }), (bytes) => {
        decodeOrTypedError(bytes, 0x2000);
      }),
      { ...params, numRuns: 500 },
    );
  });

  it('the reader treats a segment file cut at any point as a clean end after the records before it', () => {
    const dir = tempDataDir();
    dirs.push(dir);
    const seg = 64 * 1024;
    const w = WalWriter.open(dir, { segmentSize: seg, timeline: 1, disk: nodeDisk });
    const lsns: number[] = [];
    for (let i = 0; i < 40; i++)
      lsns.push(
        w.insert({ kind: 'XACT_COMMIT', xactTime: i, droppedRels: [i, i + 1] }, i).startLsn,
      );
    w.close();
    const file = path.join(walDir(dir), segmentFileName(1, segmentOf(lsns[0]!, seg), seg));
    const full = fs.readFileSync(file);
    const start = lsns[0]! % seg;
    for (let cut = start; cut <= full.length; cut++) {
      fs.writeFileSync(file, full.subarray(0, cut));
      const reader = readWal(dir, lsns[0]!, { timeline: 1, segmentSize: seg, disk: nodeDisk });
      const n = [...reader].length;
      expect(reader.endReason).toBe('end_of_wal');
      expect(n).toBe(
        lsns.filter((l, k) => (lsns[k + 1] ?? w.insertLsn) - seg <= cut && l >= 0).length,
      );
    }
  });

  it('validateRecordBody refuses any non-record value with a typed error only', () => {
    fc.assert(
      fc.property(
        fc.anything({
          withBigInt: true,
          withMap: true,
          withTypedArray: true,
          withNullPrototype: true,
        }),
        (v) => {
          try {
            validateRecordBody(v);
          } catch (e) {
            expect(e).toBeInstanceOf(InvalidWalRecordError);
          }
        },
      ),
      { ...params, numRuns: 500 },
    );
  });

  it("hot kinds: the hand-written payload is msgpackr's bytes and decodes to msgpackr's body", () => {
    const packr = createPayloadPackr();
    const unpackr = createPayloadUnpackr();
    fc.assert(
      fc.property(fc.oneof(bodyArb, edgeBodyArb), (body) => {
        const bound = hotPayloadBound(body);
        if (bound < 0) return;
        const out = new Uint8Array(bound + 3);
        const end = writeHotPayload(out, 3, body);
        expect(end - 3).toBeLessThanOrEqual(bound);
        const reference = packr.pack(body);
        expect(Buffer.from(out.subarray(3, end)).toString('hex')).toBe(
          Buffer.from(reference).toString('hex'),
        );
        expect(readHotPayload(out, 3, end, body.kind)).toEqual(unpackr.unpack(reference));
      }),
      { ...params, numRuns: 1000 },
    );
  });

  it('hot kinds: a mutated payload decodes as msgpackr + the shape check say, or falls back', () => {
    const unpackr = createPayloadUnpackr();
    fc.assert(
      fc.property(
        fc.oneof(bodyArb, edgeBodyArb),
        fc.array(fc.tuple(fc.nat(), fc.nat({ max: 255 })), { minLength: 1, maxLength: 3 }),
        fc.integer({ min: -2, max: 2 }),
        (body, edits, resize) => {
          const bound = hotPayloadBound(body);
          if (bound < 0) return;
          const buf = new Uint8Array(bound + 2);
          let end = writeHotPayload(buf, 0, body);
          for (const [at, v] of edits) buf[at % end] = v;
          end = Math.max(1, Math.min(buf.length, end + resize));
          const fast = readHotPayload(buf, 0, end, body.kind);
          if (fast === null) return; // the caller decodes it with msgpackr
          expect(describeRecordBodyProblem(fast)).toBeNull();
          expect(unpackr.unpack(buf.subarray(0, end))).toEqual(fast);
        },
      ),
      { ...params, numRuns: 3000 },
    );
  });

  it('the hot-path shape check agrees with the generic one on random mutations', () => {
    const values = fc.oneof(
      fc.constant(undefined),
      fc.constant(null),
      fc.boolean(),
      fc.integer(),
      fc.double(),
      fc.string(),
      fc.array(fc.integer({ min: -3, max: 300 }), { maxLength: 5 }),
      fc.constantFrom(2 ** 32, -1, 0, 2 ** 53),
    );
    fc.assert(
      fc.property(bodyArb, fc.nat(), values, (body, which, value) => {
        const fields = BODY_FIELDS[body.kind];
        if (fields.length === 0) return;
        const name = fields[which % fields.length]![0] as string;
        const mutated = { ...body, [name]: value } as Record<string, unknown>;
        const problem = describeRecordBodyProblem(mutated);
        // Re-run the generic check alone by hiding the kind from the fast path's switch.
        const generic = describeRecordBodyProblem(
          Object.assign(Object.create({ kind: body.kind }), mutated, { kind: body.kind }),
        );
        expect(problem === null).toBe(generic === null);
      }),
      { ...params, numRuns: 500 },
    );
  });
});

/** Stream-message times: within a JavaScript Date's range (decodeMessage refuses anything else). */
const streamTime = fc.oneof(
  fc.nat({ max: 2 ** 45 }),
  fc.double({ min: -8.64e15, max: 8.64e15, noNaN: true }).filter((x) => !Object.is(x, -0)),
);

const messageArb: fc.Arbitrary<StreamMessage> = fc.oneof(
  fc.constant({ type: 'IDENTIFY_SYSTEM' as const }),
  fc.record({
    type: fc.constant('IdentifySystemReply' as const),
    systemId: fc.bigInt({ min: 0n, max: 2n ** 64n - 1n }).map(String),
    timeline: fc.integer({ min: 1, max: 2 ** 32 - 1 }),
    xlogpos: lsn,
  }),
  fc.record({
    type: fc.constant('START_REPLICATION' as const),
    startLsn: lsn,
    timeline: fc.integer({ min: 1, max: 100 }),
    applicationName: fc.string(),
  }),
  fc.record({
    type: fc.constant('XLogData' as const),
    walStart: lsn,
    walEnd: lsn,
    sendTime: streamTime,
    data: fc.uint8Array({ maxLength: 300 }),
  }),
  fc.record({
    type: fc.constant('PrimaryKeepalive' as const),
    walEnd: lsn,
    sendTime: streamTime,
    replyRequested: fc.boolean(),
  }),
  fc.record({
    type: fc.constant('StandbyStatusUpdate' as const),
    writeLsn: lsn,
    flushLsn: lsn,
    applyLsn: lsn,
    sendTime: streamTime,
    replyRequested: fc.boolean(),
  }),
  fc.record({
    type: fc.constant('EndOfTimeline' as const),
    timeline: fc.integer({ min: 1, max: 100 }),
    switchLsn: lsn,
  }),
  fc.record({
    type: fc.constant('TIMELINE_HISTORY' as const),
    timeline: fc.integer({ min: 1, max: 100 }),
  }),
  fc.record({
    type: fc.constant('TimelineHistoryReply' as const),
    timeline: fc.integer({ min: 1, max: 100 }),
    fileName: fc.string(),
    content: fc.string(),
  }),
  fc.constant({ type: 'CopyDone' as const }),
  fc.record({
    type: fc.constant('Error' as const),
    code: fc.constantFrom('08P01', '55000', 'XX001'),
    message: fc.string(),
  }),
);

/** A message with its binary data as a plain array, for comparisons. */
function plain(m: StreamMessage): Record<string, unknown> {
  return m.type === 'XLogData' ? { ...m, data: Array.from(m.data) } : { ...m };
}

describe('stream message properties', () => {
  it('every message round-trips', () => {
    fc.assert(
      fc.property(messageArb, (m) => {
        expect(plain(decodeMessage(encodeMessage(m)))).toEqual(plain(m));
      }),
      { ...params, numRuns: 300 },
    );
  });

  it('a frame cut or corrupted anywhere is refused with protocol_violation or decodes to a valid message', () => {
    fc.assert(
      fc.property(messageArb, fc.nat(), fc.integer({ min: 0, max: 255 }), (m, pos, mask) => {
        const frame = encodeMessage(m);
        const i = pos % frame.length;
        for (const bytes of [
          frame.subarray(0, i),
          Uint8Array.from(frame, (b, k) => (k === i ? b ^ mask : b)),
        ]) {
          let back: StreamMessage | null = null;
          try {
            back = decodeMessage(bytes);
          } catch (e) {
            expect(e).toBeInstanceOf(WalsimError);
            expect((e as WalsimError).kind).toBe('protocol_violation');
          }
          // Whatever was accepted is a valid message: it encodes and decodes to itself, and its time
          // (if any) is a valid Date (a walsender formats the standby's sendTime as replyTime).
          if (back !== null) expect(plain(decodeMessage(encodeMessage(back)))).toEqual(plain(back));
          if (back !== null && 'sendTime' in back)
            expect(() => new Date(back.sendTime).toISOString()).not.toThrow();
        }
      }),
      { ...params, numRuns: 500 },
    );
  });
});
