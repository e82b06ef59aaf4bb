/**
 * The shipped `seed-001` profile is the fit of walsim's exact counts to seed 001's tables, and with
 * it the model reproduces the seed's shape. Method: (1) the stored counts of the small cells equal
 * freshly computed in-process counts (the stored file is genuine), (2) refitting the stored counts
 * gives exactly the shipped constants (nothing hand-tuned), (3) the profile's acceptance bounds on
 * Test A and Test B, asserted on the modeled seconds (deterministic, so exact).
 */
import * as fs from 'node:fs';
import { describe, expect, it } from 'vitest';
import {
  compare,
  crossValidate,
  fitSeed001,
  SEED_CELLS_FILE,
  type CountedSeedCell,
} from '../../scripts/experiment/fit-seed-001.ts';
import { countCellsInProcess } from '../../scripts/experiment/in-process.ts';
import { computeCrossover } from '../../scripts/report/tables.ts';
import { modelFailover } from '../../cost-model/model.ts';
import { COST_CONSTANT_NAMES, loadProfile } from '../../cost-model/profile.ts';
import type { CellSummary } from '../../scripts/report/records.ts';

const cells = JSON.parse(fs.readFileSync(SEED_CELLS_FILE, 'utf8')) as CountedSeedCell[];
const profile = loadProfile('seed-001');
const modeled = (c: CountedSeedCell) => modelFailover(c.counts, profile, c.cell.nBuffers);
const find = (label: string) => cells.find((c) => c.label === label)!;

describe('seed-001 profile', () => {
  it('stores counts that in-process runs reproduce exactly (128MB cells)', async () => {
    const small = cells.filter((c) => c.cell.sharedBuffers === '128MB');
    expect(small).toHaveLength(7 * 2 + 4);
    const fresh = await countCellsInProcess(
      small.map((c) => c.cell),
      { thresholdDivisor: 32 },
    );
    small.forEach((c, i) => expect(fresh[i], c.label).toEqual(c.counts));
  });

  it('is exactly the NNLS fit of those counts (no constant tuned by hand)', () => {
    const refit = fitSeed001(cells);
    for (const k of COST_CONSTANT_NAMES)
      expect(profile.constants[k].seconds, k).toBe(refit.constants[k].seconds);
    expect(cells).toHaveLength(2 * 7 * 4 + 4 * 4);
  });

  it('Test B: master grows with NBuffers and lands within 15% of the seed at 20GB and 100GB; patched is flat', () => {
    for (const variant of ['vacuum', 'truncate'] as const) {
      const master = ['128MB', '1GB', '20GB', '100GB'].map(
        (sb) => modeled(find(`B ${sb} ${variant} full-scan`)).failoverS,
      );
      for (let i = 1; i < master.length; i++) expect(master[i]).toBeGreaterThan(master[i - 1]!);
      for (const sb of ['20GB', '100GB']) {
        const c = find(`B ${sb} ${variant} full-scan`);
        expect(Math.abs(modeled(c).polledS! - c.seedS) / c.seedS, c.label).toBeLessThanOrEqual(
          0.15,
        );
      }
      const patched = ['128MB', '1GB', '20GB', '100GB'].map(
        (sb) => modeled(find(`B ${sb} ${variant} cached-lookup`)).failoverS,
      );
      // The lookup path's counts do not depend on NBuffers: the same seconds at every size.
      expect(new Set(patched).size).toBe(1);
    }
  });

  it('Test A: every cell within max(0.15 s, 15%) of the seed, as its poll reads it', () => {
    const rows = compare(
      cells.filter((c) => c.label.startsWith('A ')),
      profile,
    );
    const misses = rows
      .filter((r) => !r.withinBound)
      .map((r) => `${r.label}: seed ${r.seedS}, modeled ${r.polledS.toFixed(3)}`);
    expect(misses).toEqual([]);
  });

  it('Test A: the modeled crossover at 100GB lies between NB/64 and NB/16; at 128MB and 1GB the columns differ by less than 0.1 s', () => {
    const summaries = cells
      .filter((c) => c.label.startsWith('A '))
      .map((c) => ({ ...c.cell, modeledS: modeled(c).failoverS }) as unknown as CellSummary);
    const x = computeCrossover(summaries, 'modeled').find((v) => v.sharedBuffers === '100GB')!;
    expect(['NB/64', 'NB/32', 'NB/16']).toContain(x.largestWinning);
    for (const sb of ['128MB', '1GB']) {
      for (const k of [512, 256, 128, 64, 32, 16, 8]) {
        const d =
          modeled(find(`A ${sb} NB/${k} cached-lookup`)).failoverS -
          modeled(find(`A ${sb} NB/${k} full-scan`)).failoverS;
        expect(Math.abs(d), `${sb} NB/${k}`).toBeLessThan(0.1);
      }
    }
  });

  it('cross-validates leaving each shared_buffers size out', () => {
    const cv = crossValidate(cells);
    expect(cv.map((x) => x.heldOut)).toEqual(['128MB', '1GB', '20GB', '100GB']);
    for (const x of cv) expect(x.rows).toHaveLength(18);
  });
});
