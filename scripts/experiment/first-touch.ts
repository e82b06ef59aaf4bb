/**
 * The first full scan of a standby startup process's life, against its second (cost-model/README.md
 * "scan.descriptorPageMapped"): one pair per pool; the standby is restarted `rounds` times, each
 * time after a restartpoint past the drops already replayed, so that its new startup process
 * begins replay after them. Then two DROP TABLEs of never-read tables (each one
 * DropRelFileNodesAllBuffers full scan: sizes not cached) are replayed one at a time, replay
 * resumed from a pause, and the startup process's CPU (schedstat), user and system time and minor
 * faults (/proc/<pid>/stat) and its unmapped descriptor pages (pagemap) are read around each. The
 * difference between the two drops is what the first scan pays to map the descriptor array.
 * FT_PERF=DIR also `perf record`s the startup process over the first drop of the first round.
 *
 * Usage: tsx scripts/experiment/first-touch.ts WORKDIR SIZE[,SIZE...] [ROUNDS]  (one JSON line a drop)
 */
import * as fs from 'node:fs';
import * as path from 'node:path';
import { spawn, type ChildProcess } from 'node:child_process';
import type pg from 'pg';
import {
  destroyPgCluster,
  initPgCluster,
  pgConnect,
  pgCtl,
  pgDataDir,
} from '../postgres/pg-cluster.ts';
import { findStartupPid, unmappedDescriptorPages } from '../postgres/startup-sched.ts';

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

function startupPid(pgdata: string): number {
  const pm = Number(fs.readFileSync(path.join(pgdata, 'postmaster.pid'), 'utf8').split('\n')[0]);
  const pid = findStartupPid(pm);
  if (pid === null) throw new Error('no startup process');
  return pid;
}

/** schedstat CPU ns, minor faults, user and system clock ticks (10 ms) of one process. */
function procFigures(pid: number) {
  const sched = fs.readFileSync(`/proc/${pid}/schedstat`, 'utf8').split(' ');
  const stat = fs.readFileSync(`/proc/${pid}/stat`, 'utf8');
  const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
  return {
    cpuNs: Number(sched[0]),
    minflt: Number(fields[7]),
    userTicks: Number(fields[11]),
    sysTicks: Number(fields[12]),
  };
}

async function until(c: pg.Client, sql: string, arg: string, ms: number): Promise<void> {
  while (!(await c.query(sql, [arg])).rows[0].ok) await sleep(ms);
}

function perfRecord(pid: number, file: string): ChildProcess {
  const args = ['record', '-e', 'cpu-clock', '-F', '20000', '-g', '-p', String(pid), '-o', file];
  return spawn('perf', args, { stdio: 'ignore' });
}

/** Replay one DROP TABLE from a pause; the startup process's figures around it. */
async function measuredDrop(dir: string, p: pg.Client, table: string, perfFile: string | null) {
  const pgdata = pgDataDir(dir, 'standby');
  const s = await pgConnect(dir, 'standby');
  try {
    const row = (
      await s.query(
        "SELECT off::float8 AS off, allocated_size::float8 AS size FROM pg_shmem_allocations WHERE name = 'Buffer Descriptors'",
      )
    ).rows[0] as { off: number; size: number };
    await s.query('SELECT pg_wal_replay_pause()');
    while ((await s.query('SELECT pg_get_wal_replay_pause_state() AS s')).rows[0].s !== 'paused')
      await sleep(10);
    await p.query(`DROP TABLE ${table}`);
    const target = (await p.query('SELECT pg_current_wal_flush_lsn()::text AS l')).rows[0].l;
    await until(s, 'SELECT pg_last_wal_receive_lsn() >= $1::pg_lsn AS ok', target, 5);
    const pid = startupPid(pgdata);
    const before = unmappedDescriptorPages(pgdata, row.off, row.size);
    const perf = perfFile === null ? null : perfRecord(pid, perfFile);
    if (perf !== null) await sleep(500);
    const a = procFigures(pid);
    const t0 = performance.now();
    await s.query('SELECT pg_wal_replay_resume()');
    await until(s, 'SELECT pg_last_wal_replay_lsn() >= $1::pg_lsn AS ok', target, 2);
    const wallMs = performance.now() - t0;
    const b = procFigures(pid);
    if (perf !== null) {
      perf.kill('SIGINT');
      await new Promise((res) => perf.on('exit', res));
    }
    const after = unmappedDescriptorPages(pgdata, row.off, row.size);
    return {
      descriptorPages: before?.pages,
      unmappedBefore: before?.unmapped,
      unmappedAfter: after?.unmapped,
      startupCpuMs: (b.cpuNs - a.cpuNs) / 1e6,
      userMs: (b.userTicks - a.userTicks) * 10,
      sysMs: (b.sysTicks - a.sysTicks) * 10,
      minorFaults: b.minflt - a.minflt,
      wallMs: Math.round(wallMs * 10) / 10,
    };
  } finally {
    await s.end();
  }
}

/** A restartpoint past the drops replayed so far, then a standby restart (a new startup process). */
async function restartStandby(dir: string, p: pg.Client): Promise<void> {
  await p.query('CHECKPOINT');
  await sleep(500);
  const sb = await pgConnect(dir, 'standby');
  await sb.query('CHECKPOINT');
  await sb.end();
  await pgCtl(dir, 'standby', 'stop');
  await pgCtl(dir, 'standby', 'start');
  await sleep(1000);
}

async function oneSize(work: string, size: string, rounds: number): Promise<void> {
  const dir = path.join(work, `ft-${size}`);
  await initPgCluster(dir, { sharedBuffers: size, primarySharedBuffers: '128MB' });
  try {
    const p = await pgConnect(dir, 'primary');
    for (let i = 0; i < rounds * 2; i++) await p.query(`CREATE TABLE ft${i} (x text)`);
    for (let r = 0; r < rounds; r++) {
      await restartStandby(dir, p);
      for (const k of [0, 1]) {
        const perfFile =
          process.env.FT_PERF && r === 0 && k === 0
            ? path.join(process.env.FT_PERF, `perf-${size}.data`)
            : null;
        const m = await measuredDrop(dir, p, `ft${r * 2 + k}`, perfFile);
        console.log(JSON.stringify({ size, round: r, drop: k === 0 ? 'first' : 'second', ...m }));
      }
    }
    await p.end();
  } finally {
    await destroyPgCluster(dir).catch(() => {});
  }
}

const [work, sizes, rounds] = process.argv.slice(2);
if (!work || !sizes) throw new Error('usage: first-touch.ts WORKDIR SIZE[,SIZE...] [ROUNDS]');
fs.mkdirSync(work, { recursive: true });
fs.chmodSync(work, 0o755);
for (const size of sizes.split(',')) await oneSize(work, size, Number(rounds ?? 3));
