/**
 * The node core's clock and timers, injected: production binds them to Node's clock and timers
 * (`systemClock`), the simulator to its seeded discrete-event scheduler. Nothing in wal/, storage/,
 * primary/, standby/ or the node composition calls Date.now, performance.now, setTimeout,
 * setInterval or setImmediate directly (test/unit/layering.test.ts checks it).
 */

/** A pending timer; cancel() is idempotent. */
export interface TimerHandle {
  cancel(): void;
}

export interface Clock {
  /** Wall-clock milliseconds since the epoch (Date.now): timestamps in WAL records and status. */
  now(): number;
  /** Monotonic milliseconds (performance.now): durations, failover phases, time slices. */
  monoMs(): number;
  /** Run `fn` once after `ms` milliseconds (`background`: does not keep a production process alive). */
  setTimeout(fn: () => void, ms: number, background?: boolean): TimerHandle;
  /**
   * Run `fn` every `ms` milliseconds. `background` timers do not keep a production process alive
   * (Node's unref); the simulator ignores the flag.
   */
  setInterval(fn: () => void, ms: number, background?: boolean): TimerHandle;
  /** Run `fn` after the work already queued (setImmediate). */
  defer(fn: () => void): void;
  /** Let queued work run, then continue (await setImmediate). */
  yield(): Promise<void>;
  /** Resolve after `ms` milliseconds. */
  sleep(ms: number): Promise<void>;
}

/** Node's clock and timers. */
export const systemClock: Clock = {
  now: () => Date.now(),
  monoMs: () => performance.now(),
  setTimeout(fn, ms, background = false) {
    const t = setTimeout(fn, ms);
    if (background) t.unref();
    return { cancel: () => clearTimeout(t) };
  },
  setInterval(fn, ms, background = false) {
    const t = setInterval(fn, ms);
    if (background) t.unref();
    return { cancel: () => clearInterval(t) };
  },
  defer(fn) {
    setImmediate(fn);
  },
  yield: () => new Promise<void>((resolve) => setImmediate(resolve)),
  sleep: (ms) => new Promise<void>((resolve) => setTimeout(resolve, ms)),
};
