/**
 * The steps of seed 001's rel.sh (one relation) and test.sh (many one-block relations), once, for
 * every engine: create, insert, delete, pause, vacuum, truncate, stop, resume, count. Statements go
 * through the `pg` client (node-postgres) to the engine's connection strings — a walsim node's
 * PostgreSQL port or a real PostgreSQL server — and the engine (engine.ts) only creates, starts,
 * stops and promotes nodes and observes the failover its own way. Used by the `rel`/`multi` CLIs
 * and, in-process, by the sweeps and calibrate, so all of them run this code.
 *
 * Entry points: `runStep(step, options)`, `StepSession`, `openEngine`, `waitForStandby`,
 * `StepOrderError`, `STEPS`.
 *
 * Order (the seed's procedure): create → insert → [delete] → pause → vacuum|truncate → stop →
 * resume; count any time after create. A step run out of order throws `StepOrderError` naming the
 * step to run first. State lives in the cluster (tables, pause state, which node runs) and in
 * `<cluster dir>/experiment.json` (see state.ts). All statements of a step on a node go over ONE
 * connection, each in its own transaction (simple-protocol queries, pipelined up to
 * PIPELINE_DEPTH), and each table is vacuumed/truncated in its own statement, so replay sees one
 * transaction — one drop — per table, like test.sh's one psql call per table.
 */
import { WalsimError } from '../../common/errors.ts';
import { parseSharedBuffers } from '../../storage/shared-buffers.ts';
import { pollUntil, StopPolling } from '../../server/poll.ts';
import type { CostProfile } from '../../cost-model/profile.ts';
import { parseLsn } from '../../wal/lsn.ts';
import type { Engine, ExperimentNode, Workload } from '../engines/engine.ts';
import { parseRelSize, REL_SIZE_FORMS, rowsForPages } from './rel-size.ts';
import { readWorkloadState, tableNames, writeWorkloadState, type WorkloadState } from './state.ts';
import { WalsimEngine } from '../engines/walsim-engine.ts';
import {
  StepOrderError,
  StepSession,
  type AnyEngine,
  type AnyFailover,
} from '../engines/step-session.ts';
import { isPgCluster } from '../postgres/pg-cluster.ts';
import { PgEngine } from '../engines/pg-engine.ts';

export const STEPS = [
  'create',
  'insert',
  'delete',
  'pause',
  'vacuum',
  'truncate',
  'stop',
  'resume',
  'count',
] as const;
export type StepName = (typeof STEPS)[number];

/** The engine of the cluster in `dir`: the directory says which (postgres/pg-cluster.ts writes engine.json). */
export function openEngine(dir: string): AnyEngine {
  return isPgCluster(dir) ? new PgEngine(dir) : new WalsimEngine(dir);
}

export interface StepOptions {
  clusterDir: string;
  workload: Workload;
  /** The cluster's engine (default: `openEngine(clusterDir)`). */
  engine?: AnyEngine;
  /** insert (rel): NB/k, pages or bytes. Default NB/512. */
  size?: string;
  /** create (multi): number of one-block tables. Default 1000. */
  tables?: number;
  /** create: a second, TOAST-able column (`d text`), so each table has a TOAST table and index. */
  toast?: boolean;
  /** resume: how long promotion may take. */
  waitSeconds?: number;
  /** Reuse connections across steps (the sweeps); otherwise one session per step. */
  session?: StepSession;
  /** resume (walsim): the cost profile of the modeled seconds, chosen by the caller (required there). */
  profile?: CostProfile;
}

/** The JSON a step prints (`--json`) plus its human-readable lines. */
export interface StepResult {
  step: StepName;
  workload: Workload;
  engine: Engine['name'];
  elapsedMs: number;
  lines: string[];
  [key: string]: unknown;
}

/** The resume step's result: the engine's failover account (walsim's or PostgreSQL's). */
export type ResumeResult = StepResult & AnyFailover;

function orderError(s: StepSession, workload: Workload, step: string, why: string): StepOrderError {
  return new StepOrderError(
    `${why}; run "npm run ${workload} -- ${step}${s.engine.stepFlag}" first`,
    step,
  );
}

