/**
 * The buffer mapping table (PostgreSQL buf_table.c): BufferTag -> buffer id.
 *
 * Entry points: `hashBufferTag` (BufTableHashCode), `BufTable.lookup` / `insert` / `delete`
 * (BufTableLookup / BufTableInsert / BufTableDelete), `bufMappingPartition` and the partition-lock
 * counters `lockShared` / `lockExclusive`.
 *
 * Layout. PostgreSQL keeps a shared dynahash of `{BufferTag key; int id}` entries (~40 bytes each).
 * walsim keeps one Int32Array of slots holding `bufId + 1` (0 = empty slot) and no keys: the key of
 * an occupied slot is the tag stored in the descriptor arrays (`tagRel`, `tagFork`, `tagBlock`) of
 * the buffer it points at, so a tag is stored once. The bits of a slot above those `bufId + 1`
 * needs (`idBits`: 24 at 100GB, 28 at 1TB) hold the top bits of the entry's hash: a probe reads
 * the descriptor's tag only when that fragment matches, so a lookup that misses usually touches
 * one cache line of the table and none of the descriptors (issue 24: 164 ns per missing probe at
 * 100GB, two random memory accesses, was the target's 150). The consequence (INV-BUF-1) is that a
 * descriptor must carry its new tag before `insert` and still carry its old tag when `delete` runs;
 * BufferPool retags in that order (delete old mapping, retag, insert new).
 *
 * Collisions use linear probing; deletion shifts later members of the cluster back (no tombstones),
 * so a lookup stops at the first empty slot and the table never degrades. Capacity is a power of two
 * at least 1.5 × NBuffers, which keeps the load factor ≤ 2/3 and the table at 8–12 bytes per buffer.
 *
 * Locks are not real (walsim is single-threaded) but are counted where PostgreSQL takes them, per
 * partition (hash % NUM_BUFFER_PARTITIONS), so the LWLock traffic of each drop path is measurable.
 */
import { assert, fail } from '../common/assert.ts';
import { fmix32 } from '../common/hash.ts';

/** NUM_BUFFER_PARTITIONS (lwlock.h). */
export const NUM_BUFFER_PARTITIONS = 128;

/** Smallest power of two ≥ 1.5 × nBuffers (and ≥ 16): the number of slots for a pool of nBuffers. */
export function bufTableCapacity(nBuffers: number): number {
  if (!(Number.isSafeInteger(nBuffers) && nBuffers > 0))
    fail(`INV-BUF-4: bad nBuffers ${nBuffers}`);
  const wanted = Math.ceil(nBuffers * 1.5);
  let capacity = 16;
  while (capacity < wanted) capacity *= 2;
  return capacity;
}

const C1 = 0xcc9e2d51;
const C2 = 0x1b873593;

/** One murmur3_32 body step: mixes 32-bit word `k` into running hash `h`. */
function murmurStep(h: number, k: number): number {
  k = Math.imul(k, C1);
  k = (k << 15) | (k >>> 17);
  k = Math.imul(k, C2);
  h ^= k;
  h = (h << 13) | (h >>> 19);
  return (Math.imul(h, 5) + 0xe6546b64) | 0;
}

/**
 * BufTableHashCode: murmur3_32 of the words (rel, block, fork) with the murmur3 finalizer, as an
 * unsigned 32-bit number. Every bit of the three fields reaches every bit of the result, so both
 * `hash & (capacity - 1)` (slot) and `hash % 128` (partition) are well spread for sequential blocks.
 */
export function hashBufferTag(rel: number, fork: number, block: number): number {
  let h = murmurStep(0x9747b28c, rel);
  h = murmurStep(h, block);
  h = murmurStep(h, fork);
  return fmix32(h ^ 12);
}

/** BufMappingPartitionLock's index: hashcode % NUM_BUFFER_PARTITIONS. */
export function bufMappingPartition(hash: number): number {
  return hash % NUM_BUFFER_PARTITIONS;
}

