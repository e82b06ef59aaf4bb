/**
 * The steps of seed 001's rel.sh (one relation) and test.sh (many one-block relations) against a
 * running walsim cluster: create, insert, delete, pause, vacuum, truncate, stop, resume, count.
 * Used by the `rel`/`multi` CLIs and, in-process, by the sweeps, so both run the same code.
 *
 * Entry points: `runStep(step, options)`, `ClusterSession`, `StepOrderError`, `STEPS`.
 *
 * Order (the seed's procedure): create → insert → [delete] → pause → vacuum|truncate → stop →
 * resume; count any time after create. A step run out of order throws `StepOrderError` naming the
 * step to run first. State lives in the cluster (tables, pause state, which node runs) and in
 * `<cluster dir>/experiment.json` (see state.ts). All statements of a step go over ONE control
 * connection, and each table is vacuumed/truncated in its own statement, so replay sees one
 * transaction — one drop — per table, like test.sh.
 */
import { WalsimError } from '../../common/errors.ts';
import { ControlClient, ControlError } from '../../server/control-client.ts';
import { isWalsimServer, nodeDir, readNodeConfig, readPidFile, readToken, type NodeName } from '../../server/cluster-files.ts';
import { runningPid, sleep, stopNode } from '../../server/pg-ctl.ts';
import { parseLsn } from '../../wal/lsn.ts';
import { withModel, type FailoverReport } from '../../standby/failover-report.ts';
import type { ModeledFailover } from '../../storage/cost-model/model.ts';
import { defaultCostProfile, type CostProfile } from '../../storage/cost-model/profile.ts';
import { DROP_PATHS, type DropPath } from '../../storage/drop.ts';
import { parseRelSize, REL_SIZE_FORMS, rowsForPages } from './rel-size.ts';
import { readWorkloadState, tableNames, writeWorkloadState, type Workload, type WorkloadState } from './state.ts';

export const STEPS = ['create', 'insert', 'delete', 'pause', 'vacuum', 'truncate', 'stop', 'resume', 'count'] as const;
export type StepName = (typeof STEPS)[number];

/** A step run out of order: the message says which step (or command) to run first. */
export class StepOrderError extends Error {
  constructor(message: string, readonly runFirst: string) {
    super(message);
    this.name = 'StepOrderError';
  }
}

export interface StepOptions {
  clusterDir: string;
  workload: Workload;
  /** insert (rel): NB/k, pages or bytes. Default NB/512. */
  size?: string;
  /** create (multi): number of one-block tables. Default 1000. */
  tables?: number;
  /** create: a second, TOAST-able column (`d text`), so each table has a TOAST table and index. */
  toast?: boolean;
  /** resume: how long promotion may take. */
  waitSeconds?: number;
  /** Reuse connections across steps (the sweeps); otherwise one session per step. */
  session?: ClusterSession;
  /** resume: the cost profile of the modeled seconds (default seed-001). */
  profile?: CostProfile;
}

/** The JSON a step prints (`--json`) plus its human-readable lines. */
export interface StepResult {
  step: StepName;
  workload: Workload;
  elapsedMs: number;
  lines: string[];
  [key: string]: unknown;
}

export interface ResumeResult extends StepResult {
  failoverMs: number;
  resumeAt: string;
  promotedAt: string;
  phases: FailoverReport['phases'];
  drop: FailoverReport['drop'];
  recordsReplayed: number;
  newTimeline: number | null;
  promoted: boolean;
  report: FailoverReport;
  /** Modeled PostgreSQL seconds of this failover (storage/cost-model), profile named. */
  model: ModeledFailover;
}

const startHint = (dir: string) => `npm run cluster -- start --dir ${dir}`;

/** Connections to the nodes of one cluster, opened on first use. */
export class ClusterSession {
  private readonly clients = new Map<NodeName, ControlClient>();
  constructor(readonly clusterDir: string) {}

  isRunning(name: NodeName): boolean {
    try {
      readNodeConfig(this.clusterDir, name);
    } catch {
      return false;
    }
    return runningPid(this.clusterDir, name) !== null;
  }

