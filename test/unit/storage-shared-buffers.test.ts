/**
 * shared_buffers parsing and SHOW formatting behave like PostgreSQL's GUC code for a block-unit
 * setting. Method: table of accepted values with their buffer counts, table of refused values
 * checked for WalsimError('invalid_input') naming the value and the accepted forms.
 */
import { describe, expect, it } from 'vitest';
import { WalsimError } from '../../common/errors.ts';
import {
  BLCKSZ,
  MAX_SHARED_BUFFERS,
  formatSharedBuffers,
  parseSharedBuffers,
} from '../../storage/shared-buffers.ts';

const GiB = 2 ** 30;

describe('parseSharedBuffers', () => {
  it.each([
    ['128MB', 16_384],
    ['1GB', 131_072],
    ['20GB', 2_621_440],
    ['100GB', 13_107_200],
    ['1TB', 134_217_728],
    ['512kB', 64],
    ['128kB', 16],
    ['16', 16],
    ['16384', 16_384],
    [' 128 MB ', 16_384],
    ['1.5GB', 196_608],
    ['0.5MB', 64],
    ['1e3', 1000],
    ['0x20', 32],
    ['020', 16], // octal, as strtol(…, 0) reads it
    ['131072B', 16],
  ])('accepts %j as %i buffers', (text, nBuffers) => {
    const r = parseSharedBuffers(text);
    expect(r.nBuffers).toBe(nBuffers);
    expect(r.bytes).toBe(nBuffers * BLCKSZ);
  });

  it('rounds a fractional value with a unit to the next smaller unit first (30.1GB = 30822MB)', () => {
    expect(parseSharedBuffers('30.1GB').nBuffers).toBe(30_822 * 128);
  });

  it('accepts 1TB on a 24 GiB machine', () => {
    expect(parseSharedBuffers('1TB', { totalMemBytes: 24 * GiB }).nBuffers).toBe(134_217_728);
  });

  it.each([
    ['abc', /not a number/],
    ['', /not a number/],
    ['   ', /not a number/],
    ['GB', /not a number/],
    ['0', /outside the valid range/],
    ['-1GB', /outside the valid range/],
    ['15', /outside the valid range/],
    ['8kB', /outside the valid range/],
    ['1000B', /outside the valid range/],
    ['1gb', /unknown unit "gb"/],
    ['128 MB x', /unknown unit/],
    ['08', /unknown unit "8"/],
    ['1.5.5GB', /unknown unit/],
    ['9TB', /outside the valid range/],
    ['1073741824', /outside the valid range/],
  ])('refuses %j', (text, why) => {
    let err: unknown;
    try {
      parseSharedBuffers(text, { totalMemBytes: 24 * GiB });
    } catch (e) {
      err = e;
    }
    expect(err).toBeInstanceOf(WalsimError);
    const w = err as WalsimError;
    expect(w.kind).toBe('invalid_input');
    expect(w.message).toContain(`"${text}"`);
    expect(w.message).toMatch(why);
    expect(w.message).toMatch(/"kB", "MB", "GB", "TB"/);
  });

  it('refuses INT_MAX/2 + 1 buffers but knows INT_MAX/2 is the range limit', () => {
    expect(() => parseSharedBuffers(String(MAX_SHARED_BUFFERS + 1))).toThrow(/16 \.\. 1073741823/);
  });

  it('refuses a pool larger than this machine can hold', () => {
    expect(() => parseSharedBuffers('100GB', { totalMemBytes: 1 * GiB })).toThrow(/GiB/);
    expect(() => parseSharedBuffers('4TB', { totalMemBytes: 8 * GiB })).toThrow(/more than the/);
  });
});

describe('formatSharedBuffers', () => {
  it.each([
    [16, '128kB'],
    [16_384, '128MB'],
    [131_072, '1GB'],
    [13_107_200, '100GB'],
    [134_217_728, '1TB'],
    [196_608, '1536MB'],
    [100, '800kB'],
  ])('formats %i buffers as %s', (n, text) => {
    expect(formatSharedBuffers(n)).toBe(text);
    expect(parseSharedBuffers(text).nBuffers).toBe(n);
  });
});
