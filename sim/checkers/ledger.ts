/**
 * SIM-1, the ledger (sim/README): every acknowledged statement leaves facts (a row present, rows
 * below a value gone, a table present or gone); a check runs a SELECT per fact on a node and
 * decides, per fact that does not hold, whether its level promised it (a lost commit, a
 * violation), made no promise (an allowed loss) or it fell to media corruption (counted apart).
 * A statement that may remove what earlier facts promise supersedes them.
 */
import { isWalsimError } from '../../common/errors.ts';
import { formatLsn, type Lsn } from '../../wal/lsn.ts';
import { parseStatement } from '../../sql/parser.ts';
import type { ServerNode } from '../../server/node.ts';
import type { SynchronousCommit } from '../../server/settings.ts';
import type { AckCopies, Copies, Host, Pending, SimCluster } from '../cluster.ts';
import type { MemDisk } from '../mem-disk.ts';

/**
 * PostgreSQL's promise for synchronous_commit=off (walwriter.c): an asynchronously committed
 * transaction reaches disk "within a knowable time --- at most three times the wal_writer_delay
 * cycle time" (200 ms by default), because the WAL writer flushes every cycle (XLogBackgroundFlush:
 * whole pages, and everything once a cycle has passed). The promise assumes the writer's write and
 * fsync succeed: a full pg_wal makes that write fail (a PANIC: the records are gone) and a slow
 * disk stretches each flush, so within that window neither holds (RELIABILITY.md, seed 777790).
 */
export const ASYNC_FLUSH_MS = 3 * 200;

/** Whether the ledger may lose a fact at a check. */
export type Verdict = 'must' | 'may' | 'corruption' | 'choice';

/** One checkable consequence of an acknowledged statement. */
export interface Fact {
  kind: 'present' | 'absentBelow' | 'absentAbove' | 'tableExists' | 'tableGone';
  table: string;
  value: number;
  /** absentAbove: no row with value < c ≤ upTo (the highest value issued before the DELETE). */
  upTo?: number;
  level: SynchronousCommit;
  ackAt: number;
  /**
   * Upper bound on the end LSN of its commit record: the highest commit end the acknowledging
   * process had reported when the statement returned (exact unless commits overlapped).
   */
  commitEndMax: Lsn;
  /** Known to be on the primary's disk (survived a check there). */
  durableOnPrimary: boolean;
  /** Known to be on the standby's disk too (survived a failover or came with a base backup). */
  onStandby: boolean;
  /**
   * Several nodes: the machine disks known to hold it durably — the standbys whose flush LSN
   * was past its commit when it was acknowledged, every node it held on at a check, and base
   * backups of those — and (remote_write) the standbys that had written it.
   */
  copies: Copies;
  /**
   * A copy in `copies` was destroyed by a byte flipped in that standby's WAL before the commit
   * (`Ledger.copiesDamaged`): a loss for want of a copy is then media corruption's.
   */
  copyCorrupted: boolean;
  sql: string;
  /**
   * The SELECTs that check it, built once: a fact is checked at every restart and failover, and
   * the same string each time is hashed once by the parser's cache of statements by text.
   */
  queries: readonly string[];
}

/** The `SELECT count(*)` texts `holds` runs for a fact (absentAbove: two). */
function queriesOf(kind: Fact['kind'], table: string, value: number, upTo?: number): string[] {
  const from = `SELECT count(*) FROM ${table}`;
  switch (kind) {
    case 'present':
      return [`${from} WHERE c = ${value}`];
    case 'absentBelow':
      return [`${from} WHERE c < ${value}`];
    case 'absentAbove':
      return [`${from} WHERE c > ${value}`, `${from} WHERE c > ${upTo ?? value}`];
    case 'tableExists':
    case 'tableGone':
      return [from];
  }
}

/** After a crash of `h` (the primary) at `crashAt`, must the fact hold on its restarted node? */
export function guaranteedAfterPrimaryCrash(f: Fact, crashAt: number, h: Host): boolean {
  if (f.durableOnPrimary || f.level !== 'off') return true;
  const flushedBy = f.ackAt + ASYNC_FLUSH_MS;
  return flushedBy <= crashAt && !h.walTrouble.some((w) => w.from < flushedBy && w.to > f.ackAt);
}

