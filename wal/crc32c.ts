/**
 * CRC-32C (Castagnoli, reflected polynomial 0x82F63B78), slice-by-8, as PostgreSQL's pg_crc32c.
 *
 * Entry points: `crc32c(buf, crc?)` for one-shot or chained use (zlib convention: pass the
 * previous *finished* value), and the PostgreSQL-shaped trio `CRC32C_INIT` / `crc32cUpdate` /
 * `crc32cFinish` (INIT_CRC32C / COMP_CRC32C / FIN_CRC32C) for a running, unfinished state.
 * `crc32c(b, crc32c(a)) === crc32c(a ++ b)` and
 * `crc32cFinish(crc32cUpdate(crc32cUpdate(CRC32C_INIT, a), b)) === crc32c(a ++ b)`.
 */

const POLY_REFLECTED = 0x82f63b78;

/** INIT_CRC32C: the running state before any byte. */
export const CRC32C_INIT = 0xffffffff;

/** Eight 256-entry tables: T[k][b] is the CRC of byte b followed by k zero bytes. */
const TABLE = buildTables();
const T0 = TABLE.subarray(0, 256);
const T1 = TABLE.subarray(256, 512);
const T2 = TABLE.subarray(512, 768);
const T3 = TABLE.subarray(768, 1024);
const T4 = TABLE.subarray(1024, 1280);
const T5 = TABLE.subarray(1280, 1536);
const T6 = TABLE.subarray(1536, 1792);
const T7 = TABLE.subarray(1792, 2048);

function buildTables(): Int32Array {
  const t = new Int32Array(8 * 256);
  for (let n = 0; n < 256; n++) {
    let c = n;
    for (let k = 0; k < 8; k++) c = c & 1 ? (c >>> 1) ^ POLY_REFLECTED : c >>> 1;
    t[n] = c;
  }
  for (let n = 0; n < 256; n++) {
    let c = t[n]!;
    for (let k = 1; k < 8; k++) {
      c = t[c & 0xff]! ^ (c >>> 8);
      t[k * 256 + n] = c;
    }
  }
  return t;
}

/**
 * COMP_CRC32C: feed `buf[start, end)` into a running (unfinished) state and return the new state.
 * The state is an unsigned 32-bit value; start from CRC32C_INIT and end with crc32cFinish.
 */
export function crc32cUpdate(state: number, buf: Uint8Array, start = 0, end = buf.length): number {
  let c = state | 0;
  let i = start;
  // Slice-by-8 main loop: two little-endian words per step, eight table lookups.
  const end8 = end - ((end - i) & 7);
  while (i < end8) {
    const lo = c ^ (buf[i]! | (buf[i + 1]! << 8) | (buf[i + 2]! << 16) | (buf[i + 3]! << 24));
    const hi = buf[i + 4]! | (buf[i + 5]! << 8) | (buf[i + 6]! << 16) | (buf[i + 7]! << 24);
    c =
      T7[lo & 0xff]! ^
      T6[(lo >>> 8) & 0xff]! ^
      T5[(lo >>> 16) & 0xff]! ^
      T4[lo >>> 24]! ^
      T3[hi & 0xff]! ^
      T2[(hi >>> 8) & 0xff]! ^
      T1[(hi >>> 16) & 0xff]! ^
      T0[hi >>> 24]!;
    i += 8;
  }
  while (i < end) c = T0[(c ^ buf[i++]!) & 0xff]! ^ (c >>> 8);
  return c >>> 0;
}

/** FIN_CRC32C: the final XOR. */
export function crc32cFinish(state: number): number {
  return (state ^ 0xffffffff) >>> 0;
}

/**
 * CRC-32C of `buf`. `crc` is a previous *finished* result to continue from (default 0, i.e. a
 * fresh computation), so chunks can be chained: crc32c(b, crc32c(a)) equals crc32c(a ++ b).
 */
export function crc32c(buf: Uint8Array, crc = 0): number {
  return crc32cFinish(crc32cUpdate(crc32cFinish(crc >>> 0), buf));
}
