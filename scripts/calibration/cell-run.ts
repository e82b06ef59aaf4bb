/**
 * One run of a predict-bench cell on real PostgreSQL 15: a fresh primary + synchronous standby
 * (postgres/pg-cluster.ts), the backlog made with replay paused through the experiment steps
 * (experiment/steps.ts: create, insert, [delete], pause, then VACUUM / TRUNCATE or the cell's own
 * statements, primary stopped immediately), `npm run predict`'s prediction of the standby from its
 * unreplayed WAL (predictStandby with --pgdata, once per profile), then `--verify`'s promotion
 * (verifyPromotion: resume + pg_promote, instants from the standby's log) with the startup
 * process's scheduler statistics sampled over it (postgres/startup-sched.ts). `sync` right before
 * the resume. With `probe`, predict's machine probe runs beside the standby's data directory first
 * and the predictions are the profiles scaled by it, the unscaled ones stored beside. The pair is stopped whatever happens and its WAL removed; its other files stay until
 * the command removes its work directory (postgres/inode-reuse.ts).
 *
 * Entry points: `runBenchCell`, `BenchSettings`, `pgbenchMissingReason`, `mixedBacklog`.
 */
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import type { CostProfile } from '../../cost-model/profile.ts';
import { cpuPressureTotalUs } from '../experiment/sweep-runner.ts';
import { runStep, StepSession, waitForStandby, type StepName } from '../experiment/steps.ts';
import { tableNames } from '../experiment/state.ts';
import { DML_ROWS_PER_TABLE, dmlBacklog } from '../experiment/dml.ts';
import { findPgBin } from '../postgres/pg-bin.ts';
import { spawnSync } from 'node:child_process';
import { retireCluster } from '../postgres/inode-reuse.ts';
import {
  initPgCluster,
  pgConnectionString,
  pgDataDir,
  pgLogPath,
  readPgEngine,
  runPgProgram,
} from '../postgres/pg-cluster.ts';
import { PgEngine } from '../engines/pg-engine.ts';
import pg from 'pg';
import { startupSamplerOf, unmappedDescriptorPages } from '../postgres/startup-sched.ts';
import {
  backlogOfCell,
  priceBenchRun,
  probedProfile,
  type BenchCell,
  type BenchRun,
} from './cell-plan.ts';
import { probeMachine } from '../predict/probe.ts';
import { makeGeneratedBacklog } from './gen-backlog.ts';
import { predictStandby } from '../predict/prediction.ts';
import { checkVerifiable, verifyPromotion } from '../predict/verify.ts';

export interface BenchSettings {
  /** Where the fresh pairs live (each removed after its run). */
  workDir: string;
  pgBin?: string;
  primarySharedBuffers: string;
  /**
   * Wait out ext4's inode-reuse delay after a recent work-directory removal before the first run
   * (postgres/inode-reuse.ts); `--no-wait` turns it off where timing does not matter (tests).
   */
  inodeReuseWait: boolean;
  wall: { profile: CostProfile; ref: string };
  uncontended: { profile: CostProfile; ref: string };
  /**
   * Run predict's machine probe beside the standby's data directory before pricing, and price with
   * the profiles scaled by it (predict's default; `npm run calibrate` prices with an unscaled base).
   */
  probe: boolean;
}

/**
 * null when a `pgbench` is installed (beside the server binaries, else a Debian one of any major:
 * postgres/pg-bin.ts `toolPath`), else why the pgbench cell cannot run.
 */
export function pgbenchMissingReason(pgBin?: string): string | null {
  const p = findPgBin(pgBin).path('pgbench');
  return fs.existsSync(p)
    ? null
    : `${p} is missing (Debian ships pgbench in postgresql-client-NN, which postgresql-NN depends on)`;
}

/**
 * The mixed backlog over tables of one block (226 rows): round-robin by table, table i gets
 * i % 4 = 0: INSERT of 10 pages more (extends); 1: DELETE of every row, VACUUM (truncates to 0);
 * 2: TRUNCATE; 3: DELETE of half the rows, VACUUM (prunes, nothing to truncate).
 */
export function mixedBacklog(tables: number): string[] {
  return tableNames('multi', tables).flatMap((t, i) => {
    switch ((i + 1) % 4) {
      case 0:
        return [`INSERT INTO ${t} SELECT generate_series(1, ${DML_ROWS_PER_TABLE})`];
      case 1:
        return [`DELETE FROM ${t}`, `VACUUM ${t}`];
      case 2:
        return [`TRUNCATE ${t}`];
      default:
        return [`DELETE FROM ${t} WHERE c % 2 = 0`, `VACUUM ${t}`];
    }
  });
}

