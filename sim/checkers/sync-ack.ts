/**
 * SIM-2 (sim/README): at the instant a commit is acknowledged under remote_write, on or
 * remote_apply, the live standby's write, flush or replay LSN is at or past the commit's end.
 */
import { formatLsn, type Lsn } from '../../wal/lsn.ts';
import type { ServerNode } from '../../server/node.ts';
import type { SimCluster } from '../cluster.ts';

export function checkSyncAck(cluster: SimCluster, primary: ServerNode, endLsn: Lsn): void {
  const level = primary.config.synchronousCommit;
  if (level !== 'remote_write' && level !== 'on' && level !== 'remote_apply') return;
  const sb = cluster.standby.node;
  // A dead standby's in-flight replies are lost with its connections, so a live standby on the
  // same timeline is the one that confirmed; with none alive there is nothing to compare.
  if (sb === null || !sb.inRecovery || sb.timeline !== primary.timeline) return;
  const pos =
    level === 'remote_write'
      ? sb.wal.writeLsn
      : level === 'on'
        ? sb.wal.flushLsn
        : (sb.startup?.replayEndLsn ?? 0);
  if (pos < endLsn) {
    cluster.violation(
      `commit ending at ${formatLsn(endLsn)} acknowledged under synchronous_commit=${level}, but the standby's ${level === 'remote_write' ? 'write' : level === 'on' ? 'flush' : 'replay'} LSN is ${formatLsn(pos)}`,
    );
  }
}
