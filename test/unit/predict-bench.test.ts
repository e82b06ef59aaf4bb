/**
 * predict-bench's plan and arithmetic (scripts/calibration/cell-plan.ts): the cell specs and their
 * refusals, which cells a calibration design saw, the default plan (every workload it targets,
 * 128MB–8GB, none seen by the default calibration, within the half-hour budget), the mixed
 * backlog, and predicted vs measured per target (median, min–max, error, within target, stalled
 * runs left out). No PostgreSQL, no timing.
 */
import { generateBacklog } from '../../scripts/generator/backlog.ts';
import { describe, expect, it } from 'vitest';
import {
  accuracyOf,
  benchTotals,
  BENCH_WORKLOADS,
  backlogOfCell,
  calibrationSaw,
  DEFAULT_BENCH_CELLS,
  DEFAULT_BENCH_RUNS,
  defaultBenchProfiles,
  estimateBenchRunSeconds,
  parseBenchCell,
  QUICK_BENCH_CELLS,
  renderBenchMarkdown,
  summariseBench,
  benchCellOfCalibration,
  storedRunOfBench,
  priceBenchRun,
  probedProfile,
  storedRunCounts,
  type BenchRun,
} from '../../scripts/calibration/cell-plan.ts';
import { builtinProfileNames, loadProfile, type MachineProbe } from '../../cost-model/profile.ts';
import { emptyReplayCounts, promotionStepCounts } from '../../storage/replay-counts.ts';
import { mixedBacklog } from '../../scripts/calibration/cell-run.ts';
import {
  DEFAULT_CALIBRATION_RUNS,
  defaultCalibrationDesign,
  planCalibration,
  recordsFromStored,
  storedLabel,
} from '../../scripts/calibration/design.ts';
import type { FailoverCounts } from '../../storage/replay-counts.ts';

const DEFAULT_DESIGN = { ...defaultCalibrationDesign(), primarySharedBuffers: '128MB' };

