/**
 * Reading a standby's WAL range: `pg_waldump` over the standby's own pg_wal (when its data
 * directory is readable here), else the primary's `pg_walinspect` over the same LSN range. Both
 * stream records to a callback (pg_waldump line by line from its stdout; pg_walinspect in windows
 * of 16 MB of LSN), so a long backlog never sits in memory. And what the data directory says of a
 * relation's forks (sizes on disk).
 *
 * Entry points: `checkPgdata`, `waldumpRecords`, `walinspectRecords`, `PgdataFiles`,
 * `hasWalinspect`.
 *
 * Why not pg_walinspect on the standby itself: in recovery pg_walinspect reads only up to the
 * replay LSN (its GetCurrentLSN() and xlogutils.c read_local_xlog_page both use
 * GetXLogReplayRecPtr() when RecoveryInProgress()), so the unreplayed range is exactly what it
 * cannot show there (README "Reading the range").
 */
import { spawn } from 'node:child_process';
import * as fs from 'node:fs';
import * as path from 'node:path';
import * as readline from 'node:readline';
import type pg from 'pg';
import { WalsimError } from '../../common/errors.ts';
import type { StandbyState } from './standby-state.ts';
import { formatLsn, parseLsn, type TimeLineId } from '../../wal/lsn.ts';
import {
  parseTimelineHistory,
  timelineHistoryFileName,
  type TimelineHistoryEntry,
} from '../../wal/segment.ts';
import { splitRangeByTimeline, type TimelinePart } from '../../wal/timeline-range.ts';
import {
  parseWaldumpLine,
  recordFromWalinspect,
  type ForkNumber,
  type PgWalRecord,
  type RelFileNode,
  type WalinspectRow,
} from './wal-records.ts';

const FORK_SUFFIX = ['', '_fsm', '_vm', '_init'] as const;
const BLCKSZ = 8192;
const RELSEG_BLOCKS = 131072; // 1 GB segments

/**
 * Refuse a --pgdata that is not this standby's data directory or whose pg_wal cannot be read. The
 * system identifier is shared by every member of a cluster (a base backup copies it), so the
 * directory must also be the running standby's own: pg_control in archive recovery, and a
 * postmaster.pid naming the server's data_directory and port.
 */
export function checkPgdata(
  dir: string,
  st: Pick<StandbyState, 'systemIdentifier' | 'dataDirectory' | 'port' | 'versionNum'>,
): string {
  const systemIdentifier = st.systemIdentifier;
  const abs = path.resolve(dir);
  const walDir = path.join(abs, 'pg_wal');
  let version: string;
  try {
    version = fs.readFileSync(path.join(abs, 'PG_VERSION'), 'utf8').trim();
  } catch (e) {
    throw new WalsimError(
      'invalid_input',
      `--pgdata ${abs}: cannot read PG_VERSION (${(e as NodeJS.ErrnoException).code ?? (e as Error).message}): pass the standby's data directory, readable by this user, or leave --pgdata out and pass --primary`,
    );
  }
  const major = String(Math.floor(st.versionNum / 10000));
  if (version !== major)
    throw new WalsimError(
      'invalid_input',
      `--pgdata ${abs} holds a PostgreSQL ${version} cluster, the standby runs ${major}: pass the standby's own data directory`,
    );
  try {
    fs.readdirSync(walDir);
    fs.accessSync(walDir, fs.constants.R_OK | fs.constants.X_OK);
  } catch (e) {
    throw new WalsimError(
      'invalid_input',
      `--pgdata ${abs}: pg_wal cannot be read (${(e as NodeJS.ErrnoException).code ?? (e as Error).message}): run predict as the server's OS user (or root), or leave --pgdata out and pass --primary to read the range with pg_walinspect`,
    );
  }
  try {
    const ctl = fs.readFileSync(path.join(abs, 'global', 'pg_control'));
    const sysid = ctl.readBigUInt64LE(0).toString();
    if (sysid !== systemIdentifier)
      throw new WalsimError(
        'invalid_input',
        `--pgdata ${abs} belongs to another cluster (system identifier ${sysid}, the standby's is ${systemIdentifier}): pass this standby's data directory`,
      );
    // ControlFileData.state (pg_control.h: after system_identifier and two uint32 versions).
    const state = ctl.readInt32LE(16);
    if (state !== DB_IN_ARCHIVE_RECOVERY)
      throw notTheStandbys(
        abs,
        `its pg_control is "${DB_STATE_NAMES[state] ?? state}", a running standby's is "in archive recovery" (the primary's, or a stopped copy?)`,
      );
  } catch (e) {
    if (e instanceof WalsimError) throw e;
    throw new WalsimError(
      'invalid_input',
      `--pgdata ${abs}: cannot read global/pg_control: ${(e as Error).message}`,
    );
  }
  checkPostmasterPid(abs, st);
  return walDir;
}

