/**
 * The buffer mapping table (PostgreSQL buf_table.c): BufferTag -> buffer id.
 *
 * Entry points: `hashBufferTag` (BufTableHashCode), `BufTable.lookup` / `insert` / `delete`
 * (BufTableLookup / BufTableInsert / BufTableDelete), `lookupSlot` + `deleteAt` (the same lookup
 * and delete with the slot in between, for a caller that deletes what it just found),
 * `bufMappingPartition` and the partition-lock counters `lockShared` / `lockExclusive`.
 *
 * Layout. PostgreSQL keeps a shared dynahash of `{BufferTag key; int id}` entries (~40 bytes each).
 * walsim keeps one Int32Array of slots holding `bufId + 1` (0 = empty slot) and no keys: the key of
 * an occupied slot is the tag stored in the descriptor arrays (`tagRel`, `tagFork`, `tagBlock`) of
 * the buffer it points at, so a tag is stored once. The bits of a slot above those `bufId + 1`
 * needs (`idBits`: 24 at 100GB, 28 at 1TB) form a meta field: the entry's displacement (how many
 * slots past its home it sits; 4 bits, 3 at 1TB, the top code meaning "that many or more") and,
 * above it, the top bits of the entry's hash (4 at 100GB, 1 at 1TB). A probe reads the
 * descriptor's tag only when the meta field matches what its own tag would have there, so a lookup
 * that misses usually touches one cache line of the table and none of the descriptors; and a
 * delete's backward shift knows each later member's home from its displacement without re-hashing
 * its tag (on this VM a random access into a 100+ MB array costs ~100 ns when independent of the
 * previous one and ~700 ns when it depends on it, so the descriptor reads a re-hash needs, three
 * arrays at a random buffer id, were most of an invalidation). The consequence (INV-BUF-1) is that a
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

/**
 * Bits of a slot's meta field (the 32 − idBits above `bufId + 1`) given to the displacement; the
 * rest hold the hash fragment. Four bits keep displacements 0..14 exact (15 = "15 or more, rehash
 * the descriptor's tag"), which at the table's load factor (≤ 2/3, 39 % full at 100GB) covers all
 * but a vanishing share of entries; with fewer spare bits (4 at 1TB) one bit is kept for the fragment.
 */
function displacementBitsFor(spareBits: number): number {
  return spareBits >= 5 ? 4 : Math.max(1, spareBits - 1);
}

export class BufTable {
  /**
   * Slot i holds (hash fragment << fragShift) | (displacement code << idBits) | (bufId + 1), or 0
   * when empty. The displacement is the entry's distance from its home slot (hash & mask), capped
   * at `dispOverflow` ("that many or more": the real one is recomputed from the descriptor's tag).
   */
  readonly slots: Int32Array;
  readonly capacity: number;
  private readonly mask: number;
  /** Bits of a slot that hold bufId + 1; above them the displacement, then the hash fragment. */
  readonly idBits: number;
  private readonly idMask: number;
  /** Displacement field width and its overflow code (2^bits − 1). */
  readonly displacementBits: number;
  private readonly dispOverflow: number;
  /** Position of the fragment field: the fragment is the hash's top 32 − fragShift bits (none at 32). */
  private readonly fragShift: number;
  /** Live entries. */
  count = 0;
  /** LWLock acquisitions per mapping partition, in LW_SHARED and LW_EXCLUSIVE mode. */
  readonly partitionLocksShared = new Float64Array(NUM_BUFFER_PARTITIONS);
  readonly partitionLocksExclusive = new Float64Array(NUM_BUFFER_PARTITIONS);
  sharedLockCount = 0;
  exclusiveLockCount = 0;

  /** `displacementBits` overrides the default split of the spare bits (tests of the overflow code). */
  constructor(
    readonly nBuffers: number,
    private readonly tagRel: Uint32Array,
    private readonly tagFork: Uint8Array,
    private readonly tagBlock: Uint32Array,
    displacementBits?: number,
  ) {
    this.capacity = bufTableCapacity(nBuffers);
    this.mask = this.capacity - 1;
    this.slots = new Int32Array(this.capacity);
    this.idBits = 32 - Math.clz32(nBuffers); // bufId + 1 ≤ nBuffers < 2^idBits
    const spare = 32 - this.idBits;
    if (!(spare >= 2))
      fail(`INV-BUF-4: ${nBuffers} buffers leave too few bits for the slot's meta field`);
    this.idMask = 2 ** this.idBits - 1;
    this.displacementBits = displacementBits ?? displacementBitsFor(spare);
    if (!(
      Number.isInteger(this.displacementBits) &&
      this.displacementBits >= 1 &&
      this.displacementBits <= spare
    ))
      fail(`INV-BUF-4: bad displacement width ${this.displacementBits}`);
    this.dispOverflow = 2 ** this.displacementBits - 1;
    this.fragShift = this.idBits + this.displacementBits;
  }

