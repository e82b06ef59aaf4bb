/**
 * A 64-bit content hash built from two independent 32-bit lanes (MurmurHash3's block mix and an
 * FNV-1a-style multiply), fed 32-bit words. Not cryptographic: it exists so that two replicas can
 * compare a relation's visible contents in one string. Used by HeapStore.contentDigest.
 */

const C1 = 0xcc9e2d51;
import { fmix32 } from '../common/hash.ts';

const C2 = 0x1b873593;
const FNV_PRIME = 0x01000193;

export class ContentHasher {
  private a = 0x9747b28c;
  private b = 0x811c9dc5;
  private words = 0;

  /** Feed one 32-bit word (any integer; taken modulo 2^32). */
  word(w: number): void {
    let k = Math.imul(w | 0, C1);
    k = (k << 15) | (k >>> 17);
    k = Math.imul(k, C2);
    this.a ^= k;
    this.a = (this.a << 13) | (this.a >>> 19);
    this.a = (Math.imul(this.a, 5) + 0xe6546b64) | 0;
    this.b = Math.imul(this.b ^ (w & 0xffff), FNV_PRIME);
    this.b = Math.imul(this.b ^ (w >>> 16), FNV_PRIME);
    this.words++;
  }

  /** 16 lowercase hex digits. */
  hex(): string {
    const a = fmix32(this.a ^ this.words);
    const b = fmix32(this.b ^ Math.imul(this.words, C1));
    return a.toString(16).padStart(8, '0') + b.toString(16).padStart(8, '0');
  }
}