/** `promoted` is the host that was the standby until this failover. */
export function guaranteedAfterFailover(f: Fact, promoted: Host): Verdict {
  if (f.onStandby) return 'must';
  // Corrupt WAL the standby had not yet refetched: promotion ends recovery at the bad record, so
  // commits at or past it are lost (RELIABILITY.md: "Corrupt WAL on the standby's disk") — to the
  // corruption, not to a broken promise; commits before it keep their level's guarantee.
  if (promoted.corruptLsn !== null && f.commitEndMax > promoted.corruptLsn) return 'corruption';
  if (f.level === 'on' || f.level === 'remote_apply') return 'must';
  // remote_write: written to the standby's OS, so lost only if that machine lost power since.
  return f.level === 'remote_write' && promoted.lastPowerLossAt < f.ackAt ? 'must' : 'may';
}

/**
 * Several nodes: after a failover onto `promoted`, a fact must hold if the promoted machine holds
 * it (flushed there, or written there under remote_write without a power loss since), or if a
 * machine that holds it is `covered` — a live standby on the promoted node's timeline that had
 * flushed no further (its WAL is a prefix of the promoted node's). Otherwise the operator
 * promoted a standby the promise did not cover (behind, cascaded, asynchronous, or every copy
 * was lost with the nodes that failed): its loss is the operator's choice, not a broken promise.
 */
export function guaranteedAfterFailoverOnto(
  f: Fact,
  promoted: Host,
  covered: ReadonlySet<MemDisk>,
): Verdict {
  // The promoted machine's own copy is gone if the flipped byte lies before its commit: corruption
  // first (seed 3700049330: flushed there at the acknowledgement, destroyed by the flip).
  if (promoted.corruptLsn !== null && f.commitEndMax > promoted.corruptLsn) return 'corruption';
  if (f.copies.flushed.has(promoted.disk)) return 'must';
  if (f.copies.written.has(promoted.disk) && promoted.lastPowerLossAt < f.ackAt) return 'must';
  for (const d of f.copies.flushed) if (covered.has(d)) return 'must';
  if (f.level === 'off' || f.level === 'local') return 'may';
  // A synchronous level's commit the promoted node lacks: a copy the promise made was destroyed
  // by media corruption (seed 2900061853), or else the operator's choice lost it.
  return f.copyCorrupted ? 'corruption' : 'choice';
}

/**
 * Would `sql` (a count(*)) fail with undefined_table on `node`? Read from the catalog as
 * executeRead looks the table up, in the same synchronous stretch as that execute would run, so
 * without building the error: the facts of dropped tables are asked at every check, and the
 * errors' stack captures were 1.5 % of a run. A node shutting down refuses the statement before
 * the lookup: that case still goes through execute.
 */
function isGone(node: ServerNode, sql: string): boolean {
  const stmt = parseStatement(sql);
  return (
    stmt.type === 'select_count' &&
    node.shuttingDown === null &&
    node.storage.catalog.lookup(stmt.name) === undefined
  );
}

async function holds(node: ServerNode, f: Fact): Promise<boolean> {
  const count = async (query: number): Promise<number | null> => {
    const sql = f.queries[query]!;
    if (isGone(node, sql)) {
      await null; // the one microtask turn of awaiting the statement's rejection, as before
      return null;
    }
    try {
      const r = await node.execute(sql);
      return Number(r.rows[0]!.count);
    } catch (e) {
      if (isWalsimError(e) && e.kind === 'undefined_table') return null;
      throw e;
    }
  };
  switch (f.kind) {
    case 'present':
      return ((await count(0)) ?? 0) >= 1;
    case 'absentBelow':
      return ((await count(0)) ?? 0) === 0;
    case 'absentAbove': {
      const above = (await count(0)) ?? 0;
      return above === 0 || above === ((await count(1)) ?? 0);
    }
    case 'tableExists':
      return (await count(0)) !== null;
    case 'tableGone':
      return (await count(0)) === null;
  }
}

