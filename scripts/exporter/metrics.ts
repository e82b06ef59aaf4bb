/**
 * The exporter's metrics (prom-client), in two parts:
 * - the cycle's series (`renderCycleMetrics`), rendered once per finished cycle from its snapshot
 *   — in the cycle thread, which posts the text with the snapshot (cycle-thread.ts) — so a scrape
 *   does no PostgreSQL work and no rendering of them, and a standby that stopped answering loses
 *   its prediction series instead of showing a stale value;
 * - the live series (`liveRegistry`), collected by the thread answering HTTP at each scrape: the
 *   process's CPU and memory and that thread's event loop (prom-client's default metrics), the
 *   cycle thread's state, the age of each standby's last good prediction.
 * A scrape serves the live text followed by the last cycle's text (`metricsPage`). Counters
 * (`_total`) count from the collector's own tallies. Names follow the exporter conventions:
 * `walsim_` namespace, snake_case, base units (`_seconds`, `_bytes`), `_info` with labels and the
 * value 1, an `up`-style gauge per standby; the `standby` label is the URL's host:port.
 *
 * Entry points: `renderCycleMetrics`, `cycleRenders`, `liveRegistry`, `metricsPage`,
 * `MetricsPage`, `ProfileInfo`, `profileMajor`, `METRIC_NAMES`.
 */
import { Counter, Gauge, Registry, collectDefaultMetrics } from 'prom-client';
import type { CostProfile } from '../../cost-model/profile.ts';
import { parseLsn } from '../../wal/lsn.ts';
import {
  ERROR_REASONS,
  RESTART_REASONS,
  standbyLabel,
  type CycleSnapshot,
  type StandbyStatus,
} from './snapshot.ts';

/** The PostgreSQL major a profile was fitted on, from its description ("PostgreSQL 14-dev", "(PostgreSQL) 15.18"). */
export function profileMajor(profile: CostProfile): string {
  const m = /PostgreSQL\)?\s+(\d+)/.exec(profile.description ?? '');
  return m === null ? 'unknown' : m[1]!;
}

const P = 'walsim_standby_';

export const METRIC_NAMES = {
  up: `${P}up`,
  writable: `${P}predicted_writable_seconds`,
  phase: `${P}predicted_phase_seconds`,
  replayPart: `${P}predicted_replay_part_seconds`,
  unreplayed: `${P}unreplayed_wal_bytes`,
  unreceived: `${P}unreceived_wal_bytes`,
  records: `${P}replay_records`,
  dropCalls: `${P}replay_drop_calls`,
  descriptors: `${P}replay_drop_scanned_descriptors`,
  probes: `${P}replay_drop_lookup_probes`,
  paused: `${P}replay_paused`,
  timeline: `${P}timeline`,
  nBuffers: `${P}shared_buffers_buffers`,
  patroniPick: `${P}patroni_pick`,
  writableFirst: `${P}writable_first`,
  duration: `${P}prediction_duration_seconds`,
  lastGood: `${P}last_good_prediction_timestamp_seconds`,
  lastGoodAge: `${P}last_good_prediction_age_seconds`,
  errors: `${P}prediction_errors_total`,
  predictions: `${P}predictions_total`,
  profile: 'walsim_profile_info',
  cycles: 'walsim_exporter_cycles_total',
  threadUp: 'walsim_exporter_cycle_thread_up',
  threadRestarts: 'walsim_exporter_cycle_thread_restarts_total',
  restarts: `${P}model_restarts_total`,
  walRead: `${P}wal_read_bytes_total`,
  receiveLsn: `${P}wal_receive_lsn_bytes`,
  replayLsn: `${P}wal_replay_lsn_bytes`,
  position: `${P}patroni_position_bytes`,
  primaryLsn: 'walsim_primary_current_wal_lsn_bytes',
} as const;

type Sample = [labels: Record<string, string>, value: number];

/** A gauge whose samples are computed from the snapshot at every scrape. */
function snapshotGauge(
  registry: Registry,
  name: string,
  help: string,
  labelNames: string[],
  samples: () => Sample[],
): void {
  new Gauge({
    name,
    help,
    labelNames,
    registers: [registry],
    collect() {
      this.reset();
      for (const [labels, v] of samples()) this.set(labels, v);
    },
  });
}

/** Per standby that answered in the last cycle: its labels and prediction. */
function perUp<T>(
  snap: () => CycleSnapshot,
  f: (s: StandbyStatus & { prediction: NonNullable<StandbyStatus['prediction']> }) => T[],
): () => T[] {
  return () =>
    snap()
      .standbys.filter((s) => s.prediction !== null)
      .flatMap((s) => f(s as Parameters<typeof f>[0]));
}

