/**
 * Sweeps and calibrate at `--pg-version`: walsim's cells follow each major's drop rules (one walsim
 * cell per major instead of the strategies, counted in-process as a node started with that
 * `--pg-version` counts), its columns are named by the major, the calibration's walsim twins
 * follow the calibrated major, and a profile names the major it was fitted on.
 */
import { describe, expect, it } from 'vitest';
import { loadProfile, pgMajorOfServer } from '../../cost-model/profile.ts';
import { walsimTwin, walsimTwinAt } from '../../scripts/calibration/design.ts';
import { countCellsInProcess } from '../../scripts/experiment/in-process.ts';
import { planMulti, planThreshold, summarise } from '../../scripts/experiment/sweep-runner.ts';
import type { RunRecord } from '../../scripts/report/records.ts';
import { sideBySideTables } from '../../scripts/report/tables.ts';

describe('walsim cells at --pg-version', () => {
  it('plans one walsim cell per major, with that major strategy, unforced', () => {
    const multi = planMulti(
      ['1GB'],
      20,
      ['truncate'],
      ['full-scan'],
      ['walsim', 'postgres'],
      [13, 16],
    );
    expect(multi.map((c) => [c.engine, c.pgVersion, c.strategy])).toEqual([
      ['postgres', 13, 'cached-lookup'],
      ['postgres', 16, 'cached-lookup'],
      ['walsim', 13, 'full-scan'],
      ['walsim', 16, 'cached-lookup'],
    ]);
    const th = planThreshold(['1GB'], [64], true, ['walsim'], [13, 15]);
    expect(th.map((c) => [c.pgVersion, c.strategy, c.forceOptimized])).toEqual([
      [13, 'full-scan', false],
      [15, 'cached-lookup', false],
    ]);
  });

  it("counts each walsim cell by its major's rules: 13 full-scans every TRUNCATE, 15 looks up", async () => {
    const cells = planMulti(['1GB'], 20, ['truncate'], ['full-scan'], ['walsim'], [13, 15]);
    const [c13, c15] = await countCellsInProcess(cells, { thresholdDivisor: 32 });
    expect(c13!.replay.drops.drops['full-scan']).toBe(20);
    expect(c13!.replay.drops.drops['cached-lookup']).toBe(0);
    expect(c15!.replay.drops.drops['full-scan']).toBe(0);
    expect(c15!.replay.drops.drops['cached-lookup']).toBe(20);
  });

  it('names the walsim columns by the major they followed', () => {
    const plan = planMulti(
      ['1GB'],
      20,
      ['truncate'],
      ['full-scan'],
      ['walsim', 'postgres'],
      [13, 15],
    );
    const rs: RunRecord[] = plan.map((c) => ({
      ...c,
      run: 1,
      failoverMs: 100,
      replayMs: 1,
      endOfRecoveryMs: 1,
      openForWritesMs: 1,
      recordsReplayed: 1,
      dropMs: 1,
      dropsFullScan: 0,
      dropsCachedLookup: 0,
      scanned: 0,
      probes: 0,
      invalidated: 0,
      promoted: true,
      resumeAt: '',
      promotedAt: '',
      stepMs: {},
      ...(c.engine === 'postgres' ? { seedMethodMs: 150, stall: false } : {}),
      mode: 'measured' as const,
      counts: null,
      modelProfile: 'test',
      modeledS: 0.2,
      modeledPolledS: null,
      modeledReplayS: NaN,
      modeledEndOfRecoveryS: NaN,
      modeledOpenForWritesS: NaN,
      modeledDropS: NaN,
    }));
    const md = sideBySideTables(summarise(plan, rs));
    for (const col of [
      'walsim measured PostgreSQL 13 rules (full-scan)',
      'walsim measured PostgreSQL 15 rules (cached-lookup)',
      'walsim modeled PostgreSQL 13 rules (full-scan)',
    ])
      expect(md).toContain(col);
  });
});

describe('calibration at a major', () => {
  it("twins follow the calibrated server's major", () => {
    const [cell] = planMulti(['1GB'], 20, ['truncate'], ['full-scan'], ['postgres']);
    expect(walsimTwinAt(cell!, 13)).toMatchObject({
      engine: 'walsim',
      strategy: 'full-scan',
      pgVersion: 13,
    });
    expect(walsimTwinAt(cell!, 17)).toMatchObject({ strategy: 'cached-lookup', pgVersion: 17 });
    expect(walsimTwin(cell!).strategy).toBe('cached-lookup');
  });

  it('a profile names the major it was fitted on', () => {
    expect(pgMajorOfServer('postgres (PostgreSQL) 13.23')).toBe(13);
    expect(pgMajorOfServer('postgres (PostgreSQL) 15.18 (Debian 15.18-0+deb12u1)')).toBe(15);
    expect(pgMajorOfServer('postgres (PostgreSQL) 18beta1')).toBe(18);
    expect(loadProfile('pg15-calibrated-wall').pgMajor).toBe(15);
    expect(loadProfile('seed-001').pgMajor).toBeNull();
  });
});
