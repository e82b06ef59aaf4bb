/**
 * Seed 001's rel.sh / test.sh steps against a real PostgreSQL primary + standby (pg-cluster.ts),
 * statements through the `pg` client (one connection per node per step, one transaction per
 * statement), the same order rules, state file and JSON as the walsim steps (experiment/steps.ts).
 *
 * Entry points: `runPgStep`, `PgResumeResult`.
 *
 * Timing (resume), the way walsim times itself, from the server's clocks:
 * - resume instant: `clock_timestamp()` evaluated right after `pg_wal_replay_resume()` in the same
 *   statement; the connection is closed at once, so no session sits on the standby during replay
 *   (a session's snapshots conflict with replayed catalog prunes and make the startup process
 *   wait);
 * - then `pg_ctl promote -w` (pg_control polled every 100 ms); the standby's log gives the end of
 *   WAL, "received promote request", "redo done at", "archive recovery complete", the promotion's
 *   checkpoint request and "ready to accept connections" (read-write) to the millisecond;
 * - the seed's own figure (client clock before the resume → `pg_ctl promote -w` returned) is
 *   reported separately as `seedMethod`;
 * - a promote request seen more than STALL_MS after it was sent and after replay reached the end
 *   of WAL is flagged `stall` (the startup process slept out `wal_retrieve_retry_interval`).
 * WAL replayed at failover is counted with `pg_waldump --stats=record` from the replay LSN at pause
 * to the end of the WAL the standby received, before the resume (outside the timed window).
 */
import * as fs from 'node:fs';
import * as path from 'node:path';
import type pg from 'pg';
import { WalsimError } from '../../common/errors.ts';
import { writeFileAtomic } from '../../common/durable-file.ts';
import { pollUntil } from '../../server/poll.ts';
import { parseLsn } from '../../wal/lsn.ts';
import { parseRelSize, rowsForPages } from '../experiment/rel-size.ts';
import { readWorkloadState, tableNames, writeWorkloadState, type Workload, type WorkloadState } from '../experiment/state.ts';
import { StepOrderError, type StepName, type StepResult } from '../experiment/steps.ts';
import { pgConnect, pgCtl, pgDataDir, pgLogPath, pgNodeRunning, readPgEngine, runPgProgram, type PgNodeName } from './pg-cluster.ts';
import { parsePgLog, promotionTimeline, type PromotionTimeline } from './pg-log.ts';
import { parseWaldumpStats, type WaldumpStats } from './pg-waldump.ts';

/** A promote request noticed later than this after it was sent (and after replay ran out of WAL) is a stall. */
export const STALL_MS = 1000;

export interface PgStepOptions {
  clusterDir: string;
  workload: Workload;
  size?: string;
  tables?: number;
  /** create: give every table a text column, hence a TOAST table (heap + TOAST heap + TOAST index). */
  toast?: boolean;
  waitSeconds?: number;
}

/** What the PostgreSQL steps remember beyond experiment.json. */
interface PgRunState {
  toast: boolean;
  /** Replay LSN when the standby paused: start of the WAL replayed at failover. */
  pauseLsn: string | null;
  /** The primary's flush LSN the standby had flushed when the primary was stopped: its end. */
  endLsn: string | null;
}

const runStatePath = (dir: string, w: Workload) => path.join(dir, `postgres-${w}.json`);
function readRun(dir: string, w: Workload): PgRunState {
  const p = runStatePath(dir, w);
  return fs.existsSync(p) ? (JSON.parse(fs.readFileSync(p, 'utf8')) as PgRunState) : { toast: false, pauseLsn: null, endLsn: null };
}
function writeRun(dir: string, w: Workload, s: PgRunState): void {
  writeFileAtomic(runStatePath(dir, w), JSON.stringify(s, null, 2) + '\n');
}

