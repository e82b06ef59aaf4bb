/**
 * The production binding of `Clock` (common/clock.ts): Date.now, performance.now and Node's timers.
 * Bound only at the edges (server/main.ts, the CLIs, tests of real processes); the node core never
 * imports it (test/unit/layering.test.ts).
 */
import type { Clock } from './clock.ts';

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
