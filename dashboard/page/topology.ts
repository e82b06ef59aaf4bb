/**
 * The topology panel: one box per node in columns by depth (primary, its standbys, cascaded
 * standbys), an arrow from each standby's upstream labelled with its sync state.
 */
import { arrowDefs, svg, svgRoot } from './dom.ts';
import { state, type NodeView } from './state.ts';

const W = 130;
const H = 44;

interface Point {
  x: number;
  y: number;
}

/** A node's depth: 0 for a node without a known upstream, else its upstream's + 1. */
function depths(nodes: NodeView[]): Map<string, number> {
  const depth = new Map<string, number>();
  const depthOf = (n: NodeView, seen = new Set<string>()): number => {
    const known = depth.get(n.name);
    if (known !== undefined) return known;
    if (seen.has(n.name)) return 0;
    seen.add(n.name);
    const up = n.role === 'standby' && n.upstream ? state.nodes.get(n.upstream) : undefined;
    const d = up ? depthOf(up, seen) + 1 : 0;
    depth.set(n.name, d);
    return d;
  };
  nodes.forEach((n) => depthOf(n));
  return depth;
}

/** Box positions, and the drawing's columns and rows. */
function layout(nodes: NodeView[]): { pos: Map<string, Point>; cols: number; rows: number } {
  const depth = depths(nodes);
  const cols = new Map<number, NodeView[]>();
  for (const n of nodes) {
    const d = depth.get(n.name)!;
    if (!cols.has(d)) cols.set(d, []);
    cols.get(d)!.push(n);
  }
  const pos = new Map<string, Point>();
  for (const [d, list] of cols)
    list.forEach((n, i) => pos.set(n.name, { x: 10 + d * (W + 60), y: 10 + i * (H + 20) }));
  const rows = Math.max(1, ...[...cols.values()].map((l) => l.length));
  return { pos, cols: cols.size, rows };
}

/** The arrow from a standby's upstream to it, with its sync state. */
function edge(n: NodeView, up: Point, me: Point): SVGElement[] {
  const x1 = up.x + W;
  const y1 = up.y + H / 2;
  const x2 = me.x;
  const y2 = me.y + H / 2;
  const sync = n.syncState ?? (n.state === 'running' ? 'not streaming' : n.state);
  return [
    svg('line', {
      x1,
      y1,
      x2,
      y2,
      stroke: sync === 'sync' ? '#cf222e' : '#57606a',
      'stroke-width': sync === 'sync' ? 2.5 : 1.5,
      'stroke-dasharray': sync === 'async' ? '5 3' : null,
      'marker-end': 'url(#arrow)',
    }),
    svg(
      'text',
      { x: (x1 + x2) / 2, y: (y1 + y2) / 2 - 4, 'text-anchor': 'middle', 'data-edge': n.name },
      sync,
    ),
  ];
}

function box(n: NodeView, p: Point): SVGElement {
  const color = n.state !== 'running' ? '#8c959f' : n.role === 'primary' ? '#1f6feb' : '#8250df';
  return svg(
    'g',
    { 'data-topology-node': n.name },
    svg('rect', {
      x: p.x,
      y: p.y,
      width: W,
      height: H,
      rx: 6,
      fill: '#fff',
      stroke: color,
      'stroke-width': 2,
    }),
    svg('text', { x: p.x + 8, y: p.y + 17, 'font-weight': 'bold' }, n.name),
    svg(
      'text',
      { x: p.x + 8, y: p.y + 34, fill: color },
      `${n.role ?? '?'}${n.state !== 'running' ? ` (${n.state})` : ''} · tl ${n.timeline ?? '?'}`,
    ),
  );
}

export function renderTopology(): void {
  const nodes = [...state.nodes.values()];
  const { pos, cols, rows } = layout(nodes);
  const s = svgRoot('topology');
  s.setAttribute('width', String(20 + cols * (W + 60)));
  s.setAttribute('height', String(20 + rows * (H + 20)));
  s.replaceChildren(arrowDefs('arrow', 6));
  for (const n of nodes) {
    const up = n.role === 'standby' && n.upstream ? pos.get(n.upstream) : undefined;
    if (up) s.append(...edge(n, up, pos.get(n.name)!));
  }
  for (const n of nodes) s.append(box(n, pos.get(n.name)!));
}
