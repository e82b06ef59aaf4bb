/**
 * Stepped drops (what the startup process runs so it can answer requests during a long drop) give
 * the same result as one uninterrupted pass, including buffers that sit in different scan chunks.
 * Method: run the stepped scans with a small chunk against the one-pass scan on twin pools.
 */
import { describe, expect, it } from 'vitest';
import { BufferPool } from '../../storage/buffer-pool.ts';
import { StorageManager } from '../../storage/smgr.ts';
import {
  fullScanDropRelFileNodeBuffersSteps,
  fullScanDropRelsAllBuffersSteps,
  fullScanDropRelFileNodeBuffers,
  fullScanDropRelsAllBuffers,
  HEADER_LOCKS_PER_STEP,
} from '../../storage/drop-full-scan.ts';
import { LOOKUP_CHUNK_PROBES } from '../../storage/drop-cached-lookup.ts';
import { dropRelFileNodeBuffersSteps } from '../../storage/drop.ts';
import { MAIN_FORKNUM } from '../../wal/records.ts';
import { drainSteps } from '../helpers/storage.ts';

/** A pool whose buffers interleave relations 16384..16386 (so each chunk holds some of each). */
function twinPool(): BufferPool {
  const pool = new BufferPool(3000);
  for (let b = 0; b < 1000; b++)
    for (let r = 0; r < 3; r++) pool.accessBlock(16384 + r, MAIN_FORKNUM, b);
  return pool;
}

