/**
 * The failover report: when each step of "resume replay and promote" happened, how long each phase
 * took, and what buffer drops replay did meanwhile. Returned by promotion (control op `promote`,
 * `SELECT pg_promote()`) and by `status` as `failover`.
 */
import type { DropPath } from '../storage/drop.ts';
import type { FailoverCounts } from '../storage/cost-model/counts.ts';
import { modelFailover, type ModeledFailover } from '../storage/cost-model/model.ts';
import type { CostProfile } from '../storage/cost-model/profile.ts';

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

export interface FailoverDrop {
  /** Busy time inside buffer drops during the failover, ms (the part the drop paths differ in). */
  ms: number;
  msByPath: Record<DropPath, number>;
  scanned: number;
  probes: number;
  invalidated: number;
  /** List elements walked by rel-list / recovery-hash drops, and recovery-hash builds (full scans). */
  listSteps: number;
  hashBuilds: number;
  drops: Record<DropPath, number>;
}

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
  drop: FailoverDrop;
  /** The standby's NBuffers (what the model's scan costs depend on). */
  nBuffers: number;
  /**
   * Exact event counts of the failover, per phase (storage/cost-model/README.md "Counters"):
   * replay counts between resume and read-write; end-of-recovery and open-for-writes steps once
   * they happened.
   */
  counts: FailoverCounts;
  /** Modeled PostgreSQL seconds from `counts` (profile named); null if no profile could be loaded. */
  model: ModeledFailover | null;
}

/** The report with its `model` computed from its counts with `profile` (null: no model). */
export function withModel(
  report: Omit<FailoverReport, 'model'>,
  profile: CostProfile | null,
): FailoverReport {
  return {
    ...report,
    model: profile === null ? null : modelFailover(report.counts, profile, report.nBuffers),
  };
}
