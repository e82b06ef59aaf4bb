/**
 * The strategy lab counts what each design does on seed 001's Test B and on the read-only path.
 * Method: tiny in-process runs (20 tables, 128MB/1GB; a 1,024-buffer read-only pool) checking the
 * drop paths and counters per strategy, the model's flat/growing shapes, the read-only workload's
 * hit ratios and rel-list's per-allocation maintenance, and that every file is rendered.
 */
import { describe, expect, it } from 'vitest';
import { measureReadOnly, strategyMemory } from '../../scripts/strategies/readonly-workload.ts';
import { runStrategyFailovers, STRATEGY_WORKLOADS } from '../../scripts/strategies/lab.ts';
import { renderStrategies, type StrategiesOutput } from '../../scripts/strategies/lab-report.ts';
import { loadProfile } from '../../cost-model/profile.ts';
import { DROP_STRATEGIES } from '../../storage/drop.ts';

describe('strategy lab', () => {
  it('Test B per strategy: who scans, who probes, who walks lists; modeled shapes', async () => {
    const { cells, runs } = await runStrategyFailovers({
      sharedBuffers: ['128MB', '1GB'],
      workloads: [...STRATEGY_WORKLOADS],
      strategies: [...DROP_STRATEGIES],
      tables: 20,
      runs: 1,
      thresholdDivisor: 32,
      profile: loadProfile(),
    });
    expect(runs).toHaveLength(2 * 4 * 5);
    const at = (sb: string, w: string, s: string) =>
      cells.find((c) => c.sharedBuffers === sb && c.workload === w && c.strategy === s)!;
    // TRUNCATE of TOAST-like tables: PG14 full-scans (TOAST heap never sized), cache-at-create probes.
    expect(at('1GB', 'truncate-toast', 'cached-lookup')).toMatchObject({
      drops: { 'full-scan': 20, 'cached-lookup': 0 },
      scanned: 20 * 131_072,
    });
    expect(at('1GB', 'truncate-toast', 'cache-at-create')).toMatchObject({
      drops: { 'full-scan': 0, 'cached-lookup': 20 },
      scanned: 0,
      probes: 40,
      invalidated: 40,
    });
    expect(at('1GB', 'truncate', 'cached-lookup')).toMatchObject({
      drops: { 'cached-lookup': 20 },
      scanned: 0,
    });
    // rel-list walks exactly the buffers it drops; recovery-hash scans NBuffers once.
    expect(at('1GB', 'vacuum', 'rel-list')).toMatchObject({
      drops: { 'rel-list': 20 },
      scanned: 0,
      listSteps: 60,
      invalidated: 60,
    });
    expect(at('1GB', 'vacuum', 'recovery-hash')).toMatchObject({
      drops: { 'recovery-hash': 20 },
      scanned: 0,
      hashBuildScanned: 131_072,
      listSteps: 60,
    });
    expect(at('1GB', 'vacuum', 'full-scan')).toMatchObject({ scanned: 20 * 131_072 });
    // Modeled: flat across sizes where nothing scans NBuffers; growing where something does.
    for (const s of ['cached-lookup', 'rel-list'] as const)
      expect(at('1GB', 'vacuum', s).modeledS).toBe(at('128MB', 'vacuum', s).modeledS);
    expect(at('1GB', 'truncate-toast', 'cache-at-create').modeledS).toBe(
      at('128MB', 'truncate-toast', 'cache-at-create').modeledS,
    );
    expect(at('1GB', 'truncate-toast', 'cached-lookup').modeledS).toBeGreaterThan(
      at('128MB', 'truncate-toast', 'cached-lookup').modeledS,
    );
    expect(at('1GB', 'vacuum', 'full-scan').modeledS).toBeGreaterThan(
      at('1GB', 'vacuum', 'cached-lookup').modeledS,
    );
    // Same WAL for every strategy.
    expect(
      new Set(
        cells
          .filter((c) => c.sharedBuffers === '1GB' && c.workload === 'truncate-toast')
          .map((c) => c.records),
      ).size,
    ).toBe(1);
  });

  it('read-only workload: hit ratios near target, rel-list pays two list operations per allocation', () => {
    const { cells, runs } = measureReadOnly({
      nBuffers: 1024,
      hitRatios: [0.5, 0.9],
      strategies: ['cached-lookup', 'rel-list', 'full-scan'],
      reads: 4000,
      rounds: 2,
    });
    expect(runs).toHaveLength(2 * 3 * 2);
    for (const c of cells) expect(Math.abs(c.hitRatio - c.targetHitRatio)).toBeLessThan(0.05);
    const rel = cells.filter((c) => c.strategy === 'rel-list');
    for (const c of rel) {
      expect(c.listMaintenanceOpsPerAllocation).toBe(2); // unlink the victim, link the new tag
      expect(c.listTableProbesPerAllocation).toBeGreaterThanOrEqual(1);
    }
    for (const c of cells.filter((x) => x.strategy !== 'rel-list'))
      expect(c.listMaintenanceOpsPerAllocation).toBe(0);
    expect(cells.find((c) => c.strategy === 'cached-lookup')!.regressionVsCachedLookup).toBeNull();
    // Same chunks for every strategy: same hits and allocations.
    const byRatio = (h: number) =>
      new Set(
        runs
          .filter((r) => r.targetHitRatio === h)
          .map((r) => `${r.round}:${r.hits}:${r.allocations}`),
      );
    expect(byRatio(0.5).size).toBe(2);
  });

  it('memory: rel-list and recovery-hash add the lists, the others nothing', () => {
    const m = strategyMemory(13_107_200, DROP_STRATEGIES);
    expect(m.find((x) => x.strategy === 'rel-list')!.addedBytes).toBe(8 * 13_107_200 + 8 * 2 ** 25);
    expect(m.find((x) => x.strategy === 'cached-lookup')!.addedBytes).toBe(0);
    expect(m.find((x) => x.strategy === 'recovery-hash')!.where).toMatch(/startup process/);
  });

  it('renders the table, CSVs, JSON and one chart per measure', async () => {
    const failover = await runStrategyFailovers({
      sharedBuffers: ['128MB'],
      workloads: ['truncate-toast'],
      strategies: ['cached-lookup', 'cache-at-create'],
      tables: 5,
      runs: 1,
      thresholdDivisor: 32,
      profile: loadProfile(),
    });
    const readOnly = measureReadOnly({
      nBuffers: 256,
      hitRatios: [0.5],
      strategies: ['cached-lookup', 'rel-list'],
      reads: 500,
      rounds: 1,
    });
    const o: StrategiesOutput = {
      startedAt: '2026-12-01T00:00:00.000Z',
      finishedAt: '2026-12-01T00:00:01.000Z',
      wallSeconds: 1,
      settings: { tables: 5 },
      profile: 'seed-001',
      failover,
      readOnly: { ...readOnly, sharedBuffers: '2MB' },
      memory: strategyMemory(16384, ['cached-lookup', 'rel-list']),
    };
    const files = renderStrategies(o);
    expect(Object.keys(files).sort()).toEqual([
      'chart-failover-measured-truncate-toast.svg',
      'chart-failover-modeled-truncate-toast.svg',
      'chart-memory.svg',
      'chart-readonly-regression.svg',
      'memory.csv',
      'readonly.csv',
      'results.csv',
      'results.json',
      'tables.md',
    ]);
    expect(files['tables.md']).toMatch(/\| cache-at-create +\|/);
    expect(files['tables.md']).toContain('PostgreSQL buffer table (reference)');
    expect(JSON.parse(files['results.json']!).failover.cells).toHaveLength(2);
    expect(files['results.csv']!.split('\r\n')[0]).toContain('modeledS');
  });
});
