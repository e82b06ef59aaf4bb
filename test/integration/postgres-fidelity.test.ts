/**
 * Fidelity checks on real PostgreSQL 15 — the same statements test/unit/fidelity-walsim.test.ts
 * checks on walsim's counters: TRUNCATE of tables with a TOAST table takes the full scan (every
 * descriptor, so its cost grows with NBuffers) once per table, while int-only TRUNCATE and VACUUM of
 * one-block tables take the lookup path with the same probes at every size; the WAL replayed does
 * not depend on shared_buffers; Test A's replay tracks the relation's size. Skips, naming the
 * reason, without PostgreSQL (and the drop paths without gdb or root).
 * Method: the sweep's own cells (runCell: fresh cluster, the step procedure, failover) of TABLES
 * tables at 128MB and 4GB; PostgreSQL counts no drops, so gdb on the standby's startup process
 * counts them during the failover (test/helpers/pg-drop-trace.ts: which drop function, and on the
 * lookup path the BufTableLookup probes). Records replayed are pg_waldump's count. No timing is
 * asserted: what the drops cost in seconds, and how that grows with NBuffers, are the sweeps'
 * figures (BENCHMARKS.md, "Real PostgreSQL side by side").
 */
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { pgUnavailableReason } from '../helpers/postgres.ts';
import {
  gdbUnavailableReason,
  traceDrops,
  type DropTrace,
  type ObservedDrop,
} from '../helpers/pg-drop-trace.ts';
import { defaultCostProfile } from '../../cost-model/profile.ts';
import {
  planMulti,
  planThreshold,
  runCell,
  type SweepSettings,
} from '../../scripts/experiment/sweep-runner.ts';
import type { RunRecord } from '../../scripts/report/records.ts';

const reason = pgUnavailableReason();
const gdbReason = gdbUnavailableReason();
const workDir = fs.mkdtempSync(path.join(os.tmpdir(), 'walsim-pg-fidelity-'));
afterAll(() => fs.rmSync(workDir, { recursive: true, force: true }));
const settings: SweepSettings = {
  primarySharedBuffers: '128MB',
  thresholdDivisor: 32,
  workDir,
  waitSeconds: 600,
  profile: defaultCostProfile(),
};
/** Enough tables that a path taken once per table shows as such; the sizes are what differ. */
const TABLES = 20;
const SIZES = ['128MB', '4GB'] as const;
const VARIANTS = ['vacuum', 'truncate', 'truncate-toast'] as const;

/** A cell's run, with the drops gdb saw in its failover (null without gdb). */
interface Observed {
  run: RunRecord;
  drops: ObservedDrop[] | null;
}

async function runObserved(cell: Parameters<typeof runCell>[0]): Promise<Observed> {
  const traced: { trace: DropTrace | null } = { trace: null };
  try {
    const run = await runCell(cell, 1, settings, async (engine) => {
      if (gdbReason !== null) return;
      const c = new pg.Client({ connectionString: engine.connectionString('standby') });
      await c.connect();
      try {
        const r = await c.query<{ pid: number }>(
          "SELECT pid FROM pg_stat_activity WHERE backend_type = 'startup'",
        );
        traced.trace = await traceDrops(r.rows[0]!.pid);
      } finally {
        await c.end();
      }
    });
    // The startup process exits at the end of recovery, and gdb with it.
    const drops = (await traced.trace?.finish()) ?? null;
    traced.trace = null;
    return { run, drops };
  } finally {
    traced.trace?.kill();
  }
}