/** The cost profile pricing the predictions, as the `_info` metric names it. */
export interface ProfileInfo {
  name: string;
  ref: string;
  profile: CostProfile;
}

/** What a scrape is served: the exposition text and its content type. */
export interface MetricsPage {
  contentType: string;
  render(): Promise<string>;
}

let renders = 0;

/** How many times this thread rendered a cycle's series (the HTTP thread's: at start, on a failure). */
export function cycleRenders(): number {
  return renders;
}

/**
 * The cycle's series of one snapshot as exposition text: rendered once per finished cycle (a
 * registry of its own each time, so each counter shows the snapshot's tally).
 */
export function renderCycleMetrics(snap: CycleSnapshot, profile: ProfileInfo): Promise<string> {
  renders += 1;
  const r = new Registry();
  const g = (name: string, help: string, labels: string[], samples: () => Sample[]) =>
    snapshotGauge(r, name, help, labels, samples);
  const sb = (s: StandbyStatus) => ({ standby: s.target.label });
  const snapshot = () => snap;
  predictionMetrics(g, snapshot, sb);
  standbyWalMetrics(g, snapshot, sb);
  fleetMetrics(g, snapshot, sb);
  standbyHealthMetrics(r, g, snapshot, sb, profile);
  standbyCostMetrics(r, snapshot, sb);
  return r.metrics();
}

/**
 * The series the HTTP thread collects at each scrape: the process (prom-client's defaults: CPU,
 * memory, this thread's event loop and garbage collections), the cycle thread, and the age of
 * each standby's last good prediction (it grows while a cycle runs long).
 */
export function liveRegistry(snapshot: () => CycleSnapshot): Registry {
  const r = new Registry();
  collectDefaultMetrics({ register: r });
  const g = (name: string, help: string, labels: string[], samples: () => Sample[]) =>
    snapshotGauge(r, name, help, labels, samples);
  g(METRIC_NAMES.lastGoodAge, 'Seconds since the last successful prediction', ['standby'], () =>
    snapshot()
      .standbys.filter((s) => s.lastGoodAt !== null)
      .map((s) => [{ standby: s.target.label }, (Date.now() - s.lastGoodAt!) / 1000]),
  );
  threadMetrics(r, g, snapshot);
  return r;
}

/** A scrape's answer: the live series, then the last cycle's text as it was rendered. */
export function metricsPage(live: Registry, cycleText: () => Promise<string>): MetricsPage {
  return {
    contentType: live.contentType,
    render: async () => (await live.metrics()) + (await cycleText()),
  };
}

type G = (name: string, help: string, labels: string[], samples: () => Sample[]) => void;
type Sb = (s: StandbyStatus) => { standby: string };

/** Up or not, and the prediction: seconds to writable, by phase, the replay phase by part. */
function predictionMetrics(g: G, snapshot: () => CycleSnapshot, sb: Sb): void {
  const N = METRIC_NAMES;
  g(N.up, '1 if the last prediction cycle read this standby and its WAL, else 0', ['standby'], () =>
    snapshot().standbys.map((s) => [sb(s), s.up ? 1 : 0]),
  );
  g(
    N.writable,
    'Predicted seconds from promotion (or pg_wal_replay_resume() when paused) until the standby accepts writes',
    ['standby'],
    perUp(snapshot, (s) => [[sb(s), s.prediction.predicted.writableS]]),
  );
  g(
    N.phase,
    'Predicted seconds to writable by phase: replay, end_of_recovery, open_for_writes',
    ['standby', 'phase'],
    perUp(snapshot, (s) => {
      const ph = s.prediction.predicted.phases;
      return [
        [{ ...sb(s), phase: 'replay' }, ph.replayS],
        [{ ...sb(s), phase: 'end_of_recovery' }, ph.endOfRecoveryS],
        [{ ...sb(s), phase: 'open_for_writes' }, ph.openForWritesS],
      ];
    }),
  );
  g(
    N.replayPart,
    'Predicted replay seconds by part: records, generic_records, drops, smgr, control_file (they sum to the replay phase)',
    ['standby', 'part'],
    perUp(snapshot, (s) => {
      const x = s.prediction.predicted.replay;
      const parts: Array<[string, number]> = [
        ['records', x.recordsS],
        ['generic_records', x.genericRecordsS],
        ['drops', x.dropsS],
        ['smgr', x.smgrS],
        ['control_file', x.controlFileS],
      ];
      return parts.map(([part, v]): Sample => [{ ...sb(s), part }, v]);
    }),
  );
}

