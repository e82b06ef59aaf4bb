/**
 * Pricing at the edges: the failover report carries counts only (standby/failover-report.ts); the
 * places that show seconds — the SQL function walsim_failover_report, the CLIs, the sweeps, the
 * simulator's trace — price it here, once, with the profile they were given.
 *
 * Entry points: `CountedFailover` (what a failover is priced from), `price(failover, profile)`,
 * `withModel(report, profile)` (the report plus its `model`).
 */
import { modelFailover, type ModeledFailover } from './model.ts';
import type { CostProfile } from './profile.ts';
import type { FailoverCounts } from '../storage/replay-counts.ts';

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
