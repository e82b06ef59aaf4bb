/**
 * The page's state: per node the last NodeView, the last HISTORY samples of its LSN lanes (uPlot
 * data arrays) and its charts; the lifecycle graph and the edges fired lately.
 */
import type { ClusterMeta, FailoverView, LifecycleGraph, NodeViewOf } from '../wire.ts';
import type { UPlot } from './uplot.ts';

export type NodeView = NodeViewOf<FailoverView>;

/** Samples per node chart (one minute at 250 ms). */
export const HISTORY = 240;

/** The token actions and the socket need (dashboard/README.md, INV-DASH-6). */
export const TOKEN =
  document.querySelector('meta[name="dashboard-token"]')?.getAttribute('content') ?? '';

/** A node's lanes over time: t (s since the epoch), a/b/c the three LSN lanes. */
export interface History {
  t: number[];
  a: Array<number | null>;
  b: Array<number | null>;
  c: Array<number | null>;
  role: NodeView['role'];
}

export const state = {
  meta: null as ClusterMeta | null,
  graph: null as LifecycleGraph | null,
  nodes: new Map<string, NodeView>(),
  history: new Map<string, History>(),
  charts: new Map<string, UPlot>(),
  /** `node|edge` → when it fired (epoch ms). */
  fired: new Map<string, number>(),
  machineNode: null as string | null,
  machineChosen: false,
};
