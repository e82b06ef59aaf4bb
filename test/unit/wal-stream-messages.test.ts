/**
 * Streaming-replication messages: every type round-trips; garbage and malformed frames are refused
 * with protocol_violation naming the problem. Method: one sample per type, then hand-made bad frames.
 */
import { Packr, Unpackr } from 'msgpackr';
import { describe, expect, it } from 'vitest';
import { decodeMessage, encodeMessage, type StreamMessage } from '../../wal/stream-messages.ts';
import { WalsimError } from '../../common/errors.ts';

const SAMPLES: StreamMessage[] = [
  { type: 'IDENTIFY_SYSTEM' },
  {
    type: 'IdentifySystemReply',
    systemId: '7123456789012345678',
    timeline: 1,
    xlogpos: 0x1_0300_0060,
  },
  { type: 'START_REPLICATION', startLsn: 0x0100_0000, timeline: 1, applicationName: 'standby1' },
  {
    type: 'XLogData',
    walStart: 0x0100_0028,
    walEnd: 0x0200_0000,
    sendTime: 1_700_000_000_000,
    data: new Uint8Array([1, 2, 3, 0, 255]),
  },
  { type: 'PrimaryKeepalive', walEnd: 0x0200_0000, sendTime: 1.5, replyRequested: true },
  {
    type: 'StandbyStatusUpdate',
    writeLsn: 3,
    flushLsn: 2,
    applyLsn: 1,
    sendTime: 0,
    replyRequested: false,
  },
  { type: 'EndOfTimeline', timeline: 2, switchLsn: 0x0300_0060 },
  { type: 'TIMELINE_HISTORY', timeline: 2 },
  {
    type: 'TimelineHistoryReply',
    timeline: 2,
    fileName: '00000002.history',
    content: '1\t0/3000060\tpromoted\n',
  },
  { type: 'CopyDone' },
  { type: 'Error', code: '08P01', message: 'unexpected message' },
];

const raw = new Packr({ useRecords: false });

/**
 * decodeMessage reads its common frames itself: each field must be what msgpackr's decoder gives,
 * value and type (bytes as the same kind of view of the frame).
 */
function decodesAsMsgpackr(frame: Uint8Array): void {
  const theirs = new Unpackr({ useRecords: false, mapsAsObjects: true }).unpack(
    Buffer.from(frame),
  ) as unknown[];
  const mine = Object.values(decodeMessage(Buffer.from(frame)));
  expect(mine.length).toBe(theirs.length);
  for (let i = 0; i < mine.length; i++) {
    const [a, b] = [mine[i], theirs[i]];
    expect(typeof a).toBe(typeof b);
    if (b instanceof Uint8Array) {
      expect(Object.getPrototypeOf(a)).toBe(Object.getPrototypeOf(b));
      expect(Buffer.from(a as Uint8Array).equals(Buffer.from(b))).toBe(true);
    } else expect(Object.is(a, b)).toBe(true);
  }
}

function violation(bytes: Uint8Array): string {
  try {
    decodeMessage(bytes);
  } catch (e) {
    expect(e).toBeInstanceOf(WalsimError);
    expect((e as WalsimError).kind).toBe('protocol_violation');
    return (e as WalsimError).message;
  }
  throw new Error('accepted');
}

