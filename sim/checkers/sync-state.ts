/**
 * SIM-6 (sim/README), several nodes, at the instant a commit is acknowledged under remote_write,
 * on or remote_apply with synchronous_standby_names set: the standbys whose acknowledgements
 * released it are the ones pg_stat_replication on the primary calls synchronous, and they have it.
 * - FIRST n (and the `name` and `*` forms): exactly n standbys show sync_state 'sync', and every
 *   one of them has written / flushed / applied past the commit's end;
 * - ANY n: at least n standbys show 'quorum', and at least n of those have it.
 * "Has it" reads the standby's own WAL positions (what it reported can only be behind them); a
 * standby that is down, on another timeline now, or whose WAL was cut back at a flipped byte since
 * cannot be read and counts as having it (its replies came from what it had then). With no synchronous standby named, nothing waits.
 */
import { formatLsn, parseLsn, type Lsn } from '../../wal/lsn.ts';
import type { ServerNode } from '../../server/node.ts';
import { parseSynchronousStandbyNames } from '../../primary/sync-standby-names.ts';
import type { SimCluster } from '../cluster.ts';

export function checkSyncState(cluster: SimCluster, primary: ServerNode, endLsn: Lsn): void {
  const level = primary.config.synchronousCommit;
  if (level !== 'remote_write' && level !== 'on' && level !== 'remote_apply') return;
  const cfg = parseSynchronousStandbyNames(primary.config.synchronousStandbyNames);
  if (cfg === null) return;
  const rows = primary.walsenders.rows();
  const want = cfg.method === 'quorum' ? 'quorum' : 'sync';
  const released = rows.filter((r) => r.sync_state === want);
  const has = (name: string): boolean => {
    const h = cluster.hosts.find((x) => x.applicationName === name.toLowerCase());
    const n = h?.node ?? null;
    // Not readable: down, on another timeline, or its WAL was cut back at a flipped byte since
    // (its earlier process confirmed the WAL before the damage; seed 3700021682).
    if (
      h === undefined ||
      n === null ||
      !n.inRecovery ||
      n.timeline !== primary.timeline ||
      h.corruptLsn !== null
    )
      return true;
    const pos =
      level === 'remote_write'
        ? n.wal.writeLsn
        : level === 'on'
          ? n.wal.flushLsn
          : (n.startup?.replayEndLsn ?? 0);
    return pos >= endLsn;
  };
  const holding = released.filter((r) => has(r.application_name));
  // The table is built only for a violation: this runs at every acknowledged commit.
  const table = () =>
    rows
      .map(
        (r) =>
          `${r.application_name} ${r.sync_state} flush ${r.flush_lsn ?? '-'}` +
          (r.flush_lsn !== null && parseLsn(r.flush_lsn) < endLsn ? ' (behind)' : ''),
      )
      .join('; ');
  const fail = (why: string) =>
    cluster.violation(
      `commit ending at ${formatLsn(endLsn)} acknowledged under synchronous_commit=${level}, synchronous_standby_names '${primary.config.synchronousStandbyNames}': ${why} [pg_stat_replication: ${table()}]`,
    );
  if (cfg.method === 'priority') {
    if (released.length !== cfg.numSync)
      fail(
        `${released.length} standbys show sync_state 'sync', FIRST ${cfg.numSync} needs ${cfg.numSync}`,
      );
    else if (holding.length < released.length)
      fail(`a 'sync' standby lacks it (${holding.length} of ${released.length} have it)`);
  } else if (released.length < cfg.numSync || holding.length < cfg.numSync) {
    fail(
      `${holding.length} of the ${released.length} 'quorum' standbys have it, ANY ${cfg.numSync} needs ${cfg.numSync}`,
    );
  }
}
