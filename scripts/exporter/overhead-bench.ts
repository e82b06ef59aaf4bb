/**
 * The exporter's own cost on the standby's host (BENCHMARKS.md "`npm run exporter`'s own cost"):
 * `npx tsx scripts/exporter/overhead-bench.ts --dir DIR [options]` makes a PostgreSQL pair in DIR
 * (initPgCluster: seed settings, 128MB shared_buffers), starts `npm run exporter`'s command on
 * its standby (tsx, `--pgdata`, `--primary`, `--interval`) and samples its /metrics every 2 s
 * through these states:
 *   1. keep-up: `pgbench -c 4 -j 2 -T <keepup-s>` on the primary, the standby replaying as it comes;
 *   2. idle: nothing written, `--idle-s` seconds;
 *   3. arriving: replay paused on the standby, `pgbench -i -s <scale>` run `--backlog-runs` times
 *      on the primary (each about 12.3 MB of WAL per scale unit with full_page_writes off),
 *      until a finished cycle of the exporter read all of it (the standby receives behind pgbench);
 *   4. sitting: the backlog paused, `--sit-s` seconds;
 *   5. replayed: pg_wal_replay_resume(), until the standby caught up, and 20 s more.
 * Per state: the window, the exporter's CPU (Δ process_cpu_seconds_total: every thread of its
 * process) as % of one core, and of it the HTTP thread's (its on-CPU time in
 * /proc/PID/task/PID/schedstat), RSS, the cycle durations, each scrape's time (a new connection
 * per scrape, to the last byte, as curl's time_total), the main thread's event-loop delay
 * maximum, the WAL the cycles read and of it what they read again (beyond the receive LSN's
 * advance), the starts over of their kept replay state by reason (each reads from the
 * restartpoint's redo again), the unreplayed WAL, and the load
 * average at its start and end. Each scrape over 50 ms is taken apart: the exporter's time building it (its
 * Server-Timing header), the time the HTTP thread spent runnable but waiting for a core during
 * the scrape (schedstat's run-queue wait before and after it), the time this process's thread
 * waited for a core (the scraper's side), and the HTTP thread's garbage collection in the
 * interval before (prom-client's nodejs_gc_duration_seconds, by kind).
 * The bench scrapes every 2 s; Prometheus's default is every 15 s: the CPU at that interval is
 * the CPU less the scrapes' above one per 15 s (a scrape's CPU: the HTTP thread's on-CPU time
 * during it, averaged over the state's scrapes).
 * `--states keep-up,arriving,replayed` runs only those states (idle and sitting are skipped).
 * `--samples FILE` writes every scrape's figures as JSON lines. The exporter runs in a session of
 * its own (as systemd starts it: its own autogroup on Linux), or with `--exporter-session bench`
 * in this process's (with pgbench's client threads, as before 2026-12-05 noon).
 * Prints a Markdown table; the last line of stdout is the JSON of the rows. Run it under the
 * measurement lock. The pair is removed at the end unless `--keep`.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import * as fs from 'node:fs';
import * as http from 'node:http';
import { entryArgs, PROJECT_ROOT } from '../../server/entry.ts';
import { freePort } from '../../server/ports.ts';
import { parseCli, positiveInt, runCli } from '../cli/command.ts';
import {
  destroyPgCluster,
  initPgCluster,
  pgConnect,
  pgConnectionString,
  pgDataDir,
  readPgEngine,
  runPgProgram,
} from '../postgres/pg-cluster.ts';

const USAGE = `usage: npx tsx scripts/exporter/overhead-bench.ts --dir DIR [--keepup-s 90] [--idle-s 30]
       [--scale 400] [--backlog-runs 2] [--sit-s 60] [--interval 15s] [--keep]
       [--states keep-up,idle,arriving,sitting,replayed] [--samples FILE]
       [--exporter-session own|bench]
       [--exporter-node-args="--cpu-prof --cpu-prof-dir=DIR"]`;

const STATES = ['keep-up', 'idle', 'arriving', 'sitting', 'replayed'] as const;

interface Sample {
  t: number;
  scrapeMs: number;
  /** The exporter's time building the answer (Server-Timing), ms. */
  renderMs: number | null;
  /** During the scrape: the HTTP thread on a core, and runnable waiting for one; ms. */
  httpRunMs: number;
  httpWaitMs: number;
  /** During the scrape: this (the scraper's) thread runnable waiting for a core, ms. */
  selfWaitMs: number;
  /** The HTTP thread's on-CPU time since it started, s. */
  httpCpuS: number;
  /** The HTTP thread's garbage collection time so far by kind (major, minor, …), s. */
  gcS: Record<string, number>;
  heapUsed: number;
  cpuS: number;
  rss: number;
  cycleS: number | null;
  walRead: number;
  /** The receive LSN the last finished cycle read to, as a byte position (null: none yet). */
  receiveLsn: number | null;
  /** The kept replay state's starts over so far, by reason (walsim_standby_model_restarts_total). */
  restarts: Record<string, number>;
  unreplayed: number | null;
  loopMaxS: number | null;
}

