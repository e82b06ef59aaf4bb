/**
 * walsim's function table and parse analysis (pg_proc, system_views.sql, parse_func.c): every
 * function with its argument and result types, the system views with their columns, and
 * `describeStatement`, which resolves a statement's functions and views and gives its result
 * columns with PostgreSQL's names and types before it runs (the wire protocol's RowDescription).
 * What the functions return is the node's business (server/sql-read.ts).
 */
import { WalsimError } from '../common/errors.ts';
import type { Statement } from './ast.ts';

/** PostgreSQL types of walsim's result columns (pg_type.typname). */
export type PgTypeName = 'int8' | 'int4' | 'bool' | 'text' | 'pg_lsn' | 'void' | 'json';

export interface ResultColumn {
  name: string;
  type: PgTypeName;
}

/** Argument types of walsim's literals: what PostgreSQL resolves a function call with. */
type ArgType = 'integer' | 'bigint' | 'numeric' | 'boolean' | 'text';

/**
 * One function walsim knows (pg_proc): its result type (prorettype) and its argument types; the
 * last `defaults` of them may be left out (proargdefaults). `text` accepts a string literal
 * (type unknown), `integer` an integer literal within int4.
 */
interface FunctionSignature {
  result: PgTypeName;
  args: ArgType[];
  defaults?: number;
}

const NO_ARGS = (result: PgTypeName): FunctionSignature => ({ result, args: [] });

/** Every function walsim knows. */
const FUNCTIONS: Record<string, FunctionSignature> = {
  pg_current_wal_lsn: NO_ARGS('pg_lsn'),
  pg_current_wal_flush_lsn: NO_ARGS('pg_lsn'),
  pg_is_in_recovery: NO_ARGS('bool'),
  pg_last_wal_receive_lsn: NO_ARGS('pg_lsn'),
  pg_last_wal_replay_lsn: NO_ARGS('pg_lsn'),
  pg_wal_replay_pause: NO_ARGS('void'),
  pg_wal_replay_resume: NO_ARGS('void'),
  pg_is_wal_replay_paused: NO_ARGS('bool'),
  pg_get_wal_replay_pause_state: NO_ARGS('text'),
  pg_promote: { result: 'bool', args: ['boolean', 'integer'], defaults: 2 },
  pg_reload_conf: NO_ARGS('bool'),
  version: NO_ARGS('text'),
  current_setting: { result: 'text', args: ['text', 'boolean'], defaults: 1 },
  pg_relation_size: { result: 'int8', args: ['text'] },
  // walsim's extension (no PostgreSQL function): the promotion's failover report as JSON.
  walsim_failover_report: NO_ARGS('json'),
};

const INT4_MAX = 2147483647;
const INT8_MAX = 9223372036854775807n;

/** The type PostgreSQL gives an integer literal: int4, else int8, else numeric (scan.l, make_const). */
export function integerType(text: string): ArgType {
  const n = BigInt(text);
  const abs = n < 0n ? -n : n;
  if (abs <= BigInt(INT4_MAX) + (n < 0n ? 1n : 0n)) return 'integer';
  return abs <= INT8_MAX + (n < 0n ? 1n : 0n) ? 'bigint' : 'numeric';
}

function argType(a: number | boolean | string): ArgType | 'unknown' {
  if (typeof a === 'boolean') return 'boolean';
  if (typeof a === 'string') return 'unknown';
  return integerType(BigInt(a).toString());
}

export function undefinedFunction(fn: string, args: Array<number | boolean | string>): WalsimError {
  return new WalsimError(
    'invalid_input',
    `function ${fn}(${args.map(argType).join(', ')}) does not exist`,
    '42883',
    undefined,
    'No function matches the given name and argument types. You might need to add explicit type casts.',
  );
}

/** ParseFuncOrColumn: the function's signature if the arguments fit it, else 42883. */
function resolveFunction(fn: string, args: Array<number | boolean | string>): FunctionSignature {
  const f = FUNCTIONS[fn];
  if (f === undefined) throw undefinedFunction(fn, args);
  const fits = (a: number | boolean | string, want: ArgType) => {
    const t = argType(a);
    return t === want || (t === 'unknown' && want === 'text');
  };
  const min = f.args.length - (f.defaults ?? 0);
  if (
    args.length < min ||
    args.length > f.args.length ||
    !args.every((a, i) => fits(a, f.args[i]!))
  )
    throw undefinedFunction(fn, args);
  return f;
}

/**
 * The result columns of `stmt` (none for commands without a result), known before it runs. Unknown
 * functions fail here, as PostgreSQL fails them at parse analysis.
 */
export function describeStatement(stmt: Statement): ResultColumn[] {
  switch (stmt.type) {
    case 'select_count':
      return [{ name: 'count', type: 'int8' }];
    case 'show':
      return [{ name: stmt.name, type: 'text' }];
    case 'select_function':
      return [{ name: stmt.fn, type: resolveFunction(stmt.fn, stmt.args).result }];
    case 'select_literal': {
      const type = integerType(stmt.value);
      if (type === 'numeric')
        throw new WalsimError(
          'invalid_input',
          'numeric values are not supported by walsim',
          '0A000',
        );
      return [{ name: '?column?', type: type === 'integer' ? 'int4' : 'int8' }];
    }
    case 'select_view': {
      const all = viewColumns(stmt.view);
      return selectedColumns(all, stmt.columns, stmt.orderBy);
    }
    default:
      return [];
  }
}
/** pg_stat_replication's columns walsim has, in PostgreSQL's order (the walsenders' rows). */
export const PG_STAT_REPLICATION_COLUMNS = [
  'application_name',
  'state',
  'sent_lsn',
  'write_lsn',
  'flush_lsn',
  'replay_lsn',
  'sync_priority',
  'sync_state',
  'reply_time',
] as const;

/** Columns of the system views walsim has, with their types (system_views.sql). */
const VIEW_COLUMNS: Record<string, ResultColumn[]> = {
  pg_stat_replication: PG_STAT_REPLICATION_COLUMNS.map((name) => ({
    name,
    type: name.endsWith('_lsn') ? 'pg_lsn' : name === 'sync_priority' ? 'int4' : 'text',
  })),
  pg_stat_wal_receiver: [
    { name: 'status', type: 'text' },
    { name: 'receive_start_lsn', type: 'pg_lsn' },
    { name: 'written_lsn', type: 'pg_lsn' },
    { name: 'flushed_lsn', type: 'pg_lsn' },
    { name: 'received_tli', type: 'int4' },
    { name: 'sender_host', type: 'text' },
    { name: 'sender_port', type: 'int4' },
    { name: 'conninfo', type: 'text' },
  ],
};

export function viewColumns(view: string): ResultColumn[] {
  const cols = VIEW_COLUMNS[view];
  if (cols === undefined)
    throw new WalsimError(
      'invalid_input',
      `SELECT … FROM ${view} is not supported by walsim: it reads columns of ${Object.keys(VIEW_COLUMNS).join(' and ')} only (of a table, SELECT count(*))`,
      '0A000',
    );
  return cols;
}

export function selectedColumns(
  all: ResultColumn[],
  columns: string[] | '*',
  orderBy: string | null,
): ResultColumn[] {
  for (const c of [...(columns === '*' ? [] : columns), ...(orderBy === null ? [] : [orderBy])]) {
    if (!all.some((x) => x.name === c))
      throw new WalsimError('invalid_input', `column "${c}" does not exist`, '42703');
  }
  return columns === '*' ? all : columns.map((c) => all.find((x) => x.name === c)!);
}
