/**
 * The shared buffer pool: NBuffers columnar descriptors, the mapping table, freelist + clock sweep.
 *
 * Entry points: `new BufferPool(nBuffers)`, `readBuffer` (BufferAlloc; returns the buffer pinned),
 * `releaseBuffer` (ReleaseBuffer), `markDirty` (MarkBufferDirty), `lookup`, `invalidate`
 * (InvalidateBuffer), `invalidateAt` + `freeInvalidated` (the lookup drop's InvalidateBuffer, split
 * at the freelist push), `flushAll` (BufferSync at a checkpoint), `checkConsistency`.
 *
 * Every per-buffer field is its own typed array indexed by buffer id (0-based, PostgreSQL's buf_id;
 * the Buffer number is buf_id + 1). That is 17 bytes per buffer here plus 8–12 for the mapping
 * table, against PostgreSQL's 64-byte padded BufferDesc and ~40-byte dynahash entry.
 *
 * An invalid tag is all zeros (rel 0, fork 0, block 0): the allocator's zero fill is therefore the
 * initial state of every descriptor, and because relfilenumber 0 is never a relation
 * (INV-BUF-3, asserted on every read) the unlocked tagRel pre-check of a full-scan drop can never
 * match a free buffer. PostgreSQL's CLEAR_BUFFERTAG writes InvalidBlockNumber/InvalidForkNumber
 * too, but only rnode = 0 matters for matching.
 *
 * Freelist: initialised like StrategyInitialize — every buffer on the list in id order
 * (freeNext[i] = i + 1, the last FREENEXT_END_OF_LIST). This is the only per-buffer loop at
 * construction and is a tight Int32Array fill (~10 ms at 100GB).
 */
import { assert, fail } from '../common/assert.ts';
import {
  InvalidBlockNumber,
  MAX_FORKNUM,
  type BlockNumber,
  type ForkNumber,
  type RelFileNumber,
} from '../wal/records.ts';
import { BufTable, bufMappingPartition, bufTableCapacity, hashBufferTag } from './buf-table.ts';
import { RelBufferLists } from './rel-buffer-lists.ts';
import { allocateTagColumn, type TagColumn } from './tag-scan.ts';

/** Buffer state flag bits (buf_internals.h names; walsim keeps them in one byte). */
export const BM_DIRTY = 1 << 0;
export const BM_VALID = 1 << 1;
export const BM_TAG_VALID = 1 << 2;
export const BM_JUST_DIRTIED = 1 << 3;
export const BM_PERMANENT = 1 << 4;

/** BM_MAX_USAGE_COUNT (buf_internals.h). */
export const BM_MAX_USAGE_COUNT = 5;
/** freeNext sentinels (buf_internals.h). */
export const FREENEXT_END_OF_LIST = -1;
export const FREENEXT_NOT_IN_LIST = -2;
/** Pins one buffer may hold: refCount is a Uint16Array. */
const MAX_REFCOUNT = 0xffff;

/** Bytes of descriptor arrays per buffer: tagRel 4, tagFork 1, tagBlock 4, flags 1, usage 1, refCount 2, freeNext 4. */
export const DESCRIPTOR_BYTES_PER_BUFFER = 17;

/** Bytes a pool of nBuffers allocates in typed arrays: descriptors plus the mapping table. */
export function estimatePoolBytes(nBuffers: number): number {
  return DESCRIPTOR_BYTES_PER_BUFFER * nBuffers + 4 * bufTableCapacity(nBuffers);
}

/** A buffer's identity (BufferTag): relfilenumber, fork, block. */
export interface BufferTag {
  rel: RelFileNumber;
  fork: ForkNumber;
  block: BlockNumber;
}

/** A buffer's tag and state, as reported by `bufferedBlocks` for tests and tools. */
export interface BufferedBlock extends BufferTag {
  bufId: number;
  flags: number;
  usageCount: number;
}

export interface BufferPoolCounters {
  hits: number;
  misses: number;
  /** Misses that displaced a valid page (the victim had a tag). */
  evictions: number;
  /** Dirty pages written out: by eviction or by flushAll. */
  writes: number;
  /** InvalidateBuffer calls that cleared a tag (drops, truncations). */
  invalidations: number;
  /** Dirty pages discarded by InvalidateBuffer without being written. */
  discardedDirty: number;
  /** Clock-sweep ticks (buffers examined by the sweep). */
  sweepTicks: number;
}

