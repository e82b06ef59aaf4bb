/**
 * The file-system operations the node core uses, injected: production binds them to node:fs
 * (`nodeDisk`, common/node-disk.ts, bound by the process shell server/main.ts and the CLIs), the
 * simulator to an in-memory disk with fsync semantics (sim/mem-disk.ts). Nothing in the core has a
 * default disk: every function that touches files takes one.
 *
 * The contract is POSIX's, which the in-memory binding enforces strictly: bytes written to a file
 * are durable only after fsync of that file; a created, renamed or removed directory entry is
 * durable only after fsync of its directory. Errors carry Node's `code` ('ENOENT', 'ENOSPC', …).
 */
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
  /** Open a file for asynchronous writing (production: fs.promises, off the event loop). */
  openAsync(p: string, flags: 'w', mode?: number): Promise<AsyncFile>;
  renameAsync(from: string, to: string): Promise<void>;
  rmrfAsync(p: string): Promise<void>;
}

/** A file open for asynchronous writing. */
export interface AsyncFile {
  /**
   * Append the chunks at the current end. The caller may reuse the chunks' memory once the promise
   * settles, not before (the data image's pack staging buffer relies on it).
   */
  writev(chunks: Uint8Array[]): Promise<void>;
  /** Replace the content with `data`. */
  writeFile(data: Uint8Array | string): Promise<void>;
  sync(): Promise<void>;
  close(): Promise<void>;
}

/**
 * The asynchronous operations of a disk that has only synchronous ones (the simulator's): each
 * completes in a resolved promise, so the caller still yields at the same points.
 */
export function asyncOpsOf(
  disk: Pick<Disk, 'open' | 'write' | 'fsync' | 'close' | 'rename' | 'rmrf'>,
): Pick<Disk, 'openAsync' | 'renameAsync' | 'rmrfAsync'> {
  return {
    openAsync: (p, flags, mode) =>
      Promise.resolve(new SyncBackedFile(disk, disk.open(p, flags, mode))),
    renameAsync: (from, to) => Promise.resolve(disk.rename(from, to)),
    rmrfAsync: (p) => Promise.resolve(disk.rmrf(p)),
  };
}

/**
 * An AsyncFile over a synchronous disk's descriptor. A class, not an object of closures: the
 * simulator opens one for every file of every data image.
 */
class SyncBackedFile implements AsyncFile {
  private pos = 0;

  constructor(
    private readonly disk: Pick<Disk, 'write' | 'fsync' | 'close'>,
    private readonly fd: number,
  ) {}

  private writeAll(b: Uint8Array): void {
    let done = 0;
    while (done < b.length)
      done += this.disk.write(this.fd, b, done, b.length - done, this.pos + done);
    this.pos += b.length;
  }

  writev(chunks: Uint8Array[]): Promise<void> {
    for (const c of chunks) this.writeAll(c);
    return Promise.resolve();
  }

  writeFile(data: Uint8Array | string): Promise<void> {
    this.pos = 0;
    this.writeAll(typeof data === 'string' ? new TextEncoder().encode(data) : data);
    return Promise.resolve();
  }

  sync(): Promise<void> {
    return Promise.resolve(this.disk.fsync(this.fd));
  }

  close(): Promise<void> {
    return Promise.resolve(this.disk.close(this.fd));
  }
}

const utf8 = new TextDecoder();

/** A file's text (UTF-8). */
export function readTextFile(disk: Disk, p: string): string {
  return utf8.decode(disk.readFile(p));
}

/** Whether `e` is a file-system error with this code (e.g. 'ENOENT'). */
export function isErrnoCode(e: unknown, code: string): boolean {
  return typeof e === 'object' && e !== null && (e as { code?: unknown }).code === code;
}
