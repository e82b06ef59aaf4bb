/**
 * What the torture runner expects the database to hold: per table a multiset of integer values as
 * closed intervals, updated only when a statement is acknowledged. Counting rows of a table or
 * of a predicate is exact, so the nodes can be compared with it after every convergence.
 */
export type Interval = [lo: number, hi: number];

export class Model {
  readonly tables = new Map<string, Interval[]>();

  create(name: string): void {
    this.tables.set(name, []);
  }

  insert(name: string, lo: number, hi: number): void {
    this.tables.get(name)!.push([lo, hi]);
  }

  /** DELETE FROM name WHERE c > k (op '>') or c < k (op '<'), or every row (op 'all'). */
  delete(name: string, op: '>' | '<' | 'all', k = 0): void {
    const next: Interval[] = [];
    if (op !== 'all') {
      for (const [lo, hi] of this.tables.get(name)!) {
        const a = op === '<' ? Math.max(lo, k) : lo;
        const b = op === '>' ? Math.min(hi, k) : hi;
        if (a <= b) next.push([a, b]);
      }
    }
    this.tables.set(name, next);
  }

  truncate(name: string): void {
    this.tables.set(name, []);
  }

  count(name: string): number {
    return this.tables.get(name)!.reduce((n, [lo, hi]) => n + hi - lo + 1, 0);
  }

  names(): string[] {
    return [...this.tables.keys()];
  }
}