export interface BufferPoolOptions {
  /** Called with the old tag when a dirty page is written (eviction or checkpoint), before reuse. */
  onWriteDirty?: (rel: RelFileNumber, fork: ForkNumber, block: BlockNumber) => void;
  /**
   * Maintain per-relation buffer lists from the first allocation (the `rel-list` drop strategy,
   * seed 000's first design). Costs every allocation and invalidation a link/unlink.
   */
  relationLists?: boolean;
  /**
   * Keep `tagRel` in WebAssembly memory with the SIMD pre-check of full-scan drops (tag-scan.ts):
   * default from WASM_TAG_MIN_BUFFERS buffers on; true or false forces it (tests of both paths).
   */
  wasmTags?: boolean;
}

/**
 * Extra bookkeeping on the allocation path: told when a buffer gets a tag (after BufferAlloc's
 * retag) and when it loses one (eviction, InvalidateBuffer). Only the `rel-list` and
 * `recovery-hash` drop strategies install one (storage/rel-buffer-lists.ts); with none installed
 * the allocation path pays one null test.
 */
export interface BufferTagObserver {
  tagged(id: number, rel: RelFileNumber): void;
  untagged(id: number, rel: RelFileNumber): void;
}

function assertTag(rel: number, fork: number, block: number): void {
  if (!(Number.isInteger(rel) && rel > 0 && rel <= 0xffffffff)) {
    fail(`INV-BUF-3: relfilenumber ${rel} is not a valid (non-zero uint32) relation`);
  }
  if (!(Number.isInteger(fork) && fork >= 0 && fork <= MAX_FORKNUM))
    fail(`INV-BUF-3: bad fork ${fork}`);
  if (!(Number.isInteger(block) && block >= 0 && block < InvalidBlockNumber)) {
    fail(`INV-BUF-3: bad block number ${block}`);
  }
}

export class BufferPool {
  readonly nBuffers: number;
  readonly tagRel: Uint32Array;
  /** The SIMD block finder over `tagRel` when it lives in WebAssembly memory, else null (tag-scan.ts). */
  readonly findTagBlock: TagColumn['findBlock'];
  readonly tagFork: Uint8Array;
  readonly tagBlock: Uint32Array;
  readonly flags: Uint8Array;
  readonly usageCount: Uint8Array;
  readonly refCount: Uint16Array;
  readonly freeNext: Int32Array;
  readonly table: BufTable;
  /**
   * The observer of tag changes, or null (every strategy but rel-list and recovery-hash). Set at
   * construction for rel-list; attached and released by the recovery-hash strategy.
   */
  tagObserver: BufferTagObserver | null = null;
  /** The per-relation lists when constructed with `relationLists` (rel-list), else null. */
  readonly relationLists: RelBufferLists | null;

  /** BufferStrategyControl. */
  firstFreeBuffer: number;
  lastFreeBuffer: number;
  nextVictimBuffer = 0;
  completePasses = 0;

  readonly counters: BufferPoolCounters = {
    hits: 0,
    misses: 0,
    evictions: 0,
    writes: 0,
    invalidations: 0,
    discardedDirty: 0,
    sweepTicks: 0,
  };
  private readonly onWriteDirty: BufferPoolOptions['onWriteDirty'];
  /**
   * Per fork, the buffer `readBuffer` last returned, or -1: checked before the mapping table, as
   * PostgreSQL 15's recovery checks the prefetcher's recent buffer (ReadRecentBuffer in
   * XLogReadBufferExtended). Replay touches the same FSM leaf for ~4,000 and the same VM page for
   * ~32,000 consecutive heap blocks, so most of its FSM/VM reads are found here without a random
   * access into the table. A descriptor whose tag equals the one wanted IS the mapping table's
   * answer (INV-BUF-2: no two buffers share a tag; INV-BUF-3: an untagged descriptor is zeros), so
   * the result, the counters (hit, shared partition lock) and the pool are the same either way.
   */
  private readonly recentBuffer = new Int32Array(MAX_FORKNUM + 1).fill(-1);

