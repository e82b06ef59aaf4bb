/**
 * SIM-4's last step (sim/README): once the cluster has converged, every node holds the primary's
 * tables — the same names, row counts, content digests and main-fork blocks (a truncation that
 * failed on one node and not on the other shows as a size difference even where no row differs).
 */
import type { ServerNode } from '../../server/node.ts';
import type { SimCluster } from '../cluster.ts';

export function checkIdenticalTables(
  cluster: SimCluster,
  primary: ServerNode,
  standby: ServerNode,
  name: string,
): void {
  const a = primary.inspect();
  const b = standby.inspect();
  const tables = (x: typeof a) =>
    JSON.stringify(x.tables.map((t) => [t.name, t.rows, t.digest, t.forks[0]]));
  if (tables(a) !== tables(b))
    cluster.violation(
      `after convergence the nodes differ: primary ${tables(a)} ${cluster.twoNodes ? 'standby' : `standby ${name}`} ${tables(b)}`,
    );
}
