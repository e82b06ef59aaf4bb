/**
 * The PG14 optimized drop path: per-block probes of the buffer mapping table
 * (FindAndDropRelFileNodeBuffers). Entry point: `LookupDropper`.
 *
 * For each block from firstDelBlock to nForkBlock - 1: hash the tag, take the mapping partition
 * lock shared (counted), look the tag up, release; on a hit lock the header, re-check rnode,
 * fork and block >= firstDelBlock (another backend may have reused the buffer meanwhile) and
 * InvalidateBuffer it (partition lock exclusive, counted; the mapping entry is deleted at the slot
 * the probe found, `BufferPool.invalidateAt`). PostgreSQL does this block by block; walsim probes
 * 32 blocks, then invalidates what those probes found, in probe order (one backend: nobody can
 * observe the difference, and the counts are the same).
 *
 * One deliberate difference from PostgreSQL (INV-BUF-8): the buffers invalidated are put on the
 * freelist after the probes, in ascending buffer id order, instead of in block order as they are
 * found. Each push goes to the freelist head, so that order decides which buffer later misses get;
 * id order makes the freelist after a drop independent of the path taken, which is what lets
 * walsim run both paths over one workload and demand identical pools. Probe, header-lock,
 * partition-lock and invalidation counts are PostgreSQL's.
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
/** The slot each probe of a batch found (`BufTable.lookupSlot`), or -1. */
const touchSlots = new Int32Array(TOUCH_BATCH);

export class LookupDropper {
  probes = 0;
  headerLocks = 0;
  /**
   * Buffers invalidated, in probe order, waiting for the freelist: victims[0..nVictims), grown by
   * doubling (no per-hit boxing).
   */
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
      // The probes of the batch first, in a loop as tight as the table's lookup (a miss costs
      // one slot read), then InvalidateBuffer on what they found, in probe order.
      for (let k = 0; k < n; k++) {
        const hash = touchHashes[k]!;
        table.lockShared(hash);
        touchSlots[k] = table.lookupSlot(rel, fork, base + k, hash);
      }
      this.probes += n;
      for (let k = 0; k < n; k++) {
        let slot = touchSlots[k]!;
        if (slot < 0) continue;
        this.headerLocks++;
        let id = table.idAt(slot);
        if (!(
          pool.tagRel[id] === rel &&
          pool.tagFork[id] === fork &&
          pool.tagBlock[id] === base + k
        )) {
          // An invalidation of this batch shifted the entry back (same probe cluster): find it again.
          slot = table.lookupSlot(rel, fork, base + k, touchHashes[k]!);
          id = table.idAt(slot);
        }
        if (pool.tagBlock[id]! >= firstDelBlock) this.invalidateHit(id, touchHashes[k]!, slot);
      }
    }
  }

  /** InvalidateBuffer on a buffer a probe found at `slot`; remember it for the freelist. */
  private invalidateHit(id: number, hash: number, slot: number): void {
    this.pool.invalidateAt(id, hash, slot);
    if (this.nVictims === this.victims.length) {
      const grown = new Int32Array(this.victims.length * 2);
      grown.set(this.victims);
      this.victims = grown;
    }
    this.victims[this.nVictims++] = id;
  }

  /**
   * After the probes: put every buffer they invalidated on the freelist, in ascending id order
   * (INV-BUF-8), yielding every LOOKUP_CHUNK_PROBES buffers. Returns how many were invalidated.
   */
  *freeInvalidatedSteps(): Generator<void, number, void> {
    const ids = this.victims.subarray(0, this.nVictims);
    if (!isAscending(ids)) ids.sort();
    for (let k = 0; k < ids.length; k++) {
      if (k > 0 && k % LOOKUP_CHUNK_PROBES === 0) yield;
      this.pool.freeInvalidated(ids[k]!);
    }
    const invalidated = ids.length;
    assert(invalidated <= this.probes, 'INV-BUF-8: invalidated more buffers than probes');
    this.victims = new Int32Array(1024);
    this.nVictims = 0;
    return invalidated;
  }
}

/** Whether ids[0..) never decreases. */
function isAscending(ids: Int32Array): boolean {
  for (let k = 1; k < ids.length; k++) if (ids[k - 1]! > ids[k]!) return false;
  return true;
}

/**
 * InvalidateBuffer on each buffer of `victims` in ascending id order, once even if listed twice,
 * yielding every LOOKUP_CHUNK_PROBES invalidations (INV-BUF-8: the list-walk strategies, which
 * find their buffers by other means than the full scan, invalidate them in the full scan's order). An
 * Int32Array is sorted in place (unless already ascending, the usual case: a relation loaded in
 * one go takes consecutive victims from the freelist or the clock sweep).
 */
export function* invalidateInIdOrderSteps(
  pool: BufferPool,
  victims: Int32Array | readonly number[],
): Generator<void, number, void> {
  const ids = victims instanceof Int32Array ? victims : Int32Array.from(victims);
  if (!isAscending(ids)) ids.sort();
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