export interface PgResumeResult extends StepResult {
  engine: 'postgres';
  /** Log method: resume (clock_timestamp) → "ready to accept connections", ms. */
  failoverMs: number;
  resumeAt: string;
  promotedAt: string;
  phases: { replayMs: number | null; endOfRecoveryMs: number | null; openForWritesMs: number | null; checkpointMs: number | null };
  /** The seed's method: client clock before the resume → pg_ctl promote -w returned. */
  seedMethod: { ms: number; resumeAt: string; promotedAt: string };
  log: PromotionTimeline;
  /** The promote request waited for the streaming retry loop (see STALL_MS); excluded from fits. */
  stall: boolean;
  /** promote request sent → seen by the startup process, less any replay still running, ms. */
  promoteNoticeMs: number | null;
  recordsReplayed: number;
  waldump: WaldumpStats;
  newTimeline: number | null;
  promoted: boolean;
}

const fmtInt = (n: number) => n.toLocaleString('en-US');
const orderError = (w: Workload, step: string, why: string) => new StepOrderError(`${why}; run "npm run ${w} -- ${step} --engine postgres" first`, step);

/** Connections of one step, closed at its end (no session outlives a step on the standby). */
class PgSession {
  private readonly clients = new Map<PgNodeName, pg.Client>();
  constructor(readonly dir: string) {}

  async client(name: PgNodeName): Promise<pg.Client> {
    const open = this.clients.get(name);
    if (open) return open;
    if (!(await pgNodeRunning(this.dir, name))) {
      throw new StepOrderError(
        name === 'primary'
          ? `the primary of the PostgreSQL cluster at ${this.dir} is not running (a stopped primary means this experiment already ran its stop step; start a fresh cluster)`
          : `the standby of the PostgreSQL cluster at ${this.dir} is not running; start a fresh cluster`,
        'cluster start',
      );
    }
    const c = await pgConnect(this.dir, name);
    this.clients.set(name, c);
    return c;
  }

  async scalar(name: PgNodeName, sql: string): Promise<unknown> {
    const r = await (await this.client(name)).query({ text: sql, rowMode: 'array' });
    return r.rows[0]?.[0];
  }

  async close(name?: PgNodeName): Promise<void> {
    for (const [n, c] of [...this.clients]) {
      if (name !== undefined && n !== name) continue;
      this.clients.delete(n);
      await c.end().catch(() => {});
    }
  }
}

async function exists(s: PgSession, node: PgNodeName, table: string): Promise<boolean> {
  return (await s.scalar(node, `SELECT to_regclass('${table}') IS NOT NULL`)) === true;
}

async function requireCreated(s: PgSession, w: Workload, node: PgNodeName): Promise<WorkloadState> {
  const st = readWorkloadState(s.dir, w);
  if (st === null) throw orderError(w, 'create', `no ${w} tables in the cluster at ${s.dir}`);
  const names = tableNames(w, st.tables);
  for (const n of new Set([names[0]!, names.at(-1)!])) {
    if (!(await exists(s, node, n))) throw orderError(w, 'create', `table ${n} does not exist on the ${node}`);
  }
  return st;
}

/** Each statement in its own transaction, in order, over the one connection. */
async function runEach(c: pg.Client, statements: string[]): Promise<number> {
  for (const q of statements) await c.query(q);
  return statements.length;
}

async function standbyNBuffers(s: PgSession): Promise<number> {
  return Number(await s.scalar('standby', "SELECT setting FROM pg_settings WHERE name = 'shared_buffers'"));
}

const pauseState = (s: PgSession) => s.scalar('standby', 'SELECT pg_get_wal_replay_pause_state()').then(String);
const inRecovery = (s: PgSession) => s.scalar('standby', 'SELECT pg_is_in_recovery()').then((v) => v === true);

/** Wait until the standby replayed everything the primary flushed (the pause step). */
async function waitForReplay(s: PgSession, timeoutMs = 600_000): Promise<void> {
  const target = parseLsn(String(await s.scalar('primary', 'SELECT pg_current_wal_flush_lsn()')));
  await pollUntil(async () => parseLsn(String(await s.scalar('standby', 'SELECT pg_last_wal_replay_lsn()'))) >= target,
    "the standby's replay to reach the primary's flush LSN", timeoutMs, 20);
}

