/**
 * Replay correctness with real processes (two server processes). A scripted workload runs on a real
 * primary/standby pair on loopback; after catch-up both nodes must hold the same tables, rows,
 * content digests, fork sizes and buffered blocks, and the standby no buffer of a block that no
 * longer exists. The same workload under every drop strategy (full-scan, cached-lookup, rel-list,
 * recovery-hash, cache-at-create) gives identical standby state, and the counters show which drop
 * path each strategy took.
 */
import { afterAll, describe, expect, it } from 'vitest';
import { clustersPerTest, TestCluster } from '../helpers/cluster.ts';
import type { NodeInspection } from '../../server/node.ts';
import type { DropStrategy } from '../../storage/drop.ts';

async function workload(c: TestCluster): Promise<void> {
  const sizes = [0, 1, 100, 226, 227, 1000, 5000, 20_000];
  for (let i = 0; i < 50; i++) await c.sql('primary', `CREATE TABLE t${i} (c int)`);
  for (let i = 0; i < 50; i++) {
    const n = sizes[i % sizes.length]!;
    if (n > 0) await c.sql('primary', `INSERT INTO t${i} SELECT generate_series(1, ${n})`);
    if (i % 7 === 0) await c.sql('primary', `INSERT INTO t${i} VALUES (-1), (-2), (7), (8), (9)`);
  }
  await c.sql('primary', 'CHECKPOINT');
  for (let i = 0; i < 50; i++) {
    if (i % 3 === 0) await c.sql('primary', `DELETE FROM t${i}`);
    else if (i % 3 === 1)
      await c.sql(
        'primary',
        `DELETE FROM t${i} WHERE c > ${Math.floor((sizes[i % sizes.length]! * 2) / 3)}`,
      );
    else await c.sql('primary', `DELETE FROM t${i} WHERE c = 5`);
  }
  await c.sql('primary', 'VACUUM');
  await c.sql('primary', 'TRUNCATE t1, t2, t3');
  await c.sql('primary', 'TRUNCATE TABLE t10');
  for (const i of [1, 2, 10, 12])
    await c.sql('primary', `INSERT INTO t${i} SELECT generate_series(100, 600)`);
  await c.sql('primary', 'DROP TABLE t49');
  // A TOAST-able table: its TRUNCATE drops heap, TOAST table and TOAST index (never written).
  await c.sql('primary', 'CREATE TABLE tt (c int, d text)');
  await c.sql('primary', 'INSERT INTO tt SELECT generate_series(1, 300)');
  await c.sql('primary', 'TRUNCATE tt');
  await c.sql('primary', 'CHECKPOINT');
  await c.sql('primary', 'DELETE FROM t12 WHERE c < 300');
  await c.sql('primary', 'VACUUM t12');
}

const clusters = clustersPerTest();

async function runWorkload(
  strategy: DropStrategy,
): Promise<{ primary: NodeInspection; standby: NodeInspection; drop: Record<string, any> }> {
  const c = await clusters.start({ sharedBuffers: '16MB', dropStrategy: strategy });
  await workload(c);
  await c.waitForCatchup('replay');
  const primary = await (await c.client('primary')).inspect();
  const standby = await (await c.client('standby')).inspect();
  const drop = (await c.status('standby')).drop;
  return { primary, standby, drop };
}

describe('replay correctness', () => {
  const results: Record<string, Awaited<ReturnType<typeof runWorkload>>> = {};

  afterAll(() => {});

  it('standby equals primary after a 50-table workload (cached-lookup)', async () => {
    const r = await runWorkload('cached-lookup');
    results['cached-lookup'] = r;
    expect(r.standby.tables).toEqual(r.primary.tables);
    expect(r.standby.tables.map((t) => t.name)).not.toContain('t49');
    expect(r.standby.orphanBuffers).toEqual([]);
    expect(r.primary.orphanBuffers).toEqual([]);
    expect(r.standby.relations).toEqual(r.primary.relations);
    const t0 = r.standby.tables.find((t) => t.name === 't0')!;
    expect(t0.rows).toBe(0);
    expect(t0.forks[0]).toBe(0); // deleted and vacuumed: truncated to 0 blocks
    const t12 = r.standby.tables.find((t) => t.name === 't12')!;
    expect(t12.rows).toBe(301 + 0); // 100..600 minus < 300
    // In recovery with sizes cached, small drops take the lookup path.
    expect(r.drop.drops['cached-lookup']).toBeGreaterThan(0);
  });

  it('full-scan gives the identical standby state, always scanning', async () => {
    const r = await runWorkload('full-scan');
    results['full-scan'] = r;
    expect(r.standby.tables).toEqual(r.primary.tables);
    expect(r.standby.orphanBuffers).toEqual([]);
    expect(r.drop.drops['cached-lookup']).toBe(0);
    expect(r.drop.drops['full-scan']).toBeGreaterThan(0);
    expect(r.drop.probes).toBe(0);
    const other = results['cached-lookup'];
    if (other) {
      const strip = (i: NodeInspection) => i.tables.map(({ rel: _rel, ...t }) => t);
      expect(strip(r.standby)).toEqual(strip(other.standby));
    }
  });

  const strip = (i: NodeInspection) => i.tables.map(({ rel: _rel, ...t }) => t);

  it.each([
    ['rel-list', 'rel-list'],
    ['recovery-hash', 'recovery-hash'],
    ['cache-at-create', 'cached-lookup'],
  ] as const)(
    '%s gives the identical standby state, dropping by its own path',
    async (strategy, path) => {
      const r = await runWorkload(strategy);
      expect(r.standby.tables).toEqual(r.primary.tables);
      expect(r.standby.orphanBuffers).toEqual([]);
      expect(r.standby.relations).toEqual(r.primary.relations);
      expect(r.drop.drops[path]).toBeGreaterThan(0);
      if (strategy !== 'cache-at-create') expect(r.drop.drops['full-scan']).toBe(0); // replay is all in recovery
      const ref = results['cached-lookup'];
      if (ref) {
        expect(strip(r.standby)).toEqual(strip(ref.standby));
        // cache-at-create: the TOAST-able TRUNCATE no longer full-scans.
        if (strategy === 'cache-at-create')
          expect(r.drop.drops['full-scan']).toBeLessThan(ref.drop.drops['full-scan']);
      }
    },
  );
});
