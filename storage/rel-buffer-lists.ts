/**
 * Per-relation doubly linked lists of buffers, in typed arrays: the data structure of seed 000's
 * first design (`rel-list`, maintained in the buffer pool on every allocation, retag and
 * invalidation) and of the reviewer's counter-proposal (`recovery-hash`, built by one full scan
 * in the startup process and then kept current by its own reads).
 *
 * Entry points: `RelBufferLists` — `tagged` / `untagged` (the pool's `BufferTagObserver` hooks),
 * `head`, `next` (walk a relation's list), `relations`, `checkIntegrity`, `byteLength`,
 * `relBufferListsBytes`.
 *
 * Layout (the patch's: two 4-byte links per buffer plus a hash from relation to list head):
 *   - `next`, `prev`: Int32Array(NBuffers), buffer ids, -1 = end of list / not listed;
 *   - `relKey`: Uint32Array(capacity), relfilenumber of the slot, 0 = empty (INV-BUF-3: 0 is never a
 *     relation); `relHead`: Int32Array(capacity), first buffer of that relation's list.
 * The relation table is open addressing with linear probing and backward-shift deletion, sized
 * like the mapping table (power of two ≥ 1.5 × NBuffers) so that it can hold one relation per
 * buffer, the worst case: PostgreSQL sizes shared memory at start, so the patch had to as well.
 * A relation's entry exists exactly while its list is non-empty (INV-LIST-1).
 *
 * New buffers go at the head (O(1)); unlinking is O(1) plus one table probe when the buffer was
 * the head. Every relation with a tagged buffer has exactly the tagged buffers of that relation
 * on its list, all forks mixed, in no particular order (INV-LIST-2, `checkIntegrity`).
 */
import { assert, fail } from '../common/assert.ts';
import { fmix32 } from '../common/hash.ts';
import { bufTableCapacity } from './buf-table.ts';

/** End of a list / not on any list. */
export const LIST_END = -1;

/** Bytes of RelBufferLists for a pool of `nBuffers`: two Int32 links per buffer + 8 bytes per table slot. */
export function relBufferListsBytes(nBuffers: number): number {
  return 8 * nBuffers + 8 * bufTableCapacity(nBuffers);
}

export class RelBufferLists {
  readonly nBuffers: number;
  readonly next: Int32Array;
  readonly prev: Int32Array;
  readonly relKey: Uint32Array;
  readonly relHead: Int32Array;
  readonly capacity: number;
  private readonly mask: number;
  /** Relations with a non-empty list. */
  count = 0;
  /** Links and unlinks done (the maintenance the allocation path pays). */
  maintenanceOps = 0;
  /** Relation-table slots visited by those operations and by `head`. */
  tableProbes = 0;

  constructor(nBuffers: number) {
    if (!(Number.isSafeInteger(nBuffers) && nBuffers >= 1))
      fail(`INV-LIST-0: bad NBuffers ${nBuffers}`);
    this.nBuffers = nBuffers;
    this.next = new Int32Array(nBuffers).fill(LIST_END);
    this.prev = new Int32Array(nBuffers).fill(LIST_END);
    this.capacity = bufTableCapacity(nBuffers);
    this.mask = this.capacity - 1;
    this.relKey = new Uint32Array(this.capacity);
    this.relHead = new Int32Array(this.capacity);
  }

  get byteLength(): number {
    return (
      this.next.byteLength + this.prev.byteLength + this.relKey.byteLength + this.relHead.byteLength
    );
  }

  /** Slot holding `rel`, or the empty slot where it would go (relKey 0 there). */
  private slotOf(rel: number): number {
    const { relKey, mask } = this;
    let i = fmix32(rel) & mask;
    let probes = 1;
    for (;;) {
      const k = relKey[i];
      if (k === rel || k === 0) break;
      i = (i + 1) & mask;
      probes++;
    }
    this.tableProbes += probes;
    return i;
  }

  /** First buffer on `rel`'s list, or LIST_END. */
  head(rel: number): number {
    const s = this.slotOf(rel);
    return this.relKey[s] === rel ? this.relHead[s]! : LIST_END;
  }

