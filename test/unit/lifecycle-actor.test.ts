/**
 * A lifecycle action that throws takes the node's ordinary failure path instead of xstate's (which
 * stops the actor and rethrows from a real setTimeout, ending the process). Method: run the
 * machine with one action that throws, under fake timers, and check who hears of the failure, that
 * no timer was scheduled, and that the machine keeps taking events.
 */
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest';
import { createActor, type Actor } from 'xstate';
import { InvariantViolation } from '../../common/assert.ts';
import {
  LifecycleActor,
  type LifecycleActionError,
  type LifecycleActions,
} from '../../lifecycle/lifecycle-actor.ts';
import {
  describeState,
  lifecycleMachine,
  type LifecycleEvent,
} from '../../lifecycle/lifecycle-machine.ts';

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

const EVENTS: LifecycleEvent[] = [
  { type: 'PAUSE' },
  { type: 'PAUSE_CONFIRMED' },
  { type: 'RESUME' },
  { type: 'PROMOTE' },
  { type: 'WAL_RECEIVED' },
  { type: 'CAUGHT_UP' },
  { type: 'UPSTREAM_LOST' },
  { type: 'UPSTREAM_CONNECTED' },
  { type: 'UPSTREAM_RETRY' },
  { type: 'END_OF_RECOVERY_WRITTEN' },
  { type: 'CHECKPOINT_DONE' },
  { type: 'STOP', mode: 'smart' },
  { type: 'STOP', mode: 'fast' },
  { type: 'STOP', mode: 'immediate' },
];

/**
 * What a machine did: each action with the state it read while running, and the state after each
 * event. `chained` gives an action events to send from inside it (an action that sends, as the
 * node's END_OF_RECOVERY_WRITTEN path could), to compare the queueing of such events too.
 */
type Log = string[];
type Chained = Partial<Record<string, LifecycleEvent[]>>;

function recording(
  log: Log,
  state: () => string,
  send: (e: LifecycleEvent) => void,
  chained: Chained,
) {
  return Object.fromEntries(
    Object.keys(lifecycleMachine.implementations.actions).map((name) => [
      name,
      () => {
        log.push(`${name} in ${state()}`);
        for (const e of chained[name] ?? []) send(e);
      },
    ]),
  ) as LifecycleActions;
}

/**
 * The same events through an xstate actor (the reference) and a LifecycleActor. The start's
 * actions log the state as '(start)' on both: a LifecycleActor is not reachable before its
 * constructor returns (nor is a node's, whose actions run in the node's constructor).
 */
function runBoth(inRecovery: boolean, events: LifecycleEvent[], chained: Chained = {}) {
  const ref: Log = [];
  const box: { a?: Actor<typeof lifecycleMachine>; started?: boolean } = {};
  const state = () => (box.started ? describeState(box.a!.getSnapshot()) : '(start)');
  box.a = createActor(
    lifecycleMachine.provide({ actions: recording(ref, state, (e) => box.a!.send(e), chained) }),
    { input: { inRecovery } },
  );
  box.a.start();
  box.started = true;
  const got: Log = [];
  const tbox: { a?: LifecycleActor } = {};
  tbox.a = new LifecycleActor(
    { inRecovery },
    recording(
      got,
      () => (tbox.a ? describeState(tbox.a.getSnapshot()) : '(start)'),
      (e) => tbox.a!.notify(e),
      chained,
    ),
    () => {},
  );
  for (const e of events) {
    box.a.send(e);
    ref.push(`after ${e.type}: ${JSON.stringify(box.a.getSnapshot().value)}`);
    tbox.a.send(e);
    got.push(`after ${e.type}: ${JSON.stringify(tbox.a.getSnapshot().value)}`);
  }
  return { ref, got };
}

describe('lifecycle actor: the transition table is xstate', () => {
  it('takes the transitions and runs the actions of an xstate actor, from every reachable state', () => {
    let compared = 0;
    for (const inRecovery of [true, false]) {
      // Breadth first over the states reached, each by its shortest path of events.
      const paths = new Map<string, LifecycleEvent[]>([['', []]]);
      const todo: LifecycleEvent[][] = [[]];
      while (todo.length > 0) {
        const path = todo.shift()!;
        for (const e of EVENTS) {
          const { ref, got } = runBoth(inRecovery, [...path, e]);
          expect(
            got,
            `${inRecovery ? 'standby' : 'primary'}: ${[...path, e].map((x) => x.type)}`,
          ).toEqual(ref);
          compared++;
          const reached = ref[ref.length - 1]!.replace(/^after \w+: /, '');
          if (!paths.has(reached)) {
            paths.set(reached, [...path, e]);
            todo.push([...path, e]);
          }
        }
      }
    }
    expect(compared).toBeGreaterThan(200);
  });

  it('queues an event an action sends and takes it after the transition, as xstate does', () => {
    const chained: Chained = {
      resumeReplay: [{ type: 'UPSTREAM_CONNECTED' }, { type: 'CAUGHT_UP' }],
      requestReplayPause: [{ type: 'PAUSE_CONFIRMED' }],
      wakeReplayForPromotion: [{ type: 'CAUGHT_UP' }],
      writeEndOfRecovery: [{ type: 'END_OF_RECOVERY_WRITTEN' }],
      openForWrites: [{ type: 'CHECKPOINT_DONE' }],
      requestCheckpoint: [{ type: 'STOP', mode: 'smart' }],
    };
    const events: LifecycleEvent[] = [
      { type: 'WAL_RECEIVED' },
      { type: 'PAUSE' },
      { type: 'PROMOTE' },
    ];
    const { ref, got } = runBoth(true, events, chained);
    expect(ref).toContain('retireStandbyRole in promoting.writingEndOfRecovery');
    expect(got).toEqual(ref);
  });
});
