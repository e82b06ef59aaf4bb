/**
 * The pg-wal/ reader's rate for `npm run bench`, beside `pg_waldump --stats=record` on the same
 * files. Method: a real PostgreSQL (the newest Debian install, which has pg_waldump) with 16 MB
 * segments writes `mib` MiB of WAL once (rounds of INSERT of 100,000 rows with text, UPDATE of a
 * tenth, DELETE + VACUUM of a fifth, a CHECKPOINT every fourth round so FPIs are in the mix) and
 * is stopped; then, `runs` times each, alternating, with medians: `pg_waldump --stats=record -s
 * START -e END` (wall time of the process), and the reader over [START, END) counting records and
 * bytes per rmgr/type as --stats=record does (wall time, in this process). The page cache is warm
 * for both after the first round. Counts must agree with pg_waldump's, else the bench fails. The
 * peak RSS while reading says that memory is bounded (a 4 MB window and one reassembly buffer).
 *
 * Entry point: `measurePgWalReader`.
 */
import { execFile } from 'node:child_process';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import pg from 'pg';
import { PgWalReader } from '../../pg-wal/reader.ts';
import { detectSegmentSize, readHistory, WalDirectory } from '../../pg-wal/wal-dir.ts';
import { freePort } from '../../server/ports.ts';
import { formatLsn, parseLsn } from '../../wal/lsn.ts';
import { findPgBin, pgServerUser } from '../postgres/pg-bin.ts';
import { runPgProgram } from '../postgres/pg-cluster.ts';
import { parseWaldumpStats } from '../postgres/pg-waldump.ts';

export interface PgWalReaderResult {
  walMiB: number;
  records: number;
  readerMiBPerSec: number;
  waldumpMiBPerSec: number;
  readerToWaldump: number;
  /** RSS growth while reading, over the RSS before (MiB). */
  readerRssGrowthMiB: number;
  buildSeconds: number;
}

/** null when there is no PostgreSQL with pg_waldump here (the reason is logged). */
export async function measurePgWalReader(
  mib: number,
  runs: number,
  log: (line: string) => void,
): Promise<PgWalReaderResult | null> {
  let bin: ReturnType<typeof findPgBin>;
  try {
    bin = findPgBin();
  } catch (e) {
    log(`pg-wal reader bench skipped: ${(e as Error).message}`);
    return null;
  }
  const parent = fs.mkdtempSync(path.join(os.tmpdir(), 'walsim-bench-pgwal-'));
  fs.chmodSync(parent, 0o755);
  try {
    const t0 = performance.now();
    const { walDir, start, end } = await buildWal(bin.dir, parent, mib);
    const buildSeconds = (performance.now() - t0) / 1000;
    const bytes = parseLsn(end) - parseLsn(start);
    const waldumpMs: number[] = [];
    const readerMs: number[] = [];
    let records = 0;
    let rssGrowth = 0;
    for (let i = 0; i < runs; i++) {
      const w = await timeWaldump(bin.path('pg_waldump'), walDir, start, end);
      waldumpMs.push(w.ms);
      const r = await timeReader(walDir, start, end);
      readerMs.push(r.ms);
      rssGrowth = Math.max(rssGrowth, r.rssGrowth);
      if (r.records !== w.records)
        throw new Error(`bench: the reader read ${r.records} records, pg_waldump ${w.records}`);
      records = r.records;
    }
    const mibOf = bytes / 2 ** 20;
    const rate = (ms: number[]) => mibOf / (median(ms) / 1000);
    return {
      walMiB: Number(mibOf.toFixed(0)),
      records,
      readerMiBPerSec: Number(rate(readerMs).toFixed(0)),
      waldumpMiBPerSec: Number(rate(waldumpMs).toFixed(0)),
      readerToWaldump: Number((rate(readerMs) / rate(waldumpMs)).toFixed(2)),
      readerRssGrowthMiB: Number((rssGrowth / 2 ** 20).toFixed(1)),
      buildSeconds: Number(buildSeconds.toFixed(0)),
    };
  } finally {
    fs.rmSync(parent, { recursive: true, force: true });
  }
}

function median(xs: number[]): number {
  const s = [...xs].sort((a, b) => a - b);
  const m = s.length >> 1;
  return s.length % 2 ? s[m]! : (s[m - 1]! + s[m]!) / 2;
}