describe.skipIf(reason !== null)(
  `real PostgreSQL fidelity${reason ? ` (skipped: ${reason})` : ''}`,
  () => {
    const r: Record<string, Observed> = {};
    const of = (variant: string, size: string) => r[`${variant} ${size}`]!;

    beforeAll(async () => {
      const plan = planMulti([...SIZES], TABLES, [...VARIANTS], ['cached-lookup'], ['postgres']);
      for (const c of plan) r[`${c.variant} ${c.sharedBuffers}`] = await runObserved(c);
      // Where a cell's time goes, step by step (printed, not asserted).
      for (const [k, o] of Object.entries(r))
        console.log(
          `${k}: ${Object.entries(o.run.stepMs)
            .map(([s, ms]) => `${s} ${Math.round(ms)} ms`)
            .join(', ')}`,
        );
    }, 600_000);

    it('replays the same WAL at 128MB and 4GB', () => {
      // The statements' records, not what background processes log on their own clocks meanwhile:
      // the bgwriter's Standby/RUNNING_XACTS (every 15 s of activity, LOG_SNAPSHOT_INTERVAL_MS)
      // and the checkpointer's XLOG records. A cluster slow to start under load makes one run
      // longer than the other (7 and 9 more records in the totals at load 7-10); the statements'
      // records do not depend on it, nor on shared_buffers.
      const BACKGROUND = new Set(['Standby', 'XLOG']);
      // And two kinds the statements log or not depending on what else runs: heap_update logs a
      // Heap/LOCK of the old catalog tuple when the new one does not fit its page, and whether it
      // fits depends on Heap2/PRUNE, which prunes only what no running transaction can still see
      // (a fresh-clone run: Heap/LOCK 15 at 128MB against 4 at 4GB for the same statements).
      const PAGE_SPACE = new Set(['Heap/LOCK', 'Heap2/PRUNE']);
      const statementRecords = (v: string, s: string) =>
        Object.entries(of(v, s).run.recordsByType ?? {}).filter(
          ([t]) => !BACKGROUND.has(t.slice(0, t.indexOf('/'))) && !PAGE_SPACE.has(t),
        );
      for (const v of VARIANTS) {
        const [small, big] = SIZES.map((s) => new Map(statementRecords(v, s)));
        const sum = (m: Map<string, number>) => [...m.values()].reduce((a, b) => a + b, 0);
        const differing = [...new Set([...small!.keys(), ...big!.keys()])]
          .filter((t) => small!.get(t) !== big!.get(t))
          .map((t) => `${t} ${small!.get(t) ?? 0} / ${big!.get(t) ?? 0}`);
        expect(sum(small!), v).toBeGreaterThan(TABLES);
        expect(
          Math.abs(sum(big!) - sum(small!)),
          `${v}: ${differing.join(', ')}`,
        ).toBeLessThanOrEqual(5);
      }
    });

    it.skipIf(gdbReason !== null)(
      `TOAST TRUNCATE: one full scan per table; int-only TRUNCATE and VACUUM: lookups, the same at both sizes${gdbReason ? ` (skipped: ${gdbReason})` : ''}`,
      () => {
        const paths = (v: string, s: string) =>
          of(v, s).drops!.map((d) => `${d.fn} ${d.path} ${d.lookups}`);
        const toast = paths('truncate-toast', '128MB');
        expect(toast).toHaveLength(TABLES);
        expect(new Set(toast)).toEqual(new Set(['DropRelFileNodesAllBuffers full-scan 0']));
        const truncate = paths('truncate', '128MB');
        expect(truncate).toHaveLength(TABLES);
        for (const p of truncate)
          expect(p).toMatch(/^DropRelFileNodesAllBuffers cached-lookup \d+$/);
        const vacuum = paths('vacuum', '128MB');
        expect(vacuum).toHaveLength(TABLES);
        for (const p of vacuum) expect(p).toMatch(/^DropRelFileNodeBuffers cached-lookup \d+$/);
        // NBuffers 32 times larger changes neither the path nor a single probe.
        for (const v of VARIANTS) expect(paths(v, '4GB'), v).toEqual(paths(v, '128MB'));
      },
    );

    it('Test A: VACUUM replay of NB/8 replays ~64× the records of NB/512', async () => {
      // The relation's size is what matters, not shared_buffers: 128MB keeps NB/8 at 16 MB.
      const plan = planThreshold(['128MB'], [512, 8], false, ['postgres']);
      const small = await runCell(plan[0]!, 1, settings);
      const big = await runCell(plan[1]!, 1, settings);
      expect(big.recordsReplayed / small.recordsReplayed).toBeGreaterThan(32);
    }, 600_000);
  },
);
