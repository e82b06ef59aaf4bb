import { describe, expect, it } from 'vitest';
import { diffCounters } from '../../common/counters.ts';
import { emptyDropCounters } from '../../storage/drop.ts';

describe('diffCounters', () => {
  it('subtracts field by field, arrays element by element, keeping later’s shape and zeros', () => {
    const a = { n: 3, xs: [1, 2, 3], m: { p: 1, q: 2 } };
    const b = { n: 10, xs: [1, 5, 4], m: { p: 1, q: 7 } };
    expect(diffCounters(a, b)).toEqual({ n: 7, xs: [0, 3, 1], m: { p: 0, q: 5 } });
  });

  it('counts a key the earlier snapshot lacks from zero', () => {
    const a: Partial<Record<'x' | 'y', number>> = { x: 1 };
    expect(diffCounters(a, { x: 4, y: 2 })).toEqual({ x: 3, y: 2 });
  });

  it('a drop-counter span: a snapshot minus itself is the empty record', () => {
    const c = emptyDropCounters();
    c.drops['full-scan'] = 4;
    c.scannedByMatcher.bsearch = 100;
    c.headerLocksByPath['cached-lookup'] = 7;
    expect(diffCounters(c, structuredClone(c))).toEqual(emptyDropCounters());
    const later = structuredClone(c);
    later.drops['full-scan'] = 6;
    expect(diffCounters(c, later).drops).toEqual({
      'full-scan': 2,
      'cached-lookup': 0,
      'rel-list': 0,
      'recovery-hash': 0,
    });
  });

  it('refuses mismatched shapes', () => {
    expect(() => diffCounters<unknown>({ a: [1] }, { a: 2 })).toThrow(/a number against/);
    expect(() => diffCounters<unknown>({ a: 'x' }, { a: 'y' })).toThrow(/not a counter record/);
  });
});
