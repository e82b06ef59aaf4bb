/**
 * The promotion lifecycle machine as a graph for the page, generated from the xstate machine
 * definition itself (`lifecycleMachine.root`: its state nodes, their transitions and guards), laid
 * out with ELK (elkjs, layered, compound states as containers). Nothing about the machine is
 * written here by hand: a state or transition added to the machine appears on the page.
 *
 * Also: `activeStates` (the ids lit for a node's status `lifecycle` string) and
 * `inferTransitions` (which edges fired between two polled states: the shortest event sequence
 * that xstate's own `transition()` accepts from one to the other).
 *
 * Entry points: `lifecycleGraph`, `stateValueOf`, `activeStates`, `inferTransitions`.
 */
import elkModule from 'elkjs/lib/elk.bundled.js';
import type { ElkExtendedEdge, ElkNode } from 'elkjs/lib/elk-api.js';

// elk.bundled.js is CommonJS: module.exports is the constructor, and so is its .default.
const ELK = elkModule.default;
import { transition, type StateValue } from 'xstate';
import {
  describeState,
  lifecycleMachine,
  type LifecycleEvent,
} from '../lifecycle/lifecycle-machine.ts';
import { STOP_MODES } from '../protocol/messages.ts';
import type { FiredTransition, GraphEdge, GraphState, LifecycleGraph } from './wire.ts';

export type { FiredTransition, GraphEdge, GraphState, LifecycleGraph } from './wire.ts';

interface StateNodeLike {
  id: string;
  key: string;
  type: GraphState['kind'];
  parent?: StateNodeLike;
  initial?: { target: readonly StateNodeLike[] };
  states: Record<string, StateNodeLike>;
  transitions: Map<string, ReadonlyArray<TransitionLike>>;
  always?: ReadonlyArray<TransitionLike>;
}
interface TransitionLike {
  target?: readonly StateNodeLike[];
  guard?: unknown;
}

const CHAR_W = 7;
const LINE_H = 18;

function guardName(g: unknown): string | null {
  if (g === undefined || g === null) return null;
  if (typeof g === 'string') return g;
  const t = (g as { type?: unknown }).type;
  return typeof t === 'string' ? t : 'guard';
}

/** States and edges of the machine, in definition order (no layout). */
function walk(): {
  states: Omit<GraphState, 'x' | 'y' | 'width' | 'height'>[];
  edges: Omit<GraphEdge, 'points' | 'label'>[];
} {
  const states: Omit<GraphState, 'x' | 'y' | 'width' | 'height'>[] = [];
  const edges: Omit<GraphEdge, 'points' | 'label'>[] = [];
  const visit = (n: StateNodeLike): void => {
    const parent = n.parent ?? null;
    if (parent !== null) {
      states.push({
        id: n.id,
        label: n.key,
        parent: parent.parent === undefined ? null : parent.id,
        kind: n.type,
        initial: parent.initial?.target.some((t) => t.id === n.id) ?? false,
      });
    }
    const add = (event: string, t: TransitionLike) => {
      for (const target of t.target ?? []) {
        edges.push({
          id: `e${edges.length}`,
          source: n.id,
          target: target.id,
          event,
          guard: guardName(t.guard),
        });
      }
    };
    for (const t of n.always ?? []) add('always', t);
    for (const [event, ts] of n.transitions) for (const t of ts) add(event, t);
    for (const c of Object.values(n.states)) visit(c);
  };
  visit(lifecycleMachine.root as unknown as StateNodeLike);
  return { states, edges };
}

let cached: Promise<LifecycleGraph> | null = null;

/** The machine's graph, laid out once per process. */
export function lifecycleGraph(): Promise<LifecycleGraph> {
  cached ??= layout();
  return cached;
}

type WalkedState = Omit<GraphState, 'x' | 'y' | 'width' | 'height'>;
type WalkedEdge = Omit<GraphEdge, 'points' | 'label'>;

