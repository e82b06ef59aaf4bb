/**
 * The seed's tables and the crossover computed from sweep summaries (pure).
 * Method: synthetic cells whose timings follow the seed's shape; check the Markdown cells, the
 * regression sign convention and where the crossover lands.
 */
import { describe, expect, it } from 'vitest';
import type { CellSummary, RunRecord } from '../../scripts/report/records.ts';
import { planMulti, planThreshold, summarise } from '../../scripts/experiment/sweep-runner.ts';
import { publishedPoints } from '../../scripts/experiment/seed-001.ts';
import { emptyReplayCounts, promotionStepCounts } from '../../storage/replay-counts.ts';
import {
  computeCrossover,
  formatRegression,
  formatSeconds,
  markdownTable,
  multiTables,
  regression,
  sideBySideTables,
  thresholdTables,
} from '../../scripts/report/tables.ts';

function cellsWith(
  plan: ReturnType<typeof planThreshold>,
  ms: (c: CellSummary) => number,
  modeledMs: (c: CellSummary) => number = ms,
): CellSummary[] {
  const records: RunRecord[] = plan.map((c) => ({
    ...c,
    mode: 'measured',
    run: 1,
    failoverMs: ms(c as CellSummary),
    replayMs: null,
    endOfRecoveryMs: null,
    openForWritesMs: null,
    recordsReplayed: 0,
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
    counts: { replay: emptyReplayCounts(), ...promotionStepCounts() },
    modelProfile: 'test',
    modeledS: modeledMs(c as CellSummary) / 1000,
    modeledPolledS: null,
    modeledReplayS: 0,
    modeledEndOfRecoveryS: 0,
    modeledOpenForWritesS: 0,
    modeledDropS: 0,
  }));
  return summarise(plan, records);
}

describe('Test A tables', () => {
  // Full scan: 100 ms + NBuffers × 2 ns; lookup: 100 ms + 60 ns per page (crossover near NB/30).
  const plan = planThreshold(['128MB', '100GB'], [512, 64, 32, 16, 8], true);
  const cells = cellsWith(
    plan,
    (c) => 100 + (c.strategy === 'full-scan' ? c.nBuffers * 2e-6 : c.pagesPerTable * 60e-6),
  );

  it('plans both strategies per size, the lookup one forced', () => {
    expect(plan).toHaveLength(2 * 5 * 2);
    expect(plan.filter((c) => c.strategy === 'cached-lookup').every((c) => c.forceOptimized)).toBe(
      true,
    );
    expect(plan.filter((c) => c.strategy === 'full-scan').every((c) => !c.forceOptimized)).toBe(
      true,
    );
    expect(plan.find((c) => c.sharedBuffers === '100GB' && c.relDivisor === 8)!.pagesPerTable).toBe(
      1_638_400,
    );
  });

  it('computes % regression as (optimized − full) / full', () => {
    expect(regression(90, 100)).toBeCloseTo(-0.1);
    expect(formatRegression(regression(90, 100))).toBe('-10.000%');
    expect(regression(1, 0)).toBeNull();
    expect(formatRegression(null)).toBe('n/a');
  });

  it('prints three tables with NB/k rows and shared_buffers columns', () => {
    const t = thresholdTables(cells);
    const lines = t.regression.split('\n');
    expect(lines[0]).toMatch(/^\| rel_size \| +128MB \| +100GB \|$/);
    expect(lines.slice(2).map((l) => l.split('|')[1]!.trim())).toEqual([
      'NB/512',
      'NB/64',
      'NB/32',
      'NB/16',
      'NB/8',
    ]);
    // 100GB NB/8: optimized 100 + 1,638,400 × 60e-6 = 198.3 ms; full 100 + 26.2 = 126.2 ms.
    expect(t.optimized).toContain('0.198');
    expect(t.fullScan).toContain('0.126');
    expect(t.markdown).toContain('### 1. % regression');
    expect(t.markdown).toContain('optimized path forced');
  });

  it('finds the largest NB/k at which the optimized path still wins', () => {
    const x = computeCrossover(cells);
    const big = x.find((c) => c.sharedBuffers === '100GB')!;
    expect(big.largestWinning).toBe('NB/32');
    expect(big.smallestLosing).toBe('NB/16');
    expect(big.wins.map((w) => w.optimizedWins)).toEqual([true, true, true, false, false]);
    // Both costs scale with NBuffers in this model, so 128MB crosses at the same NB/k.
    const small = x.find((c) => c.sharedBuffers === '128MB')!;
    expect(small.largestWinning).toBe('NB/32');
    expect(small.largestWinningPages).toBe(512);
    expect(thresholdTables(cells).crossover).toMatch(
      /\| 100GB +\| 13,107,200 \| +NB\/32 \| 409,600 \| +NB\/16 \|/,
    );
  });

  it('ignores a win above a loss (noise): the threshold is where wins stop', () => {
    const noisy = cellsWith(plan, (c) =>
      c.strategy === 'full-scan' ? 100 : c.relDivisor === 64 || c.relDivisor === 8 ? 110 : 90,
    );
    const x = computeCrossover(noisy).find((c) => c.sharedBuffers === '100GB')!;
    expect(x.largestWinning).toBe('NB/512');
    expect(x.smallestLosing).toBe('NB/64');
  });

  it('says none when the optimized path never wins', () => {
    const never = cellsWith(plan, (c) => (c.strategy === 'full-scan' ? 100 : 200));
    expect(computeCrossover(never).every((x) => x.largestWinning === null)).toBe(true);
  });
});

