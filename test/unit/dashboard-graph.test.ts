/**
 * The lifecycle graph is the machine's own definition (every state and transition of
 * `lifecycleMachine`, nothing more), the lit states follow a status string, the inferred
 * transitions are those xstate takes, and the sampled lag follows LagTracker's rule.
 */
import { describe, expect, it } from 'vitest';
import { lifecycleMachine } from '../../lifecycle/lifecycle-machine.ts';
import {
  activeStates,
  inferTransitions,
  lifecycleGraph,
  stateValueOf,
} from '../../dashboard/machine-graph.ts';
import { LagTracker } from '../../dashboard/lag.ts';

describe('lifecycle graph', () => {
  it('has every state of the machine, each placed inside its parent', async () => {
    const g = await lifecycleGraph();
    const ids: string[] = [];
    const walk = (n: { id: string; states: Record<string, unknown> }) => {
      for (const c of Object.values(n.states) as Array<typeof n>) {
        ids.push(c.id);
        walk(c);
      }
    };
    walk(lifecycleMachine.root as never);
    expect(g.states.map((s) => s.id).sort()).toEqual(ids.sort());
    for (const s of g.states) {
      expect(s.width).toBeGreaterThan(0);
      if (s.parent === null) continue;
      const p = g.states.find((x) => x.id === s.parent)!;
      expect(s.x).toBeGreaterThanOrEqual(p.x);
      expect(s.x + s.width).toBeLessThanOrEqual(p.x + p.width + 0.5);
    }
  });

  it('has every targeted transition with its event and guard, routed', async () => {
    const g = await lifecycleGraph();
    const promote = g.edges.filter((e) => e.event === 'PROMOTE');
    expect(promote.map((e) => [e.source, e.target])).toEqual([
      ['lifecycle.recovery', 'lifecycle.promoting'],
    ]);
    const stops = g.edges.filter((e) => e.source === 'lifecycle.recovery' && e.event === 'STOP');
    expect(stops.map((e) => e.guard)).toEqual(['isImmediateStop', 'isSmartStop', null]);
    expect(g.edges.find((e) => e.event === 'always')?.guard).toBe('startsInRecovery');
    for (const e of g.edges) expect(e.points.length).toBeGreaterThanOrEqual(2);
    // Self-transitions without a target (RESUME while running, PAUSE while paused) draw no edge.
    expect(g.edges.every((e) => e.target !== '')).toBe(true);
  });

  it('lights the active states of a status string', () => {
    expect(activeStates('recovery(streaming,paused)')).toEqual([
      'lifecycle.recovery',
      'lifecycle.recovery.receiver',
      'lifecycle.recovery.receiver.streaming',
      'lifecycle.recovery.replay',
      'lifecycle.recovery.replay.paused',
    ]);
    expect(activeStates('primary.readWrite')).toEqual([
      'lifecycle.primary',
      'lifecycle.primary.readWrite',
    ]);
    expect(stateValueOf('recovery(flying,paused)')).toBeNull();
    expect(activeStates('nonsense')).toEqual([]);
  });

  it('infers the transitions between two samples with xstate', async () => {
    const g = await lifecycleGraph();
    const fired = inferTransitions('recovery(streaming,paused)', 'primary.readWrite');
    expect(fired.map((f) => f.event)).toEqual([
      'PROMOTE',
      'CAUGHT_UP',
      'END_OF_RECOVERY_WRITTEN',
      'CHECKPOINT_DONE',
    ]);
    for (const f of fired) {
      const e = g.edges.find((x) => x.id === f.edge)!;
      expect(e.event).toBe(f.event);
    }
    const stop = inferTransitions('recovery(streaming,running)', 'stopping.immediate');
    expect(stop).toHaveLength(1);
    expect(g.edges.find((e) => e.id === stop[0]!.edge)?.guard).toBe('isImmediateStop');
    expect(inferTransitions('primary.readWrite', 'recovery(streaming,running)')).toEqual([]);
    expect(inferTransitions('primary.readWrite', 'primary.readWrite')).toEqual([]);
  });
});

describe('LagTracker', () => {
  it('measures from the first flush past the replay LSN', () => {
    const t = new LagTracker();
    expect(t.lagSeconds('p', 0, 0)).toBeNull();
    t.record('p', 1000, 100);
    t.record('p', 2000, 200);
    t.record('p', 2500, 200); // no advance: not stored
    t.record('p', 3000, 300);
    expect(t.lagSeconds('p', 5000, 300)).toBe(0);
    expect(t.lagSeconds('p', 5000, 250)).toBe(2);
    expect(t.lagSeconds('p', 5000, 150)).toBe(3);
    expect(t.lagSeconds('p', 5000, 0)).toBe(4);
  });
});