const DB_IN_ARCHIVE_RECOVERY = 5;
const DB_STATE_NAMES = [
  'starting up',
  'shut down',
  'shut down in recovery',
  'shutting down',
  'in crash recovery',
  'in archive recovery',
  'in production',
];

function notTheStandbys(abs: string, why: string): WalsimError {
  return new WalsimError(
    'invalid_input',
    `--pgdata ${abs} is not this standby's data directory: ${why}; pass the data directory of the server --standby connects to`,
  );
}

/** postmaster.pid's lines 2 and 4 (data directory, port) against the server's own. */
function checkPostmasterPid(abs: string, st: Pick<StandbyState, 'dataDirectory' | 'port'>): void {
  let lines: string[];
  try {
    lines = fs.readFileSync(path.join(abs, 'postmaster.pid'), 'utf8').split('\n');
  } catch (e) {
    throw notTheStandbys(
      abs,
      `no readable postmaster.pid (${(e as NodeJS.ErrnoException).code ?? (e as Error).message}): no server runs there`,
    );
  }
  const [dataDir, port] = [lines[1]?.trim(), Number(lines[3])];
  if (dataDir !== st.dataDirectory)
    throw notTheStandbys(abs, `its server runs in ${dataDir}, the standby in ${st.dataDirectory}`);
  if (port !== st.port)
    throw notTheStandbys(abs, `its server listens on port ${port}, the standby on ${st.port}`);
}

/** The standby's relation files, as its data directory has them now. */
export class PgdataFiles {
  private readonly tblspcVersionDir = new Map<number, string | null>();
  constructor(private readonly dir: string) {}

  private relPath(n: RelFileNode, fork: ForkNumber): string | null {
    const name = `${n.rel}${FORK_SUFFIX[fork]}`;
    if (n.spc === 1664) return path.join(this.dir, 'global', name);
    if (n.spc === 1663) return path.join(this.dir, 'base', String(n.db), name);
    let v = this.tblspcVersionDir.get(n.spc);
    if (v === undefined) {
      try {
        v =
          fs
            .readdirSync(path.join(this.dir, 'pg_tblspc', String(n.spc)))
            .find((d) => d.startsWith('PG_15_')) ?? null;
      } catch {
        v = null;
      }
      this.tblspcVersionDir.set(n.spc, v);
    }
    return v === null
      ? null
      : path.join(this.dir, 'pg_tblspc', String(n.spc), v, String(n.db), name);
  }

  /** Blocks on disk (all 1 GB segments), null when the fork's file does not exist. */
  diskBlocks(n: RelFileNode, fork: ForkNumber): number | null | undefined {
    const p = this.relPath(n, fork);
    if (p === null) return undefined;
    let blocks = 0;
    for (let seg = 0; ; seg++) {
      let st: fs.Stats;
      try {
        st = fs.statSync(seg === 0 ? p : `${p}.${seg}`);
      } catch (e) {
        if ((e as NodeJS.ErrnoException).code === 'ENOENT') return seg === 0 ? null : blocks;
        return undefined;
      }
      const b = Math.floor(st.size / BLCKSZ);
      blocks += b;
      if (b < RELSEG_BLOCKS) return blocks;
    }
  }
}

