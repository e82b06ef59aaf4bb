/**
 * A small hand-written SVG line chart (pure): log or linear axes, one polyline with markers per
 * series, tick labels, axis titles and a legend. Enough for the sweeps' figures without a
 * plotting dependency.
 *
 * Entry points: `lineChart(spec)`, `logTicks`, `niceLinearTicks`, `STRATEGY_COLORS`.
 */
import type { DropStrategy } from '../../storage/drop.ts';

/** One colour per drop strategy, the same in every chart (the sweeps' and the strategy lab's). */
export const STRATEGY_COLORS: Record<DropStrategy, string> = {
  'full-scan': '#d62728',
  'cached-lookup': '#1f77b4',
  'rel-list': '#2ca02c',
  'recovery-hash': '#9467bd',
  'cache-at-create': '#ff7f0e',
};

export interface ChartPoint {
  x: number;
  y: number;
}

export interface ChartSeries {
  name: string;
  points: ChartPoint[];
  /** Stroke colour; by default the series' position picks one. */
  color?: string;
  /** Draw the line dashed (e.g. modeled seconds beside measured ones). */
  dashed?: boolean;
}

export interface LineChartSpec {
  title: string;
  xLabel: string;
  yLabel: string;
  xLog?: boolean;
  yLog?: boolean;
  series: ChartSeries[];
  /** Explicit x ticks (e.g. shared_buffers labels at their NBuffers); default: computed. */
  xTicks?: Array<{ value: number; label: string }>;
  width?: number;
  height?: number;
}

const COLORS = [
  '#1f77b4',
  '#d62728',
  '#2ca02c',
  '#ff7f0e',
  '#9467bd',
  '#8c564b',
  '#e377c2',
  '#17becf',
];

function esc(s: string): string {
  return s
    .replaceAll('&', '&amp;')
    .replaceAll('<', '&lt;')
    .replaceAll('>', '&gt;')
    .replaceAll('"', '&quot;');
}

/** Short number label: 1, 20, 0.5, 1k, 2.5M, 1e-4. */
export function shortNumber(v: number): string {
  const a = Math.abs(v);
  if (a === 0) return '0';
  if (a >= 1e9) return `${+(v / 1e9).toPrecision(3)}G`;
  if (a >= 1e6) return `${+(v / 1e6).toPrecision(3)}M`;
  if (a >= 1e4) return `${+(v / 1e3).toPrecision(3)}k`;
  if (a >= 1e-3) return `${+v.toPrecision(3)}`;
  return v.toExponential(0);
}

/** Powers of ten covering [min, max] (with 2 and 5 between when the range spans < 3 decades). */
export function logTicks(min: number, max: number): number[] {
  const lo = Math.floor(Math.log10(min));
  const hi = Math.ceil(Math.log10(max));
  const steps = hi - lo <= 2 ? [1, 2, 5] : [1];
  const ticks: number[] = [];
  for (let e = lo; e <= hi; e++)
    for (const m of steps) {
      const v = m * 10 ** e;
      if (v >= min * 0.999 && v <= max * 1.001) ticks.push(Number(v.toPrecision(12)));
    }
  return ticks;
}

export function niceLinearTicks(min: number, max: number, count = 5): number[] {
  const span = max - min || Math.abs(max) || 1;
  const raw = span / count;
  const mag = 10 ** Math.floor(Math.log10(raw));
  const step = [1, 2, 5, 10].map((m) => m * mag).find((s) => span / s <= count) ?? 10 * mag;
  const ticks: number[] = [];
  for (let v = Math.ceil(min / step) * step; v <= max + step * 1e-9; v += step)
    ticks.push(Number(v.toPrecision(12)));
  return ticks;
}

interface Axis {
  toPx(v: number): number;
  ticks: Array<{ value: number; label: string }>;
}

