/**
 * Replay lag in seconds, sampled by the dashboard the way PostgreSQL's walsender LagTracker
 * measures it: remember when each upstream flush LSN was seen; a standby's lag is the time since
 * the first sample whose flush LSN is past the standby's replay LSN (the oldest WAL it has not yet
 * replayed was flushed then, at most one poll interval earlier). walsim's walsenders keep no lag
 * times, so this is the dashboard's own measurement, labelled as such; on PostgreSQL the page
 * shows pg_stat_replication.replay_lag instead.
 *
 * Data structure: per upstream, a ring of (epoch ms, flush LSN) samples in increasing LSN order,
 * bounded by `MAX_SAMPLES` (≈ 10 minutes at 250 ms).
 */
export const MAX_SAMPLES = 2400;

export class LagTracker {
  private readonly samples = new Map<string, Array<{ t: number; lsn: number }>>();

  /** An upstream's flush LSN at time t (epoch ms). Only advances are stored. */
  record(upstream: string, t: number, flushLsn: number): void {
    let s = this.samples.get(upstream);
    if (s === undefined) this.samples.set(upstream, (s = []));
    const last = s[s.length - 1];
    if (last !== undefined && flushLsn <= last.lsn) return;
    s.push({ t, lsn: flushLsn });
    if (s.length > MAX_SAMPLES) s.splice(0, s.length - MAX_SAMPLES);
  }

  /**
   * Seconds since the first flush past `replayLsn` was seen upstream; 0 when the standby has
   * replayed everything seen; null before any sample of that upstream.
   */
  lagSeconds(upstream: string, now: number, replayLsn: number): number | null {
    const s = this.samples.get(upstream);
    if (s === undefined || s.length === 0) return null;
    // The first sample past replayLsn (binary search: samples are in increasing LSN order).
    let lo = 0;
    let hi = s.length;
    while (lo < hi) {
      const mid = (lo + hi) >> 1;
      if (s[mid]!.lsn > replayLsn) hi = mid;
      else lo = mid + 1;
    }
    if (lo === s.length) return 0;
    return Math.max(0, (now - s[lo]!.t) / 1000);
  }

  forget(upstream: string): void {
    this.samples.delete(upstream);
  }
}
