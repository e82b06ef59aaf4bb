/**
 * Keeping a timing run's file creations clear of ext4's inode-reuse delay.
 *
 * On an ext4 file system **without a journal** (this project's development VM mounts its root that
 * way), the inode allocator will not hand out an inode freed in the last 60 s — 300 s while its
 * inode-table block is still dirty — if any other is free (fs/ext4/ialloc.c: `find_inode_bit` calls
 * `recently_deleted` for every free bit it meets, reading the inode's dtime through the buffer
 * cache). So every file created after thousands of files were removed scans past all of them first:
 * measured on a 300-table TRUNCATE replay (BENCHMARKS.md "Why PostgreSQL's per-table cost seemed
 * to fall"), 1.3 ms of startup CPU a table right after 5,000 files were removed against 0.26 ms
 * with none removed in the last 5 minutes, 60 % of it in `recently_deleted`. Removing one run's
 * cluster (2,800–14,000 files) therefore slowed every `mdcreate` of the next run's replay, by an
 * amount that depended on how long that run took to make its backlog: the "per-table cost falling
 * with the table count" the earlier benchmarks saw. With a journal, ext4 does no such check.
 *
 * What the timing commands do about it: a run's cluster is stopped and its WAL (a few large files)
 * removed at once, the rest kept until the command ends (`retireCluster`); the command then removes
 * its work directory, writes the dirty inode-table blocks back (`sync`: the delay drops to 60 s) and
 * records when (`removeWorkDir`); the next timing command waits out what is left of the 60 s
 * (`waitOutInodeReuse`) when the file system has no journal.
 *
 * Entry points: `journalless`, `retireCluster`, `removeWorkDir`, `waitOutInodeReuse`,
 * `inodeReuseWaitMs`, `INODE_REUSE_DELAY_S`.
 */
import { spawnSync } from 'node:child_process';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { stopPgCluster } from './pg-cluster.ts';

/** ext4's RECENTCY_MIN (fs/ext4/ialloc.c): after `sync` the inode-table blocks are clean, so 60 s. */
export const INODE_REUSE_DELAY_S = 60;

/** Linux's encoding of a device number (new_encode_dev): major and minor. */
function majorMinor(dev: number): string {
  return `${Math.floor(dev / 256) & 0xfff}:${(dev & 0xff) | (Math.floor(dev / 4096) & 0xfff00)}`;
}

/**
 * True when `dir` is on an ext4 file system without a journal (its /sys/fs/ext4/<device>/journal_task
 * reads "<none>"); false when it has one, is not ext4, or it cannot be told (not Linux).
 */
export function journalless(dir: string): boolean {
  try {
    const dev = fs.realpathSync(`/sys/dev/block/${majorMinor(fs.statSync(dir).dev)}`);
    return (
      fs.readFileSync(`/sys/fs/ext4/${path.basename(dev)}/journal_task`, 'utf8').trim() === '<none>'
    );
  } catch {
    return false;
  }
}

/**
 * Where the last removal of a work directory on the file system of `dir` is recorded (in
 * `markerDir`, the system's temporary directory unless a test gives its own).
 */
export function markerFile(dir: string, markerDir = os.tmpdir()): string {
  let dev = 0;
  try {
    dev = fs.statSync(dir).dev;
  } catch {
    /* not there yet: its parent's file system */
    dev = fs.statSync(path.dirname(path.resolve(dir))).dev;
  }
  return path.join(markerDir, `walsim-removed-at-${dev}`);
}

/**
 * A run is over: stop the pair's servers and remove their pg_wal contents (a few 16 MB segments:
 * the disk space, few inodes), keep the thousands of small files until the command ends.
 */
export async function retireCluster(dir: string): Promise<void> {
  await stopPgCluster(dir);
  for (const node of ['primary', 'standby']) {
    const wal = path.join(dir, node, 'pg_wal');
    if (!fs.existsSync(wal)) continue;
    for (const f of fs.readdirSync(wal))
      if (/^[0-9A-F]{24}$/.test(f)) fs.rmSync(path.join(wal, f), { force: true });
  }
}

/** Remove a timing command's work directory, write its inode-table blocks back, record when. */
export function removeWorkDir(workDir: string, markerDir?: string): void {
  const marker = markerFile(workDir, markerDir);
  fs.rmSync(workDir, { recursive: true, force: true });
  spawnSync('sync', { stdio: 'ignore' });
  fs.writeFileSync(marker, `${Date.now()}\n`);
}

/** How long a run on `dir`'s file system must still wait at `nowMs` (0: no wait needed). */
export function inodeReuseWaitMs(removedAtMs: number | null, nowMs: number): number {
  if (removedAtMs === null || !Number.isFinite(removedAtMs)) return 0;
  return Math.max(0, removedAtMs + INODE_REUSE_DELAY_S * 1000 - nowMs);
}

/**
 * Before a timing command's first run: on an ext4 without a journal, wait until a work directory
 * removed less than `INODE_REUSE_DELAY_S` ago no longer delays inode allocation. `say` tells why.
 */
export async function waitOutInodeReuse(
  workDir: string,
  say: (line: string) => void,
): Promise<void> {
  const probe = fs.existsSync(workDir) ? workDir : path.dirname(path.resolve(workDir));
  if (!journalless(probe)) return;
  let removedAt: number | null = null;
  try {
    removedAt = Number(fs.readFileSync(markerFile(workDir), 'utf8').trim());
  } catch {
    return;
  }
  const ms = inodeReuseWaitMs(removedAt, Date.now());
  if (ms === 0) return;
  say(
    `waiting ${(ms / 1000).toFixed(0)} s: files were removed here ${((Date.now() - removedAt!) / 1000).toFixed(0)} s ago, and ext4 without a journal delays reusing their inodes for ${INODE_REUSE_DELAY_S} s (every file PostgreSQL creates would scan past them)`,
  );
  await new Promise((r) => setTimeout(r, ms));
}
