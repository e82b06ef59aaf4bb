/**
 * Records the instants of a failover (resume → promotion done) with a monotonic and a wall clock,
 * and the drop counters and replayed records between them, and turns them into a FailoverReport.
 */
import type { PgDropRules } from '../storage/pg-drop-rules.ts';
import type { Clock } from '../common/clock.ts';
import { diffCounters } from '../common/counters.ts';
import { isoTimestamp } from '../common/iso-time.ts';
import { DROP_PATHS, type DropBusyMs } from '../storage/drop.ts';
import {
  diffReplayCounts,
  type EndOfRecoveryCounts,
  type OpenForWritesCounts,
  type ReplayCounts,
} from '../storage/replay-counts.ts';
import type { FailoverReport, FailoverTimestamps, Instant } from './failover-report.ts';

type Baseline = {
  /** Busy time inside drops per path (measured; the counts are in `counts.drops`). */
  ms: DropBusyMs;
  records: number;
  counts: ReplayCounts;
};

const noEndOfRecovery = (): EndOfRecoveryCounts => ({
  timelineHistoryFiles: 0,
  walSegmentInits: 0,
  records: 0,
  walFlushes: 0,
});
const noOpenForWrites = (): OpenForWritesCounts => ({ controlFileUpdates: 0 });

function now(clock: Clock): Instant {
  return { at: isoTimestamp(clock.now()), monoMs: clock.monoMs() };
}

function span(a: Instant | null, b: Instant | null): number | null {
  return a !== null && b !== null ? b.monoMs - a.monoMs : null;
}

export class FailoverClock {
  private t: FailoverTimestamps = FailoverClock.empty();
  private baseline: Baseline | null = null;
  private final: Baseline | null = null;
  newTimeline: number | null = null;
  /** Steps of ending recovery and opening for writes, counted by the node as it does them. */
  private endOfRecovery = noEndOfRecovery();
  private openForWrites = noOpenForWrites();

  constructor(
    /** The node's cumulative busy time inside drops (storage NodeStorage.dropBusyMs). */
    private readonly dropBusyMs: () => DropBusyMs,
    private readonly recordsReplayed: () => number,
    /** A snapshot of the node's cumulative replay counters (storage/replay-counts.ts). */
    private readonly replayCounts: () => ReplayCounts,
    private readonly nBuffers: number,
    /** Simulated time in the simulator: failover phases are then reported in simulated time. */
    private readonly clock: Clock,
  ) {}

  /** The node did one end-of-recovery step. */
  countEndOfRecovery(step: keyof EndOfRecoveryCounts): void {
    this.endOfRecovery[step]++;
  }

  /** The node did one open-for-writes step. */
  countOpenForWrites(step: keyof OpenForWritesCounts): void {
    this.openForWrites[step]++;
  }

  private static empty(): FailoverTimestamps {
    return {
      resumeRequested: null,
      replayResumed: null,
      promoteRequested: null,
      replayCaughtUp: null,
      endOfRecoveryWritten: null,
      readWrite: null,
      firstCheckpointDone: null,
    };
  }

  private capture(): Baseline {
    return {
      ms: { ...this.dropBusyMs() },
      records: this.recordsReplayed(),
      counts: this.replayCounts(),
    };
  }

  /** A resume (or a promote without a prior resume) starts the failover clock afresh. */
  resumeRequested(): void {
    if (this.t.promoteRequested !== null) return; // promotion already running: the clock is set
    this.t = FailoverClock.empty();
    this.t.resumeRequested = now(this.clock);
    this.baseline = this.capture();
    this.final = null;
    this.endOfRecovery = noEndOfRecovery();
    this.openForWrites = noOpenForWrites();
  }

  mark(name: Exclude<keyof FailoverTimestamps, 'resumeRequested'>): void {
    if (name === 'promoteRequested' && this.t.resumeRequested === null) this.resumeRequested();
    this.t[name] = now(this.clock);
    if (name === 'readWrite') this.final = this.capture();
  }

  /**
   * The report: counts only (the edges that show seconds price it: cost-model/price.ts); `pgRules`
   * names the real major's rules the node follows (its DropSettings.rules), if any.
   */
  report(pgRules: PgDropRules | null = null): FailoverReport | null {
    const t = this.t;
    if (t.resumeRequested === null || this.baseline === null) return null;
    const end = this.final ?? this.capture();
    const b = this.baseline;
    const replay = diffReplayCounts(b.counts, end.counts);
    const msByPath = diffCounters(b.ms, end.ms);
    return {
      resumeAt: t.resumeRequested.at,
      promotedAt: t.readWrite?.at ?? null,
      failoverMs: span(t.resumeRequested, t.readWrite),
      phases: {
        replayMs: span(t.resumeRequested, t.replayCaughtUp),
        endOfRecoveryMs: span(t.replayCaughtUp, t.endOfRecoveryWritten),
        openForWritesMs: span(t.endOfRecoveryWritten, t.readWrite),
        checkpointMs: span(t.readWrite, t.firstCheckpointDone),
      },
      timestamps: { ...t },
      recordsReplayed: end.records - b.records,
      newTimeline: this.newTimeline,
      drop: {
        ms: DROP_PATHS.reduce((a, p) => a + msByPath[p], 0),
        msByPath,
        ...replay.drops,
      },
      nBuffers: this.nBuffers,
      ...(pgRules === null
        ? {}
        : {
            pgRules: {
              version: pgRules.version,
              functions: { ...pgRules.fn },
              summary: [...pgRules.summary],
            },
          }),
      counts: {
        replay,
        endOfRecovery: { ...this.endOfRecovery },
        openForWrites: { ...this.openForWrites },
      },
    };
  }
}
