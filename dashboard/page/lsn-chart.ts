/** A node card's live chart of its three LSN lanes (uPlot), redrawn with each sample. */
import { fmtLsn } from './format.ts';
import { state, type NodeView } from './state.ts';
import { UPlot, type UPlotData, type UPlotOptions } from './uplot.ts';

const lsnValue = (_u: unknown, x: number | null) => fmtLsn(x);

/** uPlot's defaults for an axis without its own ticks size and gap (px). */
const TICK_PX = 10;
const GAP_PX = 5;
/** Room left of the widest label, so that no pixel of it touches the canvas's edge. */
const MARGIN_PX = 6;

/**
 * The LSN axis's width: its widest label as uPlot draws it (measured on the chart's canvas in the
 * axis's font), plus the ticks, the gap and a margin. An LSN label is 3 to 17 characters ('0/0' …
 * 'FFFFFFFF/FFFFFFFF'), so any fixed width either wastes the card or cuts a long LSN off at the
 * canvas's left edge. uPlot asks again with each new set of labels.
 */
function lsnAxisSize(self: UPlot, values: string[] | null, axisIdx: number): number {
  const axis = self.axes[axisIdx];
  const widest = (values ?? []).reduce((a, v) => (v.length > a.length ? v : a), '');
  if (axis === undefined || widest === '') return TICK_PX + GAP_PX + MARGIN_PX;
  // After init uPlot holds the font as [css font, px size], scaled by the device pixel ratio.
  const font = axis.font as unknown as string | [string, number];
  const ctx = self.ctx;
  const saved = ctx.font;
  ctx.font = Array.isArray(font) ? font[0] : font;
  const width = ctx.measureText(widest).width / (window.devicePixelRatio || 1);
  ctx.font = saved;
  return Math.ceil(width + (axis.ticks?.size ?? TICK_PX) + (axis.gap ?? GAP_PX) + MARGIN_PX);
}

function chartOptions(v: NodeView): UPlotOptions {
  const names =
    v.role === 'primary' ? ['current', 'flush', '—'] : ['received', 'flushed', 'replayed'];
  return {
    width: 440,
    height: 170,
    series: [
      {},
      { label: names[0], stroke: '#1f6feb', width: 1.5, value: lsnValue },
      { label: names[1], stroke: '#1a7f37', width: 1.5, dash: [4, 3], value: lsnValue },
      {
        label: names[2],
        stroke: '#cf222e',
        width: 2,
        value: lsnValue,
        show: v.role !== 'primary',
      },
    ],
    axes: [{}, { size: lsnAxisSize, values: (_u, vals) => vals.map(fmtLsn) }],
    scales: { x: { time: true } },
  };
}

export function renderChart(card: HTMLElement, v: NodeView, prev: NodeView | undefined): void {
  const h = state.history.get(v.name)!;
  const box = card.querySelector<HTMLElement>('.chart')!;
  let chart = state.charts.get(v.name);
  if (chart && prev && prev.role !== v.role) {
    chart.destroy();
    state.charts.delete(v.name);
    chart = undefined;
    box.replaceChildren();
  }
  const data: UPlotData = [h.t, h.a, h.b, h.c];
  if (!chart) {
    chart = new UPlot(chartOptions(v), data, box);
    state.charts.set(v.name, chart);
  } else chart.setData(data);
}
