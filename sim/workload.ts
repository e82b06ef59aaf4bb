/**
 * The scenario's write statements: issued on the primary without waiting (several may be in
 * flight, as from several sessions); the ledger learns a statement's facts when it is
 * acknowledged, and a statement whose process dies first has an unknown outcome (dropped).
 */
import type { SynchronousCommit } from '../server/settings.ts';
import type { Pending, SimCluster } from './cluster.ts';
import type { Ledger } from './checkers/ledger.ts';

export class Workload {
  acknowledged = 0;
  readonly acknowledgedByLevel: Partial<Record<SynchronousCommit, number>> = {};
  /** Per table: the highest value an INSERT issued so far put into it. */
  private readonly maxValueIssued = new Map<string, number>();
  private issueSeq = 0;

  constructor(
    private readonly cluster: SimCluster,
    private readonly ledger: Ledger,
  ) {}

  /** Issue a write statement on the primary; the ledger learns its facts when it is acknowledged. */
  issue(sql: string): void {
    const c = this.cluster;
    const h = c.primary;
    const node = h.node;
    if (node === null) return;
    const seq = ++this.issueSeq;
    this.ledger.supersede(sql, seq, c.pending);
    const level = c.scenario.options.synchronousCommit;
    // The highest value issued into each table the statement names, before it (a TRUNCATE's or
    // DELETE's facts end there: later INSERTs into a table always use higher values).
    const maxBefore = new Map<string, number>();
    for (const m of sql.matchAll(/\b[a-z]\w*\d\b/g))
      maxBefore.set(m[0], this.maxValueIssued.get(m[0]) ?? 0);
    const ins = /^INSERT INTO (\w+) /.exec(sql);
    if (ins !== null) {
      let max = this.maxValueIssued.get(ins[1]!) ?? 0;
      for (const m of sql.slice(ins[0].length).matchAll(/(?<![a-z_])\d+/g))
        max = Math.max(max, Number(m[0]));
      this.maxValueIssued.set(ins[1]!, max);
    }
    const maxValue = (table: string) => maxBefore.get(table) ?? 0;
    const p: Pending = { seq, sql, host: h, owner: h.owner };
    c.pending.add(p);
    node.execute(sql).then(
      () => {
        if (!c.pending.delete(p)) return;
        this.acknowledged++;
        this.acknowledgedByLevel[level] = (this.acknowledgedByLevel[level] ?? 0) + 1;
        c.record(c.sched.now, 'sim', `ack ${sql}`);
        this.ledger.addFacts(
          sql,
          level,
          maxValue,
          seq,
          h.maxCommitEnd,
          c.copiesOf(h, h.maxCommitEnd),
        );
      },
      (e: unknown) => {
        if (!c.pending.delete(p)) return;
        c.record(c.sched.now, 'sim', `error ${sql}: ${(e as Error).message}`);
        c.expectedError(e, sql);
      },
    );
  }
}
