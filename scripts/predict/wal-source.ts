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
import { formatLsn, parseLsn } from '../../wal/lsn.ts';
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

/** Refuse a --pgdata that is not this standby's data directory or whose pg_wal cannot be read. */
export function checkPgdata(dir: string, systemIdentifier: string): string {
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
  if (version !== '15')
    throw new WalsimError(
      'invalid_input',
      `--pgdata ${abs} holds a PostgreSQL ${version} cluster, not 15`,
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
  } catch (e) {
    if (e instanceof WalsimError) throw e;
    throw new WalsimError(
      'invalid_input',
      `--pgdata ${abs}: cannot read global/pg_control: ${(e as Error).message}`,
    );
  }
  return walDir;
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
  source: 'pg_waldump' | 'pg_walinspect';
  detail: string;
}

/** The last lines of a program's stderr, for a message. */
const tail = (s: string) => s.trim().split('\n').slice(-2).join(' | ');

/**
 * `pg_waldump -p WALDIR -t TLI -s FROM -e TO`, each record line to `onRecord`. Resolves when the
 * program exits 0; a missing segment or unreadable file is one message saying so.
 */
export function waldumpRecords(
  pgWaldump: string,
  walDir: string,
  tli: number,
  from: string,
  to: string,
  onRecord: (r: PgWalRecord) => void,
): Promise<RangeRead> {
  const detail = `pg_waldump -p ${walDir} -t ${tli} -s ${from} -e ${to}`;
  if (parseLsn(from) >= parseLsn(to)) return Promise.resolve({ source: 'pg_waldump', detail });
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
      if (code === 0) return resolve({ source: 'pg_waldump', detail });
      if (
        /could not find file|could not find any WAL file|No such file|could not locate WAL file/i.test(
          stderr,
        )
      )
        return reject(
          new WalsimError(
            'invalid_input',
            `the WAL range ${from} → ${to} is not complete in ${walDir} (${tail(stderr)}): its segments were removed or never received there; pass --primary to read it with pg_walinspect`,
          ),
        );
      if (/Permission denied|could not open/i.test(stderr))
        return reject(
          new WalsimError(
            'invalid_input',
            `pg_waldump cannot read ${walDir} (${tail(stderr)}): run predict as the server's OS user (or root), or pass --primary`,
          ),
        );
      reject(new WalsimError('io_error', `${detail} failed (exit ${code}): ${tail(stderr)}`));
    });
  });
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
        throw new WalsimError(
          'invalid_input',
          `the primary no longer has the WAL range ${formatLsn(at)} → ${to} (${msg}): its segments were removed; pass --pgdata (the standby's own pg_wal has it)`,
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
