// @ts-check
// The dashboard page: no framework, no build. It receives NodeViews and lifecycle transitions
// over /live (dashboard/server.ts) and redraws the part each message changes. uPlot (global
// `uPlot`, loaded before this module) draws the LSN lanes and the results charts.
/* global uPlot */

const TOKEN = document.querySelector('meta[name="dashboard-token"]')?.getAttribute('content') ?? '';
const HISTORY = 240; // samples per node chart (one minute at 250 ms)

/** @type {{meta: any, graph: any, nodes: Map<string, any>, history: Map<string, any>, charts: Map<string, any>, fired: Map<string, number>, machineNode: string | null, machineChosen: boolean}} */
const state = {
  meta: null,
  graph: null,
  nodes: new Map(),
  history: new Map(),
  charts: new Map(),
  fired: new Map(),
  machineNode: null,
  machineChosen: false,
};

const $ = (/** @type {string} */ id) => /** @type {HTMLElement} */ (document.getElementById(id));
const SVG_NS = 'http://www.w3.org/2000/svg';

function el(tag, attrs = {}, ...children) {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs)) {
    if (v === null || v === undefined) continue;
    if (k === 'class') e.className = String(v);
    else if (k.startsWith('on')) e.addEventListener(k.slice(2), v);
    else e.setAttribute(k, String(v));
  }
  for (const c of children)
    if (c !== null && c !== undefined) e.append(c instanceof Node ? c : String(c));
  return e;
}
function svg(tag, attrs = {}, ...children) {
  const e = document.createElementNS(SVG_NS, tag);
  for (const [k, v] of Object.entries(attrs))
    if (v !== null && v !== undefined) e.setAttribute(k, String(v));
  for (const c of children)
    if (c !== null && c !== undefined) e.append(c instanceof Node ? c : String(c));
  return e;
}

// ---- formatting -------------------------------------------------------------------------------
/** 'X/Y' → number (exact below 2^53). */
function lsnNum(lsn) {
  if (typeof lsn !== 'string') return null;
  const m = /^([0-9A-Fa-f]+)\/([0-9A-Fa-f]+)$/.exec(lsn);
  return m ? parseInt(m[1], 16) * 2 ** 32 + parseInt(m[2], 16) : null;
}
function fmtLsn(n) {
  if (n === null || n === undefined || !Number.isFinite(n)) return '';
  const hi = Math.floor(n / 2 ** 32);
  const lo = n - hi * 2 ** 32;
  return `${hi.toString(16).toUpperCase()}/${Math.round(lo).toString(16).toUpperCase()}`;
}
function fmtBytes(n) {
  if (n === null || n === undefined) return null;
  const u = ['B', 'kB', 'MB', 'GB', 'TB'];
  let i = 0;
  let v = n;
  while (Math.abs(v) >= 1024 && i < u.length - 1) {
    v /= 1024;
    i++;
  }
  return `${i === 0 ? v : v.toFixed(1)} ${u[i]}`;
}
const fmtS = (ms) => (ms === null || ms === undefined ? '—' : `${(ms / 1000).toFixed(3)} s`);
const fmtInt = (n) => (n === null || n === undefined ? '—' : Number(n).toLocaleString('en-US'));

function unavailable(what) {
  return el(
    'span',
    { class: 'unavailable', title: `${what}: PostgreSQL does not expose this` },
    'unavailable',
  );
}

// ---- socket -----------------------------------------------------------------------------------
let backoff = 250;
function connect() {
  const ws = new WebSocket(`ws://${location.host}/live?token=${encodeURIComponent(TOKEN)}`);
  const conn = $('conn');
  ws.onopen = () => {
    backoff = 250;
    conn.textContent = 'live';
    conn.className = 'conn live';
  };
  ws.onmessage = (ev) => {
    const m = JSON.parse(ev.data);
    if (m.type === 'hello') hello(m);
    else if (m.type === 'node') nodeView(m.node);
    else if (m.type === 'removed') removeNode(m.name);
    else if (m.type === 'transitions') transitions(m);
  };
  ws.onclose = () => {
    conn.textContent = 'reconnecting…';
    conn.className = 'conn';
    setTimeout(connect, backoff);
    backoff = Math.min(backoff * 2, 5000);
  };
}