  /** Folds the slots `touchHomes` read, so the reads are not optimized away. */
  private touchSink = 0;

  /**
   * Read the home slot of hashes[0..n) and nothing else: the probes that follow then find those
   * cache lines loaded. On this VM a random access into a 100+ MB table costs ~100 ns when it is
   * independent of the previous one and several times that when the CPU cannot start it before
   * the previous probe's branches resolve; this tight loop lets the loads overlap. Changes no
   * state and no counter (PostgreSQL's own loops get the same effect from hardware prefetch and
   * out-of-order execution over simpler code).
   */
  touchHomes(hashes: Uint32Array, n: number): void {
    const { slots, mask } = this;
    let x = 0;
    for (let k = 0; k < n; k++) x ^= slots[hashes[k]! & mask]!;
    this.touchSink ^= x;
  }

  /** Bytes held by the table's typed arrays. */
  get byteLength(): number {
    return this.slots.byteLength;
  }

  /** Count an LW_SHARED acquisition of the partition lock covering `hash` (released at once). */
  lockShared(hash: number): void {
    this.partitionLocksShared[hash & (NUM_BUFFER_PARTITIONS - 1)]!++;
    this.sharedLockCount++;
  }

  /** Count an LW_EXCLUSIVE acquisition of the partition lock covering `hash`. */
  lockExclusive(hash: number): void {
    this.partitionLocksExclusive[hash & (NUM_BUFFER_PARTITIONS - 1)]!++;
    this.exclusiveLockCount++;
  }

  /**
   * The meta field (slot >>> idBits) of an entry for `hash` sitting `distance` slots past its home:
   * fragment above the displacement code. A probe compares a slot's meta with this: an entry can be
   * the probed tag only if both agree (same fragment, and as far from its home as the slot is from
   * the probe's home, when the code is exact).
   */
  private metaOf(hash: number, distance: number): number {
    const code = distance < this.dispOverflow ? distance : this.dispOverflow;
    const frag = this.fragShift < 32 ? hash >>> this.fragShift : 0;
    return (frag << this.displacementBits) | code;
  }

  /** The slot value of buffer `bufId` under `hash`, `distance` slots past its home. */
  private entryOf(hash: number, bufId: number, distance: number): number {
    return (this.metaOf(hash, distance) << this.idBits) | (bufId + 1);
  }

  /** BufTableLookup: the buffer id holding the tag, or -1. `hash` must be hashBufferTag(tag). */
  lookup(rel: number, fork: number, block: number, hash: number): number {
    const slot = this.lookupSlot(rel, fork, block, hash);
    return slot < 0 ? -1 : (this.slots[slot]! & this.idMask) - 1;
  }

  /**
   * The slot holding the tag's entry, or -1: BufTableLookup for a caller that deletes the entry
   * next (`deleteAt`) while its cache line is still loaded, as the lookup drop does.
   */
  lookupSlot(rel: number, fork: number, block: number, hash: number): number {
    const { slots, mask, tagRel, tagFork, tagBlock, idBits, idMask, dispOverflow } = this;
    let i = hash & mask;
    // One compare of the meta bits rejects entries with another home or fragment (see metaOf).
    let want = this.metaOf(hash, 0);
    for (let distance = 0; distance < this.capacity; distance++) {
      const entry = slots[i]!;
      if (entry === 0) return -1;
      if (entry >>> idBits === want) {
        const id = (entry & idMask) - 1;
        if (tagRel[id] === rel && tagBlock[id] === block && tagFork[id] === fork) return i;
      }
      i = (i + 1) & mask;
      if (distance + 1 <= dispOverflow) want = this.metaOf(hash, distance + 1);
    }
    assert(false, 'INV-BUF-2: buffer mapping table has no empty slot');
  }

  /** The buffer id an occupied slot points at (-1 for an empty slot). */
  idAt(slot: number): number {
    return (this.slots[slot]! & this.idMask) - 1;
  }

