/**
 * Lock files: PostgreSQL's postmaster.pid discipline for a node's data directory (miscinit.c
 * CreateLockFile), and one lock for the cluster-wide operations of the CLI (start, stop, promote,
 * switchover, rejoin, add-standby, repoint), so two of them never interleave.
 *
 * A lock file is created whole or not at all: its content is written to a private temp file and
 * link(2)ed into place, which fails with EEXIST when the lock exists — so no reader ever sees an
 * empty or half-written lock (PostgreSQL's O_EXCL create must refuse an empty file for that reason:
 * "lock file is empty"). A lock whose holder is gone is stale and is removed the way CreateLockFile
 * does (unlink, retry); the removal first moves the file aside and checks it is still the stale one
 * it judged, so a fresh lock created in between is put back, not removed.
 *
 * Entry points: `createDataDirLockFile`, `withClusterLock`, `lockNewCluster`, `clusterLockPath`.
 */
import * as fs from 'node:fs';
import * as path from 'node:path';
import { randomBytes } from 'node:crypto';
import { WalsimError } from '../common/errors.ts';
import { FILE_MODE, writeFileSynced } from '../common/durable-file.ts';
import { nodeDisk } from '../common/node-disk.ts';
import { pollUntil } from './poll.ts';

/** Create `file` holding `content`, atomically; false if it exists. */
function createExclusive(file: string, content: string): boolean {
  const tmp = `${file}.${process.pid}.${randomBytes(4).toString('hex')}.tmp`;
  writeFileSynced(tmp, content, nodeDisk, FILE_MODE);
  try {
    fs.linkSync(tmp, file);
    return true;
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code === 'EEXIST') return false;
    throw e;
  } finally {
    fs.rmSync(tmp, { force: true });
  }
}

function readOrNull(file: string): string | null {
  try {
    return fs.readFileSync(file, 'utf8');
  } catch {
    return null;
  }
}

/** Remove `file` if it still holds `judged` (the content found stale). */
function removeStale(file: string, judged: string): void {
  const aside = `${file}.${process.pid}.stale`;
  try {
    fs.renameSync(file, aside);
  } catch (e) {
    if ((e as NodeJS.ErrnoException).code === 'ENOENT') return; // someone else removed it
    throw e;
  }
  try {
    if (readOrNull(aside) !== judged) {
      // A fresh lock was created between our read and the rename: give it back.
      try {
        fs.linkSync(aside, file);
      } catch {
        /* a third one took the name meanwhile; the loop re-reads */
      }
    }
  } finally {
    fs.rmSync(aside, { force: true });
  }
}

/**
 * Take `file`: create it with `content`, or, while it exists, ask `heldBy(text)` whether its holder
 * is alive (a message saying so: refused) or not (null: stale, removed, retried). CreateLockFile
 * tries 100 times.
 */
function takeLockFile(file: string, content: string, heldBy: (text: string) => string | null) {
  for (let attempt = 0; attempt < 100; attempt++) {
    if (createExclusive(file, content)) return;
    const text = readOrNull(file);
    if (text === null) continue; // removed meanwhile
    const refusal = heldBy(text);
    if (refusal !== null) throw new WalsimError('lock_file_exists', refusal);
    removeStale(file, text);
  }
  throw new WalsimError('lock_file_exists', `could not create lock file "${file}"`);
}

// ---- the data directory's postmaster.pid ----

/**
 * PostgreSQL's postmaster.pid discipline: a server takes its data directory's lock file before it
 * reads or writes anything else there. Refused (WalsimError 'lock_file_exists', PostgreSQL's
 * FATAL F0001 with its HINT) while the file names a live walsim server for this data directory;
 * a stale file (its pid dead, or now an unrelated process, or garbage) is removed and replaced.
 * walsim checks the holder's command line (`isServerFor`) where PostgreSQL only asks kill(pid, 0):
 * a pid reused by an unrelated process after a crash does not block a start.
 */
export function createDataDirLockFile(
  dataDir: string,
  content: string,
  isServerFor: (pid: number, dataDir: string) => boolean,
): void {
  const file = path.join(dataDir, 'postmaster.pid');
  takeLockFile(file, content, (text) => {
    const pid = pidOf(text);
    if (pid === null || pid === process.pid || !isServerFor(pid, dataDir)) return null;
    return (
      `lock file "postmaster.pid" already exists\n` +
      `HINT:  Is another walsim server (PID ${pid}) running in data directory "${path.resolve(dataDir)}"?`
    );
  });
}

