/**
 * Control-endpoint messages between the CLIs (or tests) and a server: JSON text frames, one
 * request → one reply, matched by `id`. Every incoming request is validated here; a malformed one
 * gets a reply naming what was wrong and the connection stays usable.
 */
import { WalsimError } from '../common/errors.ts';
import { MAX_DISK_LATENCY_MS } from '../common/latency-disk.ts';
import { STOP_MODES, FAULT_NAMES, type StopMode, type FaultName } from '../protocol/messages.ts';

export {
  STOP_MODES,
  FAULT_NAMES,
  type StopMode,
  type FaultName,
  type SqlValue,
  type QueryResult,
  type Notice,
} from '../protocol/messages.ts';

export type ControlRequest =
  | { id: number; op: 'sql'; sql: string }
  | { id: number; op: 'status' }
  | { id: number; op: 'inspect' }
  | { id: number; op: 'basebackup'; targetDir: string }
  /** latencyMs: slow_disk only (default 100). */
  | { id: number; op: 'fault'; fault: FaultName; holdMs: number; latencyMs?: number }
  | { id: number; op: 'stop'; mode: StopMode }
  | { id: number; op: 'promote'; wait: boolean; waitSeconds: number };

export interface ControlErrorBody {
  code: string;
  message: string;
  /** PostgreSQL's DETAIL line, when there is one. */
  detail?: string;
  /**
   * ERROR unless said otherwise. WARNING: PostgreSQL sent this as a warning and then ended the
   * session without completing the command (a synchronous-replication wait ended by fast shutdown).
   */
  severity?: 'ERROR' | 'FATAL' | 'WARNING';
}

export type ControlReply =
  | { id: number; ok: true; result: unknown }
  | { id: number | null; ok: false; error: ControlErrorBody };

/** Largest control frame a server accepts (ws maxPayload). */
export const CONTROL_MAX_PAYLOAD = 1 << 20;

function bad(message: string): WalsimError {
  return new WalsimError('protocol_violation', `invalid control request: ${message}`);
}

/** A `fault` request's fields: a known fault, holdMs 0–600000, latencyMs for slow_disk only. */
function parseFaultRequest(id: number, v: Record<string, unknown>): ControlRequest {
  const holdMs = v.holdMs ?? 0;
  if (typeof v.fault !== 'string' || !(FAULT_NAMES as readonly string[]).includes(v.fault)) {
    throw bad(`"fault" must be one of ${FAULT_NAMES.join(', ')}`);
  }
  if (typeof holdMs !== 'number' || !Number.isInteger(holdMs) || holdMs < 0 || holdMs > 600_000) {
    throw bad('"holdMs" must be an integer between 0 and 600000');
  }
  if (v.latencyMs !== undefined) {
    if (v.fault !== 'slow_disk') throw bad('"latencyMs" applies to the slow_disk fault only');
    if (
      typeof v.latencyMs !== 'number' ||
      !Number.isInteger(v.latencyMs) ||
      v.latencyMs < 0 ||
      v.latencyMs > MAX_DISK_LATENCY_MS
    ) {
      throw bad(`"latencyMs" must be an integer between 0 and ${MAX_DISK_LATENCY_MS}`);
    }
    return { id, op: 'fault', fault: v.fault, holdMs, latencyMs: v.latencyMs };
  }
  return { id, op: 'fault', fault: v.fault as FaultName, holdMs };
}

/** A `promote` request's fields: wait (default true), waitSeconds (a positive integer, default 60). */
function parsePromoteRequest(id: number, v: Record<string, unknown>): ControlRequest {
  const wait = v.wait ?? true;
  const waitSeconds = v.waitSeconds ?? 60;
  if (typeof wait !== 'boolean') throw bad('"wait" must be a boolean');
  if (typeof waitSeconds !== 'number' || !Number.isInteger(waitSeconds) || waitSeconds <= 0) {
    throw bad('"waitSeconds" must be a positive integer');
  }
  return { id, op: 'promote', wait, waitSeconds };
}

/** Parse and validate one request frame. Throws WalsimError('protocol_violation') naming the problem. */
export function parseControlRequest(text: string): ControlRequest {
  let value: unknown;
  try {
    value = JSON.parse(text);
  } catch {
    throw bad('frame is not valid JSON');
  }
  if (typeof value !== 'object' || value === null || Array.isArray(value))
    throw bad('frame is not a JSON object');
  const v = value as Record<string, unknown>;
  if (typeof v.id !== 'number' || !Number.isSafeInteger(v.id)) throw bad('"id" must be an integer');
  const id = v.id;
  switch (v.op) {
    case 'sql':
      if (typeof v.sql !== 'string') throw bad('"sql" must be a string');
      return { id, op: 'sql', sql: v.sql };
    case 'status':
      return { id, op: 'status' };
    case 'inspect':
      return { id, op: 'inspect' };
    case 'fault':
      return parseFaultRequest(id, v);
    case 'basebackup':
      if (typeof v.targetDir !== 'string' || v.targetDir === '')
        throw bad('"targetDir" must be a non-empty string');
      return { id, op: 'basebackup', targetDir: v.targetDir };
    case 'stop': {
      const mode = v.mode ?? 'fast';
      if (typeof mode !== 'string' || !(STOP_MODES as readonly string[]).includes(mode)) {
        throw bad(`"mode" must be one of ${STOP_MODES.join(', ')}`);
      }
      return { id, op: 'stop', mode: mode as StopMode };
    }
    case 'promote':
      return parsePromoteRequest(id, v);
    default:
      throw bad(
        `unknown op ${JSON.stringify(v.op)} (expected sql, status, inspect, basebackup, fault, stop or promote)`,
      );
  }
}

/** The `id` of a frame that failed validation, if it has one, so the error reply can be matched. */
export function requestIdOf(text: string): number | null {
  try {
    const v = JSON.parse(text) as { id?: unknown };
    return typeof v.id === 'number' && Number.isSafeInteger(v.id) ? v.id : null;
  } catch {
    return null;
  }
}