  async client(name: NodeName, runFirst: string): Promise<ControlClient> {
    const open = this.clients.get(name);
    if (open) return open;
    let config;
    try {
      config = readNodeConfig(this.clusterDir, name);
    } catch {
      throw new StepOrderError(`no walsim cluster at ${this.clusterDir}; run "${startHint(this.clusterDir)}" first`, 'cluster start');
    }
    const dataDir = nodeDir(this.clusterDir, name);
    const pid = readPidFile(dataDir);
    if (pid === null || !isWalsimServer(pid.pid, dataDir)) {
      throw new StepOrderError(`the ${name} of the cluster at ${this.clusterDir} is not running; ${runFirst}`, runFirst);
    }
    const host = config.listen === '0.0.0.0' ? '127.0.0.1' : config.listen;
    const c = await ControlClient.connect(host, pid.port, readToken(this.clusterDir));
    this.clients.set(name, c);
    return c;
  }

  primary(): Promise<ControlClient> {
    return this.client('primary', `run "${startHint(this.clusterDir)}" first (a stopped primary means this experiment already ran its stop step; start a fresh cluster)`);
  }

  standby(): Promise<ControlClient> {
    return this.client('standby', `run "${startHint(this.clusterDir)}" first`);
  }

  forget(name: NodeName): void {
    this.clients.get(name)?.close();
    this.clients.delete(name);
  }

  close(): void {
    for (const c of this.clients.values()) c.close();
    this.clients.clear();
  }
}

function orderError(workload: Workload, step: StepName | string, why: string): StepOrderError {
  return new StepOrderError(`${why}; run "npm run ${workload} -- ${step}" first`, step);
}

async function scalar(c: ControlClient, sql: string): Promise<unknown> {
  const r = await c.sql(sql);
  return r.rows[0]?.[r.columns[0]!];
}

async function tableExists(c: ControlClient, name: string): Promise<boolean> {
  try {
    await c.sql(`SELECT count(*) FROM ${name}`);
    return true;
  } catch (e) {
    if (e instanceof ControlError && e.code === '42P01') return false;
    throw e;
  }
}

/** The workload's state, checked against the cluster: its first and last tables must exist. */
async function requireCreated(s: ClusterSession, workload: Workload, node: 'primary' | 'standby'): Promise<WorkloadState> {
  const st = readWorkloadState(s.clusterDir, workload);
  if (st === null) throw orderError(workload, 'create', `no ${workload} tables in the cluster at ${s.clusterDir}`);
  const c = node === 'primary' ? await s.primary() : await s.standby();
  const names = tableNames(workload, st.tables);
  for (const n of new Set([names[0]!, names[names.length - 1]!])) {
    if (!(await tableExists(c, n))) throw orderError(workload, 'create', `table ${n} does not exist on the ${node}`);
  }
  return st;
}

async function standbyNBuffers(s: ClusterSession): Promise<number> {
  const st = await (await s.standby()).status();
  return Number(st.nBuffers);
}

/** Wait until the standby has received (mode 'flush') or replayed everything the primary flushed. */
async function waitForStandby(s: ClusterSession, mode: 'flush' | 'replay', timeoutMs = 600_000): Promise<void> {
  const target = parseLsn(String((await (await s.primary()).status()).flushLsn));
  const standby = await s.standby();
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const st = await standby.status();
    if (st.role !== 'standby') throw new WalsimError('invalid_input', 'the standby is not in recovery');
    const at = parseLsn(mode === 'replay' ? st.replayLsn : st.receiveLsn);
    if (at >= target && (mode === 'flush' || st.caughtUp === true)) return;
    if (st.replayError) throw new WalsimError('invalid_wal', `standby replay stopped: ${JSON.stringify(st.replayError)}`);
    if (Date.now() > deadline) throw new WalsimError('timeout', `standby did not reach the primary's flush LSN (${mode}) within ${timeoutMs / 1000} s`);
    await sleep(mode === 'replay' ? 20 : 5);
  }
}

async function pauseState(s: ClusterSession): Promise<string> {
  return String(await scalar(await s.standby(), 'SELECT pg_get_wal_replay_pause_state()'));
}

async function inRecovery(s: ClusterSession): Promise<boolean> {
  return (await scalar(await s.standby(), 'SELECT pg_is_in_recovery()')) === true;
}

/** Statements in flight on the one connection: the server runs writes one at a time, in order. */
const PIPELINE_DEPTH = 32;

/**
 * Run each statement, in order, as its own transaction over one connection. Up to PIPELINE_DEPTH
 * are sent ahead (the server's write lock is FIFO, so they still execute one after another in
 * this order); the first failure stops sending and is thrown. Returns how many ran.
 */