/** What the unreplayed WAL holds: bytes, records by type, drop calls by path, state. */
function standbyWalMetrics(g: G, snapshot: () => CycleSnapshot, sb: Sb): void {
  const N = METRIC_NAMES;
  g(
    N.unreplayed,
    'WAL received but not replayed: pg_last_wal_receive_lsn() - pg_last_wal_replay_lsn()',
    ['standby'],
    perUp(snapshot, (s) => [[sb(s), s.prediction.range.bytes]]),
  );
  g(
    N.unreceived,
    'WAL the primary wrote that the standby has not received (only with a reachable --primary): pg_current_wal_lsn() - pg_last_wal_receive_lsn()',
    ['standby'],
    perUp(snapshot, (s) => {
      const p = s.prediction.primary;
      return p !== null && 'walNotReceivedBytes' in p ? [[sb(s), p.walNotReceivedBytes]] : [];
    }),
  );
  g(
    N.records,
    'WAL records left to replay, by resource manager and record type (pg_waldump --stats=record)',
    ['standby', 'rmgr', 'type'],
    perUp(snapshot, (s) =>
      s.prediction.records.byType.map((t): Sample => [
        { ...sb(s), rmgr: t.rmgr, type: t.type },
        t.count,
      ]),
    ),
  );
  g(
    N.dropCalls,
    'Buffer drop calls replay will make, by path: full_scan (every descriptor) or cached_lookup',
    ['standby', 'path'],
    perUp(snapshot, (s) => [
      [{ ...sb(s), path: 'full_scan' }, s.prediction.drops.calls.fullScan],
      [{ ...sb(s), path: 'cached_lookup' }, s.prediction.drops.calls.lookup],
    ]),
  );
  g(
    N.descriptors,
    'Buffer descriptors the full-scan drops will visit (NBuffers each)',
    ['standby'],
    perUp(snapshot, (s) => [[sb(s), s.prediction.drops.descriptorsScanned]]),
  );
  g(
    N.probes,
    'Buffer mapping-table probes the cached-lookup drops will make',
    ['standby'],
    perUp(snapshot, (s) => [[sb(s), s.prediction.drops.probes]]),
  );
  g(
    N.paused,
    '1 if WAL replay is paused or a pause is requested (the prediction counts from pg_wal_replay_resume())',
    ['standby'],
    perUp(snapshot, (s) => [[sb(s), s.prediction.paused ? 1 : 0]]),
  );
  g(
    N.timeline,
    'Timeline of the WAL the standby receives (pg_stat_wal_receiver), else of its last restartpoint',
    ['standby'],
    perUp(snapshot, (s) => [[sb(s), s.prediction.state.timeline]]),
  );
  g(
    N.nBuffers,
    'shared_buffers of the standby in 8 kB buffers (NBuffers, what a full-scan drop visits)',
    ['standby'],
    perUp(snapshot, (s) => [[sb(s), s.prediction.state.nBuffers]]),
  );
}

/**
 * What Prometheus needs to rank the standbys of many exporters (prometheus/walsim-rules.yml, the
 * `walsim-fleet` group): each standby's LSNs as byte positions, Patroni's position for it
 * (max(received, replayed)), and the primary's current LSN when --primary is reachable.
 */
function fleetMetrics(g: G, snapshot: () => CycleSnapshot, sb: Sb): void {
  const N = METRIC_NAMES;
  const lsn = (
    name: string,
    help: string,
    of: (p: NonNullable<StandbyStatus['prediction']>) => string | null,
  ) =>
    g(
      name,
      help,
      ['standby'],
      perUp(snapshot, (s) => {
        const v = of(s.prediction);
        return v === null ? [] : [[sb(s), parseLsn(v)]];
      }),
    );
  lsn(N.receiveLsn, 'pg_last_wal_receive_lsn() as a byte position', (p) => p.state.receiveLsn);
  lsn(N.replayLsn, 'pg_last_wal_replay_lsn() as a byte position', (p) => p.state.replayLsn);
  lsn(
    N.position,
    "Patroni's position for this member, max(received, replayed), as a byte position",
    (p) => p.patroniPosition,
  );
  g(
    N.primaryLsn,
    "The primary's pg_current_wal_lsn() as a byte position (with a reachable --primary)",
    ['primary'],
    () => {
      for (const s of snapshot().standbys) {
        const p = s.prediction?.primary;
        if (p !== null && p !== undefined && 'currentLsn' in p)
          return [[{ primary: standbyLabel(p.url) }, parseLsn(p.currentLsn)]];
      }
      return [];
    },
  );
}

