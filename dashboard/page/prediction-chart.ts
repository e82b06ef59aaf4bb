/**
 * A PostgreSQL standby's predicted time to writable over time, beside its lag (uPlot): one point
 * per sample of the node — the exporter's last prediction (it changes once per prediction cycle)
 * and pg_stat_replication's replay_lag — on one seconds axis. The chart's box carries the number
 * of predicted points and the last one (`data-points`, `data-last`) for readers of the DOM.
 */
import { el } from './dom.ts';
import { HISTORY, type NodeView } from './state.ts';
import { UPlot, type UPlotOptions } from './uplot.ts';

interface PredictionHistory {
  t: number[];
  predicted: Array<number | null>;
  lag: Array<number | null>;
  chart: UPlot | null;
}

const histories = new Map<string, PredictionHistory>();

const seconds = (_u: unknown, y: number | null) => (y === null ? '—' : `${y.toFixed(3)} s`);

const OPTIONS: UPlotOptions = {
  width: 440,
  height: 150,
  series: [
    {},
    { label: 'predicted time to writable', stroke: '#8250df', width: 2, value: seconds },
    { label: 'lag (replay_lag)', stroke: '#bf8700', width: 1.5, dash: [4, 3], value: seconds },
  ],
  axes: [{}, { label: 'seconds', size: 60 }],
  scales: { x: { time: true } },
};

/** Whether a node gets the chart: a standby the dashboard predicts (PostgreSQL, once a cycle ran). */
export const predicts = (v: NodeView) => v.role === 'standby' && v.prediction !== null;

function record(h: PredictionHistory, v: NodeView): void {
  h.t.push(v.sampledAt / 1000);
  h.predicted.push(v.state === 'running' ? (v.prediction?.writableS ?? null) : null);
  h.lag.push(v.state === 'running' ? v.lagSeconds : null);
  for (const k of ['t', 'predicted', 'lag'] as const) if (h[k].length > HISTORY) h[k].shift();
}

/** The node's chart below its LSN chart: created on its first sample, removed when it stops predicting. */
export function renderPredictionChart(card: HTMLElement, v: NodeView): void {
  let box = card.querySelector<HTMLElement>('.prediction');
  let h = histories.get(v.name);
  if (!predicts(v)) {
    h?.chart?.destroy();
    histories.delete(v.name);
    box?.remove();
    return;
  }
  if (!box) {
    box = el('div', { class: 'prediction', 'data-testid': 'prediction' });
    card.append(box);
  }
  if (!h) histories.set(v.name, (h = { t: [], predicted: [], lag: [], chart: null }));
  record(h, v);
  const data: [number[], Array<number | null>, Array<number | null>] = [h.t, h.predicted, h.lag];
  if (h.chart === null) h.chart = new UPlot(OPTIONS, data, box);
  else h.chart.setData(data);
  const points = h.predicted.filter((p) => p !== null);
  box.dataset.points = String(points.length);
  box.dataset.last = points.length === 0 ? '' : String(points[points.length - 1]);
}

/** The node left the cluster. */
export function forgetPrediction(name: string): void {
  histories.get(name)?.chart?.destroy();
  histories.delete(name);
}