/** The cell's own backlog (drop, pgbench, mixed, DML): statements before and after the pause. */
function ownBacklog(c: BenchCell): { prePause: string[]; backlog: string[] } {
  switch (c.workload) {
    case 'insert':
    case 'delete':
    case 'copy':
    case 'copy-wide':
      return dmlBacklog(c.workload, c.n);
    case 'drop':
      return { prePause: [], backlog: tableNames('multi', c.n).map((t) => `DROP TABLE ${t}`) };
    default:
      return { prePause: [], backlog: mixedBacklog(c.n) };
  }
}

/** Steps before the pause and the drop step after it (null: the cell's own backlog). */
function stepsOf(c: BenchCell): { before: StepName[]; drop: 'vacuum' | 'truncate' | null } {
  switch (c.workload) {
    case 'testA':
    case 'vacuum':
      return { before: ['create', 'insert', 'delete'], drop: 'vacuum' };
    case 'truncate':
    case 'truncate-toast':
      return { before: ['create', 'insert'], drop: 'truncate' };
    default:
      return { before: ['create', 'insert'], drop: null };
  }
}

/** Make the cell's backlog on `dir`'s pair: the standby paused, the primary stopped. */
export async function makeBacklog(dir: string, c: BenchCell): Promise<void> {
  if (c.workload === 'gen') return makeGeneratedBacklog(dir, backlogOfCell(c));
  const engine = new PgEngine(dir);
  const session = new StepSession(engine);
  const workload = c.workload === 'testA' ? 'rel' : 'multi';
  const tables = c.workload === 'testA' || c.workload === 'pgbench' ? 1 : c.n;
  const { before, drop } = stepsOf(c);
  const step = (name: StepName) =>
    runStep(name, {
      clusterDir: dir,
      engine,
      workload,
      session,
      tables,
      // copy-wide's rows have a text value: the tables of the TOAST-able variant (c int, d text).
      toast: c.workload === 'truncate-toast' || c.workload === 'copy-wide',
      size: c.workload === 'testA' ? String(c.pages) : undefined,
    });
  const own = drop === null && c.workload !== 'pgbench' ? ownBacklog(c) : null;
  try {
    for (const name of before) await step(name);
    if (own !== null && own.prePause.length > 0) await session.runEach('primary', own.prePause);
    await step('pause');
    if (drop !== null) {
      await step(drop);
      await step('stop');
      return;
    }
    if (c.workload === 'pgbench') {
      const e = readPgEngine(dir);
      await runPgProgram(
        e,
        'pgbench',
        [
          '-i',
          '-s',
          String(c.n),
          '-h',
          '127.0.0.1',
          '-p',
          String(e.ports.primary),
          '-U',
          'postgres',
          'postgres',
        ],
        { cwd: dir },
      );
    } else await session.runEach('primary', own!.backlog);
    // The stop step's own order: everything flushed on the standby, then an immediate stop.
    await waitForStandby(session, 'flush');
    await session.close();
    await engine.stop('primary', 'immediate');
  } finally {
    await session.close();
    await engine.close();
  }
}

type Prediction = Awaited<ReturnType<typeof predictStandby>>;

/** A verified promotion and what was sampled around it. */
interface MeasuredPromotion {
  v: Awaited<ReturnType<typeof verifyPromotion>>;
  /** The startup process's scheduler statistics over the promotion (null: not readable). */
  sched: ReturnType<NonNullable<ReturnType<typeof startupSamplerOf>>['stop']> | null;
  /** The share of the promotion's wall time some task waited for a CPU (PSI; null: no PSI). */
  cpuPressure: number | null;
}

/** Promote the standby as `--verify` does, sampling its startup process and the CPU pressure. */
async function measurePromotion(
  standby: string,
  pgdata: string,
  pw: Prediction,
  logFile: string,
): Promise<MeasuredPromotion> {
  // Every dirty page written back first: the standby's data files then have their blocks
  // allocated, as on a standby whose restartpoints wrote them long ago. Without it, files younger
  // than the kernel's dirty_expire (30 s) are still delayed-allocation extents, whose truncation
  // and unlink free no blocks (no discard on this kind of mount), and writeback racing the replay
  // made the per-table cost depend on how long the backlog took to make (BENCHMARKS.md).
  spawnSync('sync', { stdio: 'ignore' });
  const sampler = startupSamplerOf(pgdata);
  const p0 = cpuPressureTotalUs();
  const t0 = performance.now();
  const v = await verifyPromotion(standby, pw, logFile);
  const sched = sampler?.stop() ?? null;
  const p1 = cpuPressureTotalUs();
  const wallUs = (performance.now() - t0) * 1000;
  const cpuPressure =
    p0 !== null && p1 !== null && wallUs > 0 ? Math.min(1, (p1 - p0) / wallUs) : null;
  return { v, sched, cpuPressure };
}

