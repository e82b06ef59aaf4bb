/**
 * Expected failures a caller must handle. One class with a closed `kind`; when a client sees
 * the error it carries a PostgreSQL SQLSTATE `code`.
 */

export type WalsimErrorKind =
  | 'invalid_input' // bad argument, bad setting, malformed frame or statement
  | 'syntax_error'
  | 'undefined_table'
  | 'duplicate_table'
  | 'read_only' // write attempted on a node in recovery
  | 'not_in_recovery' // recovery-only function called on a primary
  | 'promotion_ongoing'
  | 'not_connected'
  | 'timeout'
  | 'canceled' // a cancel request interrupted the statement
  | 'invalid_wal' // a WAL record failed validation (CRC, prev-link, truncation)
  | 'io_error'
  | 'protocol_violation'
  | 'auth_failed'
  | 'shutting_down'
  | 'split_brain' // an old primary would start after another node was promoted
  | 'lock_file_exists'; // a data directory's postmaster.pid or the cluster lock is held

/** Default SQLSTATE per kind (PostgreSQL errcodes.txt). */
const SQLSTATE_BY_KIND: Record<WalsimErrorKind, string> = {
  invalid_input: '22023', // invalid_parameter_value
  syntax_error: '42601',
  undefined_table: '42P01',
  duplicate_table: '42P07',
  read_only: '25006', // read_only_sql_transaction
  not_in_recovery: '55000', // object_not_in_prerequisite_state
  promotion_ongoing: '55000',
  not_connected: '08006',
  timeout: '57014',
  canceled: '57014', // query_canceled
  invalid_wal: 'XX001', // data_corrupted
  io_error: '58030',
  protocol_violation: '08P01',
  auth_failed: '28000',
  shutting_down: '57P01',
  split_brain: '55000', // object_not_in_prerequisite_state
  lock_file_exists: 'F0001', // ERRCODE_LOCK_FILE_EXISTS
};

export class WalsimError extends Error {
  readonly sqlstate: string;
  constructor(
    readonly kind: WalsimErrorKind,
    message: string,
    sqlstate?: string,
    /** PostgreSQL's DETAIL line, when the error has one. */
    readonly detail?: string,
    /** PostgreSQL's HINT line, when the error has one. */
    readonly hint?: string,
  ) {
    super(message);
    this.name = 'WalsimError';
    this.sqlstate = sqlstate ?? SQLSTATE_BY_KIND[kind];
  }
}

export function isWalsimError(e: unknown): e is WalsimError {
  return e instanceof WalsimError;
}
