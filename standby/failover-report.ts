/**
 * The failover report: when each step of "resume replay and promote" happened, how long each phase
 * took, and what buffer drops replay did meanwhile. Returned by promotion (control op `promote`,
 * `SELECT pg_promote()`) and by `status` as `failover`. Counts only: the edges that show seconds
 * (walsim_failover_report, the CLIs, the sweeps) price it with cost-model/price.ts.
 */
import type { DropBusyMs, DropCounters } from '../storage/drop.ts';
import type { PgDropRules } from '../storage/pg-drop-rules.ts';
import type { FailoverCounts } from '../storage/replay-counts.ts';

/** A lifecycle instant: wall clock (ISO) and a monotonic clock reading in ms (performance.now()). */
export interface Instant {
  at: string;
  monoMs: number;
}

export interface FailoverTimestamps {
  /** pg_wal_replay_resume() (or the promote request, when promotion was asked while not paused). */
  resumeRequested: Instant | null;
  /** The startup process continued replay. */
  replayResumed: Instant | null;
  promoteRequested: Instant | null;
  /** Replay reached the end of WAL received before promotion. */
  replayCaughtUp: Instant | null;
  endOfRecoveryWritten: Instant | null;
  /** pg_is_in_recovery() turned false: the node accepts writes. */
  readWrite: Instant | null;
  firstCheckpointDone: Instant | null;
}

/**
 * The failover's buffer drops: its drop counters (the same record as `counts.replay.drops`) with
 * the busy time spent inside them (ms, measured: the part the drop paths differ in).
 */
export type FailoverDropSpan = DropCounters & { ms: number; msByPath: DropBusyMs };

export interface FailoverReport {
  /** ISO time of resume (the failover's start) and of promotion done (read-write). */
  resumeAt: string | null;
  promotedAt: string | null;
  /** readWrite − resumeRequested, monotonic. */
  failoverMs: number | null;
  phases: {
    /** resumeRequested → replayCaughtUp: replaying the WAL received while paused. */
    replayMs: number | null;
    /** replayCaughtUp → endOfRecoveryWritten: END_OF_RECOVERY on the new timeline. */
    endOfRecoveryMs: number | null;
    /** endOfRecoveryWritten → readWrite. */
    openForWritesMs: number | null;
    /** readWrite → firstCheckpointDone (after failover; not part of failoverMs). */
    checkpointMs: number | null;
  };
  /** Every recorded instant (null when not reached). */
  timestamps: FailoverTimestamps;
  recordsReplayed: number;
  newTimeline: number | null;
  drop: FailoverDropSpan;
  /** The standby's NBuffers (what the model's scan costs depend on). */
  nBuffers: number;
  /**
   * The real PostgreSQL major whose drop rules the standby followed (`--pg-version`), with the
   * names that major gives its drop functions and its rules in a sentence each; absent: walsim's
   * own `--drop-strategy`.
   */
  pgRules?: { version: string; functions: PgDropRules['fn']; summary: string[] };
  /**
   * Exact event counts of the failover, per phase (cost-model/README.md "Counters"):
   * replay counts between resume and read-write; end-of-recovery and open-for-writes steps once
   * they happened.
   */
  counts: FailoverCounts;
}
