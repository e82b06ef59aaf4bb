/**
 * The read side of walsim's SQL: SELECT count(*), SHOW, and the recovery-information and
 * recovery-control functions (xlogfuncs.c). State comes from the node; recovery and pause state
 * come from its lifecycle machine.
 */
import { WalsimError } from '../common/errors.ts';
import { formatLsn } from '../wal/lsn.ts';
import { formatSharedBuffers } from '../storage/shared-buffers.ts';
import { pauseStateOf, refusalOf } from '../standby/lifecycle-machine.ts';
import type { QueryResult, SqlValue } from './control-protocol.ts';
import type { ServerNode } from './node.ts';
import type { Statement } from './sql-parser.ts';

export function executeRead(node: ServerNode, stmt: Statement): QueryResult {
  const one = (column: string, value: SqlValue): QueryResult => ({ command: 'SELECT 1', columns: [column], rows: [{ [column]: value }] });
  switch (stmt.type) {
    case 'select_count': {
      const rel = node.storage.catalog.lookup(stmt.name);
      if (rel === undefined) throw new WalsimError('undefined_table', `relation "${stmt.name}" does not exist`, '42P01');
      const { heap, clog } = node.storage;
      if (stmt.predicate.op === 'all') return one('count', heap.countVisible(rel, clog));
      let n = 0;
      heap.forEachPageToDelete(rel, stmt.predicate, clog, (_block, ranges) => {
        for (let i = 1; i < ranges.length; i += 2) n += ranges[i]!;
      });
      return one('count', n);
    }
    case 'show':
      return one(stmt.name, showSetting(node, stmt.name));
    case 'select_function':
      return one(stmt.fn, callFunction(node, stmt.fn, stmt.args));
    default:
      throw new WalsimError('invalid_input', `statement ${stmt.type} is not a read`);
  }
}

function showSetting(node: ServerNode, name: string): string {
  switch (name) {
    case 'shared_buffers': return formatSharedBuffers(node.nBuffers);
    case 'synchronous_commit': return node.config.synchronousCommit;
    case 'synchronous_standby_names': return node.config.synchronousStandbyNames;
    case 'wal_segment_size': return `${node.config.walSegmentSize / (1024 * 1024)}MB`;
    case 'hot_standby': return 'on';
    case 'autovacuum': return 'off';
    case 'walsim.drop_strategy': return node.config.dropStrategy;
    default: throw new WalsimError('invalid_input', `unrecognized configuration parameter "${name}"`, '42704');
  }
}

function requireRecovery(node: ServerNode): void {
  if (!node.inRecovery) throw new WalsimError('not_in_recovery', 'recovery is not in progress', '55000');
}

function callFunction(node: ServerNode, fn: string, args: Array<number | boolean | string>): SqlValue {
  const noArgs = () => {
    if (args.length > 0) throw new WalsimError('invalid_input', `function ${fn}() takes no arguments`, '42883');
  };
  switch (fn) {
    case 'pg_current_wal_lsn':
      noArgs();
      if (node.inRecovery) throw new WalsimError('not_in_recovery', 'recovery is in progress', '55000');
      return formatLsn(node.wal.insertLsn);
    case 'pg_current_wal_flush_lsn':
      noArgs();
      return formatLsn(node.wal.flushLsn);
    case 'pg_is_in_recovery':
      noArgs();
      return node.inRecovery;
    case 'pg_last_wal_receive_lsn':
      noArgs();
      return node.inRecovery ? formatLsn(node.wal.flushLsn) : null;
    case 'pg_last_wal_replay_lsn':
      noArgs();
      return node.inRecovery && node.startup ? formatLsn(node.startup.replayEndLsn) : null;
    case 'pg_wal_replay_pause':
    case 'pg_wal_replay_resume': {
      noArgs();
      const event = fn === 'pg_wal_replay_pause' ? 'PAUSE' : 'RESUME';
      const refused = refusalOf(node.lifecycle.getSnapshot(), event);
      if (refused) throw refused;
      node.send({ type: event });
      return '';
    }
    case 'pg_is_wal_replay_paused':
      noArgs();
      requireRecovery(node);
      return pauseStateOf(node.lifecycle.getSnapshot()) !== 'not paused';
    case 'pg_get_wal_replay_pause_state':
      noArgs();
      requireRecovery(node);
      return pauseStateOf(node.lifecycle.getSnapshot());
    default:
      throw new WalsimError('invalid_input', `function ${fn}(${args.map((a) => typeof a === 'number' ? 'integer' : typeof a === 'boolean' ? 'boolean' : 'unknown').join(', ')}) does not exist`, '42883');
  }
}
