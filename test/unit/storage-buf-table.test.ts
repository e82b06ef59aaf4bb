/**
 * The buffer mapping table keeps PostgreSQL's BufTable semantics under heavy collisions.
 * Method: a tiny table (NBuffers 16, 32 slots) with tags chosen by brute force to share a home
 * slot (including the last slot, so clusters wrap), then insert/lookup/delete in every order with
 * the integrity check after each step; plus the hash's partition spread.
 */
import { describe, expect, it } from 'vitest';
import { InvariantViolation } from '../../common/assert.ts';
import {
  BufTable,
  NUM_BUFFER_PARTITIONS,
  bufMappingPartition,
  bufTableCapacity,
  hashBufferTag,
} from '../../storage/buf-table.ts';

const REL = 16384;

function makeTable(nBuffers = 16, displacementBits?: number) {
  const tagRel = new Uint32Array(nBuffers);
  const tagFork = new Uint8Array(nBuffers);
  const tagBlock = new Uint32Array(nBuffers);
  const table = new BufTable(nBuffers, tagRel, tagFork, tagBlock, displacementBits);
  const put = (id: number, block: number) => {
    tagRel[id] = REL;
    tagFork[id] = 0;
    tagBlock[id] = block;
    return table.insert(REL, 0, block, hashBufferTag(REL, 0, block), id);
  };
  const get = (block: number) => table.lookup(REL, 0, block, hashBufferTag(REL, 0, block));
  const del = (block: number) => table.delete(REL, 0, block, hashBufferTag(REL, 0, block));
  const check = () => table.checkIntegrity(() => {});
  return { table, put, get, del, check, tagRel, tagBlock };
}

/** Blocks whose home slot (in a table of `capacity`) is `home`. */
function blocksWithHome(capacity: number, home: number, count: number): number[] {
  const out: number[] = [];
  for (let b = 0; out.length < count; b++)
    if ((hashBufferTag(REL, 0, b) & (capacity - 1)) === home) out.push(b);
  return out;
}

describe('BufTable', () => {
  it('sizes the table to a power of two at least 1.5 × NBuffers', () => {
    expect(bufTableCapacity(16)).toBe(32);
    expect(bufTableCapacity(16_384)).toBe(32_768);
    expect(bufTableCapacity(13_107_200)).toBe(33_554_432);
    expect(bufTableCapacity(134_217_728)).toBe(268_435_456);
  });

  it('finds, misses and deletes like BufTableLookup/Insert/Delete', () => {
    const t = makeTable();
    expect(t.put(0, 7)).toBe(-1);
    expect(t.get(7)).toBe(0);
    expect(t.get(8)).toBe(-1);
    t.del(7);
    expect(t.get(7)).toBe(-1);
    expect(t.table.count).toBe(0);
  });

  it('returns the existing buffer id when the tag is already mapped', () => {
    const t = makeTable();
    t.put(3, 42);
    expect(t.put(5, 42)).toBe(3);
    expect(t.table.count).toBe(1);
  });

  it('refuses to delete an absent tag: shared buffer hash table corrupted', () => {
    const t = makeTable();
    t.put(0, 1);
    expect(() => t.del(2)).toThrow(InvariantViolation);
    expect(() => t.del(2)).toThrow(/shared buffer hash table corrupted/);
  });

  it('backward-shifts a colliding cluster on delete, in every deletion order, across the wrap', () => {
    const capacity = bufTableCapacity(16);
    for (const home of [5, capacity - 1]) {
      const blocks = [
        ...blocksWithHome(capacity, home, 4),
        ...blocksWithHome(capacity, (home + 1) % capacity, 2),
      ];
      const orders = [
        [0, 1, 2, 3, 4, 5],
        [5, 4, 3, 2, 1, 0],
        [1, 4, 0, 5, 3, 2],
        [2, 0, 5, 1, 4, 3],
      ];
      for (const order of orders) {
        const t = makeTable();
        blocks.forEach((b, id) => expect(t.put(id, b)).toBe(-1));
        t.check();
        const gone = new Set<number>();
        for (const k of order) {
          t.del(blocks[k]!);
          gone.add(k);
          t.check();
          blocks.forEach((b, id) => expect(t.get(b)).toBe(gone.has(id) ? -1 : id));
        }
        expect(Array.from(t.table.slots).every((s) => s === 0)).toBe(true);
      }
    }
  });

  it('survives a full table of random churn', () => {
    const t = makeTable(16);
    const live = new Map<number, number>(); // block -> id
    const freeIds = Array.from({ length: 16 }, (_, i) => i);
    let seed = 1;
    const rand = (n: number) => ((seed = (Math.imul(seed, 1103515245) + 12345) >>> 0) >>> 8) % n;
    for (let step = 0; step < 5000; step++) {
      const block = rand(40);
      if (live.has(block)) {
        t.del(block);
        freeIds.push(live.get(block)!);
        live.delete(block);
      } else if (freeIds.length > 0) {
        const id = freeIds.pop()!;
        expect(t.put(id, block)).toBe(-1);
        live.set(block, id);
      }
      if (step % 50 === 0) t.check();
    }
    for (let b = 0; b < 40; b++) expect(t.get(b)).toBe(live.get(b) ?? -1);
  });

  it('counts partition locks and spreads sequential blocks over all 128 partitions', () => {
    const t = makeTable();
    const seen = new Set<number>();
    for (let b = 0; b < 4096; b++) {
      const h = hashBufferTag(REL, 0, b);
      seen.add(bufMappingPartition(h));
      t.table.lockShared(h);
    }
    expect(seen.size).toBe(NUM_BUFFER_PARTITIONS);
    expect(t.table.sharedLockCount).toBe(4096);
    expect(t.table.partitionLocksShared.reduce((a, b) => a + b, 0)).toBe(4096);
    expect(hashBufferTag(REL, 0, 1)).not.toBe(hashBufferTag(REL, 1, 1));
    expect(hashBufferTag(REL, 0, 1)).not.toBe(hashBufferTag(REL + 1, 0, 1));
  });

  it('keeps displacements that overflow their field correct (re-hashed on delete), in every order', () => {
    // 1 and 2 displacement bits: codes 0 (resp. 0..2) exact, the top code "that many or more", so
    // a 16-entry cluster is mostly overflowed entries whose home the delete re-derives from the tag.
    const capacity = bufTableCapacity(16);
    for (const bits of [1, 2, 4]) {
      const blocks = [
        ...blocksWithHome(capacity, capacity - 3, 10),
        ...blocksWithHome(capacity, capacity - 1, 3),
        ...blocksWithHome(capacity, 2, 3),
      ];
      let seed = bits;
      const rand = (n: number) => ((seed = (Math.imul(seed, 1103515245) + 12345) >>> 0) >>> 8) % n;
      for (let round = 0; round < 20; round++) {
        const t = makeTable(16, bits);
        expect(t.table.displacementBits).toBe(bits);
        blocks.forEach((b, id) => expect(t.put(id, b)).toBe(-1));
        t.check();
        const order = blocks.map((_, k) => k);
        for (let k = order.length - 1; k > 0; k--) {
          const r = rand(k + 1);
          [order[k], order[r]] = [order[r]!, order[k]!];
        }
        const gone = new Set<number>();
        for (const k of order) {
          t.del(blocks[k]!);
          gone.add(k);
          t.check();
          blocks.forEach((b, id) => expect(t.get(b)).toBe(gone.has(id) ? -1 : id));
        }
        expect(Array.from(t.table.slots).every((s) => s === 0)).toBe(true);
      }
    }
  });
});
