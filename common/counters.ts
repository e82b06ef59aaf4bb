/**
 * One generic difference of two snapshots of a counter record (nested plain objects and arrays of
 * numbers): a span's counters are `diffCounters(earlier, later)`. Every key of `later` is kept,
 * zeros included, so the result has `later`'s shape; a key `earlier` lacks counts from 0. And the
 * sum of two spans' counters, `addCounters` (the exporter sums its LSN windows' counts).
 *
 * Entry points: `diffCounters`, `addCounters`. (Typed `<T>` rather than over an index signature so that counter
 * interfaces pass as they are; a field that is neither a number, an array of numbers nor a record
 * of those fails the assertion.)
 */
import { assert } from './assert.ts';

type Counters = number | readonly number[] | { readonly [k: string]: unknown };

/** `later` − `earlier`, field by field (arrays element by element). Both must be counters. */
export function diffCounters<T>(earlier: T | undefined, later: T): T {
  return diffAny(earlier as Counters | undefined, later as Counters) as T;
}

function diffAny(earlier: Counters | undefined, later: Counters): Counters {
  if (typeof later === 'number') {
    const a = earlier ?? 0;
    assert(typeof a === 'number', 'diffCounters: a number against a non-number');
    return later - a;
  }
  if (Array.isArray(later)) {
    const a = (earlier ?? []) as readonly number[];
    assert(Array.isArray(a), 'diffCounters: an array against a non-array');
    return later.map((v: number, i: number) => {
      assert(typeof v === 'number', 'diffCounters: an array element that is not a number');
      return v - (a[i] ?? 0);
    });
  }
  assert(typeof later === 'object' && later !== null, 'diffCounters: not a counter record');
  const a = (earlier ?? {}) as { readonly [k: string]: unknown };
  assert(typeof a === 'object' && !Array.isArray(a), 'diffCounters: a record against a non-record');
  const out: { [k: string]: Counters } = {};
  for (const [k, v] of Object.entries(later)) {
    if (v !== undefined) out[k] = diffAny(a[k] as Counters | undefined, v as Counters);
  }
  return out;
}

/** `a` + `b`, field by field (arrays element by element; a key either lacks counts from 0). */
export function addCounters<T>(a: T, b: T): T {
  return addAny(a as Counters | undefined, b as Counters | undefined) as T;
}

function addAny(a: Counters | undefined, b: Counters | undefined): Counters {
  const x = a ?? b!;
  if (typeof x === 'number') return ((a as number | undefined) ?? 0) + ((b as number) ?? 0);
  if (Array.isArray(x)) {
    const p = (a ?? []) as readonly number[];
    const q = (b ?? []) as readonly number[];
    return Array.from(
      { length: Math.max(p.length, q.length) },
      (_, i) => (p[i] ?? 0) + (q[i] ?? 0),
    );
  }
  assert(typeof x === 'object' && x !== null, 'addCounters: not a counter record');
  const p = (a ?? {}) as { readonly [k: string]: unknown };
  const q = (b ?? {}) as { readonly [k: string]: unknown };
  const out: { [k: string]: Counters } = {};
  for (const k of new Set([...Object.keys(p), ...Object.keys(q)])) {
    if (p[k] !== undefined || q[k] !== undefined)
      out[k] = addAny(p[k] as Counters | undefined, q[k] as Counters | undefined);
  }
  return out;
}
