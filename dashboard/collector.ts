/**
 * The collector: one polling loop per node of the cluster, each sending its next request only
 * after the previous answer and at least `pollMs` (≥ MIN_POLL_MS = 200) after the previous
 * request began, so no node is asked more than once per 200 ms, however slow it answers. Each
 * sample becomes a `NodeView` (view.ts) with what needs the other nodes' samples: the upstream's
 * sync state, lag in bytes and seconds (lag.ts). Listeners get every view and every lifecycle
 * transition inferred between two samples of the same process (machine-graph.ts).
 *
 * Ordering: a node's views are emitted in the order its samples were taken; the set of nodes is
 * re-read every `NODE_LIST_MS` (add-standby, a removed directory).
 */
import { parseLsn } from '../wal/lsn.ts';
import type { FailoverReport } from '../standby/failover-report.ts';
import { withModel } from '../cost-model/price.ts';
import type { CostProfile } from '../cost-model/profile.ts';
import { LagTracker } from './lag.ts';
import type { PredictionSource } from './predictions.ts';
import { activeStates, inferTransitions, type FiredTransition } from './machine-graph.ts';
import type { EngineName, NodeState, NodeView, ReplicationView } from './view.ts';

export const MIN_POLL_MS = 200;
const NODE_LIST_MS = 1_000;

/** What an engine's sampler reports about one node (the collector fills in the rest). */
export interface NodeSample {
  state: NodeState;
  error: string | null;
  pid: number | null;
  role: 'primary' | 'standby' | null;
  timeline?: number | null;
  lifecycle?: string | null;
  upstream?: string | null;
  /** The application_name this standby reports upstream (to find its pg_stat_replication row). */
  applicationName?: string | null;
  receiver?: string | null;
  lsn?: NodeView['lsn'];
  /** What this node's own standbys can be sent (primary: flush LSN; standby: flushed LSN). */
  upstreamFlush?: string | null;
  pauseState?: string | null;
  recordsReplayed?: number | null;
  drop?: NodeView['drop'];
  nBuffers?: number | null;
  sharedBuffers?: string | null;
  replication?: ReplicationView[];
  failover?: FailoverReport | null;
  unavailable?: string[];
}

export interface ClusterSource {
  readonly engine: EngineName;
  readonly dir: string;
  nodeNames(): string[];
  sample(name: string): Promise<NodeSample>;
  close(): void | Promise<void>;
}

export interface CollectorListener {
  view(v: NodeView): void;
  removed(name: string): void;
  transitions(node: string, at: number, fired: FiredTransition[]): void;
}

const noLsn = (): NodeView['lsn'] => ({
  current: null,
  flush: null,
  received: null,
  flushed: null,
  replayed: null,
});

const num = (lsn: string | null | undefined): number | null => {
  if (lsn === null || lsn === undefined) return null;
  try {
    return Number(parseLsn(lsn));
  } catch {
    return null;
  }
};

export class Collector {
  private readonly latest = new Map<string, NodeSample>();
  private readonly views = new Map<string, NodeView>();
  private readonly loops = new Map<string, Promise<void>>();
  private readonly lag = new LagTracker();
  private readonly listeners = new Set<CollectorListener>();
  private closed = false;
  private listTimer: NodeJS.Timeout | null = null;
  /** Requests sent per node (tests check the 200 ms bound with it). */
  readonly requests = new Map<string, number>();

  constructor(
    readonly source: ClusterSource,
    readonly pollMs: number,
    private readonly profile: CostProfile | null,
    /** A PostgreSQL standby's predicted time to writable (predictions.ts), when predicted. */
    private readonly predictions: PredictionSource | null = null,
  ) {
    if (!(pollMs >= MIN_POLL_MS))
      throw new Error(`poll interval must be at least ${MIN_POLL_MS} ms`);
  }

  start(): void {
    this.refreshNodes();
    this.listTimer = setInterval(() => this.refreshNodes(), NODE_LIST_MS);
  }

  on(l: CollectorListener): () => void {
    this.listeners.add(l);
    return () => this.listeners.delete(l);
  }

  snapshot(): NodeView[] {
    return [...this.views.values()].sort((a, b) => a.name.localeCompare(b.name));
  }