describe('stream messages', () => {
  it.each(SAMPLES.map((m) => [m.type, m] as const))('round-trips %s', (_t, m) => {
    const back = decodeMessage(encodeMessage(m));
    if (m.type === 'XLogData' && back.type === 'XLogData') {
      expect([...back.data]).toEqual([...m.data]);
      expect({ ...back, data: null }).toEqual({ ...m, data: null });
    } else {
      expect(back).toEqual(m);
    }
  });

  it('carries 128 kB of WAL in one XLogData frame with little overhead', () => {
    const data = new Uint8Array(128 * 1024).map((_, i) => i & 0xff);
    const frame = encodeMessage({
      type: 'XLogData',
      walStart: 0,
      walEnd: data.length,
      sendTime: 0,
      data,
    });
    expect(frame.length).toBeLessThan(data.length + 64);
  });

  it('refuses garbage, unknown types, wrong arity and mistyped fields, saying what was wrong', () => {
    expect(violation(new Uint8Array(0))).toMatch(/empty/);
    expect(violation(new Uint8Array([0xc1]))).toMatch(/expected \[type/);
    expect(violation(new Uint8Array([0x92, 0xa1]))).toMatch(/not valid msgpack/);
    expect(violation(raw.pack({ type: 'XLogData' }))).toMatch(/expected \[type/);
    expect(violation(raw.pack([42]))).toMatch(/type is 42/);
    expect(violation(raw.pack(['Hello']))).toMatch(/unknown message type "Hello"/);
    expect(violation(raw.pack(['START_REPLICATION', 1, 1]))).toMatch(/2 fields, expected 3/);
    expect(violation(raw.pack(['START_REPLICATION', -1, 1, 'a']))).toMatch(
      /startLsn must be an LSN/,
    );
    expect(violation(raw.pack(['START_REPLICATION', 2 ** 53, 1, 'a']))).toMatch(
      /startLsn must be an LSN/,
    );
    expect(violation(raw.pack(['START_REPLICATION', 1.5, 1, 'a']))).toMatch(/startLsn/);
    expect(violation(raw.pack(['START_REPLICATION', 1, 0, 'a']))).toMatch(/timeline/);
    expect(violation(raw.pack(['XLogData', 1, 2, 3, 'not bytes']))).toMatch(/data must be binary/);
    expect(violation(raw.pack(['PrimaryKeepalive', 1, 2, 1]))).toMatch(
      /replyRequested must be a boolean/,
    );
    // Times outside a JavaScript Date's range (1e300 once crashed the walsender).
    for (const t of [1e300, -1e300, 8.65e15, -8.65e15]) {
      expect(violation(raw.pack(['StandbyStatusUpdate', 1, 1, 1, t, false]))).toMatch(
        /sendTime must be a time in ms since 1970/,
      );
      expect(violation(raw.pack(['XLogData', 1, 2, t, new Uint8Array(0)]))).toMatch(
        /sendTime must be a time/,
      );
      expect(violation(raw.pack(['PrimaryKeepalive', 1, t, false]))).toMatch(
        /sendTime must be a time/,
      );
    }
    expect(decodeMessage(raw.pack(['StandbyStatusUpdate', 1, 1, 1, 8.64e15, false]))).toMatchObject(
      { sendTime: 8.64e15 },
    );
    expect(violation(raw.pack(['Error', 'oops', 'm']))).toMatch(/SQLSTATE/);
    expect(violation(raw.pack(['IdentifySystemReply', 12345, 1, 0]))).toMatch(/systemId/);
    expect(violation(raw.pack(['StandbyStatusUpdate', 1, 2, 3, 4, false]).subarray(0, 5))).toMatch(
      /msgpack/,
    );
    const withTrailing = new Uint8Array([...encodeMessage({ type: 'CopyDone' }), 0x00]);
    expect(violation(withTrailing)).toMatch(/not valid msgpack/);
  });

  it('refuses to encode a malformed message', () => {
    expect(() =>
      encodeMessage({ type: 'PrimaryKeepalive', walEnd: -5, sendTime: 0, replyRequested: false }),
    ).toThrow(/walEnd/);
    expect(() => encodeMessage({ type: 'Nope' } as unknown as StreamMessage)).toThrow(WalsimError);
  });

  it("writes msgpackr's exact bytes (the simulator's trace has each one's CRC), at each size", () => {
    const packr = new Packr({ useRecords: false, variableMapSize: true });
    const same = (m: StreamMessage) => {
      const mine = encodeMessage(m);
      const theirs = packr.pack(Object.values(decodeMessage(mine)));
      expect(Buffer.from(mine).equals(Buffer.from(theirs))).toBe(true);
      decodesAsMsgpackr(mine);
      decodesAsMsgpackr(theirs);
    };
    for (const m of SAMPLES) same(m);
    const numbers = [0, 1, 127, 128, 255, 256, 65535, 65536, 2 ** 32 - 1, 2 ** 32, 2 ** 40];
    for (const n of [...numbers, 2 ** 52 + 1, 1_767_225_600_123, 1.5, 0.25, 8.64e15]) {
      same({
        type: 'PrimaryKeepalive',
        walEnd: numbers[Math.floor(n) % numbers.length]!,
        sendTime: n,
        replyRequested: n > 1,
      });
      same({
        type: 'StandbyStatusUpdate',
        writeLsn: n === 1.5 ? 1 : Math.floor(n),
        flushLsn: 7,
        applyLsn: 2 ** 33 + 8,
        sendTime: -n,
        replyRequested: false,
      });
    }
    for (const len of [0, 1, 255, 256, 65535, 65536, 70000]) {
      const data = Uint8Array.from({ length: len }, (_, i) => (i * 31) & 0xff);
      same({
        type: 'XLogData',
        walStart: len,
        walEnd: len * 2 ** 20,
        sendTime: 1.7e12 + len,
        data,
      });
    }
    for (const name of [
      '',
      'a',
      'x'.repeat(31),
      'x'.repeat(32),
      'é',
      'standby_ünï',
      'x'.repeat(300),
    ])
      same({
        type: 'START_REPLICATION',
        startLsn: 40,
        timeline: 2 ** 32 - 1,
        applicationName: name,
      });
    same({
      type: 'Error',
      code: '57P01',
      message: 'terminating connection due to administrator command',
    });
  });
});
