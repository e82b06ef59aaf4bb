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
      if (!sameNumbers(pa, pb))
        return `table ${name} block ${blk}: primary ${pageText(pa)}, standby ${pageText(pb)}`;
    }
  }
  return null;
}

/** Numbers per merged run in `pageTuples`: offset, count, unused (0/1), value, xmin, xmax. */
const RUN_FIELDS = 6;

/**
 * A page's line pointers, consecutive runs of like tuples merged, as RUN_FIELDS numbers a run (an
 * unused run's value, xmin and xmax are 0: they are not compared). Numbers, not text: every page
 * of every table is compared at each comparison, and the text is needed only for a difference.
 */
function pageTuples(st: NodeStorage, rel: RelFileNumber, blk: number): number[] {
  const out: number[] = [];
  for (const r of st.heap.pageRuns(rel, blk)) {
    const n = out.length;
    if (
      n > 0 &&
      out[n - 6]! + out[n - 5]! === r.offset &&
      out[n - 4] === (r.unused ? 1 : 0) &&
      (r.unused ||
        (out[n - 3]! + out[n - 5]! === r.firstValue &&
          out[n - 2] === r.xmin &&
          out[n - 1] === r.xmax))
    ) {
      out[n - 5]! += r.count;
      continue;
    }
    if (r.unused) out.push(r.offset, r.count, 1, 0, 0, 0);
    else out.push(r.offset, r.count, 0, r.firstValue, r.xmin, r.xmax);
  }
  return out;
}

function sameNumbers(a: readonly number[], b: readonly number[]): boolean {
  if (a.length !== b.length) return false;
  for (let i = 0; i < a.length; i++) if (a[i] !== b[i]) return false;
  return true;
}

/** `pageTuples` as text: `offset+count v<value> <xmin>/<xmax>` or `offset+count unused` a run. */
function pageText(runs: readonly number[]): string {
  const out: string[] = [];
  for (let i = 0; i < runs.length; i += RUN_FIELDS) {
    const [offset, count, unused, value, xmin, xmax] = runs.slice(i, i + RUN_FIELDS);
    out.push(`${offset}+${count}${unused === 1 ? ' unused' : ` v${value} ${xmin}/${xmax}`}`);
  }
  return out.join(', ');
}
