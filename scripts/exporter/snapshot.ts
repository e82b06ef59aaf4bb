/**
 * What the exporter's two threads share: the shape of a finished cycle (`CycleSnapshot`), the
 * closed sets of error and restart reasons, the `standby` label and `--interval`'s parser. The
 * thread answering HTTP imports this module, never the cycle's (collector.ts, incremental.ts,
 * windows.ts, predict's reader and models): its heap holds only what a scrape serves, so its
 * garbage collections stay short (test/unit/exporter.test.ts checks the import graph).
 *
 * Entry points: `Target`, `StandbyStatus`, `CycleSnapshot`, `ERROR_REASONS`, `ErrorReason`,
 * `RESTART_REASONS`, `RestartReason`, `initialSnapshot`, `standbyLabel`, `parseDuration`.
 */
import type { Prediction } from '../predict/prediction.ts';
import { parseConninfo, redact } from '../postgres/conninfo.ts';

/** One watched standby: its URL, its data directory (its pg_wal is read in-process), its label. */
export interface Target {
  url: string;
  pgdata?: string;
  /** The `standby` label: host:port of the URL (never its user or password). */
  label: string;
}

/** Why a prediction failed: a small closed set, the `reason` label of the error counter. */
export const ERROR_REASONS = [
  'connect', // the server cannot be reached or dropped the session
  'privileges', // the role lacks pg_monitor (or the OS user cannot read pg_wal)
  'not_in_recovery', // a primary, or a standby promoted meanwhile
  'version', // not PostgreSQL 13–18, or --pgdata of another major
  'wal_missing', // the range's segments are not (or no longer) in pg_wal
  'pgdata', // --pgdata is not this standby's data directory
  'no_wal_source', // neither --pgdata nor a primary with pg_walinspect
  'timeout',
  'other',
  'worker', // the exporter's cycle thread failed (it is restarted; cycle-host.ts)
] as const;
export type ErrorReason = (typeof ERROR_REASONS)[number];

/** Why the kept state was dropped and rebuilt: the `reason` label of the restart counter. */
export const RESTART_REASONS = [
  'first', // the first cycle (or the first after a cycle that could not read the standby)
  'timeline', // the standby's timeline changed
  'restartpoint', // a restartpoint moved the redo predict learns from
  'standby_restart', // pg_postmaster_start_time() changed: a new startup process
  'lsn_went_back', // the replay or receive LSN is behind what was read
  'settings', // NBuffers, version, system identifier or data directory changed
  'failed_cycle', // the last cycle failed (a segment removed or recycled, a read error)
  // pg_buffercache installed, no --pgdata, or a recovery target set (where replay stops is
  // decided record by record from the replay LSN on): a whole prediction every cycle
  'not_incremental',
] as const;
export type RestartReason = (typeof RESTART_REASONS)[number];

export interface StandbyStatus {
  target: Target;
  /** The last cycle's prediction succeeded. */
  up: boolean;
  /** The last cycle's prediction, null when it failed (never a stale one in its place). */
  prediction: Prediction | null;
  /** When the last successful prediction finished (ms since the epoch), null before one. */
  lastGoodAt: number | null;
  /** Seconds the last prediction took (successful or not), null before the first. */
  lastDurationS: number | null;
  lastError: { reason: ErrorReason; message: string } | null;
  predictions: number;
  errors: Record<ErrorReason, number>;
  /** Starts over of the kept replay state, by reason (incremental.ts). */
  restarts: Record<RestartReason, number>;
  /** Bytes of WAL the cycles read. */
  walReadBytes: number;
}

export interface CycleSnapshot {
  standbys: readonly StandbyStatus[];
  /** Over the standbys that answered in the last cycle; null when none did. */
  ranking: { patroniPick: string | null; writableFirst: string } | null;
  cycles: number;
  lastCycleAt: number | null;
  /** The cycle's thread (cycle-host.ts): running or not, restarts; null when run in-process. */
  thread: { up: boolean; restarts: number } | null;
}

const zeros = <K extends string>(keys: readonly K[]) =>
  Object.fromEntries(keys.map((k) => [k, 0])) as Record<K, number>;

/** One standby before its first cycle: down, nothing counted. */
export function initialStatus(target: Target): StandbyStatus {
  return {
    target,
    up: false,
    prediction: null,
    lastGoodAt: null,
    lastDurationS: null,
    lastError: null,
    predictions: 0,
    errors: zeros(ERROR_REASONS),
    restarts: zeros(RESTART_REASONS),
    walReadBytes: 0,
  };
}

/** Before the first cycle: every standby down, nothing counted. */
export function initialSnapshot(targets: readonly Target[]): CycleSnapshot {
  return {
    standbys: targets.map(initialStatus),
    ranking: null,
    cycles: 0,
    lastCycleAt: null,
    thread: null,
  };
}

/**
 * host:port of a libpq connection string, URI or keyword/value (libpq's defaults: localhost, 5432),
 * never its user or password; an unparsable one is shown redacted.
 */
export function standbyLabel(url: string): string {
  try {
    const p = parseConninfo(url).params;
    const host = p.host || p.hostaddr || 'localhost';
    return `${host.includes(':') && !host.startsWith('[') ? `[${host}]` : host}:${p.port || '5432'}`;
  } catch {
    return redact(url);
  }
}

/** `15s`, `1m`, `500ms`, `2` (seconds) → milliseconds; null when it is not a positive duration. */
export function parseDuration(text: string): number | null {
  const m = /^(\d+(?:\.\d+)?)(ms|s|m|h)?$/.exec(text.trim());
  if (m === null) return null;
  const ms = Number(m[1]) * { ms: 1, s: 1000, m: 60_000, h: 3_600_000 }[m[2] ?? 's']!;
  return ms > 0 && Number.isFinite(ms) ? ms : null;
}
