/**
 * The buffer pool replaces pages like PostgreSQL's freelist + clock sweep and keeps descriptors and
 * mapping table in agreement. Method: small pools (16 buffers) driven step by step, checking the
 * chosen victim ids, usage counts, pins, counters and checkConsistency() after each scenario.
 */
import { describe, expect, it } from 'vitest';
import {
  BM_DIRTY,
  BM_MAX_USAGE_COUNT,
  BM_TAG_VALID,
  BM_VALID,
  BufferPool,
  FREENEXT_NOT_IN_LIST,
} from '../../storage/buffer-pool.ts';

const REL = 16384;
const N = 16;

function fill(pool: BufferPool, rel = REL): void {
  for (let b = 0; b < pool.nBuffers; b++) pool.accessBlock(rel, 0, b);
}

describe('BufferPool', () => {
  it('starts with every buffer free and hands them out in id order', () => {
    const pool = new BufferPool(N);
    pool.checkConsistency();
    for (let b = 0; b < N; b++) expect(pool.accessBlock(REL, 0, b)).toBe(b);
    expect(pool.firstFreeBuffer).toBe(-1);
    expect(pool.counters).toMatchObject({ hits: 0, misses: N, evictions: 0 });
    pool.checkConsistency();
  });

  it('counts a hit and raises the usage count up to BM_MAX_USAGE_COUNT', () => {
    const pool = new BufferPool(N);
    const id = pool.accessBlock(REL, 0, 3);
    expect(pool.usageCount[id]).toBe(1);
    for (let i = 0; i < 10; i++) expect(pool.accessBlock(REL, 0, 3)).toBe(id);
    expect(pool.usageCount[id]).toBe(BM_MAX_USAGE_COUNT);
    expect(pool.counters.hits).toBe(10);
    expect(pool.flags[id]).toBe(pool.flags[id]! | BM_TAG_VALID | BM_VALID);
  });

  it('clock sweep decrements usage counts and takes the first buffer that reaches zero', () => {
    const pool = new BufferPool(N);
    fill(pool); // every buffer usage 1
    pool.accessBlock(REL, 0, 0); // buffer 0 usage 2
    // Sweep 1: all usage 1 -> 0, buffer 0 -> 1; sweep 2 reaches buffer 0 (now 1 -> 0), then buffer 1 is the victim.
    const id = pool.accessBlock(REL + 1, 0, 0);
    expect(id).toBe(1);
    expect(pool.usageCount[0]).toBe(0);
    expect(pool.completePasses).toBe(1);
    expect(pool.counters.evictions).toBe(1);
    expect(pool.lookup(REL, 0, 1)).toBe(-1);
    expect(pool.lookup(REL, 0, 0)).toBe(0);
    pool.checkConsistency();
  });

  it('clock sweep skips pinned buffers', () => {
    const pool = new BufferPool(N);
    fill(pool);
    const pinned = pool.readBuffer(REL, 0, 0); // pinned, usage 2
    expect(pinned).toBe(0);
    for (let k = 0; k < 40; k++) {
      const id = pool.accessBlock(REL + 1, 0, k);
      expect(id).not.toBe(0);
    }
    expect(pool.lookup(REL, 0, 0)).toBe(0);
    pool.releaseBuffer(pinned);
    pool.checkConsistency();
  });

  it('raises "no unpinned buffers available" when every buffer is pinned', () => {
    const pool = new BufferPool(N);
    for (let b = 0; b < N; b++) pool.readBuffer(REL, 0, b);
    expect(() => pool.readBuffer(REL, 0, N)).toThrow(/no unpinned buffers available/);
  });

  it('writes a dirty victim out before reuse and reports it through onWriteDirty', () => {
    const written: string[] = [];
    const pool = new BufferPool(N, { onWriteDirty: (r, f, b) => written.push(`${r}/${f}/${b}`) });
    for (let b = 0; b < N; b++) {
      const id = pool.readBuffer(REL, 0, b);
      if (b === 0) pool.markDirty(id);
      pool.releaseBuffer(id);
    }
    pool.accessBlock(REL, 0, N); // evicts buffer 0 after one full sweep
    expect(written).toEqual([`${REL}/0/0`]);
    expect(pool.counters.writes).toBe(1);
    expect(pool.flags[0]! & BM_DIRTY).toBe(0);
  });

  it('flushAll writes every dirty buffer once and clears BM_DIRTY', () => {
    const pool = new BufferPool(N);
    for (const b of [1, 4, 9]) {
      const id = pool.readBuffer(REL, 0, b);
      pool.markDirty(id);
      pool.releaseBuffer(id);
    }
    expect(pool.flushAll()).toBe(3);
    expect(pool.flushAll()).toBe(0);
    expect(pool.counters.writes).toBe(3);
  });

  it('invalidate clears the tag, discards dirty data unwritten and puts the buffer at the freelist head', () => {
    const pool = new BufferPool(N);
    fill(pool);
    const id = pool.readBuffer(REL, 0, 5);
    pool.markDirty(id);
    expect(() => pool.invalidate(id)).toThrow(/buffer is pinned in InvalidateBuffer/);
    pool.releaseBuffer(id);
    pool.invalidate(id);
    expect(pool.lookup(REL, 0, 5)).toBe(-1);
    expect(pool.tagRel[id]).toBe(0);
    expect(pool.flags[id]).toBe(0);
    expect(pool.counters).toMatchObject({ writes: 0, discardedDirty: 1, invalidations: 1 });
    expect(pool.firstFreeBuffer).toBe(id);
    pool.invalidate(id); // already free: stays listed once
    expect(pool.freeNext[id]).not.toBe(FREENEXT_NOT_IN_LIST);
    pool.checkConsistency();
    // The next miss takes the freed buffer, not a clock-sweep victim.
    expect(pool.accessBlock(REL + 1, 0, 0)).toBe(id);
    expect(pool.counters.sweepTicks).toBe(0);
    pool.checkConsistency();
  });

  it('refuses relfilenumber 0 so a free descriptor never matches a relation', () => {
    const pool = new BufferPool(N);
    expect(() => pool.readBuffer(0, 0, 0)).toThrow(/INV-BUF-3/);
  });

  it('bufferedBlocks lists tags sorted and filtered by relation', () => {
    const pool = new BufferPool(N);
    pool.accessBlock(REL + 1, 0, 2);
    pool.accessBlock(REL, 1, 0);
    pool.accessBlock(REL, 0, 7);
    expect(pool.bufferedBlocks().map((t) => [t.rel, t.fork, t.block])).toEqual([
      [REL, 0, 7],
      [REL, 1, 0],
      [REL + 1, 0, 2],
    ]);
    expect(pool.bufferedBlocks(REL + 1)).toHaveLength(1);
  });

  it('checkConsistency detects a descriptor that disagrees with the mapping table', () => {
    const pool = new BufferPool(N);
    pool.accessBlock(REL, 0, 1);
    pool.tagBlock[0] = 2; // corrupt
    expect(() => pool.checkConsistency()).toThrow(/INV-BUF-2/);
  });

  it('keeps bytes per buffer, mapping table included, at or below 32', () => {
    for (const n of [16, 16_384, 131_072, 1_000_000]) {
      const pool = new BufferPool(n);
      expect(pool.byteLength / n).toBeLessThanOrEqual(32);
    }
  });
});
