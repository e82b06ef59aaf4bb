/**
 * A process's view of its machine's disk that stops changing it once the process has exited.
 * Production's fatal() ends the process at once (process.exit inside it): nothing it had queued —
 * a statement waiting for the write lock, a checkpoint, a WAL flush — ever writes again. In the
 * simulator fatal() returns and the process is killed at the next event, so promise
 * continuations already queued would still run and could write (a checkpoint whose image and
 * record skip a truncation the PANIC left undone). Every call that changes the disk fails here
 * once `exited()` says so; reads are harmless and pass.
 */
import type { AsyncFile, Disk } from '../common/disk.ts';

const MUTATING = new Set<keyof Disk>([
  'write',
  'fsync',
  'fsyncDir',
  'mkdirp',
  'truncate',
  'rename',
  'rmrf',
  'writeFile',
  'copyTree',
  'renameAsync',
  'rmrfAsync',
]);

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

export function exitFencedDisk(disk: Disk, exited: () => boolean): Disk {
  return new Proxy(disk, {
    get(target, prop, receiver) {
      const v = Reflect.get(target, prop, receiver) as unknown;
      if (typeof v !== 'function') return v;
      const fn = v as (...args: unknown[]) => unknown;
      if (prop === 'openAsync')
        return async (...args: unknown[]) => {
          if (exited()) throw exitedError();
          return fencedFile((await fn.apply(target, args)) as AsyncFile, exited);
        };
      if (prop === 'open')
        return (...args: unknown[]) => {
          if (args[1] !== 'r' && exited()) throw exitedError();
          return fn.apply(target, args);
        };
      if (!MUTATING.has(prop as keyof Disk)) return fn.bind(target);
      return (...args: unknown[]) => {
        if (exited()) throw exitedError();
        return fn.apply(target, args);
      };
    },
  });
}

function fencedFile(f: AsyncFile, exited: () => boolean): AsyncFile {
  const guard =
    <A extends unknown[], R>(fn: (...a: A) => Promise<R>) =>
    async (...a: A): Promise<R> => {
      if (exited()) throw exitedError();
      return fn(...a);
    };
  return {
    writev: guard((chunks: Uint8Array[]) => f.writev(chunks)),
    writeFile: guard((data: Uint8Array | string) => f.writeFile(data)),
    sync: guard(() => f.sync()),
    close: () => f.close(),
  };
}