describe('stepped drops', () => {
  it('a chunked single-relation scan yields between chunks and equals the one-pass scan', () => {
    const a = twinPool();
    const b = twinPool();
    const stepped = drainSteps(
      fullScanDropRelFileNodeBuffersSteps(a, 16385, [MAIN_FORKNUM], [400], 512),
    );
    const onePass = fullScanDropRelFileNodeBuffers(b, 16385, [MAIN_FORKNUM], [400]);
    expect(stepped.yields).toBe(5); // 3000 buffers in chunks of 512
    expect(stepped.value).toEqual(onePass);
    expect(onePass.invalidated).toBe(600);
    expect(a.bufferedBlocks()).toEqual(b.bufferedBlocks());
    a.checkConsistency();
  });

  it('a chunked many-relation scan equals the one-pass scan (linear and bsearch matchers)', () => {
    for (const rels of [[16385], [16384, 16386], Array.from({ length: 30 }, (_, i) => 16380 + i)]) {
      const a = twinPool();
      const b = twinPool();
      const stepped = drainSteps(fullScanDropRelsAllBuffersSteps(a, rels, 700));
      const onePass = fullScanDropRelsAllBuffers(b, rels);
      expect(stepped.yields).toBe(4);
      expect(stepped.value).toEqual(onePass);
      expect(a.bufferedBlocks()).toEqual(b.bufferedBlocks());
    }
  });

  it('a lookup drop of many blocks yields every chunk of probes and of invalidations', () => {
    const pool = new BufferPool(4 * LOOKUP_CHUNK_PROBES);
    const smgr = new StorageManager();
    smgr.inRecovery = true;
    smgr.create(16384, MAIN_FORKNUM);
    for (let blk = 0; blk < 3 * LOOKUP_CHUNK_PROBES; blk++) {
      smgr.extend(16384, MAIN_FORKNUM, blk);
      pool.accessBlock(16384, MAIN_FORKNUM, blk);
    }
    smgr.nblocks(16384, MAIN_FORKNUM); // cache the size, as replay does
    const { value, yields } = drainSteps(
      dropRelFileNodeBuffersSteps(pool, smgr, 16384, [MAIN_FORKNUM], [0], {
        strategy: 'cached-lookup',
        thresholdDivisor: 32,
        forceOptimized: true,
      }),
    );
    expect(value).toMatchObject({
      path: 'cached-lookup',
      probes: 3 * LOOKUP_CHUNK_PROBES,
      invalidated: 3 * LOOKUP_CHUNK_PROBES,
    });
    expect(yields).toBe(2 + 2); // probes in 3 chunks, freelist pushes in 3 chunks
    expect(pool.usedBuffers).toBe(0);
    pool.checkConsistency();
  });

  it('a lookup drop leaves a consistent pool at every yield, and a read in between may take a buffer it invalidated', () => {
    // The pool is full of the relation, so a read between two steps has no freelist to take from
    // and the clock sweep meets the buffers the probes have already invalidated (untagged,
    // usage 0, on no list until the drop's last steps put them on the freelist).
    const n = 3 * LOOKUP_CHUNK_PROBES;
    const pool = new BufferPool(n);
    const smgr = new StorageManager();
    smgr.inRecovery = true;
    smgr.create(16384, MAIN_FORKNUM);
    for (let blk = 0; blk < n; blk++) {
      smgr.extend(16384, MAIN_FORKNUM, blk);
      pool.accessBlock(16384, MAIN_FORKNUM, blk);
    }
    smgr.nblocks(16384, MAIN_FORKNUM);
    const steps = dropRelFileNodeBuffersSteps(pool, smgr, 16384, [MAIN_FORKNUM], [0], {
      strategy: 'cached-lookup',
      thresholdDivisor: 32,
      forceOptimized: true,
    });
    const taken: number[] = [];
    let r = steps.next();
    for (; !r.done; r = steps.next()) {
      pool.checkConsistency();
      taken.push(pool.accessBlock(16385, MAIN_FORKNUM, taken.length));
    }
    expect(r.value).toMatchObject({ probes: n, invalidated: n });
    // During the probes the freelist is empty: the clock sweep takes buffers 0 and 1, which the
    // first chunks invalidated; during the freelist pushes a read takes the list's head.
    expect(taken).toEqual([0, 1, LOOKUP_CHUNK_PROBES - 1, 2 * LOOKUP_CHUNK_PROBES - 1]);
    expect(pool.usedBuffers).toBe(4);
    pool.checkConsistency();
    const listed = new Set<number>();
    for (let id = pool.firstFreeBuffer; id >= 0; id = pool.freeNext[id]!) listed.add(id);
    expect(listed.size).toBe(n - 4);
    for (const id of taken) expect(listed.has(id)).toBe(false);
    // The freelist holds the others in ascending id order from its tail: the head is the highest.
    expect(pool.firstFreeBuffer).toBe(n - 1);
  });

  it('a scan whose chunk is full of matches yields every HEADER_LOCKS_PER_STEP invalidations', () => {
    const n = 3 * HEADER_LOCKS_PER_STEP + 100;
    const make = () => {
      const pool = new BufferPool(n + 50);
      for (let b = 0; b < n; b++) pool.accessBlock(16384, MAIN_FORKNUM, b);
      for (let b = 0; b < 50; b++) pool.accessBlock(16385, MAIN_FORKNUM, b);
      return pool;
    };
    const a = make();
    const b = make();
    // One chunk covers the whole pool, so every yield comes from the budget.
    const single = drainSteps(
      fullScanDropRelFileNodeBuffersSteps(a, 16384, [MAIN_FORKNUM], [0], 1 << 20),
    );
    expect(single.yields).toBe(3);
    expect(single.value).toEqual(fullScanDropRelFileNodeBuffers(b, 16384, [MAIN_FORKNUM], [0]));
    expect(a.bufferedBlocks()).toEqual(b.bufferedBlocks());
    const c = make();
    const d = make();
    const many = drainSteps(fullScanDropRelsAllBuffersSteps(c, [16384, 16385], 1 << 20));
    expect(many.yields).toBe(3);
    expect(many.value).toEqual(fullScanDropRelsAllBuffers(d, [16384, 16385]));
    expect(c.usedBuffers).toBe(0);
    c.checkConsistency();
    // One relation: the eight-wide pre-check, with the same budget.
    const e = make();
    const f = make();
    const one = drainSteps(fullScanDropRelsAllBuffersSteps(e, [16384], 1 << 20));
    expect(one.yields).toBe(3);
    expect(one.value).toEqual(fullScanDropRelsAllBuffers(f, [16384]));
    expect(one.value.invalidated).toBe(n);
    expect(e.usedBuffers).toBe(50);
    e.checkConsistency();
  });
});