  constructor(nBuffers: number, options: BufferPoolOptions = {}) {
    if (!(Number.isSafeInteger(nBuffers) && nBuffers >= 1 && nBuffers <= 0x3fffffff)) {
      fail(`INV-BUF-4: NBuffers ${nBuffers} out of range`);
    }
    this.nBuffers = nBuffers;
    const tags = allocateTagColumn(nBuffers, options.wasmTags);
    this.tagRel = tags.tagRel;
    this.findTagBlock = tags.findBlock;
    this.tagFork = new Uint8Array(nBuffers);
    this.tagBlock = new Uint32Array(nBuffers);
    this.flags = new Uint8Array(nBuffers);
    this.usageCount = new Uint8Array(nBuffers);
    this.refCount = new Uint16Array(nBuffers);
    this.freeNext = new Int32Array(nBuffers);
    const freeNext = this.freeNext;
    for (let i = 0; i < nBuffers; i++) freeNext[i] = i + 1;
    freeNext[nBuffers - 1] = FREENEXT_END_OF_LIST;
    this.firstFreeBuffer = 0;
    this.lastFreeBuffer = nBuffers - 1;
    this.table = new BufTable(nBuffers, this.tagRel, this.tagFork, this.tagBlock);
    this.onWriteDirty = options.onWriteDirty;
    this.relationLists = options.relationLists === true ? new RelBufferLists(nBuffers) : null;
    this.tagObserver = this.relationLists;
  }

  /** Bytes held in typed arrays: descriptors plus mapping table. */
  get byteLength(): number {
    return (
      this.tagRel.byteLength +
      this.tagFork.byteLength +
      this.tagBlock.byteLength +
      this.flags.byteLength +
      this.usageCount.byteLength +
      this.refCount.byteLength +
      this.freeNext.byteLength +
      this.table.byteLength +
      (this.relationLists?.byteLength ?? 0)
    );
  }

  /** Buffer id holding the page, or -1; counts a shared partition-lock acquisition. */
  lookup(rel: RelFileNumber, fork: ForkNumber, block: BlockNumber): number {
    assertTag(rel, fork, block);
    const hash = hashBufferTag(rel, fork, block);
    this.table.lockShared(hash);
    return this.table.lookup(rel, fork, block, hash);
  }

  /**
   * ReadBuffer (BufferAlloc + the read): returns the buffer id holding the page, pinned. A hit
   * bumps the usage count (up to BM_MAX_USAGE_COUNT); a miss takes a victim from the freelist or
   * the clock sweep, writes it out if dirty, retags it with usage count 1. Reads complete at once.
   */
  readBuffer(rel: RelFileNumber, fork: ForkNumber, block: BlockNumber): number {
    assertTag(rel, fork, block);
    const hash = hashBufferTag(rel, fork, block);
    this.table.lockShared(hash);
    // The fork's recent buffer first (see `recentBuffer`), else the mapping table.
    const recent = this.recentBuffer[fork]!;
    const found =
      recent >= 0 &&
      this.tagRel[recent] === rel &&
      this.tagBlock[recent] === block &&
      this.tagFork[recent] === fork
        ? recent
        : this.table.lookup(rel, fork, block, hash);
    if (found >= 0) {
      this.counters.hits++;
      this.pin(found);
      this.recentBuffer[fork] = found;
      return found;
    }
    this.counters.misses++;
    const id = this.strategyGetBuffer();
    const oldFlags = this.flags[id]!;
    if (oldFlags & BM_DIRTY) this.writeOut(id);
    const newHash = hash;
    if (oldFlags & BM_TAG_VALID) {
      this.counters.evictions++;
      const oldHash = hashBufferTag(this.tagRel[id]!, this.tagFork[id]!, this.tagBlock[id]!);
      // PostgreSQL takes both partition locks (in address order; once if they coincide).
      this.table.lockExclusive(oldHash);
      if (bufMappingPartition(oldHash) !== bufMappingPartition(newHash))
        this.table.lockExclusive(newHash);
      this.table.delete(this.tagRel[id]!, this.tagFork[id]!, this.tagBlock[id]!, oldHash);
      if (this.tagObserver !== null) this.tagObserver.untagged(id, this.tagRel[id]!);
    } else {
      this.table.lockExclusive(newHash);
    }
    this.tagRel[id] = rel;
    this.tagFork[id] = fork;
    this.tagBlock[id] = block;
    const existing = this.table.insert(rel, fork, block, newHash, id);
    if (!(existing < 0))
      fail(`INV-BUF-2: tag ${rel}/${fork}/${block} already mapped to buffer ${existing}`);
    if (this.tagObserver !== null) this.tagObserver.tagged(id, rel);
    this.flags[id] = BM_TAG_VALID | BM_VALID | BM_PERMANENT;
    this.usageCount[id] = 1;
    this.refCount[id] = 1;
    this.recentBuffer[fork] = id;
    return id;
  }

