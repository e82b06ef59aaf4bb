/**
 * The exporter's own cost on the standby's host (BENCHMARKS.md "`npm run exporter`'s own cost"):
 * `npx tsx scripts/exporter/overhead-bench.ts --dir DIR [options]` makes a PostgreSQL pair in DIR
 * (initPgCluster: seed settings, 128MB shared_buffers), starts `npm run exporter`'s command on
 * its standby (tsx, `--pgdata`, `--primary`, `--interval`) and samples its /metrics every 2 s
 * through these states:
 *   1. keep-up: `pgbench -c 4 -j 2 -T <keepup-s>` on the primary, the standby replaying as it comes;
 *   2. idle: nothing written, `--idle-s` seconds;
 *   3. arriving: replay paused on the standby, `pgbench -i -s <scale>` run `--backlog-runs` times
 *      on the primary (each about 12.3 MB of WAL per scale unit with full_page_writes off);
 *   4. sitting: the backlog paused, `--sit-s` seconds;
 *   5. replayed: pg_wal_replay_resume(), until the standby caught up, and 20 s more.
 * Per state: the window, the exporter's CPU (Δ process_cpu_seconds_total: every thread of its
 * process) as % of one core, RSS, the cycle durations, each scrape's time (a new connection per
 * scrape, to the last byte, as curl's time_total), the main thread's event-loop delay maximum,
 * the WAL the cycles read, the unreplayed WAL, and the load average at its start and end.
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
       [--exporter-node-args="--cpu-prof --cpu-prof-dir=DIR"]`;

interface Sample {
  t: number;
  scrapeMs: number;
  cpuS: number;
  rss: number;
  cycleS: number | null;
  walRead: number;
  unreplayed: number | null;
  loopMaxS: number | null;
}

interface Row {
  state: string;
  windowS: number;
  cpuPct: number;
  rssMiB: [number, number];
  cycleS: [number, number];
  scrapeMs: { min: number; median: number; max: number; n: number };
  loopDelayMaxMs: number;
  walReadMiB: number;
  unreplayedMiB: [number, number];
  load: [string, string];
  note: string;
}

const MiB = 1024 * 1024;
const loadavg = () => fs.readFileSync('/proc/loadavg', 'utf8').split(' ').slice(0, 3).join(' ');

/** One GET on a fresh connection, timed to its last byte. */
function scrapeOnce(port: number): Promise<{ ms: number; body: string }> {
  const t0 = performance.now();
  return new Promise((resolve, reject) => {
    http
      .get({ host: '127.0.0.1', port, path: '/metrics', agent: false }, (res) => {
        let body = '';
        res.setEncoding('utf8');
        res.on('data', (d: string) => (body += d));
        res.on('end', () => resolve({ ms: performance.now() - t0, body }));
      })
      .on('error', reject);
  });
}

/** The first sample of `name` (any labels) in an exposition, null when absent. */
function metric(body: string, name: string): number | null {
  const m = new RegExp(`^${name}(?:\\{[^}]*\\})? (\\S+)$`, 'm').exec(body);
  return m === null ? null : Number(m[1]);
}

async function sample(port: number): Promise<Sample> {
  const { ms, body } = await scrapeOnce(port);
  return {
    t: Date.now() / 1000,
    scrapeMs: ms,
    cpuS: metric(body, 'process_cpu_seconds_total') ?? NaN,
    rss: metric(body, 'process_resident_memory_bytes') ?? NaN,
    cycleS: metric(body, 'walsim_standby_prediction_duration_seconds'),
    walRead: metric(body, 'walsim_standby_wal_read_bytes_total') ?? 0,
    unreplayed: metric(body, 'walsim_standby_unreplayed_wal_bytes'),
    loopMaxS: metric(body, 'nodejs_eventloop_lag_max_seconds'),
  };
}