/** Wait, asking the primary only, until the synchronous standby flushed all WAL; return that LSN. */
async function waitForStandbyFlush(s: PgSession, timeoutMs = 600_000): Promise<string> {
  const target = String(await s.scalar('primary', 'SELECT pg_current_wal_flush_lsn()'));
  await pollUntil(async () => {
    const f = await s.scalar('primary', "SELECT flush_lsn FROM pg_stat_replication WHERE application_name = 'walreceiver'");
    return f !== null && f !== undefined && parseLsn(String(f)) >= parseLsn(target);
  }, "the standby's flush LSN to reach the primary's", timeoutMs, 10);
  return target;
}

// -------------------------------------------------------------------------------------- steps

async function stepCreate(s: PgSession, o: PgStepOptions): Promise<Partial<StepResult>> {
  const tables = o.workload === 'rel' ? 1 : (o.tables ?? 1000);
  if (!Number.isSafeInteger(tables) || tables < 1 || tables > 100_000) throw new WalsimError('invalid_input', `--tables must be an integer from 1 to 100000, got ${o.tables}`);
  const names = tableNames(o.workload, tables);
  if (await exists(s, 'primary', names[0]!)) {
    throw new StepOrderError(`the ${o.workload} tables already exist in ${s.dir}; the next step is "npm run ${o.workload} -- insert --engine postgres"`, 'insert');
  }
  const cols = o.toast ? 'c int, t text' : 'c int';
  await runEach(await s.client('primary'), names.map((n) => `CREATE TABLE ${n} (${cols})`));
  writeWorkloadState(s.dir, o.workload, { tables, pagesPerTable: null, sizeSpec: null, rowsPerTable: null, deleted: false, dropStep: null });
  writeRun(s.dir, o.workload, { toast: o.toast ?? false, pauseLsn: null, endLsn: null });
  return {
    tables, toast: o.toast ?? false,
    lines: [`created ${fmtInt(tables)} table${tables === 1 ? '' : 's'} (${names[0]}${tables > 1 ? ` … ${names.at(-1)}` : ''})${o.toast ? ', each with a TOAST table' : ''}`],
  };
}

async function stepInsert(s: PgSession, o: PgStepOptions): Promise<Partial<StepResult>> {
  const st = await requireCreated(s, o.workload, 'primary');
  if (st.pagesPerTable !== null) throw new StepOrderError(`${o.workload} rows are already inserted; the next step is "delete" or "pause"`, 'delete');
  const nBuffers = await standbyNBuffers(s);
  await s.close('standby');
  let pages = 1;
  let spec = '1';
  if (o.workload === 'rel') {
    const size = parseRelSize(o.size ?? 'NB/512', nBuffers);
    pages = size.pages;
    spec = size.spec;
  } else if (o.size !== undefined) {
    throw new WalsimError('invalid_input', 'multi tables are one block each; --size applies to "npm run rel" only');
  }
  const rows = rowsForPages(pages);
  const c = await s.client('primary');
  await runEach(c, tableNames(o.workload, st.tables).map((n) => `INSERT INTO ${n} (c) SELECT generate_series(1, ${rows})`));
  // PostgreSQL's own page count, to check the rows-per-page arithmetic.
  const realPages = Number(await s.scalar('primary', `SELECT pg_relation_size('${tableNames(o.workload, st.tables)[0]}') / 8192`));
  writeWorkloadState(s.dir, o.workload, { ...st, pagesPerTable: realPages, sizeSpec: spec, rowsPerTable: rows });
  return {
    size: spec, pagesPerTable: realPages, rowsPerTable: rows, tables: st.tables, nBuffers,
    lines: [`inserted ${fmtInt(rows)} rows (${fmtInt(realPages)} page${realPages === 1 ? '' : 's'}${spec !== String(pages) ? `, ${spec} of NBuffers ${fmtInt(nBuffers)}` : ''}) into each of ${fmtInt(st.tables)} table${st.tables === 1 ? '' : 's'}`],
  };
}