describe('bench cell specs', () => {
  it('parses each workload into its canonical cell', () => {
    expect(parseBenchCell('testA:NB/64@2GB')).toEqual({
      id: 'testA:NB/64@2GB',
      workload: 'testA',
      sharedBuffers: '2GB',
      nBuffers: 262_144,
      n: 64,
      pages: 4096,
    });
    expect(parseBenchCell(' truncate:300@1GB ')).toMatchObject({
      n: 300,
      pages: 1,
      nBuffers: 131_072,
    });
    expect(parseBenchCell('pgbench:2@1GB')).toMatchObject({ workload: 'pgbench', n: 2, pages: 0 });
    expect(parseBenchCell('testA:nb/8@256MB').id).toBe('testA:NB/8@256MB');
  });

  it('refuses bad specs with the reason', () => {
    expect(() => parseBenchCell('truncate@1GB')).toThrow(/table count from 1 to 5000/);
    expect(() => parseBenchCell('truncate:0@1GB')).toThrow(/table count/);
    expect(() => parseBenchCell('update:10@1GB')).toThrow(/unknown workload "update"/);
    expect(() => parseBenchCell('truncate:10@64MB')).toThrow(/outside 128MB–20GB/);
    expect(() => parseBenchCell('truncate:10@24GB')).toThrow(/outside 128MB–20GB/);
    expect(parseBenchCell('truncate:10@20GB').nBuffers).toBe(2_621_440);
    expect(() => parseBenchCell('truncate:10@1XB')).toThrow(/invalid bench cell "truncate:10@1XB"/);
    expect(() => parseBenchCell('testA:100@1GB')).toThrow(/testA takes NB\/k/);
    expect(() => parseBenchCell('pgbench:50@1GB')).toThrow(/a scale from 1 to 20/);
    expect(() => parseBenchCell('truncate 10 1GB')).toThrow(/WORKLOAD\[:N\]@SHARED_BUFFERS/);
  });

  it("takes Test A at 8GB and 20GB, up to NB/8: the seed's largest cells this machine starts", () => {
    // Once refused above 16,384 pages (calibration's own limit, to keep its runs short); a bench
    // cell is asked for by name, and its estimate says how long a run takes.
    for (const [spec, pages] of [
      ['testA:NB/32@8GB', 32_768],
      ['testA:NB/8@8GB', 131_072],
      ['testA:NB/16@20GB', 163_840],
      ['testA:NB/8@20GB', 327_680],
    ] as const) {
      const c = parseBenchCell(spec);
      expect(c, spec).toMatchObject({ id: spec, workload: 'testA', pages });
      expect(estimateBenchRunSeconds(c), spec).toBeGreaterThan(pages * 1e-3);
      // Calibration never runs a relation that large, whatever its sizes and divisors.
      const design = { ...DEFAULT_DESIGN, sizes: ['8GB', '20GB'], relDivisors: [32, 16, 8] };
      expect(calibrationSaw(c, design), spec).toBe(false);
    }
  });

  it('says which cells a calibration design ran', () => {
    const saw = (s: string) => calibrationSaw(parseBenchCell(s), DEFAULT_DESIGN);
    expect(saw('truncate:300@128MB')).toBe(true);
    expect(saw('vacuum:50@4GB')).toBe(true);
    expect(saw('truncate:300@1GB')).toBe(false); // Test B runs at 128MB and 4GB only
    expect(saw('truncate-toast:100@128MB')).toBe(true);
    expect(saw('truncate-toast:100@6GB')).toBe(true); // the memory-tier cell
    expect(saw('testA:NB/64@4GB')).toBe(true);
    expect(saw('testA:NB/64@6GB')).toBe(false); // Test A not at the TOAST-only size
    expect(saw('insert:100@128MB')).toBe(true);
    expect(saw('delete:100@128MB')).toBe(true);
    expect(saw('delete:100@1GB')).toBe(false);
    expect(saw('insert:50@128MB')).toBe(false);
    expect(saw('truncate:1000@4GB')).toBe(false); // table count not in the design
    expect(saw('truncate:300@2GB')).toBe(false); // size not in the design
    expect(saw('truncate-toast:300@1GB')).toBe(false);
    expect(saw('testA:NB/16@1GB')).toBe(true); // the full-scan twin of 4GB NB/64 (8,192 pages)
    expect(saw('testA:NB/32@1GB')).toBe(false);
    expect(saw('drop:50@128MB')).toBe(true); // Test B DROP TABLE, beside VACUUM and TRUNCATE
    expect(saw('drop:300@4GB')).toBe(true);
    expect(saw('drop:50@1GB')).toBe(false); // size not in the design
    expect(saw('drop:500@4GB')).toBe(false);
    // A design stored before the DROP cells never ran one.
    expect(
      calibrationSaw(parseBenchCell('drop:50@128MB'), { ...DEFAULT_DESIGN, testBDrop: false }),
    ).toBe(false);
    expect(saw('mixed:50@1GB')).toBe(false); // workloads calibration never runs
    expect(calibrationSaw(parseBenchCell('truncate:300@1GB'), null)).toBe(false);
  });

  it('a generated cell: its seed, the pool it draws or the one given, the setup pages', () => {
    const b = generateBacklog(1018, undefined, '8GB');
    expect(parseBenchCell('gen:1018@8GB')).toEqual({
      id: 'gen:1018@8GB',
      workload: 'gen',
      sharedBuffers: '8GB',
      nBuffers: 1_048_576,
      n: 1018,
      pages: b.relations.reduce((a, r) => a + r.pages, 0),
    });
    expect(backlogOfCell(parseBenchCell('gen:1018@20GB')).nBuffers).toBe(2_621_440);
    expect(() => parseBenchCell('gen:x')).toThrow(/gen takes a seed ≥ 0/);
    expect(() => parseBenchCell('gen:5@1XB')).toThrow(/invalid bench cell "gen:5@1XB"/);
    expect(() => parseBenchCell('gen:5@64MB')).toThrow(/outside 128MB–20GB/);
    const saw = (spec: string, seeds: number[]) =>
      calibrationSaw(parseBenchCell(spec), {
        ...DEFAULT_DESIGN,
        generated: { seeds, pools: seeds.map(() => '1GB'), generator: 1 },
      });
    expect(saw('gen:7@1GB', [7, 8])).toBe(true);
    expect(saw('gen:1007@1GB', [7, 8])).toBe(false);
    expect(calibrationSaw(parseBenchCell('gen:7@1GB'), DEFAULT_DESIGN)).toBe(false);
  });
});

