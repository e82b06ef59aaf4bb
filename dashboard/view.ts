/**
 * What the dashboard pushes to the page: one `NodeView` per node, the same shape for walsim and
 * for real PostgreSQL. A field PostgreSQL does not expose is null and named in `unavailable` (the
 * page shows "unavailable"), never filled in with a guess. The shapes are wire.ts's (what the page
 * reads), with the failover report's full type.
 *
 * Entry points: `NodeView`, `ClusterMeta`, `PushMessage`.
 */
import type { FailoverReport } from '../standby/failover-report.ts';
import type { Priced } from '../cost-model/price.ts';
import type { NodeViewOf, PushMessageOf } from './wire.ts';

export type {
  ClusterMeta,
  EngineName,
  NodeState,
  PredictionView,
  ReplicationView,
} from './wire.ts';

/** NodeViewOf's bound checks that the priced report has every field the page reads. */
export type NodeView = NodeViewOf<Priced<FailoverReport>>;

export type PushMessage = PushMessageOf<Priced<FailoverReport>>;
