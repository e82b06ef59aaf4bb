/**
 * npm run calibrate's cell design: every fitted group must be identified by the cells (its column of
 * the grouped design matrix is not a combination of the others'). Counts from in-process walsim
 * twins of the planned cells; no PostgreSQL, no timing.
 */
import { describe, expect, it } from 'vitest';
import { unidentifiedGroups } from '../../cost-model/fit.ts';
import { costFeatures } from '../../cost-model/model.ts';
import { loadProfile } from '../../cost-model/profile.ts';
import { countCellsInProcess } from '../../scripts/experiment/in-process.ts';
import {
  CALIBRATION_GROUPS,
  DEFAULT_CALIBRATION_REL_DIVISORS,
  DEFAULT_CALIBRATION_SIZES,
  DEFAULT_CALIBRATION_TABLES,
  planCalibration,
  fitTargets,
  storedLabel,
  walsimTwin,
} from '../../scripts/postgres/calibrate.ts';
import type { CellSpec, RunRecord } from '../../scripts/experiment/sweep.ts';

const base = loadProfile('seed-001');

async function unidentified(plan: CellSpec[]): Promise<string[]> {
  const counts = await countCellsInProcess(plan.map(walsimTwin), { thresholdDivisor: 32 });
  return unidentifiedGroups(
    counts.map((n, i) => costFeatures(n, base, plan[i]!.nBuffers)),
    CALIBRATION_GROUPS,
  );
}

describe('calibration cell design', () => {
  it('the default cells vary table counts and identify every fitted group', async () => {
    const plan = planCalibration(DEFAULT_CALIBRATION_SIZES, DEFAULT_CALIBRATION_TABLES);
    const testB = plan.filter((c) => c.kind === 'multi');
    expect(new Set(testB.map((c) => c.tables)).size).toBeGreaterThanOrEqual(2);
    expect(new Set(plan.map(storedLabel)).size).toBe(plan.length); // labels tell runs apart
    expect(plan.filter((c) => c.kind === 'threshold').map((c) => c.relDivisor)).toEqual(
      DEFAULT_CALIBRATION_SIZES.flatMap((sb) =>
        sb === '4GB' ? [512, 64] : DEFAULT_CALIBRATION_REL_DIVISORS,
      ),
    );
    expect(await unidentified(plan)).toEqual([]);
  }, 120_000);

  it('catches a design that cannot tell groups apart: one size, one table count, no Test A', async () => {
    const plan = planCalibration(['128MB'], [50], []).filter((c) => c.variant !== 'truncate-toast');
    const bad = await unidentified(plan);
    // Two cells (VACUUM, TRUNCATE) cannot fix seven groups.
    expect(bad.length).toBeGreaterThan(0);
    expect(bad).toContain('endOfRecovery');
  }, 120_000);
});

describe('calibration target', () => {
  it('uncontended takes each run’s startup run-queue wait off its failover; wall keeps it', () => {
    const runs = [
      { failoverMs: 500, startupRunQueueMs: 120 },
      { failoverMs: 300 },
      { failoverMs: 50, startupRunQueueMs: 80 },
    ] as unknown as RunRecord[];
    expect(fitTargets(runs, 'wall')).toBe(runs);
    expect(fitTargets(runs, 'uncontended').map((r) => r.failoverMs)).toEqual([380, 300, 0]);
  });
});
