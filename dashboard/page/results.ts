/**
 * The Results view: the finished sweeps listed, one sweep's tables (rendered by the server) and
 * one chart per group of cells — by variant for a multi sweep (x = NBuffers), by shared_buffers for
 * a threshold sweep (x = pages) — with measured and modeled seconds per strategy, log or linear.
 */
import type { ResultsList, SweepCellView, SweepView } from '../wire.ts';
import { $, el } from './dom.ts';
import { toast } from './actions.ts';
import { UPlot } from './uplot.ts';

let currentSweep: SweepView | null = null;

export async function loadResultsList(): Promise<void> {
  const r = (await (await fetch('/api/results')).json()) as ResultsList;
  $('results-dir').textContent = r.dir;
  $('results-list').replaceChildren(
    ...(r.results.length === 0
      ? [el('li', { class: 'muted' }, 'no sweep results yet (npm start, npm run sweep)')]
      : r.results.map((x) =>
          el(
            'li',
            { 'data-sweep': x.name, onclick: () => void loadSweep(x.name) },
            `${x.name} — ${x.kind ?? '?'}, ${x.cells} cells`,
          ),
        )),
  );
  const want = new URLSearchParams(location.search).get('sweep');
  if (want) void loadSweep(want);
}

async function loadSweep(name: string): Promise<void> {
  const resp = await fetch(`/api/results/${encodeURIComponent(name)}`);
  const r = (await resp.json()) as SweepView;
  if (!resp.ok) {
    toast(String(r.error), true);
    return;
  }
  currentSweep = r;
  $('results-title').textContent = `${name} — ${r.results.kind}`;
  // tables.md of our own sweep, rendered by the server (marked).
  $('results-tables').innerHTML = r.tablesHtml ?? '';
  drawSweepCharts();
}

const strategyLabel = (c: SweepCellView) =>
  `${c.engine ?? 'walsim'} ${c.strategy}${c.forceOptimized ? ' (forced)' : ''}`;

const PALETTE = [
  '#1f6feb',
  '#cf222e',
  '#1a7f37',
  '#8250df',
  '#bf8700',
  '#57606a',
  '#0a3069',
  '#d4a72c',
];

interface SeriesDef {
  label: string;
  values: Array<number | null>;
  dash: number[] | null;
}

/** One chart's x values and series: per strategy its measured and its modeled seconds. */
function chartSeries(cs: SweepCellView[], xOf: (c: SweepCellView) => number) {
  const xs = [...new Set(cs.map(xOf))].sort((a, b) => a - b);
  const defs: SeriesDef[] = [];
  for (const name of [...new Set(cs.map(strategyLabel))]) {
    const mine = cs.filter((c) => strategyLabel(c) === name);
    const at = (x: number) => mine.find((m) => xOf(m) === x);
    const measured = xs.map((x) => {
      const c = at(x);
      const v = c ? (c.engine === 'postgres' ? c.failoverMsMedian : c.failoverMsMean) : null;
      return v === null || v === undefined || !Number.isFinite(v) ? null : v / 1000;
    });
    if (measured.some((v) => v !== null))
      defs.push({ label: `${name} measured`, values: measured, dash: null });
    const modeled = xs.map((x) => {
      const m = at(x)?.modeledMsMean;
      return typeof m === 'number' && Number.isFinite(m) ? m / 1000 : null;
    });
    if (modeled.some((v) => v !== null))
      defs.push({ label: `${name} modeled PostgreSQL`, values: modeled, dash: [6, 4] });
  }
  return { xs, defs };
}

function drawChart(multi: boolean, key: string, cs: SweepCellView[], log: boolean): HTMLElement {
  const xOf = (c: SweepCellView) => (multi ? c.nBuffers : (c.pagesPerTable ?? NaN));
  const { xs, defs } = chartSeries(cs, xOf);
  const labelOfX = new Map(
    cs.map((c) => [xOf(c), multi ? c.sharedBuffers : (c.relSize ?? String(c.pagesPerTable))]),
  );
  const title = multi
    ? `${key.toUpperCase()}: failover seconds by shared_buffers`
    : `shared_buffers=${key}: failover seconds by relation size`;
  const block = el('div', { class: 'chart-block', 'data-chart': key }, el('h3', {}, title));
  $('results-charts').append(block);
  const u = new UPlot(
    {
      width: 820,
      height: 320,
      scales: { x: { time: false, distr: log ? 3 : 1 }, y: { distr: log ? 3 : 1 } },
      series: [
        { label: multi ? 'shared_buffers' : 'pages', value: (_u, x) => labelOfX.get(x) ?? x },
        ...defs.map((s, i) => ({
          label: s.label,
          stroke: PALETTE[(s.dash ? i - 1 : i) % PALETTE.length] ?? '#333',
          width: 2,
          dash: s.dash ?? undefined,
          points: { show: true },
          spanGaps: true,
          value: (_u: unknown, y: number | null) => (y === null ? '—' : `${y.toFixed(3)} s`),
        })),
      ],
      axes: [
        { values: (_u, vals) => vals.map((x) => labelOfX.get(x) ?? ''), splits: () => xs },
        { label: 'seconds', size: 70 },
      ],
    },
    [xs, ...defs.map((s) => s.values)],
    block,
  );
  // The scale the chart was drawn with, as uPlot holds it (3: logarithmic).
  block.dataset.yScale = u.scales.y?.distr === 3 ? 'log' : 'linear';
  return block;
}

export function drawSweepCharts(): void {
  if (!currentSweep) return;
  const res = currentSweep.results;
  const multi = res.kind === 'multi';
  const log = ($('log-scale') as HTMLInputElement).checked;
  $('results-charts').replaceChildren();
  // One chart per group: multi by variant (x = NBuffers), threshold by shared_buffers (x = pages).
  const groups = new Map<string, SweepCellView[]>();
  for (const c of res.cells ?? []) {
    const key = multi ? `${c.variant}` : `${c.sharedBuffers}`;
    if (!groups.has(key)) groups.set(key, []);
    groups.get(key)!.push(c);
  }
  for (const [key, cs] of groups) drawChart(multi, key, cs, log);
}
