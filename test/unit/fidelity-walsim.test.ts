/**
 * Fidelity checks that must hold on walsim as they do on real PostgreSQL 15 (the PostgreSQL side is
 * test/integration/postgres-fidelity.test.ts): VACUUM of 1000 one-block relations is flat across
 * shared_buffers; TRUNCATE of tables with a TOAST table grows with NBuffers (one full scan per
 * table, since replay never cached the never-written TOAST relation's size) while int-only TRUNCATE
 * stays flat; Test A's replay tracks the relation's size.
 * Method: count the cells in-process (the same executor and redo a cluster runs) with PostgreSQL
 * 15's drop path (cached-lookup, unforced) and check the counters and the modeled seconds they give.
 */
import { describe, expect, it } from 'vitest';
import { countCellsInProcess } from '../../scripts/experiment/in-process.ts';
import { planMulti, planThreshold } from '../../scripts/experiment/sweep-runner.ts';
import type { FailoverCounts } from '../../storage/replay-counts.ts';
import { modelFailover } from '../../cost-model/model.ts';
import { loadProfile } from '../../cost-model/profile.ts';

const SIZES = ['128MB', '1GB', '4GB'];
const NBUFFERS = [16_384, 131_072, 524_288];
const profile = loadProfile('seed-001');
const scanned = (c: FailoverCounts) =>
  c.replay.drops.scannedByMatcher.single +
  c.replay.drops.scannedByMatcher.linear +
  c.replay.drops.scannedByMatcher.bsearch;
const records = (c: FailoverCounts) =>
  Object.values(c.replay.pgRecords).reduce((a, b) => a + (b ?? 0), 0);

describe('Test B on walsim, 1000 one-block relations, PostgreSQL 15 drop path', () => {
  const plan = planMulti(SIZES, 1000, ['vacuum', 'truncate', 'truncate-toast'], ['cached-lookup']);
  const counted = countCellsInProcess(plan, { thresholdDivisor: 32 });
  const of = async (variant: string) => {
    const all = await counted;
    return plan.map((c, i) => ({ c, n: all[i]! })).filter((x) => x.c.variant === variant);
  };

  it('VACUUM is flat: lookups only, the same counts and modeled seconds at every size', async () => {
    const v = await of('vacuum');
    expect(v.map((x) => x.n.replay.drops.drops['full-scan'])).toEqual([0, 0, 0]);
    expect(v.map((x) => scanned(x.n))).toEqual([0, 0, 0]);
    expect(new Set(v.map((x) => x.n.replay.drops.probes)).size).toBe(1);
    const modeled = v.map((x) => modelFailover(x.n, profile, x.c.nBuffers).failoverS);
    expect(new Set(modeled).size).toBe(1);
  }, 120_000);

  it('int-only TRUNCATE is flat; TRUNCATE with TOAST tables scans every descriptor once per table', async () => {
    const t = await of('truncate');
    expect(t.map((x) => scanned(x.n))).toEqual([0, 0, 0]);
    expect(t.map((x) => x.n.replay.drops.drops['cached-lookup'])).toEqual([1000, 1000, 1000]);
    const toast = await of('truncate-toast');
    expect(toast.map((x) => x.n.replay.drops.drops['full-scan'])).toEqual([1000, 1000, 1000]);
    expect(toast.map((x) => scanned(x.n))).toEqual(NBUFFERS.map((nb) => 1000 * nb));
    // Three relfilenodes per table: heap, TOAST heap, TOAST index.
    expect(toast[0]!.n.replay.smgr.unlink.reduce((a, b) => a + b, 0)).toBeGreaterThanOrEqual(3000);
    const modeled = toast.map((x) => modelFailover(x.n, profile, x.c.nBuffers).failoverS);
    expect(modeled[1]!).toBeGreaterThan(modeled[0]!);
    expect(modeled[2]!).toBeGreaterThan(modeled[1]!);
  }, 120_000);
});

describe('Test A on walsim: replay tracks the relation size', () => {
  it('VACUUM of NB/512, NB/64, NB/8 at 1GB replays proportionally more records', async () => {
    const plan = planThreshold(['1GB'], [512, 64, 8], false).filter(
      (c) => c.strategy === 'cached-lookup',
    );
    const n = await countCellsInProcess(plan, { thresholdDivisor: 32 });
    const recs = n.map(records);
    expect(recs[0]!).toBeLessThan(recs[1]!);
    expect(recs[1]!).toBeLessThan(recs[2]!);
    // About three records per emptied page (PRUNE, VACUUM, VISIBLE), so 8× the pages ≈ 8× the records.
    expect(recs[2]! / recs[1]!).toBeGreaterThan(6);
    expect(recs[2]! / recs[1]!).toBeLessThan(10);
    const modeled = n.map((c, i) => modelFailover(c, profile, plan[i]!.nBuffers).phases.replayS);
    expect(modeled[0]!).toBeLessThan(modeled[1]!);
    expect(modeled[1]!).toBeLessThan(modeled[2]!);
  }, 120_000);
});