/** Ranking, timing, errors, profile. */
function standbyHealthMetrics(
  r: Registry,
  g: G,
  snapshot: () => CycleSnapshot,
  sb: Sb,
  profile: ProfileInfo,
): void {
  const N = METRIC_NAMES;
  const ranked = (key: 'patroniPick' | 'writableFirst') => () => {
    const snap = snapshot();
    if (snap.ranking === null) return [];
    return snap.standbys
      .filter((s) => s.prediction !== null)
      .map((s): Sample => [sb(s), snap.ranking![key] === s.target.label ? 1 : 0]);
  };
  g(
    N.patroniPick,
    "1 for the standby Patroni's defaults would promote (lag = leader - max(received, replayed) <= 1 MB, then furthest ahead), among those this exporter watches that answered (the fleet's pick: prometheus/walsim-rules.yml)",
    ['standby'],
    ranked('patroniPick'),
  );
  g(
    N.writableFirst,
    '1 for the standby predicted to become writable first, among those this exporter watches that answered',
    ['standby'],
    ranked('writableFirst'),
  );
  g(N.duration, 'Seconds the last prediction of this standby took', ['standby'], () =>
    snapshot()
      .standbys.filter((s) => s.lastDurationS !== null)
      .map((s) => [sb(s), s.lastDurationS!]),
  );
  g(N.lastGood, 'Unix time of the last successful prediction', ['standby'], () =>
    snapshot()
      .standbys.filter((s) => s.lastGoodAt !== null)
      .map((s) => [sb(s), s.lastGoodAt! / 1000]),
  );
  g(
    N.profile,
    'The cost profile pricing the predictions, and the PostgreSQL major it was fitted on',
    ['profile', 'fitted_major'],
    () => [[{ profile: profile.name, fitted_major: profileMajor(profile.profile) }, 1]],
  );
  counterFrom(r, N.errors, 'Failed predictions by reason', ['standby', 'reason'], () =>
    snapshot().standbys.flatMap((s) =>
      ERROR_REASONS.map((reason): Sample => [{ ...sb(s), reason }, s.errors[reason]]),
    ),
  );
  counterFrom(r, N.predictions, 'Predictions attempted', ['standby'], () =>
    snapshot().standbys.map((s) => [sb(s), s.predictions]),
  );
  counterFrom(r, N.cycles, 'Prediction cycles finished', [], () => [[{}, snapshot().cycles]]);
}

/** The cycle thread (cycle-host.ts): alive or not, its restarts; nothing when run in-process. */
function threadMetrics(r: Registry, g: G, snapshot: () => CycleSnapshot): void {
  const N = METRIC_NAMES;
  const thread = () => snapshot().thread;
  g(N.threadUp, '1 while the thread running the prediction cycles is alive', [], () => {
    const t = thread();
    return t === null ? [] : [[{}, t.up ? 1 : 0]];
  });
  counterFrom(
    r,
    N.threadRestarts,
    'Restarts of the prediction cycles thread after it failed',
    [],
    () => {
      const t = thread();
      return t === null ? [] : [[{}, t.restarts]];
    },
  );
}

/** What the kept state costs: its starts over by reason, the WAL the cycles read. */
function standbyCostMetrics(r: Registry, snapshot: () => CycleSnapshot, sb: Sb): void {
  const N = METRIC_NAMES;
  counterFrom(
    r,
    N.restarts,
    'Starts over of the replay state kept between cycles, by reason',
    ['standby', 'reason'],
    () =>
      snapshot().standbys.flatMap((s) =>
        RESTART_REASONS.map((reason): Sample => [{ ...sb(s), reason }, s.restarts[reason]]),
      ),
  );
  counterFrom(r, N.walRead, 'Bytes of WAL the prediction cycles read', ['standby'], () =>
    snapshot().standbys.map((s) => [sb(s), s.walReadBytes]),
  );
}

/**
 * A counter mirroring a tally the collector keeps (monotonic there): prom-client counters only
 * `inc`, so each scrape adds the difference since the last one.
 */
function counterFrom(
  r: Registry,
  name: string,
  help: string,
  labelNames: string[],
  samples: () => Sample[],
): void {
  const seen = new Map<string, number>();
  new Counter({
    name,
    help,
    labelNames,
    registers: [r],
    collect() {
      for (const [labels, v] of samples()) {
        const k = JSON.stringify(labels);
        const d = v - (seen.get(k) ?? 0);
        this.inc(labels, d > 0 ? d : 0);
        seen.set(k, v);
      }
    },
  });
}
