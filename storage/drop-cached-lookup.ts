/**
 * The PG14 optimized drop path: per-block probes of the buffer mapping table
 * (FindAndDropRelFileNodeBuffers). Entry point: `LookupDropper`.
 *
 * For each block from firstDelBlock to nForkBlock - 1: hash the tag, take the mapping partition
 * lock shared (counted), look the tag up, release; on a hit lock the header and re-check rnode,
 * fork and block >= firstDelBlock (another backend may have reused the buffer meanwhile).
 *
 * One deliberate difference from PostgreSQL (INV-BUF-8): the buffers found are invalidated after
 * the probes, in ascending buffer id order, instead of in block order as they are found. Each
 * invalidation pushes the buffer on the freelist head, so invalidation order decides which buffer
 * later misses get; invalidating in id order makes the freelist after a drop independent of the path
 * taken, which is what lets walsim run both paths over one workload and demand identical pools.
 * Probe and invalidation counts are unchanged.
 */
import { assert } from '../common/assert.ts';
import type { BlockNumber, ForkNumber, RelFileNumber } from '../wal/records.ts';
import { hashBufferTag } from './buf-table.ts';
import type { BufferPool } from './buffer-pool.ts';

/** Probes (or invalidations) between two yields of a stepped lookup drop (~2–8 ms). */
export const LOOKUP_CHUNK_PROBES = 1 << 13;

/**
 * Probes (or invalidations) whose home slots are read together first (`BufTable.touchHomes`), so
 * their random accesses into the mapping table overlap instead of each waiting for the last.
 */
const TOUCH_BATCH = 32;
const touchHashes = new Uint32Array(TOUCH_BATCH);

export class LookupDropper {
  probes = 0;
  headerLocks = 0;
  /** Buffers found, in probe order: victims[0..nVictims), grown by doubling (no per-hit boxing). */
  private victims = new Int32Array(1024);
  private nVictims = 0;

  constructor(private readonly pool: BufferPool) {}

  /** FindAndDropRelFileNodeBuffers: probe blocks firstDelBlock .. nForkBlock - 1 of one fork. */
  findBuffers(
    rel: RelFileNumber,
    fork: ForkNumber,
    nForkBlock: BlockNumber,
    firstDelBlock: BlockNumber,
  ): void {
    this.probeRange(rel, fork, firstDelBlock, nForkBlock, firstDelBlock);
  }

  /** The same probes, yielding every LOOKUP_CHUNK_PROBES blocks. */
  *findBuffersSteps(
    rel: RelFileNumber,
    fork: ForkNumber,
    nForkBlock: BlockNumber,
    firstDelBlock: BlockNumber,
  ): Generator<void, void, void> {
    for (let from = firstDelBlock; from < nForkBlock; from += LOOKUP_CHUNK_PROBES) {
      if (from > firstDelBlock) yield;
      this.probeRange(
        rel,
        fork,
        from,
        Math.min(nForkBlock, from + LOOKUP_CHUNK_PROBES),
        firstDelBlock,
      );
    }
  }

  private probeRange(
    rel: RelFileNumber,
    fork: ForkNumber,
    fromBlock: BlockNumber,
    toBlock: BlockNumber,
    firstDelBlock: BlockNumber,
  ): void {
    const { pool } = this;
    const table = pool.table;
    for (let base = fromBlock; base < toBlock; base += TOUCH_BATCH) {
      const n = Math.min(TOUCH_BATCH, toBlock - base);
      for (let k = 0; k < n; k++) touchHashes[k] = hashBufferTag(rel, fork, base + k);
      table.touchHomes(touchHashes, n);
      for (let k = 0; k < n; k++) {
        const curBlock = base + k;
        const hash = touchHashes[k]!;
        table.lockShared(hash);
        const id = table.lookup(rel, fork, curBlock, hash);
        this.probes++;
        if (id < 0) continue;
        this.headerLocks++;
        if (
          pool.tagRel[id] === rel &&
          pool.tagFork[id] === fork &&
          pool.tagBlock[id]! >= firstDelBlock
        ) {
          if (this.nVictims === this.victims.length) {
            const grown = new Int32Array(this.victims.length * 2);
            grown.set(this.victims);
            this.victims = grown;
          }
          this.victims[this.nVictims++] = id;
        }
      }
    }
  }

  /** InvalidateBuffer on every buffer found, in ascending id order (INV-BUF-8). Returns how many. */
  invalidateFound(): number {
    const steps = this.invalidateFoundSteps();
    for (;;) {
      const r = steps.next();
      if (r.done) return r.value;
    }
  }

  /** The same, yielding every LOOKUP_CHUNK_PROBES invalidations. */
  *invalidateFoundSteps(): Generator<void, number, void> {
    const invalidated = yield* invalidateInIdOrderSteps(
      this.pool,
      this.victims.subarray(0, this.nVictims),
    );
    assert(invalidated <= this.probes, 'INV-BUF-8: invalidated more buffers than probes');
    this.victims = new Int32Array(1024);
    this.nVictims = 0;
    return invalidated;
  }
}

/**
 * InvalidateBuffer on each buffer of `victims` in ascending id order, once even if listed twice,
 * yielding every LOOKUP_CHUNK_PROBES invalidations (INV-BUF-8: every strategy that finds its
 * buffers by other means than the full scan invalidates them in the full scan's order). An
 * Int32Array is sorted in place (unless already ascending, the usual case: a relation loaded in
 * one go takes consecutive victims from the freelist or the clock sweep).
 */
export function* invalidateInIdOrderSteps(
  pool: BufferPool,
  victims: Int32Array | readonly number[],
): Generator<void, number, void> {
  const ids = victims instanceof Int32Array ? victims : Int32Array.from(victims);
  let ascending = true;
  for (let k = 1; k < ids.length && ascending; k++) ascending = ids[k - 1]! <= ids[k]!;
  if (!ascending) ids.sort();
  const { tagRel, tagFork, tagBlock, table } = pool;
  let invalidated = 0;
  for (let k = 0; k < ids.length; k++) {
    if (k > 0 && k % LOOKUP_CHUNK_PROBES === 0) yield;
    if (k % TOUCH_BATCH === 0) {
      const n = Math.min(TOUCH_BATCH, ids.length - k);
      for (let m = 0; m < n; m++) {
        const v = ids[k + m]!;
        touchHashes[m] = hashBufferTag(tagRel[v]!, tagFork[v]!, tagBlock[v]!);
      }
      table.touchHomes(touchHashes, n);
    }
    const id = ids[k]!;
    if (k > 0 && ids[k - 1] === id) continue; // the same fork listed twice
    pool.invalidate(id);
    invalidated++;
  }
  return invalidated;
}
