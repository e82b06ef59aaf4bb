/**
 * The lifecycle machine on its own (no processes): an exhaustive walk with xstate/graph reaches
 * every state node and fires every declared transition; events a state does not handle are refused
 * (snapshot.can is false and the state does not change); PostgreSQL 14+ pause/promote semantics
 * hold on every path.
 */
import { describe, expect, it } from 'vitest';
import { createActor, transition, type AnyStateNode } from 'xstate';
import { getAdjacencyMap, getShortestPaths } from 'xstate/graph';
import {
  describeState,
  isInRecovery,
  lifecycleMachine,
  pauseStateOf,
  refusalOf,
  stopModeOf,
  type LifecycleEvent,
  type LifecycleSnapshot,
} from '../../lifecycle/lifecycle-machine.ts';

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

function allStateNodes(node: AnyStateNode): AnyStateNode[] {
  return [node, ...Object.values(node.states).flatMap((n) => allStateNodes(n as AnyStateNode))];
}

function stateIdsOf(s: LifecycleSnapshot): string[] {
  return [...s._nodes].map((n) => n.id);
}

function walk(input: { inRecovery: boolean }) {
  return getAdjacencyMap(lifecycleMachine, { events: EVENTS, input });
}

describe('lifecycle machine', () => {
  it('reaches every state node from a standby start or a primary start', () => {
    const seen = new Set<string>();
    for (const inRecovery of [true, false]) {
      for (const v of Object.values(walk({ inRecovery })))
        for (const id of stateIdsOf(v.state)) seen.add(id);
    }
    // 'starting' is transient: its eventless transition picks recovery or primary before any event.
    const all = allStateNodes(lifecycleMachine.root)
      .map((n) => n.id)
      .filter((id) => id !== 'lifecycle.starting');
    expect([...all].filter((id) => !seen.has(id))).toEqual([]);
  });

  it('fires every declared transition on some path', () => {
    const declared = new Set<unknown>();
    for (const node of allStateNodes(lifecycleMachine.root)) {
      for (const [eventType, transitions] of node.transitions)
        if (eventType !== '') for (const t of transitions) declared.add(t);
    }
    const fired = new Set<unknown>();
    for (const inRecovery of [true, false]) {
      for (const v of Object.values(walk({ inRecovery }))) {
        for (const t of Object.values(v.transitions) as Array<{ event: LifecycleEvent }>) {
          for (const def of lifecycleMachine.getTransitionData(v.state as never, t.event as never))
            fired.add(def);
        }
      }
    }
    const missing = [...declared]
      .filter((t) => !fired.has(t))
      .map((t) => {
        const d = t as unknown as { source: AnyStateNode; eventType: string };
        return `${d.source.id} on ${d.eventType}`;
      });
    expect(missing).toEqual([]);
    expect(fired.size).toBe(declared.size);
  });

  it('refuses events a state does not handle, leaving the state unchanged', () => {
    for (const inRecovery of [true, false]) {
      for (const v of Object.values(walk({ inRecovery }))) {
        for (const e of EVENTS) {
          if (v.state.can(e)) continue;
          const [next] = transition(lifecycleMachine, v.state, e);
          expect(describeState(next)).toBe(describeState(v.state));
        }
      }
    }
    const actor = createActor(lifecycleMachine, { input: { inRecovery: false } }).start();
    expect(actor.getSnapshot().can({ type: 'PAUSE' })).toBe(false);
    expect(refusalOf(actor.getSnapshot(), 'PAUSE')?.message).toBe('recovery is not in progress');
    expect(refusalOf(actor.getSnapshot(), 'PROMOTE')?.message).toBe('recovery is not in progress');
  });

  it('follows PostgreSQL 14+: pause requested → paused; promotion while paused resets pause and promotes', () => {
    const a = createActor(lifecycleMachine, { input: { inRecovery: true } }).start();
    expect(isInRecovery(a.getSnapshot())).toBe(true);
    a.send({ type: 'PAUSE' });
    expect(pauseStateOf(a.getSnapshot())).toBe('pause requested');
    a.send({ type: 'PAUSE_CONFIRMED' });
    expect(pauseStateOf(a.getSnapshot())).toBe('paused');
    a.send({ type: 'PROMOTE' });
    expect(pauseStateOf(a.getSnapshot())).toBe('not paused');
    expect(refusalOf(a.getSnapshot(), 'PAUSE')?.message).toBe('standby promotion is ongoing');
    expect(refusalOf(a.getSnapshot(), 'RESUME')?.message).toBe('standby promotion is ongoing');
    expect(isInRecovery(a.getSnapshot())).toBe(true);
    a.send({ type: 'CAUGHT_UP' });
    a.send({ type: 'END_OF_RECOVERY_WRITTEN' });
    // Read-write before the requested checkpoint completes.
    expect(a.getSnapshot().matches({ primary: 'checkpointing' })).toBe(true);
    expect(isInRecovery(a.getSnapshot())).toBe(false);
    a.send({ type: 'CHECKPOINT_DONE' });
    expect(a.getSnapshot().matches({ primary: 'readWrite' })).toBe(true);
  });

  it('every shortest path to a promoted primary passes through PROMOTE, CAUGHT_UP and END_OF_RECOVERY_WRITTEN', () => {
    const paths = getShortestPaths(lifecycleMachine, {
      events: EVENTS,
      input: { inRecovery: true },
      toState: (s) => (s as LifecycleSnapshot).matches({ primary: 'readWrite' }),
    });
    expect(paths.length).toBeGreaterThan(0);
    for (const p of paths) {
      const types = p.steps.map((s) => s.event.type);
      for (const t of ['PROMOTE', 'CAUGHT_UP', 'END_OF_RECOVERY_WRITTEN', 'CHECKPOINT_DONE'])
        expect(types).toContain(t);
    }
  });

  it('runs the effects of each transition once, in order', () => {
    const calls: string[] = [];
    const rec = (name: string) => () => {
      calls.push(name);
    };
    const m = lifecycleMachine.provide({
      actions: {
        requestReplayPause: rec('pause'),
        resumeReplay: rec('resume'),
        recordPromoteRequested: rec('promoteRequested'),
        stopWalReceiver: rec('stopReceiver'),
        wakeReplayForPromotion: rec('wake'),
        writeEndOfRecovery: rec('endOfRecovery'),
        openForWrites: rec('openForWrites'),
        requestCheckpoint: rec('checkpoint'),
      },
    });
    const a = createActor(m, { input: { inRecovery: true } }).start();
    for (const type of [
      'PAUSE',
      'PAUSE_CONFIRMED',
      'RESUME',
      'PROMOTE',
      'CAUGHT_UP',
      'END_OF_RECOVERY_WRITTEN',
    ] as const)
      a.send({ type });
    expect(calls).toEqual([
      'pause',
      'resume',
      'promoteRequested',
      'stopReceiver',
      'wake',
      'endOfRecovery',
      'openForWrites',
      'checkpoint',
    ]);
  });

  it("the node's shutting-down is the stopping state: every stop reaches one mode, and nothing else does", () => {
    for (const inRecovery of [true, false]) {
      for (const v of Object.values(walk({ inRecovery }))) {
        const mode = stopModeOf(v.state);
        expect(mode !== null).toBe(v.state.matches('stopping'));
        if (v.state.matches('stopping')) continue;
        for (const m of ['smart', 'fast', 'immediate'] as const) {
          const [next] = transition(lifecycleMachine, v.state, { type: 'STOP', mode: m });
          // A smart stop during promotion does not wait (no sessions to wait for): it is fast.
          const want = m === 'smart' && v.state.matches('promoting') ? 'fast' : m;
          expect(stopModeOf(next)).toBe(want);
        }
      }
    }
  });
});
