/**
 * The simulator's scheduler (sim/scheduler.ts): events run in (time, sequence) order, a killed
 * owner's events never run, and work a caller starts runs up to its first wait before simulated
 * time moves (else CPU work would take simulated time — a statement issued at t=40 that awaits a
 * few promises before its first timer started at t=140 in an earlier version).
 */
import { describe, expect, it } from 'vitest';
import { Scheduler } from '../../sim/scheduler.ts';

describe('Scheduler', () => {
  it('runs events in time order, then sequence order', async () => {
    const s = new Scheduler();
    const seen: string[] = [];
    s.at(10, 'a', 'x', () => seen.push(`x@${s.now}`));
    s.at(5, 'a', 'y', () => seen.push(`y@${s.now}`));
    s.at(10, 'b', 'z', () => seen.push(`z@${s.now}`));
    await s.runFor(20);
    expect(seen).toEqual(['y@5', 'x@10', 'z@10']);
    expect(s.now).toBe(20);
  });

  it('never runs the events of a killed owner', async () => {
    const s = new Scheduler();
    const seen: string[] = [];
    s.at(1, 'n#1', 'a', () => seen.push('a'));
    s.kill('n#1');
    s.at(1, 'n#1', 'b', () => seen.push('b'));
    s.at(1, 'n#2', 'c', () => seen.push('c'));
    await s.runFor(5);
    expect(seen).toEqual(['c']);
  });

  it('lets work started before runFor reach its first timer before time moves', async () => {
    const s = new Scheduler();
    const clock = s.clockFor('n#1');
    let firedAt = -1;
    const work = async () => {
      for (let i = 0; i < 20; i++) await Promise.resolve(); // a chain of awaits (e.g. a checkpoint's)
      await clock.sleep(0);
      firedAt = s.now;
    };
    void work();
    await s.runFor(100);
    expect(firedAt).toBe(0);
  });

  it('runs every continuation an event caused before the next event, however deep the chain', async () => {
    const s = new Scheduler();
    const seen: string[] = [];
    for (let k = 0; k < 600; k++) {
      // More events than one real event-loop turn covers: most are settled without a turn.
      s.at(1, 'n#1', `e${k}`, () => {
        const chain = async () => {
          for (let i = 0; i < 50; i++) await Promise.resolve();
          queueMicrotask(() => void Promise.resolve().then(() => seen.push(`done ${k}`)));
        };
        seen.push(`start ${k}`);
        void chain();
      });
    }
    await s.runFor(2);
    expect(seen).toEqual(Array.from({ length: 600 }, (_, k) => [`start ${k}`, `done ${k}`]).flat());
  });

  it('takes no real event-loop turn in runFor or runUntil, one in reportUnhandled (a turn costs a poll for I/O)', async () => {
    const s = new Scheduler();
    for (let k = 0; k < 20; k++) s.at(k, 'n#1', `e${k}`, () => {});
    await s.runFor(5); // the first events (one of them takes the turn of every 256th event)
    const real = globalThis.setImmediate;
    let turns = 0;
    globalThis.setImmediate = ((fn: () => void) => {
      turns++;
      return real(fn);
    }) as typeof setImmediate;
    try {
      await s.runFor(5);
      expect(turns).toBe(0); // was one at the end of each call, and before that one at the start too
      let seen = 0;
      s.at(1, 'n#1', 'last', () => seen++);
      expect(await s.runUntil(() => seen > 0, 100)).toBe(true);
      expect(turns).toBe(0);
      await s.reportUnhandled();
      expect(turns).toBe(1);
    } finally {
      globalThis.setImmediate = real;
    }
  });
});
