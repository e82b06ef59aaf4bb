/**
 * Durable file writes: write + fsync, optionally through a temp file and rename so readers never
 * see a half-written file, and fsync of a directory so a created or renamed entry survives a crash.
 * The one implementation used by WAL history files, data images, control and pid files.
 */
import * as fs from 'node:fs';
import * as path from 'node:path';

/** Write `content` to `p` (replacing it) and fsync it. */
export function writeFileSynced(p: string, content: string | Uint8Array, mode = 0o644): void {
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
export function writeFileAtomic(p: string, content: string | Uint8Array, mode = 0o644): void {
  const tmp = `${p}.tmp${process.pid}`;
  writeFileSynced(tmp, content, mode);
  fs.renameSync(tmp, p);
  fsyncDir(path.dirname(p));
}
