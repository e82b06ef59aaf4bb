/**
 * The pg-wal/ reader's rate for `npm run bench`, beside `pg_waldump --stats=record` on the same
 * files. Method: a real PostgreSQL (the newest Debian install, which has pg_waldump) with 16 MB
 * segments writes `mib` MiB of WAL once (rounds of INSERT of 100,000 rows with text, UPDATE of a
 * tenth, DELETE + VACUUM of a fifth, a CHECKPOINT every fourth round so FPIs are in the mix) and
 * is stopped; then, `runs` times each, alternating, with medians: `pg_waldump --stats=record -s
 * START -e END` (wall time of the process; CPU time from /proc's children times), the reader's
 * `columns()` over [START, END) counting records and bytes per rmgr/type as --stats=record does
 * (the same job; wall and CPU time of this process while it reads, every thread counted), on one
 * thread (the default) and with its CRC-32C worker thread (`crcWorker: 'on'`), the
 * reader's `batches()` (a decoded object per record) doing the same, predict's reading alone
 * (`pgWalRecords`, the reader's `views()`, each record counted) and predict's own path: the same
 * into the replay model (`RecoveryModel.replay`), as `npm run predict` reads a range. The page cache is warm for all after the first round. Record
 * count, record bytes and FPI bytes must equal pg_waldump's (predict's path: the count and the
 * total bytes), else the bench fails. The peak RSS while reading says that memory is bounded (two
 * 4 MB windows and one reassembly buffer). Then the worker's cross-over: `columns()` over the
 * first 8–256 MiB of the range with and without the worker (medians of `runs`).
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
import { pgWalRecords } from '../predict/pg-wal-source.ts';
import { RecoveryModel } from '../predict/replay-model.ts';
import { freePort } from '../../server/ports.ts';
import { formatLsn, parseLsn } from '../../wal/lsn.ts';
import { findPgBin, pgServerUser } from '../postgres/pg-bin.ts';
import { runPgProgram } from '../postgres/pg-cluster.ts';
import { parseWaldumpStats } from '../postgres/pg-waldump.ts';

export interface PgWalReaderResult {
  walMiB: number;
  records: number;
  /** `columns()`, wall clock and CPU time. */
  readerMiBPerSec: number;
  readerCpuMiBPerSec: number;
  waldumpMiBPerSec: number;
  /** null where /proc gives no children's CPU times. */
  waldumpCpuMiBPerSec: number | null;
  readerToWaldump: number;
  readerToWaldumpCpu: number | null;
  /** `columns()` with the CRC worker (two threads; off by default). */
  workerMiBPerSec: number;
  workerCpuMiBPerSec: number;
  /** `batches()` (an object per record), wall clock and CPU time. */
  recordsMiBPerSec: number;
  recordsCpuMiBPerSec: number;
  /** predict's reading alone: `pgWalRecords` (the reader's `views()`), no replay model. */
  viewsMiBPerSec: number;
  viewsCpuMiBPerSec: number;
  /** predict's path: `pgWalRecords` into the replay model. */
  predictMiBPerSec: number;
  predictCpuMiBPerSec: number;
  predictToWaldump: number;
  predictToWaldumpCpu: number | null;
  /** `columns()` over the range's first `mib` MiB: wall ms with the worker and without. */
  workerCrossover: Array<{ mib: number; workerMs: number; oneThreadMs: number }>;
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
    const { t, records, rssGrowth } = await rounds(
      bin.path('pg_waldump'),
      walDir,
      start,
      end,
      runs,
    );
    const workerCrossover = await crossover(walDir, start, end, runs);
    const mibOf = bytes / 2 ** 20;
    const rate = (ms: number | null) => (ms === null ? null : mibOf / (ms / 1000));
    const fix = (v: number | null) => (v === null ? null : Number(v.toFixed(0)));
    const ratio = (a: number | null, b: number | null) =>
      a === null || b === null ? null : Number((b / a).toFixed(2));
    return {
      walMiB: Number(mibOf.toFixed(0)),
      records,
      readerMiBPerSec: fix(rate(t.columns.wall()))!,
      readerCpuMiBPerSec: fix(rate(t.columns.cpu()))!,
      waldumpMiBPerSec: fix(rate(t.waldump.wall()))!,
      waldumpCpuMiBPerSec: fix(rate(t.waldump.cpu())),
      readerToWaldump: ratio(t.columns.wall(), t.waldump.wall())!,
      readerToWaldumpCpu: ratio(t.columns.cpu(), t.waldump.cpu()),
      workerMiBPerSec: fix(rate(t.worker.wall()))!,
      workerCpuMiBPerSec: fix(rate(t.worker.cpu()))!,
      recordsMiBPerSec: fix(rate(t.records.wall()))!,
      recordsCpuMiBPerSec: fix(rate(t.records.cpu()))!,
      viewsMiBPerSec: fix(rate(t.views.wall()))!,
      viewsCpuMiBPerSec: fix(rate(t.views.cpu()))!,
      predictMiBPerSec: fix(rate(t.predict.wall()))!,
      predictCpuMiBPerSec: fix(rate(t.predict.cpu()))!,
      predictToWaldump: ratio(t.predict.wall(), t.waldump.wall())!,
      predictToWaldumpCpu: ratio(t.predict.cpu(), t.waldump.cpu()),
      workerCrossover,
      readerRssGrowthMiB: Number((rssGrowth / 2 ** 20).toFixed(1)),
      buildSeconds: Number(buildSeconds.toFixed(0)),
    };
  } finally {
    fs.rmSync(parent, { recursive: true, force: true });
  }
}

