/**
 * The dashboard's wire format: what the server pushes over /live and answers on /api/*, and all
 * that the page (dashboard/page/, compiled for the browser) knows of the server. Types only, and
 * importing nothing: the page may import this file and nothing else outside its folder
 * (test/unit/layering.test.ts). The server's own types are these (view.ts, machine-graph.ts), with
 * the failover report's full type in place of `FailoverView`: `NodeViewOf`'s bound makes the
 * compiler check that the report the server sends has every field the page reads.
 *
 * Entry points: `NodeViewOf`, `FailoverView`, `PredictionView`, `ClusterMeta`, `PushMessageOf`,
 * `LifecycleGraph`, `FiredTransition`, `ResultsList`, `SweepView`.
 */

export type EngineName = 'walsim' | 'postgres';

/** running: the last poll answered; stopped: no server process; unreachable: a process, no answer. */
export type NodeState = 'running' | 'stopped' | 'unreachable';

/** One pg_stat_replication row of a node's walsenders. */
export interface ReplicationView {
  applicationName: string;
  state: string;
  sentLsn: string | null;
  writeLsn: string | null;
  flushLsn: string | null;
  replayLsn: string | null;
  syncPriority: number;
  syncState: string;
  /** PostgreSQL's replay_lag in seconds (null when idle, or on walsim, which has no lag tracker). */
  replayLagS: number | null;
}

/** A lifecycle instant: wall clock (ISO) and a monotonic clock reading in ms. */
export interface InstantView {
  at: string;
  monoMs: number;
}

/** The part of a priced failover report (standby/failover-report.ts) the page shows. */
export interface FailoverView {
  resumeAt: string | null;
  promotedAt: string | null;
  failoverMs: number | null;
  phases: {
    replayMs: number | null;
    endOfRecoveryMs: number | null;
    openForWritesMs: number | null;
  };
  timestamps: {
    resumeRequested: InstantView | null;
    replayCaughtUp: InstantView | null;
    endOfRecoveryWritten: InstantView | null;
    readWrite: InstantView | null;
    firstCheckpointDone: InstantView | null;
  };
  recordsReplayed: number;
  newTimeline: number | null;
  drop: {
    drops: Record<string, number>;
    scanned: number;
    probes: number;
    invalidated: number;
    ms: number;
  };
  /** The modeled PostgreSQL seconds (cost-model/), null without a profile. */
  model: {
    profile: string;
    failoverS: number;
    phases: { replayS: number; endOfRecoveryS: number; openForWritesS: number };
  } | null;
}

/**
 * A PostgreSQL standby's predicted time to writable if promoted now (the exporter's prediction
 * cycle, scripts/exporter/collector.ts, over scripts/predict/): the last cycle's answer.
 */
export interface PredictionView {
  /** Epoch ms when the cycle that produced this finished. */
  at: number;
  /** Predicted seconds from promotion to writable; null when the last prediction failed. */
  writableS: number | null;
  phases: { replayS: number; endOfRecoveryS: number; openForWritesS: number } | null;
  /** The cost profile that priced it. */
  profile: string;
  /** Why the last prediction failed (one line), else null. */
  error: string | null;
}