export class BufTable {
  /** Slot i holds (hash fragment << idBits) | (bufId + 1), or 0 when empty. */
  readonly slots: Int32Array;
  readonly capacity: number;
  private readonly mask: number;
  /** Bits of a slot that hold bufId + 1; the other 32 − idBits hold the hash's top bits. */
  readonly idBits: number;
  private readonly idMask: number;
  /** Live entries. */
  count = 0;
  /** LWLock acquisitions per mapping partition, in LW_SHARED and LW_EXCLUSIVE mode. */
  readonly partitionLocksShared = new Float64Array(NUM_BUFFER_PARTITIONS);
  readonly partitionLocksExclusive = new Float64Array(NUM_BUFFER_PARTITIONS);
  sharedLockCount = 0;
  exclusiveLockCount = 0;

  constructor(
    readonly nBuffers: number,
    private readonly tagRel: Uint32Array,
    private readonly tagFork: Uint8Array,
    private readonly tagBlock: Uint32Array,
  ) {
    this.capacity = bufTableCapacity(nBuffers);
    this.mask = this.capacity - 1;
    this.slots = new Int32Array(this.capacity);
    this.idBits = 32 - Math.clz32(nBuffers); // bufId + 1 ≤ nBuffers < 2^idBits
    assert(this.idBits < 32, `INV-BUF-4: ${nBuffers} buffers leave no bits for the hash fragment`);
    this.idMask = 2 ** this.idBits - 1;
  }

  /** Bytes held by the table's typed arrays. */
  get byteLength(): number {
    return this.slots.byteLength;
  }

  /** Count an LW_SHARED acquisition of the partition lock covering `hash` (released at once). */
  lockShared(hash: number): void {
    this.partitionLocksShared[hash % NUM_BUFFER_PARTITIONS]!++;
    this.sharedLockCount++;
  }

  /** Count an LW_EXCLUSIVE acquisition of the partition lock covering `hash`. */
  lockExclusive(hash: number): void {
    this.partitionLocksExclusive[hash % NUM_BUFFER_PARTITIONS]!++;
    this.exclusiveLockCount++;
  }

  /** The slot value of buffer `bufId` under `hash`. */
  private entryOf(hash: number, bufId: number): number {
    return ((hash >>> this.idBits) << this.idBits) | (bufId + 1);
  }

  /** BufTableLookup: the buffer id holding the tag, or -1. `hash` must be hashBufferTag(tag). */
  lookup(rel: number, fork: number, block: number, hash: number): number {
    const { slots, mask, tagRel, tagFork, tagBlock, idBits, idMask } = this;
    const frag = hash >>> idBits;
    let i = hash & mask;
    for (let probes = 0; probes < this.capacity; probes++) {
      const entry = slots[i]!;
      if (entry === 0) return -1;
      if (entry >>> idBits === frag) {
        const id = (entry & idMask) - 1;
        if (tagRel[id] === rel && tagBlock[id] === block && tagFork[id] === fork) return id;
      }
      i = (i + 1) & mask;
    }
    assert(false, 'INV-BUF-2: buffer mapping table has no empty slot');
  }