export interface RangeRead {
  /** How the range was read, for the output. */
  source: 'pg_waldump' | 'pg_walinspect' | 'pg-wal';
  detail: string;
  /**
   * pg-wal only: where the record after the last one read starts (≤ the range's end: a record
   * that ends past it is not read), so the next read of the WAL that follows starts there.
   */
  nextLsn?: string;
}

/** The last lines of a program's stderr, for a message. */
const tail = (s: string) => s.trim().split('\n').slice(-2).join(' | ');

/**
 * The timeline history the standby's pg_wal holds: that of the newest timeline with a history file
 * at or above `tli` (recovery_target_timeline = 'latest', PostgreSQL's findNewestTimeLine: the
 * walreceiver fetches the history of each timeline it follows); timeline `tli` alone when none.
 */
export function walDirTimelineHistory(walDir: string, tli: TimeLineId): TimelineHistoryEntry[] {
  let newest = tli;
  for (const f of fs.readdirSync(walDir)) {
    const m = /^([0-9A-F]{8})\.history$/.exec(f);
    if (m !== null && parseInt(m[1]!, 16) > newest) newest = parseInt(m[1]!, 16);
  }
  const file = path.join(walDir, timelineHistoryFileName(newest));
  if (!fs.existsSync(file)) return [{ tli: newest, beginLsn: 0, endLsn: null }];
  return parseTimelineHistory(fs.readFileSync(file, 'utf8'), newest, file);
}

/**
 * `pg_waldump -p WALDIR -t TLI -s FROM -e TO` over each part of the range on its own timeline
 * (the range cut at the history's switch points, as PostgreSQL's reader reads it), each record
 * line to `onRecord`. A missing segment or unreadable file is one message naming it.
 */
export async function waldumpRecords(
  pgWaldump: string,
  walDir: string,
  history: readonly TimelineHistoryEntry[],
  from: string,
  to: string,
  onRecord: (r: PgWalRecord) => void,
): Promise<RangeRead> {
  const parts = splitRangeByTimeline(history, parseLsn(from), parseLsn(to));
  const run = (p: TimelinePart) => `-t ${p.tli} -s ${formatLsn(p.from)} -e ${formatLsn(p.to)}`;
  const detail =
    parts.length === 0
      ? `pg_waldump -p ${walDir} (nothing to read)`
      : `pg_waldump -p ${walDir} ${parts.map(run).join(', then ')}`;
  for (const p of parts)
    await waldumpPart(pgWaldump, walDir, p.tli, formatLsn(p.from), formatLsn(p.to), onRecord);
  return { source: 'pg_waldump', detail };
}

/** One pg_waldump run over [from, to) on timeline `tli`. */
function waldumpPart(
  pgWaldump: string,
  walDir: string,
  tli: number,
  from: string,
  to: string,
  onRecord: (r: PgWalRecord) => void,
): Promise<void> {
  const detail = `pg_waldump -p ${walDir} -t ${tli} -s ${from} -e ${to}`;
  return new Promise((resolve, reject) => {
    const child = spawn(pgWaldump, ['-p', walDir, '-t', String(tli), '-s', from, '-e', to], {
      stdio: ['ignore', 'pipe', 'pipe'],
      env: { ...process.env, LC_ALL: 'C' },
    });
    let stderr = '';
    let failed: Error | null = null;
    child.stderr.setEncoding('utf8');
    child.stderr.on('data', (d: string) => {
      if (stderr.length < 65536) stderr += d;
    });
    const lines = readline.createInterface({ input: child.stdout, crlfDelay: Infinity });
    lines.on('line', (line) => {
      if (failed !== null) return;
      try {
        const r = parseWaldumpLine(line);
        if (r !== null) onRecord(r);
      } catch (e) {
        failed = e as Error;
        child.kill();
      }
    });
    child.on('error', (e) =>
      reject(
        new WalsimError('io_error', `cannot run ${pgWaldump}: ${e.message} (pass --pg-bin DIR)`),
      ),
    );
    child.on('close', (code) => {
      if (failed !== null) return reject(failed);
      if (code === 0) return resolve();
      reject(waldumpFailure(detail, walDir, tli, from, to, code, stderr));
    });
  });
}

