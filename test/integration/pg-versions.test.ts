/**
 * Every PostgreSQL major 13–18 that is installed (scripts/postgres/pg-install.ts's cache; `.ci/run`
 * installs 13 and the newest), through the step code both engines share: a primary + synchronous
 * standby of that major starts (pg_basebackup 15 for 13/14, a cold copy for 16+), streams, pauses,
 * takes a backlog, replays it and promotes. gdb on the standby's startup process records
 * PostgreSQL's own drop calls over the failover (test/helpers/pg-drop-trace.ts, with the drop
 * functions of that major), so each major's drop path is asserted from the binary itself:
 *
 * - TRUNCATE of a one-block table written since the standby started: 13 scans every descriptor
 *   (it has no cached sizes and no lookup path), 14–18 look its blocks up: 4 probes, the main
 *   fork's block and the 3 pages of the free space map the redo of the filling insert created
 *   (XLogRecordPageWithFreeSpace: root, internal and leaf page), both sizes cached by that redo;
 * - DROP DATABASE: one full scan (DropDatabaseBuffers) in every major;
 * - a TRUNCATE after that DROP DATABASE in the same backlog: the database drop's redo forgot
 *   every relation's cached size (dbase_redo → XLogDropDatabase → smgrcloseall, 17+
 *   smgrdestroyall, in every major; 15+ also the SMGRRELEASE barrier), so every major scans;
 * - a VACUUM truncation of a table whose pages replay last read before the standby restarted
 *   (emptied and vacuumed with vacuum_truncate off, a restartpoint after it, the standby
 *   restarted): the January 2025 minors (every installed one: 13.23, 14.23, 15.18, 16.14, 17.10,
 *   18.4) ask the truncated forks' sizes first, so 14–18 look its blocks up; 13 scans.
 *
 * And `predict` (scripts/predict/, the standby's pg_wal read by pg-wal/, that major's drop rules
 * from storage/pg-drop-rules.ts) is run on the paused standby before the failover: its drop calls
 * (function, path, probes) equal the ones gdb then sees PostgreSQL make.
 *
 * The seed's `pg_ctl` shim drives the pair through that major's own pg_ctl (status, stop). A major
 * that is not installed is skipped with the reason. No timing is asserted.
 */
import { spawnSync } from 'node:child_process';
import * as path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { PgDirs } from '../helpers/postgres.ts';
import {
  gdbUnavailableReason,
  traceDrops,
  type DropFunction,
  type ObservedDrop,
} from '../helpers/pg-drop-trace.ts';
import { cachedPgBinDir, PG_MAJORS } from '../../scripts/postgres/pg-install.ts';
import {
  initPgCluster,
  pgConnect,
  pgConnectionString,
  pgCtl,
  pgDataDir,
  readPgEngine,
} from '../../scripts/postgres/pg-cluster.ts';
import { PgEngine } from '../../scripts/engines/pg-engine.ts';
import { runStep, type ResumeResult } from '../../scripts/experiment/steps.ts';
import { predictStandby } from '../../scripts/predict/prediction.ts';
import { DEFAULT_PROFILE, loadProfile } from '../../cost-model/profile.ts';
import { pgDropRules } from '../../storage/pg-drop-rules.ts';
import { pollUntil } from '../../server/poll.ts';

const SHIM = path.resolve(import.meta.dirname, '../../scripts/seed/pg_ctl');
const dirs = new PgDirs();
afterAll(() => dirs.removeAll());
const gdbReason = gdbUnavailableReason();
const TABLES = 3;

/** What each major's drops must be over the failover (see the file comment). */
function expectedDrops(major: number): Pick<ObservedDrop, 'fn' | 'path'>[] {
  const { fn } = pgDropRules({ major, minor: null });
  const path = major === 13 ? ('full-scan' as const) : ('cached-lookup' as const);
  return [
    ...Array.from({ length: TABLES }, () => ({ fn: fn.dropRelations as DropFunction, path })),
    { fn: fn.truncate, path },
    { fn: 'DropDatabaseBuffers', path: 'full-scan' },
    { fn: fn.dropRelations, path: 'full-scan' },
  ];
}