/** A scrape over 50 ms taken apart (Sample's fields, ms; gc: the interval before it). */
interface SlowScrape {
  ms: number;
  renderMs: number | null;
  httpWaitMs: number;
  selfWaitMs: number;
  gcMs: Record<string, number>;
  loopMaxMs: number;
}

interface Row {
  state: string;
  windowS: number;
  cpuPct: number;
  rssMiB: [number, number];
  cycleS: [number, number];
  scrapeMs: { min: number; median: number; max: number; n: number };
  loopDelayMaxMs: number;
  httpCpuPct: number;
  /** The HTTP thread's CPU a scrape took (mean of its on-CPU time during each scrape), ms. */
  scrapeCpuMs: number;
  /** The exporter's CPU had Prometheus scraped every 15 s instead of every 2 s: cpuPct less
   * the scrapes' CPU above one per 15 s. */
  cpuPctAt15s: number;
  slow: SlowScrape[];
  walReadMiB: number;
  /**
   * Of it, WAL read again (what the cycles read beyond the receive LSN's advance: the cut
   * windows, a start over's read from the redo); NaN without a receive LSN at both ends.
   */
  rereadMiB: number;
  /** Starts over of the kept replay state in the window, by reason (those that happened). */
  restarts: Record<string, number>;
  unreplayedMiB: [number, number];
  load: [string, string];
  note: string;
}

const MiB = 1024 * 1024;
const loadavg = () => fs.readFileSync('/proc/loadavg', 'utf8').split(' ').slice(0, 3).join(' ');

const SCRAPE_TIMEOUT_MS = 30_000;

/** One GET on a fresh connection, timed to its last byte; the Server-Timing render, ms. */
function scrapeOnce(port: number): Promise<{ ms: number; body: string; renderMs: number | null }> {
  const t0 = performance.now();
  return new Promise((resolve, reject) => {
    const req = http.get({ host: '127.0.0.1', port, path: '/metrics', agent: false }, (res) => {
      let body = '';
      const timing = /render;dur=([\d.]+)/.exec(String(res.headers['server-timing'] ?? ''));
      res.setEncoding('utf8');
      res.on('data', (d: string) => (body += d));
      res.on('end', () =>
        resolve({
          ms: performance.now() - t0,
          body,
          renderMs: timing ? Number(timing[1]) : null,
        }),
      );
    });
    req.on('error', reject);
    // A stopped or hung exporter ends the bench with an error instead of a sample never taken.
    req.setTimeout(SCRAPE_TIMEOUT_MS, () =>
      req.destroy(new Error(`no answer from the exporter in ${SCRAPE_TIMEOUT_MS / 1000} s`)),
    );
  });
}

