/** A node card's live chart of its three LSN lanes (uPlot), redrawn with each sample. */
import { fmtLsn } from './format.ts';
import { state, type NodeView } from './state.ts';
import { UPlot, type UPlotData, type UPlotOptions } from './uplot.ts';

const lsnValue = (_u: unknown, x: number | null) => fmtLsn(x);

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
    axes: [{}, { size: 80, values: (_u, vals) => vals.map(fmtLsn) }],
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
