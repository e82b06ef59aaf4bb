/**
 * Durable file writes: write + fsync, optionally through a temp file and rename so readers never
 * see a half-written file, and fsync of a directory so a created or renamed entry survives a crash.
 * The one implementation used by WAL history files, data images, control and pid files. Every
 * function takes the Disk to use (there is no default: the caller binds node:fs or the simulator's).
 *
 * Modes are PostgreSQL's (`PG_FILE_MODE_OWNER` 0600, `PG_DIR_MODE_OWNER` 0700): a data directory and
 * everything in it belong to the server's user alone.
 */
import * as path from 'node:path';
import type { Disk } from './disk.ts';

/** pg_file_create_mode: files in a data or cluster directory. */
export const FILE_MODE = 0o600;
/** pg_dir_create_mode: directories in a data or cluster directory. */
export const DIR_MODE = 0o700;

const utf8 = new TextEncoder();

/** mkdir -p with mode 0700 for every directory it creates. */
export function makeDir(dir: string, disk: Disk): void {
  disk.mkdirp(dir, DIR_MODE);
}

/** Write `content` to `p` (replacing it) and fsync it. The directory entry is not synced. */
export function writeFileSynced(
  p: string,
  content: string | Uint8Array,
  disk: Disk,
  mode = FILE_MODE,
): void {
  const bytes = typeof content === 'string' ? utf8.encode(content) : content;
  const fd = disk.open(p, 'w', mode);
  try {
    let done = 0;
    while (done < bytes.length) done += disk.write(fd, bytes, done, bytes.length - done, done);
    disk.fsync(fd);
  } finally {
    disk.close(fd);
  }
}

/** fsync a directory so a created/renamed entry is durable. */
export function fsyncDir(dir: string, disk: Disk): void {
  disk.fsyncDir(dir);
}

/** Write via a synced temp file and a rename (then fsync the directory): all or nothing. */
export function writeFileAtomic(
  p: string,
  content: string | Uint8Array,
  disk: Disk,
  mode = FILE_MODE,
): void {
  // A fixed name: one process owns a data directory (postmaster.pid; the CLIs hold the cluster
  // lock), and a name with the pid in it made the simulator's logs differ between processes.
  const tmp = `${p}.tmp`;
  writeFileSynced(tmp, content, disk, mode);
  disk.rename(tmp, p);
  disk.fsyncDir(path.dirname(p));
}
