/**
 * Records as columns: what `pg_waldump --stats=record` needs of each record (LSN, rmgr id,
 * xl_info, lengths), read without building an object per record. One instance is refilled for
 * every batch the reader hands out (`PgWalReader.columns()`); its values are valid until the
 * next batch is asked for.
 *
 * Entry point: `PgWalColumns`.
 */
import type { Lsn } from '../wal/lsn.ts';
import type { PgWalRecord } from './record.ts';

export class PgWalColumns {
  /** Records in this batch. */
  length = 0;
  readonly lsn: Float64Array;
  /** Where the next record starts (after alignment, page headers, an XLOG SWITCH). */
  readonly endLsn: Float64Array;
  readonly rmid: Uint8Array;
  /** xl_info. */
  readonly info: Uint8Array;
  /** xl_tot_len. */
  readonly totalLength: Uint32Array;
  /** Bytes of full-page images (pg_waldump's "fpi"; the "rec" length is total − fpi). */
  readonly fpiLength: Uint32Array;

  /** `arrays`: where the values live (the reader's WebAssembly memory writes them there too). */
  constructor(
    readonly capacity: number,
    arrays: Pick<PgWalColumns, 'lsn' | 'endLsn' | 'rmid' | 'info' | 'totalLength' | 'fpiLength'>,
  ) {
    ({
      lsn: this.lsn,
      endLsn: this.endLsn,
      rmid: this.rmid,
      info: this.info,
      totalLength: this.totalLength,
      fpiLength: this.fpiLength,
    } = arrays);
  }

  /** Append one record's values. */
  push(lsn: Lsn, endLsn: Lsn, rmid: number, info: number, tot: number, fpi: number): void {
    const i = this.length++;
    this.lsn[i] = lsn;
    this.endLsn[i] = endLsn;
    this.rmid[i] = rmid;
    this.info[i] = info;
    this.totalLength[i] = tot;
    this.fpiLength[i] = fpi;
  }

  /** Append a decoded record's values. */
  pushRecord(r: PgWalRecord): void {
    this.push(r.lsn, r.endLsn, r.rmid, r.info, r.totalLength, r.fpiLength);
  }
}