  private refreshNodes(): void {
    if (this.closed) return;
    let names: string[];
    try {
      names = this.source.nodeNames();
    } catch {
      return; // the directory is being rewritten: next time
    }
    for (const n of names) if (!this.loops.has(n)) this.loops.set(n, this.loop(n));
    for (const n of [...this.views.keys()]) {
      if (!names.includes(n)) {
        this.views.delete(n);
        this.latest.delete(n);
        for (const l of this.listeners) l.removed(n);
      }
    }
  }

  private async loop(name: string): Promise<void> {
    while (!this.closed) {
      const t0 = Date.now();
      let s: NodeSample;
      this.requests.set(name, (this.requests.get(name) ?? 0) + 1);
      try {
        s = await this.source.sample(name);
      } catch (e) {
        s = { state: 'unreachable', error: (e as Error).message, pid: null, role: null };
      }
      if (this.closed) return;
      if (!this.source.nodeNames().includes(name)) {
        this.loops.delete(name);
        return;
      }
      this.accept(name, s, Date.now());
      const wait = Math.max(0, this.pollMs - (Date.now() - t0));
      await new Promise((r) => setTimeout(r, wait));
    }
  }

  private accept(name: string, s: NodeSample, now: number): void {
    const prev = this.latest.get(name);
    this.latest.set(name, s);
    const flush = num(s.upstreamFlush);
    if (s.state === 'running' && flush !== null) this.lag.record(name, now, flush);
    const view = this.viewOf(name, s, now);
    this.views.set(name, view);
    for (const l of this.listeners) l.view(view);
    if (
      prev !== undefined &&
      prev.pid !== null &&
      prev.pid === s.pid &&
      prev.lifecycle &&
      s.lifecycle &&
      prev.lifecycle !== s.lifecycle
    ) {
      const fired = inferTransitions(prev.lifecycle, s.lifecycle);
      if (fired.length > 0) for (const l of this.listeners) l.transitions(name, now, fired);
    }
  }

  private viewOf(name: string, s: NodeSample, now: number): NodeView {
    const upstream = s.upstream ?? null;
    const up = upstream === null ? undefined : this.latest.get(upstream);
    const row =
      up?.replication?.find((r) => r.applicationName === (s.applicationName ?? name)) ?? null;
    const replayed = num(s.lsn?.replayed);
    const upFlush = num(up?.upstreamFlush);
    const pgLag = this.source.engine === 'postgres';
    let lagSeconds: number | null = null;
    if (s.state === 'running' && s.role === 'standby' && replayed !== null && upstream !== null) {
      lagSeconds = pgLag ? (row?.replayLagS ?? null) : this.lag.lagSeconds(upstream, now, replayed);
    }
    const failover =
      s.failover === undefined || s.failover === null ? null : withModel(s.failover, this.profile);
    return {
      name,
      engine: this.source.engine,
      state: s.state,
      error: s.error,
      sampledAt: now,
      pid: s.pid,
      role: s.role,
      timeline: s.timeline ?? null,
      lifecycle: s.lifecycle ?? null,
      activeStates: s.lifecycle ? activeStates(s.lifecycle) : [],
      upstream,
      syncState: row?.syncState ?? null,
      receiver: s.receiver ?? null,
      lsn: s.lsn ?? noLsn(),
      lagBytes:
        s.state === 'running' && replayed !== null && upFlush !== null && up?.state === 'running'
          ? Math.max(0, upFlush - replayed)
          : null,
      lagSeconds,
      lagSecondsSource: lagSeconds === null ? null : pgLag ? 'pg_stat_replication' : 'dashboard',
      pauseState: s.pauseState ?? null,
      recordsReplayed: s.recordsReplayed ?? null,
      drop: s.drop ?? null,
      nBuffers: s.nBuffers ?? null,
      sharedBuffers: s.sharedBuffers ?? null,
      replication: s.replication ?? [],
      failover,
      prediction: this.predictions?.view(name) ?? null,
      unavailable: s.unavailable ?? [],
    };
  }

  async close(): Promise<void> {
    this.closed = true;
    await this.predictions?.stop();
    if (this.listTimer) clearInterval(this.listTimer);
    await this.source.close();
  }
}