/** TRUNCATE of one table or a list (`TRUNCATE a, b, c`: one transaction). */
const TRUNCATE_LIST = /^TRUNCATE (\w+(?:, \w+)*)$/;
/** DROP TABLE a, b, …: every table gone (one transaction). */
const DROP_LIST = /^DROP TABLE (\w+(?:, \w+)*)$/;

export class Ledger {
  private readonly facts: Fact[] = [];
  /** Statements issued that may remove what earlier facts promise, by issue order. */
  private supersessions: Array<{ seq: number; covers: (f: Fact) => boolean }> = [];
  lost = 0;
  lostAllowed = 0;
  lostToCorruption = 0;
  /**
   * Several nodes: synchronous commits missing on a promoted standby the promise did not cover
   * (the operator picked one behind another, or every copy went down with the failed nodes).
   */
  lostToChoice = 0;

  constructor(private readonly cluster: SimCluster) {}

  /**
   * Check every fact on `h`: a guaranteed fact ('must', or `true`) that does not hold is a lost
   * acknowledged commit (violation); one that was not guaranteed ('may', `false`) is dropped from
   * the ledger (allowed loss); one destroyed by media corruption ('corruption') too, counted apart.
   */
  async check(h: Host, when: string, guaranteed: (f: Fact) => boolean | Verdict): Promise<void> {
    const node = h.node;
    if (node === null) return;
    for (let i = this.facts.length - 1; i >= 0; i--) {
      const f = this.facts[i]!;
      if (await holds(node, f)) {
        f.durableOnPrimary = true;
        if (when === 'failover') f.onStandby = true;
        f.copies.flushed.add(h.disk);
        continue;
      }
      const v = guaranteed(f);
      if (v === true || v === 'must') {
        this.lost++;
        this.cluster.violation(
          `${when}: acknowledged commit lost on ${h.name} (synchronous_commit=${f.level}, acknowledged at t=${f.ackAt} ms): ${f.sql} [${f.kind} ${f.table} ${f.value}]`,
        );
      } else if (v === 'corruption') {
        this.lostToCorruption++;
        this.cluster.record(
          this.cluster.sched.now,
          'sim',
          `${when}: lost to WAL corruption on ${h.name} (commit ends at or before ${formatLsn(f.commitEndMax)}): ${f.sql}`,
        );
      } else {
        this.lostAllowed++;
        if (v === 'choice') {
          this.lostToChoice++;
          this.cluster.record(
            this.cluster.sched.now,
            'sim',
            `${when}: lost with the operator's choice of ${h.name} (synchronous_commit=${f.level}, no copy it covers): ${f.sql}`,
          );
        }
      }
      this.facts.splice(i, 1);
    }
  }

  /**
   * A byte flipped at `lsn` in the WAL on `disk` (a standby's): its restart ends local WAL at the
   * damaged record, so its copies of commits that may end past it are gone — media corruption,
   * outside every level's promise (seed 2900061853: the one synchronous standby's copy of a
   * CREATE TABLE destroyed, then the primary lost). Streaming may fetch them again; the ledger
   * does not count on it (a later check or acknowledgement adds the copy back).
   */
  copiesDamaged(disk: MemDisk, lsn: Lsn): void {
    for (const f of this.facts) {
      if (f.commitEndMax <= lsn) continue;
      const flushed = f.copies.flushed.delete(disk);
      const written = f.copies.written.delete(disk);
      if (flushed || written) f.copyCorrupted = true;
    }
  }

  /** A fresh base backup of the primary: what is durable there is on the new standby too. */
  backupTaken(src: Host, dst: Host): void {
    for (const f of this.facts) {
      f.onStandby = f.durableOnPrimary;
      if (f.durableOnPrimary || f.copies.flushed.has(src.disk)) f.copies.flushed.add(dst.disk);
    }
  }

