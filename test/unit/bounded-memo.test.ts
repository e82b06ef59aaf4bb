/**
 * BoundedMemo (common/bounded-memo.ts): computes a key once, keeps at most `max` entries (cleared
 * when full), and keeps nothing for a computation that throws.
 */
import { describe, expect, it } from 'vitest';
import { BoundedMemo } from '../../common/bounded-memo.ts';

describe('BoundedMemo', () => {
  it('computes each key once while it is kept', () => {
    const memo = new BoundedMemo<string, number>(10);
    let calls = 0;
    const f = (k: string) => (calls++, k.length);
    expect(memo.get('abc', f)).toBe(3);
    expect(memo.get('abc', f)).toBe(3);
    expect(calls).toBe(1);
  });

  it('is cleared when full: the old keys are computed again', () => {
    const memo = new BoundedMemo<number, number>(2);
    const seen: number[] = [];
    const f = (k: number) => (seen.push(k), k * 2);
    memo.get(1, f);
    memo.get(2, f);
    memo.get(3, f); // full: cleared, then 3 kept
    memo.get(3, f);
    memo.get(1, f);
    expect(seen).toEqual([1, 2, 3, 1]);
  });

  it('keeps nothing for a computation that throws', () => {
    const memo = new BoundedMemo<string, number>(4);
    let calls = 0;
    const bad = () => {
      calls++;
      throw new Error('bad input');
    };
    expect(() => memo.get('x', bad)).toThrow('bad input');
    expect(() => memo.get('x', bad)).toThrow('bad input');
    expect(calls).toBe(2);
  });
});