function makeAxis(
  values: number[],
  log: boolean,
  pxFrom: number,
  pxTo: number,
  fixed?: Array<{ value: number; label: string }>,
): Axis {
  let min = Math.min(...values);
  let max = Math.max(...values);
  if (log) {
    if (min === max) {
      min /= 2;
      max *= 2;
    }
    // Pad to whole decades only when the data spans little, so the lines keep room to show.
    const lmin = Math.log10(min) - 0.1;
    const lmax = Math.log10(max) + 0.1;
    const toPx = (v: number) => pxFrom + ((Math.log10(v) - lmin) / (lmax - lmin)) * (pxTo - pxFrom);
    const ticks =
      fixed ?? logTicks(10 ** lmin, 10 ** lmax).map((v) => ({ value: v, label: shortNumber(v) }));
    return { toPx, ticks };
  }
  if (min === max) {
    min -= 1;
    max += 1;
  }
  if (min > 0 && min < max / 3) min = 0;
  const pad = (max - min) * 0.05;
  const lo = min - pad;
  const hi = max + pad;
  const toPx = (v: number) => pxFrom + ((v - lo) / (hi - lo)) * (pxTo - pxFrom);
  const ticks = fixed ?? niceLinearTicks(lo, hi).map((v) => ({ value: v, label: shortNumber(v) }));
  return { toPx, ticks };
}

/** The figure's size and the plot area inside its margins (px; y0 is the x axis, y1 the top). */
interface PlotBox {
  W: number;
  H: number;
  x0: number;
  x1: number;
  y0: number;
  y1: number;
}

/**
 * The figure's box. The legend sits right of the plot: the figure widens so the longest name fits
 * (~7 px a character).
 */
function plotBox(spec: LineChartSpec): PlotBox {
  const legendPx = 60 + 7 * Math.max(0, ...spec.series.map((s) => s.name.length));
  const right = Math.max(200, legendPx);
  const W = (spec.width ?? 720) + (right - 200);
  const H = spec.height ?? 440;
  const m = { left: 80, right, top: 44, bottom: 64 };
  return { W, H, x0: m.left, x1: W - m.right, y0: H - m.bottom, y1: m.top };
}

/** The series with only their drawable points (finite; positive on a log axis), sorted by x. */
function drawableSeries(spec: LineChartSpec): ChartSeries[] {
  const ok = (p: ChartPoint) =>
    Number.isFinite(p.x) &&
    Number.isFinite(p.y) &&
    (!spec.xLog || p.x > 0) &&
    (!spec.yLog || p.y > 0);
  return spec.series.map((s) => ({
    ...s,
    points: s.points.filter(ok).sort((a, b) => a.x - b.x),
  }));
}

const px = (v: number) => v.toFixed(1);

/** Grid lines and tick labels of both axes, the axis lines, the axis titles. */
function axesSvg(spec: LineChartSpec, b: PlotBox, xa: Axis, ya: Axis): string[] {
  const { x0, x1, y0, y1 } = b;
  const out: string[] = [];
  for (const t of ya.ticks) {
    const y = ya.toPx(t.value);
    if (y < y1 - 0.5 || y > y0 + 0.5) continue;
    out.push(`<line x1="${x0}" y1="${px(y)}" x2="${x1}" y2="${px(y)}" stroke="#e5e5e5"/>`);
    out.push(`<text x="${x0 - 6}" y="${px(y + 4)}" text-anchor="end">${esc(t.label)}</text>`);
  }
  for (const t of xa.ticks) {
    const x = xa.toPx(t.value);
    if (x < x0 - 0.5 || x > x1 + 0.5) continue;
    out.push(`<line x1="${px(x)}" y1="${y0}" x2="${px(x)}" y2="${y1}" stroke="#f0f0f0"/>`);
    out.push(`<text x="${px(x)}" y="${y0 + 18}" text-anchor="middle">${esc(t.label)}</text>`);
  }
  out.push(`<line x1="${x0}" y1="${y0}" x2="${x1}" y2="${y0}" stroke="black"/>`);
  out.push(`<line x1="${x0}" y1="${y0}" x2="${x0}" y2="${y1}" stroke="black"/>`);
  out.push(
    `<text x="${(x0 + x1) / 2}" y="${b.H - 20}" text-anchor="middle">${esc(spec.xLabel)}${spec.xLog ? ' (log scale)' : ''}</text>`,
  );
  out.push(
    `<text transform="translate(20 ${(y0 + y1) / 2}) rotate(-90)" text-anchor="middle">${esc(spec.yLabel)}${spec.yLog ? ' (log scale)' : ''}</text>`,
  );
  return out;
}