describe('calibration runs through the bench runner', () => {
  it('every default calibration cell is a bench cell its own design saw, with the same label', () => {
    const plan = planCalibration(defaultCalibrationDesign());
    const cells = plan.map(benchCellOfCalibration);
    expect(cells.map((c) => c.id).slice(0, 8)).toEqual([
      'vacuum:50@128MB',
      'truncate:50@128MB',
      'drop:50@128MB',
      'vacuum:300@128MB',
      'truncate:300@128MB',
      'drop:300@128MB',
      'truncate-toast:100@128MB',
      'testA:NB/512@128MB',
    ]);
    expect(cells.every((c) => calibrationSaw(c, DEFAULT_DESIGN))).toBe(true);
    cells.forEach((c, i) => {
      expect(c.nBuffers).toBe(plan[i]!.nBuffers);
      expect(c.pages).toBe(plan[i]!.pagesPerTable);
    });
  });
});

describe("the bench's default profiles", () => {
  it("prices with the --pg-version major's shipped pair, else 15's", () => {
    const shipped = builtinProfileNames();
    expect(defaultBenchProfiles(16, shipped)).toEqual({
      wall: 'pg16-calibrated-wall',
      uncontended: 'pg16-calibrated-uncontended',
    });
    const pg15 = { wall: 'pg15-calibrated-wall', uncontended: 'pg15-calibrated-uncontended' };
    expect(defaultBenchProfiles(null, shipped)).toEqual(pg15);
    expect(defaultBenchProfiles(15, shipped)).toEqual(pg15);
    // A major with no pair shipped, or half a pair, falls back to 15's (and is warned of).
    const halfOf14 = shipped.filter((n) => n !== 'pg14-calibrated-uncontended');
    expect(defaultBenchProfiles(14, halfOf14)).toEqual(pg15);
    expect(defaultBenchProfiles(12, shipped)).toEqual(pg15);
    // Every major from 13 to 18 ships its own pair, fitted on that major and named so.
    for (const major of [13, 14, 16, 17, 18]) {
      const pair = defaultBenchProfiles(major, shipped);
      expect(pair).toEqual({
        wall: `pg${major}-calibrated-wall`,
        uncontended: `pg${major}-calibrated-uncontended`,
      });
      for (const name of Object.values(pair)) expect(loadProfile(name).pgMajor).toBe(major);
    }
  });
});

describe('the default plan', () => {
  const cells = DEFAULT_BENCH_CELLS.map(parseBenchCell);

  it('covers every workload over 128MB–8GB, none seen by the default calibration', () => {
    // Every workload but the calibration's own row backlogs (the mixed cells carry row-level DML,
    // pgbench -i a COPY).
    expect(new Set(cells.map((c) => c.workload))).toEqual(
      new Set(
        BENCH_WORKLOADS.filter(
          (w) => !['insert', 'delete', 'copy', 'copy-wide', 'gen'].includes(w),
        ),
      ),
    );
    expect(cells.filter((c) => calibrationSaw(c, DEFAULT_DESIGN))).toEqual([]);
    expect(Math.max(...cells.map((c) => c.nBuffers))).toBe(1_048_576); // 8GB
    const testB = cells.filter((c) => c.workload === 'vacuum' || c.workload === 'truncate');
    expect(Math.min(...testB.map((c) => c.n))).toBe(100);
    expect(Math.max(...testB.map((c) => c.n))).toBe(3000);
    // Test A on both sides of PostgreSQL's NBuffers/32 threshold.
    const a = cells.filter((c) => c.workload === 'testA');
    expect(a.some((c) => c.pages >= c.nBuffers / 32)).toBe(true);
    expect(a.some((c) => c.pages < c.nBuffers / 32)).toBe(true);
    expect(new Set(cells.map((c) => c.id)).size).toBe(cells.length);
  });

  it('fits the budget: the default runs of every cell within 40 minutes by the estimate (14 measured), --quick in a few minutes', () => {
    // As many runs as the calibration records a cell: the bench's median is the fitted statistic.
    expect(DEFAULT_BENCH_RUNS).toBe(DEFAULT_CALIBRATION_RUNS);
    const full = cells.reduce((a, c) => a + DEFAULT_BENCH_RUNS * estimateBenchRunSeconds(c), 0);
    expect(full).toBeLessThanOrEqual(40 * 60);
    const quick = QUICK_BENCH_CELLS.map(parseBenchCell).reduce(
      (a, c) => a + estimateBenchRunSeconds(c),
      0,
    );
    expect(quick).toBeLessThanOrEqual(3 * 60);
  });

  it('the mixed backlog interleaves inserts, deletes, VACUUMs and TRUNCATEs', () => {
    expect(mixedBacklog(4)).toEqual([
      'DELETE FROM multi_t1',
      'VACUUM multi_t1',
      'TRUNCATE multi_t2',
      'DELETE FROM multi_t3 WHERE c % 2 = 0',
      'VACUUM multi_t3',
      'INSERT INTO multi_t4 SELECT generate_series(1, 2260)',
    ]);
    expect(mixedBacklog(400).filter((s) => s.startsWith('TRUNCATE'))).toHaveLength(100);
  });
});

