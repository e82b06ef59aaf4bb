/**
 * The promotion lifecycle machine: drawn once from the graph the server generated (states as
 * nested boxes, transitions as routed edges), the chosen node's active states lit, the edges fired
 * in the last 15 s marked, and the list of transitions as they fire.
 */
import type { FiredTransition, GraphEdge, GraphState, LifecycleGraph } from '../wire.ts';
import { $, arrowDefs, el, svg, svgRoot } from './dom.ts';
import { state } from './state.ts';

function stateBox(st: GraphState): SVGElement {
  const container = st.kind === 'compound' || st.kind === 'parallel';
  return svg(
    'g',
    { class: `state ${st.kind}`, 'data-state': st.id },
    svg('rect', { x: st.x, y: st.y, width: st.width, height: st.height, rx: container ? 8 : 14 }),
    svg(
      'text',
      {
        x: st.x + (container ? 8 : st.width / 2),
        y: st.y + (container ? 16 : st.height / 2 + 4),
        'text-anchor': container ? 'start' : 'middle',
        'font-weight': container ? 'bold' : null,
      },
      `${st.label}${st.kind === 'parallel' ? ' (parallel)' : ''}${st.kind === 'final' ? ' ◉' : ''}`,
    ),
    st.initial ? svg('circle', { cx: st.x - 4, cy: st.y + 4, r: 3, fill: '#24292f' }) : null,
  );
}

function edgePath(e: GraphEdge): SVGElement {
  const d = e.points.map((p, i) => `${i === 0 ? 'M' : 'L'}${p.x},${p.y}`).join(' ');
  return svg(
    'g',
    { class: 'edge', 'data-edge': e.id, 'data-event': e.event },
    svg('path', { d, 'marker-end': 'url(#marrow)' }),
    svg('text', { x: e.label.x, y: e.label.y + 10 }, e.label.text),
  );
}

export function drawMachine(g: LifecycleGraph): void {
  const s = svgRoot('machine');
  s.setAttribute('viewBox', `0 0 ${g.width} ${g.height}`);
  s.setAttribute('width', String(g.width));
  s.setAttribute('height', String(g.height));
  s.replaceChildren(arrowDefs('marrow', 7));
  const byId = new Map(g.states.map((st) => [st.id, st]));
  const depth = (st: GraphState | undefined): number =>
    st?.parent ? depth(byId.get(st.parent)) + 1 : 0;
  // Parents first, so that a container never covers its children.
  for (const st of [...g.states].sort((a, b) => depth(a) - depth(b))) s.append(stateBox(st));
  for (const e of g.edges) if (e.points.length >= 2) s.append(edgePath(e));
  litMachine();
}

/** Follow a standby by default: its machine is the one that moves at failover. */
function defaultMachineNode(names: string[]): void {
  const chosen = state.machineNode === null ? undefined : state.nodes.get(state.machineNode);
  if (state.machineChosen || chosen?.role === 'standby') return;
  const standby = [...state.nodes.values()].find((n) => n.role === 'standby');
  const pick = standby?.name ?? state.machineNode ?? names[0] ?? null;
  if (pick !== state.machineNode) {
    state.machineNode = pick;
    litMachine();
  }
}

export function updateMachineSelect(): void {
  const sel = $('machine-node') as HTMLSelectElement;
  const names = [...state.nodes.keys()].sort();
  if (sel.dataset.names !== names.join(',')) {
    sel.dataset.names = names.join(',');
    sel.replaceChildren(...names.map((n) => el('option', { value: n }, n)));
    sel.onchange = () => {
      state.machineChosen = true;
      state.machineNode = sel.value;
      litMachine();
    };
  }
  defaultMachineNode(names);
  if (state.machineNode !== null) sel.value = state.machineNode;
}

export function litMachine(): void {
  const v = state.machineNode ? state.nodes.get(state.machineNode) : undefined;
  const active = new Set(v?.activeStates ?? []);
  document
    .querySelectorAll('#machine .state')
    .forEach((g) => g.classList.toggle('lit', active.has(g.getAttribute('data-state') ?? '')));
  const note = $('machine-note');
  if (v && v.engine === 'postgres')
    note.textContent =
      "PostgreSQL exposes no lifecycle machine: its state is unavailable (the graph is walsim's).";
  else if (v && v.state !== 'running')
    note.textContent = `${v.name} is ${v.state}: no state is lit.`;
  else note.textContent = v ? `${v.name}: ${v.lifecycle}` : '';
  const now = Date.now();
  document.querySelectorAll('#machine .edge').forEach((g) => {
    const t = state.fired.get(`${state.machineNode}|${g.getAttribute('data-edge')}`);
    g.classList.toggle('fired', t !== undefined && now - t < 2500);
    g.classList.toggle('recent', t !== undefined && now - t >= 2500 && now - t < 15000);
  });
}

/** A `transitions` message: listed, marked on the graph; a PROMOTE makes its node the lit one. */
export function transitions(m: { node: string; at: number; fired: FiredTransition[] }): void {
  const list = $('transitions');
  for (const f of m.fired) {
    state.fired.set(`${m.node}|${f.edge}`, m.at);
    const t = new Date(m.at).toISOString().slice(11, 23);
    list.prepend(
      el(
        'li',
        { 'data-transition-node': m.node, 'data-event': f.event },
        `${t}  ${m.node}  ${f.event}: ${f.from} → ${f.to}${m.fired.length > 1 ? ' (between two samples)' : ''}`,
      ),
    );
  }
  while (list.children.length > 200) list.lastElementChild?.remove();
  if (m.node !== state.machineNode && m.fired.some((f) => f.event === 'PROMOTE')) {
    state.machineNode = m.node;
    updateMachineSelect();
  }
  litMachine();
  setTimeout(litMachine, 2600);
}
