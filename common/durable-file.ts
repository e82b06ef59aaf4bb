/**
 * Durable file writes: write + fsync, optionally through a temp file and rename so readers never
 * see a half-written file, and fsync of a directory so a created or renamed entry survives a crash.
 * The one implementation used by WAL history files, data images, control and pid files.
 *
 * Modes are PostgreSQL's (`PG_FILE_MODE_OWNER` 0600, `PG_DIR_MODE_OWNER` 0700): a data directory and
 * everything in it belong to the server's user alone.
 */
import * as fs from 'node:fs';
import * as path from 'node:path';

/** pg_file_create_mode: files in a data or cluster directory. */
export const FILE_MODE = 0o600;
/** pg_dir_create_mode: directories in a data or cluster directory. */
export const DIR_MODE = 0o700;

/** mkdir -p with mode 0700 for every directory it creates. */
export function makeDir(dir: string): void {
  fs.mkdirSync(dir, { recursive: true, mode: DIR_MODE });
}

/** Write `content` to `p` (replacing it) and fsync it. */
export function writeFileSynced(p: string, content: string | Uint8Array, mode = FILE_MODE): void {
  const fd = fs.openSync(p, 'w', mode);
  try {
    if (typeof content === 'string') fs.writeSync(fd, content);
    else fs.writeSync(fd, content);
    fs.fsyncSync(fd);
  } finally {
    fs.closeSync(fd);
  }
}

/** fsync a directory so a created/renamed entry is durable. */
export function fsyncDir(dir: string): void {
  const fd = fs.openSync(dir, 'r');
  try {
    fs.fsyncSync(fd);
  } finally {
    fs.closeSync(fd);
  }
}

/** Write via a synced temp file and a rename (then fsync the directory): all or nothing. */
export function writeFileAtomic(p: string, content: string | Uint8Array, mode = FILE_MODE): void {
  const tmp = `${p}.tmp${process.pid}`;
  writeFileSynced(tmp, content, mode);
  fs.renameSync(tmp, p);
  fsyncDir(path.dirname(p));
}
