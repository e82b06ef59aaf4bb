/**
 * The node core's clock and timers, injected: production binds them to Node's clock and timers
 * (`systemClock`, common/system-clock.ts, bound by server/main.ts and the CLIs), the simulator to
 * its seeded discrete-event scheduler. Nothing in wal/, storage/, primary/, standby/ or the node
 * composition calls Date.now, performance.now, setTimeout, setInterval or setImmediate directly,
 * and nothing there has a default clock (test/unit/layering.test.ts checks both).
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
