/**
 * The exporter's own prediction cycle: every interval, each watched standby's
 * `IncrementalPredictor` (all at once, each on its own sessions; it reads only the WAL that came
 * since the last cycle), then the ranking of those that answered. A scrape never
 * waits for this: it reads `snapshot()`, the last finished cycle's results.
 *
 * One standby failing (down, not in recovery, its WAL segments removed, privileges missing) marks
 * that standby down and counts the error under a stable reason; the other standbys and the next
 * cycle go on. Nothing here writes to a server: predictStandby's sessions are read-only.
 *
 * Entry points: `Collector`, `Target`, `StandbyStatus`, `ERROR_REASONS`, `errorReason`,
 * `standbyLabel`, `parseDuration`.
 */
import { isWalsimError } from '../../common/errors.ts';
import type { CostProfile } from '../../cost-model/profile.ts';
import { predictStandby, rankStandbys } from '../predict/prediction.ts';
import { redact } from '../postgres/conninfo.ts';
import { IncrementalPredictor } from './incremental.ts';
import {
  initialStatus,
  RESTART_REASONS,
  type CycleSnapshot,
  type ErrorReason,
  type RestartReason,
  type StandbyStatus,
  type Target,
} from './snapshot.ts';

// What the threads share lives in snapshot.ts (the HTTP thread imports it, not this module).
export {
  ERROR_REASONS,
  parseDuration,
  standbyLabel,
  type CycleSnapshot,
  type ErrorReason,
  type StandbyStatus,
  type Target,
} from './snapshot.ts';

