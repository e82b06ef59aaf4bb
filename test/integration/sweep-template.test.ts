/**
 * `npm run sweep -- threshold --engine postgres --template` (scripts/experiment/loaded-template.ts)
 * makes a Test A run cheaper without changing what it measures. On real PostgreSQL 13 and 15 (the
 * npm registry's builds, when installed) one cell — 128MB, NB/64: 256 pages, below 15's
 * NBuffers/32, so 15 takes the lookup path whose buffer-table probes gdb counts — runs once on a
 * fresh pair and twice from its template (the first of them builds it, the second reuses it). All
 * three must agree on:
 * - the WAL the standby replays at failover, by rmgr/type (pg-wal/'s count; all but what
 *   background processes log on their own clocks: Standby/RUNNING_XACTS and XLOG records);
 * - the startup process's drop calls during the failover: function, path, probes (gdb);
 * - the standby's pool at the pause: a scan of the relation on the paused standby finds every page
 *   in shared_buffers (the replayed DELETE loaded them, as an untemplated run's INSERT did) — the
 *   state the WAL counts cannot see;
 * - the relation's pages.
 * The second templated run equal to the first says a run does not change its template. No timing
 * is asserted (the per-run seconds are a figure, not a test).
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
  planThreshold,
  runCell,
  type SweepSettings,
} from '../../scripts/experiment/sweep-runner.ts';
import { LoadedTemplates } from '../../scripts/experiment/loaded-template.ts';
import type { AnyEngine } from '../../scripts/experiment/steps.ts';
import { cachedPgBinDir } from '../../scripts/postgres/pg-install.ts';
import type { CellSpec, RunRecord } from '../../scripts/report/records.ts';

const gdbReason = gdbUnavailableReason();
const workDir = fs.mkdtempSync(path.join(os.tmpdir(), 'walsim-sweep-template-'));
afterAll(() => fs.rmSync(workDir, { recursive: true, force: true }));
const settings: SweepSettings = {
  primarySharedBuffers: '128MB',
  thresholdDivisor: 32,
  workDir,
  waitSeconds: 600,
  profile: defaultCostProfile(),
};

/** A run, with what the paused standby's pool held of the relation and the drops gdb saw. */
interface Observed {
  run: RunRecord;
  pool: { hit: number; read: number };
  drops: ObservedDrop[] | null;
}

/** Shared-buffer hits and reads of a scan of the relation on the paused standby. */
async function poolOf(c: pg.Client): Promise<{ hit: number; read: number }> {
  const r = await c.query('EXPLAIN (ANALYZE, BUFFERS, FORMAT JSON) SELECT count(*) FROM rel_t');
  const plan = (r.rows[0]['QUERY PLAN'] as { Plan: Record<string, number> }[])[0]!.Plan;
  return { hit: plan['Shared Hit Blocks']!, read: plan['Shared Read Blocks']! };
}

async function runObserved(cell: CellSpec, major: number, s: SweepSettings): Promise<Observed> {
  const seen: { trace: DropTrace | null; pool: Observed['pool'] | null } = {
    trace: null,
    pool: null,
  };
  try {
    const run = await runCell(cell, 1, s, async (engine: AnyEngine) => {
      const c = new pg.Client({ connectionString: engine.connectionString('standby') });
      await c.connect();
      try {
        seen.pool = await poolOf(c);
        if (gdbReason !== null) return;
        const r = await c.query<{ pid: number }>(
          "SELECT pid FROM pg_stat_activity WHERE backend_type = 'startup'",
        );
        seen.trace = await traceDrops(r.rows[0]!.pid, major);
      } finally {
        await c.end();
      }
    });
    // The startup process exits at the end of recovery, and gdb with it.
    const drops = (await seen.trace?.finish()) ?? null;
    seen.trace = null;
    return { run, pool: seen.pool!, drops };
  } finally {
    seen.trace?.kill();
  }
}

/** The replayed records the statements log (not the background processes' own). */
function statementRecords(r: RunRecord): Record<string, number> {
  return Object.fromEntries(
    Object.entries(r.recordsByType ?? {}).filter(
      ([t]) => t !== 'Standby/RUNNING_XACTS' && !t.startsWith('XLOG/'),
    ),
  );
}

for (const major of [13, 15]) {
  const reason =
    pgUnavailableReason() ??
    (cachedPgBinDir(major) === null
      ? `PostgreSQL ${major} is not installed (npm run pg-install -- ${major})`
      : null);
  describe.skipIf(reason !== null)(
    `sweep --template on PostgreSQL ${major}${reason ? ` (skipped: ${reason})` : ''}`,
    () => {
      const cell = planThreshold(['128MB'], [64], false, ['postgres'], [major])[0]!;
      const templates = new LoadedTemplates(workDir);
      let plain: Observed;
      let first: Observed;
      let second: Observed;

      beforeAll(async () => {
        plain = await runObserved(cell, major, settings);
        first = await runObserved(cell, major, { ...settings, templates });
        second = await runObserved(cell, major, { ...settings, templates });
      }, 600_000);
      afterAll(() => templates.removeAll());

      it('builds the template once and starts both templated runs from it', () => {
        expect(cell.pagesPerTable).toBe(256);
        expect(plain.run.fromTemplate).toBeUndefined();
        expect(Object.keys(plain.run.stepMs)).toContain('insert');
        for (const o of [first, second]) {
          expect(o.run.fromTemplate).toBe(true);
          expect(Object.keys(o.run.stepMs)).not.toContain('create');
          expect(Object.keys(o.run.stepMs)).not.toContain('insert');
          expect(Object.keys(o.run.stepMs)).toContain('delete');
        }
        expect(first.run.stepMs.template).toBeGreaterThan(0);
        expect(second.run.stepMs.template).toBeUndefined();
        expect(templates.dirs).toHaveLength(1);
      });

      it('replays the same records at failover, from the same relation', () => {
        const want = statementRecords(plain.run);
        // Not vacuous: the VACUUM's records of 256 pages and its one truncation.
        expect(want['Storage/TRUNCATE']).toBe(1);
        expect(Object.values(want).reduce((a, b) => a + b, 0)).toBeGreaterThan(2 * 256);
        for (const o of [first, second]) {
          expect(statementRecords(o.run)).toEqual(want);
          expect(o.run.pagesPerTable).toBe(plain.run.pagesPerTable);
          expect(o.run.promoted).toBe(true);
        }
      });

      it("leaves the relation in the paused standby's pool, as a run without a template does", () => {
        expect(plain.pool).toEqual({ hit: 256, read: 0 });
        expect(first.pool).toEqual(plain.pool);
        expect(second.pool).toEqual(plain.pool);
      });

      it.skipIf(gdbReason !== null)(
        `takes the same drop calls and path${gdbReason ? ` (skipped: ${gdbReason})` : ''}`,
        () => {
          const calls = (o: Observed) => o.drops!.map((d) => `${d.fn} ${d.path} ${d.lookups}`);
          expect(calls(plain)).toHaveLength(1);
          // 13 has only the full scan; 15 looks the 256 pages' buffers up.
          expect(calls(plain)[0]).toMatch(major === 13 ? /full-scan 0$/ : /cached-lookup \d+$/);
          expect(calls(first)).toEqual(calls(plain));
          expect(calls(second)).toEqual(calls(plain));
        },
      );

      it('removes its template', async () => {
        const dirs = templates.dirs;
        await templates.removeAll();
        for (const d of dirs) expect(fs.existsSync(d)).toBe(false);
        expect(templates.dirs).toHaveLength(0);
      });
    },
  );
}
