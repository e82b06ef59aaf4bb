/**
 * `--verify`: after predicting, resume and promote the standby and time the promotion from
 * PostgreSQL's own clocks the way `--engine postgres` does (postgres/pg-log.ts): the resume
 * instant is `clock_timestamp()` evaluated after `pg_wal_replay_resume()` in the same statement,
 * the phases come from the standby's log ("redo done at", "archive recovery complete", "database
 * system is ready to accept connections"). Each run is appended to a local JSON-lines log that
 * `--accuracy` summarises.
 *
 * Entry points: `verifyPromotion`, `checkVerifiable`, `proveLogIsServers`, `verifyReport`, `appendAccuracy`, `readAccuracy`,
 * `formatAccuracy`, `DEFAULT_ACCURACY_LOG`, `VerifyResult`, `AccuracyEntry`.
 */
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import pg from 'pg';
import { WalsimError } from '../../common/errors.ts';
import { pollUntil } from '../../server/poll.ts';
import { parsePgLog, promotionTimeline, type PromotionTimeline } from '../postgres/pg-log.ts';
import { STALL_MS } from '../engines/pg-engine.ts';
import { markdownTable } from '../report/tables.ts';
import type { Prediction } from './prediction.ts';
import { serverConfig } from './standby-state.ts';
import { interrupted } from '../cli/interrupt.ts';
import { redactValue } from '../postgres/conninfo.ts';

export const DEFAULT_ACCURACY_LOG = path.join('.walsim', 'predict-accuracy.jsonl');

export interface MeasuredPhases {
  writableS: number;
  replayS: number | null;
  endOfRecoveryS: number | null;
  openForWritesS: number | null;
}

export interface VerifyResult {
  resumeAt: string;
  readyAt: string;
  newTimeline: number | null;
  measured: MeasuredPhases;
  /** The promote request waited for wal_retrieve_retry_interval: the measurement is not the model's. */
  stall: boolean;
  log: PromotionTimeline;
  logFile: string;
}

/** The log file --verify reads, after checking its lines can be parsed; throws what to do. */
export function checkVerifiable(p: Prediction, logOption: string | undefined): string {
  const st = p.state;
  let file = logOption;
  if (file === undefined && st.currentLogfile !== null)
    file = path.isAbsolute(st.currentLogfile)
      ? st.currentLogfile
      : path.join(st.dataDirectory, st.currentLogfile);
  if (file === undefined)
    throw new WalsimError(
      'invalid_input',
      `--verify times the promotion from ${st.url}'s own log: pass --log FILE (the file pg_ctl -l writes), or enable logging_collector`,
    );
  try {
    fs.accessSync(file, fs.constants.R_OK);
  } catch (e) {
    throw new WalsimError(
      'invalid_input',
      `--log ${file} cannot be read (${(e as NodeJS.ErrnoException).code}): pass the standby's server log`,
    );
  }
  if (!st.logLinePrefix.startsWith('%m [%p] ') || !/^(Etc\/)?UTC$/.test(st.logTimezone))
    throw new WalsimError(
      'invalid_input',
      `--verify reads log lines stamped by log_line_prefix = '%m [%p] ' in log_timezone = 'UTC'; ${st.url} has '${st.logLinePrefix}' in '${st.logTimezone}' (ALTER SYSTEM SET both, then SELECT pg_reload_conf())`,
    );
  return file;
}

/**
 * Prove `logFile` is this server's log before anything is sent: a session of the standby runs a
 * statement that fails with a fresh nonce (`SELECT '<nonce>'::int`: an ERROR, logged at the
 * default log_min_messages; nothing is written), and the log must show that nonce on a line of
 * the session's own pid (`[%p]` of log_line_prefix) within a few seconds. Another server's log, a
 * stale copy or a log the server no longer writes is refused, naming what was found. With
 * logging_collector on, the file the server names (pg_current_logfile()) must be this one too.
 */