/** A thread's schedstat: ns on a core, ns runnable waiting for one (zeros where unreadable). */
function schedstat(file: string): { runNs: number; waitNs: number } {
  try {
    const [run, wait] = fs.readFileSync(file, 'utf8').trim().split(/\s+/).map(Number);
    return { runNs: run!, waitNs: wait! };
  } catch {
    return { runNs: 0, waitNs: 0 };
  }
}

/** The kept replay state's starts over so far, by reason (the first standby's). */
function restartsByReason(body: string): Record<string, number> {
  const out: Record<string, number> = {};
  const re = /^walsim_standby_model_restarts_total\{[^}]*reason="(\w+)"[^}]*\} (\S+)$/gm;
  for (const m of body.matchAll(re)) out[m[1]!] ??= Number(m[2]);
  return out;
}

/** The HTTP thread's garbage collection seconds so far, by kind. */
function gcSeconds(body: string): Record<string, number> {
  const out: Record<string, number> = {};
  for (const m of body.matchAll(/^nodejs_gc_duration_seconds_sum\{kind="(\w+)"\} (\S+)$/gm))
    out[m[1]!] = Number(m[2]);
  return out;
}

/** The first sample of `name` (any labels) in an exposition, null when absent. */
function metric(body: string, name: string): number | null {
  const m = new RegExp(`^${name}(?:\\{[^}]*\\})? (\\S+)$`, 'm').exec(body);
  return m === null ? null : Number(m[1]);
}

/** One scrape of the exporter whose main thread (the HTTP thread) is `pid`. */
async function sample(port: number, pid: number): Promise<Sample> {
  const httpFile = `/proc/${pid}/task/${pid}/schedstat`;
  const h0 = schedstat(httpFile);
  const s0 = schedstat('/proc/thread-self/schedstat');
  const { ms, body, renderMs } = await scrapeOnce(port);
  const h1 = schedstat(httpFile);
  const s1 = schedstat('/proc/thread-self/schedstat');
  return {
    t: Date.now() / 1000,
    scrapeMs: ms,
    renderMs,
    httpRunMs: (h1.runNs - h0.runNs) / 1e6,
    httpWaitMs: (h1.waitNs - h0.waitNs) / 1e6,
    selfWaitMs: (s1.waitNs - s0.waitNs) / 1e6,
    httpCpuS: h1.runNs / 1e9,
    gcS: gcSeconds(body),
    heapUsed: metric(body, 'nodejs_heap_size_used_bytes') ?? NaN,
    cpuS: metric(body, 'process_cpu_seconds_total') ?? NaN,
    rss: metric(body, 'process_resident_memory_bytes') ?? NaN,
    cycleS: metric(body, 'walsim_standby_prediction_duration_seconds'),
    walRead: metric(body, 'walsim_standby_wal_read_bytes_total') ?? 0,
    receiveLsn: metric(body, 'walsim_standby_wal_receive_lsn_bytes'),
    restarts: restartsByReason(body),
    unreplayed: metric(body, 'walsim_standby_unreplayed_wal_bytes'),
    loopMaxS: metric(body, 'nodejs_eventloop_lag_max_seconds'),
  };
}

/**
 * Samples every 2 s until `stop` is called, and once more then: a state's last sample is taken at
 * its end (a cycle that finished in its last 2 s counts in it, not in the next state).
 */
function sampler(port: number, pid: number): { stop(): Promise<Sample[]> } {
  const out: Sample[] = [];
  let running = true;
  const loop = (async () => {
    while (running) {
      const next = Date.now() + 2000;
      out.push(await sample(port, pid));
      await new Promise((r) => setTimeout(r, Math.max(0, next - Date.now())));
    }
  })();
  return {
    async stop() {
      running = false;
      await loop;
      out.push(await sample(port, pid));
      return out;
    },
  };
}

const range = (xs: number[]): [number, number] =>
  xs.length === 0 ? [NaN, NaN] : [Math.min(...xs), Math.max(...xs)];