function pidOf(text: string): number | null {
  try {
    const v = JSON.parse(text) as { pid?: unknown };
    return typeof v.pid === 'number' && Number.isSafeInteger(v.pid) && v.pid > 0 ? v.pid : null;
  } catch {
    return null;
  }
}

// ---- the cluster lock ----

export function clusterLockPath(clusterDir: string): string {
  return path.join(clusterDir, 'cluster.lock');
}

interface ClusterLockHolder {
  pid: number;
  /** The holder's start time in clock ticks since boot (/proc/PID/stat field 22): tells a reused pid apart. */
  startTime: string | null;
  operation: string;
  since: string;
}

/** Field 22 of /proc/PID/stat (after the parenthesised command name), or null if no such process. */
function processStartTime(pid: number): string | null {
  const stat = readOrNull(`/proc/${pid}/stat`);
  if (stat === null) return null;
  return stat.slice(stat.lastIndexOf(')') + 2).split(' ')[19] ?? null;
}

function holderOf(text: string): ClusterLockHolder | null {
  try {
    const v = JSON.parse(text) as ClusterLockHolder;
    return typeof v.pid === 'number' ? v : null;
  } catch {
    return null;
  }
}

/** The live holder of the cluster lock, or null (free, stale or garbage). */
function liveHolder(text: string): ClusterLockHolder | null {
  const h = holderOf(text);
  if (h === null || h.pid === process.pid) return null;
  const start = processStartTime(h.pid);
  return start !== null && (h.startTime === null || h.startTime === start) ? h : null;
}

function describe(h: ClusterLockHolder): string {
  return `"${h.operation}" (pid ${h.pid}, since ${h.since})`;
}

function lockContent(operation: string): string {
  const me: ClusterLockHolder = {
    pid: process.pid,
    startTime: processStartTime(process.pid),
    operation,
    since: new Date().toISOString(),
  };
  return JSON.stringify(me) + '\n';
}

/**
 * A new cluster is born locked: `cluster start` puts its lock into the directory it builds before
 * renaming it into place, so no other operation can act on the new cluster before its first start
 * has ended. (`withClusterLock` in the same process then takes it over: a process never waits for
 * itself.)
 */
export function lockNewCluster(buildingDir: string, operation: string): void {
  if (!createExclusive(clusterLockPath(buildingDir), lockContent(operation)))
    throw new WalsimError('lock_file_exists', `${clusterLockPath(buildingDir)} exists`);
}

export interface ClusterLockOptions {
  /** How long to wait for another operation to finish before refusing; 0 refuses at once. */
  waitMs: number;
  /** Called once if the lock is busy, before waiting (the CLI prints a line). */
  onWait?: (holder: string) => void;
}

/**
 * Run `fn` holding the cluster's lock: one cluster-wide operation at a time per cluster directory.
 * Another operation's lock is waited for (up to `waitMs`), then refused naming it; a lock left by a
 * process that died (crash, Ctrl-C) is stale and taken over. The lock is released when `fn`
 * settles, and by an `exit` handler if the process exits inside `fn`.
 */
export async function withClusterLock<T>(
  clusterDir: string,
  operation: string,
  fn: () => Promise<T>,
  opts: ClusterLockOptions,
): Promise<T> {
  const file = clusterLockPath(clusterDir);
  const content = lockContent(operation);
  const busy = (h: ClusterLockHolder) =>
    `another cluster operation holds the lock of ${clusterDir}: ${describe(h)}; ` +
    `run this one when it has finished`;
  const tryTake = (): boolean => {
    try {
      takeLockFile(file, content, (text) => {
        const h = liveHolder(text);
        return h === null ? null : busy(h);
      });
      return true;
    } catch (e) {
      if (e instanceof WalsimError && e.kind === 'lock_file_exists') return false;
      throw e;
    }
  };
  if (!tryTake()) {
    const current = () => {
      const text = readOrNull(file);
      return text === null ? null : liveHolder(text);
    };
    const h = current();
    if (opts.waitMs <= 0)
      throw new WalsimError('lock_file_exists', h === null ? `could not take ${file}` : busy(h));
    if (h !== null) opts.onWait?.(describe(h));
    try {
      await pollUntil(async () => tryTake(), 'the cluster lock', opts.waitMs, 50);
    } catch {
      const holder = current();
      throw new WalsimError(
        'lock_file_exists',
        holder === null
          ? `could not take the cluster lock ${file}`
          : `${busy(holder)} (waited ${Math.round(opts.waitMs / 1000)} s)`,
      );
    }
  }
  const release = () => {
    if (readOrNull(file) === content) fs.rmSync(file, { force: true });
  };
  process.once('exit', release);
  try {
    return await fn();
  } finally {
    process.off('exit', release);
    release();
  }
}