describe('predicted against measured', () => {
  it('median, min–max and the error; within ±25 % or inside min–max of ≥ 3 runs', () => {
    const a = accuracyOf([1.2, 1.2, 1.2], [1.0, 0.9, 1.1]);
    expect(a).toMatchObject({
      medianS: 1.0,
      minS: 0.9,
      maxS: 1.1,
      runs: 3,
      within: true,
      by: '±25%',
    });
    expect(a.errorPct).toBeCloseTo(20, 10);
    const out = accuracyOf([1.3], [1.0, 0.9, 1.1]);
    expect(out.errorPct).toBeCloseTo(30, 10);
    expect(out).toMatchObject({ within: false, by: null });
    // PostgreSQL spread wider than ±25 %: inside its min–max counts.
    expect(accuracyOf([1.6], [1.0, 0.7, 1.8])).toMatchObject({ within: true, by: 'min–max' });
    // Two runs are not enough for the min–max rule.
    expect(accuracyOf([1.6], [1.0, 1.8])).toMatchObject({ medianS: 1.4, within: true, by: '±25%' });
    expect(accuracyOf([1.9], [1.0, 1.8])).toMatchObject({ within: false });
    // Below the median counts the same.
    expect(accuracyOf([0.74], [1.0, 1.0, 1.0]).within).toBe(false);
    expect(accuracyOf([0.76], [1.0, 1.0, 1.0]).within).toBe(true);
    // Nothing measured: no verdict.
    expect(accuracyOf([1], [])).toMatchObject({ runs: 0, within: false });
  });

  const counts = {} as FailoverCounts;
  const run = (
    cell: string,
    r: number,
    wall: number,
    rq: number | null,
    stall = false,
  ): BenchRun => ({
    cell,
    run: r,
    predictedWallS: 1.0,
    predictedUncontendedS: 0.5,
    measuredWallS: wall,
    runQueueS: rq,
    startupCpuS: null,
    startupBlockedS: null,
    stall,
    phases: { replayS: null, endOfRecoveryS: null, openForWritesS: null },
    predictedPhasesWall: { replayS: 0.9, endOfRecoveryS: 0.05, openForWritesS: 0.05 },
    records: 800,
    walBytes: 1,
    dropsFullScan: 0,
    dropsLookup: 100,
    counts,
    genericRecords: 0,
    dominates: '',
    loadAvg1: 1,
    cpuPressure: 0.5,
    at: '',
  });

  it('a bench run stored as a calibration run: ms, run-queue wait, warm-up, the cell label', () => {
    const [c] = planCalibration({
      ...defaultCalibrationDesign(),
      sizes: ['128MB'],
      tables: [50],
      testBSizes: ['128MB'],
    });
    const stored = storedRunOfBench(
      c!,
      { ...run('vacuum:50@128MB', 2, 0.25, 0.1), startupCpuS: 0.02 },
      true,
    );
    expect(stored).toMatchObject({
      label: storedLabel(c!),
      run: 2,
      warmup: true,
      failoverMs: 250,
      startupRunQueueMs: 100,
      startupCpuMs: 20,
      stall: false,
      recordsReplayed: 800,
    });
    expect(stored.startupBlockedMs).toBeUndefined();
    expect(stored.probe).toBeUndefined(); // a run from before the probe carries none
    const probe = {
      fsyncS: 1e-3,
      createUnlinkS: 2e-5,
      scanPerDescriptorS: 1e-9,
      scanDescriptors: 9,
    };
    expect(
      storedRunOfBench(c!, { ...run('vacuum:50@128MB', 2, 0.25, 0.1), probe }, false).probe,
    ).toEqual(probe);
    const [back] = recordsFromStored([stored], [c!]);
    expect(back).toMatchObject({
      failoverMs: 250,
      startupRunQueueMs: 100,
      warmup: true,
      tables: 50,
    });
  });

  it('summarises both targets per cell, leaving stalled runs out, and totals the unseen cells', () => {
    const cells = ['truncate:100@256MB', 'drop:100@512MB', 'truncate:300@4GB'].map(parseBenchCell);
    const runs = [
      run('truncate:100@256MB', 1, 1.1, 0.6),
      run('truncate:100@256MB', 2, 0.9, 0.4),
      run('truncate:100@256MB', 3, 6.2, 0.5), // 5.3 s slower than the fastest and > 2×: a stall
      run('drop:100@512MB', 1, 2.0, 1.0),
      run('drop:100@512MB', 2, 2.2, null, true), // flagged by verify
      run('truncate:300@4GB', 1, 1.0, 0.5),
    ];
    const s = summariseBench(cells, runs, (c) => calibrationSaw(c, DEFAULT_DESIGN));
    expect(s.map((c) => [c.runs, c.stalls, c.seen])).toEqual([
      [3, 1, false],
      [2, 1, false],
      [1, 0, true],
    ]);
    expect(s[0]!.wall).toMatchObject({ medianS: 1.0, minS: 0.9, maxS: 1.1, within: true });
    // uncontended = wall − run-queue wait: 0.5 and 0.5.
    expect(s[0]!.uncontended).toMatchObject({ medianS: 0.5, runs: 2, within: true });
    expect(s[1]!.wall).toMatchObject({ medianS: 2.0, errorPct: -50, within: false });
    expect(s[1]!.uncontended).toMatchObject({ medianS: 1.0, errorPct: -50 });
    const t = benchTotals(s);
    expect(t).toMatchObject({
      unseen: 2,
      wallWithin: 1,
      uncontendedWithin: 1,
      uncontendedCells: 2,
    });
    expect(t.medianAbsErrorPct.wall).toBe(25);
    const md = renderBenchMarkdown(s, { wallProfile: 'w', uncontendedProfile: 'u' });
    expect(md).toMatch(/\| truncate:100@256MB +\| unseen +\| 3 \(1 stalled\) \|/);
    expect(md).toContain('Unseen cells within target: wall 1 of 2');
    expect(md).toContain('uncontended 1 of 2');
  });
});