function summarize(state: string, s: Sample[], load: [string, string], note: string): Row {
  const a = s[0]!;
  const z = s.at(-1)!;
  const scrapes = s.map((x) => x.scrapeMs).sort((x, y) => x - y);
  const round = (x: number, d = 1) => Math.round(x * 10 ** d) / 10 ** d;
  const unreplayed = s.flatMap((x) => (x.unreplayed === null ? [] : [x.unreplayed / MiB]));
  const scrapeCpuMs = s.reduce((t, x) => t + x.httpRunMs, 0) / s.length;
  const cpuPct = ((z.cpuS - a.cpuS) / (z.t - a.t)) * 100;
  return {
    state,
    windowS: round(z.t - a.t, 0),
    cpuPct: round(cpuPct),
    rssMiB: range(s.map((x) => x.rss / MiB)).map((x) => round(x, 0)) as [number, number],
    cycleS: range(s.flatMap((x) => (x.cycleS === null ? [] : [x.cycleS]))).map((x) =>
      round(x, 2),
    ) as [number, number],
    scrapeMs: {
      min: round(scrapes[0]!),
      median: round(scrapes[Math.floor(scrapes.length / 2)]!),
      max: round(scrapes.at(-1)!),
      n: scrapes.length,
    },
    loopDelayMaxMs: round(Math.max(...s.map((x) => (x.loopMaxS ?? 0) * 1000))),
    httpCpuPct: round(((z.httpCpuS - a.httpCpuS) / (z.t - a.t)) * 100),
    scrapeCpuMs: round(scrapeCpuMs, 2),
    cpuPctAt15s: round(cpuPct - (scrapeCpuMs / 1000) * (1 / 2 - 1 / 15) * 100),
    slow: slowScrapes(s),
    walReadMiB: round((z.walRead - a.walRead) / MiB),
    rereadMiB: round(
      (z.walRead - a.walRead - ((z.receiveLsn ?? NaN) - (a.receiveLsn ?? NaN))) / MiB,
    ),
    restarts: Object.fromEntries(
      Object.entries(z.restarts)
        .map(([k, v]) => [k, v - (a.restarts[k] ?? 0)] as const)
        .filter(([, v]) => v > 0),
    ),
    unreplayedMiB: [round(unreplayed[0] ?? NaN, 0), round(unreplayed.at(-1) ?? NaN, 0)],
    load,
    note,
  };
}

/** The scrapes over 50 ms, each with what it waited for (`SlowScrape`). */
function slowScrapes(s: Sample[]): SlowScrape[] {
  const r1 = (x: number) => Math.round(x * 10) / 10;
  return s.flatMap((x, i) => {
    if (x.scrapeMs <= 50) return [];
    const before = s[i - 1]?.gcS ?? {};
    const gcMs = Object.fromEntries(
      Object.entries(x.gcS)
        .map(([k, v]) => [k, r1((v - (before[k] ?? 0)) * 1000)] as const)
        .filter(([, v]) => i > 0 && v > 0),
    );
    return [
      {
        ms: r1(x.scrapeMs),
        renderMs: x.renderMs === null ? null : r1(x.renderMs),
        httpWaitMs: r1(x.httpWaitMs),
        selfWaitMs: r1(x.selfWaitMs),
        gcMs,
        loopMaxMs: r1((x.loopMaxS ?? 0) * 1000),
      },
    ];
  });
}

/** Where `--samples FILE` writes each scrape (null: nowhere). */
let samplesFile: string | null = null;

/** Sample while `work` runs (and `afterS` seconds after it), as one row. */
async function during(
  x: { port: number; pid: number },
  state: string,
  work: () => Promise<string>,
  afterS = 0,
): Promise<Row> {
  const load0 = loadavg();
  const s = sampler(x.port, x.pid);
  const note = await work();
  await new Promise((r) => setTimeout(r, afterS * 1000));
  const samples = await s.stop();
  if (samplesFile !== null)
    fs.appendFileSync(
      samplesFile,
      samples.map((v) => JSON.stringify({ state, ...v }) + '\n').join(''),
    );
  const row = summarize(state, samples, [load0, loadavg()], note);
  console.error(`overhead-bench: ${JSON.stringify(row)}`);
  return row;
}