/** The reason label of a failed prediction, from its error. */
export function errorReason(e: unknown): ErrorReason {
  const msg = e instanceof Error ? e.message : String(e);
  if (isWalsimError(e) && e.kind === 'not_connected') return 'connect';
  if (/permission denied|must be superuser|pg_monitor|cannot be read \(EACCES/i.test(msg))
    return 'privileges';
  if (/not in recovery/.test(msg)) return 'not_in_recovery';
  if (/predict reads PostgreSQL \d|holds a PostgreSQL \S+ cluster, the standby runs/.test(msg))
    return 'version';
  if (/is not complete in|no longer has the WAL range|cannot read the WAL replayed since/.test(msg))
    return 'wal_missing';
  if (/^--pgdata /.test(msg)) return 'pgdata';
  if (/no way to read the WAL range|has no pg_walinspect/.test(msg)) return 'no_wal_source';
  if (/timeout|canceling statement/i.test(msg)) return 'timeout';
  if (/terminat|ECONNRESET|ECONNREFUSED|EPIPE|Connection|shutting down|starting up/i.test(msg))
    return 'connect';
  return 'other';
}

export type PredictFn = typeof predictStandby;

export interface CollectorOptions {
  targets: Target[];
  primary?: string;
  profile: CostProfile;
  profileRef: string;
  intervalMs: number;
  /** Replaced in unit tests; otherwise each standby's IncrementalPredictor. */
  predict?: PredictFn;
  /** Told of every failed prediction (the exporter logs one line to stderr). */
  onError?: (s: StandbyStatus) => void;
  /** Told of every finished cycle (the cycle thread posts the snapshot to the HTTP thread). */
  onCycle?: (snap: CycleSnapshot) => void;
  /**
   * The tallies to count on from (a restarted cycle thread: the counters stay monotonic); its
   * standbys are in `targets`' order.
   */
  carry?: CycleSnapshot;
}

export class Collector {
  private readonly status: StandbyStatus[];
  /** Each standby's prediction kept between cycles (same order as `status`). */
  private readonly predictors: IncrementalPredictor[];
  private ranking: CycleSnapshot['ranking'] = null;
  private cycles = 0;
  private lastCycleAt: number | null = null;
  private timer: NodeJS.Timeout | null = null;
  private running: Promise<void> | null = null;
  private stopped = false;
  /** Starts over counted by an earlier collector (`carry`), added to this one's. */
  private readonly restartsBefore: Array<Record<RestartReason, number> | null>;
  private readonly walReadBefore: number[];

  constructor(private readonly opts: CollectorOptions) {
    this.status = opts.targets.map(initialStatus);
    this.predictors = opts.targets.map(() => new IncrementalPredictor());
    this.restartsBefore = opts.targets.map(() => null);
    this.walReadBefore = opts.targets.map(() => 0);
    if (opts.carry !== undefined) this.countOnFrom(opts.carry);
  }

  /** Start the tallies where a previous collector of the same targets left them. */
  private countOnFrom(carry: CycleSnapshot): void {
    this.cycles = carry.cycles;
    this.lastCycleAt = carry.lastCycleAt;
    this.status.forEach((s, i) => {
      const c = carry.standbys[i];
      if (c === undefined || c.target.label !== s.target.label) return;
      s.predictions = c.predictions;
      s.errors = { ...c.errors };
      s.lastGoodAt = c.lastGoodAt;
      s.lastError = c.lastError;
      s.walReadBytes = c.walReadBytes;
      this.walReadBefore[i] = c.walReadBytes;
      this.restartsBefore[i] = { ...c.restarts };
      s.restarts = { ...c.restarts };
    });
  }

  snapshot(): CycleSnapshot {
    return {
      standbys: this.status,
      ranking: this.ranking,
      cycles: this.cycles,
      lastCycleAt: this.lastCycleAt,
      thread: null,
    };
  }

  /** Cycle now, then every interval counted from each cycle's start (never two at once). */
  start(): void {
    const loop = async () => {
      const began = Date.now();
      this.running = this.runCycle();
      await this.running;
      this.running = null;
      if (this.stopped) return;
      const wait = Math.max(0, this.opts.intervalMs - (Date.now() - began));
      this.timer = setTimeout(() => void loop(), wait);
    };
    void loop();
  }

  async stop(): Promise<void> {
    this.stopped = true;
    if (this.timer !== null) clearTimeout(this.timer);
    await this.running;
  }

  /** One cycle: every standby predicted concurrently; a failure stays with its standby. */
  async runCycle(): Promise<void> {
    await Promise.all(this.status.map((s, i) => this.predictOne(s, this.predictors[i]!)));
    const good = this.status.filter((s) => s.prediction !== null);
    if (good.length === 0) this.ranking = null;
    else {
      const r = rankStandbys(good.map((s) => s.prediction!));
      const labelOf = (url: string | null) =>
        url === null
          ? null
          : (good.find((s) => s.prediction!.standby === url)?.target.label ?? null);
      this.ranking = {
        patroniPick: labelOf(r.patroniPick),
        writableFirst: labelOf(r.writableFirst)!,
      };
    }
    this.cycles += 1;
    this.lastCycleAt = Date.now();
    this.opts.onCycle?.(this.snapshot());
  }

  private async predictOne(s: StandbyStatus, incremental: IncrementalPredictor): Promise<void> {
    const t0 = performance.now();
    const predict = this.opts.predict ?? ((input) => incremental.predict(input));
    try {
      const p = await predict({
        standby: s.target.url,
        pgdata: s.target.pgdata,
        primary: this.opts.primary,
        profile: this.opts.profile,
        profileRef: this.opts.profileRef,
      });
      s.prediction = p;
      s.up = true;
      s.lastGoodAt = Date.now();
      s.lastError = null;
    } catch (e) {
      const reason = errorReason(e);
      s.prediction = null;
      s.up = false;
      s.errors[reason] += 1;
      let message = redact(e instanceof Error ? e.message : String(e));
      if (reason === 'privileges')
        message += ` — the exporter's role needs pg_monitor (GRANT pg_monitor TO the role in the URL), and the OS user read access to --pgdata's pg_wal`;
      s.lastError = { reason, message };
      this.opts.onError?.(s);
    } finally {
      s.predictions += 1;
      s.lastDurationS = (performance.now() - t0) / 1000;
      const before = this.restartsBefore[this.status.indexOf(s)] ?? null;
      s.restarts = { ...incremental.restarts };
      if (before !== null) for (const r of RESTART_REASONS) s.restarts[r] += before[r];
      s.walReadBytes = incremental.walReadBytes + this.walReadBefore[this.status.indexOf(s)]!;
    }
  }
}
