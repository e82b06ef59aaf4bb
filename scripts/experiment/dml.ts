/**
 * The row-level DML backlogs `npm run calibrate` measures (one implementation for the real
 * PostgreSQL runs, scripts/predict/bench-run.ts, and for the walsim twins, in-process.ts): over
 * Test B's one-block tables (created and filled with 226 rows before the pause),
 * - `insert`: INSERT of 2,260 rows (10 pages) more into each table after the pause — one
 *   HEAP_INSERT per row, 10 pages appended per table (the mixed bench backlog's INSERT);
 * - `delete`: the same 2,260 rows inserted before the pause, then DELETE of each table's 2,486
 *   rows after it — one HEAP_DELETE per row on pages already in the standby's buffers, nothing
 *   appended.
 * Together they tell the cost of a row-level record from the cost of a page appended: the two
 * backlogs write nearly the same number of rows, one appending 10 pages a table and one none.
 *
 * Entry points: `dmlBacklog(variant, tables)`, `DML_ROWS_PER_TABLE`.
 */
import { rowsForPages } from './rel-size.ts';
import { tableNames } from './state.ts';

/** Rows each DML backlog inserts per table: 10 pages of 226 int rows. */
export const DML_ROWS_PER_TABLE = rowsForPages(10);

/** The statements before the pause (after Test B's create and insert) and the backlog after it. */
export function dmlBacklog(
  variant: 'insert' | 'delete',
  tables: number,
): { prePause: string[]; backlog: string[] } {
  const names = tableNames('multi', tables);
  const insert = names.map(
    (t) => `INSERT INTO ${t} SELECT generate_series(1, ${DML_ROWS_PER_TABLE})`,
  );
  return variant === 'insert'
    ? { prePause: [], backlog: insert }
    : { prePause: insert, backlog: names.map((t) => `DELETE FROM ${t}`) };
}