const sleep = (s: number) => new Promise<string>((r) => setTimeout(() => r(''), s * 1000));

/**
 * The exporter as `npm run exporter` runs it (tsx), on a free loopback port, once it is up; in a
 * session of its own (`ownSession`: as systemd starts a service, so the scheduler's autogroup
 * it shares CPU in is its own, not this process's and pgbench's), or in this one.
 */
async function startExporter(
  dir: string,
  intervalText: string,
  nodeArgs: string[],
  ownSession: boolean,
): Promise<{ child: ChildProcess; port: number }> {
  const port = await freePort('127.0.0.1');
  const env = { ...process.env };
  delete env.WALSIM_ENTRY_BUNDLE;
  const args = [
    ...nodeArgs,
    ...entryArgs('scripts/exporter.ts'),
    ...['--standby', pgConnectionString(dir, 'standby'), '--pgdata', pgDataDir(dir, 'standby')],
    ...['--primary', pgConnectionString(dir, 'primary'), '--listen', `127.0.0.1:${port}`],
    ...['--interval', intervalText],
  ];
  const child = spawn(process.execPath, args, {
    cwd: PROJECT_ROOT,
    env,
    stdio: ['ignore', 'inherit', 'inherit'],
    detached: ownSession,
  });
  for (let i = 0; ; i++) {
    const s = await scrapeOnce(port).catch(() => null);
    if (s !== null && metric(s.body, 'walsim_standby_up') === 1) break;
    if (child.exitCode !== null || i > 600) throw new Error('the exporter did not come up');
    await sleep(0.5);
  }
  return { child, port };
}

/**
 * The scheduler's autogroups (one per session, shared fairly when enabled) of the exporter,
 * this process (and pgbench, its child) and the two postmasters: whose CPU competes with whose.
 */
function autogroups(dir: string, exporterPid: number): string {
  const read = (f: string) => {
    try {
      return fs.readFileSync(f, 'utf8').trim();
    } catch {
      return '?';
    }
  };
  const pm = (node: 'primary' | 'standby') =>
    read(`${pgDataDir(dir, node)}/postmaster.pid`).split('\n')[0]!;
  const pids: Array<[string, string]> = [
    ['exporter', String(exporterPid)],
    ['bench', String(process.pid)],
    ['primary', pm('primary')],
    ['standby', pm('standby')],
  ];
  const groups = pids.map(([k, pid]) => `${k} ${read(`/proc/${pid}/autogroup`)}`).join(', ');
  return `sched_autogroup_enabled ${read('/proc/sys/kernel/sched_autogroup_enabled')}: ${groups}`;
}

async function pgbench(dir: string, args: string[]): Promise<string> {
  const e = readPgEngine(dir);
  const conn = ['-h', '127.0.0.1', '-p', String(e.ports.primary), '-U', 'postgres'];
  const r = await runPgProgram(e, 'pgbench', [...conn, ...args, 'postgres']);
  return /tps = ([\d.]+)/.exec(r.stdout)?.[1] ?? '';
}

async function standbySql(dir: string, sql: string): Promise<string> {
  const c = await pgConnect(dir, 'standby', 'overhead-bench');
  try {
    return String(Object.values((await c.query(sql)).rows[0] ?? {})[0]);
  } finally {
    await c.end();
  }
}

/** Until the standby replayed everything it received and received what the primary wrote. */
async function caughtUp(dir: string): Promise<void> {
  const p = await pgConnect(dir, 'primary', 'overhead-bench');
  try {
    for (;;) {
      const lsn = (await p.query('SELECT pg_current_wal_lsn()::text AS l')).rows[0].l as string;
      const behind = await standbySql(
        dir,
        `SELECT pg_wal_lsn_diff('${lsn}', pg_last_wal_replay_lsn()) > 0`,
      );
      if (behind === 'false') return;
      await sleep(1);
    }
  } finally {
    await p.end();
  }
}

