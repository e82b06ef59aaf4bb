/**
 * The failover panel: the newest failover report of any node while it runs (records replayed and
 * per second, WAL left, drops by path, descriptors scanned, probes, each phase measured beside the
 * modeled PostgreSQL seconds) and, once promoted, its timeline.
 */
import type { FailoverView, InstantView } from '../wire.ts';
import { $, el, field, unavailable } from './dom.ts';
import { fmtBytes, fmtInt, fmtS, lsnNum } from './format.ts';
import { state, type NodeView } from './state.ts';

/** Per node: the sample records/s is measured from (at most once a second), its last rate. */
const rate = new Map<string, { t: number; records: number; perS?: number }>();

/** Records replayed per second since the last sample at least 1 s old; null before two samples. */
function recordsPerS(n: NodeView): number | null {
  const r = rate.get(n.name);
  let perS: number | null = null;
  if (r && n.recordsReplayed !== null && n.sampledAt > r.t)
    perS = ((n.recordsReplayed - r.records) * 1000) / (n.sampledAt - r.t);
  if (!r || n.sampledAt - r.t >= 1000)
    rate.set(n.name, { t: n.sampledAt, records: n.recordsReplayed ?? 0 });
  else if (r.perS !== undefined) perS = r.perS;
  if (r && perS !== null) r.perS = perS;
  return perS;
}

function stats(n: NodeView, f: FailoverView): HTMLElement {
  const perS = recordsPerS(n);
  const walLeft =
    n.role === 'standby' && n.state === 'running'
      ? (lsnNum(n.lsn.flushed) ?? 0) - (lsnNum(n.lsn.replayed) ?? 0)
      : 0;
  const drops = Object.entries(f.drop.drops).filter(([, c]) => c > 0);
  return el(
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
}

const PHASES = [
  ['replay', 'replayMs', 'replayS'],
  ['end of recovery', 'endOfRecoveryMs', 'endOfRecoveryS'],
  ['open for writes', 'openForWritesMs', 'openForWritesS'],
] as const;

function phasesTable(f: FailoverView): HTMLElement {
  const m = f.model;
  const modeled = (s: number) => `${Number(s).toFixed(3)} s`;
  return el(
    'table',
    { class: 'phases', 'data-testid': 'phases' },
    el(
      'tr',
      {},
      el('th', {}, 'phase'),
      el('th', {}, 'walsim measured'),
      el('th', {}, `modeled PostgreSQL (${m?.profile ?? 'no profile'})`),
    ),
    ...PHASES.map(([label, ms, s]) =>
      el(
        'tr',
        {},
        el('td', {}, label),
        el('td', {}, fmtS(f.phases[ms])),
        el('td', {}, m ? modeled(m.phases[s]) : '—'),
      ),
    ),
    el(
      'tr',
      {},
      el('td', {}, el('b', {}, 'failover (resume → read-write)')),
      el('td', { 'data-field': 'fo-failover-ms' }, fmtS(f.failoverMs)),
      el('td', { 'data-field': 'fo-modeled-s' }, m ? modeled(m.failoverS) : '—'),
    ),
  );
}

/** No report yet: on PostgreSQL, say that it has none. */
function noReport(body: HTMLElement): void {
  if ([...state.nodes.values()].some((n) => n.engine === 'postgres'))
    body.replaceChildren(
      el('span', {}, 'Drops by path, descriptors scanned, probes and the live failover report: '),
      unavailable('failover report'),
      el('span', {}, ' on PostgreSQL (it does not count them).'),
    );
}

export function renderFailover(): void {
  const withReport = [...state.nodes.values()].filter((n) => n.failover);
  const body = $('failover-body');
  if (withReport.length === 0) return noReport(body);
  const n = withReport.sort((a, b) =>
    String(b.failover!.resumeAt).localeCompare(String(a.failover!.resumeAt)),
  )[0]!;
  const f = n.failover!;
  $('failover-node').textContent = `${n.name}${f.promotedAt ? ' — done' : ' — in progress'}`;
  const parts = [stats(n, f), phasesTable(f)];
  if (f.promotedAt) parts.push(timeline(f));
  body.replaceChildren(...parts);
  body.className = '';
  body.dataset.done = f.promotedAt ? 'true' : 'false';
}

function lane(label: string, bars: HTMLElement[]): HTMLElement {
  return el(
    'div',
    { class: 'lane' },
    el('span', { class: 'label' }, label),
    el('div', { class: 'bars' }, ...bars),
  );
}

function bar(k: string, share: number, title: string, text: string): HTMLElement {
  return el('div', { class: `bar ${k}`, style: `width:${(share * 100).toFixed(2)}%`, title }, text);
}

/** The measured phases as a bar lane (the checkpoint after read-write included). */
function measuredLane(f: FailoverView): HTMLElement {
  const ts = f.timestamps;
  const start = ts.resumeRequested?.monoMs ?? NaN;
  const all: Array<[string, InstantView | null, InstantView | null]> = [
    ['replay', ts.resumeRequested, ts.replayCaughtUp],
    ['endOfRecovery', ts.replayCaughtUp, ts.endOfRecoveryWritten],
    ['openForWrites', ts.endOfRecoveryWritten, ts.readWrite],
    ['checkpoint', ts.readWrite, ts.firstCheckpointDone],
  ];
  const segs = all.filter((s): s is [string, InstantView, InstantView] => !!s[1] && !!s[2]);
  const end = Math.max(...segs.map(([, , b]) => b.monoMs));
  const total = Math.max(1e-6, end - start);
  return lane(
    `walsim measured (${(total / 1000).toFixed(3)} s)`,
    segs.map(([k, a, b]) => {
      const ms = (b.monoMs - a.monoMs).toFixed(1);
      return bar(k, (b.monoMs - a.monoMs) / total, `${k}: ${ms} ms`, `${k} ${ms} ms`);
    }),
  );
}

function modeledLane(m: NonNullable<FailoverView['model']>): HTMLElement {
  const segs = [
    ['replay', m.phases.replayS],
    ['endOfRecovery', m.phases.endOfRecoveryS],
    ['openForWrites', m.phases.openForWritesS],
  ] as const;
  const total = segs.reduce((a, [, s]) => a + (Number(s) || 0), 0);
  return lane(
    `modeled PostgreSQL (${total.toFixed(3)} s)`,
    segs.map(([k, s]) =>
      bar(
        k,
        Number(s) / Math.max(total, 1e-9),
        `${k}: ${Number(s).toFixed(4)} s`,
        `${k} ${Number(s).toFixed(3)} s`,
      ),
    ),
  );
}

function timeline(f: FailoverView): HTMLElement {
  return el(
    'div',
    { class: 'timeline', 'data-testid': 'failover-timeline' },
    el(
      'h3',
      {},
      `Failover report: resume ${f.resumeAt} → read-write ${f.promotedAt} (timeline ${f.newTimeline})`,
    ),
    measuredLane(f),
    f.model ? modeledLane(f.model) : null,
  );
}