export async function proveLogIsServers(
  url: string,
  p: Prediction,
  logFile: string,
): Promise<void> {
  const st = p.state;
  if (st.currentLogfile !== null) {
    const own = path.resolve(st.dataDirectory, st.currentLogfile);
    if (realpathOr(own) !== realpathOr(logFile))
      throw new WalsimError(
        'invalid_input',
        `--log ${logFile} is not ${st.url}'s log: the server writes ${own} (pg_current_logfile()); nothing was sent to the standby`,
      );
  }
  const offset = fs.statSync(logFile).size;
  const nonce = `walsim-predict-log-check-${process.pid}-${Date.now()}-${Math.random().toString(36).slice(2)}`;
  const c = new pg.Client(serverConfig(url, '--standby', 'walsim-predict-verify'));
  c.on('error', () => {});
  let pid: number;
  try {
    await c.connect();
    pid = Number((await c.query('SELECT pg_backend_pid() AS pid')).rows[0].pid);
    await c.query(`SELECT '${nonce}'::int`).catch(() => {});
  } finally {
    await c.end().catch(() => {});
  }
  const seen = () => {
    const text = readFrom(logFile, offset);
    return text.split('\n').some((l) => l.includes(nonce) && l.includes(` [${pid}] `));
  };
  try {
    await pollUntil(async () => seen(), 'the log line', 5_000, 20);
  } catch {
    throw new WalsimError(
      'invalid_input',
      `--log ${logFile} is not ${st.url}'s log: a statement that failed on the standby (session pid ${pid}) did not appear in it within 5 s (another server's log, a stale copy, or log_min_messages above ERROR); nothing was sent to the standby`,
    );
  }
}

function realpathOr(file: string): string {
  try {
    return fs.realpathSync(file);
  } catch {
    return path.resolve(file);
  }
}

/** The log's bytes from `offset` on. */
function readFrom(file: string, offset: number): string {
  const fd = fs.openSync(file, 'r');
  try {
    const size = fs.fstatSync(fd).size;
    const buf = Buffer.alloc(Math.max(0, size - offset));
    fs.readSync(fd, buf, 0, buf.length, offset);
    return buf.toString('utf8');
  } finally {
    fs.closeSync(fd);
  }
}

/**
 * What `--verify` has sent so far: each statement when it was written to the standby and whether
 * its reply came. Read by the Ctrl-C and timeout reports.
 */
export interface VerifyProgress {
  sent: Array<{ statement: string; replied: boolean }>;
}

/**
 * What --verify did and where the standby is now, in one line: the statements sent (or none) and
 * the standby's state, asked on a fresh session (pg_is_in_recovery(), the pause state), or why
 * it cannot be asked.
 */
export async function verifyReport(url: string, progress: VerifyProgress): Promise<string> {
  const describeSent = () =>
    progress.sent.length === 0
      ? 'nothing was sent to the standby (no resume, no promote)'
      : `sent ${progress.sent.map((x) => `${x.statement}${x.replied ? '' : ' (no reply yet)'}`).join(', then ')}`;
  let state: string;
  const c = new pg.Client({
    ...serverConfig(url, '--standby', 'walsim-predict-verify'),
    connectionTimeoutMillis: 5_000,
  });
  c.on('error', () => {});
  try {
    await c.connect();
    const r = (
      await c.query(
        `SELECT pg_is_in_recovery() AS rec,
                CASE WHEN pg_is_in_recovery() THEN pg_get_wal_replay_pause_state() END AS pause`,
      )
    ).rows[0] as { rec: boolean; pause: string | null };
    const promoteSent = progress.sent.some((x) => x.statement.startsWith('pg_promote'));
    state = r.rec
      ? `the standby is in recovery, replay ${r.pause}${promoteSent ? ' (the promotion requested will proceed on its own)' : ''}`
      : 'the standby has been promoted: it is out of recovery and accepts writes';
  } catch (e) {
    state = `the standby's state is unknown: cannot ask it (${(e as Error).message})`;
  } finally {
    await c.end().catch(() => {});
  }
  // Described after the state was read: a statement in flight meanwhile is included.
  return `${describeSent()}; ${state}`;
}

/**
 * Resume replay, request promotion, and read the promotion's instants from the log, waiting
 * `timeoutMs` for "ready to accept connections" (default: 120 s, or 20 times the prediction).
 */