async function runEach(c: ControlClient, statements: string[]): Promise<number> {
  const inFlight: Array<Promise<unknown>> = [];
  let done = 0;
  for (const sql of statements) {
    if (inFlight.length >= PIPELINE_DEPTH) {
      await inFlight.shift();
      done++;
    }
    const p = c.sql(sql);
    p.catch(() => {}); // observed when awaited below; avoids an unhandled rejection meanwhile
    inFlight.push(p);
  }
  for (const p of inFlight) {
    await p;
    done++;
  }
  return done;
}

const fmtInt = (n: number) => n.toLocaleString('en-US');

// ------------------------------------------------------------------------------------- steps

async function stepCreate(s: ClusterSession, o: StepOptions): Promise<Partial<StepResult>> {
  const tables = o.workload === 'rel' ? 1 : (o.tables ?? 1000);
  if (!Number.isSafeInteger(tables) || tables < 1 || tables > 100_000) {
    throw new WalsimError('invalid_input', `--tables must be an integer from 1 to 100000, got ${o.tables}`);
  }
  const c = await s.primary();
  const names = tableNames(o.workload, tables);
  if (readWorkloadState(s.clusterDir, o.workload) !== null && (await tableExists(c, names[0]!))) {
    throw new StepOrderError(
      `the ${o.workload} tables already exist in ${s.clusterDir}; the next step is "npm run ${o.workload} -- insert" ` +
        `(to start over, stop this cluster and start a fresh one with another --dir)`,
      'insert',
    );
  }
  await runEach(c, names.map((n) => `CREATE TABLE ${n} (${o.toast ? 'c int, d text' : 'c int'})`));
  writeWorkloadState(s.clusterDir, o.workload, { tables, pagesPerTable: null, sizeSpec: null, rowsPerTable: null, deleted: false, dropStep: null });
  return { tables, toast: o.toast ?? false, lines: [`created ${fmtInt(tables)} table${tables === 1 ? '' : 's'} (${names[0]}${tables > 1 ? ` … ${names[tables - 1]}` : ''})${o.toast ? ', each with a TOAST table' : ''}`] };
}

async function stepInsert(s: ClusterSession, o: StepOptions): Promise<Partial<StepResult>> {
  const st = await requireCreated(s, o.workload, 'primary');
  if (st.pagesPerTable !== null) {
    throw new StepOrderError(`${o.workload} rows are already inserted (${st.sizeSpec ?? st.pagesPerTable + ' pages'}); the next step is "delete" or "pause"`, 'delete');
  }
  const nBuffers = await standbyNBuffers(s);
  let pages: number;
  let spec: string;
  if (o.workload === 'multi') {
    if (o.size !== undefined) throw new WalsimError('invalid_input', 'multi tables are one block each; --size applies to "npm run rel" only');
    pages = 1;
    spec = '1';
  } else {
    const size = parseRelSize(o.size ?? 'NB/512', nBuffers);
    pages = size.pages;
    spec = size.spec;
  }
  const rows = rowsForPages(pages);
  const c = await s.primary();
  await runEach(c, tableNames(o.workload, st.tables).map((n) => `INSERT INTO ${n} SELECT generate_series(1, ${rows})`));
  writeWorkloadState(s.clusterDir, o.workload, { ...st, pagesPerTable: pages, sizeSpec: spec, rowsPerTable: rows });
  return {
    size: spec, pagesPerTable: pages, rowsPerTable: rows, tables: st.tables, nBuffers,
    lines: [`inserted ${fmtInt(rows)} rows (${fmtInt(pages)} page${pages === 1 ? '' : 's'}${spec !== String(pages) ? `, ${spec} of NBuffers ${fmtInt(nBuffers)}` : ''}) into each of ${fmtInt(st.tables)} table${st.tables === 1 ? '' : 's'}`],
  };
}

async function stepDelete(s: ClusterSession, o: StepOptions): Promise<Partial<StepResult>> {
  const st = await requireCreated(s, o.workload, 'primary');
  if (st.pagesPerTable === null) throw orderError(o.workload, 'insert', 'no rows to delete');
  if (st.dropStep !== null) throw orderError(o.workload, 'create', `the tables were already processed by ${st.dropStep}`);
  await runEach(await s.primary(), tableNames(o.workload, st.tables).map((n) => `DELETE FROM ${n}`));
  writeWorkloadState(s.clusterDir, o.workload, { ...st, deleted: true });
  return { tables: st.tables, lines: [`deleted all rows of ${fmtInt(st.tables)} table${st.tables === 1 ? '' : 's'}`] };
}