/**
 * trunc_t: 5 pages emptied and vacuumed with vacuum_truncate off (VM set all-visible), then a
 * checkpoint, a restartpoint and a standby restart: the restarted startup process never reads
 * its pages, and the VACUUM that truncates it later logs nothing but the truncation.
 */
async function restartAfterTruncTable(dir: string): Promise<void> {
  await onPrimary(dir, [
    'CREATE TABLE trunc_t (c int) WITH (autovacuum_enabled = off, vacuum_truncate = off)',
    'INSERT INTO trunc_t SELECT generate_series(1, 1000)',
    'DELETE FROM trunc_t',
    'VACUUM trunc_t',
    'VACUUM trunc_t',
    'CHECKPOINT',
  ]);
  const p = await pgConnect(dir, 'primary');
  const lsn = (await p.query('SELECT pg_current_wal_lsn()::text AS l')).rows[0].l as string;
  await p.end();
  await pollUntil(
    async () => {
      const s = await pgConnect(dir, 'standby');
      try {
        const q = 'SELECT pg_last_wal_replay_lsn() >= $1::pg_lsn AS ok';
        return (await s.query(q, [lsn])).rows[0].ok === true;
      } finally {
        await s.end();
      }
    },
    'the standby to replay the checkpoint',
    120_000,
    100,
  );
  const s = await pgConnect(dir, 'standby');
  await s.query('CHECKPOINT'); // a restartpoint: the restarted startup process begins after it
  await s.end();
  await pgCtl(dir, 'standby', 'stop', { mode: 'fast' });
  await pgCtl(dir, 'standby', 'start');
}

/** predict on the paused standby (its pg_wal through pg-wal/): its drop calls, as gdb shows them. */
async function predictedDrops(
  dir: string,
): Promise<Pick<ObservedDrop, 'fn' | 'path' | 'lookups'>[]> {
  const p = await predictStandby({
    standby: pgConnectionString(dir, 'standby'),
    pgdata: pgDataDir(dir, 'standby'),
    profile: loadProfile(DEFAULT_PROFILE),
    profileRef: DEFAULT_PROFILE,
  });
  expect(p.source.source).toBe('pg-wal');
  return p.drops.list.map((d) => ({ fn: d.fn, path: d.path, lookups: d.probes }));
}

async function onPrimary(dir: string, sql: string[]): Promise<void> {
  const c = await pgConnect(dir, 'primary');
  try {
    for (const q of sql) await c.query(q);
  } finally {
    await c.end();
  }
}

