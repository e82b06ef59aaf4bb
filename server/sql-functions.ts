/**
 * The read side of walsim's SQL: SELECT count(*), SHOW, current_setting(), version(),
 * pg_relation_size(), walsim's own walsim_failover_report(), and the recovery-information and
 * recovery-control functions (xlogfuncs.c). State comes from the node;
 * recovery and pause state come from its lifecycle machine. `describeStatement` gives every
 * statement's result columns with PostgreSQL's names and types before it runs (the wire protocol's
 * RowDescription); `executeRead` builds its results from the same description.
 */
import { withModel } from '../cost-model/price.ts';
import { defaultCostProfile } from '../cost-model/profile.ts';
import { WalsimError } from '../common/errors.ts';
import { formatLsn } from '../wal/lsn.ts';
import { formatSharedBuffers } from '../storage/shared-buffers.ts';
import { pauseStateOf, RECOVERY_CONTROL_HINT, refusalOf } from '../standby/lifecycle-machine.ts';
import type { QueryResult, SqlValue } from './control-protocol.ts';
import type { Lsn, TimeLineId } from '../wal/lsn.ts';
import type { NodeStorage } from '../storage/node-storage.ts';
import type { XactStatusReader } from '../storage/clog.ts';
import type { WalSenderSet } from '../primary/walsender-set.ts';
import type { WalReceiver } from '../standby/walreceiver.ts';
import type { LifecycleEvent, LifecycleSnapshot } from '../standby/lifecycle-machine.ts';
import type { NodeConfig } from './node-config.ts';
import type { FailoverReport } from '../standby/failover-report.ts';

/**
 * What the read side needs of a node: a narrow view (ServerNode satisfies it), so this module does
 * not import server/node.ts and a test can hand it any object of this shape.
 */
export interface ReadContext {
  readonly storage: Pick<NodeStorage, 'catalog' | 'heap' | 'clog'>;
  readonly config: NodeConfig;
  readonly nBuffers: number;
  readonly inRecovery: boolean;
  readonly timeline: TimeLineId;
  readonly wal: { readonly insertLsn: Lsn; readonly writeLsn: Lsn; readonly flushLsn: Lsn };
  readonly walsenders: Pick<WalSenderSet, 'rows'>;
  readonly receiver: Pick<WalReceiver, 'startLsns' | 'state'> | null;
  readonly startup: { readonly replayEndLsn: Lsn } | null;
  readonly lifecycle: { getSnapshot(): LifecycleSnapshot };
  send(event: LifecycleEvent): void;
  /** The session's snapshot of transaction status (commits waiting for sync rep are in progress). */
  snapshotClog(): XactStatusReader;
  /** The failover report of this node's promotion (null before one); walsim_failover_report(). */
  failoverReport(): FailoverReport | null;
}