async function stepPause(s: ClusterSession, o: StepOptions): Promise<Partial<StepResult>> {
  const st = await requireCreated(s, o.workload, 'primary');
  if (st.pagesPerTable === null) throw orderError(o.workload, 'insert', 'the tables are empty (pause comes after insert, and after delete for the VACUUM test)');
  if (!(await inRecovery(s))) throw new StepOrderError('the standby is already promoted; start a fresh cluster', 'cluster start');
  const state = await pauseState(s);
  if (state !== 'not paused') throw new StepOrderError(`replay is already ${state}; the next step is "vacuum" or "truncate"`, 'vacuum');
  // The seed checks the standby saw the DELETE (count = 0) before pausing: replay everything first.
  await waitForStandby(s, 'replay');
  const standby = await s.standby();
  await standby.sql('SELECT pg_wal_replay_pause()');
  const deadline = Date.now() + 60_000;
  while ((await pauseState(s)) !== 'paused') {
    if (Date.now() > deadline) throw new WalsimError('timeout', 'replay did not pause within 60 s');
    await sleep(5);
  }
  const replayLsn = String(await scalar(standby, 'SELECT pg_last_wal_replay_lsn()'));
  return { replayLsn, lines: [`standby replay paused at ${replayLsn}`] };
}

async function stepDrop(s: ClusterSession, o: StepOptions, step: 'vacuum' | 'truncate'): Promise<Partial<StepResult>> {
  const st = await requireCreated(s, o.workload, 'primary');
  if (st.pagesPerTable === null) throw orderError(o.workload, 'insert', 'the tables are empty');
  if (step === 'vacuum' && !st.deleted) throw orderError(o.workload, 'delete', 'VACUUM truncates only empty pages: delete the rows first');
  if (st.dropStep !== null) throw orderError(o.workload, 'stop', `${st.dropStep} already ran; the next step is "stop"`);
  if ((await pauseState(s)) !== 'paused') throw orderError(o.workload, 'pause', "the standby's replay is not paused, so the drops would be replayed now instead of at failover");
  const verb = step === 'vacuum' ? 'VACUUM' : 'TRUNCATE';
  const n = await runEach(await s.primary(), tableNames(o.workload, st.tables).map((t) => `${verb} ${t}`));
  writeWorkloadState(s.clusterDir, o.workload, { ...st, dropStep: step });
  return { statements: n, lines: [`${verb} of ${fmtInt(n)} table${n === 1 ? '' : 's'}, one transaction each (replay paused on the standby)`] };
}

async function stepStop(s: ClusterSession, o: StepOptions): Promise<Partial<StepResult>> {
  const st = readWorkloadState(s.clusterDir, o.workload);
  if (st === null) throw orderError(o.workload, 'create', `no ${o.workload} experiment in ${s.clusterDir}`);
  if (st.dropStep === null) throw new StepOrderError(`nothing to replay at failover yet; run "npm run ${o.workload} -- vacuum" (after delete) or "npm run ${o.workload} -- truncate" first`, 'vacuum');
  if (!s.isRunning('primary')) throw new StepOrderError('the primary is not running (already stopped); the next step is "resume"', 'resume');
  // The seed stops the primary after the statements finished: make sure the standby has the WAL.
  await waitForStandby(s, 'flush');
  s.forget('primary');
  await stopNode(s.clusterDir, 'primary', 'immediate');
  return { mode: 'immediate', lines: ['primary stopped (immediate, like pg_ctl stop -m immediate)'] };
}

async function stepResume(s: ClusterSession, o: StepOptions): Promise<Partial<ResumeResult>> {
  const standby = await s.standby();
  if (!(await inRecovery(s))) throw new StepOrderError('the standby is already promoted; start a fresh cluster for another run', 'cluster start');
  if (s.isRunning('primary')) throw orderError(o.workload, 'stop', 'the primary is still running');
  const state = await pauseState(s);
  if (state === 'not paused') throw orderError(o.workload, 'pause', 'replay is not paused, so there is nothing held back to measure');
  const waitSeconds = o.waitSeconds ?? 3600;
  // The seed's rel.sh resume: resume replay, then promote at once; the server times both.
  await standby.sql('SELECT pg_wal_replay_resume()');
  const reply = (await standby.request({ op: 'promote', wait: true, waitSeconds })) as { promoted: boolean; failover: FailoverReport | null };
  const served = reply.failover;
  if (served === null || served.failoverMs === null || served.resumeAt === null || served.promotedAt === null) {
    throw new WalsimError('timeout', `promotion did not finish within ${waitSeconds} s: ${JSON.stringify(served)}`);
  }
  // The server models with the default profile; --profile re-prices the same counts.
  const r = withModel(served, o.profile ?? defaultCostProfile());
  return {
    failoverMs: served.failoverMs, resumeAt: served.resumeAt, promotedAt: served.promotedAt, phases: r.phases, drop: r.drop,
    recordsReplayed: r.recordsReplayed, newTimeline: r.newTimeline, promoted: reply.promoted, report: r, model: r.model!,
    lines: formatFailover(r),
  };
}

