/**
 * A process's view of its machine's disk that stops changing it once the process has exited.
 * Production's fatal() ends the process at once (process.exit inside it): nothing it had queued —
 * a statement waiting for the write lock, a checkpoint, a WAL flush — ever writes again. In the
 * simulator fatal() returns and the process is killed at the next event, so promise
 * continuations already queued would still run and could write (a checkpoint whose image and
 * record skip a truncation the PANIC left undone). Every call that changes the disk fails here
 * once `exited()` says so; reads are harmless and pass.
 */
import type { AsyncFile, Disk, OpenFlags } from '../common/disk.ts';

/** What an exited process's disk call fails with: its statement has no answer (the client sees
 * the connection end), so the simulator never reads it as one (`exitedProcessError`). */
export class ProcessExitedError extends Error {
  readonly code = 'EIO';
  constructor() {
    super('the process has exited');
  }
}

function exitedError(): Error {
  return new ProcessExitedError();
}

/** Whether `e` (or an error it was caused by) is an exited process's disk call failing. */
export function exitedProcessError(e: unknown): boolean {
  for (let x = e, depth = 0; x instanceof Error && depth < 10; x = x.cause, depth++)
    if (x instanceof ProcessExitedError) return true;
  return false;
}

/**
 * Every change fails once `exited()` holds. A class, not a Proxy: the disk is called on every
 * I/O of every node, and a Proxy's trap bound a new function per call (a few percent of a run).
 * The asynchronous calls keep the microtask shape they always had (one `await` in openAsync, the
 * others return the disk's promise), so continuations interleave exactly as before.
 */
class ExitFencedDisk implements Disk {
  constructor(
    private readonly disk: Disk,
    private readonly exited: () => boolean,
  ) {}

  private check(): void {
    if (this.exited()) throw exitedError();
  }

  open(p: string, flags: OpenFlags, mode?: number): number {
    if (flags !== 'r') this.check();
    return this.disk.open(p, flags, mode);
  }
  read(fd: number, buf: Uint8Array, offset: number, length: number, position: number): number {
    return this.disk.read(fd, buf, offset, length, position);
  }
  write(fd: number, buf: Uint8Array, offset: number, length: number, position: number): number {
    this.check();
    return this.disk.write(fd, buf, offset, length, position);
  }
  fsync(fd: number): void {
    this.check();
    this.disk.fsync(fd);
  }
  close(fd: number): void {
    this.disk.close(fd);
  }
  fsyncDir(p: string): void {
    this.check();
    this.disk.fsyncDir(p);
  }
  exists(p: string): boolean {
    return this.disk.exists(p);
  }
  mkdirp(p: string, mode?: number): void {
    this.check();
    this.disk.mkdirp(p, mode);
  }
  readdir(p: string): string[] {
    return this.disk.readdir(p);
  }
  size(p: string): number {
    return this.disk.size(p);
  }
  truncate(p: string, length: number): void {
    this.check();
    this.disk.truncate(p, length);
  }
  rename(from: string, to: string): void {
    this.check();
    this.disk.rename(from, to);
  }
  rmrf(p: string): void {
    this.check();
    this.disk.rmrf(p);
  }
  readFile(p: string): Uint8Array {
    return this.disk.readFile(p);
  }
  writeFile(p: string, data: Uint8Array | string, mode?: number): void {
    this.check();
    this.disk.writeFile(p, data, mode);
  }
  copyTree(from: string, to: string): void {
    this.check();
    this.disk.copyTree(from, to);
  }
  isDirectory(p: string): boolean {
    return this.disk.isDirectory(p);
  }
  async openAsync(p: string, flags: 'w', mode?: number): Promise<AsyncFile> {
    this.check();
    return new FencedFile(await this.disk.openAsync(p, flags, mode), this.exited);
  }
  renameAsync(from: string, to: string): Promise<void> {
    this.check();
    return this.disk.renameAsync(from, to);
  }
  rmrfAsync(p: string): Promise<void> {
    this.check();
    return this.disk.rmrfAsync(p);
  }
}

export function exitFencedDisk(disk: Disk, exited: () => boolean): Disk {
  return new ExitFencedDisk(disk, exited);
}

/** A file of an exited process's disk: every call after the exit throws (a class: no closures per open). */
class FencedFile implements AsyncFile {
  constructor(
    private readonly f: AsyncFile,
    private readonly exited: () => boolean,
  ) {}

  async writev(chunks: Uint8Array[]): Promise<void> {
    if (this.exited()) throw exitedError();
    return this.f.writev(chunks);
  }

  async writeFile(data: Uint8Array | string): Promise<void> {
    if (this.exited()) throw exitedError();
    return this.f.writeFile(data);
  }

  async sync(): Promise<void> {
    if (this.exited()) throw exitedError();
    return this.f.sync();
  }

  close(): Promise<void> {
    return this.f.close();
  }
}