  /**
   * A statement that may remove what earlier facts promise: those facts are no longer checked —
   * including facts of statements issued before it but acknowledged after it was issued.
   */
  supersede(sql: string, seq: number, pending: ReadonlySet<Pending>): void {
    let m: RegExpExecArray | null;
    const drop = (pred: (f: Fact) => boolean) => {
      for (let i = this.facts.length - 1; i >= 0; i--)
        if (pred(this.facts[i]!)) this.facts.splice(i, 1);
      this.supersessions.push({ seq, covers: pred });
      let oldest = seq;
      for (const p of pending) oldest = Math.min(oldest, p.seq);
      // Kept while a statement issued before them is pending (one waiting for an unreachable
      // synchronous standby may wait for the rest of the run): rebuilt only when one goes. The
      // list is in issue order (`seq` grows), so the first is the oldest.
      if (this.supersessions[0]!.seq < oldest)
        this.supersessions = this.supersessions.filter((x) => x.seq >= oldest);
    };
    if ((m = /^DELETE FROM (\w+) WHERE c < (\d+)$/.exec(sql))) {
      const [t, n] = [m[1]!, Number(m[2])];
      drop((f) => f.table === t && f.kind === 'present' && f.value < n);
    } else if ((m = /^DELETE FROM (\w+) WHERE c > (\d+)$/.exec(sql))) {
      const [t, n] = [m[1]!, Number(m[2])];
      drop((f) => f.table === t && f.kind === 'present' && f.value > n);
    } else if ((m = TRUNCATE_LIST.exec(sql))) {
      const ts = new Set(m[1]!.split(', '));
      drop((f) => ts.has(f.table) && f.kind === 'present');
    } else if ((m = DROP_LIST.exec(sql))) {
      const ts = new Set(m[1]!.split(', '));
      drop((f) => ts.has(f.table) && (f.kind === 'present' || f.kind === 'tableExists'));
    }
  }

  /** Whether a statement issued after `seq` superseded `f` (the list is in issue order). */
  private supersededAfter(seq: number, f: Fact): boolean {
    const list = this.supersessions;
    for (let i = list.length - 1; i >= 0 && list[i]!.seq > seq; i--)
      if (list[i]!.covers(f)) return true;
    return false;
  }

  /** The facts an acknowledged statement leaves, unless a later-issued statement superseded them. */
  addFacts(
    sql: string,
    level: SynchronousCommit,
    maxValueBefore: (table: string) => number,
    seq: number,
    commitEndMax: Lsn,
    copies: AckCopies = { flushed: new Set(), written: new Set(), damaged: false },
  ): void {
    const fact = (kind: Fact['kind'], table: string, value = 0, upTo?: number) => {
      const f: Fact = {
        kind,
        table,
        value,
        ...(upTo === undefined ? {} : { upTo }),
        level,
        ackAt: this.cluster.sched.now,
        commitEndMax,
        durableOnPrimary: false,
        onStandby: false,
        copies: { flushed: new Set(copies.flushed), written: new Set(copies.written) },
        copyCorrupted: copies.damaged,
        sql,
        queries: queriesOf(kind, table, value, upTo),
      };
      if (!this.supersededAfter(seq, f)) this.facts.push(f);
    };
    let m: RegExpExecArray | null;
    if ((m = /^CREATE TABLE (\w+)/.exec(sql))) fact('tableExists', m[1]!);
    else if (
      (m = /^INSERT INTO (\w+) (?:VALUES \((\d+)\)|SELECT generate_series\((\d+),)/.exec(sql))
    )
      fact('present', m[1]!, Number(m[2] ?? m[3]));
    else if ((m = /^DELETE FROM (\w+) WHERE c < (\d+)$/.exec(sql)))
      fact('absentBelow', m[1]!, Number(m[2]));
    else if ((m = /^DELETE FROM (\w+) WHERE c > (\d+)$/.exec(sql)))
      fact('absentAbove', m[1]!, Number(m[2]), maxValueBefore(m[1]!));
    else if ((m = TRUNCATE_LIST.exec(sql)))
      for (const t of m[1]!.split(', ')) fact('absentBelow', t, maxValueBefore(t) + 1);
    else if ((m = DROP_LIST.exec(sql))) for (const t of m[1]!.split(', ')) fact('tableGone', t);
  }
}