/** A segment of the range is not where it was read from (the caller says what else to try). */
export class MissingWalError extends WalsimError {
  constructor(message: string) {
    super('invalid_input', message);
    this.name = 'MissingWalError';
  }
}

/** pg_waldump's failure as one message naming what is missing or unreadable. */
function waldumpFailure(
  detail: string,
  walDir: string,
  tli: number,
  from: string,
  to: string,
  code: number | null,
  stderr: string,
): WalsimError {
  const missing = /could not find file "([^"]+)"/.exec(stderr)?.[1];
  if (missing !== undefined || /could not find any WAL file|could not locate WAL/i.test(stderr))
    return new MissingWalError(
      `${missing !== undefined ? `WAL segment ${missing} is not` : `no WAL segment of timeline ${tli} (the one holding ${from} first) is`} in ${walDir}: the range ${from} → ${to} on timeline ${tli} needs it (a restartpoint removed it, or the standby never received it there)`,
    );
  if (/Permission denied|could not open/i.test(stderr))
    return new WalsimError(
      'invalid_input',
      `pg_waldump cannot read ${walDir} (${tail(stderr)}): run predict as the server's OS user (or root)`,
    );
  return new WalsimError('io_error', `${detail} failed (exit ${code}): ${tail(stderr)}`);
}

/** Is pg_walinspect installed in the database this session is connected to? */
export async function hasWalinspect(c: pg.Client): Promise<boolean> {
  const r = await c.query("SELECT 1 FROM pg_extension WHERE extname = 'pg_walinspect'");
  return r.rowCount === 1;
}

const WINDOW = 16 * 1024 * 1024;

/**
 * `pg_get_wal_records_info(start, end)` on the primary, in windows: each window starts at the
 * end of the last record of the previous one (records are never split or counted twice).
 */
export async function walinspectRecords(
  c: pg.Client,
  url: string,
  from: string,
  to: string,
  onRecord: (r: PgWalRecord) => void,
): Promise<RangeRead> {
  const detail = `pg_get_wal_records_info('${from}', '${to}') on the primary ${url}`;
  const end = parseLsn(to);
  let at = parseLsn(from);
  while (at < end) {
    const winEnd = Math.min(end, at + WINDOW);
    let rows: Array<WalinspectRow & { end_lsn: string }>;
    try {
      const r = await c.query(
        `SELECT start_lsn::text, end_lsn::text, xid, resource_manager, record_type, record_length,
                description, block_ref
           FROM pg_get_wal_records_info($1::pg_lsn, $2::pg_lsn) ORDER BY start_lsn`,
        [formatLsn(at), formatLsn(winEnd)],
      );
      rows = r.rows as typeof rows;
    } catch (e) {
      const msg = (e as Error).message;
      if (
        /could not open file|No such file|requested WAL segment .* has already been removed/i.test(
          msg,
        )
      )
        throw new MissingWalError(
          `the primary ${url} no longer has the WAL from ${formatLsn(at)} (${msg}): its checkpoints removed the segments the range ${from} → ${to} needs`,
        );
      throw new WalsimError('io_error', `${detail} failed: ${msg}`);
    }
    if (rows.length === 0) break;
    for (const row of rows) onRecord(recordFromWalinspect(row));
    const next = parseLsn(rows[rows.length - 1]!.end_lsn);
    if (next <= at) break;
    at = next;
  }
  return { source: 'pg_walinspect', detail };
}
