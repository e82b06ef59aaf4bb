/**
 * The simulator's discrete-event scheduler: simulated time and the Clock (common/clock.ts) every
 * simulated node runs on. Events run one at a time in (time, sequence) order; after each one every
 * promise continuation it caused runs before the next event (the real event loop drains the
 * microtask queue), so a run is a pure function of the seed: same events, same order, same bytes.
 *
 * Each node gets its own Clock (`clockFor(owner)`): its timers are tagged with the owner so a
 * crash cancels them all at once (`kill(owner)`; owners are process incarnations), and its wall clock can jump (`jumpWallClock`)
 * without moving simulated time for anyone else.
 */
import type { Clock, TimerHandle } from '../common/clock.ts';

/**
 * One turn of the real event loop: every microtask queued before it has run when it resolves,
 * and Node has reported the promise rejections left unhandled meanwhile. A plain callback, not
 * node:timers/promises' setImmediate (which also handles an AbortSignal and a value).
 */
function realImmediate(): Promise<void> {
  return new Promise((resolve) => setImmediate(resolve));
}

/**
 * Resolves once the microtask queue has drained: every continuation queued before the call, and
 * every one those queue in turn, has run — what the turn above guarantees, at a tenth of its
 * cost (no pass through the event loop's phases and its poll for I/O, 5 µs of CPU here). The
 * microtask queues a process.nextTick; Node runs the tick queue only once V8's microtask queue is
 * empty (processTicksAndRejections: ticks, then runMicrotasks() to the end, then the ticks queued
 * meanwhile). Exact as long as the code under test queues no nextTick of its own (the node core
 * uses none: its clock is the scheduler's).
 */
function drained(): Promise<void> {
  return new Promise((resolve) => queueMicrotask(() => process.nextTick(resolve)));
}

/**
 * `drained` for a caller that is itself a microtask (code after an `await`, where the loops of
 * runFor/runUntil run every event): a tick queued there runs only once the microtask queue is
 * empty, so the microtask in front of it is not needed. From a macrotask (the main script, a
 * timer) Node runs the ticks before the microtasks: the first wait of a run is `drained`.
 */
function ticked(): Promise<void> {
  return new Promise((resolve) => process.nextTick(resolve));
}

/**
 * Events run between real event-loop turns: the turn lets Node report unhandled rejections (a
 * violation) and a worker see its parent's channel close, within this many events.
 */
const EVENTS_PER_REAL_TURN = 256;

/** Wall-clock epoch of simulated time 0 (fixed, so WAL timestamps are the same on every run). */
export const SIM_EPOCH_MS = Date.UTC(2026, 0, 1);

/** An event is its own timer handle: no handle object and closure per event. */
class SimEvent implements TimerHandle {
  cancelled = false;

  constructor(
    readonly at: number,
    readonly seq: number,
    readonly owner: string,
    readonly label: string,
    readonly fn: () => void,
  ) {}

  cancel(): void {
    this.cancelled = true;
  }
}

/** Binary min-heap on (at, seq). */
class EventHeap {
  private items: SimEvent[] = [];

  get size(): number {
    return this.items.length;
  }

  peek(): SimEvent | undefined {
    return this.items[0];
  }

  private less(a: SimEvent, b: SimEvent): boolean {
    return a.at < b.at || (a.at === b.at && a.seq < b.seq);
  }

  push(e: SimEvent): void {
    const h = this.items;
    h.push(e);
    let i = h.length - 1;
    while (i > 0) {
      const parent = (i - 1) >> 1;
      if (!this.less(h[i]!, h[parent]!)) break;
      [h[i], h[parent]] = [h[parent]!, h[i]!];
      i = parent;
    }
  }

  pop(): SimEvent | undefined {
    const h = this.items;
    const top = h[0];
    const last = h.pop();
    if (h.length > 0 && last !== undefined) {
      h[0] = last;
      let i = 0;
      for (;;) {
        const l = 2 * i + 1;
        const r = l + 1;
        let m = i;
        if (l < h.length && this.less(h[l]!, h[m]!)) m = l;
        if (r < h.length && this.less(h[r]!, h[m]!)) m = r;
        if (m === i) break;
        [h[i], h[m]] = [h[m]!, h[i]!];
        i = m;
      }
    }
    return top;
  }
}

/** Raised by run* when the event budget is exhausted (a livelock is a failure too). */
export class EventBudgetExceeded extends Error {}

export class Scheduler {
  private nowMs = 0;
  private seq = 0;
  private readonly heap = new EventHeap();
  private readonly wallSkewMs = new Map<string, number>();
  private readonly dead = new Set<string>();
  /** Events run so far. */
  eventsRun = 0;
  /** Upper bound on events per run (liveness: a livelock fails the seed instead of hanging). */
  eventBudget = 2_000_000;
  /** Called with an exception thrown by an event (else it propagates out of step()). */
  onUncaught: ((owner: string, err: unknown) => void) | null = null;
  /** Called before each event runs (the trace). */
  onEvent: ((at: number, owner: string, label: string) => void) | null = null;
  /** Called after each event and the microtasks it caused (a checker that must see every state). */
  afterEvent: (() => void) | null = null;

  /** Simulated milliseconds since the start of the run. */
  get now(): number {
    return this.nowMs;
  }

  /** Schedule `fn` at now + delayMs on behalf of `owner`. */
  at(delayMs: number, owner: string, label: string, fn: () => void): TimerHandle {
    const e = new SimEvent(this.nowMs + Math.max(0, delayMs), this.seq++, owner, label, fn);
    if (this.dead.has(owner)) e.cancelled = true;
    this.heap.push(e);
    return e;
  }