/** A server writes `mib` MiB of WAL; returns its pg_wal and the range, after stopping it. */
export async function buildWal(
  binDir: string,
  parent: string,
  mib: number,
): Promise<{ walDir: string; start: string; end: string }> {
  const user = pgServerUser();
  const engine = { binDir, user };
  const data = path.join(parent, 'data');
  fs.mkdirSync(data, { mode: 0o700 });
  if (user !== null) fs.chownSync(data, user.uid, user.gid);
  await runPgProgram(engine, 'initdb', ['-D', data, '-U', 'postgres', '--no-sync', '-A', 'trust']);
  const port = await freePort('127.0.0.1');
  const o = `-p ${port} -c listen_addresses=127.0.0.1 -c unix_socket_directories='' -c autovacuum=off -c max_wal_size=8GB -c wal_keep_size=8GB -c fsync=off -c synchronous_commit=off`;
  const log = path.join(parent, 'server.log');
  fs.writeFileSync(log, '');
  if (user !== null) fs.chownSync(log, user.uid, user.gid);
  await runPgProgram(engine, 'pg_ctl', ['start', '-D', data, '-o', o, '-l', log, '-w']);
  const c = new pg.Client({ host: '127.0.0.1', port, user: 'postgres', database: 'postgres' });
  let start = '';
  let end = '';
  try {
    await c.connect();
    const lsn = async () =>
      (await c.query('SELECT pg_current_wal_insert_lsn()::text AS l')).rows[0].l as string;
    await c.query('CREATE TABLE w (id int, v int, t text)');
    await c.query('CREATE INDEX ON w (id)');
    start = await lsn();
    for (let round = 0; parseLsn(await lsn()) - parseLsn(start) < mib * 2 ** 20; round++) {
      const base = round * 100_000;
      await c.query(
        `INSERT INTO w SELECT g, g % 97, repeat('x', 20 + g % 80) FROM generate_series(${base}, ${base + 99_999}) g`,
      );
      await c.query(`UPDATE w SET v = v + 1 WHERE id >= ${base} AND id % 10 = 0`);
      await c.query(`DELETE FROM w WHERE id >= ${base} AND id % 5 = 1`);
      await c.query('VACUUM w');
      if (round % 4 === 3) await c.query('CHECKPOINT');
    }
    end = await lsn();
  } finally {
    await c.end();
    await runPgProgram(engine, 'pg_ctl', ['stop', '-D', data, '-m', 'fast', '-w']);
  }
  return { walDir: path.join(data, 'pg_wal'), start, end };
}

function timeWaldump(
  pgWaldump: string,
  walDir: string,
  start: string,
  end: string,
): Promise<{ ms: number; records: number }> {
  const t0 = performance.now();
  return new Promise((resolve, reject) => {
    execFile(
      pgWaldump,
      ['-p', walDir, '-s', start, '-e', end, '--stats=record'],
      { encoding: 'utf8', maxBuffer: 16 * 2 ** 20 },
      (err, stdout, stderr) => {
        const ms = performance.now() - t0;
        if (err !== null) return reject(new Error(`pg_waldump failed: ${stderr.trim()}`));
        resolve({ ms, records: parseWaldumpStats(stdout).total.count });
      },
    );
  });
}

/** The reader over [start, end): counts and bytes per rmid/info, as --stats=record keeps them. */
async function timeReader(
  walDir: string,
  start: string,
  end: string,
): Promise<{ ms: number; records: number; rssGrowth: number }> {
  const count = new Float64Array(256 * 16);
  const recBytes = new Float64Array(256 * 16);
  const fpiBytes = new Float64Array(256 * 16);
  const rss0 = process.memoryUsage().rss;
  let rssMax = rss0;
  const t0 = performance.now();
  const src = new WalDirectory(walDir, detectSegmentSize(walDir), readHistory(walDir, 1));
  const reader = new PgWalReader(src, {
    startLsn: parseLsn(start),
    endLsn: parseLsn(end),
    start: 'find',
  });
  let records = 0;
  let batches = 0;
  for await (const batch of reader.batches()) {
    for (const r of batch) {
      const k = (r.rmid << 4) | (r.info >> 4);
      count[k]! += 1;
      recBytes[k]! += r.recordLength;
      fpiBytes[k]! += r.fpiLength;
    }
    records += batch.length;
    if (++batches % 64 === 0) rssMax = Math.max(rssMax, process.memoryUsage().rss);
  }
  const ms = performance.now() - t0;
  if (reader.end?.reason !== 'end_lsn')
    throw new Error(
      `bench: the reader stopped early at ${formatLsn(reader.end!.lsn)}: ${reader.end!.message}`,
    );
  return { ms, records, rssGrowth: Math.max(0, rssMax - rss0) };
}