describe('stored runs read back for repricing', () => {
  // A run stored before predict counted the descriptor pages: its counts lack the field.
  const old = (dropsFullScan: number, unmapped: number | null) => {
    const { descriptorPagesMapped: _, ...replay } = emptyReplayCounts();
    return {
      counts: { replay, ...promotionStepCounts() } as unknown as FailoverCounts,
      dropsFullScan,
      descriptorPages: unmapped === null ? null : { pages: 24577, unmapped },
    };
  };
  it('counts the unmapped pages the run recorded when its range had a full scan, as predict now does', () => {
    expect(storedRunCounts(old(2, 24368)).replay.descriptorPagesMapped).toBe(24368);
    expect(storedRunCounts(old(0, 24368)).replay.descriptorPagesMapped).toBe(0);
    expect(storedRunCounts(old(1, null)).replay.descriptorPagesMapped).toBe(0);
  });
  it('keeps what a run counted itself', () => {
    const r = old(1, 500);
    r.counts.replay.descriptorPagesMapped = 7;
    expect(storedRunCounts(r).replay.descriptorPagesMapped).toBe(7);
  });
});

describe('the machine probe in the bench', () => {
  const calibrated: MachineProbe = {
    fsyncS: 0.001,
    createUnlinkS: 20e-6,
    scanPerDescriptorS: 1e-9,
    scanDescriptors: 16384,
  };
  // fsync twice as slow here, create/unlink 1.5×, the scan as calibrated.
  const here: MachineProbe = { ...calibrated, fsyncS: 0.002, createUnlinkS: 30e-6 };
  const base = { ...loadProfile('pg15-calibrated-wall'), machineProbe: null };
  const profile = { ...base, machineProbe: calibrated };
  const replay = { ...emptyReplayCounts(), controlFileUpdates: 10 };
  replay.smgr = { ...replay.smgr, create: [4, 0, 0, 0], unlink: [6, 2, 0, 0] };
  const counts: FailoverCounts = { replay, ...promotionStepCounts() };
  const c = base.constants;

  it('prices each profile scaled by the run probe, the unscaled price beside', () => {
    const p = priceBenchRun({ counts, genericRecords: 0, probe: here }, 16384, profile, base);
    const u = p.unprobed!;
    // pg_control updates (10 in replay, 1 opening for writes) ×2; 4 creates + 8 unlinks ×1.5.
    const extra =
      11 * c['controlFile.update'].seconds +
      0.5 * (4 * c['smgr.create'].seconds + 8 * c['smgr.unlink'].seconds);
    expect(p.predictedWallS - u.wallS).toBeCloseTo(extra, 12);
    // The uncontended profile here stores no probe: used as calibrated.
    expect(p.predictedUncontendedS).toBe(u.uncontendedS);
    expect(u.wallS).toBe(u.uncontendedS);
  });

  it('no probe stored by the run (skipped or failed): the profile as calibrated', () => {
    expect(probedProfile(profile, null)).toBe(profile);
    expect(probedProfile(profile, undefined)).toBe(profile);
    expect(probedProfile(base, here)).toBe(base);
    const p = priceBenchRun({ counts, genericRecords: 0, probe: null }, 16384, profile, profile);
    expect(p.predictedWallS).toBe(p.unprobed!.wallS);
  });

  it('totals the cells priced without the probe beside the probed ones', () => {
    const cell = parseBenchCell('truncate:100@256MB');
    const r = (run: number, measured: number): BenchRun => ({
      cell: cell.id,
      run,
      predictedWallS: 1.0,
      predictedUncontendedS: 1.0,
      unprobed: { wallS: 2.0, uncontendedS: 2.0 },
      probe: here,
      measuredWallS: measured,
      runQueueS: 0,
      startupCpuS: null,
      startupBlockedS: null,
      stall: false,
      phases: { replayS: null, endOfRecoveryS: null, openForWritesS: null },
      predictedPhasesWall: { replayS: 1, endOfRecoveryS: 0, openForWritesS: 0 },
      records: 1,
      walBytes: 1,
      dropsFullScan: 0,
      dropsLookup: 0,
      counts,
      genericRecords: 0,
      dominates: '',
      loadAvg1: 1,
      cpuPressure: 0,
      at: '',
    });
    const s = summariseBench([cell], [r(1, 1.0), r(2, 1.1), r(3, 0.9)], () => false);
    expect(s[0]!.wall.within).toBe(true);
    expect(s[0]!.unprobed!.wall).toMatchObject({ predictedS: 2, errorPct: 100, within: false });
    const t = benchTotals(s);
    expect(t.unprobed).toEqual({ cells: 1, wallWithin: 0, uncontendedWithin: 0 });
    expect(renderBenchMarkdown(s, { wallProfile: 'w', uncontendedProfile: 'u' })).toContain(
      'Priced without the machine probe (the profiles as calibrated), the same cells: wall 0 of 1, uncontended 0 of 1.',
    );
  });
});
