/**
 * What the dashboard pushes to the page: one `NodeView` per node, the same shape for walsim and
 * for real PostgreSQL. A field PostgreSQL does not expose is null and named in `unavailable` (the
 * page shows "unavailable"), never filled in with a guess.
 *
 * Entry points: `NodeView`, `ClusterMeta`, `PushMessage`.
 */
import type { FailoverReport } from '../standby/failover-report.ts';
import type { Priced } from '../cost-model/price.ts';
import type { FiredTransition, LifecycleGraph } from './machine-graph.ts';

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

export interface NodeView {
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
  failover: Priced<FailoverReport> | null;
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

export type PushMessage =
  | { type: 'hello'; meta: ClusterMeta; graph: LifecycleGraph; nodes: NodeView[] }
  | { type: 'node'; node: NodeView }
  | { type: 'removed'; name: string }
  | { type: 'transitions'; node: string; at: number; fired: FiredTransition[] };
