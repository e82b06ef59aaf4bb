/**
 * A slow disk: a Disk (common/disk.ts) that passes every operation to another one and, while a
 * latency is set, makes each write and fsync take longer. One implementation for both bindings:
 * the production shell wraps node:fs with it (fault `slow_disk`, server/README), the simulator
 * wraps its in-memory disk with it (sim/README, fault "slow disk").
 *
 * walsim's WAL writes and fsyncs are synchronous (PostgreSQL's backends also block in write() and
 * fdatasync()), so a slow device stalls the process inside the call: the synchronous operations
 * call `block(ms)` — in production a real blocking sleep of the thread (Atomics.wait), in the
 * simulator an advance of simulated time inside the running event. The asynchronous operations
 * (the data image writer) wait on the injected clock instead, as an I/O in flight would.
 *
 * Entry points: `LatencyDisk` (the wrapper), `DiskLatency` (the latency of one machine's device,
 * shared by every process incarnation that runs on it), `blockThread` (production's `block`).
 */
import type { Clock } from './clock.ts';
import type { AsyncFile, Disk, OpenFlags } from './disk.ts';

/** Longest latency one operation may be given (the fault bounds how long a process stalls per call). */
export const MAX_DISK_LATENCY_MS = 1000;

/** Operations a slow disk delayed, and the milliseconds it added. */
export interface DiskLatencyCounters {
  delayedWrites: number;
  delayedFsyncs: number;
  delayedMs: number;
}

/** The latency of one device: what a write and an fsync cost more, until when (monotonic ms). */
export class DiskLatency {
  writeMs = 0;
  fsyncMs = 0;
  untilMonoMs = 0;
  /** Operations that were delayed, and the milliseconds added (status counters). */
  readonly counters: DiskLatencyCounters = { delayedWrites: 0, delayedFsyncs: 0, delayedMs: 0 };
  /**
   * Optional spread: each delay is `ms * (0.5 + spread() / 2)` (the simulator passes a seeded
   * PRNG so latencies vary per operation yet replay exactly); without it every delay is `ms`.
   */
  spread: (() => number) | null = null;

  /** Make writes and fsyncs slower by writeMs / fsyncMs for holdMs from `nowMonoMs`. */
  set(writeMs: number, fsyncMs: number, holdMs: number, nowMonoMs: number): void {
    for (const [name, v] of [
      ['writeMs', writeMs],
      ['fsyncMs', fsyncMs],
    ] as const) {
      if (!Number.isInteger(v) || v < 0 || v > MAX_DISK_LATENCY_MS)
        throw new RangeError(
          `${name} must be an integer between 0 and ${MAX_DISK_LATENCY_MS}, got ${v}`,
        );
    }
    this.writeMs = writeMs;
    this.fsyncMs = fsyncMs;
    this.untilMonoMs = nowMonoMs + holdMs;
  }

  /** Back to full speed. */
  clear(): void {
    this.writeMs = 0;
    this.fsyncMs = 0;
    this.untilMonoMs = 0;
  }

  /** The delay of one operation now (0 when the device is fast), counted. */
  delayFor(op: 'write' | 'fsync', nowMonoMs: number): number {
    const base = op === 'write' ? this.writeMs : this.fsyncMs;
    if (base === 0) return 0;
    if (nowMonoMs >= this.untilMonoMs) {
      this.clear();
      return 0;
    }
    const ms = this.spread === null ? base : Math.round(base * (0.5 + this.spread() / 2));
    if (op === 'write') this.counters.delayedWrites++;
    else this.counters.delayedFsyncs++;
    this.counters.delayedMs += ms;
    return ms;
  }
}

const sleepCell = new Int32Array(new SharedArrayBuffer(4));

/** Block this thread for `ms` (a slow device inside a synchronous system call). */
export function blockThread(ms: number): void {
  if (ms > 0) Atomics.wait(sleepCell, 0, 0, ms);
}

export class LatencyDisk implements Disk {
  constructor(
    readonly inner: Disk,
    private readonly clock: Clock,
    /** Stall the caller for ms inside a synchronous operation. */
    private readonly block: (ms: number) => void,
    readonly latency: DiskLatency = new DiskLatency(),
  ) {}

  private stall(op: 'write' | 'fsync'): void {
    const ms = this.latency.delayFor(op, this.clock.monoMs());
    if (ms > 0) this.block(ms);
  }

  /** The delay of an asynchronous write or fsync (its files' DelayedFile waits it first). */
  async wait(op: 'write' | 'fsync'): Promise<void> {
    const ms = this.latency.delayFor(op, this.clock.monoMs());
    if (ms > 0) await this.clock.sleep(ms);
  }

  open(p: string, flags: OpenFlags, mode?: number): number {
    return this.inner.open(p, flags, mode);
  }

  read(fd: number, buf: Uint8Array, offset: number, length: number, position: number): number {
    return this.inner.read(fd, buf, offset, length, position);
  }

  write(fd: number, buf: Uint8Array, offset: number, length: number, position: number): number {
    this.stall('write');
    return this.inner.write(fd, buf, offset, length, position);
  }

  fsync(fd: number): void {
    this.stall('fsync');
    this.inner.fsync(fd);
  }

  close(fd: number): void {
    this.inner.close(fd);
  }

  fsyncDir(p: string): void {
    this.stall('fsync');
    this.inner.fsyncDir(p);
  }

  exists(p: string): boolean {
    return this.inner.exists(p);
  }

  mkdirp(p: string, mode?: number): void {
    this.inner.mkdirp(p, mode);
  }

  readdir(p: string): string[] {
    return this.inner.readdir(p);
  }

  size(p: string): number {
    return this.inner.size(p);
  }

  truncate(p: string, length: number): void {
    this.inner.truncate(p, length);
  }

  rename(from: string, to: string): void {
    this.inner.rename(from, to);
  }

  rmrf(p: string): void {
    this.inner.rmrf(p);
  }

  readFile(p: string): Uint8Array {
    return this.inner.readFile(p);
  }

  writeFile(p: string, data: Uint8Array | string, mode?: number): void {
    this.stall('write');
    this.inner.writeFile(p, data, mode);
  }

  copyTree(from: string, to: string): void {
    this.inner.copyTree(from, to);
  }

  isDirectory(p: string): boolean {
    return this.inner.isDirectory(p);
  }

  async openAsync(p: string, flags: 'w', mode?: number): Promise<AsyncFile> {
    return new DelayedFile(this, await this.inner.openAsync(p, flags, mode));
  }

  renameAsync(from: string, to: string): Promise<void> {
    return this.inner.renameAsync(from, to);
  }

  rmrfAsync(p: string): Promise<void> {
    return this.inner.rmrfAsync(p);
  }
}

/** A file of a LatencyDisk: each write and fsync waits its delay first (a class: no closures per open). */
class DelayedFile implements AsyncFile {
  constructor(
    private readonly disk: LatencyDisk,
    private readonly f: AsyncFile,
  ) {}

  async writev(chunks: Uint8Array[]): Promise<void> {
    await this.disk.wait('write');
    await this.f.writev(chunks);
  }

  async writeFile(data: Uint8Array | string): Promise<void> {
    await this.disk.wait('write');
    await this.f.writeFile(data);
  }

  async sync(): Promise<void> {
    await this.disk.wait('fsync');
    await this.f.sync();
  }

  close(): Promise<void> {
    return this.f.close();
  }
}