  /** Buffer `id` now carries a tag of relation `rel` (after BufferAlloc's retag): push it on `rel`'s list. */
  tagged(id: number, rel: number): void {
    const { next, prev, relKey, relHead } = this;
    // The caller guarantees `id` is on no list (it was untagged first); checkIntegrity verifies.
    const s = this.slotOf(rel);
    if (relKey[s] === 0) {
      assert(this.count < this.capacity - 1, 'INV-LIST-1: relation table full');
      relKey[s] = rel;
      next[id] = LIST_END;
      this.count++;
    } else {
      const old = relHead[s]!;
      next[id] = old;
      prev[old] = id;
    }
    prev[id] = LIST_END;
    relHead[s] = id;
    this.maintenanceOps++;
  }

  /** Buffer `id` loses its tag of relation `rel` (eviction or InvalidateBuffer): unlink it. */
  untagged(id: number, rel: number): void {
    const { next, prev } = this;
    const p = prev[id]!;
    const n = next[id]!;
    if (p !== LIST_END) {
      next[p] = n;
    } else {
      const s = this.slotOf(rel);
      if (!(this.relKey[s] === rel && this.relHead[s] === id))
        fail(`INV-LIST-2: buffer ${id} is not the head of ${rel}'s list`);
      if (n !== LIST_END) this.relHead[s] = n;
      else this.deleteSlot(s);
    }
    if (n !== LIST_END) prev[n] = p;
    next[id] = LIST_END;
    prev[id] = LIST_END;
    this.maintenanceOps++;
  }

  /** Backward-shift deletion of slot `i` (no tombstones, as in buf-table.ts). */
  private deleteSlot(i: number): void {
    const { relKey, relHead, mask } = this;
    let j = i;
    for (;;) {
      j = (j + 1) & mask;
      const k = relKey[j]!;
      if (k === 0) break;
      const home = fmix32(k) & mask;
      const stays = i <= j ? home > i && home <= j : home > i || home <= j;
      if (!stays) {
        relKey[i] = k;
        relHead[i] = relHead[j]!;
        i = j;
      }
    }
    relKey[i] = 0;
    relHead[i] = 0;
    this.count--;
  }

  /** Relations with a non-empty list, ascending. For tests and tools. */
  relations(): number[] {
    const out: number[] = [];
    for (let s = 0; s < this.capacity; s++) if (this.relKey[s] !== 0) out.push(this.relKey[s]!);
    return out.sort((a, b) => a - b);
  }

  /**
   * INV-LIST-1/2 against the pool's descriptors: every relation's list holds exactly its tagged
   * buffers (checked by counting), links are mutual, lists are acyclic, no empty list has an
   * entry, and every tagged buffer is on its relation's list. O(NBuffers + capacity); for tests.
   */
  checkIntegrity(tagRel: Uint32Array, isTagged: (id: number) => boolean): void {
    const { next, prev, nBuffers } = this;
    const expected = new Map<number, number>();
    for (let id = 0; id < nBuffers; id++) {
      if (isTagged(id)) expected.set(tagRel[id]!, (expected.get(tagRel[id]!) ?? 0) + 1);
      else if (!(next[id] === LIST_END && prev[id] === LIST_END))
        fail(`INV-LIST-2: untagged buffer ${id} is linked`);
    }
    let live = 0;
    for (let s = 0; s < this.capacity; s++) {
      const rel = this.relKey[s]!;
      if (rel === 0) continue;
      live++;
      let k = fmix32(rel) & this.mask;
      while (k !== s) {
        if (!(this.relKey[k] !== 0))
          fail(`INV-LIST-1: relation ${rel} in slot ${s} is cut off from its home slot`);
        k = (k + 1) & this.mask;
      }
      let n = 0;
      let before = LIST_END;
      for (let id = this.relHead[s]!; id !== LIST_END; id = next[id]!) {
        if (!(n < nBuffers)) fail(`INV-LIST-2: list of ${rel} is cyclic`);
        if (!(prev[id] === before))
          fail(`INV-LIST-2: buffer ${id} prev link ${prev[id]} ≠ ${before}`);
        if (!(isTagged(id) && tagRel[id] === rel))
          fail(`INV-LIST-2: buffer ${id} on ${rel}'s list has tag rel ${tagRel[id]}`);
        before = id;
        n++;
      }
      if (!(n > 0)) fail(`INV-LIST-1: relation ${rel} has an entry but an empty list`);
      if (!(expected.get(rel) === n))
        fail(`INV-LIST-2: list of ${rel} has ${n} buffers, ${expected.get(rel) ?? 0} are tagged`);
    }
    if (!(live === this.count && live === expected.size)) {
      fail(
        `INV-LIST-1: ${live} relation entries, count ${this.count}, ${expected.size} relations buffered`,
      );
    }
  }
}