/**
 * `runs` rounds of pg_waldump and each reader mode, alternating; every reader's totals checked
 * against pg_waldump's (predict's records carry no FPI length: its count and total bytes).
 */
async function rounds(pgWaldump: string, walDir: string, start: string, end: string, runs: number) {
  const t = {
    waldump: new Timings(),
    columns: new Timings(),
    worker: new Timings(),
    records: new Timings(),
    views: new Timings(),
    predict: new Timings(),
  };
  let records = 0;
  let rssGrowth = 0;
  for (let i = 0; i < runs; i++) {
    const w = await timeWaldump(pgWaldump, walDir, start, end);
    t.waldump.add(w);
    for (const mode of ['columns', 'worker', 'records', 'views', 'predict'] as const) {
      const r = await timeReader(walDir, start, end, mode);
      t[mode].add(r);
      rssGrowth = Math.max(rssGrowth, r.rssGrowth);
      const both = (x: StatsTotal) =>
        mode === 'predict' || mode === 'views'
          ? { count: x.count, bytes: x.recordBytes + x.fpiBytes }
          : x;
      const [a, b] = [JSON.stringify(both(r.total)), JSON.stringify(both(w.total))];
      if (a !== b) throw new Error(`bench: the reader (${mode}) counted ${a}, pg_waldump ${b}`);
    }
    records = w.total.count;
  }
  return { t, records, rssGrowth };
}

function median(xs: number[]): number {
  const s = [...xs].sort((a, b) => a - b);
  const m = s.length >> 1;
  return s.length % 2 ? s[m]! : (s[m - 1]! + s[m]!) / 2;
}

/** Wall and CPU milliseconds of repeated runs; medians. */
class Timings {
  private readonly walls: number[] = [];
  private readonly cpus: number[] = [];
  add(r: { ms: number; cpuMs: number | null }): void {
    this.walls.push(r.ms);
    if (r.cpuMs !== null) this.cpus.push(r.cpuMs);
  }
  wall(): number {
    return median(this.walls);
  }
  cpu(): number | null {
    return this.cpus.length === this.walls.length ? median(this.cpus) : null;
  }
}

/** Totals as pg_waldump's --stats=record "Total" line counts them. */
interface StatsTotal {
  count: number;
  recordBytes: number;
  fpiBytes: number;
}

/** CPU ms of this process's waited-for children (utime + stime of /proc/self/stat), or null. */
function childrenCpuMs(): number | null {
  try {
    const stat = fs.readFileSync('/proc/self/stat', 'utf8');
    // Fields after the command's closing parenthesis; cutime and cstime are fields 16 and 17.
    const f = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    return ((Number(f[13]) + Number(f[14])) * 1000) / 100; // USER_HZ is 100 on Linux
  } catch {
    return null;
  }
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
): Promise<{ ms: number; cpuMs: number | null; total: StatsTotal }> {
  const cpu0 = childrenCpuMs();
  const t0 = performance.now();
  return new Promise((resolve, reject) => {
    execFile(
      pgWaldump,
      ['-p', walDir, '-s', start, '-e', end, '--stats=record'],
      { encoding: 'utf8', maxBuffer: 16 * 2 ** 20 },
      (err, stdout, stderr) => {
        const ms = performance.now() - t0;
        const cpu1 = childrenCpuMs();
        if (err !== null) return reject(new Error(`pg_waldump failed: ${stderr.trim()}`));
        const { count, recordBytes, fpiBytes } = parseWaldumpStats(stdout).total;
        const cpuMs = cpu0 === null || cpu1 === null ? null : cpu1 - cpu0;
        resolve({ ms, cpuMs, total: { count, recordBytes, fpiBytes } });
      },
    );
  });
}

type ReaderMode = 'columns' | 'worker' | 'records' | 'views' | 'predict';

/**
 * The reader over [start, end): counts and bytes per rmid/info, as --stats=record keeps them,
 * from `columns()` (on one thread, or with the CRC worker: 'worker') or from `batches()`' records;
 * 'predict': predict's path into the replay model (its count and bytes). CPU time is the
 * process's, every thread counted.
 */