describe('Test B tables', () => {
  const plan = planMulti(
    ['128MB', '1GB', '20GB', '100GB'],
    1000,
    ['vacuum', 'truncate'],
    ['full-scan', 'cached-lookup'],
  );
  const cells = cellsWith(plan, (c) =>
    c.strategy === 'full-scan' ? 1000 * c.nBuffers * 2e-6 + 300 : 306,
  );

  it('prints one table per variant: s_b, master, patched, %reg, then the same modeled', () => {
    const t = multiTables(cells);
    const vac = t.byVariant.vacuum!.split('\n');
    expect(vac[0]).toMatch(
      /^\| s_b +\| Master \(full-scan\) \| Patched \(cached-lookup\) \| +%reg \| Master modeled \| Patched modeled \| %reg modeled \|$/,
    );
    expect(vac).toHaveLength(2 + 4);
    // 100GB: master 1000 × 13,107,200 × 2e-6 + 300 = 26,514 ms (modeled the same here).
    expect(vac[5]).toMatch(
      /^\| 100GB +\| +26\.514 \| +0\.306 \| +-98\.85% \| +26\.514 \| +0\.306 \| +-98\.85% \|$/,
    );
    expect(t.markdown).toContain('cost profile test');
    expect(t.markdown).toContain('### VACUUM recovery performance for 1000 relations');
    expect(t.markdown).toContain('### TRUNCATE recovery performance for 1000 relations');
  });

  it("gives the seed debate's other strategies a column each", () => {
    const all = cellsWith(
      planMulti(
        ['1GB'],
        10,
        ['vacuum'],
        ['full-scan', 'cached-lookup', 'rel-list', 'cache-at-create'],
      ),
      (c) => (c.strategy === 'rel-list' ? 7 : 5),
    );
    const vac = multiTables(all).byVariant.vacuum!.split('\n');
    // Measured columns, then the modeled ones (modeled = measured in this fixture).
    expect(vac[0]).toMatch(
      /\| +%reg \| rel-list \| cache-at-create \| Master modeled \| Patched modeled \| %reg modeled \| rel-list modeled \| cache-at-create modeled \|$/,
    );
    expect(vac[2]).toMatch(
      /\| +0\.007 \| +0\.005 \| +0\.005 \| +0\.005 \| +0\.00% \| +0\.007 \| +0\.005 \|$/,
    );
  });

  it('leaves %reg n/a when only one strategy ran', () => {
    const only = cellsWith(planMulti(['1GB'], 10, ['truncate'], ['full-scan']), () => 5);
    expect(multiTables(only).byVariant.truncate).toMatch(/\| 1GB +\| +0\.005 \| +n\/a \| +n\/a \|/);
  });

  it('model-only: the modeled columns alone', () => {
    const mo = cellsWith(
      plan,
      () => NaN,
      (c) => (c.strategy === 'full-scan' ? 5000 : 300),
    );
    const vac = multiTables(mo).byVariant.vacuum!.split('\n');
    expect(vac[0]).toMatch(/^\| s_b +\| Master modeled \| Patched modeled \| %reg modeled \|$/);
    expect(vac[2]).toMatch(/^\| 128MB +\| +5\.000 \| +0\.300 \| +-94\.00% \|$/);
    expect(multiTables(mo).markdown).toContain('model only, nothing measured');
  });
});