  /**
   * BufTableInsert: map the tag to `bufId`. Returns -1 on success or, like PostgreSQL, the id already
   * mapped to that tag (nothing is inserted then). The descriptor `bufId` must already carry the tag.
   */
  insert(rel: number, fork: number, block: number, hash: number, bufId: number): number {
    const { slots, mask, tagRel, tagFork, tagBlock, idBits, idMask, dispOverflow } = this;
    if (!(tagRel[bufId] === rel && tagFork[bufId] === fork && tagBlock[bufId] === block)) {
      fail(
        `INV-BUF-1: buffer ${bufId} must carry tag ${rel}/${fork}/${block} before it is inserted`,
      );
    }
    assert(
      this.count < this.nBuffers,
      'INV-BUF-2: buffer mapping table holds more entries than NBuffers',
    );
    let i = hash & mask;
    let want = this.metaOf(hash, 0);
    for (let distance = 0; ; distance++) {
      const entry = slots[i]!;
      if (entry === 0) {
        slots[i] = this.entryOf(hash, bufId, distance);
        this.count++;
        return -1;
      }
      const id = (entry & idMask) - 1;
      if (!(id !== bufId)) fail(`INV-BUF-2: buffer ${bufId} is already in the mapping table`);
      if (
        entry >>> idBits === want &&
        tagRel[id] === rel &&
        tagBlock[id] === block &&
        tagFork[id] === fork
      )
        return id;
      i = (i + 1) & mask;
      if (distance + 1 <= dispOverflow) want = this.metaOf(hash, distance + 1);
    }
  }

  /**
   * BufTableDelete: remove the tag's entry (which must exist: "shared buffer hash table corrupted"
   * otherwise), then shift later members of the probe cluster back (`deleteAt`).
   */
  delete(rel: number, fork: number, block: number, hash: number): void {
    const { slots, mask, tagRel, tagFork, tagBlock, idBits, idMask, dispOverflow } = this;
    let i = hash & mask;
    let want = this.metaOf(hash, 0);
    for (let distance = 0; ; distance++) {
      const entry = slots[i]!;
      assert(
        entry !== 0 && distance < this.capacity,
        'INV-BUF-2: shared buffer hash table corrupted',
      );
      if (entry >>> idBits === want) {
        const id = (entry & idMask) - 1;
        if (tagRel[id] === rel && tagBlock[id] === block && tagFork[id] === fork) break;
      }
      i = (i + 1) & mask;
      if (distance + 1 <= dispOverflow) want = this.metaOf(hash, distance + 1);
    }
    this.deleteAt(i);
  }

  /**
   * Remove the entry in slot `i` (found by `lookupSlot` since the table last changed), then shift
   * later members of the probe cluster back so no lookup meets a hole. The members'
   * displacements say which may move, so the shift reads no descriptor (only an entry whose
   * displacement overflowed its field is re-hashed from its tag). The table left behind is the one
   * the other entries would have built had this one never been inserted (linear probing with
   * backward shift), so the order of deletions does not matter to the final layout.
   */
  deleteAt(i: number): void {
    const { slots, mask, tagRel, tagFork, tagBlock, idBits, idMask, dispOverflow } = this;
    assert(slots[i] !== 0, 'INV-BUF-2: shared buffer hash table corrupted');
    // Backward-shift deletion: a later cluster member at j, d slots past its home, moves into the
    // hole at i unless its home is cyclically in (i, j], i.e. unless d < gap = j − i; it is then
    // d − gap past its home. Stop at the first empty slot.
    const codeMask = dispOverflow << idBits;
    let j = i;
    for (;;) {
      j = (j + 1) & mask;
      const entry = slots[j]!;
      if (entry === 0) break;
      const gap = (j - i) & mask;
      let d = (entry & codeMask) >>> idBits;
      if (d === dispOverflow) {
        const id = (entry & idMask) - 1;
        d = (j - hashBufferTag(tagRel[id]!, tagFork[id]!, tagBlock[id]!)) & mask;
      }
      if (d >= gap) {
        const moved = d - gap;
        slots[i] = (entry & ~codeMask) | ((moved < dispOverflow ? moved : dispOverflow) << idBits);
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
      if (!(entry === this.entryOf(hash, id, (s - hash) & mask)))
        fail(`INV-BUF-2: slot ${s} holds a hash fragment or displacement that is not its tag's`);
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
