/**
 * What a commit that drops many relations costs in replay, by what the dropped files hold: one pair
 * (standby 512MB); N one-block tables and N empty tables (one main fork each: `c int`, no TOAST),
 * written back (CHECKPOINT on both, `sync`); then, replay paused, one transaction drops the N
 * one-block tables, replay resumes, and the startup process's CPU and wall time (schedstat) and
 * the disk's discards and flushes (/sys/block/<dev>/stat) are read around it; then the same for the
 * N empty tables. xact_redo_commit → DropRelationFiles → smgrdounlinkall → mdunlink: per fork
 * do_truncate (ftruncate to 0: the file's blocks freed, a discard on a `discard` mount) and unlink.
 *
 * Usage: tsx scripts/experiment/unlink-cost.ts WORKDIR N [DEVICE]   (one JSON line a commit)
 */
import * as fs from 'node:fs';
import * as path from 'node:path';
import { spawnSync } from 'node:child_process';
import type pg from 'pg';
import { destroyPgCluster, initPgCluster, pgConnect, pgDataDir } from '../postgres/pg-cluster.ts';
import { findStartupPid } from '../postgres/startup-sched.ts';

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** Discards and flushes completed, and ms spent in each, of a block device (its stat file). */
function diskFigures(dev: string) {
  const f = fs.readFileSync(`/sys/block/${dev}/stat`, 'utf8').trim().split(/\s+/).map(Number);
  return { discards: f[11]!, discardMs: f[14]!, flushes: f[15]!, flushMs: f[16]! };
}

async function until(c: pg.Client, sql: string, arg: string): Promise<void> {
  while (!(await c.query(sql, [arg])).rows[0].ok) await sleep(2);
}

async function dropAll(dir: string, p: pg.Client, names: string[], dev: string, what: string) {
  const s = await pgConnect(dir, 'standby');
  await s.query('SELECT pg_wal_replay_pause()');
  while ((await s.query('SELECT pg_get_wal_replay_pause_state() AS s')).rows[0].s !== 'paused')
    await sleep(10);
  await p.query(`BEGIN; ${names.map((n) => `DROP TABLE ${n};`).join(' ')} COMMIT`);
  const target = (await p.query('SELECT pg_current_wal_flush_lsn()::text AS l')).rows[0].l;
  await until(s, 'SELECT pg_last_wal_receive_lsn() >= $1::pg_lsn AS ok', target);
  spawnSync('sync');
  const pm = fs.readFileSync(path.join(pgDataDir(dir, 'standby'), 'postmaster.pid'), 'utf8');
  const pid = findStartupPid(Number(pm.split('\n')[0]))!;
  const sched = () => fs.readFileSync(`/proc/${pid}/schedstat`, 'utf8').split(' ').map(Number);
  const [a, d0, t0] = [sched(), diskFigures(dev), performance.now()];
  await s.query('SELECT pg_wal_replay_resume()');
  await until(s, 'SELECT pg_last_wal_replay_lsn() >= $1::pg_lsn AS ok', target);
  const [b, d1, wallMs] = [sched(), diskFigures(dev), performance.now() - t0];
  await s.end();
  const cpuMs = (b[0]! - a[0]!) / 1e6;
  const runQueueMs = (b[1]! - a[1]!) / 1e6;
  console.log(
    JSON.stringify({
      what,
      tables: names.length,
      wallMs: Math.round(wallMs * 10) / 10,
      cpuMs: Math.round(cpuMs * 10) / 10,
      runQueueMs: Math.round(runQueueMs * 10) / 10,
      blockedMs: Math.round((wallMs - cpuMs - runQueueMs) * 10) / 10,
      discards: d1.discards - d0.discards,
      discardMs: d1.discardMs - d0.discardMs,
      flushes: d1.flushes - d0.flushes,
      flushMs: d1.flushMs - d0.flushMs,
    }),
  );
}

const [work, nArg, devArg] = process.argv.slice(2);
if (!work || !nArg) throw new Error('usage: unlink-cost.ts WORKDIR N [DEVICE]');
const n = Number(nArg);
const dev = devArg ?? 'vda';
fs.mkdirSync(work, { recursive: true });
fs.chmodSync(work, 0o755);
const dir = path.join(work, 'unlink');
await initPgCluster(dir, { sharedBuffers: '512MB', primarySharedBuffers: '128MB' });
try {
  const p = await pgConnect(dir, 'primary');
  const full = Array.from({ length: n }, (_, i) => `f${i}`);
  const empty = Array.from({ length: n }, (_, i) => `e${i}`);
  for (const t of [...full, ...empty]) await p.query(`CREATE TABLE ${t} (c int)`);
  for (const t of full) await p.query(`INSERT INTO ${t} SELECT generate_series(1, 100)`);
  await p.query('CHECKPOINT');
  await sleep(500);
  const s = await pgConnect(dir, 'standby');
  await s.query('CHECKPOINT');
  await s.end();
  spawnSync('sync');
  await dropAll(dir, p, full, dev, 'one-block tables');
  await dropAll(dir, p, empty, dev, 'empty tables');
  await p.end();
} finally {
  await destroyPgCluster(dir).catch(() => {});
}