/** The run's record: both predictions beside what the promotion measured. */
function benchRunOf(
  c: BenchCell,
  run: number,
  pw: Prediction,
  pu: Prediction,
  { v, sched, cpuPressure }: MeasuredPromotion,
): BenchRun {
  return {
    cell: c.id,
    run,
    predictedWallS: pw.predicted.writableS,
    predictedUncontendedS: pu.predicted.writableS,
    measuredWallS: v.measured.writableS,
    runQueueS: sched === null ? null : sched.runQueueMs / 1000,
    startupCpuS: sched === null ? null : sched.cpuMs / 1000,
    startupBlockedS: sched === null ? null : sched.blockedMs / 1000,
    stall: v.stall,
    phases: {
      replayS: v.measured.replayS,
      endOfRecoveryS: v.measured.endOfRecoveryS,
      openForWritesS: v.measured.openForWritesS,
    },
    predictedPhasesWall: pw.predicted.phases,
    records: pw.records.total,
    walBytes: pw.range.bytes,
    range: { from: pw.range.from, to: pw.range.to },
    dropsFullScan: pw.drops.calls.fullScan,
    dropsLookup: pw.drops.calls.lookup,
    counts: pw.counts,
    genericRecords: pw.records.generic,
    dominates: pw.dominates,
    loadAvg1: os.loadavg()[0]!,
    cpuPressure,
    at: v.readyAt,
  };
}

/**
 * The buffer descriptor array's 4 KiB pages and how many of them the standby's startup process has
 * not mapped (postgres/startup-sched.ts), read before the promotion; null when unreadable.
 */
async function descriptorPagesOf(
  standby: string,
  pgdata: string,
): Promise<{ pages: number; unmapped: number } | null> {
  const client = new pg.Client({ connectionString: standby });
  client.on('error', () => {});
  try {
    await client.connect();
    const r = await client.query(
      "SELECT off::float8 AS off, allocated_size::float8 AS size FROM pg_shmem_allocations WHERE name = 'Buffer Descriptors'",
    );
    const row = r.rows[0] as { off: number; size: number } | undefined;
    return row === undefined ? null : unmappedDescriptorPages(pgdata, row.off, row.size);
  } catch {
    return null;
  } finally {
    await client.end().catch(() => {});
  }
}

/** One run: fresh pair, backlog, two predictions, verified promotion, removal. */
export async function runBenchCell(c: BenchCell, run: number, s: BenchSettings): Promise<BenchRun> {
  fs.mkdirSync(s.workDir, { recursive: true });
  fs.chmodSync(s.workDir, 0o755); // PostgreSQL's OS user must reach the cluster directories
  const parent = fs.mkdtempSync(path.join(s.workDir, 'pg-bench-'));
  fs.chmodSync(parent, 0o755);
  const dir = path.join(parent, 'pair');
  try {
    await initPgCluster(dir, {
      sharedBuffers: c.sharedBuffers,
      primarySharedBuffers: s.primarySharedBuffers,
      pgBin: s.pgBin,
    });
    await makeBacklog(dir, c);
    const standby = pgConnectionString(dir, 'standby');
    const pgdata = pgDataDir(dir, 'standby');
    // Before the predictions, as npm run predict probes before it prices; a failure is stored as null.
    const here = s.probe ? probeMachine(pgdata) : null;
    const probe = here === null || 'error' in here ? null : here;
    const predict = (p: BenchSettings['wall']) =>
      predictStandby({
        standby,
        pgdata,
        profile: probedProfile(p.profile, probe),
        profileRef: p.ref,
      });
    const pw = await predict(s.wall);
    // npm run calibrate passes one base profile for both: its prediction is not read twice.
    const pu = s.uncontended.profile === s.wall.profile ? pw : await predict(s.uncontended);
    const logFile = checkVerifiable(pw, pgLogPath(dir, 'standby'));
    const descriptorPages = await descriptorPagesOf(standby, pgdata);
    const r = {
      ...benchRunOf(c, run, pw, pu, await measurePromotion(standby, pgdata, pw, logFile)),
      descriptorPages,
    };
    if (!s.probe) return r;
    const unscaled = priceBenchRun(
      { ...r, probe: null },
      c.nBuffers,
      s.wall.profile,
      s.uncontended.profile,
    );
    return { ...r, probe, unprobed: unscaled.unprobed };
  } finally {
    // The small files stay until the command removes its work directory (inode-reuse.ts: removing
    // thousands of files here would slow every file creation of the next run's replay).
    await retireCluster(dir);
  }
}
