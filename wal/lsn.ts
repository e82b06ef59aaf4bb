/**
 * LSNs (XLogRecPtr) and timeline ids.
 *
 * An LSN is a byte position in the WAL stream. PostgreSQL uses a uint64; walsim keeps it in a JS
 * number, which is exact up to 2^53 bytes (8 PiB of WAL) — far beyond any simulated run — and
 * avoids bigint on the replay hot path. Every constructor asserts the value is a safe integer.
 */
import { fail } from '../common/assert.ts';
import { WalsimError } from '../common/errors.ts';

export type Lsn = number;
export type TimeLineId = number;

/** InvalidXLogRecPtr. No record starts at 0: the first record starts after the first page header. */
export const InvalidLsn: Lsn = 0;

const TWO_32 = 0x1_0000_0000;

export function assertValidLsn(lsn: Lsn, what = 'LSN'): void {
  if (!(Number.isSafeInteger(lsn) && lsn >= 0))
    fail(`INV-WAL-LSN: ${what} ${lsn} is not a safe non-negative integer`);
}

/** PostgreSQL's `%X/%X` (LSN_FORMAT_ARGS): upper 32 bits, slash, lower 32 bits, uppercase hex. */
export function formatLsn(lsn: Lsn): string {
  assertValidLsn(lsn);
  const hi = Math.floor(lsn / TWO_32);
  const lo = lsn % TWO_32;
  return `${hi.toString(16).toUpperCase()}/${lo.toString(16).toUpperCase()}`;
}

/** Parse `X/XXXXXXXX` (pg_lsn input syntax). Throws WalsimError('invalid_input') naming the text. */
export function parseLsn(text: string): Lsn {
  const m = /^([0-9A-Fa-f]{1,8})\/([0-9A-Fa-f]{1,8})$/.exec(text.trim());
  if (!m) {
    throw new WalsimError(
      'invalid_input',
      `invalid input syntax for type pg_lsn: "${text}"`,
      '22P02',
    );
  }
  const lsn = parseInt(m[1]!, 16) * TWO_32 + parseInt(m[2]!, 16);
  if (!Number.isSafeInteger(lsn)) {
    throw new WalsimError(
      'invalid_input',
      `pg_lsn "${text}" is beyond walsim's 2^53-byte WAL limit`,
      '22003',
    );
  }
  return lsn;
}