/** Each series' polyline and markers, and its legend entry (the i-th row right of the plot). */
function seriesSvg(series: ChartSeries[], b: PlotBox, xa: Axis, ya: Axis): string[] {
  const out: string[] = [];
  series.forEach((s, i) => {
    const color = s.color ?? COLORS[i % COLORS.length]!;
    const pts = s.points.map((p) => `${px(xa.toPx(p.x))},${px(ya.toPx(p.y))}`);
    const dash = s.dashed ? ' stroke-dasharray="6 4"' : '';
    if (pts.length > 1)
      out.push(
        `<polyline class="series" data-name="${esc(s.name)}" fill="none" stroke="${color}" stroke-width="2"${dash} points="${pts.join(' ')}"/>`,
      );
    for (const p of s.points)
      out.push(
        `<circle cx="${px(xa.toPx(p.x))}" cy="${px(ya.toPx(p.y))}" r="3.5" fill="${color}"><title>${esc(`${s.name}: ${shortNumber(p.x)}, ${shortNumber(p.y)}`)}</title></circle>`,
      );
    const ly = b.y1 + 10 + i * 20;
    out.push(
      `<line x1="${b.x1 + 16}" y1="${ly}" x2="${b.x1 + 40}" y2="${ly}" stroke="${color}" stroke-width="2"${dash}/>`,
    );
    out.push(`<text x="${b.x1 + 46}" y="${ly + 4}">${esc(s.name)}</text>`);
  });
  return out;
}

/**
 * Render the chart; points with a non-positive coordinate on a log axis are left out. The SVG is
 * emitted top to bottom: frame and title, grid and axes, series, legend.
 */
export function lineChart(spec: LineChartSpec): string {
  const b = plotBox(spec);
  const { W, H, x0, x1, y0, y1 } = b;
  const series = drawableSeries(spec);
  const all = series.flatMap((s) => s.points);
  const out: string[] = [];
  out.push(
    `<svg xmlns="http://www.w3.org/2000/svg" width="${W}" height="${H}" viewBox="0 0 ${W} ${H}" font-family="sans-serif" font-size="12">`,
  );
  out.push(`<rect width="${W}" height="${H}" fill="white"/>`);
  out.push(
    `<text x="${W / 2}" y="24" text-anchor="middle" font-size="15" font-weight="bold">${esc(spec.title)}</text>`,
  );
  if (all.length === 0) {
    out.push(
      `<text x="${(x0 + x1) / 2}" y="${(y0 + y1) / 2}" text-anchor="middle">no data</text></svg>`,
    );
    return out.join('\n') + '\n';
  }
  const xFixed = spec.xTicks?.filter((t) => !spec.xLog || t.value > 0);
  const xa = makeAxis(
    [...all.map((p) => p.x), ...(xFixed ?? []).map((t) => t.value)],
    spec.xLog ?? false,
    x0,
    x1,
    xFixed,
  );
  const ya = makeAxis(
    all.map((p) => p.y),
    spec.yLog ?? false,
    y0,
    y1,
  );
  out.push(...axesSvg(spec, b, xa, ya), ...seriesSvg(series, b, xa, ya));
  out.push('</svg>');
  return out.join('\n') + '\n';
}