/** 42P01: the relation does not exist. */
function isUndefinedTable(e: unknown): boolean {
  return (e as { code?: unknown }).code === '42P01';
}

/** pg_relation_size(table) in pages, or null when the table does not exist on `node`. */
async function relationPages(
  s: StepSession,
  node: ExperimentNode,
  table: string,
): Promise<number | null> {
  try {
    return Number(await s.scalar(node, `SELECT pg_relation_size('${table}')`)) / 8192;
  } catch (e) {
    if (isUndefinedTable(e)) return null;
    throw e;
  }
}

/** The workload's state, checked against the cluster: its first and last tables must exist. */
async function requireCreated(
  s: StepSession,
  workload: Workload,
  node: ExperimentNode,
): Promise<WorkloadState> {
  const st = readWorkloadState(s.clusterDir, workload);
  if (st === null)
    throw orderError(
      s,
      workload,
      'create',
      `no ${workload} tables in the cluster at ${s.clusterDir}`,
    );
  const names = tableNames(workload, st.tables);
  for (const n of new Set([names[0]!, names[names.length - 1]!])) {
    if ((await relationPages(s, node, n)) === null)
      throw orderError(s, workload, 'create', `table ${n} does not exist on the ${node}`);
  }
  return st;
}

const pauseState = (s: StepSession) => s.scalar('standby', s.engine.pauseStateSql).then(String);
const inRecovery = (s: StepSession) =>
  s.scalar('standby', 'SELECT pg_is_in_recovery()').then((v) => v === true);
const lsnOf = async (s: StepSession, node: ExperimentNode, fn: string) =>
  String(await s.scalar(node, `SELECT ${fn}()`));

/**
 * Wait until the standby has flushed (`pg_last_wal_receive_lsn()`) or replayed
 * (`pg_last_wal_replay_lsn()`) everything the primary flushed; returns that LSN.
 */
export async function waitForStandby(
  s: StepSession,
  mode: 'flush' | 'replay',
  timeoutMs = 600_000,
): Promise<string> {
  const target = await lsnOf(s, 'primary', 'pg_current_wal_flush_lsn');
  const fn = mode === 'replay' ? 'pg_last_wal_replay_lsn' : 'pg_last_wal_receive_lsn';
  let polls = 0;
  await pollUntil(
    async () => {
      // A walsim standby whose replay stopped on a redo error stays up: fail at once, not at the timeout.
      if (mode === 'replay' && polls++ % 50 === 0) {
        const failure = await s.engine.replayFailure('standby');
        if (failure !== null) throw new StopPolling(`standby replay stopped: ${failure}`);
      }
      return parseLsn(await lsnOf(s, 'standby', fn)) >= parseLsn(target);
    },
    `the standby's ${mode === 'replay' ? 'replay' : 'flush'} LSN to reach the primary's flush LSN ${target}`,
    timeoutMs,
    mode === 'replay' ? 20 : 5,
  ).catch((e: unknown) => {
    if (e instanceof StopPolling) throw new WalsimError('invalid_wal', e.message);
    throw new WalsimError('timeout', (e as Error).message);
  });
  return target;
}

const fmtInt = (n: number) => n.toLocaleString('en-US');

// ------------------------------------------------------------------------------------- steps

async function stepCreate(s: StepSession, o: StepOptions): Promise<Partial<StepResult>> {
  const tables = o.workload === 'rel' ? 1 : (o.tables ?? 1000);
  if (!Number.isSafeInteger(tables) || tables < 1 || tables > 100_000) {
    throw new WalsimError(
      'invalid_input',
      `--tables must be an integer from 1 to 100000, got ${o.tables}`,
    );
  }
  const names = tableNames(o.workload, tables);
  if (
    readWorkloadState(s.clusterDir, o.workload) !== null &&
    (await relationPages(s, 'primary', names[0]!)) !== null
  ) {
    throw new StepOrderError(
      `the ${o.workload} tables already exist in ${s.clusterDir}; the next step is "npm run ${o.workload} -- insert${s.engine.stepFlag}" ` +
        `(to start over, stop this cluster and start a fresh one with another --dir)`,
      'insert',
    );
  }
  await s.runEach(
    'primary',
    names.map((n) => `CREATE TABLE ${n} (${o.toast ? 'c int, d text' : 'c int'})`),
  );
  writeWorkloadState(s.clusterDir, o.workload, {
    tables,
    pagesPerTable: null,
    sizeSpec: null,
    rowsPerTable: null,
    deleted: false,
    dropStep: null,
    pauseLsn: null,
    endLsn: null,
  });
  return {
    tables,
    toast: o.toast ?? false,
    lines: [
      `created ${fmtInt(tables)} table${tables === 1 ? '' : 's'} (${names[0]}${tables > 1 ? ` … ${names[tables - 1]}` : ''})${o.toast ? ', each with a TOAST table' : ''}`,
    ],
  };
}