function hello(m) {
  state.meta = m.meta;
  state.graph = m.graph;
  $('cluster').textContent =
    `${m.meta.dir} (${m.meta.engine}; polled every ${m.meta.pollMs} ms; model: ${m.meta.profile})`;
  drawMachine();
  for (const n of m.nodes) nodeView(n);
}

// ---- nodes ------------------------------------------------------------------------------------
function nodeView(v) {
  const prev = state.nodes.get(v.name);
  state.nodes.set(v.name, v);
  let h = state.history.get(v.name);
  if (!h) state.history.set(v.name, (h = { t: [], a: [], b: [], c: [] }));
  const lanes =
    v.role === 'primary'
      ? [lsnNum(v.lsn.current), lsnNum(v.lsn.flush), null]
      : [lsnNum(v.lsn.received), lsnNum(v.lsn.flushed), lsnNum(v.lsn.replayed)];
  h.t.push(v.sampledAt / 1000);
  h.a.push(v.state === 'running' ? lanes[0] : null);
  h.b.push(v.state === 'running' ? lanes[1] : null);
  h.c.push(v.state === 'running' ? lanes[2] : null);
  for (const k of ['t', 'a', 'b', 'c']) if (h[k].length > HISTORY) h[k].shift();
  if (v.role !== h.role) h.role = v.role;
  renderNode(v, prev);
  renderTopology();
  renderFailover();
  updateMachineSelect();
  if (state.machineNode === v.name) litMachine();
}

function removeNode(name) {
  state.nodes.delete(name);
  state.history.delete(name);
  state.charts.get(name)?.destroy();
  state.charts.delete(name);
  document.querySelector(`[data-node="${CSS.escape(name)}"]`)?.remove();
  renderTopology();
  updateMachineSelect();
}

function field(label, key, value) {
  return [el('dt', {}, label), el('dd', { 'data-field': key }, value ?? '—')];
}

function renderNode(v, prev) {
  let card = /** @type {HTMLElement | null} */ (
    document.querySelector(`[data-node="${CSS.escape(v.name)}"]`)
  );
  if (!card) {
    card = el('div', { class: 'node', 'data-node': v.name });
    card.append(
      el('h3'),
      el('dl', { class: 'fields' }),
      el('div', { class: 'actions' }),
      el('div', { class: 'chart' }),
    );
    $('nodes').append(card);
  }
  card.className = `node role-${v.role ?? 'unknown'} state-${v.state}`;
  card.dataset.role = v.role ?? '';
  card.dataset.state = v.state;
  const title = /** @type {HTMLElement} */ (card.querySelector('h3'));
  title.replaceChildren(
    ...[
      el('span', {}, v.name),
      el('span', { class: `badge ${v.role ?? ''}`, 'data-field': 'role' }, v.role ?? 'unknown'),
      el('span', { class: `badge ${v.state}`, 'data-field': 'state' }, v.state),
      v.pauseState && v.pauseState !== 'not paused'
        ? el('span', { class: 'badge paused', 'data-field': 'paused' }, v.pauseState)
        : null,
    ].filter((x) => x !== null),
  );
  const pg = v.engine === 'postgres';
  const lsnRows =
    v.role === 'primary'
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
  const lagS =
    v.lagSeconds === null
      ? null
      : `${v.lagSeconds.toFixed(2)} s${v.lagSecondsSource === 'dashboard' ? ' (sampled)' : ''}`;
  const dl = /** @type {HTMLElement} */ (card.querySelector('dl'));
  dl.replaceChildren(
    ...field('timeline', 'timeline', v.timeline),
    ...field('lifecycle', 'lifecycle', v.lifecycle ?? (pg ? unavailable('lifecycle') : null)),
    ...field('upstream', 'upstream', v.upstream),
    ...field('sync state', 'syncState', v.syncState),
    ...field('receiver', 'receiver', v.role === 'standby' ? v.receiver : null),
    ...field('pid', 'pid', v.pid),
    ...lsnRows,
    ...(v.role === 'standby'
      ? [
          ...field('lag', 'lagBytes', fmtBytes(v.lagBytes)),
          ...field('lag (time)', 'lagSeconds', lagS),
          ...field(
            'records replayed',
            'recordsReplayed',
            v.recordsReplayed ?? (pg ? unavailable('records replayed') : null),
          ),
        ]
      : []),
    ...field('shared_buffers', 'sharedBuffers', v.sharedBuffers),
    ...(v.error ? field('error', 'error', v.error) : []),
  );
  renderActions(card, v);
  renderChart(card, v, prev);
}

