/** A growable byte buffer for append-heavy paths (WAL buffers, batch encoding): amortised O(1) append, no per-append concat. */
import { fail } from '../common/assert.ts';

export class ByteBuffer {
  bytes: Uint8Array;
  /** Bytes in use: `bytes[0, length)`. */
  length = 0;

  constructor(capacityBytes = 64 * 1024) {
    if (!(Number.isSafeInteger(capacityBytes) && capacityBytes > 0))
      fail(`INV-WAL-3: bad capacity ${capacityBytes}`);
    this.bytes = new Uint8Array(capacityBytes);
  }

  /** Make room for `n` more bytes after `length`, doubling the capacity as needed. */
  reserve(n: number): void {
    const needed = this.length + n;
    if (needed <= this.bytes.length) return;
    let capacity = this.bytes.length * 2;
    while (capacity < needed) capacity *= 2;
    const grown = new Uint8Array(capacity);
    grown.set(this.bytes.subarray(0, this.length));
    this.bytes = grown;
  }

  append(src: Uint8Array): void {
    this.reserve(src.length);
    this.bytes.set(src, this.length);
    this.length += src.length;
  }

  /** Drop the first `n` bytes, moving the rest to the front. */
  consume(n: number): void {
    if (!(n >= 0 && n <= this.length)) fail(`INV-WAL-3: consume ${n} of ${this.length}`);
    if (n === this.length) {
      this.length = 0;
      return;
    }
    this.bytes.copyWithin(0, n, this.length);
    this.length -= n;
  }

  clear(): void {
    this.length = 0;
  }

  /** A view of the used bytes (shares memory; valid until the next append). */
  view(): Uint8Array {
    return this.bytes.subarray(0, this.length);
  }
}
