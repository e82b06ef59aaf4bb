/**
 * LSN text form: PostgreSQL's %X/%X output and pg_lsn input syntax, including the inputs it rejects.
 * Method: format/parse known values and round trips; check bad inputs throw invalid_input naming the text.
 */
import { describe, expect, it } from 'vitest';
import { formatLsn, parseLsn } from '../../wal/lsn.ts';
import { WalsimError } from '../../common/errors.ts';
import { InvariantViolation } from '../../common/assert.ts';

describe('formatLsn', () => {
  it('prints upper and lower 32 bits in uppercase hex without padding', () => {
    expect(formatLsn(0)).toBe('0/0');
    expect(formatLsn(0x16b3748)).toBe('0/16B3748');
    expect(formatLsn(0x1_0000_0028)).toBe('1/28');
    expect(formatLsn(0xffff_ffff)).toBe('0/FFFFFFFF');
    expect(formatLsn(Number.MAX_SAFE_INTEGER)).toBe('1FFFFF/FFFFFFFF');
  });

  it('refuses values that are not safe non-negative integers', () => {
    for (const bad of [-1, 1.5, Number.NaN, 2 ** 53])
      expect(() => formatLsn(bad)).toThrow(InvariantViolation);
  });
});

describe('parseLsn', () => {
  it('parses what formatLsn prints, in either case', () => {
    for (const lsn of [
      0,
      40,
      0x0100_0028,
      0x1_0000_0000,
      0xabc_1234_5678,
      Number.MAX_SAFE_INTEGER,
    ]) {
      expect(parseLsn(formatLsn(lsn))).toBe(lsn);
    }
    expect(parseLsn('0/16b3748')).toBe(0x16b3748);
    expect(parseLsn(' 1/0 ')).toBe(0x1_0000_0000);
  });

  it.each([
    '',
    'abc',
    '1/',
    '/1',
    '123456789/0',
    '0/123456789',
    'G/0',
    '0/G',
    '1//2',
    '-1/0',
    '0x1/0',
  ])('rejects %j with invalid_input naming the text', (text) => {
    let err: unknown;
    try {
      parseLsn(text);
    } catch (e) {
      err = e;
    }
    expect(err).toBeInstanceOf(WalsimError);
    expect((err as WalsimError).kind).toBe('invalid_input');
    expect((err as WalsimError).message).toContain(`"${text}"`);
  });

  it('rejects LSNs beyond 2^53 bytes', () => {
    expect(() => parseLsn('FFFFFFFF/0')).toThrow(/2\^53/);
  });
});
