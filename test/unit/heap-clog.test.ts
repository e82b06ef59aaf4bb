/**
 * The commit log keeps two bits per xid, reads unknown xids as in progress and never lets a final
 * status flip (INV-CLOG-1). Method: set statuses directly, check reads, growth to millions of
 * xids, the special xids of transam.c, and the serialize/deserialize round trip and its checks.
 */
import { describe, expect, it } from 'vitest';
import { InvariantViolation } from '../../common/assert.ts';
import { WalsimError } from '../../common/errors.ts';
import { Clog } from '../../storage/clog.ts';

describe('Clog', () => {
  it('reads an xid nobody set as in progress', () => {
    const clog = new Clog();
    expect(clog.status(3)).toBe('in_progress');
    expect(clog.status(10_000_000)).toBe('in_progress');
    expect(clog.isCommitted(3)).toBe(false);
  });

  it('records commits and aborts independently per xid', () => {
    const clog = new Clog();
    clog.setCommitted(3);
    clog.setAborted(4);
    clog.setCommitted(6);
    expect([3, 4, 5, 6, 7].map((x) => clog.status(x))).toEqual([
      'committed',
      'aborted',
      'in_progress',
      'committed',
      'in_progress',
    ]);
    expect(clog.isCommitted(6)).toBe(true);
    expect(clog.isAborted(4)).toBe(true);
  });

  it('grows to millions of xids', () => {
    const clog = new Clog();
    clog.setCommitted(5_000_003);
    clog.setAborted(5_000_004);
    expect(clog.status(5_000_003)).toBe('committed');
    expect(clog.status(5_000_004)).toBe('aborted');
    expect(clog.status(5_000_002)).toBe('in_progress');
    expect(clog.xidLimitExclusive).toBe(5_000_005);
  });

  it('reads bootstrap and frozen xids as committed and InvalidTransactionId as aborted', () => {
    const clog = new Clog();
    expect(clog.status(1)).toBe('committed');
    expect(clog.status(2)).toBe('committed');
    expect(clog.status(0)).toBe('aborted');
  });

  it('never lets a committed xid become aborted, or the reverse (INV-CLOG-1)', () => {
    const clog = new Clog();
    clog.setCommitted(3);
    clog.setAborted(4);
    expect(() => clog.setAborted(3)).toThrow(InvariantViolation);
    expect(() => clog.setCommitted(4)).toThrow(/INV-CLOG-1/);
    // Setting the same final status again is redo of the same record: allowed.
    clog.setCommitted(3);
    clog.setAborted(4);
    expect(clog.status(3)).toBe('committed');
  });

  it('refuses to set special or malformed xids (INV-CLOG-2)', () => {
    const clog = new Clog();
    for (const xid of [0, 1, 2, -5, 3.5, 2 ** 32])
      expect(() => clog.setCommitted(xid)).toThrow(/INV-CLOG-2/);
  });

  it('round-trips through serialize/deserialize', () => {
    const clog = new Clog();
    for (let xid = 3; xid < 20_000; xid++) {
      if (xid % 3 === 0) clog.setCommitted(xid);
      else if (xid % 3 === 1) clog.setAborted(xid);
    }
    const copy = Clog.deserialize(clog.serialize());
    const statuses = (c: Clog): string[] =>
      Array.from({ length: 20_010 }, (_, xid) => c.status(xid));
    expect(statuses(copy)).toEqual(statuses(clog));
    expect(copy.xidLimitExclusive).toBe(clog.xidLimitExclusive);
    expect(copy.serialize()).toEqual(clog.serialize());
  });

  it('reports malformed bytes as corrupt data', () => {
    const clog = new Clog();
    clog.setCommitted(7);
    const bytes = clog.serialize();
    const bad = (mutate: (b: Uint8Array) => Uint8Array): unknown => {
      try {
        Clog.deserialize(mutate(bytes.slice()));
      } catch (e) {
        return e;
      }
      return undefined;
    };
    for (const e of [
      bad((b) => b.subarray(0, 8)),
      bad((b) => {
        b[0] = 0;
        return b;
      }),
      bad((b) => b.subarray(0, b.length - 1)),
      bad((b) => {
        b[16 + 1] = 0xff;
        return b;
      }), // status code 3
      bad((b) => {
        b[16] = 0b01;
        return b;
      }), // a status for xid 0
    ]) {
      expect(e).toBeInstanceOf(WalsimError);
      expect((e as WalsimError).kind).toBe('io_error');
    }
  });
});