/** Samples every 2 s until `stop` is called. */
function sampler(port: number): { stop(): Promise<Sample[]> } {
  const out: Sample[] = [];
  let running = true;
  const loop = (async () => {
    while (running) {
      const next = Date.now() + 2000;
      out.push(await sample(port));
      await new Promise((r) => setTimeout(r, Math.max(0, next - Date.now())));
    }
  })();
  return {
    async stop() {
      running = false;
      await loop;
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
  return {
    state,
    windowS: round(z.t - a.t, 0),
    cpuPct: round(((z.cpuS - a.cpuS) / (z.t - a.t)) * 100),
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
    walReadMiB: round((z.walRead - a.walRead) / MiB),
    unreplayedMiB: [round(unreplayed[0] ?? NaN, 0), round(unreplayed.at(-1) ?? NaN, 0)],
    load,
    note,
  };
}

/** Sample while `work` runs (and `afterS` seconds after it), as one row. */
async function during(
  port: number,
  state: string,
  work: () => Promise<string>,
  afterS = 0,
): Promise<Row> {
  const load0 = loadavg();
  const s = sampler(port);
  const note = await work();
  await new Promise((r) => setTimeout(r, afterS * 1000));
  const samples = await s.stop();
  const row = summarize(state, samples, [load0, loadavg()], note);
  console.error(`overhead-bench: ${JSON.stringify(row)}`);
  return row;
}

const sleep = (s: number) => new Promise<string>((r) => setTimeout(() => r(''), s * 1000));

/** The exporter as `npm run exporter` runs it (tsx), on a free loopback port, once it is up. */
async function startExporter(
  dir: string,
  intervalText: string,
  nodeArgs: string[],
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
  });
  for (let i = 0; ; i++) {
    const s = await scrapeOnce(port).catch(() => null);
    if (s !== null && metric(s.body, 'walsim_standby_up') === 1) break;
    if (child.exitCode !== null || i > 600) throw new Error('the exporter did not come up');
    await sleep(0.5);
  }
  return { child, port };
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

async function states(dir: string, port: number, o: Options): Promise<Row[]> {
  const rows: Row[] = [];
  rows.push(
    await during(port, `keep-up: pgbench -c 4 -j 2 -T ${o.keepupS}`, async () => {
      const tps = await pgbench(dir, ['-c', '4', '-j', '2', '-T', String(o.keepupS)]);
      await caughtUp(dir);
      return `${tps} tps`;
    }),
  );
  rows.push(await during(port, 'idle', () => sleep(o.idleS)));
  await standbySql(dir, 'SELECT pg_wal_replay_pause()');
  rows.push(
    await during(port, `arriving: replay paused, pgbench -i -s ${o.scale} x${o.runs}`, async () => {
      for (let i = 0; i < o.runs; i++) await pgbench(dir, ['-i', '-q', '-s', String(o.scale)]);
      return '';
    }),
  );
  rows.push(await during(port, 'sitting: replay paused', () => sleep(o.sitS)));
  const t0 = Date.now();
  rows.push(
    await during(
      port,
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
}

function table(rows: Row[]): string {
  const head =
    '| state | window | CPU, % of one core | RSS | cycle | scrape min / median / max (n) | main loop delay max | WAL read | unreplayed | load | note |\n| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |';
  const line = (r: Row) =>
    `| ${r.state} | ${r.windowS} s | ${r.cpuPct} % | ${r.rssMiB[0]}–${r.rssMiB[1]} MiB | ${r.cycleS[0]}–${r.cycleS[1]} s | ${r.scrapeMs.min} / ${r.scrapeMs.median} / ${r.scrapeMs.max} ms (${r.scrapeMs.n}) | ${r.loopDelayMaxMs} ms | ${r.walReadMiB} MiB | ${r.unreplayedMiB[0]} → ${r.unreplayedMiB[1]} MiB | ${r.load[0]} → ${r.load[1]} | ${r.note} |`;
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
      'exporter-node-args': { type: 'string', default: '' },
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
  };
  await initPgCluster(dir, { sharedBuffers: '128MB', primarySharedBuffers: '128MB' });
  let exporter: ChildProcess | null = null;
  try {
    await pgbench(dir, ['-i', '-q', '-s', '10']);
    await caughtUp(dir);
    const nodeArgs = values['exporter-node-args'].split(' ').filter((a) => a !== '');
    const x = await startExporter(dir, values.interval, nodeArgs);
    exporter = x.child;
    console.error(
      `overhead-bench: exporter pid ${x.child.pid} on port ${x.port}; load ${loadavg()}`,
    );
    const rows = await states(dir, x.port, o);
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