/**
 * Until a finished cycle of the exporter read the WAL the primary wrote (its receive LSN gauge at
 * the primary's LSN now): the WAL arriving after pgbench returned — the standby receiving behind
 * it, the cycle that began before — is read in the arriving state, not in the one after it.
 */
async function exporterReadAll(dir: string, port: number): Promise<void> {
  const p = await pgConnect(dir, 'primary', 'overhead-bench');
  let lsn: number;
  try {
    const sql = "SELECT pg_wal_lsn_diff(pg_current_wal_lsn(), '0/0')::text AS l";
    lsn = Number((await p.query(sql)).rows[0].l);
  } finally {
    await p.end();
  }
  for (let i = 0; ; i++) {
    const got = metric((await scrapeOnce(port)).body, 'walsim_standby_wal_receive_lsn_bytes');
    if (got !== null && got >= lsn) return;
    if (i >= 600) throw new Error('the exporter did not read the WAL written within 10 minutes');
    await sleep(1);
  }
}

async function states(dir: string, x: { port: number; pid: number }, o: Options): Promise<Row[]> {
  const rows: Row[] = [];
  const run = (st: (typeof STATES)[number]) => o.states.includes(st);
  if (run('keep-up'))
    rows.push(
      await during(x, `keep-up: pgbench -c 4 -j 2 -T ${o.keepupS}`, async () => {
        const tps = await pgbench(dir, ['-c', '4', '-j', '2', '-T', String(o.keepupS)]);
        await caughtUp(dir);
        return `${tps} tps`;
      }),
    );
  if (run('idle')) rows.push(await during(x, 'idle', () => sleep(o.idleS)));
  await standbySql(dir, 'SELECT pg_wal_replay_pause()');
  const arrive = async () => {
    for (let i = 0; i < o.runs; i++) await pgbench(dir, ['-i', '-q', '-s', String(o.scale)]);
    await exporterReadAll(dir, x.port);
    return 'until the exporter read it all';
  };
  const arriving = `arriving: replay paused, pgbench -i -s ${o.scale} x${o.runs}`;
  if (run('arriving')) rows.push(await during(x, arriving, arrive));
  else await arrive();
  if (run('sitting')) rows.push(await during(x, 'sitting: replay paused', () => sleep(o.sitS)));
  if (!run('replayed')) return rows;
  const t0 = Date.now();
  rows.push(
    await during(
      x,
      'replayed: pg_wal_replay_resume() until caught up, then 20 s',
      async () => {
        await standbySql(dir, 'SELECT pg_wal_replay_resume()');
        await caughtUp(dir);
        return `caught up in ${Math.round((Date.now() - t0) / 1000)} s`;
      },
      20,
    ),
  );
  return rows;
}

interface Options {
  keepupS: number;
  idleS: number;
  scale: number;
  runs: number;
  sitS: number;
  states: readonly string[];
}

