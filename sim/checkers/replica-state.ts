/**
 * SIM-11 (sim/README): after every restart and every failover — not only once the run has
 * converged — each standby's relations equal the primary's once it has replayed to the same LSN.
 *
 * When: a standby is due a comparison whenever its process or the primary's process is not the
 * pair it was last compared under (a start of either, a crash and restart, a promotion: a new
 * process incarnation or another primary host). It is compared at the first step boundary where
 * it is in recovery on the primary's timeline and has replayed to the primary's end of WAL (its
 * next record at or past the primary's insert LSN, every inserted record flushed): both then hold
 * the effects of exactly the same records. A standby still behind (paused, cut off, slow) stays
 * due until it catches up; the simulator keeps no past states of the primary to compare it
 * earlier. One not caught up before its next restart or failover is due again from there, and
 * SIM-4 compares every node at the end.
 *
 * What: the user tables' names and relfilenumbers (pg_class), each table's main-fork size (the
 * file's blocks), and its heap pages: every page's line pointers by offset, unused or holding a
 * tuple with its value, xmin and xmax. Runs of consecutive tuples are compared merged, so the same
 * tuples stored as one run or two (an insert logged in parts) are equal. Invisible tuples count:
 * a truncation that left dead tail pages behind differs here even where every visible row agrees.
 */
import { formatLsn } from '../../wal/lsn.ts';
import type { NodeStorage } from '../../storage/node-storage.ts';
import { MAIN_FORKNUM, type RelFileNumber } from '../../wal/records.ts';
import type { Host, SimCluster } from '../cluster.ts';

export class ReplicaStateChecker {
  /** Per standby host: the "standby process | primary process" pair it was last compared under. */
  private readonly comparedUnder = new Map<Host, string>();
  /** Comparisons made (SimResult.replicaComparisons). */
  comparisons = 0;

  constructor(private readonly cluster: SimCluster) {}

  check(where: string): void {
    const c = this.cluster;
    const p = c.primary.node;
    if (p === null || p.inRecovery || p.wal.flushLsn !== p.wal.insertLsn) return;
    for (const h of c.standbys) {
      const s = h.node;
      const pair = `${h.owner}|${c.primary.owner}`;
      if (s === null || !s.inRecovery || s.startup === null || this.comparedUnder.get(h) === pair)
        continue;
      if (s.timeline !== p.timeline || s.startup.nextLsn < p.wal.insertLsn) continue;
      this.comparedUnder.set(h, pair);
      this.comparisons++;
      const diff = storageDifference(p.storage, s.storage);
      if (diff !== null)
        c.violation(
          `${where}: ${c.twoNodes ? 'the standby' : `standby ${h.name}`} replayed to the primary's end of WAL ${formatLsn(p.wal.insertLsn)} (since its start or the last failover) but differs: ${diff}`,
        );
    }
  }
}

/** The first difference between two nodes' user relations, or null. */
export function storageDifference(a: NodeStorage, b: NodeStorage): string | null {
  const ta = JSON.stringify(a.catalog.tables());
  const tb = JSON.stringify(b.catalog.tables());
  if (ta !== tb) return `tables: primary ${ta}, standby ${tb}`;
  for (const [name, rel] of a.catalog.tables()) {
    const size = (st: NodeStorage) =>
      st.smgr.exists(rel, MAIN_FORKNUM) ? st.smgr.diskNblocks(rel, MAIN_FORKNUM) : null;
    if (size(a) !== size(b))
      return `table ${name}: main fork of ${size(a)} blocks on the primary, ${size(b)} on the standby`;
    const pages = (st: NodeStorage) => (st.heap.hasRelation(rel) ? st.heap.nblocks(rel) : null);
    if (pages(a) !== pages(b))
      return `table ${name}: ${pages(a)} heap pages on the primary, ${pages(b)} on the standby`;
    for (let blk = 0; blk < (pages(a) ?? 0); blk++) {
      const pa = pageTuples(a, rel, blk);
      const pb = pageTuples(b, rel, blk);
      if (pa !== pb) return `table ${name} block ${blk}: primary ${pa}, standby ${pb}`;
    }
  }
  return null;
}

/** A page's line pointers as text, consecutive runs of like tuples merged. */
function pageTuples(st: NodeStorage, rel: RelFileNumber, blk: number): string {
  const out: string[] = [];
  let cur: { offset: number; count: number; unused: boolean; value: number; xs: string } | null =
    null;
  const flush = () => {
    if (cur !== null)
      out.push(`${cur.offset}+${cur.count}${cur.unused ? ' unused' : ` v${cur.value} ${cur.xs}`}`);
  };
  for (const r of st.heap.pageRuns(rel, blk)) {
    const xs = `${r.xmin}/${r.xmax}`;
    if (
      cur !== null &&
      cur.offset + cur.count === r.offset &&
      cur.unused === r.unused &&
      (r.unused || (cur.value + cur.count === r.firstValue && cur.xs === xs))
    ) {
      cur.count += r.count;
      continue;
    }
    flush();
    cur = { offset: r.offset, count: r.count, unused: r.unused, value: r.firstValue, xs };
  }
  flush();
  return out.join(', ');
}
