/**
 * CRC-32C matches the Castagnoli check values and composes incrementally like PostgreSQL's
 * INIT/COMP/FIN macros. Method: published vectors, then chunked computations against one-shot ones.
 */
import { describe, expect, it } from 'vitest';
import { crc32c, crc32cFinish, crc32cUpdate, CRC32C_INIT } from '../../wal/crc32c.ts';

const ascii = (s: string): Uint8Array => new TextEncoder().encode(s);

/** Bit-at-a-time reference implementation. */
function crc32cSlow(buf: Uint8Array): number {
  let c = 0xffffffff;
  for (const b of buf) {
    c ^= b;
    for (let k = 0; k < 8; k++) c = c & 1 ? (c >>> 1) ^ 0x82f63b78 : c >>> 1;
  }
  return (c ^ 0xffffffff) >>> 0;
}

describe('crc32c', () => {
  it('matches the standard check value and RFC 3720 vectors', () => {
    expect(crc32c(ascii('123456789'))).toBe(0xe3069283);
    expect(crc32c(new Uint8Array(0))).toBe(0);
    expect(crc32c(new Uint8Array(32))).toBe(0x8a9136aa);
    expect(crc32c(new Uint8Array(32).fill(0xff))).toBe(0x62a8ab43);
    expect(crc32c(Uint8Array.from({ length: 32 }, (_, i) => i))).toBe(0x46dd794e);
    expect(crc32c(Uint8Array.from({ length: 32 }, (_, i) => 31 - i))).toBe(0x113fdb5c);
  });

  it('agrees with a bit-at-a-time reference on every length 0..100', () => {
    const buf = Uint8Array.from({ length: 100 }, (_, i) => (i * 131 + 7) & 0xff);
    for (let n = 0; n <= 100; n++)
      expect(crc32c(buf.subarray(0, n))).toBe(crc32cSlow(buf.subarray(0, n)));
  });

  it('chains finished values: crc32c(b, crc32c(a)) === crc32c(a ++ b)', () => {
    const all = ascii('the quick brown fox jumps over the lazy dog, twice over');
    for (let cut = 0; cut <= all.length; cut++) {
      expect(crc32c(all.subarray(cut), crc32c(all.subarray(0, cut)))).toBe(crc32c(all));
    }
  });

  it('runs an unfinished state through INIT / COMP / FIN over ranges, like pg_crc32c', () => {
    const all = ascii('123456789');
    let state = CRC32C_INIT;
    state = crc32cUpdate(state, all, 0, 4);
    state = crc32cUpdate(state, all, 4, 9);
    expect(crc32cFinish(state)).toBe(0xe3069283);
  });
});
