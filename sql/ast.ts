/**
 * The parsed statements of walsim's SQL subset (sql/parser.ts produces them; the primary's
 * executor and the shell's reads, server/sql-read.ts, consume them). Below the roles and the
 * server shell.
 */

export type DeletePredicate = { op: 'all' } | { op: '<' | '>' | '='; value: number };

export type Statement =
  /** `toastColumn`: a second column of a TOAST-able type (the table gets a TOAST table), or null. */
  | { type: 'create_table'; name: string; column: string; toastColumn: string | null }
  | { type: 'drop_table'; names: string[]; ifExists: boolean }
  | { type: 'insert_series'; name: string; from: number; to: number }
  | { type: 'insert_values'; name: string; values: number[] }
  | { type: 'delete'; name: string; predicate: DeletePredicate }
  | { type: 'vacuum'; name: string | null }
  | { type: 'truncate'; names: string[] }
  | { type: 'checkpoint' }
  | { type: 'select_count'; name: string; predicate: DeletePredicate }
  | { type: 'select_function'; fn: string; args: Array<number | boolean | string> }
  /** SELECT n: an integer literal, as written (int4, int8 or numeric by its size). */
  | { type: 'select_literal'; value: string }
  | { type: 'show'; name: string }
  | { type: 'select_view'; view: string; columns: string[] | '*'; orderBy: string | null }
  /** value null = RESET / DEFAULT: remove the setting from the configuration file. */
  | { type: 'alter_system'; name: string; value: string | null };
