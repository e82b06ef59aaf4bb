/**
 * Little-endian reads from WAL bytes, the error a record that fails PostgreSQL's checks raises
 * inside the reader, and RelFileNode: what every other file of pg-wal/ shares.
 *
 * Entry points: `u16`, `u32`, `u64`, `fmtLsn`, `PgWalInvalidRecord`, `RelFileNode`.
 */
import { formatLsn, type Lsn } from '../wal/lsn.ts';

/** PostgreSQL's RelFileNode (≤15) / RelFileLocator (16+): the same 12 bytes. */
export interface RelFileNode {
  spc: number;
  db: number;
  rel: number;
}

/** A record that fails PostgreSQL's checks; the message is xlogreader.c's. */
export class PgWalInvalidRecord extends Error {
  constructor(
    message: string,
    readonly lsn: Lsn,
  ) {
    super(message);
    this.name = 'PgWalInvalidRecord';
  }
}

const TWO_32 = 0x1_0000_0000;

export const u16 = (b: Uint8Array, o: number): number => b[o]! | (b[o + 1]! << 8);
export const u32 = (b: Uint8Array, o: number): number =>
  (b[o]! | (b[o + 1]! << 8) | (b[o + 2]! << 16) | (b[o + 3]! << 24)) >>> 0;
/** A uint64 LSN; exact below 2^53 (an LSN beyond that is refused by the caller's checks). */
export const u64 = (b: Uint8Array, o: number): number => u32(b, o) + u32(b, o + 4) * TWO_32;

/** %X/%X of any 64-bit value read from WAL (it may exceed 2^53 in garbage). */
export function fmtLsn(v: number): string {
  if (Number.isSafeInteger(v)) return formatLsn(v);
  const hi = Math.floor(v / TWO_32);
  return `${hi.toString(16).toUpperCase()}/${(v - hi * TWO_32).toString(16).toUpperCase()}`;
}