const edgeLabelOf = (e: WalkedEdge) => (e.guard === null ? e.event : `${e.event} [${e.guard}]`);

/** ELK's input: compound states as labelled containers, leaves sized by their label, the edges. */
function elkGraph(states: WalkedState[], edges: WalkedEdge[]): ElkNode {
  const elkNodes = new Map<string, ElkNode>();
  const root: ElkNode = {
    id: '__root',
    layoutOptions: {
      'elk.algorithm': 'layered',
      'elk.direction': 'DOWN',
      'elk.hierarchyHandling': 'INCLUDE_CHILDREN',
      'elk.json.edgeCoords': 'ROOT',
      'elk.json.shapeCoords': 'ROOT',
      'elk.layered.spacing.nodeNodeBetweenLayers': '28',
      'elk.spacing.nodeNode': '14',
      'elk.spacing.edgeLabel': '2',
      'elk.edgeLabels.inline': 'false',
    },
    children: [],
    edges: [],
  };
  for (const s of states) {
    const hasChildren = states.some((c) => c.parent === s.id);
    const n: ElkNode = hasChildren
      ? {
          id: s.id,
          labels: [{ text: s.label, width: s.label.length * CHAR_W + 8, height: LINE_H }],
          layoutOptions: {
            'elk.padding': '[top=28,left=12,bottom=12,right=12]',
            'elk.nodeLabels.placement': 'INSIDE V_TOP H_LEFT',
            ...(s.kind === 'parallel' ? { 'elk.direction': 'DOWN' } : {}),
          },
          children: [],
        }
      : { id: s.id, width: s.label.length * CHAR_W + 24, height: 30 };
    elkNodes.set(s.id, n);
    (s.parent === null ? root : elkNodes.get(s.parent)!).children!.push(n);
  }
  root.edges = edges.map((e): ElkExtendedEdge => ({
    id: e.id,
    sources: [e.source],
    targets: [e.target],
    labels: [{ text: edgeLabelOf(e), width: edgeLabelOf(e).length * 6 + 4, height: 14 }],
  }));
  return root;
}

/** The walked states and edges with the positions ELK gave them (`out`: its laid-out root). */
function placedGraph(out: ElkNode, states: WalkedState[], edges: WalkedEdge[]): LifecycleGraph {
  const placed = new Map<string, ElkNode>();
  const collect = (n: ElkNode) => {
    placed.set(n.id, n);
    for (const c of n.children ?? []) collect(c);
  };
  collect(out);
  const laidEdges = new Map<string, ElkExtendedEdge>();
  for (const e of out.edges ?? []) laidEdges.set(e.id, e);
  return {
    machineId: lifecycleMachine.id,
    width: out.width ?? 0,
    height: out.height ?? 0,
    states: states.map((s) => {
      const p = placed.get(s.id)!;
      return { ...s, x: p.x ?? 0, y: p.y ?? 0, width: p.width ?? 0, height: p.height ?? 0 };
    }),
    edges: edges.map((e) => {
      const le = laidEdges.get(e.id);
      const sec = le?.sections?.[0];
      const points = sec ? [sec.startPoint, ...(sec.bendPoints ?? []), sec.endPoint] : [];
      const l = le?.labels?.[0];
      return {
        ...e,
        points: points.map((p) => ({ x: p.x, y: p.y })),
        label: { text: edgeLabelOf(e), x: l?.x ?? 0, y: l?.y ?? 0 },
      };
    }),
  };
}

async function layout(): Promise<LifecycleGraph> {
  const { states, edges } = walk();
  const out = await new ELK().layout(elkGraph(states, edges));
  return placedGraph(out, states, edges);
}

/**
 * The state value of a status `lifecycle` string (lifecycle/lifecycle-machine.ts `describeState`):
 * 'recovery(streaming,paused)', 'promoting.replayingReceived', 'primary.readWrite', 'starting'.
 * Null when the string is not one the machine can be in.
 */