  /**
   * BufTableInsert: map the tag to `bufId`. Returns -1 on success or, like PostgreSQL, the id already
   * mapped to that tag (nothing is inserted then). The descriptor `bufId` must already carry the tag.
   */
  insert(rel: number, fork: number, block: number, hash: number, bufId: number): number {
    const { slots, mask, tagRel, tagFork, tagBlock } = this;
    if (!(tagRel[bufId] === rel && tagFork[bufId] === fork && tagBlock[bufId] === block)) {
      fail(
        `INV-BUF-1: buffer ${bufId} must carry tag ${rel}/${fork}/${block} before it is inserted`,
      );
    }
    assert(
      this.count < this.nBuffers,
      'INV-BUF-2: buffer mapping table holds more entries than NBuffers',
    );
    const { idBits, idMask } = this;
    const frag = hash >>> idBits;
    let i = hash & mask;
    for (;;) {
      const entry = slots[i]!;
      if (entry === 0) {
        slots[i] = this.entryOf(hash, bufId);
        this.count++;
        return -1;
      }
      const id = (entry & idMask) - 1;
      if (
        id !== bufId &&
        entry >>> idBits === frag &&
        tagRel[id] === rel &&
        tagBlock[id] === block &&
        tagFork[id] === fork
      )
        return id;
      if (!(id !== bufId)) fail(`INV-BUF-2: buffer ${bufId} is already in the mapping table`);
      i = (i + 1) & mask;
    }
  }

  /**
   * BufTableDelete: remove the tag's entry (which must exist: "shared buffer hash table corrupted"
   * otherwise), then shift later members of the probe cluster back so no lookup meets a hole.
   */
  delete(rel: number, fork: number, block: number, hash: number): void {
    const { slots, mask, tagRel, tagFork, tagBlock, idBits, idMask } = this;
    const frag = hash >>> idBits;
    let i = hash & mask;
    for (let probes = 0; ; probes++) {
      const entry = slots[i]!;
      assert(
        entry !== 0 && probes < this.capacity,
        'INV-BUF-2: shared buffer hash table corrupted',
      );
      const id = (entry & idMask) - 1;
      if (
        entry >>> idBits === frag &&
        tagRel[id] === rel &&
        tagBlock[id] === block &&
        tagFork[id] === fork
      )
        break;
      i = (i + 1) & mask;
    }
    // Backward-shift deletion: move each later cluster member whose home slot is not cyclically in
    // (i, j] into the hole at i; stop at the first empty slot.
    let j = i;
    for (;;) {
      j = (j + 1) & mask;
      const entry = slots[j]!;
      if (entry === 0) break;
      const id = (entry & idMask) - 1;
      const home = hashBufferTag(tagRel[id]!, tagFork[id]!, tagBlock[id]!) & mask;
      const stays = i <= j ? home > i && home <= j : home > i || home <= j;
      if (!stays) {
        slots[i] = entry;
        i = j;
      }
    }
    slots[i] = 0;
    this.count--;
  }

  /**
   * Check the table: each occupied slot is reachable from its home slot without crossing an empty
   * slot, and no buffer id appears twice. Visits every slot; for tests and checkConsistency.
   * Calls `visit(bufId)` for each entry.
   */
  checkIntegrity(visit: (bufId: number) => void): void {
    const { slots, mask, tagRel, tagFork, tagBlock, idMask } = this;
    const seen = new Uint8Array(this.nBuffers);
    let live = 0;
    for (let s = 0; s < this.capacity; s++) {
      const entry = slots[s]!;
      if (entry === 0) continue;
      const id = (entry & idMask) - 1;
      if (!(id >= 0 && id < this.nBuffers)) fail(`INV-BUF-2: slot ${s} holds bad buffer id ${id}`);
      if (!(seen[id] === 0)) fail(`INV-BUF-2: buffer ${id} appears twice in the mapping table`);
      seen[id] = 1;
      live++;
      const hash = hashBufferTag(tagRel[id]!, tagFork[id]!, tagBlock[id]!);
      if (!(entry === this.entryOf(hash, id)))
        fail(`INV-BUF-2: slot ${s} holds a hash fragment that is not its tag's`);
      let k = hash & mask;
      while (k !== s) {
        if (!(slots[k] !== 0))
          fail(`INV-BUF-2: entry for buffer ${id} in slot ${s} is cut off from its home slot`);
        k = (k + 1) & mask;
      }
      visit(id);
    }
    if (!(live === this.count))
      fail(`INV-BUF-2: mapping table count ${this.count} but ${live} live slots`);
  }
}