async function stepInsert(s: StepSession, o: StepOptions): Promise<Partial<StepResult>> {
  const st = await requireCreated(s, o.workload, 'primary');
  if (st.pagesPerTable !== null) {
    throw new StepOrderError(
      `${o.workload} rows are already inserted (${st.sizeSpec ?? st.pagesPerTable + ' pages'}); the next step is "delete" or "pause"`,
      'delete',
    );
  }
  // The standby's pool is the one measured: its NBuffers sizes NB/k.
  const nBuffers = parseSharedBuffers(
    String(await s.scalar('standby', "SELECT current_setting('shared_buffers')")),
  ).nBuffers;
  await s.close('standby');
  let pages: number;
  let spec: string;
  if (o.workload === 'multi') {
    if (o.size !== undefined)
      throw new WalsimError(
        'invalid_input',
        'multi tables are one block each; --size applies to "npm run rel" only',
      );
    pages = 1;
    spec = '1';
  } else {
    const size = parseRelSize(o.size ?? 'NB/512', nBuffers);
    pages = size.pages;
    spec = size.spec;
  }
  const rows = rowsForPages(pages);
  const names = tableNames(o.workload, st.tables);
  await s.runEach(
    'primary',
    names.map((n) => `INSERT INTO ${n} SELECT generate_series(1, ${rows})`),
  );
  // The server's own page count, which checks the rows-per-page arithmetic.
  const realPages = (await relationPages(s, 'primary', names[0]!))!;
  writeWorkloadState(s.clusterDir, o.workload, {
    ...st,
    pagesPerTable: realPages,
    sizeSpec: spec,
    rowsPerTable: rows,
  });
  return {
    size: spec,
    pagesPerTable: realPages,
    rowsPerTable: rows,
    tables: st.tables,
    nBuffers,
    lines: [
      `inserted ${fmtInt(rows)} rows (${fmtInt(realPages)} page${realPages === 1 ? '' : 's'}${spec !== String(pages) ? `, ${spec} of NBuffers ${fmtInt(nBuffers)}` : ''}) into each of ${fmtInt(st.tables)} table${st.tables === 1 ? '' : 's'}`,
    ],
  };
}

async function stepDelete(s: StepSession, o: StepOptions): Promise<Partial<StepResult>> {
  const st = await requireCreated(s, o.workload, 'primary');
  if (st.pagesPerTable === null) throw orderError(s, o.workload, 'insert', 'no rows to delete');
  if (st.dropStep !== null)
    throw orderError(
      s,
      o.workload,
      'create',
      `the tables were already processed by ${st.dropStep}`,
    );
  await s.runEach(
    'primary',
    tableNames(o.workload, st.tables).map((n) => `DELETE FROM ${n}`),
  );
  writeWorkloadState(s.clusterDir, o.workload, { ...st, deleted: true });
  return {
    tables: st.tables,
    lines: [`deleted all rows of ${fmtInt(st.tables)} table${st.tables === 1 ? '' : 's'}`],
  };
}