  /** Advance simulated time inside the running event (a slow fsync takes this long). */
  advance(ms: number): void {
    this.nowMs += ms;
  }

  /** The Clock of one node. */
  clockFor(owner: string): Clock {
    const sched = this;
    return {
      now: () => SIM_EPOCH_MS + sched.nowMs + (sched.wallSkewMs.get(owner) ?? 0),
      monoMs: () => sched.nowMs,
      setTimeout: (fn, ms) => sched.at(ms, owner, 'timer', fn),
      setInterval(fn, ms) {
        let handle: TimerHandle;
        let stopped = false;
        const tick = () => {
          if (stopped) return;
          handle = sched.at(ms, owner, 'interval', tick);
          fn();
        };
        handle = sched.at(ms, owner, 'interval', tick);
        return {
          cancel: () => {
            stopped = true;
            handle.cancel();
          },
        };
      },
      defer: (fn) => void sched.at(0, owner, 'defer', fn),
      yield: () => new Promise<void>((resolve) => sched.at(0, owner, 'yield', resolve)),
      sleep: (ms) => new Promise<void>((resolve) => sched.at(ms, owner, 'sleep', resolve)),
    };
  }

  /** A node's wall clock jumps by `ms` (NTP step); simulated (monotonic) time is unaffected. */
  jumpWallClock(owner: string, ms: number): void {
    this.wallSkewMs.set(owner, (this.wallSkewMs.get(owner) ?? 0) + ms);
  }

  /**
   * A process died: cancel every pending event it owns, and any it would schedule later. Owners
   * are process incarnations ('n1#2'): a restarted node gets a new one.
   */
  kill(owner: string): void {
    this.dead.add(owner);
  }

  isDead(owner: string): boolean {
    return this.dead.has(owner);
  }

  /** Run the next event and the promise continuations it caused. False when none is left. */
  async step(): Promise<boolean> {
    if (!this.fire()) return false;
    await realImmediate(); // every microtask the event caused has run
    this.afterEvent?.();
    return true;
  }

  /** Run the next live event; its continuations are the caller's to wait for. False if none. */
  private fire(): boolean {
    for (;;) {
      const e = this.heap.pop();
      if (e === undefined) return false;
      if (e.cancelled || this.dead.has(e.owner)) continue;
      if (++this.eventsRun > this.eventBudget)
        throw new EventBudgetExceeded(`more than ${this.eventBudget} events`);
      if (e.at > this.nowMs) this.nowMs = e.at;
      this.onEvent?.(this.nowMs, e.owner, e.label);
      try {
        e.fn();
      } catch (err) {
        // An exception escaping an event of a process ends that process in production (Node's
        // uncaughtException); the owner of the simulation decides what it means.
        if (this.onUncaught === null) throw err;
        this.onUncaught(e.owner, err);
      }
      return true;
    }
  }

  /**
   * The wait for the continuations of the event runFor/runUntil just fired: their loops are past
   * their first await (microtasks), so `ticked` is exact; a real event-loop turn every so many.
   */
  private afterFire(): Promise<void> {
    return (this.eventsRun - 1) % EVENTS_PER_REAL_TURN === 0 ? realImmediate() : ticked();
  }

  /** Time of the next live event, or null. */
  private nextAt(): number | null {
    for (;;) {
      const e = this.heap.peek();
      if (e === undefined) return null;
      if (e.cancelled || this.dead.has(e.owner)) {
        this.heap.pop();
        continue;
      }
      return e.at;
    }
  }

  /** Run events until simulated time reaches now + ms (then time is exactly there). */
  async runFor(ms: number): Promise<void> {
    const until = this.nowMs + ms;
    // First let the work the caller started (a statement, a promotion) run up to its first wait on
    // the scheduler: only then is its next event in the heap. Without this, simulated time would
    // pass while that work sat in the microtask queue (CPU work taking simulated time). Draining
    // the microtask queue is that wait (the simulated processes use no real timers or I/O); the
    // real turn that lets Node report a rejection left unhandled is taken once, at the end.
    await drained();
    for (;;) {
      const next = this.nextAt();
      if (next === null || next > until) break;
      this.fire();
      await this.afterFire(); // every microtask the event caused has run
      this.afterEvent?.();
    }
    await this.settled();
    if (this.nowMs < until) this.nowMs = until;
  }

  /**
   * At the end of runFor/runUntil: the last event's continuations have run (the loops are past an
   * await, so `ticked` is exact). No real event-loop turn here: about 90 calls a seed each ended
   * with one, and a seed cost 1.07 times the CPU with them (the same seeds alternated in one
   * process). A rejection left unhandled is reported at the next real turn: every
   * EVENTS_PER_REAL_TURN events, and `reportUnhandled`, which the simulation takes before the
   * checks after convergence and before its result.
   */
  private settled(): Promise<void> {
    return ticked();
  }

  /**
   * One real event-loop turn, in which Node reports the promise rejections left unhandled so far
   * (each a violation: the server process would die). The simulation takes it before the checks
   * after convergence and before its result, so a rejection is never reported after the seed.
   */
  reportUnhandled(): Promise<void> {
    return realImmediate();
  }

  /**
   * Run events until `done()` holds (checked after each event) or `ms` of simulated time pass.
   * Returns whether `done()` held.
   */
  async runUntil(done: () => boolean, ms: number): Promise<boolean> {
    const until = this.nowMs + ms;
    await drained(); // as in runFor
    for (;;) {
      if (done()) break;
      const next = this.nextAt();
      if (next === null || next > until) break;
      this.fire();
      await this.afterFire(); // every microtask the event caused has run
      this.afterEvent?.();
    }
    await this.settled();
    if (done()) return true;
    if (this.nowMs < until) this.nowMs = until;
    return false;
  }
}
