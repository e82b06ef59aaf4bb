/**
 * The shared_buffers setting: parse it like PostgreSQL's GUC code, format it like SHOW.
 *
 * Entry points: `parseSharedBuffers(text)`, `formatSharedBuffers(nBuffers)`, `BLCKSZ`.
 *
 * Accepted forms follow guc.c parse_int + convert_to_base_unit (PG12+) for a GUC_UNIT_BLOCKS
 * integer setting:
 *   - a plain number = that many 8 kB buffers; decimal, hexadecimal (`0x…`) or octal (leading `0`),
 *     a decimal may have a fraction or exponent and is rounded to the nearest integer;
 *   - a number followed (optionally after spaces) by a case-sensitive memory unit B, kB, MB, GB, TB
 *     (multiples of 1024). A fractional value with a unit is first rounded to a multiple of the next
 *     smaller unit ('1.5GB' = 1536MB = 196,608 buffers), then to whole buffers;
 *   - the result must lie in 16 .. INT_MAX/2 buffers (PostgreSQL's range for shared_buffers).
 * walsim adds one check PostgreSQL leaves to the kernel: the pool's typed arrays must fit in this
 * machine's memory with headroom (see `maxSimulatedPoolBytes`).
 */
import os from 'node:os';
import { constants as bufferConstants } from 'node:buffer';
import { WalsimError } from '../common/errors.ts';
import { estimatePoolBytes } from './buffer-pool.ts';
import { bufTableCapacity } from './buf-table.ts';

/** Block size in bytes (pg_config.h BLCKSZ). */
export const BLCKSZ = 8192;
/** PostgreSQL's minimum for shared_buffers: 16 buffers (128 kB). */
export const MIN_SHARED_BUFFERS = 16;
/** PostgreSQL's maximum for shared_buffers: INT_MAX / 2 buffers. */
export const MAX_SHARED_BUFFERS = Math.floor(0x7fffffff / 2);

const ACCEPTED_FORMS =
  'expected a whole number of 8kB buffers (e.g. 16384) or a size with one of the units ' +
  '"B", "kB", "MB", "GB", "TB" (e.g. 128MB, 1.5GB, 100GB)';

/** Memory units for a GUC_UNIT_BLOCKS setting, largest first: multiplier in 8 kB blocks. */
const BLOCK_UNITS: ReadonlyArray<{ unit: string; blocks: number }> = [
  { unit: 'TB', blocks: (1024 * 1024 * 1024) / 8 },
  { unit: 'GB', blocks: (1024 * 1024) / 8 },
  { unit: 'MB', blocks: 1024 / 8 },
  { unit: 'kB', blocks: 1 / 8 },
  { unit: 'B', blocks: 1 / BLCKSZ },
];

/** C rint() in the default rounding mode: to nearest, ties to even. */
function rint(x: number): number {
  const r = Math.round(x);
  return Math.abs(x % 1) === 0.5 && r % 2 !== 0 ? r - 1 : r;
}

/** The machine's memory, read once (os.totalmem() is a system call; the simulator opens nodes by the thousand). */
let machineMemBytes: number | null = null;

/** Bytes of typed arrays walsim lets a pool take: 75 % of this machine's memory minus 1 GiB. */
export function maxSimulatedPoolBytes(
  totalMemBytes: number = (machineMemBytes ??= os.totalmem()),
): number {
  return Math.max(0, totalMemBytes * 0.75 - 2 ** 30);
}

function invalid(text: string, why: string): WalsimError {
  return new WalsimError(
    'invalid_input',
    `invalid value for parameter "shared_buffers": "${text}": ${why}; ${ACCEPTED_FORMS}`,
  );
}

