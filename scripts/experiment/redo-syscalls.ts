/**
 * What a standby's startup process does per page of seed 001's Test A (one relation of NBuffers/k
 * pages, DELETE then VACUUM replayed from a pause), per PostgreSQL major: one sweep run
 * (sweep-runner.ts `runCell`, the same steps as `npm run sweep -- threshold --engine postgres`)
 * with `perf stat` counting the startup process's system calls and minor faults from just before the resume until
 * it exits at promotion. Its startup CPU, records and WAL bytes are the run record's. PERF_DIR also
 * `perf record`s the startup process (cpu-clock, call graphs) into PERF_DIR/perf-<major>-<k>.data.
 *
 * The question it answers (BENCHMARKS.md "Test A, one relation of NBuffers/k pages: real 13 and
 * 15, walsim, the seed"): 13 replays the same records as 15 at 3–4× the CPU a page. 13's smgrnblocks asks the kernel the fork's size (mdnblocks: an
 * lseek to the end of its last segment) on every block a record touches; 14 and later answer it
 * from the size cached during recovery. The lseek count a page says which.
 *
 * Usage: tsx scripts/experiment/redo-syscalls.ts WORKDIR MAJOR[,MAJOR...] SHARED_BUFFERS
 *        K[,K...] [PERF_DIR]  (one JSON line a run)
 */
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { spawn, type ChildProcess } from 'node:child_process';
import { loadProfile } from '../../cost-model/profile.ts';
import { pgBuildOf, resolvePgBin } from '../postgres/pg-bin.ts';
import { pgDataDir } from '../postgres/pg-cluster.ts';
import { findStartupPid } from '../postgres/startup-sched.ts';
import type { AnyEngine } from '../engines/step-session.ts';
import { planThreshold } from './plan.ts';
import { runCell } from './sweep-runner.ts';

/**
 * The events counted: system calls (tracepoints; `raw_syscalls:sys_enter` is all of them) and the
 * minor page faults (a first touch of a shared page by the process faults once per 4 KiB page).
 */
export const COUNTED_EVENTS = [
  'minor-faults',
  'raw_syscalls:sys_enter',
  'syscalls:sys_enter_lseek',
  'syscalls:sys_enter_openat',
  'syscalls:sys_enter_pread64',
  'syscalls:sys_enter_pwrite64',
  'syscalls:sys_enter_fadvise64',
  'syscalls:sys_enter_read',
  'syscalls:sys_enter_kill',
];

/** `perf stat -x,` output → counts by event (lines `<count>,<unit>,<event>,…`). */
export function parsePerfStatCsv(text: string): Record<string, number> {
  const out: Record<string, number> = {};
  for (const line of text.split('\n')) {
    const f = line.split(',');
    if (f.length < 3 || !/^\d+$/.test(f[0]!)) continue;
    out[f[2]!.replace(/^syscalls:sys_enter_/, '').replace(/^raw_syscalls:sys_enter$/, 'all')] =
      Number(f[0]);
  }
  return out;
}

interface Attached {
  stat: ChildProcess;
  statFile: string;
  record: ChildProcess | null;
}

/** perf stat (and perf record) on the paused standby's startup process. */
async function attach(engine: AnyEngine, base: string, perfDir: string | null): Promise<Attached> {
  const pgdata = pgDataDir(engine.clusterDir, 'standby');
  const pm = Number(fs.readFileSync(path.join(pgdata, 'postmaster.pid'), 'utf8').split('\n')[0]);
  const pid = findStartupPid(pm);
  if (pid === null) throw new Error('no startup process on the standby');
  const statFile = `${base}.stat.csv`;
  const events = COUNTED_EVENTS.flatMap((e) => ['-e', e]);
  const stat = spawn('perf', ['stat', '-x,', '-o', statFile, ...events, '-p', String(pid)], {
    stdio: 'ignore',
  });
  const record =
    perfDir === null
      ? null
      : spawn(
          'perf',
          ['record', '-e', 'cpu-clock', '-F', '10000', '-g', '-p', String(pid)].concat([
            '-o',
            path.join(perfDir, `${path.basename(base)}.data`),
          ]),
          { stdio: 'ignore' },
        );
  await new Promise((r) => setTimeout(r, 700)); // perf attaches before the resume
  return { stat, statFile, record };
}

const exited = (c: ChildProcess) =>
  c.exitCode !== null ? Promise.resolve() : new Promise((r) => c.once('exit', r));

async function oneRun(work: string, major: number, sb: string, k: number, perfDir: string | null) {
  const cell = planThreshold([sb], [k], false, ['postgres'], [major])[0]!;
  const base = path.join(work, `redo-${major}-${sb}-nb${k}`);
  let a: Attached | null = null;
  const settings = {
    primarySharedBuffers: '128MB',
    thresholdDivisor: 32,
    workDir: work,
    waitSeconds: 600,
    profile: loadProfile(),
  };
  const r = await runCell(cell, 1, settings, async (engine) => {
    a = await attach(engine, base, perfDir);
  });
  const at = a as Attached | null;
  if (at === null) throw new Error('perf was not attached');
  // The startup process exited at promotion, and perf with it.
  await Promise.all([exited(at.stat), ...(at.record ? [exited(at.record)] : [])]);
  const calls = parsePerfStatCsv(fs.readFileSync(at.statFile, 'utf8'));
  const pages = cell.pagesPerTable;
  const perPage = Object.fromEntries(
    Object.entries(calls).map(([n, c]) => [n, Math.round((c / pages) * 100) / 100]),
  );
  const cpu = r.startupCpuMs ?? NaN;
  return {
    major,
    sharedBuffers: sb,
    k,
    pages,
    failoverMs: Math.round(r.failoverMs),
    startupCpuMs: Math.round(cpu),
    startupRunQueueMs: Math.round(r.startupRunQueueMs ?? NaN),
    cpuUsPerPage: Math.round((cpu / pages) * 10000) / 10,
    records: r.recordsReplayed,
    walBytes: r.walBytes,
    recordsByType: r.recordsByType,
    syscalls: calls,
    syscallsPerPage: perPage,
    loadAvg1: os.loadavg()[0],
  };
}

async function main(): Promise<void> {
  const [work, majors, sb, ks, perfDir] = process.argv.slice(2);
  if (!work || !majors || !sb || !ks)
    throw new Error(
      'usage: redo-syscalls.ts WORKDIR MAJOR[,MAJOR] SHARED_BUFFERS K[,K] [PERF_DIR]',
    );
  fs.mkdirSync(work, { recursive: true });
  fs.chmodSync(work, 0o755);
  if (perfDir) fs.mkdirSync(perfDir, { recursive: true });
  for (const m of majors.split(',').map(Number)) {
    const bin = await resolvePgBin({ pgVersion: m });
    console.error(`PostgreSQL ${m}: ${bin.version}, ${pgBuildOf(bin)} (${bin.dir})`);
    for (const k of ks.split(',').map(Number))
      console.log(JSON.stringify(await oneRun(work, m, sb, k, perfDir ?? null)));
  }
}

await main();