async function timeReader(
  walDir: string,
  start: string,
  end: string,
  mode: ReaderMode,
): Promise<{ ms: number; cpuMs: number; total: StatsTotal; rssGrowth: number }> {
  const rss0 = process.memoryUsage().rss;
  let rssMax = rss0;
  const cpu0 = process.cpuUsage();
  const t0 = performance.now();
  let batches = 0;
  const sample = () => {
    if (++batches % 64 === 0) rssMax = Math.max(rssMax, process.memoryUsage().rss);
  };
  const total =
    mode === 'predict' || mode === 'views'
      ? await predictPath(walDir, start, end, sample, mode === 'predict')
      : await readerStats(walDir, start, end, mode, sample);
  const ms = performance.now() - t0;
  const cpu = process.cpuUsage(cpu0);
  const cpuMs = (cpu.user + cpu.system) / 1000;
  return { ms, cpuMs, total, rssGrowth: Math.max(0, rssMax - rss0) };
}

/** --stats=record's totals from `columns()` or `batches()` over [start, end). */
async function readerStats(
  walDir: string,
  start: string,
  end: string,
  mode: Exclude<ReaderMode, 'predict' | 'views'>,
  sample: () => void,
): Promise<StatsTotal> {
  const stats = new ByRecordType();
  const src = new WalDirectory(walDir, detectSegmentSize(walDir), readHistory(walDir, 1));
  const reader = new PgWalReader(src, {
    startLsn: parseLsn(start),
    endLsn: parseLsn(end),
    start: 'find',
    ...(mode === 'worker' ? { crcWorker: 'on' as const } : {}),
  });
  if (mode === 'records')
    for await (const batch of reader.batches()) {
      for (const r of batch) stats.add(r.rmid, r.info, r.totalLength, r.fpiLength);
      sample();
    }
  else
    for await (const c of reader.columns()) {
      for (let i = 0; i < c.length; i++)
        stats.add(c.rmid[i]!, c.info[i]!, c.totalLength[i]!, c.fpiLength[i]!);
      sample();
    }
  if (reader.end?.reason !== 'end_lsn')
    throw new Error(
      `bench: the reader stopped early at ${formatLsn(reader.end!.lsn)}: ${reader.end!.message}`,
    );
  return stats.total();
}

/**
 * predict's path: `pgWalRecords` into a replay model (`replay`), or only counted (predict's
 * reading alone); the records and bytes counted.
 */
async function predictPath(
  walDir: string,
  start: string,
  end: string,
  sample: () => void,
  replay: boolean,
): Promise<StatsTotal> {
  const model = new RecoveryModel(131072);
  let n = 0;
  let bytes = 0;
  await pgWalRecords(walDir, readHistory(walDir, 1), start, end, (r) => {
    if (replay) model.replay(r);
    else bytes += r.totalLength;
    if (++n % 16384 === 0) sample();
  });
  if (!replay) return { count: n, recordBytes: bytes, fpiBytes: 0 };
  const t = model.result();
  return { count: t.records, recordBytes: t.walBytes, fpiBytes: 0 };
}

/**
 * Where the CRC worker starts paying for its thread: `columns()` over the first 8–256 MiB of
 * the range, with it and without it, alternating; medians of `runs` wall times.
 */
async function crossover(
  walDir: string,
  start: string,
  end: string,
  runs: number,
): Promise<Array<{ mib: number; workerMs: number; oneThreadMs: number }>> {
  const out: Array<{ mib: number; workerMs: number; oneThreadMs: number }> = [];
  for (const mib of [8, 16, 32, 64, 128, 256]) {
    const to = parseLsn(start) + mib * 2 ** 20;
    if (to > parseLsn(end)) break;
    const t = { columns: [] as number[], oneThread: [] as number[] };
    for (let i = 0; i < runs; i++)
      for (const mode of ['columns', 'oneThread'] as const) {
        const t0 = performance.now();
        const src = new WalDirectory(walDir, detectSegmentSize(walDir), readHistory(walDir, 1));
        const reader = new PgWalReader(src, {
          startLsn: parseLsn(start),
          endLsn: to,
          start: 'find',
          crcWorker: mode === 'columns' ? 'on' : 'off',
        });
        for await (const c of reader.columns()) void c;
        t[mode].push(performance.now() - t0);
      }
    const r = (xs: number[]) => Number(median(xs).toFixed(1));
    out.push({ mib, workerMs: r(t.columns), oneThreadMs: r(t.oneThread) });
  }
  return out;
}

/** --stats=record's counters: records, record bytes and FPI bytes per rmid and xl_info. */
class ByRecordType {
  private readonly count = new Float64Array(256 * 16);
  private readonly recBytes = new Float64Array(256 * 16);
  private readonly fpiBytes = new Float64Array(256 * 16);

  add(rmid: number, info: number, totalLength: number, fpiLength: number): void {
    const k = (rmid << 4) | (info >> 4);
    this.count[k]! += 1;
    this.recBytes[k]! += totalLength - fpiLength;
    this.fpiBytes[k]! += fpiLength;
  }

  total(): StatsTotal {
    const sum = (a: Float64Array) => a.reduce((x, y) => x + y, 0);
    return {
      count: sum(this.count),
      recordBytes: sum(this.recBytes),
      fpiBytes: sum(this.fpiBytes),
    };
  }
}