async function stepPause(s: StepSession, o: StepOptions): Promise<Partial<StepResult>> {
  const st = await requireCreated(s, o.workload, 'primary');
  if (st.pagesPerTable === null)
    throw orderError(
      s,
      o.workload,
      'insert',
      'the tables are empty (pause comes after insert, and after delete for the VACUUM test)',
    );
  if (!(await inRecovery(s)))
    throw new StepOrderError(
      'the standby is already promoted; start a fresh cluster',
      'cluster start',
    );
  const state = await pauseState(s);
  if (state !== 'not paused')
    throw new StepOrderError(
      `replay is already ${state}; the next step is "vacuum" or "truncate"`,
      'vacuum',
    );
  // The seed checks the standby saw the DELETE (count = 0) before pausing: replay everything first.
  await waitForStandby(s, 'replay');
  await s.scalar('standby', 'SELECT pg_wal_replay_pause()');
  await pollUntil(
    async () => (await pauseState(s)) === 'paused',
    'replay to pause',
    60_000,
    5,
  ).catch((e: unknown) => {
    throw new WalsimError('timeout', (e as Error).message);
  });
  const replayLsn = await lsnOf(s, 'standby', 'pg_last_wal_replay_lsn');
  writeWorkloadState(s.clusterDir, o.workload, { ...st, pauseLsn: replayLsn });
  return { replayLsn, lines: [`standby replay paused at ${replayLsn}`] };
}

async function stepDrop(
  s: StepSession,
  o: StepOptions,
  step: 'vacuum' | 'truncate',
): Promise<Partial<StepResult>> {
  const st = await requireCreated(s, o.workload, 'primary');
  if (st.pagesPerTable === null) throw orderError(s, o.workload, 'insert', 'the tables are empty');
  if (step === 'vacuum' && !st.deleted)
    throw orderError(
      s,
      o.workload,
      'delete',
      'VACUUM truncates only empty pages: delete the rows first',
    );
  if (st.dropStep !== null)
    throw orderError(s, o.workload, 'stop', `${st.dropStep} already ran; the next step is "stop"`);
  if ((await pauseState(s)) !== 'paused')
    throw orderError(
      s,
      o.workload,
      'pause',
      "the standby's replay is not paused, so the drops would be replayed now instead of at failover",
    );
  await s.close('standby');
  const verb = step === 'vacuum' ? 'VACUUM' : 'TRUNCATE';
  const n = (
    await s.runEach(
      'primary',
      tableNames(o.workload, st.tables).map((t) => `${verb} ${t}`),
    )
  ).length;
  writeWorkloadState(s.clusterDir, o.workload, { ...st, dropStep: step });
  return {
    statements: n,
    lines: [
      `${verb} of ${fmtInt(n)} table${n === 1 ? '' : 's'}, one transaction each (replay paused on the standby)`,
    ],
  };
}

async function stepStop(s: StepSession, o: StepOptions): Promise<Partial<StepResult>> {
  const st = readWorkloadState(s.clusterDir, o.workload);
  if (st === null)
    throw orderError(s, o.workload, 'create', `no ${o.workload} experiment in ${s.clusterDir}`);
  if (st.dropStep === null) {
    throw new StepOrderError(
      `nothing to replay at failover yet; run "npm run ${o.workload} -- vacuum${s.engine.stepFlag}" (after delete) or "npm run ${o.workload} -- truncate${s.engine.stepFlag}" first`,
      'vacuum',
    );
  }
  if (!(await s.engine.isRunning('primary')))
    throw new StepOrderError(
      'the primary is not running (already stopped); the next step is "resume"',
      'resume',
    );
  // The seed stops the primary after the statements finished: make sure the standby has the WAL.
  const endLsn = await waitForStandby(s, 'flush');
  await s.close();
  await s.engine.stop('primary', 'immediate');
  writeWorkloadState(s.clusterDir, o.workload, { ...st, endLsn });
  return {
    mode: 'immediate',
    endLsn,
    lines: ['primary stopped (immediate, like pg_ctl stop -m immediate)'],
  };
}

