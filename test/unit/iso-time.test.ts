/**
 * isoTimestamp is toISOString's text: checked at the edges of its range, around leap days and
 * century years, and on random times across years 0000–9999 (fast-check).
 */
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { isoTimestamp } from '../../common/iso-time.ts';

const iso = (ms: number) => new Date(ms).toISOString();

describe('isoTimestamp', () => {
  it('is toISOString at the edges, leap days, century years and the epoch', () => {
    const times = [
      0,
      -1,
      1,
      -62_167_219_200_000,
      253_402_300_799_999,
      Date.UTC(2000, 1, 29, 23, 59, 59, 999),
      Date.UTC(1900, 1, 28, 12),
      Date.UTC(2100, 2, 1),
      Date.UTC(2026, 0, 1),
      Date.UTC(1969, 11, 31, 23, 59, 59, 5),
      Date.UTC(999, 5, 6, 7, 8, 9, 10),
    ];
    for (const t of times) expect(isoTimestamp(t)).toBe(iso(t));
  });

  it('is toISOString for any time in years 0000-9999', () => {
    fc.assert(
      fc.property(fc.integer({ min: -62_167_219_200_000, max: 253_402_300_799_999 }), (t) => {
        expect(isoTimestamp(t)).toBe(iso(t));
      }),
      { numRuns: 20_000 },
    );
  });

  it('outside that range and for non-integers it is toISOString itself, RangeError included', () => {
    for (const t of [-62_167_219_200_001, 253_402_300_800_000, 8.64e15, 1.5])
      expect(isoTimestamp(t)).toBe(iso(t));
    expect(() => isoTimestamp(Number.NaN)).toThrow(RangeError);
    expect(() => isoTimestamp(8.64e15 + 1)).toThrow(RangeError);
  });
});