async function stepDelete(s: PgSession, o: PgStepOptions): Promise<Partial<StepResult>> {
  const st = await requireCreated(s, o.workload, 'primary');
  if (st.pagesPerTable === null) throw orderError(o.workload, 'insert', 'no rows to delete');
  if (st.dropStep !== null) throw orderError(o.workload, 'create', `the tables were already processed by ${st.dropStep}`);
  await runEach(await s.client('primary'), tableNames(o.workload, st.tables).map((n) => `DELETE FROM ${n}`));
  writeWorkloadState(s.dir, o.workload, { ...st, deleted: true });
  return { tables: st.tables, lines: [`deleted all rows of ${fmtInt(st.tables)} table${st.tables === 1 ? '' : 's'}`] };
}

async function stepPause(s: PgSession, o: PgStepOptions): Promise<Partial<StepResult>> {
  const st = await requireCreated(s, o.workload, 'primary');
  if (st.pagesPerTable === null) throw orderError(o.workload, 'insert', 'the tables are empty (pause comes after insert, and after delete for the VACUUM test)');
  if (!(await inRecovery(s))) throw new StepOrderError('the standby is already promoted; start a fresh cluster', 'cluster start');
  const state = await pauseState(s);
  if (state !== 'not paused') throw new StepOrderError(`replay is already ${state}; the next step is "vacuum" or "truncate"`, 'vacuum');
  await waitForReplay(s);
  await s.scalar('standby', 'SELECT pg_wal_replay_pause()');
  await pollUntil(async () => (await pauseState(s)) === 'paused', 'replay to pause', 60_000, 5);
  const replayLsn = String(await s.scalar('standby', 'SELECT pg_last_wal_replay_lsn()'));
  writeRun(s.dir, o.workload, { ...readRun(s.dir, o.workload), pauseLsn: replayLsn });
  return { replayLsn, lines: [`standby replay paused at ${replayLsn}`] };
}

async function stepDrop(s: PgSession, o: PgStepOptions, step: 'vacuum' | 'truncate'): Promise<Partial<StepResult>> {
  const st = await requireCreated(s, o.workload, 'primary');
  if (st.pagesPerTable === null) throw orderError(o.workload, 'insert', 'the tables are empty');
  if (step === 'vacuum' && !st.deleted) throw orderError(o.workload, 'delete', 'VACUUM truncates only empty pages: delete the rows first');
  if (st.dropStep !== null) throw orderError(o.workload, 'stop', `${st.dropStep} already ran; the next step is "stop"`);
  if ((await pauseState(s)) !== 'paused') throw orderError(o.workload, 'pause', "the standby's replay is not paused, so the drops would be replayed now instead of at failover");
  await s.close('standby');
  const verb = step === 'vacuum' ? 'VACUUM' : 'TRUNCATE';
  const n = await runEach(await s.client('primary'), tableNames(o.workload, st.tables).map((t) => `${verb} ${t}`));
  writeWorkloadState(s.dir, o.workload, { ...st, dropStep: step });
  return { statements: n, lines: [`${verb} of ${fmtInt(n)} table${n === 1 ? '' : 's'}, one transaction each (replay paused on the standby)`] };
}

async function stepStop(s: PgSession, o: PgStepOptions): Promise<Partial<StepResult>> {
  const st = readWorkloadState(s.dir, o.workload);
  if (st === null) throw orderError(o.workload, 'create', `no ${o.workload} experiment in ${s.dir}`);
  if (st.dropStep === null) throw new StepOrderError(`nothing to replay at failover yet; run "npm run ${o.workload} -- vacuum --engine postgres" (after delete) or "… truncate" first`, 'vacuum');
  if (!(await pgNodeRunning(s.dir, 'primary'))) throw new StepOrderError('the primary is not running (already stopped); the next step is "resume"', 'resume');
  const endLsn = await waitForStandbyFlush(s);
  await s.close('primary');
  await pgCtl(s.dir, 'primary', 'stop', { mode: 'immediate' });
  writeRun(s.dir, o.workload, { ...readRun(s.dir, o.workload), endLsn });
  return { mode: 'immediate', endLsn, lines: ['primary stopped (pg_ctl stop -m immediate)'] };
}