async function stepResume(s: StepSession, o: StepOptions): Promise<AnyFailover> {
  if (!(await inRecovery(s)))
    throw new StepOrderError(
      'the standby is already promoted; start a fresh cluster for another run',
      'cluster start',
    );
  if (await s.engine.isRunning('primary'))
    throw orderError(s, o.workload, 'stop', 'the primary is still running');
  if ((await pauseState(s)) === 'not paused')
    throw orderError(
      s,
      o.workload,
      'pause',
      'replay is not paused, so there is nothing held back to measure',
    );
  const st = readWorkloadState(s.clusterDir, o.workload);
  const receivedLsn = await lsnOf(s, 'standby', 'pg_last_wal_receive_lsn');
  await s.close('standby');
  const waitSeconds = o.waitSeconds ?? 3600;
  const observer = await s.engine.prepareFailover({
    workload: o.workload,
    pauseLsn: st?.pauseLsn ?? null,
    endLsn: st?.endLsn ?? null,
    receivedLsn,
    waitSeconds,
    profile: o.profile,
  });
  // The timed window (the seed's rel.sh resume): resume replay, then promote at once. No session of
  // ours stays on the standby meanwhile.
  const c = await s.client('standby');
  const clientResumeMs = Date.now();
  const row = (await c.query({ text: s.engine.resumeSql, rowMode: 'array' })).rows[0] ?? [];
  await s.close('standby');
  const promoteRequestedMs = Date.now();
  await s.engine.promote('standby', waitSeconds);
  const clientPromotedMs = Date.now();
  const serverResumeMs = row.length > 1 ? Number(row[1]) * 1000 : null;
  return observer.finish({ clientResumeMs, serverResumeMs, promoteRequestedMs, clientPromotedMs });
}

async function stepCount(s: StepSession, o: StepOptions): Promise<Partial<StepResult>> {
  const st = await requireCreated(s, o.workload, 'standby');
  // What the standby shows once it has replayed what the primary flushed. A commit acknowledged at
  // remote_write (the seed's level) is written on the standby, not yet replayed: counting at once
  // could miss it. Not while replay is paused (the count then shows the paused state on purpose),
  // nor once the primary is stopped or the standby promoted.
  if (
    (await s.engine.isRunning('primary')) &&
    (await inRecovery(s)) &&
    (await pauseState(s)) === 'not paused'
  ) {
    await waitForStandby(s, 'replay');
  }
  const counts = (
    await s.runEach(
      'standby',
      tableNames(o.workload, st.tables).map((n) => `SELECT count(*) FROM ${n}`),
    )
  ).map(Number);
  const total = counts.reduce((a, b) => a + b, 0);
  const nonEmpty = counts.filter((n) => n > 0).length;
  const lines =
    o.workload === 'rel'
      ? [`rel_t: ${fmtInt(total)} rows on the standby`]
      : [
          `${fmtInt(total)} rows in ${fmtInt(st.tables)} tables on the standby (${fmtInt(nonEmpty)} non-empty)`,
        ];
  return {
    node: 'standby',
    tables: st.tables,
    totalRows: total,
    nonEmptyTables: nonEmpty,
    counts,
    lines,
  };
}

/** Run one step; the session (if not given) is opened and closed here. */
export async function runStep(step: StepName, o: StepOptions): Promise<StepResult> {
  const s = o.session ?? new StepSession(o.engine ?? openEngine(o.clusterDir));
  const t0 = performance.now();
  try {
    let r: Partial<StepResult> | AnyFailover;
    switch (step) {
      case 'create':
        r = await stepCreate(s, o);
        break;
      case 'insert':
        r = await stepInsert(s, o);
        break;
      case 'delete':
        r = await stepDelete(s, o);
        break;
      case 'pause':
        r = await stepPause(s, o);
        break;
      case 'vacuum':
        r = await stepDrop(s, o, 'vacuum');
        break;
      case 'truncate':
        r = await stepDrop(s, o, 'truncate');
        break;
      case 'stop':
        r = await stepStop(s, o);
        break;
      case 'resume':
        r = await stepResume(s, o);
        break;
      case 'count':
        r = await stepCount(s, o);
        break;
    }
    return {
      step,
      workload: o.workload,
      engine: s.engine.name,
      elapsedMs: performance.now() - t0,
      lines: [],
      ...r,
    };
  } finally {
    if (o.session === undefined) {
      await s.close();
      await s.engine.close();
    }
  }
}

export { REL_SIZE_FORMS };
export { StepOrderError, StepSession, type AnyEngine, type AnyFailover };
