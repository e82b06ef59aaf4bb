/**
 * The node cards: per NodeView its title badges, its fields (LSNs, lag, pause state, …), its
 * buttons and its LSN chart; the history of its lanes.
 */
import type { Child } from './dom.ts';
import { $, el, field, unavailable } from './dom.ts';
import { fmtBytes, lsnNum } from './format.ts';
import { renderActions } from './actions.ts';
import { renderChart } from './lsn-chart.ts';
import { predicts, renderPredictionChart } from './prediction-chart.ts';
import { HISTORY, state, type NodeView } from './state.ts';

/** Append a sample of the node's lanes (null while it is not running), keeping HISTORY. */
export function recordHistory(v: NodeView): void {
  let h = state.history.get(v.name);
  if (!h) state.history.set(v.name, (h = { t: [], a: [], b: [], c: [], role: v.role }));
  const lanes =
    v.role === 'primary'
      ? [lsnNum(v.lsn.current), lsnNum(v.lsn.flush), null]
      : [lsnNum(v.lsn.received), lsnNum(v.lsn.flushed), lsnNum(v.lsn.replayed)];
  const running = v.state === 'running';
  h.t.push(v.sampledAt / 1000);
  h.a.push(running ? (lanes[0] ?? null) : null);
  h.b.push(running ? (lanes[1] ?? null) : null);
  h.c.push(running ? (lanes[2] ?? null) : null);
  for (const k of ['t', 'a', 'b', 'c'] as const) if (h[k].length > HISTORY) h[k].shift();
  if (v.role !== h.role) h.role = v.role;
}

function cardOf(name: string): HTMLElement {
  let card = document.querySelector<HTMLElement>(`[data-node="${CSS.escape(name)}"]`);
  if (!card) {
    card = el('div', { class: 'node', 'data-node': name });
    card.append(
      el('h3'),
      el('dl', { class: 'fields' }),
      el('div', { class: 'actions' }),
      el('div', { class: 'chart' }),
    );
    $('nodes').append(card);
  }
  return card;
}

function renderTitle(card: HTMLElement, v: NodeView): void {
  const badges: Child[] = [
    el('span', {}, v.name),
    el('span', { class: `badge ${v.role ?? ''}`, 'data-field': 'role' }, v.role ?? 'unknown'),
    el('span', { class: `badge ${v.state}`, 'data-field': 'state' }, v.state),
    v.pauseState && v.pauseState !== 'not paused'
      ? el('span', { class: 'badge paused', 'data-field': 'paused' }, v.pauseState)
      : null,
  ];
  card.querySelector('h3')!.replaceChildren(...badges.filter((x): x is HTMLElement => x !== null));
}

function lsnRows(v: NodeView): HTMLElement[] {
  return v.role === 'primary'
    ? [
        ...field('current (insert)', 'current', v.lsn.current),
        ...field('flush', 'flush', v.lsn.flush),
      ]
    : [
        ...field('received', 'received', v.lsn.received),
        ...field('flushed', 'flushed', v.lsn.flushed),
        ...field('replayed', 'replayed', v.lsn.replayed),
        ...field('pause state', 'pauseState', v.pauseState),
      ];
}

function standbyRows(v: NodeView, pg: boolean): HTMLElement[] {
  if (v.role !== 'standby') return [];
  const lagS =
    v.lagSeconds === null
      ? null
      : `${v.lagSeconds.toFixed(2)} s${v.lagSecondsSource === 'dashboard' ? ' (sampled)' : ''}`;
  return [
    ...field('lag', 'lagBytes', fmtBytes(v.lagBytes)),
    ...field('lag (time)', 'lagSeconds', lagS),
    ...field(
      'records replayed',
      'recordsReplayed',
      v.recordsReplayed ?? (pg ? unavailable('records replayed') : null),
    ),
  ];
}

/** A PostgreSQL standby's predicted time to writable: seconds, or why there is none yet. */
function predictionRows(v: NodeView): HTMLElement[] {
  if (!predicts(v)) return [];
  const p = v.prediction!;
  const text =
    p.writableS === null
      ? `no prediction: ${p.error}`
      : `${p.writableS.toFixed(3)} s (${p.profile})`;
  return field('predicted time to writable', 'predictedWritable', text);
}

function renderFields(card: HTMLElement, v: NodeView): void {
  const pg = v.engine === 'postgres';
  card
    .querySelector('dl')!
    .replaceChildren(
      ...field('timeline', 'timeline', v.timeline),
      ...field('lifecycle', 'lifecycle', v.lifecycle ?? (pg ? unavailable('lifecycle') : null)),
      ...field('upstream', 'upstream', v.upstream),
      ...field('sync state', 'syncState', v.syncState),
      ...field('receiver', 'receiver', v.role === 'standby' ? v.receiver : null),
      ...field('pid', 'pid', v.pid),
      ...lsnRows(v),
      ...standbyRows(v, pg),
      ...predictionRows(v),
      ...field('shared_buffers', 'sharedBuffers', v.sharedBuffers),
      ...(v.error ? field('error', 'error', v.error) : []),
    );
}

export function renderNode(v: NodeView, prev: NodeView | undefined): void {
  const card = cardOf(v.name);
  card.className = `node role-${v.role ?? 'unknown'} state-${v.state}`;
  card.dataset.role = v.role ?? '';
  card.dataset.state = v.state;
  renderTitle(card, v);
  renderFields(card, v);
  renderActions(card, v);
  renderChart(card, v, prev);
  renderPredictionChart(card, v);
}