  /** PinBuffer on an already valid buffer: refcount + 1, usage count + 1 up to the maximum. */
  pin(id: number): void {
    this.assertBufId(id);
    if (!((this.flags[id]! & BM_TAG_VALID) !== 0))
      fail(`INV-BUF-5: pinning buffer ${id} which has no tag`);
    if (!(this.refCount[id]! < MAX_REFCOUNT))
      fail(`INV-BUF-5: buffer ${id} pinned ${MAX_REFCOUNT} times`);
    this.refCount[id]!++;
    if (this.usageCount[id]! < BM_MAX_USAGE_COUNT) this.usageCount[id]!++;
  }

  /** ReleaseBuffer: drop one pin. */
  releaseBuffer(id: number): void {
    this.assertBufId(id);
    if (!(this.refCount[id]! > 0)) fail(`INV-BUF-5: releasing buffer ${id} which is not pinned`);
    this.refCount[id]!--;
  }

  /** Read the page and release it at once: the common replay/scan access. Returns the buffer id. */
  accessBlock(rel: RelFileNumber, fork: ForkNumber, block: BlockNumber): number {
    const id = this.readBuffer(rel, fork, block);
    this.refCount[id]!--;
    return id;
  }

  /** MarkBufferDirty: the buffer must be pinned and valid. */
  markDirty(id: number): void {
    this.assertBufId(id);
    if (!(this.refCount[id]! > 0)) fail(`INV-BUF-5: MarkBufferDirty on unpinned buffer ${id}`);
    if (!((this.flags[id]! & BM_VALID) !== 0))
      fail(`INV-BUF-5: MarkBufferDirty on invalid buffer ${id}`);
    this.flags[id]! |= BM_DIRTY | BM_JUST_DIRTIED;
  }

  /**
   * InvalidateBuffer: clear the tag, flags and usage count, delete the mapping entry and put the
   * buffer at the head of the freelist. A dirty page is discarded, never written (INV-BUF-6).
   * Refuses a pinned buffer like PostgreSQL ("buffer is pinned in InvalidateBuffer").
   */
  invalidate(id: number): void {
    this.assertBufId(id);
    const f = this.flags[id]!;
    if (!(this.refCount[id] === 0))
      fail(`INV-BUF-5: buffer is pinned in InvalidateBuffer (buffer ${id})`);
    if (f & BM_TAG_VALID) {
      const rel = this.tagRel[id]!;
      const fork = this.tagFork[id]!;
      const block = this.tagBlock[id]!;
      const hash = hashBufferTag(rel, fork, block);
      this.table.lockExclusive(hash);
      this.table.delete(rel, fork, block, hash);
      this.countInvalidation(id, f);
    }
    this.clearDescriptor(id);
    this.strategyFreeBuffer(id);
  }

  /**
   * InvalidateBuffer for the lookup drop: buffer `id`, whose mapping entry the caller found at
   * `slot` (`BufTable.lookupSlot` under `hash`, the table unchanged since). The same checks,
   * counters and descriptor state as `invalidate`, but the entry is deleted at that slot, whose
   * cache line the probe has just loaded, instead of being searched for again (PostgreSQL's
   * InvalidateBuffer searches a second time in BufTableDelete). The buffer is not put on the
   * freelist: the caller does that with `freeInvalidated` once its probes are done, in ascending
   * id order (INV-BUF-8). Until then it is an untagged, unpinned descriptor on no list, a state
   * INV-BUF-3/4 allow (the clock sweep may take such a buffer).
   */
  invalidateAt(id: number, hash: number, slot: number): void {
    const f = this.flags[id]!;
    if (!(this.table.idAt(slot) === id && (f & BM_TAG_VALID) !== 0))
      fail(`INV-BUF-2: slot ${slot} does not map tagged buffer ${id}`);
    if (!(this.refCount[id] === 0))
      fail(`INV-BUF-5: buffer is pinned in InvalidateBuffer (buffer ${id})`);
    this.table.lockExclusive(hash);
    this.table.deleteAt(slot);
    this.countInvalidation(id, f);
    this.clearDescriptor(id);
  }