export async function verifyPromotion(
  url: string,
  p: Prediction,
  logFile: string,
  progress: VerifyProgress = { sent: [] },
  timeoutMs?: number,
): Promise<VerifyResult> {
  const offset = fs.statSync(logFile).size;
  const c = new pg.Client(serverConfig(url, '--standby', 'walsim-predict-verify'));
  c.on('error', () => {});
  await c.connect();
  let resumeMs: number;
  let promoteRequestedMs: number;
  const send = async (statement: string, sql: string) => {
    // After Ctrl-C nothing more is sent: the interrupt's report describes what already was.
    if (interrupted()) throw new WalsimError('canceled', `interrupted before ${statement}`);
    const step = { statement, replied: false };
    progress.sent.push(step);
    const r = await c.query(sql);
    step.replied = true;
    return r;
  };
  try {
    const r = p.paused
      ? await send(
          'pg_wal_replay_resume()',
          'SELECT pg_wal_replay_resume(), extract(epoch FROM clock_timestamp())::float8 AS t',
        )
      : await c.query('SELECT extract(epoch FROM clock_timestamp())::float8 AS t');
    resumeMs = Number((r.rows[0] as { t: number }).t) * 1000;
    // pg_promote(false): signal and return; no session waits on the standby while it replays.
    promoteRequestedMs = Date.now();
    await send('pg_promote(false)', 'SELECT pg_promote(false)');
  } finally {
    await c.end().catch(() => {});
  }
  const readLog = () =>
    promotionTimeline(parsePgLog(readFrom(logFile, offset)), Math.floor(resumeMs));
  let t = readLog();
  const budgetMs = timeoutMs ?? Math.max(120_000, p.predicted.writableS * 20_000);
  try {
    await pollUntil(
      async () => (t = readLog()).readyAt !== null,
      `"database system is ready to accept connections" in ${logFile}`,
      budgetMs,
      20,
    );
  } catch {
    throw new WalsimError(
      'timeout',
      `--verify: no "database system is ready to accept connections" in ${logFile} within ${budgetMs / 1000} s (--verify-timeout): ${await verifyReport(url, progress)}`,
    );
  }
  return verifyResultOf(t, resumeMs, promoteRequestedMs, logFile);
}

/** The measured phases of a promotion from the standby's log (epoch ms instants). */
function verifyResultOf(
  t: PromotionTimeline,
  resumeMs: number,
  promoteRequestedMs: number,
  logFile: string,
): VerifyResult {
  const diff = (a: number | null, b: number | null) =>
    a === null || b === null ? null : (a - b) / 1000;
  const noticeFrom = Math.max(promoteRequestedMs, t.endOfWalAt ?? promoteRequestedMs);
  const notice = t.promoteReceivedAt === null ? null : t.promoteReceivedAt - noticeFrom;
  return {
    resumeAt: new Date(resumeMs).toISOString(),
    readyAt: new Date(t.readyAt!).toISOString(),
    newTimeline: t.newTimeline,
    measured: {
      writableS: (t.readyAt! - resumeMs) / 1000,
      replayS: diff(t.redoDoneAt, resumeMs),
      endOfRecoveryS: diff(t.archiveRecoveryCompleteAt, t.redoDoneAt),
      openForWritesS: diff(t.readyAt, t.archiveRecoveryCompleteAt),
    },
    stall: notice !== null && notice > STALL_MS,
    log: t,
    logFile,
  };
}

export interface AccuracyEntry {
  at: string;
  standby: string;
  profile: string;
  sharedBuffers: string;
  /** What the backlog was: the three most frequent record types and the drops. */
  workload: string;
  walBytes: number;
  records: number;
  predicted: { writableS: number; replayS: number; endOfRecoveryS: number; openForWritesS: number };
  measured: MeasuredPhases;
  errorPct: number;
  stall: boolean;
  loadAvg1: number;
}

export function accuracyEntry(p: Prediction, v: VerifyResult): AccuracyEntry {
  const top = [...p.records.byType]
    .sort((a, b) => b.count - a.count)
    .slice(0, 3)
    .map((t) => `${t.rmgr}/${t.type} ${t.count}`);
  const drops = `${p.drops.calls.fullScan} full scan, ${p.drops.calls.lookup} lookup`;
  return {
    at: v.readyAt,
    standby: p.standby,
    profile: p.profile.name,
    sharedBuffers: p.state.sharedBuffers,
    workload: `${top.join(', ') || 'empty'}; drops ${drops}`,
    walBytes: p.range.bytes,
    records: p.records.total,
    predicted: { writableS: p.predicted.writableS, ...p.predicted.phases },
    measured: v.measured,
    errorPct: ((p.predicted.writableS - v.measured.writableS) / v.measured.writableS) * 100,
    stall: v.stall,
    loadAvg1: os.loadavg()[0]!,
  };
}

/**
 * One JSON line appended, every string redacted (scripts/postgres/conninfo.ts); the file is
 * created 0600 and kept so (it names servers and their settings).
 */
