/**
 * A memo of a pure function by key, bounded: cleared when it holds `max` entries (a bound on
 * memory, not a tuning: each user meets far fewer keys in a run). A value is kept only once
 * `compute` returns; one that throws is computed, and throws, again next time.
 */
export class BoundedMemo<K, V> {
  private readonly values = new Map<K, V>();

  constructor(private readonly max: number) {}

  get(key: K, compute: (key: K) => V): V {
    let v = this.values.get(key);
    if (v === undefined) {
      v = compute(key);
      if (this.values.size >= this.max) this.values.clear();
      this.values.set(key, v);
    }
    return v;
  }
}
