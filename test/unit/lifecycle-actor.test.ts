/**
 * A lifecycle action that throws takes the node's ordinary failure path instead of xstate's (which
 * stops the actor and rethrows from a real setTimeout, ending the process). Method: run the
 * machine with one action that throws, under fake timers, and check who hears of the failure, that
 * no timer was scheduled, and that the machine keeps taking events.
 */
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { createActor } from 'xstate';
import { InvariantViolation } from '../../common/assert.ts';
import {
  LifecycleActor,
  type LifecycleActionError,
  type LifecycleActions,
} from '../../lifecycle/lifecycle-actor.ts';
import { describeState, lifecycleMachine } from '../../lifecycle/lifecycle-machine.ts';

/** Every action a no-op, except the overrides. */
function actions(overrides: Partial<LifecycleActions> = {}): LifecycleActions {
  const all = Object.fromEntries(
    Object.keys(lifecycleMachine.implementations.actions).map((k) => [k, () => {}]),
  ) as LifecycleActions;
  return { ...all, ...overrides } as LifecycleActions;
}

const eio = () => {
  throw Object.assign(new Error('EIO: i/o error'), { code: 'EIO' });
};

beforeEach(() => {
  vi.useFakeTimers();
});
afterEach(() => {
  vi.useRealTimers();
});

describe('lifecycle actor: action failures', () => {
  it('xstate alone stops the actor and schedules a timer that rethrows (what the actor prevents)', () => {
    const actor = createActor(lifecycleMachine.provide({ actions: { requestReplayPause: eio } }), {
      input: { inRecovery: true },
    }).start();
    actor.send({ type: 'PAUSE' });
    expect(actor.getSnapshot().status).toBe('error');
    expect(vi.getTimerCount()).toBe(1);
    vi.clearAllTimers();
  });

  it('an Error goes to the requester and to onFailure once; no timer; the machine keeps running', () => {
    const failures: LifecycleActionError[] = [];
    const actor = new LifecycleActor(
      { inRecovery: true },
      actions({ requestReplayPause: eio }),
      (f) => failures.push(f),
    );
    expect(() => actor.send({ type: 'PAUSE' })).toThrow(/EIO: i\/o error/);
    expect(failures.map((f) => [f.action, f.event])).toEqual([['requestReplayPause', 'PAUSE']]);
    expect(failures[0]!.message).toBe(
      'lifecycle action "requestReplayPause" on PAUSE failed: EIO: i/o error',
    );
    expect(vi.getTimerCount()).toBe(0);
    // The transition stands and later events are taken.
    expect(actor.getSnapshot().status).toBe('active');
    expect(describeState(actor.getSnapshot())).toBe('recovery(connecting,pauseRequested)');
    actor.send({ type: 'RESUME' });
    expect(describeState(actor.getSnapshot())).toBe('recovery(connecting,running)');
    expect(failures).toHaveLength(1);
  });

  it('an InvariantViolation reaches onFailure as itself (the node makes it FATAL) and the requester', () => {
    const failures: LifecycleActionError[] = [];
    const inv = new InvariantViolation('INV-TEST: broken');
    const actor = new LifecycleActor(
      { inRecovery: true },
      actions({
        recordPromoteRequested: () => {
          throw inv;
        },
      }),
      (f) => failures.push(f),
    );
    expect(() => actor.send({ type: 'PROMOTE' })).toThrow(inv);
    expect(failures[0]!.cause).toBe(inv);
    expect(vi.getTimerCount()).toBe(0);
    expect(describeState(actor.getSnapshot())).toBe('promoting.replayingReceived');
  });

  it("notify (the node's own processes) reports the failure but throws to nobody", () => {
    const failures: LifecycleActionError[] = [];
    const actor = new LifecycleActor(
      { inRecovery: true },
      actions({ writeEndOfRecovery: eio }),
      (f) => failures.push(f),
    );
    actor.send({ type: 'PROMOTE' });
    expect(() => actor.notify({ type: 'CAUGHT_UP' })).not.toThrow();
    expect(failures.map((f) => [f.action, f.event])).toEqual([['writeEndOfRecovery', 'CAUGHT_UP']]);
    expect(describeState(actor.getSnapshot())).toBe('promoting.writingEndOfRecovery');
    expect(vi.getTimerCount()).toBe(0);
  });

  it('a failure while the machine starts (creating the role) is thrown to the opener', () => {
    const failures: LifecycleActionError[] = [];
    expect(
      () =>
        new LifecycleActor({ inRecovery: false }, actions({ createPrimaryRole: eio }), (f) =>
          failures.push(f),
        ),
    ).toThrow(/EIO/);
    expect(failures.map((f) => [f.action, f.event])).toEqual([['createPrimaryRole', 'start']]);
    expect(vi.getTimerCount()).toBe(0);
  });
});
