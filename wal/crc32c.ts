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

/**
 * Eight 256-entry tables in one array: TABLE[k * 256 + b] is the CRC of byte b followed by k zero
 * bytes. One array (constant offsets) measured ~30% faster than eight separate subarrays.
 */
const TABLE = buildTables();

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

/** A copy of the eight tables (TABLE[k * 256 + b]), for a WebAssembly CRC-32C to read. */
export function crc32cTables(): Int32Array {
  return TABLE.slice();
}

/**
 * COMP_CRC32C: feed `buf[start, end)` into a running (unfinished) state and return the new state.
 * The state is an unsigned 32-bit value; start from CRC32C_INIT and end with crc32cFinish.
 */
export function crc32cUpdate(state: number, buf: Uint8Array, start = 0, end = buf.length): number {
  let c = state | 0;
  let i = start;
  // Slice-by-8 main loop: eight bytes per step, eight table lookups.
  const end8 = end - ((end - i) & 7);
  while (i < end8) {
    const lo = c ^ (buf[i]! | (buf[i + 1]! << 8) | (buf[i + 2]! << 16) | (buf[i + 3]! << 24));
    c =
      TABLE[1792 + (lo & 0xff)]! ^
      TABLE[1536 + ((lo >>> 8) & 0xff)]! ^
      TABLE[1280 + ((lo >>> 16) & 0xff)]! ^
      TABLE[1024 + (lo >>> 24)]! ^
      TABLE[768 + buf[i + 4]!]! ^
      TABLE[512 + buf[i + 5]!]! ^
      TABLE[256 + buf[i + 6]!]! ^
      TABLE[buf[i + 7]!]!;
    i += 8;
  }
  while (i < end) c = TABLE[(c ^ buf[i++]!) & 0xff]! ^ (c >>> 8);
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
