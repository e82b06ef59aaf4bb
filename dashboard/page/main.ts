/**
 * The dashboard page's entry point (bundled for the browser by dashboard/page-bundle.ts): the
 * live socket to /live (dashboard/push.ts), each message redrawing the part it changes; the tabs.
 */
import type { FailoverView, PushMessageOf } from '../wire.ts';
import { $ } from './dom.ts';
import { renderFailover } from './failover.ts';
import { drawMachine, litMachine, transitions, updateMachineSelect } from './machine.ts';
import { recordHistory, renderNode } from './nodes.ts';
import { forgetPrediction } from './prediction-chart.ts';
import { drawSweepCharts, loadResultsList } from './results.ts';
import { state, TOKEN, type NodeView } from './state.ts';
import { renderTopology } from './topology.ts';

type PushMessage = PushMessageOf<FailoverView>;

function nodeView(v: NodeView): void {
  const prev = state.nodes.get(v.name);
  state.nodes.set(v.name, v);
  recordHistory(v);
  renderNode(v, prev);
  renderTopology();
  renderFailover();
  updateMachineSelect();
  if (state.machineNode === v.name) litMachine();
}

function removeNode(name: string): void {
  state.nodes.delete(name);
  state.history.delete(name);
  state.charts.get(name)?.destroy();
  state.charts.delete(name);
  forgetPrediction(name);
  document.querySelector(`[data-node="${CSS.escape(name)}"]`)?.remove();
  renderTopology();
  updateMachineSelect();
}

function receive(m: PushMessage): void {
  if (m.type === 'hello') {
    state.meta = m.meta;
    state.graph = m.graph;
    $('cluster').textContent =
      `${m.meta.dir} (${m.meta.engine}; polled every ${m.meta.pollMs} ms; model: ${m.meta.profile})`;
    drawMachine(m.graph);
    for (const n of m.nodes) nodeView(n);
  } else if (m.type === 'node') nodeView(m.node);
  else if (m.type === 'removed') removeNode(m.name);
  else if (m.type === 'transitions') transitions(m);
}

let backoff = 250;
function connect(): void {
  const ws = new WebSocket(`ws://${location.host}/live?token=${encodeURIComponent(TOKEN)}`);
  const conn = $('conn');
  ws.onopen = () => {
    backoff = 250;
    conn.textContent = 'live';
    conn.className = 'conn live';
  };
  ws.onmessage = (ev: MessageEvent<string>) => receive(JSON.parse(ev.data) as PushMessage);
  ws.onclose = () => {
    conn.textContent = 'reconnecting…';
    conn.className = 'conn';
    setTimeout(connect, backoff);
    backoff = Math.min(backoff * 2, 5000);
  };
}

function showTab(name: 'live' | 'results'): void {
  for (const t of ['live', 'results']) {
    $(t).classList.toggle('hidden', t !== name);
    $(`tab-${t}`).classList.toggle('active', t === name);
  }
  if (name === 'results') void loadResultsList();
}

$('tab-live').onclick = () => showTab('live');
$('tab-results').onclick = () => showTab('results');
$('log-scale').onchange = () => drawSweepCharts();
setInterval(() => litMachine(), 1000);

connect();
if (new URLSearchParams(location.search).get('view') === 'results') showTab('results');
