/**
 * DOM helpers of the page: `$` (an element of index.html by id), `el` and `svg` (an element with
 * attributes, listeners and children), `field` (a dt/dd pair), `unavailable`.
 */

const SVG_NS = 'http://www.w3.org/2000/svg';

/** Attribute values; `on…` keys take listeners; null and undefined attributes are left out. */
export type Attrs = Record<string, string | number | boolean | null | undefined | EventListener>;
export type Child = Node | string | number | null | undefined;

/** An element of index.html (it is there: the page is served with it). */
export function $(id: string): HTMLElement {
  const e = document.getElementById(id);
  if (e === null) throw new Error(`the page has no #${id}`);
  return e;
}

function fill<E extends Element>(e: E, attrs: Attrs, children: Child[]): E {
  for (const [k, v] of Object.entries(attrs)) {
    if (v === null || v === undefined) continue;
    if (typeof v === 'function') e.addEventListener(k.slice(2), v);
    else if (k === 'class') e.setAttribute('class', String(v));
    else e.setAttribute(k, String(v));
  }
  for (const c of children)
    if (c !== null && c !== undefined) e.append(c instanceof Node ? c : String(c));
  return e;
}

export function el<K extends keyof HTMLElementTagNameMap>(
  tag: K,
  attrs: Attrs = {},
  ...children: Child[]
): HTMLElementTagNameMap[K] {
  return fill(document.createElement(tag), attrs, children);
}

export function svg(tag: string, attrs: Attrs = {}, ...children: Child[]): SVGElement {
  return fill(document.createElementNS(SVG_NS, tag) as SVGElement, attrs, children);
}

/** An svg element of index.html. */
export function svgRoot(id: string): SVGSVGElement {
  return $(id) as unknown as SVGSVGElement;
}

/** A definition-list row: the value shown in `[data-field=key]` (the tests read it), or "—". */
export function field(label: string, key: string, value: Child): HTMLElement[] {
  return [el('dt', {}, label), el('dd', { 'data-field': key }, value ?? '—')];
}

export function unavailable(what: string): HTMLElement {
  return el(
    'span',
    { class: 'unavailable', title: `${what}: PostgreSQL does not expose this` },
    'unavailable',
  );
}

/** An arrowhead marker (`id`) for the lines of an svg. */
export function arrowDefs(id: string, size: number): SVGElement {
  return svg(
    'defs',
    {},
    svg(
      'marker',
      {
        id,
        viewBox: '0 0 10 10',
        refX: 10,
        refY: 5,
        markerWidth: size,
        markerHeight: size,
        orient: 'auto',
      },
      svg('path', { d: 'M0,0 L10,5 L0,10 z', fill: '#57606a' }),
    ),
  );
}