describe('Test A modeled tables and crossover', () => {
  const plan = planThreshold(['100GB'], [512, 64, 32, 16, 8], true);
  // Measured: the lookup always wins; modeled: it loses from NB/16 on.
  const cells = cellsWith(
    plan,
    (c) => (c.strategy === 'full-scan' ? 1e6 : 1),
    (c) => (c.strategy === 'full-scan' ? 100 + 13_107_200 * 5e-6 : 100 + c.pagesPerTable * 0.3e-3),
  );

  it('computes the crossover from modeled seconds separately from the measured one', () => {
    expect(computeCrossover(cells)[0]!.largestWinning).toBe('NB/8');
    const m = computeCrossover(cells, 'modeled')[0]!;
    expect(m.largestWinning).toBe('NB/64');
    expect(m.smallestLosing).toBe('NB/32');
  });

  it('prints the modeled tables after the measured ones; model-only prints only them', () => {
    const t = thresholdTables(cells);
    expect(t.markdown).toMatch(
      /### 1\. % regression[\s\S]*### Modeled PostgreSQL seconds \(cost profile test\)[\s\S]*#### Modeled crossover/,
    );
    expect(t.modeledCrossover).toMatch(/\| 100GB +\| +13,107,200 \| +NB\/64 /);
    const mo = thresholdTables(
      cellsWith(
        plan,
        () => NaN,
        (c) => (c.strategy === 'full-scan' ? 200 : 100),
      ),
    );
    expect(mo.markdown).not.toContain('### 1. % regression');
    expect(mo.markdown).toContain('#### M1. Modeled % regression');
  });
});

describe('formatting', () => {
  it('right-aligns numbers in Markdown tables', () => {
    expect(
      markdownTable(
        ['a', 'b'],
        [
          ['x', '1'],
          ['yy', '10'],
        ],
      ),
    ).toBe('| a   |   b |\n| --- | --: |\n| x   |   1 |\n| yy  |  10 |');
  });
  it('prints seconds with three decimals like the seed', () => {
    expect(formatSeconds(106.4)).toBe('0.106');
    expect(formatSeconds(66_564)).toBe('66.564');
    expect(formatSeconds(null)).toBe('n/a');
  });
});