export function appendAccuracy(file: string, e: AccuracyEntry): void {
  fs.mkdirSync(path.dirname(path.resolve(file)), { recursive: true });
  const fd = fs.openSync(file, 'a', 0o600);
  try {
    fs.fchmodSync(fd, 0o600);
    fs.writeSync(fd, JSON.stringify(redactValue(e)) + '\n');
  } finally {
    fs.closeSync(fd);
  }
}

export function readAccuracy(file: string): AccuracyEntry[] {
  let text: string;
  try {
    text = fs.readFileSync(file, 'utf8');
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code === 'ENOENT')
      throw new WalsimError(
        'invalid_input',
        `no accuracy log at ${file} yet: run npm run predict -- --standby URL --verify first`,
      );
    throw e;
  }
  return text
    .split('\n')
    .filter((l) => l.trim() !== '')
    .map((l, i) => {
      let v: unknown;
      try {
        v = JSON.parse(l);
      } catch {
        throw new WalsimError('invalid_input', `${file} line ${i + 1} is not JSON`);
      }
      const why = accuracyEntryProblem(v);
      if (why !== null)
        throw new WalsimError(
          'invalid_input',
          `${file} line ${i + 1} is not a --verify entry: ${why} (is --accuracy-log the file predict --verify writes?)`,
        );
      return v as AccuracyEntry;
    });
}

/** What makes a parsed line not an AccuracyEntry (the fields --accuracy reads), null if none. */
function accuracyEntryProblem(v: unknown): string | null {
  const isObj = (x: unknown): x is Record<string, unknown> =>
    typeof x === 'object' && x !== null && !Array.isArray(x);
  if (!isObj(v)) return 'not a JSON object';
  const fields: Array<[string, unknown, string]> = [
    ['at', v.at, 'string'],
    ['sharedBuffers', v.sharedBuffers, 'string'],
    ['workload', v.workload, 'string'],
    ['profile', v.profile, 'string'],
    ['errorPct', v.errorPct, 'number'],
    ['stall', v.stall, 'boolean'],
  ];
  for (const o of ['predicted', 'measured'] as const) {
    const x = v[o];
    if (!isObj(x)) return `"${o}" is ${x === undefined ? 'missing' : 'not an object'}`;
    for (const k of ['writableS', 'replayS', 'endOfRecoveryS', 'openForWritesS'])
      fields.push([
        `${o}.${k}`,
        x[k],
        o === 'measured' && k !== 'writableS' ? 'number|null' : 'number',
      ]);
  }
  for (const [k, x, t] of fields) {
    const ok = t === 'number|null' ? x === null || typeof x === 'number' : typeof x === t;
    if (!ok) return `"${k}" is ${x === undefined ? 'missing' : `not a ${t}`}`;
  }
  return null;
}

export function formatAccuracy(es: AccuracyEntry[]): string[] {
  const f = (x: number | null) => (x === null ? 'n/a' : x.toFixed(3));
  const rows = es.map((e) => [
    e.at.slice(0, 19),
    e.sharedBuffers,
    e.workload,
    f(e.predicted.writableS),
    f(e.measured.writableS),
    `${e.errorPct >= 0 ? '+' : ''}${e.errorPct.toFixed(1)}%${e.stall ? ' (stall)' : ''}`,
    `${f(e.predicted.replayS)} / ${f(e.measured.replayS)}`,
    `${f(e.predicted.endOfRecoveryS + e.predicted.openForWritesS)} / ${f(
      e.measured.endOfRecoveryS === null || e.measured.openForWritesS === null
        ? null
        : e.measured.endOfRecoveryS + e.measured.openForWritesS,
    )}`,
    e.profile,
  ]);
  const ok = es.filter((e) => !e.stall);
  const abs = ok.map((e) => Math.abs(e.errorPct)).sort((a, b) => a - b);
  const med =
    abs.length === 0
      ? NaN
      : abs.length % 2
        ? abs[abs.length >> 1]!
        : (abs[(abs.length >> 1) - 1]! + abs[abs.length >> 1]!) / 2;
  return [
    markdownTable(
      [
        'verified at (UTC)',
        's_b',
        'backlog',
        'predicted s',
        'measured s',
        'error',
        'replay pred / meas',
        'end+open pred / meas',
        'profile',
      ],
      rows,
      ['l', 'r', 'l', 'r', 'r', 'r', 'r', 'r', 'l'],
    ),
    `${es.length} verified promotions (${es.length - ok.length} stalled, left out): median |error| ${Number.isNaN(med) ? 'n/a' : med.toFixed(1) + '%'}, ${abs.filter((x) => x <= 25).length}/${ok.length} within ±25%`,
  ];
}