export interface NodeViewOf<F extends FailoverView> {
  name: string;
  engine: EngineName;
  state: NodeState;
  /** Why the node is unreachable (or the last poll's error). */
  error: string | null;
  /** Epoch ms of the sample. */
  sampledAt: number;
  pid: number | null;
  role: 'primary' | 'standby' | null;
  timeline: number | null;
  /** The lifecycle machine's state ('recovery(streaming,paused)', …); null on PostgreSQL. */
  lifecycle: string | null;
  /** State ids of the lifecycle graph that are active now (lit on the page). */
  activeStates: string[];
  /** The node this standby streams from (a node name; host:port when not one of the cluster's). */
  upstream: string | null;
  /** This standby's sync_state in its upstream's pg_stat_replication. */
  syncState: string | null;
  /** The walreceiver's state (walsim: lifecycle receiver region; PostgreSQL: pg_stat_wal_receiver.status). */
  receiver: string | null;
  lsn: {
    /** Primary: pg_current_wal_insert_lsn(). */
    current: string | null;
    /** Primary: pg_current_wal_flush_lsn(). */
    flush: string | null;
    /** Standby: written by the walreceiver (pg_stat_wal_receiver.written_lsn). */
    received: string | null;
    /** Standby: fsynced (pg_last_wal_receive_lsn()). */
    flushed: string | null;
    /** Standby: pg_last_wal_replay_lsn(). */
    replayed: string | null;
  };
  /** Standby: its upstream's flush LSN minus its replay LSN. */
  lagBytes: number | null;
  /** Standby: seconds since the oldest WAL not yet replayed was flushed upstream. */
  lagSeconds: number | null;
  /** 'dashboard' (sampled at the poll interval, walsim) or 'pg_stat_replication' (PostgreSQL's replay_lag). */
  lagSecondsSource: 'dashboard' | 'pg_stat_replication' | null;
  /** pg_get_wal_replay_pause_state(). */
  pauseState: string | null;
  recordsReplayed: number | null;
  /** Cumulative buffer-drop counters of the node (walsim only). */
  drop: {
    drops: Record<string, number>;
    scanned: number;
    probes: number;
    invalidated: number;
  } | null;
  nBuffers: number | null;
  sharedBuffers: string | null;
  replication: ReplicationView[];
  /** The last (or running) failover, priced with the dashboard's cost profile (walsim only). */
  failover: F | null;
  /** A PostgreSQL 15 standby's predicted time to writable; null elsewhere and before a cycle. */
  prediction: PredictionView | null;
  /** Fields this engine does not expose. */
  unavailable: string[];
}

export interface ClusterMeta {
  dir: string;
  engine: EngineName;
  pollMs: number;
  /** The cost profile the modeled seconds use. */
  profile: string;
  /** Actions need this token in `x-dashboard-token` (it is in the page, not guessable by other sites). */
  actions: string[];
}

export interface GraphState {
  /** xstate's id, e.g. 'lifecycle.recovery.replay.paused'. */
  id: string;
  label: string;
  parent: string | null;
  kind: 'atomic' | 'compound' | 'parallel' | 'final' | 'history';
  initial: boolean;
  x: number;
  y: number;
  width: number;
  height: number;
}

export interface GraphEdge {
  /** Stable index-based id ('e0', 'e1', …) in definition order. */
  id: string;
  source: string;
  target: string;
  /** The event type, or 'always' for an eventless transition. */
  event: string;
  guard: string | null;
  /** Polyline in the graph's coordinates. */
  points: Array<{ x: number; y: number }>;
  label: { text: string; x: number; y: number };
}

export interface LifecycleGraph {
  machineId: string;
  width: number;
  height: number;
  states: GraphState[];
  edges: GraphEdge[];
}

export interface FiredTransition {
  edge: string;
  event: string;
  from: string;
  to: string;
}

export type PushMessageOf<F extends FailoverView> =
  | { type: 'hello'; meta: ClusterMeta; graph: LifecycleGraph; nodes: NodeViewOf<F>[] }
  | { type: 'node'; node: NodeViewOf<F> }
  | { type: 'removed'; name: string }
  | { type: 'transitions'; node: string; at: number; fired: FiredTransition[] };

/** GET /api/results: the finished sweeps of the results folder. */
export interface ResultsList {
  dir: string;
  results: Array<{ name: string; kind: string | null; startedAt: string | null; cells: number }>;
}

/** One cell of a sweep's results.json (scripts/report/records.ts), the fields the charts read. */
export interface SweepCellView {
  engine?: string;
  strategy: string;
  forceOptimized?: boolean;
  variant?: string;
  sharedBuffers: string;
  nBuffers: number;
  pagesPerTable?: number;
  relSize?: string | null;
  failoverMsMean?: number | null;
  failoverMsMedian?: number | null;
  modeledMsMean?: number | null;
}

/** GET /api/results/NAME: results.json and its tables.md as HTML (or `error`, not ok). */
export interface SweepView {
  results: { kind: string; cells?: SweepCellView[] };
  tablesHtml: string | null;
  error?: string;
}
