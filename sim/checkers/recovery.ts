/**
 * SIM-1b (sim/README): crash recovery after a byte flipped in the primary's WAL replays nothing at
 * or past the damaged record — PostgreSQL's ReadRecord takes the first invalid record (a CRC that
 * fails) for the end of WAL, so the restarted primary's WAL ends where the damage begins. Checked
 * at every primary WAL corruption a seed draws, on the restarted primary's start-up report.
 */
import { formatLsn, parseLsn, type Lsn } from '../../wal/lsn.ts';
import type { Host, SimCluster } from '../cluster.ts';

/** `h` restarted after the record at `bad` was damaged: its crash recovery must end before it. */
export function checkRecoveryEnd(cluster: SimCluster, h: Host, bad: Lsn): void {
  const p = h.node;
  if (p === null) return;
  if (parseLsn(p.startupReplay.toLsn) > bad) {
    cluster.violation(
      `${h.name}: crash recovery replayed to ${p.startupReplay.toLsn}, past the corrupt record at ${formatLsn(bad)}`,
    );
  }
}
