/**
 * The model is not a fudge factor: modeled time moves only through counters the engine really
 * counted. Method: run seed 001's workloads in-process (the sweeps' model-only path: the real
 * executor, WAL encoder and replay), change one thing — NBuffers, the relation's size, the number
 * of tables — and check how the counts and the modeled seconds move, exactly.
 */
import { describe, expect, it } from 'vitest';
import { countCellsInProcess } from '../../scripts/experiment/in-process.ts';
import type { CellSpec } from '../../scripts/experiment/sweep-runner.ts';
import { costFeatures, modelFailover } from '../../cost-model/model.ts';
import { loadProfile } from '../../cost-model/profile.ts';

const profile = loadProfile('seed-001');
const settings = { thresholdDivisor: 32 };

function relCell(
  nBuffers: number,
  pages: number,
  strategy: 'full-scan' | 'cached-lookup',
): CellSpec {
  return {
    kind: 'threshold',
    engine: 'walsim',
    sharedBuffers: `${nBuffers * 8}kB`,
    nBuffers,
    strategy,
    forceOptimized: strategy === 'cached-lookup',
    variant: 'vacuum',
    relSize: String(pages),
    relDivisor: null,
    pagesPerTable: pages,
    tables: 1,
  };
}

function multiCell(
  nBuffers: number,
  tables: number,
  variant: 'vacuum' | 'truncate',
  strategy: 'full-scan' | 'cached-lookup',
): CellSpec {
  return {
    kind: 'multi',
    engine: 'walsim',
    sharedBuffers: `${nBuffers * 8}kB`,
    nBuffers,
    strategy,
    forceOptimized: false,
    variant,
    relSize: null,
    relDivisor: null,
    pagesPerTable: 1,
    tables,
  };
}

describe('modeled time moves only through the counters', () => {
  it("doubling NBuffers doubles a full scan's modeled cost and leaves a lookup's unchanged", async () => {
    // 64 pages in pools of 4096 and 8192 buffers (both within the profile's cache tier).
    const [scanA, scanB, lookA, lookB] = await countCellsInProcess(
      [
        relCell(4096, 64, 'full-scan'),
        relCell(8192, 64, 'full-scan'),
        relCell(4096, 64, 'cached-lookup'),
        relCell(8192, 64, 'cached-lookup'),
      ],
      settings,
    );
    expect(scanA!.replay.drops.scannedByMatcher.single).toBe(4096);
    expect(scanB!.replay.drops.scannedByMatcher.single).toBe(8192);
    // Everything but the descriptors visited is the same workload.
    const butScans = (r: typeof scanA) => ({
      ...r!.replay,
      drops: { ...r!.replay.drops, scannedByMatcher: null, scanned: null },
    });
    expect(butScans(scanB)).toEqual(butScans(scanA));
    const perDescriptor = profile.constants['scan.single.cache'].seconds;
    expect(perDescriptor).toBeGreaterThan(0);
    const mA = modelFailover(scanA!, profile, 4096);
    const mB = modelFailover(scanB!, profile, 8192);
    // The full scan's priced count doubles, so its modeled cost doubles; nothing else moves.
    const scanCount = (c: typeof scanA, nb: number) =>
      costFeatures(c!, profile, nb).replay['scan.single.cache']!;
    expect(scanCount(scanB, 8192)).toBe(2 * scanCount(scanA, 4096));
    expect(mB.replay.dropsS - mA.replay.dropsS).toBeCloseTo(4096 * perDescriptor, 15);
    expect(mB.failoverS - mA.failoverS).toBeCloseTo(4096 * perDescriptor, 15);
    // The lookup path's counts and modeled seconds do not depend on NBuffers at all.
    expect(lookB).toEqual(lookA);
    expect(modelFailover(lookB!, profile, 8192).failoverS).toBe(
      modelFailover(lookA!, profile, 4096).failoverS,
    );
  });

  it('a relation twice as big doubles the probes and the per-page records, nothing else', async () => {
    const [small, big] = await countCellsInProcess(
      [relCell(16384, 100, 'cached-lookup'), relCell(16384, 200, 'cached-lookup')],
      settings,
    );
    const s = small!.replay;
    const b = big!.replay;
    // Probes = heap pages + the FSM and VM pages beyond the cut (2 after a truncation to 0 here).
    expect(b.drops.probes - s.drops.probes).toBe(100);
    expect(b.pgRecords.HEAP2_PRUNE).toBe(2 * s.pgRecords.HEAP2_PRUNE!);
    expect(b.pgRecords.HEAP2_VACUUM).toBe(2 * s.pgRecords.HEAP2_VACUUM!);
    expect(b.pgRecords.HEAP2_VISIBLE).toBe(2 * s.pgRecords.HEAP2_VISIBLE!);
    expect(b.pgRecords.SMGR_TRUNCATE).toBe(1);
    expect(b.controlFileUpdates).toBe(s.controlFileUpdates);
    const perPage =
      profile.constants['record.HEAP2_PRUNE'].seconds +
      profile.constants['record.HEAP2_VACUUM'].seconds +
      profile.constants['record.HEAP2_VISIBLE'].seconds +
      profile.constants['lookup.probe'].seconds +
      profile.constants['lookup.hit'].seconds +
      profile.constants.invalidate.seconds;
    const walDelta = (b.walBytes - s.walBytes) * profile.constants.walByte.seconds;
    expect(
      modelFailover(big!, profile, 16384).failoverS -
        modelFailover(small!, profile, 16384).failoverS,
    ).toBeCloseTo(100 * perPage + walDelta, 12);
  });

  it('twice the tables: every count of a Test B failover doubles, and so does the modeled replay', async () => {
    for (const variant of ['vacuum', 'truncate'] as const) {
      for (const strategy of ['full-scan', 'cached-lookup'] as const) {
        const [a, b] = await countCellsInProcess(
          [multiCell(4096, 10, variant, strategy), multiCell(4096, 20, variant, strategy)],
          settings,
        );
        const ra = a!.replay;
        const rb = b!.replay;
        for (const [k, v] of Object.entries(ra.pgRecords))
          expect(rb.pgRecords[k as keyof typeof ra.pgRecords], `${variant} ${strategy} ${k}`).toBe(
            2 * v,
          );
        expect(rb.drops.drops).toEqual(
          Object.fromEntries(Object.entries(ra.drops.drops).map(([k, v]) => [k, 2 * v])),
        );
        expect(rb.drops.invalidated).toBe(2 * ra.drops.invalidated);
        expect(rb.controlFileUpdates).toBe(20);
        const ma = modelFailover(a!, profile, 4096);
        const mb = modelFailover(b!, profile, 4096);
        // WAL bytes grow with the table names' lengths, so only the rest doubles exactly.
        const wal = (r: typeof ra) => r.walBytes * profile.constants.walByte.seconds;
        expect(mb.phases.replayS - wal(rb)).toBeCloseTo(2 * (ma.phases.replayS - wal(ra)), 12);
        expect(mb.phases.endOfRecoveryS).toBe(ma.phases.endOfRecoveryS);
      }
    }
  });

  it('the same workload gives identical counts on every run', async () => {
    const cells = [multiCell(2048, 5, 'truncate', 'full-scan'), relCell(2048, 40, 'cached-lookup')];
    expect(await countCellsInProcess(cells, settings)).toEqual(
      await countCellsInProcess(cells, settings),
    );
  });
});