/** strtol(…, 0) then, if a '.', 'e' or 'E' follows, strtod: the numeric prefix and the rest. */
function parseNumberPrefix(s: string): { value: number; rest: string } | null {
  const int = /^[ \t\n\r\f\v]*([+-]?)(0[xX][0-9a-fA-F]+|0[0-7]*|[1-9][0-9]*)/.exec(s);
  if (int) {
    const rest = s.slice(int[0].length);
    if (!/^[.eE]/.test(rest)) {
      const digits = int[2]!;
      const magnitude = /^0[xX]/.test(digits)
        ? parseInt(digits.slice(2), 16)
        : digits.length > 1 && digits[0] === '0'
          ? parseInt(digits, 8)
          : parseInt(digits, 10);
      return { value: int[1] === '-' ? -magnitude : magnitude, rest };
    }
  }
  const dec = /^[ \t\n\r\f\v]*[+-]?([0-9]+\.?[0-9]*|\.[0-9]+)([eE][+-]?[0-9]+)?/.exec(s);
  if (!dec) return null;
  return { value: Number(dec[0].trim()), rest: s.slice(dec[0].length) };
}

export interface ParseSharedBuffersOptions {
  /** Memory of the machine; defaults to os.totalmem(). For tests. */
  totalMemBytes?: number;
}

/**
 * Parse a shared_buffers value. Returns NBuffers and the size in bytes (NBuffers × BLCKSZ).
 * Throws WalsimError('invalid_input') naming the value and the accepted forms.
 */
export function parseSharedBuffers(
  text: string,
  options: ParseSharedBuffersOptions = {},
): { nBuffers: number; bytes: number } {
  const parsed = parseNumberPrefix(text);
  if (!parsed || !Number.isFinite(parsed.value)) throw invalid(text, 'not a number');
  let value = parsed.value;
  const unitText = parsed.rest.replace(/^[ \t\n\r\f\v]+/, '').replace(/[ \t\n\r\f\v]+$/, '');
  if (unitText !== '') {
    const i = BLOCK_UNITS.findIndex((u) => u.unit === unitText);
    if (i < 0) throw invalid(text, `unknown unit "${unitText}" (units are case-sensitive)`);
    value *= BLOCK_UNITS[i]!.blocks;
    const smaller = BLOCK_UNITS[i + 1];
    if (smaller) value = rint(value / smaller.blocks) * smaller.blocks;
  }
  const nBuffers = rint(value);
  if (
    !Number.isSafeInteger(nBuffers) ||
    nBuffers < MIN_SHARED_BUFFERS ||
    nBuffers > MAX_SHARED_BUFFERS
  ) {
    throw invalid(
      text,
      `${nBuffers} 8kB is outside the valid range for parameter "shared_buffers" ` +
        `(${MIN_SHARED_BUFFERS} .. ${MAX_SHARED_BUFFERS})`,
    );
  }
  const poolBytes = estimatePoolBytes(nBuffers);
  const limit = maxSimulatedPoolBytes(options.totalMemBytes);
  if (poolBytes > limit) {
    const gib = (b: number): string => (b / 2 ** 30).toFixed(1);
    throw invalid(
      text,
      `${nBuffers} buffers need ${gib(poolBytes)} GiB of buffer descriptors and mapping table, ` +
        `more than the ${gib(limit)} GiB walsim allows on this machine`,
    );
  }
  // Node 20 caps one ArrayBuffer at buffer.constants.MAX_LENGTH bytes (4 GiB).
  if (4 * Math.max(nBuffers, bufTableCapacity(nBuffers)) > bufferConstants.MAX_LENGTH) {
    throw invalid(text, `${nBuffers} buffers exceed this Node's largest typed array`);
  }
  return { nBuffers, bytes: nBuffers * BLCKSZ };
}

/** SHOW shared_buffers: the largest unit that divides the size exactly ('128MB', '100GB', '1TB'). */
export function formatSharedBuffers(nBuffers: number): string {
  const bytes = nBuffers * BLCKSZ;
  for (const [unit, size] of [
    ['TB', 2 ** 40],
    ['GB', 2 ** 30],
    ['MB', 2 ** 20],
  ] as const) {
    if (bytes % size === 0) return `${bytes / size}${unit}`;
  }
  return `${bytes / 1024}kB`;
}
