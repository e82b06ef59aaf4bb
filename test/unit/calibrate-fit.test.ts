/**
 * The calibration fit on measurements taken from a real run (PostgreSQL 15.18, this kind of
 * 2-core machine; test/fixtures/postgres/sweep-runs-50-tables.json): Test B VACUUM, TRUNCATE and
 * TRUNCATE of TOAST-able tables, 50 tables, at 128MB and 1GB. Method: summarise the runs, count
 * the walsim twins in-process, fit, and check what a fit must give: non-negative constants, the
 * measured seconds reproduced, a deterministic result, leave-one-out predictions for every cell,
 * and a profile the loader accepts.
 */
import * as fs from 'node:fs';
import * as path from 'node:path';
import { describe, expect, it } from 'vitest';
import { countCellsInProcess } from '../../scripts/experiment/in-process.ts';
import { summarise, type CellSpec, type RunRecord } from '../../scripts/experiment/sweep.ts';
import { CALIBRATION_GROUPS, fitCalibration, walsimTwin } from '../../scripts/postgres/calibrate.ts';
import { loadProfile, parseProfile, profileToJson } from '../../storage/cost-model/profile.ts';

const FIX = path.resolve(import.meta.dirname, '../fixtures/postgres/sweep-runs-50-tables.json');
const fixture = JSON.parse(fs.readFileSync(FIX, 'utf8')) as { runs: Array<Record<string, unknown>> };
const nan = (v: unknown) => (v === null || v === undefined ? NaN : (v as number));
const records = fixture.runs.map((r) => ({
  ...r, dropMs: NaN, dropsFullScan: NaN, dropsCachedLookup: NaN, scanned: NaN, probes: NaN, invalidated: NaN,
  replayMs: nan(r.replayMs), promoted: true, resumeAt: '', promotedAt: '', stepMs: {},
})) as unknown as RunRecord[];
const plan: CellSpec[] = records.map(({ kind, engine, sharedBuffers, nBuffers, strategy, forceOptimized, variant, relSize, relDivisor, pagesPerTable, tables }) =>
  ({ kind, engine, sharedBuffers, nBuffers, strategy, forceOptimized, variant, relSize, relDivisor, pagesPerTable, tables }));
const base = loadProfile('seed-001');
const meta = { name: 'fixture-fit', description: 'fit to the fixture', source: 'test' };

describe('fitCalibration on real PostgreSQL measurements', () => {
  it('fits non-negative constants that reproduce the measured seconds, deterministically', async () => {
    const cells = summarise(plan, records);
    const counts = await countCellsInProcess(plan.map(walsimTwin), { thresholdDivisor: 32 });
    const a = fitCalibration(cells, counts, base, meta);
    const b = fitCalibration(cells, counts, base, meta);
    expect(b).toEqual(a);
    expect(Object.keys(a.groupSeconds).sort()).toEqual(CALIBRATION_GROUPS.map((g) => g.name).sort());
    expect(Object.values(a.groupSeconds).every((s) => s >= 0 && Number.isFinite(s))).toBe(true);
    expect(a.profile.promotionPoll).toBeNull();
    expect(a.cells.map((c) => c.measuredS)).toEqual(cells.map((c) => c.failoverMsMedian / 1000));
    for (const c of a.cells) {
      expect(Math.abs(c.residualPct), c.label).toBeLessThan(0.3);
      expect(Number.isFinite(c.leaveOneOutS), c.label).toBe(true);
      expect(c.residualS).toBeCloseTo(c.fittedS - c.measuredS, 12);
    }
    // The TOAST cells pay a full scan per table: the fit prices descriptors, and their fitted time
    // grows with NBuffers while int-only TRUNCATE (lookups) does not move through the scan constant.
    expect(a.groupSeconds.scan).toBeGreaterThan(0);
    const fitted = (variant: string, sb: string) => a.cells.find((c) => c.cell.variant === variant && c.cell.sharedBuffers === sb)!.fittedS;
    expect(fitted('truncate-toast', '1GB') - fitted('truncate-toast', '128MB')).toBeGreaterThan(fitted('truncate', '1GB') - fitted('truncate', '128MB'));
    // The written profile loads back as a valid walsim-cost-profile/1.
    const again = parseProfile(JSON.parse(profileToJson(a.profile, { cells: a.cells.length })), 'fixture-fit.json');
    expect(again.constants['scan.multi.cache'].seconds).toBe(a.groupSeconds.scan);
  }, 120_000);

  it('counts a run 5 s slower than the cell\'s other runs as a stall even when unflagged', () => {
    // The 4GB Test A NB/512 cell of a real calibration: 89, 5,045 and 53 ms.
    const runs = [89, 5045, 53].map((ms, i) => ({ ...records[0]!, run: i + 1, failoverMs: ms, stall: false }));
    const cells = summarise(plan.slice(0, 1), runs);
    expect(cells[0]!.stalls).toBe(1);
    expect(cells[0]!.failoverMsMedian).toBe(71);
    // Three ordinary runs: none excluded.
    expect(summarise(plan.slice(0, 1), [910, 571, 252].map((ms, i) => ({ ...records[0]!, run: i + 1, failoverMs: ms, stall: false })))[0]!.stalls).toBe(0);
  });

  it('leaves stalled runs out of the median the fit uses', () => {
    const stalled = records.map((r, i) => (i === 0 ? { ...r, run: 2, failoverMs: r.failoverMs + 5000, stall: true } : r));
    const cells = summarise(plan.slice(0, 1), [records[0]!, stalled[0]!]);
    expect(cells[0]!.runs).toBe(2);
    expect(cells[0]!.stalls).toBe(1);
    expect(cells[0]!.failoverMsMedian).toBe(records[0]!.failoverMs);
  });
});