  /**
   * StrategyFreeBuffer for a buffer `invalidateAt` left off the freelist, unless it has a tag
   * again (the clock sweep took it in between) or is already listed.
   */
  freeInvalidated(id: number): void {
    this.assertBufId(id);
    if ((this.flags[id]! & BM_TAG_VALID) === 0) this.strategyFreeBuffer(id);
  }

  /** InvalidateBuffer's bookkeeping for buffer `id` losing its tag (flags `f` before). */
  private countInvalidation(id: number, f: number): void {
    if (this.tagObserver !== null) this.tagObserver.untagged(id, this.tagRel[id]!);
    this.counters.invalidations++;
    if (f & BM_DIRTY) this.counters.discardedDirty++;
  }

  /** CLEAR_BUFFERTAG and the state reset of InvalidateBuffer: the all-zero untagged descriptor. */
  private clearDescriptor(id: number): void {
    this.tagRel[id] = 0;
    this.tagFork[id] = 0;
    this.tagBlock[id] = 0;
    this.flags[id] = 0;
    this.usageCount[id] = 0;
  }

  /** Checkpoint (BufferSync): write every dirty buffer in id order; returns how many were written. */
  flushAll(): number {
    return this.flushRange(0, this.nBuffers);
  }

  /** BufferSync over buffer ids [from, to): a checkpoint flushes the pool in such steps. */
  flushRange(from: number, to: number): number {
    const { flags } = this;
    const end = Math.min(to, this.nBuffers);
    let written = 0;
    for (let id = from; id < end; id++) {
      if (flags[id]! & BM_DIRTY) {
        this.writeOut(id);
        written++;
      }
    }
    return written;
  }

  /** Visit the tag of every valid buffer, in buffer order, without allocating (checks run often). */
  forEachValidTag(visit: (rel: RelFileNumber, fork: ForkNumber, block: BlockNumber) => void): void {
    const { flags, tagRel, tagFork, tagBlock } = this;
    for (let id = 0; id < this.nBuffers; id++)
      if (flags[id]! & BM_TAG_VALID) visit(tagRel[id]!, tagFork[id] as ForkNumber, tagBlock[id]!);
  }

  /** Tags of the valid buffers (of `rel` if given), sorted by rel, fork, block. For tests and tools. */
  bufferedBlocks(rel?: RelFileNumber): BufferedBlock[] {
    const out: BufferedBlock[] = [];
    for (let id = 0; id < this.nBuffers; id++) {
      if (!(this.flags[id]! & BM_TAG_VALID)) continue;
      if (rel !== undefined && this.tagRel[id] !== rel) continue;
      out.push({
        rel: this.tagRel[id]!,
        fork: this.tagFork[id] as ForkNumber,
        block: this.tagBlock[id]!,
        bufId: id,
        flags: this.flags[id]!,
        usageCount: this.usageCount[id]!,
      });
    }
    return out.sort((a, b) => a.rel - b.rel || a.fork - b.fork || a.block - b.block);
  }

  /** Number of buffers holding a valid tag. */
  get usedBuffers(): number {
    return this.table.count;
  }

