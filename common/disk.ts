/**
 * The file-system operations the node core uses, injected: production binds them to node:fs
 * (`nodeDisk`), the simulator to an in-memory disk with fsync semantics (sim/mem-disk.ts).
 *
 * The contract is POSIX's, which the in-memory binding enforces strictly: bytes written to a file
 * are durable only after fsync of that file; a created, renamed or removed directory entry is
 * durable only after fsync of its directory. Errors carry Node's `code` ('ENOENT', 'ENOSPC', …).
 */
import * as fs from 'node:fs';

export type OpenFlags = 'r' | 'r+' | 'w';

export interface Disk {
  /** Open a file: 'r' read, 'r+' read/write an existing file, 'w' create or truncate. */
  open(p: string, flags: OpenFlags, mode?: number): number;
  /** Read up to `length` bytes at `position` into `buf[offset..]`; returns the count (0 at EOF). */
  read(fd: number, buf: Uint8Array, offset: number, length: number, position: number): number;
  /** Write `length` bytes of `buf[offset..]` at `position`; returns the count written. */
  write(fd: number, buf: Uint8Array, offset: number, length: number, position: number): number;
  fsync(fd: number): void;
  close(fd: number): void;
  /** fsync a directory so the entries created, renamed or removed in it are durable. */
  fsyncDir(p: string): void;
  exists(p: string): boolean;
  /** Create a directory and its missing parents (mkdir -p), with `mode` for those it creates. */
  mkdirp(p: string, mode?: number): void;
  readdir(p: string): string[];
  /** Size of a file in bytes. */
  size(p: string): number;
  truncate(p: string, length: number): void;
  rename(from: string, to: string): void;
  /** rm -rf (no error if missing). */
  rmrf(p: string): void;
  readFile(p: string): Uint8Array;
  /** Create or replace a file with `data`, not synced (fs.writeFileSync). */
  writeFile(p: string, data: Uint8Array | string, mode?: number): void;
  /** Copy a directory tree (fs.cpSync recursive), not synced. */
  copyTree(from: string, to: string): void;
  isDirectory(p: string): boolean;
}

/** node:fs. */
export const nodeDisk: Disk = {
  open: (p, flags, mode) => fs.openSync(p, flags, mode),
  read: (fd, buf, offset, length, position) => fs.readSync(fd, buf, offset, length, position),
  write: (fd, buf, offset, length, position) => fs.writeSync(fd, buf, offset, length, position),
  fsync: (fd) => fs.fsyncSync(fd),
  close: (fd) => fs.closeSync(fd),
  fsyncDir(p) {
    const fd = fs.openSync(p, 'r');
    try {
      fs.fsyncSync(fd);
    } finally {
      fs.closeSync(fd);
    }
  },
  exists: (p) => fs.existsSync(p),
  mkdirp: (p, mode) => void fs.mkdirSync(p, mode === undefined ? { recursive: true } : { recursive: true, mode }),
  readdir: (p) => fs.readdirSync(p),
  size: (p) => fs.statSync(p).size,
  truncate: (p, length) => fs.truncateSync(p, length),
  rename: (from, to) => fs.renameSync(from, to),
  rmrf: (p) => fs.rmSync(p, { recursive: true, force: true }),
  readFile: (p) => new Uint8Array(fs.readFileSync(p)),
  writeFile: (p, data, mode) => fs.writeFileSync(p, data, mode === undefined ? undefined : { mode }),
  copyTree: (from, to) => fs.cpSync(from, to, { recursive: true }),
  isDirectory: (p) => fs.statSync(p).isDirectory(),
};

const utf8 = new TextDecoder();

/** A file's text (UTF-8). */
export function readTextFile(disk: Disk, p: string): string {
  return utf8.decode(disk.readFile(p));
}

/** Whether `e` is a file-system error with this code (e.g. 'ENOENT'). */
export function isErrnoCode(e: unknown, code: string): boolean {
  return typeof e === 'object' && e !== null && (e as { code?: unknown }).code === code;
}