import type { Statement } from './sql-parser.ts';
import { formatMb, formatSeconds, PG_SERVER_VERSION, PG_SERVER_VERSION_NUM } from './settings.ts';
import { walSettingsOf } from './node-config.ts';

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
function integerType(text: string): ArgType {
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

/** Bytes of a heap page (BLCKSZ). */
const BLCKSZ = 8192;

/**
 * A relation name given as text, as regclass input reads it: unquoted names fold to lower case,
 * "quoted" ones keep their case; an optional pg_catalog./public. schema is accepted and ignored.
 */
function regclassName(text: string): string {
  const parts = text
    .trim()
    .match(/^(?:(?:pg_catalog|public)\.)?("(?:[^"]|"")+"|[A-Za-z_][A-Za-z0-9_$]*)$/);
  if (parts === null) throw new WalsimError('invalid_input', `invalid name syntax`, '42602');
  const name = parts[1]!;
  return name.startsWith('"') ? name.slice(1, -1).replace(/""/g, '"') : name.toLowerCase();
}

function undefinedFunction(fn: string, args: Array<number | boolean | string>): WalsimError {
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
import { primaryConninfoOf } from './node-config.ts';
import { PG_STAT_REPLICATION_COLUMNS } from '../primary/walsender-set.ts';

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

function viewColumns(view: string): ResultColumn[] {
  const cols = VIEW_COLUMNS[view];
  if (cols === undefined)
    throw new WalsimError(
      'invalid_input',
      `SELECT … FROM ${view} is not supported by walsim: it reads columns of ${Object.keys(VIEW_COLUMNS).join(' and ')} only (of a table, SELECT count(*))`,
      '0A000',
    );
  return cols;
}

function selectedColumns(
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

/** The system views walsim has, each as rows of column → value. */
function viewRows(
  node: ReadContext,
  view: string,
): { columns: readonly string[]; rows: Array<Record<string, SqlValue>> } {
  const columns = viewColumns(view).map((c) => c.name);
  switch (view) {
    case 'pg_stat_replication':
      return { columns, rows: node.walsenders.rows().map((r) => ({ ...r })) };
    case 'pg_stat_wal_receiver': {
      const r = node.receiver;
      if (r === null || !node.inRecovery) return { columns, rows: [] };
      const start = r.startLsns[r.startLsns.length - 1];
      return {
        columns,
        rows: [
          {
            status:
              r.state === 'streaming'
                ? 'streaming'
                : r.state === 'stopped'
                  ? 'stopping'
                  : 'waiting',
            receive_start_lsn: start === undefined ? null : formatLsn(start),
            written_lsn: formatLsn(node.wal.writeLsn),
            flushed_lsn: formatLsn(node.wal.flushLsn),
            received_tli: node.timeline,
            sender_host: node.config.primaryHost,
            sender_port: node.config.primaryPort,
            conninfo: primaryConninfoOf(node.config),
          },
        ],
      };
    }
    default:
      throw new WalsimError('undefined_table', `relation "${view}" does not exist`, '42P01');
  }
}

/** SELECT * | cols FROM view [ORDER BY col]: rows in the view's order (slot order for walsenders). */
function selectView(
  node: ReadContext,
  view: string,
  columns: string[] | '*',
  orderBy: string | null,
): QueryResult {
  const v = viewRows(node, view);
  const cols = selectedColumns(viewColumns(view), columns, orderBy).map((c) => c.name);
  let rows = v.rows;
  if (orderBy !== null) {
    rows = [...rows].sort((a, b) => {
      const x = a[orderBy] ?? null;
      const y = b[orderBy] ?? null;
      if (x === y) return 0;
      if (x === null) return 1; // NULLS LAST, as ORDER BY ASC
      if (y === null) return -1;
      return x < y ? -1 : 1;
    });
  }
  return {
    command: `SELECT ${rows.length}`,
    columns: cols,
    rows: rows.map((r) => Object.fromEntries(cols.map((c) => [c, r[c] ?? null]))),
  };
}

export function executeRead(node: ReadContext, stmt: Statement): QueryResult {
  const [column] = describeStatement(stmt);
  // PostgreSQL's command tags: SHOW for SHOW, SELECT 1 for a one-row SELECT.
  const one = (value: SqlValue): QueryResult => ({
    command: stmt.type === 'show' ? 'SHOW' : 'SELECT 1',
    columns: [column!.name],
    rows: [{ [column!.name]: value }],
  });
  switch (stmt.type) {
    case 'select_count': {
      const rel = node.storage.catalog.lookup(stmt.name);
      if (rel === undefined)
        throw new WalsimError('undefined_table', `relation "${stmt.name}" does not exist`, '42P01');
      // The session's snapshot: commits still waiting for synchronous replication are in progress.
      const { heap } = node.storage;
      const clog = node.snapshotClog();
      if (stmt.predicate.op === 'all') return one(heap.countVisible(rel, clog));
      let n = 0;
      heap.forEachPageToDelete(rel, stmt.predicate, clog, (_block, ranges) => {
        for (let i = 1; i < ranges.length; i += 2) n += ranges[i]!;
      });
      return one(n);
    }
    case 'show':
      return one(showSetting(node, stmt.name));
    case 'select_function':
      return one(callFunction(node, stmt.fn, stmt.args));
    case 'select_literal':
      return one(Number.isSafeInteger(Number(stmt.value)) ? Number(stmt.value) : stmt.value);
    case 'select_view':
      return selectView(node, stmt.view, stmt.columns, stmt.orderBy);
    default:
      throw new WalsimError('invalid_input', `statement ${stmt.type} is not a read`);
  }
}

/** SHOW and current_setting(): walsim's settings and the read-only ones PostgreSQL reports. */
function showSetting(node: ReadContext, name: string): string {
  switch (name) {
    case 'server_version':
      return PG_SERVER_VERSION;
    case 'server_version_num':
      return String(PG_SERVER_VERSION_NUM);
    case 'in_hot_standby':
    case 'transaction_read_only':
      return node.inRecovery ? 'on' : 'off';
    case 'default_transaction_read_only':
      return 'off';
    case 'server_encoding':
    case 'client_encoding':
      return 'UTF8';
    case 'standard_conforming_strings':
    case 'integer_datetimes':
      return 'on';
    case 'full_page_writes':
      return 'off';
    case 'wal_level':
      return 'replica';
    case 'max_connections':
      return '100';
    case 'port':
      return String(node.config.pgPort ?? 0);
    case 'listen_addresses':
      return node.config.listen;
    case 'shared_buffers':
      return formatSharedBuffers(node.nBuffers);
    case 'synchronous_commit':
      return node.config.synchronousCommit;
    case 'synchronous_standby_names':
      return node.config.synchronousStandbyNames;
    case 'primary_conninfo':
      return primaryConninfoOf(node.config);
    case 'wal_segment_size':
      return `${node.config.walSegmentSize / (1024 * 1024)}MB`;
    case 'hot_standby':
      return 'on';
    case 'autovacuum':
      return 'off';
    case 'walsim.drop_strategy':
      return node.config.dropStrategy;
    case 'checkpoint_timeout':
      return formatSeconds(walSettingsOf(node.config).checkpointTimeoutS);
    case 'max_wal_size':
      return formatMb(walSettingsOf(node.config).maxWalSizeMb);
    case 'wal_keep_size':
      return formatMb(walSettingsOf(node.config).walKeepSizeMb);
    default:
      throw new WalsimError(
        'invalid_input',
        `unrecognized configuration parameter "${name}"`,
        '42704',
      );
  }
}

function requireRecovery(node: ReadContext): void {
  if (!node.inRecovery)
    throw new WalsimError(
      'not_in_recovery',
      'recovery is not in progress',
      '55000',
      undefined,
      RECOVERY_CONTROL_HINT,
    );
}

function callFunction(
  node: ReadContext,
  fn: string,
  args: Array<number | boolean | string>,
): SqlValue {
  // describeStatement resolved the call (resolveFunction): the arguments fit the signature.
  switch (fn) {
    case 'pg_current_wal_lsn':
      if (node.inRecovery)
        throw new WalsimError('not_in_recovery', 'recovery is in progress', '55000');
      return formatLsn(node.wal.insertLsn);
    case 'pg_current_wal_flush_lsn':
      return formatLsn(node.wal.flushLsn);
    case 'pg_is_in_recovery':
      return node.inRecovery;
    case 'pg_last_wal_receive_lsn':
      return node.inRecovery ? formatLsn(node.wal.flushLsn) : null;
    case 'pg_last_wal_replay_lsn':
      return node.inRecovery && node.startup ? formatLsn(node.startup.replayEndLsn) : null;
    case 'pg_wal_replay_pause':
    case 'pg_wal_replay_resume': {
      const event = fn === 'pg_wal_replay_pause' ? 'PAUSE' : 'RESUME';
      const refused = refusalOf(node.lifecycle.getSnapshot(), event);
      if (refused) throw refused;
      node.send({ type: event });
      return '';
    }
    case 'pg_is_wal_replay_paused':
      requireRecovery(node);
      return pauseStateOf(node.lifecycle.getSnapshot()) !== 'not paused';
    case 'pg_get_wal_replay_pause_state':
      requireRecovery(node);
      return pauseStateOf(node.lifecycle.getSnapshot());
    case 'version':
      return `PostgreSQL ${PG_SERVER_VERSION} on ${process.arch}-${process.platform}, simulated by walsim on Node.js ${process.version}`;
    case 'pg_relation_size': {
      // pg_relation_size(relation regclass): the main fork's size in bytes (dbsize.c). The text
      // argument goes through regclass input, so an unknown relation is 42P01 before anything runs.
      const [name] = args;
      if (typeof name !== 'string' || args.length !== 1) throw undefinedFunction(fn, args);
      const relName = regclassName(name);
      const rel = node.storage.catalog.lookup(relName);
      if (rel === undefined)
        throw new WalsimError('undefined_table', `relation "${relName}" does not exist`, '42P01');
      return node.storage.heap.nblocks(rel) * BLCKSZ;
    }
    case 'walsim_failover_report': {
      // walsim's extension: the report `cluster promote --json` prints (phases, drop counters,
      // exact counts, modeled seconds under the default profile), as json text; NULL before a
      // promotion of this node. An edge that shows seconds: it prices the report's counts here.
      const r = node.failoverReport();
      return r === null ? null : JSON.stringify(withModel(r, defaultCostProfile()));
    }
    case 'current_setting': {
      // current_setting(setting_name text [, missing_ok boolean])
      const [name, missingOk = false] = args;
      if (typeof name !== 'string' || typeof missingOk !== 'boolean' || args.length > 2)
        throw undefinedFunction(fn, args);
      try {
        return showSetting(node, name.toLowerCase());
      } catch (e) {
        if (missingOk) return null;
        throw e;
      }
    }
    default:
      throw undefinedFunction(fn, args);
  }
}