for (const major of PG_MAJORS) {
  const reason =
    cachedPgBinDir(major) === null
      ? `PostgreSQL ${major} is not installed (npm run cluster -- start --engine postgres --pg-version ${major} installs it)`
      : null;
  describe.skipIf(reason !== null)(
    `PostgreSQL ${major}${reason ? ` (skipped: ${reason})` : ''}`,
    () => {
      const title =
        'starts, streams, pauses, replays and promotes; ' +
        (gdbReason === null
          ? 'its own drop calls take its drop path'
          : `(drop path not checked: ${gdbReason})`);
      it(
        title,
        async () => {
          const dir = dirs.fresh(`v${major}`);
          await initPgCluster(dir, {
            sharedBuffers: '128MB',
            primarySharedBuffers: '128MB',
            pgVersion: major,
          });
          const e = readPgEngine(dir);
          expect(e.major).toBe(major);
          expect(e.standbyMethod).toBe(major <= 15 ? 'pg_basebackup' : 'cold-copy');
          const engine = new PgEngine(dir);
          const o = { clusterDir: dir, workload: 'multi' as const, tables: TABLES, engine };
          await restartAfterTruncTable(dir);
          await runStep('create', o);
          await onPrimary(dir, ['CREATE TABLE extra_t (c int)', 'INSERT INTO extra_t VALUES (1)']);
          expect((await runStep('insert', o)).pagesPerTable).toBe(1);
          const standby = await pgConnect(dir, 'standby');
          let startupPid: number;
          try {
            const s = await standby.query(
              "SELECT version() AS v, current_setting('data_checksums') AS dc, pg_is_in_recovery() AS r",
            );
            expect(s.rows[0].v).toMatch(new RegExp(`^PostgreSQL ${major}\\.`));
            expect(s.rows[0].dc).toBe('off');
            expect(s.rows[0].r).toBe(true);
            // Streamed: the standby has replayed the extra table's row.
            expect((await standby.query('SELECT count(*)::int AS n FROM extra_t')).rows[0].n).toBe(
              1,
            );
            startupPid = (
              await standby.query<{ pid: number }>(
                "SELECT pid FROM pg_stat_activity WHERE backend_type = 'startup'",
              )
            ).rows[0]!.pid;
          } finally {
            await standby.end();
          }
          await runStep('pause', o);
          await runStep('truncate', o);
          await onPrimary(dir, [
            'ALTER TABLE trunc_t SET (vacuum_truncate = on)',
            'VACUUM trunc_t',
            'CREATE DATABASE walsim_dropped',
            'DROP DATABASE walsim_dropped',
            'TRUNCATE extra_t',
          ]);
          await runStep('stop', o);
          const predicted = await predictedDrops(dir);
          expect(predicted.map(({ fn, path }) => ({ fn, path }))).toEqual(expectedDrops(major));
          const trace = gdbReason === null ? await traceDrops(startupPid, major) : null;
          let r: ResumeResult;
          try {
            r = (await runStep('resume', o)) as ResumeResult;
          } catch (err) {
            trace?.kill();
            throw err;
          }
          if (r.engine !== 'postgres') throw new Error(`resume answered for engine ${r.engine}`);
          expect(r.promoted).toBe(true);
          expect(r.newTimeline).toBe(2);
          expect(r.failoverMs).toBeGreaterThan(0);
          // The replayed WAL counted by pg-wal/ in every major (pg_waldump reads its own only).
          expect(r.waldumpMissing).toBeUndefined();
          expect(r.recordsReplayed).toBeGreaterThan(0);
          expect(
            r.waldump!.rows.find((x) => x.rmgr === 'Database' && x.type === 'DROP')?.count,
          ).toBe(1);
          const promoted = await pgConnect(dir, 'standby');
          try {
            expect((await promoted.query('SELECT pg_is_in_recovery() AS r')).rows[0].r).toBe(false);
            await promoted.query('INSERT INTO extra_t VALUES (2)');
            expect((await promoted.query('SELECT count(*)::int AS n FROM extra_t')).rows[0].n).toBe(
              1,
            );
          } finally {
            await promoted.end();
          }
          // The seed's pg_ctl shim hands this cluster to its own major's pg_ctl.
          const shim = (...args: string[]) => {
            const r = spawnSync(SHIM, args, { encoding: 'utf8' });
            return { code: r.status, out: `${r.stdout}${r.stderr}` };
          };
          expect(shim('status', '-D', pgDataDir(dir, 'standby'))).toMatchObject({
            code: 0,
            out: expect.stringContaining('server is running'),
          });
          expect(shim('status', '-D', pgDataDir(dir, 'primary'))).toMatchObject({ code: 3 });
          expect(shim('stop', '-D', pgDataDir(dir, 'standby'), '-m', 'fast')).toMatchObject({
            code: 0,
            out: expect.stringContaining('server stopped'),
          });
          if (trace === null) return;
          const drops = await trace.finish();
          // PostgreSQL's own calls: the expected paths, and predict's probes for each.
          expect(drops.map(({ fn, path, lookups }) => ({ fn, path, lookups }))).toEqual(predicted);
        },
        600_000,
      ); // six real majors on a shared, loaded machine: no timing is asserted
    },
  );
}
