/**
 * A cluster-wide operation under the cluster's lock (server/lock-files.ts): concurrent CLI
 * invocations and dashboard buttons on one cluster run one after the other.
 *
 * Entry points: `locked`, `CLUSTER_LOCK_WAIT_MS`.
 */
import { listNodes } from '../../server/cluster-files.ts';
import { withClusterLock } from '../../server/lock-files.ts';

/** Cluster-wide operations wait this long for another one to finish, then are refused. */
export const CLUSTER_LOCK_WAIT_MS = 120_000;

/**
 * Run `fn` holding the cluster's lock. Without a cluster there is nothing to lock (`fn` then
 * reports that). A busy lock is announced on stderr, then waited for up to `waitMs`.
 */
export function locked<T>(
  clusterDir: string,
  operation: string,
  fn: () => Promise<T>,
  waitMs = CLUSTER_LOCK_WAIT_MS,
): Promise<T> {
  if (listNodes(clusterDir).length === 0) return fn();
  return withClusterLock(clusterDir, operation, fn, {
    waitMs,
    onWait: (holder) =>
      console.error(`waiting for the cluster operation ${holder} to finish before "${operation}"`),
  });
}