/** pg_waldump --stats=record over [from, to) of the standby's timeline-1 WAL. */
async function waldump(dir: string, from: string, to: string): Promise<WaldumpStats> {
  const engine = readPgEngine(dir);
  const r = await runPgProgram(engine, 'pg_waldump', ['--stats=record', '-p', path.join(pgDataDir(dir, 'standby'), 'pg_wal'), '-t', '1', '-s', from, '-e', to], { cwd: dir });
  return parseWaldumpStats(r.stdout);
}

async function stepResume(s: PgSession, o: PgStepOptions): Promise<Partial<PgResumeResult>> {
  if (!(await inRecovery(s))) throw new StepOrderError('the standby is already promoted; start a fresh cluster for another run', 'cluster start');
  if (await pgNodeRunning(s.dir, 'primary')) throw orderError(o.workload, 'stop', 'the primary is still running');
  if ((await pauseState(s)) === 'not paused') throw orderError(o.workload, 'pause', 'replay is not paused, so there is nothing held back to measure');
  const run = readRun(s.dir, o.workload);
  const received = String(await s.scalar('standby', 'SELECT pg_last_wal_receive_lsn()'));
  await s.close('standby');
  const from = run.pauseLsn ?? received;
  const to = run.endLsn !== null && parseLsn(run.endLsn) <= parseLsn(received) ? run.endLsn : received;
  const stats = await waldump(s.dir, from, to);
  const waitSeconds = o.waitSeconds ?? 3600;

  // The timed window: one statement, then no session on the standby until promotion is done.
  const c = await s.client('standby');
  const clientResumeMs = Date.now();
  const r = await c.query({ text: 'SELECT pg_wal_replay_resume(), extract(epoch FROM clock_timestamp())::float8', rowMode: 'array' });
  await s.close('standby');
  const resumeEpochMs = Number(r.rows[0]![1]) * 1000;
  const promoteRequestedMs = Date.now();
  const promote = await pgCtl(s.dir, 'standby', 'promote', { timeoutS: waitSeconds, allowFail: true });
  const clientPromotedMs = Date.now();
  if (promote.code !== 0) throw new WalsimError('timeout', `pg_ctl promote failed: ${(promote.stderr || promote.stdout).trim()}`);

  const logPath = pgLogPath(s.dir, 'standby');
  const since = Math.floor(resumeEpochMs);
  let t: PromotionTimeline = promotionTimeline([], 0);
  await pollUntil(async () => {
    t = promotionTimeline(parsePgLog(fs.readFileSync(logPath, 'utf8')), since);
    return t.readyAt !== null;
  }, '"database system is ready to accept connections" in the standby log', 60_000, 20);
  // The promotion's checkpoint request is logged around the same instant; give it a moment.
  await pollUntil(async () => {
    t = promotionTimeline(parsePgLog(fs.readFileSync(logPath, 'utf8')), since);
    return t.checkpointStartAt !== null;
  }, 'the checkpoint promotion requests', 5_000, 20).catch(() => {});
  const ready = t.readyAt!;
  const diff = (a: number | null, b: number | null) => (a === null || b === null ? null : a - b);
  const noticeFrom = Math.max(promoteRequestedMs, t.endOfWalAt ?? promoteRequestedMs);
  const promoteNoticeMs = diff(t.promoteReceivedAt, noticeFrom);
  const result: Partial<PgResumeResult> = {
    engine: 'postgres',
    failoverMs: ready - resumeEpochMs,
    resumeAt: new Date(resumeEpochMs).toISOString(),
    promotedAt: new Date(ready).toISOString(),
    phases: {
      replayMs: diff(t.redoDoneAt, resumeEpochMs),
      endOfRecoveryMs: diff(t.archiveRecoveryCompleteAt, t.redoDoneAt),
      openForWritesMs: diff(ready, t.archiveRecoveryCompleteAt),
      checkpointMs: null,
    },
    seedMethod: { ms: clientPromotedMs - clientResumeMs, resumeAt: new Date(clientResumeMs).toISOString(), promotedAt: new Date(clientPromotedMs).toISOString() },
    log: t, stall: promoteNoticeMs !== null && promoteNoticeMs > STALL_MS, promoteNoticeMs,
    recordsReplayed: stats.total.count, waldump: stats, newTimeline: t.newTimeline, promoted: true,
  };
  return { ...result, lines: formatPgFailover(result as PgResumeResult, to) };
}

