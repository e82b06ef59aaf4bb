/**
 * The catalog walsim keeps: table name -> relfilenumber (pg_class.relfilenode), plus the counters a
 * checkpoint records (next xid, next relfilenumber). Changed only through CATALOG_UPDATE redo, so
 * primary and standby agree.
 *
 * A table with a TOAST-able column has a TOAST table and its index, recorded under the names
 * `pg_toast.pg_toast_<table>` and `pg_toast.pg_toast_<table>_index` (PostgreSQL names them after
 * the table's OID; walsim has no OIDs, so after its name). `tables()` lists user tables only;
 * `toastOf` finds a table's TOAST relations.
 */
import { assert, fail } from '../common/assert.ts';
import type { RelFileNumber, TransactionId } from '../wal/records.ts';
import { FirstNormalRelFileNumber, FirstNormalTransactionId } from '../wal/records.ts';
import { ByteBuffer } from '../wal/byte-buffer.ts';

export interface CatalogSnapshot {
  tables: Array<[string, RelFileNumber]>;
  nextXid: TransactionId;
  nextRelFileNumber: RelFileNumber;
}

/** Schema of TOAST tables and their indexes. */
export const TOAST_NAMESPACE = 'pg_toast.';
export const toastTableName = (table: string): string => `${TOAST_NAMESPACE}pg_toast_${table}`;
export const toastIndexName = (table: string): string =>
  `${TOAST_NAMESPACE}pg_toast_${table}_index`;

export class Catalog {
  private readonly byName = new Map<string, RelFileNumber>();
  nextXid: TransactionId = FirstNormalTransactionId;
  nextRelFileNumber: RelFileNumber = FirstNormalRelFileNumber;

  lookup(name: string): RelFileNumber | undefined {
    return this.byName.get(name);
  }

  /** User tables (not the pg_toast namespace), by name. */
  tables(): Array<[string, RelFileNumber]> {
    return this.entries().filter(([name]) => !name.startsWith(TOAST_NAMESPACE));
  }

  /** Every name, TOAST relations included, sorted. */
  private entries(): Array<[string, RelFileNumber]> {
    return [...this.byName.entries()].sort((a, b) => (a[0] < b[0] ? -1 : a[0] > b[0] ? 1 : 0));
  }

  /** The TOAST table and TOAST index of table `name`, or undefined when it has none. */
  toastOf(name: string): { toast: RelFileNumber; index: RelFileNumber } | undefined {
    const toast = this.byName.get(toastTableName(name));
    const index = this.byName.get(toastIndexName(name));
    if (toast === undefined && index === undefined) return undefined;
    if (!(toast !== undefined && index !== undefined))
      fail(`INV-CATALOG-2: table ${name} has half a TOAST table`);
    return { toast, index };
  }

  /** Apply a CATALOG_UPDATE: `rel` 0 removes the name. */
  set(name: string, rel: RelFileNumber): void {
    if (rel === 0) this.byName.delete(name);
    else this.byName.set(name, rel);
    if (rel >= this.nextRelFileNumber) this.nextRelFileNumber = rel + 1;
  }

  allocateRelFileNumber(): RelFileNumber {
    return this.nextRelFileNumber++;
  }

  allocateXid(): TransactionId {
    return this.nextXid++;
  }

  /** Replay saw `xid` in use: keep nextXid beyond it (like advancing nextXid in xact redo). */
  observeXid(xid: TransactionId): void {
    if (xid >= this.nextXid) this.nextXid = xid + 1;
  }

  /**
   * Every [name, relfilenumber], unsorted, as JSON in UTF-8, in steps of `stepEntries` (a
   * checkpoint writes the catalog of 100,000 tables without holding the event loop);
   * `tablesFromJson` reads it back. Each step's JSON is encoded at once into one growing byte
   * buffer: a list of the steps' strings, joined at the end, survived every scavenge in between.
   */
  *tablesJsonSteps(stepEntries = 256): Generator<void, Uint8Array, void> {
    const out = new ByteBuffer(1 << 10);
    putUtf8(out, '[');
    let chunk: Array<[string, RelFileNumber]> = [];
    let first = true;
    const flush = (): void => {
      const json = JSON.stringify(chunk).slice(1, -1);
      putUtf8(out, first ? json : `,${json}`);
      first = false;
      chunk = [];
    };
    for (const e of this.byName) {
      chunk.push(e);
      if (chunk.length === stepEntries) {
        flush();
        yield;
      }
    }
    if (chunk.length > 0) flush();
    putUtf8(out, ']');
    return out.bytes.slice(0, out.length);
  }

  snapshot(): CatalogSnapshot {
    return {
      tables: this.entries(),
      nextXid: this.nextXid,
      nextRelFileNumber: this.nextRelFileNumber,
    };
  }

  static fromSnapshot(s: CatalogSnapshot): Catalog {
    const c = new Catalog();
    for (const [name, rel] of s.tables) c.set(name, rel);
    assert(
      s.nextXid >= FirstNormalTransactionId,
      'INV-CATALOG-1: nextXid below FirstNormalTransactionId',
    );
    c.nextXid = s.nextXid;
    c.nextRelFileNumber = Math.max(c.nextRelFileNumber, s.nextRelFileNumber);
    return c;
  }
}

const utf8 = new TextEncoder();

/** Append `s` to `out` as UTF-8 (at most 3 bytes per UTF-16 code unit). */
function putUtf8(out: ByteBuffer, s: string): void {
  out.reserve(3 * s.length);
  out.length += utf8.encodeInto(s, out.bytes.subarray(out.length)).written;
}