function renderActions(card, v) {
  const box = /** @type {HTMLElement} */ (card.querySelector('.actions'));
  const buttons = [];
  if (v.state === 'running' && v.role === 'standby') {
    buttons.push(
      actionButton(
        v.name,
        'pause',
        'Pause replay',
        `Run SELECT pg_wal_replay_pause() on ${v.name}?`,
      ),
    );
    buttons.push(
      actionButton(
        v.name,
        'resume',
        'Resume replay',
        `Run SELECT pg_wal_replay_resume() on ${v.name}?`,
      ),
    );
    buttons.push(
      actionButton(
        v.name,
        'promote',
        'Promote',
        `Promote ${v.name} (pg_ctl promote, waiting until it accepts writes)?`,
      ),
    );
  }
  if (v.state === 'running' && v.role === 'primary')
    buttons.push(
      actionButton(
        v.name,
        'stop-immediate',
        'Stop (immediate)',
        `Stop ${v.name} with pg_ctl stop -m immediate? It exits at once, without a checkpoint.`,
        true,
      ),
    );
  const key = buttons.map((b) => b.dataset.action).join(',');
  if (box.dataset.key !== key) {
    box.dataset.key = key;
    box.replaceChildren(...buttons);
  }
}

function actionButton(node, action, label, question, danger = false) {
  return el(
    'button',
    {
      class: danger ? 'danger' : '',
      'data-action': action,
      onclick: async () => {
        if (!(await confirmDialog(question))) return;
        toast(`${label} ${node}…`);
        try {
          const r = await fetch('/api/action', {
            method: 'POST',
            headers: { 'content-type': 'application/json', 'x-dashboard-token': TOKEN },
            body: JSON.stringify({ action, node }),
          });
          const body = await r.json();
          if (!r.ok || body.ok === false) toast(`${label} ${node} failed: ${body.error}`, true);
          else toast(body.message);
        } catch (e) {
          toast(`${label} ${node} failed: ${e}`, true);
        }
      },
    },
    label,
  );
}

function confirmDialog(question) {
  const d = /** @type {HTMLDialogElement} */ ($('confirm'));
  $('confirm-text').textContent = question;
  d.showModal();
  return new Promise((resolve) => {
    d.addEventListener('close', () => resolve(d.returnValue === 'ok'), { once: true });
  });
}

let toastTimer = 0;
function toast(text, error = false) {
  const t = $('toast');
  t.textContent = text;
  t.className = `toast show${error ? ' error' : ''}`;
  clearTimeout(toastTimer);
  toastTimer = window.setTimeout(() => (t.className = 'toast'), error ? 8000 : 3000);
}

function renderChart(card, v, prev) {
  const h = state.history.get(v.name);
  const box = /** @type {HTMLElement} */ (card.querySelector('.chart'));
  let chart = state.charts.get(v.name);
  const names =
    v.role === 'primary' ? ['current', 'flush', '—'] : ['received', 'flushed', 'replayed'];
  if (chart && prev && prev.role !== v.role) {
    chart.destroy();
    state.charts.delete(v.name);
    chart = undefined;
    box.replaceChildren();
  }
  const data = [h.t, h.a, h.b, h.c];
  if (!chart) {
    chart = new uPlot(
      {
        width: 440,
        height: 170,
        series: [
          {},
          { label: names[0], stroke: '#1f6feb', width: 1.5, value: (_u, x) => fmtLsn(x) },
          {
            label: names[1],
            stroke: '#1a7f37',
            width: 1.5,
            dash: [4, 3],
            value: (_u, x) => fmtLsn(x),
          },
          {
            label: names[2],
            stroke: '#cf222e',
            width: 2,
            value: (_u, x) => fmtLsn(x),
            show: v.role !== 'primary',
          },
        ],
        axes: [{}, { size: 80, values: (_u, vals) => vals.map(fmtLsn) }],
        scales: { x: { time: true } },
      },
      data,
      box,
    );
    state.charts.set(v.name, chart);
  } else chart.setData(data);
}