export function stateValueOf(lifecycle: string): StateValue | null {
  const m = /^recovery\((\w+),(\w+)\)$/.exec(lifecycle);
  let value: StateValue;
  if (m) value = { recovery: { receiver: m[1]!, replay: m[2]! } };
  else if (/^\w+\.\w+$/.test(lifecycle)) {
    const [k, sub] = lifecycle.split('.') as [string, string];
    value = { [k]: sub };
  } else if (/^\w+$/.test(lifecycle)) value = lifecycle;
  else return null;
  try {
    return snapshotOf(value).value;
  } catch {
    return null;
  }
}

function snapshotOf(value: StateValue) {
  return lifecycleMachine.resolveState({ value, context: { startedInRecovery: true } });
}

/** The ids of every active state (leaves and their ancestors) of a status `lifecycle` string. */
export function activeStates(lifecycle: string): string[] {
  const v = stateValueOf(lifecycle);
  if (v === null) return [];
  const ids: string[] = [];
  const rec = (prefix: string, val: StateValue) => {
    if (typeof val === 'string') {
      ids.push(`${prefix}.${val}`);
      return;
    }
    for (const [k, sub] of Object.entries(val)) {
      ids.push(`${prefix}.${k}`);
      if (sub !== undefined) rec(`${prefix}.${k}`, sub as StateValue);
    }
  };
  rec(lifecycleMachine.id, v);
  return ids;
}

/** Every event the machine accepts somewhere (STOP once per stop mode). */
function allEvents(): LifecycleEvent[] {
  const types = new Set<string>();
  for (const e of walk().edges) if (e.event !== 'always') types.add(e.event);
  const out: LifecycleEvent[] = [];
  for (const t of types) {
    if (t === 'STOP') for (const mode of STOP_MODES) out.push({ type: 'STOP', mode });
    else out.push({ type: t } as LifecycleEvent);
  }
  return out;
}

/**
 * The transitions that took a node from `from` to `to` (status `lifecycle` strings): the
 * shortest sequence of events (at most `maxSteps`) that xstate's `transition()` accepts, each
 * mapped to the definition's edge. [] when the states are equal or no path exists (e.g. a
 * restart, which begins a new machine).
 */
export function inferTransitions(from: string, to: string, maxSteps = 6): FiredTransition[] {
  const a = stateValueOf(from);
  const b = stateValueOf(to);
  if (a === null || b === null) return [];
  const key = (v: StateValue) => JSON.stringify(v);
  const goal = key(b);
  if (key(a) === goal) return [];
  const events = allEvents();
  const { edges } = walk();
  type Step = {
    value: StateValue;
    path: Array<{ event: LifecycleEvent; prev: StateValue; next: StateValue }>;
  };
  const seen = new Set([key(a)]);
  let frontier: Step[] = [{ value: a, path: [] }];
  for (let depth = 0; depth < maxSteps && frontier.length > 0; depth++) {
    const next: Step[] = [];
    for (const s of frontier) {
      for (const ev of events) {
        const [snap] = transition(lifecycleMachine, snapshotOf(s.value), ev);
        const k = key(snap.value);
        if (seen.has(k)) continue;
        seen.add(k);
        const path = [...s.path, { event: ev, prev: s.value, next: snap.value }];
        if (k === goal) {
          return path.map((p) => {
            const prevActive = new Set(activeStates(describe(p.prev)));
            const nextActive = new Set(activeStates(describe(p.next)));
            const edge = edges.find(
              (e) =>
                e.event === p.event.type && prevActive.has(e.source) && nextActive.has(e.target),
            );
            return {
              edge: edge?.id ?? '',
              event: p.event.type,
              from: describe(p.prev),
              to: describe(p.next),
            };
          });
        }
        next.push({ value: snap.value, path });
      }
    }
    frontier = next;
  }
  return [];
}

/** The status string of a state value (the inverse of `stateValueOf`). */
function describe(v: StateValue): string {
  return describeState(snapshotOf(v));
}
