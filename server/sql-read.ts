/**
 * The read side of walsim's SQL, executed against the node (the function table and parse analysis
 * are sql/functions.ts): SELECT count(*), SHOW, current_setting(), version(),
 * pg_relation_size(), walsim's own walsim_failover_report(), and the recovery-information and
 * recovery-control functions (xlogfuncs.c). State comes from the node;
 * recovery and pause state come from its lifecycle machine. `describeStatement` gives every
 * statement's result columns with PostgreSQL's names and types before it runs (the wire protocol's
 * RowDescription); `executeRead` builds its results from the same description.
 */
import { WalsimError } from '../common/errors.ts';
import { formatLsn } from '../wal/lsn.ts';
import { formatSharedBuffers } from '../storage/shared-buffers.ts';
import { pauseStateOf, RECOVERY_CONTROL_HINT, refusalOf } from '../lifecycle/lifecycle-machine.ts';
import type { QueryResult, SqlValue } from './control-protocol.ts';
import type { Lsn, TimeLineId } from '../wal/lsn.ts';
import type { NodeStorage } from '../storage/node-storage.ts';
import type { XactStatusReader } from '../storage/clog.ts';
import type { PgStatReplicationRow, WalSenderSet } from '../primary/walsender-set.ts';
import type { WalReceiver } from '../standby/walreceiver.ts';
import type { LifecycleEvent, LifecycleSnapshot } from '../lifecycle/lifecycle-machine.ts';
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

import type { Statement } from '../sql/ast.ts';
import {
  describeStatement,
  PG_STAT_REPLICATION_COLUMNS,
  selectedColumns,
  undefinedFunction,
  viewColumns,
} from '../sql/functions.ts';
import { formatMb, formatSeconds, PG_SERVER_VERSION, PG_SERVER_VERSION_NUM } from './settings.ts';
import { walSettingsOf } from './node-config.ts';

/**
 * The settings a session chose at start-up (the start-up packet's client_encoding and
 * application_name): PostgreSQL's SHOW reports the session's value of a GUC, not the server's.
 */
export interface SessionSettings {
  readonly clientEncoding: string;
  readonly applicationName: string;
}

/** A session that chose nothing: PostgreSQL's defaults (client_encoding = the server's). */
const DEFAULT_SESSION: SessionSettings = { clientEncoding: 'UTF8', applicationName: '' };

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

import { primaryConninfoOf } from './node-config.ts';

// The view's declared columns are the walsenders' row fields (a compile-time check).
PG_STAT_REPLICATION_COLUMNS satisfies ReadonlyArray<keyof PgStatReplicationRow>;

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

export function executeRead(
  node: ReadContext,
  stmt: Statement,
  session: SessionSettings = DEFAULT_SESSION,
): QueryResult {
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
      return one(showSetting(node, stmt.name, session));
    case 'select_function':
      return one(callFunction(node, stmt.fn, stmt.args, session));
    case 'select_literal':
      return one(Number.isSafeInteger(Number(stmt.value)) ? Number(stmt.value) : stmt.value);
    case 'select_view':
      return selectView(node, stmt.view, stmt.columns, stmt.orderBy);
    default:
      throw new WalsimError('invalid_input', `statement ${stmt.type} is not a read`);
  }
}

/** SHOW and current_setting(): walsim's settings and the read-only ones PostgreSQL reports. */
function showSetting(node: ReadContext, name: string, session: SessionSettings): string {
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
      return 'UTF8';
    case 'client_encoding':
      return session.clientEncoding;
    case 'application_name':
      return session.applicationName;
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
  session: SessionSettings,
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
      // walsim's extension: the node's failover report (phases, drop counters, exact counts), as
      // json text; NULL before a promotion of this node. Counts only, never seconds: the client
      // prices them once, with the profile it was given (cost-model/price.ts).
      const r = node.failoverReport();
      return r === null ? null : JSON.stringify(r);
    }
    case 'current_setting': {
      // current_setting(setting_name text [, missing_ok boolean])
      const [name, missingOk = false] = args;
      if (typeof name !== 'string' || typeof missingOk !== 'boolean' || args.length > 2)
        throw undefinedFunction(fn, args);
      try {
        return showSetting(node, name.toLowerCase(), session);
      } catch (e) {
        if (missingOk) return null;
        throw e;
      }
    }
    default:
      throw undefinedFunction(fn, args);
  }
}
