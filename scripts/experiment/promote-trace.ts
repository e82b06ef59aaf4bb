/**
 * Where the open-for-writes phase of a promotion goes (from "archive recovery complete" to
 * "database system is ready to accept connections"): one pair (standby SIZE), a small backlog made
 * with replay paused, then `pg_ctl promote` with `strace -f -tt -T` attached to the standby's
 * postmaster and its children (OUTFILE: the trace; the standby's log is copied beside it);
 * PT_PERF=1: `perf record` of them instead.
 *
 * Usage: tsx scripts/experiment/promote-trace.ts WORKDIR SIZE OUTFILE
 */
import * as fs from 'node:fs';
import * as path from 'node:path';
import { spawn } from 'node:child_process';
import {
  destroyPgCluster,
  initPgCluster,
  pgConnect,
  pgCtl,
  pgDataDir,
} from '../postgres/pg-cluster.ts';

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
const [work, size, out] = process.argv.slice(2);
if (!work || !size || !out) throw new Error('usage: promote-trace.ts WORKDIR SIZE OUTFILE');
fs.mkdirSync(work, { recursive: true });
fs.chmodSync(work, 0o755);
const dir = path.join(work, 'promote');
await initPgCluster(dir, { sharedBuffers: size, primarySharedBuffers: '128MB' });
try {
  const p = await pgConnect(dir, 'primary');
  const s = await pgConnect(dir, 'standby');
  await s.query('SELECT pg_wal_replay_pause()');
  await p.query('CREATE TABLE t (c int); INSERT INTO t SELECT generate_series(1, 1000)');
  await sleep(500);
  await s.end();
  await p.end();
  const pgdata = pgDataDir(dir, 'standby');
  const pm = fs.readFileSync(path.join(pgdata, 'postmaster.pid'), 'utf8').split('\n')[0]!;
  // The postmaster and every child it has now (the startup process among them), and new ones.
  const children = fs.readFileSync(`/proc/${pm}/task/${pm}/children`, 'utf8').trim().split(/\s+/);
  const args = [
    '-f',
    '-tt',
    '-T',
    '-s',
    '120',
    '-o',
    out,
    ...[pm, ...children].flatMap((x) => ['-p', x]),
  ];
  // PT_PERF=1: perf record (cpu-clock, call graphs) of the same processes instead of strace.
  const perfArgs = ['record', '-e', 'cpu-clock', '-F', '20000', '-g', '-o', out, '-p'];
  const st = process.env.PT_PERF
    ? spawn('perf', [...perfArgs, [pm, ...children].join(',')], { stdio: 'ignore' })
    : spawn('strace', args, { stdio: 'ignore' });
  await sleep(1000);
  await pgCtl(dir, 'standby', 'promote');
  await sleep(1000);
  st.kill('SIGINT');
  await new Promise((r) => st.on('exit', r));
  fs.copyFileSync(path.join(dir, 'standby.log'), `${out}.log`);
} finally {
  await destroyPgCluster(dir).catch(() => {});
}