// ---- topology ---------------------------------------------------------------------------------
function renderTopology() {
  const nodes = [...state.nodes.values()];
  const depth = new Map();
  const depthOf = (n, seen = new Set()) => {
    if (depth.has(n.name)) return depth.get(n.name);
    if (seen.has(n.name)) return 0;
    seen.add(n.name);
    const up = n.role === 'standby' && n.upstream ? state.nodes.get(n.upstream) : undefined;
    const d = up ? depthOf(up, seen) + 1 : 0;
    depth.set(n.name, d);
    return d;
  };
  nodes.forEach((n) => depthOf(n));
  const cols = new Map();
  for (const n of nodes) {
    const d = depth.get(n.name);
    if (!cols.has(d)) cols.set(d, []);
    cols.get(d).push(n);
  }
  const W = 130;
  const H = 44;
  const pos = new Map();
  for (const [d, list] of cols)
    list.forEach((n, i) => pos.set(n.name, { x: 10 + d * (W + 60), y: 10 + i * (H + 20) }));
  const s = /** @type {SVGSVGElement} */ (/** @type {unknown} */ ($('topology')));
  const maxRows = Math.max(1, ...[...cols.values()].map((l) => l.length));
  s.setAttribute('width', String(20 + cols.size * (W + 60)));
  s.setAttribute('height', String(20 + maxRows * (H + 20)));
  s.replaceChildren(
    svg(
      'defs',
      {},
      svg(
        'marker',
        {
          id: 'arrow',
          viewBox: '0 0 10 10',
          refX: 10,
          refY: 5,
          markerWidth: 6,
          markerHeight: 6,
          orient: 'auto',
        },
        svg('path', { d: 'M0,0 L10,5 L0,10 z', fill: '#57606a' }),
      ),
    ),
  );
  for (const n of nodes) {
    const up = n.role === 'standby' && n.upstream ? pos.get(n.upstream) : undefined;
    const me = pos.get(n.name);
    if (!up) continue;
    const x1 = up.x + W;
    const y1 = up.y + H / 2;
    const x2 = me.x;
    const y2 = me.y + H / 2;
    const sync = n.syncState ?? (n.state === 'running' ? 'not streaming' : n.state);
    s.append(
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
    );
  }
  for (const n of nodes) {
    const p = pos.get(n.name);
    const color = n.state !== 'running' ? '#8c959f' : n.role === 'primary' ? '#1f6feb' : '#8250df';
    s.append(
      svg(
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
      ),
    );
  }
}

// ---- lifecycle machine ------------------------------------------------------------------------
function drawMachine() {
  const g = state.graph;
  const s = /** @type {SVGSVGElement} */ (/** @type {unknown} */ ($('machine')));
  s.setAttribute('viewBox', `0 0 ${g.width} ${g.height}`);
  s.setAttribute('width', String(g.width));
  s.setAttribute('height', String(g.height));
  s.replaceChildren(
    svg(
      'defs',
      {},
      svg(
        'marker',
        {
          id: 'marrow',
          viewBox: '0 0 10 10',
          refX: 10,
          refY: 5,
          markerWidth: 7,
          markerHeight: 7,
          orient: 'auto',
        },
        svg('path', { d: 'M0,0 L10,5 L0,10 z', fill: '#57606a' }),
      ),
    ),
  );
  const depth = (st) => (st.parent ? depth(g.states.find((x) => x.id === st.parent)) + 1 : 0);
  const states = [...g.states].sort((a, b) => depth(a) - depth(b));
  for (const st of states) {
    const container = st.kind === 'compound' || st.kind === 'parallel';
    s.append(
      svg(
        'g',
        { class: `state ${st.kind}`, 'data-state': st.id },
        svg('rect', {
          x: st.x,
          y: st.y,
          width: st.width,
          height: st.height,
          rx: container ? 8 : 14,
        }),
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
      ),
    );
  }
  for (const e of g.edges) {
    if (e.points.length < 2) continue;
    const d = e.points.map((p, i) => `${i === 0 ? 'M' : 'L'}${p.x},${p.y}`).join(' ');
    s.append(
      svg(
        'g',
        { class: 'edge', 'data-edge': e.id, 'data-event': e.event },
        svg('path', { d, 'marker-end': 'url(#marrow)' }),
        svg('text', { x: e.label.x, y: e.label.y + 10 }, e.label.text),
      ),
    );
  }
  litMachine();
}