function table(rows: Row[]): string {
  const head =
    '| state | window | CPU, % of one core (HTTP thread; scrape CPU; at one scrape per 15 s) | RSS | cycle | scrape min / median / max (n) | main loop delay max | scrapes > 50 ms: ms (render; HTTP thread waiting for a core; scraper waiting; HTTP thread GC before) | WAL read (of it read again) | unreplayed | load | note |\n| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |';
  const slow = (x: SlowScrape) =>
    `${x.ms} (${x.renderMs}; ${x.httpWaitMs}; ${x.selfWaitMs}; ${Object.entries(x.gcMs)
      .map(([k, v]) => `${k} ${v}`)
      .join(' ')})`;
  const line = (r: Row) =>
    `| ${r.state} | ${r.windowS} s | ${r.cpuPct} % (${r.httpCpuPct} %; ${r.scrapeCpuMs} ms; ${r.cpuPctAt15s} %) | ${r.rssMiB[0]}–${r.rssMiB[1]} MiB | ${r.cycleS[0]}–${r.cycleS[1]} s | ${r.scrapeMs.min} / ${r.scrapeMs.median} / ${r.scrapeMs.max} ms (${r.scrapeMs.n}) | ${r.loopDelayMaxMs} ms | ${r.slow.map(slow).join(', ') || 'none'} | ${r.walReadMiB} MiB (read again: ${r.rereadMiB} MiB)${
      Object.keys(r.restarts).length > 0
        ? ` (starts over: ${Object.entries(r.restarts)
            .map(([k, v]) => `${k} ${v}`)
            .join(', ')})`
        : ''
    } | ${r.unreplayedMiB[0]} → ${r.unreplayedMiB[1]} MiB | ${r.load[0]} → ${r.load[1]} | ${r.note} |`;
  return [head, ...rows.map(line)].join('\n');
}

async function main(): Promise<number> {
  const { values } = parseCli(
    process.argv.slice(2),
    {
      dir: { type: 'string' },
      'keepup-s': { type: 'string', default: '90' },
      'idle-s': { type: 'string', default: '30' },
      scale: { type: 'string', default: '400' },
      'backlog-runs': { type: 'string', default: '2' },
      'sit-s': { type: 'string', default: '60' },
      interval: { type: 'string', default: '15s' },
      keep: { type: 'boolean' },
      states: { type: 'string', default: STATES.join(',') },
      samples: { type: 'string' },
      'exporter-node-args': { type: 'string', default: '' },
      'exporter-session': { type: 'string', default: 'own' },
    },
    USAGE,
  );
  if (values.dir === undefined) throw new Error(`--dir is required\n${USAGE}`);
  const dir = values.dir;
  const o: Options = {
    keepupS: positiveInt(values['keepup-s'], 'keepup-s'),
    idleS: positiveInt(values['idle-s'], 'idle-s'),
    scale: positiveInt(values.scale, 'scale'),
    runs: positiveInt(values['backlog-runs'], 'backlog-runs'),
    sitS: positiveInt(values['sit-s'], 'sit-s'),
    states: values.states.split(','),
  };
  const unknown = o.states.filter((st) => !(STATES as readonly string[]).includes(st));
  if (unknown.length > 0)
    throw new Error(`--states ${unknown.join(',')}: not a state (${STATES.join(', ')})`);
  samplesFile = values.samples ?? null;
  const session = values['exporter-session'];
  if (session !== 'own' && session !== 'bench')
    throw new Error(`--exporter-session ${session}: own (its own session, default) or bench`);
  await initPgCluster(dir, { sharedBuffers: '128MB', primarySharedBuffers: '128MB' });
  let exporter: ChildProcess | null = null;
  try {
    await pgbench(dir, ['-i', '-q', '-s', '10']);
    await caughtUp(dir);
    const nodeArgs = values['exporter-node-args'].split(' ').filter((a) => a !== '');
    const x = await startExporter(dir, values.interval, nodeArgs, session === 'own');
    exporter = x.child;
    console.error(
      `overhead-bench: exporter pid ${x.child.pid} on port ${x.port}; load ${loadavg()}; ${autogroups(dir, x.child.pid!)}`,
    );
    const rows = await states(dir, { port: x.port, pid: x.child.pid! }, o);
    console.log(table(rows));
    console.log(JSON.stringify(rows));
  } finally {
    if (exporter !== null && exporter.exitCode === null) {
      const exited = new Promise((r) => exporter!.once('exit', r));
      process.kill(exporter.pid!, 'SIGTERM');
      await exited;
    }
    if (!values.keep) await destroyPgCluster(dir);
  }
  return 0;
}

runCli(main, USAGE);
