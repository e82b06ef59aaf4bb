/**
 * Pricing at the edges: the failover report carries counts only (standby/failover-report.ts); the
 * places that show seconds — the SQL function walsim_failover_report, the CLIs, the sweeps, the
 * simulator's trace — price it here, once, with the profile they were given.
 *
 * Entry points: `CountedFailover` (what a failover is priced from), `price(failover, profile)`,
 * `withModel(report, profile)` (the report plus its `model`), `genericRecordSeconds(profile)`.
 */
import { modelFailover, type ModeledFailover } from './model.ts';
import type { CostProfile } from './profile.ts';
import { PG_RECORD_KINDS, type FailoverCounts } from '../storage/replay-counts.ts';

/** A failover's exact counts and the standby's NBuffers (the only other input of the model). */
export interface CountedFailover {
  counts: FailoverCounts;
  nBuffers: number;
}

/** Modeled PostgreSQL seconds of a failover under `profile`. Pure (cost-model/model.ts). */
export function price(failover: CountedFailover, profile: CostProfile): ModeledFailover {
  return modelFailover(failover.counts, profile, failover.nBuffers);
}

/** A report as the edges show it: its counts and, beside them, their price (null: no profile). */
export type Priced<R extends CountedFailover> = R & { model: ModeledFailover | null };

/** `report` with `model` = its price under `profile` (null when there is no profile). */
export function withModel<R extends CountedFailover>(
  report: R,
  profile: CostProfile | null,
): Priced<R> {
  return { ...report, model: profile === null ? null : price(report, profile) };
}

/**
 * Seconds per record of a type the profile has no constant for: the median of its per-record
 * constants (`npm run calibrate` fits two values, the one-tuple records' — 5 of the 19 kinds — and
 * every other record's, so this is the latter: Btree/SPLIT_L, Standby/RUNNING_XACTS … are
 * page-level or no-page).
 */
export function genericRecordSeconds(profile: CostProfile): number {
  const v = PG_RECORD_KINDS.map((k) => profile.constants[`record.${k}`].seconds).sort(
    (a, b) => a - b,
  );
  const m = v.length >> 1;
  return v.length % 2 ? v[m]! : (v[m - 1]! + v[m]!) / 2;
}