function updateMachineSelect() {
  const sel = /** @type {HTMLSelectElement} */ ($('machine-node'));
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
  if (
    !state.machineChosen &&
    (state.machineNode === null ||
      !state.nodes.has(state.machineNode) ||
      state.nodes.get(state.machineNode).role !== 'standby')
  ) {
    // Follow a standby by default: its machine is the one that moves at failover.
    const standby = [...state.nodes.values()].find((n) => n.role === 'standby');
    const pick = standby?.name ?? state.machineNode ?? names[0] ?? null;
    if (pick !== state.machineNode) {
      state.machineNode = pick;
      litMachine();
    }
  }
  if (state.machineNode !== null) sel.value = state.machineNode;
}

function litMachine() {
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

function transitions(m) {
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

// ---- failover ---------------------------------------------------------------------------------
const rate = new Map(); // node → {t, records}

function renderFailover() {
  const withReport = [...state.nodes.values()].filter((n) => n.failover);
  const body = $('failover-body');
  const pg = [...state.nodes.values()].some((n) => n.engine === 'postgres');
  if (withReport.length === 0) {
    if (pg)
      body.replaceChildren(
        el('span', {}, 'Drops by path, descriptors scanned, probes and the live failover report: '),
        unavailable('failover report'),
        el('span', {}, ' on PostgreSQL (it does not count them).'),
      );
    return;
  }
  const n = withReport.sort((a, b) =>
    String(b.failover.resumeAt).localeCompare(String(a.failover.resumeAt)),
  )[0];
  const f = n.failover;
  $('failover-node').textContent = `${n.name}${f.promotedAt ? ' — done' : ' — in progress'}`;
  const r = rate.get(n.name);
  let perS = null;
  if (r && n.recordsReplayed !== null && n.sampledAt > r.t)
    perS = ((n.recordsReplayed - r.records) * 1000) / (n.sampledAt - r.t);
  if (!r || n.sampledAt - r.t >= 1000)
    rate.set(n.name, { t: n.sampledAt, records: n.recordsReplayed ?? 0 });
  else if (r.perS !== undefined) perS = r.perS;
  if (r && perS !== null) r.perS = perS;
  const walLeft =
    n.role === 'standby' && n.state === 'running'
      ? (lsnNum(n.lsn.flushed) ?? 0) - (lsnNum(n.lsn.replayed) ?? 0)
      : 0;
  const m = f.model;
  const phases = [
    ['replay', 'replayMs', 'replayS'],
    ['end of recovery', 'endOfRecoveryMs', 'endOfRecoveryS'],
    ['open for writes', 'openForWritesMs', 'openForWritesS'],
  ];
  const drops = Object.entries(f.drop.drops).filter(([, c]) => c > 0);
  const stats = el(
    'dl',
    { class: 'fields' },
    ...field('records replayed', 'fo-records', fmtInt(f.recordsReplayed)),
    ...field(
      'records/s',
      'fo-rate',
      f.promotedAt ? '—' : perS === null ? '…' : fmtInt(Math.round(perS)),
    ),
    ...field('WAL left', 'fo-wal-left', f.promotedAt ? '0 B' : fmtBytes(Math.max(0, walLeft))),
    ...field(
      'drops',
      'fo-drops',
      drops.length === 0 ? '0' : drops.map(([p, c]) => `${p}: ${c}`).join(', '),
    ),
    ...field('descriptors scanned', 'fo-scanned', fmtInt(f.drop.scanned)),
    ...field('probes', 'fo-probes', fmtInt(f.drop.probes)),
    ...field('invalidated', 'fo-invalidated', fmtInt(f.drop.invalidated)),
    ...field('time in drops', 'fo-drop-ms', fmtS(f.drop.ms)),
  );
  const table = el(
    'table',
    { class: 'phases', 'data-testid': 'phases' },
    el(
      'tr',
      {},
      el('th', {}, 'phase'),
      el('th', {}, 'walsim measured'),
      el('th', {}, `modeled PostgreSQL (${m?.profile ?? 'no profile'})`),
    ),
    ...phases.map(([label, ms, s]) =>
      el(
        'tr',
        {},
        el('td', {}, label),
        el('td', {}, fmtS(f.phases[ms])),
        el('td', {}, m ? `${Number(m.phases[s]).toFixed(3)} s` : '—'),
      ),
    ),
    el(
      'tr',
      {},
      el('td', {}, el('b', {}, 'failover (resume → read-write)')),
      el('td', { 'data-field': 'fo-failover-ms' }, fmtS(f.failoverMs)),
      el('td', { 'data-field': 'fo-modeled-s' }, m ? `${Number(m.failoverS).toFixed(3)} s` : '—'),
    ),
  );
  const parts = [stats, table];
  if (f.promotedAt) parts.push(timeline(f));
  body.replaceChildren(...parts);
  body.className = '';
  body.dataset.done = f.promotedAt ? 'true' : 'false';
}

function timeline(f) {
  const ts = f.timestamps;
  const start = ts.resumeRequested?.monoMs;
  const segs = [
    ['replay', ts.resumeRequested, ts.replayCaughtUp],
    ['endOfRecovery', ts.replayCaughtUp, ts.endOfRecoveryWritten],
    ['openForWrites', ts.endOfRecoveryWritten, ts.readWrite],
    ['checkpoint', ts.readWrite, ts.firstCheckpointDone],
  ].filter(([, a, b]) => a && b);
  const end = Math.max(...segs.map(([, , b]) => b.monoMs));
  const total = Math.max(1e-6, end - start);
  const m = f.model;
  const mSegs = m
    ? [
        ['replay', m.phases.replayS],
        ['endOfRecovery', m.phases.endOfRecoveryS],
        ['openForWrites', m.phases.openForWritesS],
      ]
    : [];
  const mTotal = mSegs.reduce((a, [, s]) => a + (Number(s) || 0), 0);
  const lane = (label, bars) =>
    el(
      'div',
      { class: 'lane' },
      el('span', { class: 'label' }, label),
      el('div', { class: 'bars' }, ...bars),
    );
  return el(
    'div',
    { class: 'timeline', 'data-testid': 'failover-timeline' },
    el(
      'h3',
      {},
      `Failover report: resume ${f.resumeAt} → read-write ${f.promotedAt} (timeline ${f.newTimeline})`,
    ),
    lane(
      `walsim measured (${(total / 1000).toFixed(3)} s)`,
      segs.map(([k, a, b]) =>
        el(
          'div',
          {
            class: `bar ${k}`,
            style: `width:${(((b.monoMs - a.monoMs) / total) * 100).toFixed(2)}%`,
            title: `${k}: ${(b.monoMs - a.monoMs).toFixed(1)} ms`,
          },
          `${k} ${(b.monoMs - a.monoMs).toFixed(1)} ms`,
        ),
      ),
    ),
    m
      ? lane(
          `modeled PostgreSQL (${mTotal.toFixed(3)} s)`,
          mSegs.map(([k, s]) =>
            el(
              'div',
              {
                class: `bar ${k}`,
                style: `width:${((Number(s) / Math.max(mTotal, 1e-9)) * 100).toFixed(2)}%`,
                title: `${k}: ${Number(s).toFixed(4)} s`,
              },
              `${k} ${Number(s).toFixed(3)} s`,
            ),
          ),
        )
      : null,
  );
}

// ---- results ----------------------------------------------------------------------------------
async function loadResultsList() {
  const r = await (await fetch('/api/results')).json();
  $('results-dir').textContent = r.dir;
  const ul = $('results-list');
  ul.replaceChildren(
    ...(r.results.length === 0
      ? [el('li', { class: 'muted' }, 'no sweep results yet (npm start, npm run sweep)')]
      : r.results.map((x) =>
          el(
            'li',
            { 'data-sweep': x.name, onclick: () => loadSweep(x.name) },
            `${x.name} — ${x.kind ?? '?'}, ${x.cells} cells`,
          ),
        )),
  );
  const want = new URLSearchParams(location.search).get('sweep');
  if (want) loadSweep(want);
}

let currentSweep = null;
async function loadSweep(name) {
  const resp = await fetch(`/api/results/${encodeURIComponent(name)}`);
  const r = await resp.json();
  if (!resp.ok) {
    toast(r.error, true);
    return;
  }
  currentSweep = r;
  $('results-title').textContent = `${name} — ${r.results.kind}`;
  // tables.md of our own sweep, rendered by the server (marked).
  $('results-tables').innerHTML = r.tablesHtml ?? '';
  drawSweepCharts();
}

function strategyLabel(c) {
  return `${c.engine ?? 'walsim'} ${c.strategy}${c.forceOptimized ? ' (forced)' : ''}`;
}

function drawSweepCharts() {
  if (!currentSweep) return;
  const res = currentSweep.results;
  const cells = res.cells ?? [];
  const log = /** @type {HTMLInputElement} */ ($('log-scale')).checked;
  const box = $('results-charts');
  box.replaceChildren();
  // One chart per group: multi by variant (x = NBuffers), threshold by shared_buffers (x = pages).
  const groups = new Map();
  for (const c of cells) {
    const key = res.kind === 'multi' ? `${c.variant}` : `${c.sharedBuffers}`;
    if (!groups.has(key)) groups.set(key, []);
    groups.get(key).push(c);
  }
  for (const [key, cs] of groups) {
    const xOf = (c) => (res.kind === 'multi' ? c.nBuffers : c.pagesPerTable);
    const xs = [...new Set(cs.map(xOf))].sort((a, b) => a - b);
    const seriesDefs = [];
    for (const name of [...new Set(cs.map(strategyLabel))]) {
      const mine = cs.filter((c) => strategyLabel(c) === name);
      const measured = xs.map((x) => {
        const c = mine.find((m) => xOf(m) === x);
        const v = c ? (c.engine === 'postgres' ? c.failoverMsMedian : c.failoverMsMean) : null;
        return v === null || v === undefined || !Number.isFinite(v) ? null : v / 1000;
      });
      if (measured.some((v) => v !== null))
        seriesDefs.push({ label: `${name} measured`, values: measured, dash: null });
      const modeled = xs.map((x) => {
        const c = mine.find((m) => xOf(m) === x);
        return c && Number.isFinite(c.modeledMsMean) ? c.modeledMsMean / 1000 : null;
      });
      if (modeled.some((v) => v !== null))
        seriesDefs.push({ label: `${name} modeled PostgreSQL`, values: modeled, dash: [6, 4] });
    }
    const palette = [
      '#1f6feb',
      '#cf222e',
      '#1a7f37',
      '#8250df',
      '#bf8700',
      '#57606a',
      '#0a3069',
      '#d4a72c',
    ];
    const labelOfX = new Map(
      cs.map((c) => [
        xOf(c),
        res.kind === 'multi' ? c.sharedBuffers : (c.relSize ?? String(c.pagesPerTable)),
      ]),
    );
    const block = el(
      'div',
      { class: 'chart-block', 'data-chart': key },
      el(
        'h3',
        {},
        res.kind === 'multi'
          ? `${key.toUpperCase()}: failover seconds by shared_buffers`
          : `shared_buffers=${key}: failover seconds by relation size`,
      ),
    );
    box.append(block);
    const u = new uPlot(
      {
        width: 820,
        height: 320,
        scales: { x: { time: false, distr: log ? 3 : 1 }, y: { distr: log ? 3 : 1 } },
        series: [
          {
            label: res.kind === 'multi' ? 'shared_buffers' : 'pages',
            value: (_u, x) => labelOfX.get(x) ?? x,
          },
          ...seriesDefs.map((s, i) => ({
            label: s.label,
            stroke: palette[(s.dash ? i - 1 : i) % palette.length] ?? '#333',
            width: 2,
            dash: s.dash ?? undefined,
            points: { show: true },
            spanGaps: true,
            value: (_u, y) => (y === null ? '—' : `${y.toFixed(3)} s`),
          })),
        ],
        axes: [
          { values: (_u, vals) => vals.map((x) => labelOfX.get(x) ?? ''), splits: () => xs },
          { label: 'seconds', size: 70 },
        ],
      },
      [xs, ...seriesDefs.map((s) => s.values)],
      block,
    );
    // The scale the chart was drawn with, as uPlot holds it (3: logarithmic).
    block.dataset.yScale = u.scales.y.distr === 3 ? 'log' : 'linear';
  }
}

// ---- tabs -------------------------------------------------------------------------------------
function showTab(name) {
  for (const t of ['live', 'results']) {
    $(t).classList.toggle('hidden', t !== name);
    $(`tab-${t}`).classList.toggle('active', t === name);
  }
  if (name === 'results') loadResultsList();
}
$('tab-live').onclick = () => showTab('live');
$('tab-results').onclick = () => showTab('results');
$('log-scale').onchange = () => drawSweepCharts();
setInterval(() => litMachine(), 1000);

connect();
if (new URLSearchParams(location.search).get('view') === 'results') showTab('results');