describe('PostgreSQL side by side', () => {
  const plan = planMulti(
    ['128MB', '1GB'],
    200,
    ['truncate', 'truncate-toast'],
    ['full-scan', 'cached-lookup'],
    ['walsim', 'postgres'],
  );
  // PostgreSQL: two runs per cell, the second one stalled by 5 s (left out of the median).
  const records: RunRecord[] = plan.flatMap((c) =>
    [1, 2].map((run) => ({
      ...c,
      run,
      failoverMs:
        (c.engine === 'postgres' ? 400 : 100) +
        (run === 2 && c.engine === 'postgres' ? 5000 : 0) +
        (c.sharedBuffers === '1GB' ? 50 : 0),
      replayMs: null,
      endOfRecoveryMs: null,
      openForWritesMs: null,
      recordsReplayed: 0,
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
      ...(c.engine === 'postgres' ? { seedMethodMs: 500, stall: run === 2 } : {}),
      mode: 'measured' as const,
      counts: null,
      modelProfile: c.engine === 'walsim' ? 'test' : '',
      modeledS: c.engine === 'walsim' ? 0.3 : NaN,
      modeledPolledS: null,
      modeledReplayS: NaN,
      modeledEndOfRecoveryS: NaN,
      modeledOpenForWritesS: NaN,
      modeledDropS: NaN,
    })),
  );
  const cells = summarise(plan, records);

  it('puts PostgreSQL (median without stalls), its seed-method figure and walsim per strategy in one table per variant', () => {
    const md = sideBySideTables(cells);
    expect(md).toContain('### TRUNCATE of 200 relations: PostgreSQL and walsim');
    expect(md).toContain(
      '### TRUNCATE (tables with a TOAST table) of 200 relations: PostgreSQL and walsim',
    );
    const lines = md.split('\n');
    const header = lines.find((l) => l.startsWith('| s_b'))!;
    expect(
      header
        .split('|')
        .map((s) => s.trim())
        .filter(Boolean),
    ).toEqual([
      's_b',
      'PostgreSQL',
      'PostgreSQL (seed method)',
      'walsim measured full-scan',
      'walsim measured cached-lookup',
      'walsim modeled full-scan',
      'walsim modeled cached-lookup',
    ]);
    // walsim cells carry modeled seconds (0.3 s here): the modeled columns follow the measured ones.
    expect(lines).toContainEqual(
      expect.stringMatching(
        /^\| 1GB +\| +0\.450 \(1 stall excluded\) \| +0\.500 \| +0\.150 \| +0\.150 \| +0\.300 \| +0\.300 \|$/,
      ),
    );
  });

  it("gives each --pg-version its own columns, named master (13) or patched (14+), and the seed's published figures", () => {
    const versioned = planMulti(
      ['128MB', '1GB'],
      200,
      ['truncate'],
      ['full-scan'],
      ['walsim', 'postgres'],
      [13, 15],
    );
    const ms = (c: { pgVersion?: number; sharedBuffers: string }) =>
      c.pgVersion === 13 ? (c.sharedBuffers === '1GB' ? 900 : 600) : 450;
    const rs: RunRecord[] = versioned.map((c) => ({
      ...records.find((r) => r.engine === c.engine && r.run === 1)!,
      ...c,
      failoverMs: c.engine === 'postgres' ? ms(c) : 100,
      ...(c.engine === 'postgres' ? { seedMethodMs: ms(c) + 50, stall: false } : {}),
    }));
    const published = (['master', 'patched'] as const).map((build) => ({
      variant: 'truncate' as const,
      sharedBuffers: '1GB',
      nBuffers: 131072,
      build,
      seconds: build === 'master' ? 0.506 : 0.206,
    }));
    const md = sideBySideTables(summarise(versioned, rs), published);
    const lines = md.split('\n');
    const header = lines.find((l) => l.startsWith('| s_b'))!;
    expect(
      header
        .split('|')
        .map((x) => x.trim())
        .filter(Boolean),
    ).toEqual([
      's_b',
      'PostgreSQL 13 (master)',
      'PostgreSQL 13 (master) (seed method)',
      'PostgreSQL 15 (patched)',
      'PostgreSQL 15 (patched) (seed method)',
      // With --pg-version, walsim runs one cell per major, following that major's drop rules.
      'walsim measured PostgreSQL 13 rules (full-scan)',
      'walsim measured PostgreSQL 15 rules (cached-lookup)',
      'walsim modeled PostgreSQL 13 rules (full-scan)',
      'walsim modeled PostgreSQL 15 rules (cached-lookup)',
      'seed 001 published master',
      'seed 001 published patched',
    ]);
    expect(lines).toContainEqual(
      expect.stringMatching(
        /^\| 1GB +\| +0\.900 \| +0\.950 \| +0\.450 \| +0\.500 \| +0\.100 \| +0\.100 \| +0\.300 \| +0\.300 \| +0\.506 \| +0\.206 \|$/,
      ),
    );
    expect(lines).toContainEqual(
      expect.stringMatching(/^\| 128MB +\| +0\.600 .*\| +n\/a \| +n\/a \|$/),
    );
    expect(md).toContain("npm registry's build");
  });

  it("puts real 13 and 15, walsim measured and modeled and the seed's published points in Test A's table", () => {
    const plan = planThreshold(['100GB'], [32, 8], true, ['walsim', 'postgres'], [13, 15]);
    const rs: RunRecord[] = plan.map((c) => ({
      ...records.find((r) => r.engine === c.engine && r.run === 1)!,
      ...c,
      failoverMs: c.engine === 'postgres' ? (c.pgVersion === 13 ? 2000 : 1500) : 700,
      ...(c.engine === 'postgres' ? { seedMethodMs: 2100, stall: false } : {}),
    }));
    const md = sideBySideTables(summarise(plan, rs), publishedPoints(plan));
    expect(md).toContain(
      '### VACUUM of one relation at shared_buffers=100GB: PostgreSQL and walsim',
    );
    const lines = md.split('\n');
    const header = lines.find((l) => l.startsWith('| rel_size'))!;
    expect(header).toMatch(
      /PostgreSQL 13 \(master\) .*PostgreSQL 15 \(patched\) .*walsim measured PostgreSQL 13 rules \(full-scan\) .*walsim modeled PostgreSQL 15 rules \(cached-lookup\) \| seed 001 published master \| seed 001 published patched \|$/,
    );
    // The seed's Test A at 100GB: MASTER 1.608 / 6.114 s, [PATCHED] (forced) 1.508 / 6.614 s.
    expect(lines).toContainEqual(
      expect.stringMatching(/^\| NB\/32 +\| +2\.000 \|.* \| +1\.608 \| +1\.508 \|$/),
    );
    expect(lines).toContainEqual(
      expect.stringMatching(/^\| NB\/8 +\| +2\.000 \|.* \| +6\.114 \| +6\.614 \|$/),
    );
    expect(md).toContain('optimized path forced by its test patch');
  });

  it('prints no walsim tables for a PostgreSQL-only Test A sweep (no empty grids, no unknown profile)', () => {
    const plan = planThreshold(['8GB'], [32, 8], true, ['postgres'], [13]);
    const rs: RunRecord[] = plan.map((c) => ({
      ...records.find((r) => r.engine === 'postgres' && r.run === 1)!,
      ...c,
      failoverMs: 800,
      seedMethodMs: 800,
      stall: false,
    }));
    const t = thresholdTables(summarise(plan, rs));
    expect(t.markdown).toBe('');
    expect(sideBySideTables(summarise(plan, rs))).toContain('PostgreSQL 13 (master)');
  });

  it('keeps the walsim-only tables free of PostgreSQL cells', () => {
    expect(multiTables(cells).byVariant.truncate).toMatch(
      /\| 128MB +\| +0\.100 \| +0\.100 \| +0\.00% \|/,
    );
    expect(sideBySideTables(cells.filter((c) => c.engine === 'walsim'))).toBe('');
  });
});
