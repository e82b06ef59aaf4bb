/**
 * A standby's recovery target (recovery_target_lsn / _xid / _time / _name / recovery_target =
 * 'immediate', with recovery_target_inclusive) and where it stops replay, as PostgreSQL 15's
 * startup process decides it record by record (xlogrecovery.c recoveryStopsBefore before a record
 * is applied, recoveryStopsAfter after it). Replay never goes past the stop, whatever promotion or
 * pg_wal_replay_resume() asks: at the target it ends recovery (recovery_target_action = promote)
 * or pauses there first (pause; resuming then promotes). Pure.
 *
 * Entry points: `RecoveryTarget`, `recoveryTargetOf`, `stopOf`, `describeTarget`.
 */
import { formatLsn, parseLsn, type Lsn } from '../../wal/lsn.ts';
import type { PgWalRecord } from './wal-records.ts';

export type RecoveryTarget = (
  | { kind: 'lsn'; lsn: Lsn }
  | { kind: 'xid'; xid: number }
  /** µs since 2000-01-01 UTC, as xact_time. */
  | { kind: 'time'; time: number; text: string }
  | { kind: 'name'; name: string }
  | { kind: 'immediate' }
) & { inclusive: boolean; action: string };

/** The settings as the standby reports them (empty strings when unset). */
export interface RecoveryTargetSettings {
  target: string;
  lsn: string;
  xid: string;
  time: string;
  /** recovery_target_time as µs since 2000-01-01 UTC (the server parsed it), or null. */
  timeUs: string | null;
  name: string;
  inclusive: string;
  action: string;
}

/** The one recovery target a server runs with (PostgreSQL refuses more than one), or null. */
export function recoveryTargetOf(s: RecoveryTargetSettings): RecoveryTarget | null {
  const common = { inclusive: s.inclusive !== 'off', action: s.action };
  if (s.target === 'immediate') return { kind: 'immediate', ...common };
  if (s.lsn !== '') return { kind: 'lsn', lsn: parseLsn(s.lsn), ...common };
  if (s.xid !== '') return { kind: 'xid', xid: Number(s.xid), ...common };
  if (s.time !== '' && s.timeUs !== null)
    return { kind: 'time', time: Number(s.timeUs), text: s.time, ...common };
  if (s.name !== '') return { kind: 'name', name: s.name, ...common };
  return null;
}

/**
 * Whether replay stops at `r`: 'before' it (not applied) or 'after' it, else null — PostgreSQL's
 * conditions exactly. A consistent hot standby has reached consistency, so 'immediate' stops
 * before the next record. An xid or time target needs the record's xactEnd (pg-wal/ gives it).
 */
export function stopOf(t: RecoveryTarget, r: PgWalRecord): 'before' | 'after' | null {
  if (t.kind === 'immediate') return 'before';
  if (t.kind === 'lsn') return r.lsn >= t.lsn ? (t.inclusive ? 'after' : 'before') : null;
  if (t.kind === 'name')
    return r.rmgr === 'XLOG' && r.type === 'RESTORE_POINT' && r.restorePoint === t.name
      ? 'after'
      : null;
  const end = r.rmgr === 'Transaction' ? r.xactEnd : undefined;
  if (end === undefined) return null;
  if (t.kind === 'xid') return end.xid === t.xid ? (t.inclusive ? 'after' : 'before') : null;
  // Many commits can share a time: inclusive stops before the first one later than the target
  // (so every one at the target is applied), exclusive before the first one at or after it.
  return (t.inclusive ? end.time > t.time : end.time >= t.time) ? 'before' : null;
}

/** The target in the words of its setting, for the answer. */
export function describeTarget(t: RecoveryTarget): string {
  const incl = `recovery_target_inclusive = ${t.inclusive ? 'on' : 'off'}`;
  const action = `recovery_target_action = ${t.action}`;
  switch (t.kind) {
    case 'immediate':
      return `recovery_target = 'immediate' (${action})`;
    case 'lsn':
      return `recovery_target_lsn = '${formatLsn(t.lsn)}' (${incl}, ${action})`;
    case 'xid':
      return `recovery_target_xid = '${t.xid}' (${incl}, ${action})`;
    case 'time':
      return `recovery_target_time = '${t.text}' (${incl}, ${action})`;
    case 'name':
      return `recovery_target_name = '${t.name}' (${action})`;
  }
}
