/**
 * The row-level DML backlogs `npm run calibrate` measures (one implementation for the real
 * PostgreSQL runs, scripts/calibration/cell-run.ts, and for the walsim twins, in-process.ts): over
 * Test B's one-block tables (created and filled with 226 rows before the pause),
 * - `insert`: INSERT of 2,260 rows (10 pages) more into each table after the pause — one
 *   HEAP_INSERT per row, 10 pages appended per table (the mixed bench backlog's INSERT);
 * - `delete`: the same 2,260 rows inserted before the pause, then DELETE of each table's 2,486
 *   rows after it — one HEAP_DELETE per row on pages already in the standby's buffers, nothing
 *   appended.
 * - `copy`: COPY of the same 2,260 int rows into each table — COPY's heap_multi_insert, one
 *   HEAP2_MULTI_INSERT+INIT a page (≤ 1,000 tuples a flush), its 226 tuples, one FSM update and
 *   one page appended a page;
 * - `copy-wide`: COPY of 900 rows with a 400-byte text value (18 a page: 50 pages) into each of
 *   the TOAST-able tables — the same per-page events as `copy` with 18 tuples a page, not 226.
 * Together they tell the cost of a row-level record from the cost of a page appended, of an FSM
 * update (INSERT: 45 a page, COPY: 1 a page, DELETE: none) and of a tuple placed by COPY (the two
 * COPY widths): the INSERT and DELETE backlogs write nearly the same number of rows, one appending
 * 10 pages a table and one none.
 *
 * Entry points: `dmlBacklog(variant, tables)`, `DML_ROWS_PER_TABLE`, `COPY_WIDE_ROWS_PER_TABLE`.
 */
import { rowsForPages } from './rel-size.ts';
import { tableNames } from './state.ts';

/** Rows each DML backlog inserts per table: 10 pages of 226 int rows. */
export const DML_ROWS_PER_TABLE = rowsForPages(10);

/**
 * Rows of `copy-wide` per table: a 400-byte text beside the int is a 432-byte tuple (24-byte
 * header, int, 4-byte varlena header + 400), 436 bytes with its line pointer: 18 a page, 50 pages.
 */
export const COPY_WIDE_ROWS_PER_TABLE = 18 * 50;
const COPY_WIDE_TEXT_BYTES = 400;

export type RowBacklogVariant = 'insert' | 'delete' | 'copy' | 'copy-wide';

/** The statements before the pause (after Test B's create and insert) and the backlog after it. */
export function dmlBacklog(
  variant: RowBacklogVariant,
  tables: number,
): { prePause: string[]; backlog: string[] } {
  const names = tableNames('multi', tables);
  // COPY FROM PROGRAM (the primary runs seq as its OS user): the same WAL as COPY FROM STDIN.
  if (variant === 'copy')
    return {
      prePause: [],
      backlog: names.map((t) => `COPY ${t} (c) FROM PROGRAM 'seq 1 ${DML_ROWS_PER_TABLE}'`),
    };
  if (variant === 'copy-wide') {
    const pad = 'x'.repeat(COPY_WIDE_TEXT_BYTES);
    return {
      prePause: [],
      backlog: names.map(
        (t) =>
          `COPY ${t} (c, d) FROM PROGRAM 'seq 1 ${COPY_WIDE_ROWS_PER_TABLE} | sed "s/$/\\t${pad}/"'`,
      ),
    };
  }
  const insert = names.map(
    (t) => `INSERT INTO ${t} SELECT generate_series(1, ${DML_ROWS_PER_TABLE})`,
  );
  return variant === 'insert'
    ? { prePause: [], backlog: insert }
    : { prePause: insert, backlog: names.map((t) => `DELETE FROM ${t}`) };
}