/** `full-scan 1, cached-lookup 0` plus the list paths when they ran. */
function dropPathsText(drops: Record<DropPath, number>): string {
  return DROP_PATHS.filter((p) => p === 'full-scan' || p === 'cached-lookup' || drops[p] > 0).map((p) => `${p} ${fmtInt(drops[p])}`).join(', ');
}

/** The resume step's human output: the seed's two timestamps, their difference, and why. */
export function formatFailover(r: FailoverReport): string[] {
  const ms = (v: number | null) => (v === null ? 'n/a' : `${(v / 1000).toFixed(3)} s`);
  const d = r.drop;
  return [
    `resume:   ${r.resumeAt}  (SELECT pg_wal_replay_resume())`,
    `promoted: ${r.promotedAt}  (read-write, timeline ${r.newTimeline ?? '?'})`,
    `failover: ${ms(r.failoverMs)}  = replay ${ms(r.phases.replayMs)} + end of recovery ${ms(r.phases.endOfRecoveryMs)} + open for writes ${ms(r.phases.openForWritesMs)}` +
      (r.phases.checkpointMs !== null ? `  (then checkpoint ${ms(r.phases.checkpointMs)})` : ''),
    `replayed: ${fmtInt(r.recordsReplayed)} records; drops: ${dropPathsText(d.drops)}; ` +
      `${fmtInt(d.scanned)} descriptors scanned, ${fmtInt(d.probes)} probes, ` +
      (d.listSteps > 0 ? `${fmtInt(d.listSteps)} list steps, ` : '') + `${fmtInt(d.invalidated)} buffers invalidated, ` +
      `${(d.ms / 1000).toFixed(3)} s inside drops`,
    ...(r.model === null ? [] : [formatModel(r.model)]),
  ];
}

/** One line: the modeled PostgreSQL seconds of a failover and their phases. */
export function formatModel(m: ModeledFailover): string {
  const s = (v: number) => `${v.toFixed(3)} s`;
  return `modeled:  ${s(m.failoverS)} PostgreSQL (profile ${m.profile})  = replay ${s(m.phases.replayS)} + end of recovery ${s(m.phases.endOfRecoveryS)} + open for writes ${s(m.phases.openForWritesS)}` +
    (m.polledS === null ? '' : `; ${s(m.polledS)} as the profile's promotion poll would read it`);
}

async function stepCount(s: ClusterSession, o: StepOptions): Promise<Partial<StepResult>> {
  const st = await requireCreated(s, o.workload, 'standby');
  const c = await s.standby();
  const counts: number[] = [];
  for (const n of tableNames(o.workload, st.tables)) counts.push(Number(await scalar(c, `SELECT count(*) FROM ${n}`)));
  const total = counts.reduce((a, b) => a + b, 0);
  const nonEmpty = counts.filter((n) => n > 0).length;
  const lines = o.workload === 'rel'
    ? [`rel_t: ${fmtInt(total)} rows on the standby`]
    : [`${fmtInt(total)} rows in ${fmtInt(st.tables)} tables on the standby (${fmtInt(nonEmpty)} non-empty)`];
  return { node: 'standby', tables: st.tables, totalRows: total, nonEmptyTables: nonEmpty, counts, lines };
}

/** Run one step; the session (if not given) is opened and closed here. */
export async function runStep(step: StepName, o: StepOptions): Promise<StepResult> {
  const s = o.session ?? new ClusterSession(o.clusterDir);
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
    return { step, workload: o.workload, elapsedMs: performance.now() - t0, lines: [], ...r };
  } finally {
    if (o.session === undefined) s.close();
  }
}

export { REL_SIZE_FORMS };
