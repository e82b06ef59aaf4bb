/** 32-bit hashing helpers shared by the buffer mapping table and the heap content digest. */

/** murmur3's finalizer (fmix32): every input bit reaches every output bit; unsigned result. */
export function fmix32(h: number): number {
  h ^= h >>> 16;
  h = Math.imul(h, 0x85ebca6b);
  h ^= h >>> 13;
  h = Math.imul(h, 0xc2b2ae35);
  h ^= h >>> 16;
  return h >>> 0;
}