export function formatPgFailover(r: PgResumeResult, endLsn?: string): string[] {
  const sec = (ms: number | null) => (ms === null ? 'n/a' : `${(ms / 1000).toFixed(3)} s`);
  const top = [...r.waldump.rows].sort((a, b) => b.count - a.count).slice(0, 6).map((x) => `${x.rmgr}/${x.type ?? '*'} ${fmtInt(x.count)}`);
  return [
    `resume:   ${r.resumeAt}  (clock_timestamp() after pg_wal_replay_resume())`,
    `promoted: ${r.promotedAt}  ("database system is ready to accept connections", timeline ${r.newTimeline ?? '?'})`,
    `failover: ${sec(r.failoverMs)}  = replay ${sec(r.phases.replayMs)} + end of recovery ${sec(r.phases.endOfRecoveryMs)} + open for writes ${sec(r.phases.openForWritesMs)}` +
      (r.log.checkpointStartAt !== null ? `  (checkpoint requested ${sec(r.log.checkpointStartAt - Date.parse(r.resumeAt))} after resume)` : ''),
    `seed's method (pg_ctl promote -w, 100 ms polling): ${sec(r.seedMethod.ms)}` + (r.stall ? `  STALL: the promote request waited ${sec(r.promoteNoticeMs)} (wal_retrieve_retry_interval)` : ''),
    `replayed: ${fmtInt(r.waldump.total.count)} records, ${fmtInt(r.waldump.total.combinedBytes)} bytes of WAL (${r.waldump.from} → ${endLsn ?? r.waldump.to}; pg_waldump): ${top.join(', ')}`,
  ];
}

async function stepCount(s: PgSession, o: PgStepOptions): Promise<Partial<StepResult>> {
  const st = await requireCreated(s, o.workload, 'standby');
  const counts: number[] = [];
  for (const n of tableNames(o.workload, st.tables)) counts.push(Number(await s.scalar('standby', `SELECT count(*) FROM ${n}`)));
  const total = counts.reduce((a, b) => a + b, 0);
  const nonEmpty = counts.filter((n) => n > 0).length;
  const lines = o.workload === 'rel'
    ? [`rel_t: ${fmtInt(total)} rows on the standby`]
    : [`${fmtInt(total)} rows in ${fmtInt(st.tables)} tables on the standby (${fmtInt(nonEmpty)} non-empty)`];
  return { node: 'standby', tables: st.tables, totalRows: total, nonEmptyTables: nonEmpty, counts, lines };
}

/** Run one step against the PostgreSQL cluster in `o.clusterDir`. */
export async function runPgStep(step: StepName, o: PgStepOptions): Promise<StepResult> {
  readPgEngine(o.clusterDir);
  const s = new PgSession(o.clusterDir);
  const t0 = performance.now();
  try {
    let r: Partial<StepResult>;
    switch (step) {
      case 'create': r = await stepCreate(s, o); break;
      case 'insert': r = await stepInsert(s, o); break;
      case 'delete': r = await stepDelete(s, o); break;
      case 'pause': r = await stepPause(s, o); break;
      case 'vacuum': r = await stepDrop(s, o, 'vacuum'); break;
      case 'truncate': r = await stepDrop(s, o, 'truncate'); break;
      case 'stop': r = await stepStop(s, o); break;
      case 'resume': r = await stepResume(s, o); break;
      case 'count': r = await stepCount(s, o); break;
    }
    return { step, workload: o.workload, engine: 'postgres', elapsedMs: performance.now() - t0, lines: [], ...r };
  } finally {
    await s.close();
  }
}