  /**
   * Check INV-BUF-1..7 over the whole pool: every tagged descriptor is found by a mapping lookup of
   * its tag (so no two descriptors share a tag) and every table entry points at a tagged descriptor;
   * untagged descriptors are all-zero and unpinned; the freelist is a well-formed chain from
   * firstFreeBuffer to lastFreeBuffer over exactly the buffers whose freeNext is not
   * FREENEXT_NOT_IN_LIST, none of them pinned or tagged. Costs O(NBuffers); for tests.
   */
  checkConsistency(): void {
    const { nBuffers, flags, tagRel, tagFork, tagBlock, usageCount, refCount, freeNext, table } =
      this;
    let tagged = 0;
    for (let id = 0; id < nBuffers; id++) {
      const f = flags[id]!;
      if (f & BM_TAG_VALID) {
        tagged++;
        assertTag(tagRel[id]!, tagFork[id]!, tagBlock[id]!);
        const hash = hashBufferTag(tagRel[id]!, tagFork[id]!, tagBlock[id]!);
        const mapped = table.lookup(tagRel[id]!, tagFork[id]!, tagBlock[id]!, hash);
        if (!(mapped === id)) fail(`INV-BUF-2: buffer ${id} tag maps to ${mapped}`);
        if (!(usageCount[id]! <= BM_MAX_USAGE_COUNT))
          fail(`INV-BUF-7: usage count ${usageCount[id]} > max`);
      } else {
        if (!(
          f === 0 &&
          tagRel[id] === 0 &&
          tagFork[id] === 0 &&
          tagBlock[id] === 0 &&
          usageCount[id] === 0
        )) {
          fail(`INV-BUF-3: untagged buffer ${id} has state (rel ${tagRel[id]}, flags ${f})`);
        }
        if (!(refCount[id] === 0)) fail(`INV-BUF-5: untagged buffer ${id} is pinned`);
      }
    }
    table.checkIntegrity((id) => {
      if (!((flags[id]! & BM_TAG_VALID) !== 0))
        fail(`INV-BUF-2: mapping points at untagged buffer ${id}`);
    });
    if (!(table.count === tagged))
      fail(`INV-BUF-2: ${table.count} mapping entries for ${tagged} tagged buffers`);
    let onList = 0;
    for (let id = 0; id < nBuffers; id++) if (freeNext[id] !== FREENEXT_NOT_IN_LIST) onList++;
    let walked = 0;
    let last = -1;
    for (let id = this.firstFreeBuffer; id >= 0; id = freeNext[id]!) {
      assert(walked < nBuffers && id < nBuffers, 'INV-BUF-4: freelist is cyclic or out of range');
      if (!(refCount[id] === 0)) fail(`INV-BUF-4: pinned buffer ${id} on the freelist`);
      walked++;
      last = id;
    }
    if (!(walked === onList))
      fail(`INV-BUF-4: freelist chain has ${walked} buffers, ${onList} marked as listed`);
    if (this.tagObserver instanceof RelBufferLists) {
      this.tagObserver.checkIntegrity(tagRel, (id) => (flags[id]! & BM_TAG_VALID) !== 0);
    }
    assert(
      walked === 0 ? this.firstFreeBuffer === FREENEXT_END_OF_LIST : last === this.lastFreeBuffer,
      'INV-BUF-4: freelist head/tail disagree with the chain',
    );
  }

  /** StrategyGetBuffer: freelist first, then the clock sweep. Returns an unpinned, usage-0 buffer. */
  private strategyGetBuffer(): number {
    const { freeNext, refCount, usageCount } = this;
    while (this.firstFreeBuffer >= 0) {
      const id = this.firstFreeBuffer;
      this.firstFreeBuffer = freeNext[id]!;
      freeNext[id] = FREENEXT_NOT_IN_LIST;
      if (this.firstFreeBuffer < 0) this.lastFreeBuffer = FREENEXT_END_OF_LIST;
      // PostgreSQL re-checks: a buffer on the freelist may have been pinned since it was freed.
      if (refCount[id] === 0 && usageCount[id] === 0) return id;
    }
    let trycounter = this.nBuffers;
    for (;;) {
      const id = this.clockSweepTick();
      if (refCount[id] === 0) {
        if (usageCount[id]! > 0) {
          usageCount[id]!--;
          trycounter = this.nBuffers;
        } else {
          return id;
        }
      } else if (--trycounter === 0) {
        assert(false, 'INV-BUF-5: no unpinned buffers available');
      }
    }
  }

  private clockSweepTick(): number {
    const id = this.nextVictimBuffer;
    this.counters.sweepTicks++;
    if (++this.nextVictimBuffer >= this.nBuffers) {
      this.nextVictimBuffer = 0;
      this.completePasses++;
    }
    return id;
  }

  /** StrategyFreeBuffer: push at the head unless already listed. */
  private strategyFreeBuffer(id: number): void {
    if (this.freeNext[id] !== FREENEXT_NOT_IN_LIST) return;
    this.freeNext[id] = this.firstFreeBuffer;
    if (this.firstFreeBuffer < 0) this.lastFreeBuffer = id;
    this.firstFreeBuffer = id;
  }

  private writeOut(id: number): void {
    this.counters.writes++;
    this.flags[id]! &= ~(BM_DIRTY | BM_JUST_DIRTIED);
    this.onWriteDirty?.(this.tagRel[id]!, this.tagFork[id] as ForkNumber, this.tagBlock[id]!);
  }

  private assertBufId(id: number): void {
    if (!(Number.isInteger(id) && id >= 0 && id < this.nBuffers))
      fail(`INV-BUF-4: bad buffer id ${id}`);
  }
}
