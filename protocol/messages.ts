/**
 * Protocol types shared by the roles (primary/, standby/) and the process shell (server/): stop
 * modes, fault names, SQL results and notices, the synchronous_commit levels, and the WebSocket
 * close codes of the replication and control endpoints. They live below all three so that no role
 * imports the server shell (test/unit/layering.test.ts).
 */

export type StopMode = 'smart' | 'fast' | 'immediate';
export const STOP_MODES: readonly StopMode[] = ['smart', 'fast', 'immediate'];

export type SynchronousCommit = 'off' | 'local' | 'remote_write' | 'on' | 'remote_apply';

/** A notice sent to the client with a statement's result (PostgreSQL's NoticeResponse): a WARNING
 * the statement raised, or a NOTICE of the parser (an identifier truncated to 63 bytes). */
export interface Notice {
  severity: 'WARNING' | 'NOTICE';
  code: string;
  message: string;
  detail?: string;
}

/**
 * Faults a test can inject into a running server:
 * - cut_replication (standby): destroy the walreceiver's socket (no close handshake), stay down holdMs;
 * - wal_write_fail (standby): every WAL segment write fails with ENOSPC for holdMs (a full disk);
 * - redo_fail (any node): the next record the node applies throws an InvariantViolation inside
 *   redo (a programmer error), which ends the process with FATAL;
 * - slow_disk (any node): every write and fsync of the node's disk takes latencyMs more for holdMs
 *   (common/latency-disk.ts; the process stalls inside the call, as on a slow device);
 * - lifecycle_action_error (any node): the next action of the lifecycle machine throws an Error
 *   (EIO): the request that sent the event gets it, the process goes on;
 * - lifecycle_action_invariant (any node): the next lifecycle action throws an InvariantViolation,
 *   which ends the process with FATAL (lifecycle/lifecycle-actor.ts).
 */
export type FaultName =
  | 'cut_replication'
  | 'wal_write_fail'
  | 'redo_fail'
  | 'slow_disk'
  | 'lifecycle_action_error'
  | 'lifecycle_action_invariant';
export const FAULT_NAMES: readonly FaultName[] = [
  'cut_replication',
  'wal_write_fail',
  'redo_fail',
  'slow_disk',
  'lifecycle_action_error',
  'lifecycle_action_invariant',
];

export type SqlValue = string | number | boolean | null;

export interface QueryResult {
  /** PostgreSQL command tag, e.g. 'INSERT 0 1000', 'SELECT 1'. */
  command: string;
  columns: string[];
  rows: Array<Record<string, SqlValue>>;
  /** WARNINGs raised while the statement ran (PostgreSQL's NoticeResponse), if any. */
  notices?: Notice[];
}

/** WebSocket close codes (4000–4999 are the application's). */
export const CLOSE_AUTH_FAILED = 4001;
export const CLOSE_PROTOCOL_VIOLATION = 4002;
export const CLOSE_SHUTTING_DOWN = 4003;
export const CLOSE_REPLICATION_REFUSED = 4004;
