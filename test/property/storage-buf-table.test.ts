/**
 * The buffer mapping table against a model, under random workloads (fast-check).
 * Method: a small table (16–64 buffers, so clusters collide and wrap; displacement fields of 1–4
 * bits, so the overflow code is common) driven by random inserts, deletes by tag (`delete`) and
 * deletes at the slot a lookup found (`lookupSlot` + `deleteAt`, the lookup drop's way); after
 * every step the integrity check holds and the tag's lookup agrees with a Map (every tag's, every
 * 25 steps and at the end). Then the layout
 * property the lookup drop relies on (INV-BUF-8): deleting a set of entries in any order, by
 * either way, leaves the same slots as inserting only the survivors in their original order.
 */
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { BufTable, hashBufferTag } from '../../storage/buf-table.ts';

const REL = 16384;
/** Blocks drawn from a range a few times NBuffers, so a table fills and empties repeatedly. */
const BLOCK_RANGE = 200;

class Rig {
  readonly tagRel: Uint32Array;
  readonly tagFork: Uint8Array;
  readonly tagBlock: Uint32Array;
  readonly table: BufTable;
  /** block -> buffer id of the live entries, and the ids not in use. */
  readonly live = new Map<number, number>();
  readonly freeIds: number[];

  constructor(nBuffers: number, displacementBits: number) {
    this.tagRel = new Uint32Array(nBuffers);
    this.tagFork = new Uint8Array(nBuffers);
    this.tagBlock = new Uint32Array(nBuffers);
    this.table = new BufTable(nBuffers, this.tagRel, this.tagFork, this.tagBlock, displacementBits);
    this.freeIds = Array.from({ length: nBuffers }, (_, i) => nBuffers - 1 - i);
  }

  insert(block: number): void {
    const id = this.freeIds.pop()!;
    this.tagRel[id] = REL;
    this.tagFork[id] = 0;
    this.tagBlock[id] = block;
    expect(this.table.insert(REL, 0, block, hashBufferTag(REL, 0, block), id)).toBe(-1);
    this.live.set(block, id);
  }

  remove(block: number, atSlot: boolean): void {
    const id = this.live.get(block)!;
    const hash = hashBufferTag(REL, 0, block);
    if (atSlot) {
      const slot = this.table.lookupSlot(REL, 0, block, hash);
      expect(this.table.idAt(slot)).toBe(id);
      this.table.deleteAt(slot);
    } else {
      this.table.delete(REL, 0, block, hash);
    }
    // The descriptor is cleared after the delete, as InvalidateBuffer does (INV-BUF-1).
    this.tagRel[id] = 0;
    this.tagBlock[id] = 0;
    this.live.delete(block);
    this.freeIds.push(id);
  }

  /** The integrity check, the entry count, and lookups of `blocks` (every block by default). */
  check(blocks: Iterable<number> = Array.from({ length: BLOCK_RANGE }, (_, b) => b)): void {
    this.table.checkIntegrity(() => {});
    expect(this.table.count).toBe(this.live.size);
    for (const b of blocks) {
      const hash = hashBufferTag(REL, 0, b);
      const id = this.live.get(b) ?? -1;
      expect(this.table.lookup(REL, 0, b, hash)).toBe(id);
      const slot = this.table.lookupSlot(REL, 0, b, hash);
      expect(slot < 0 ? -1 : this.table.idAt(slot)).toBe(id);
    }
  }
}

const shape = fc.record({
  nBuffers: fc.integer({ min: 16, max: 64 }),
  displacementBits: fc.integer({ min: 1, max: 4 }),
});

describe('BufTable (property)', () => {
  it('agrees with a Map under random inserts, deletes by tag and deletes at a found slot', () => {
    const step = fc.record({
      block: fc.integer({ min: 0, max: BLOCK_RANGE - 1 }),
      atSlot: fc.boolean(),
    });
    fc.assert(
      fc.property(shape, fc.array(step, { minLength: 1, maxLength: 400 }), (s, steps) => {
        const rig = new Rig(s.nBuffers, s.displacementBits);
        steps.forEach(({ block, atSlot }, k) => {
          if (rig.live.has(block)) rig.remove(block, atSlot);
          else if (rig.freeIds.length > 0) rig.insert(block);
          // Every step: integrity and the block itself; every 25th and the last: every block.
          rig.check(k % 25 === 24 || k === steps.length - 1 ? undefined : [block]);
        });
      }),
      { numRuns: 100 },
    );
  });

  it('leaves the same slots whatever the order of deletions: those of the survivors inserted alone', () => {
    const draws = fc.array(fc.nat(), { minLength: 64, maxLength: 64 });
    const run = fc
      .tuple(shape, fc.uniqueArray(fc.integer({ min: 0, max: BLOCK_RANGE - 1 }), { minLength: 1 }))
      .chain(([s, blocks]) => {
        const inserted = blocks.slice(0, s.nBuffers);
        return fc.record({
          s: fc.constant(s),
          inserted: fc.constant(inserted),
          doomed: fc.subarray(inserted),
          shuffles: fc.tuple(draws, draws),
          atSlot: fc.tuple(fc.boolean(), fc.boolean()),
        });
      });
    fc.assert(
      fc.property(run, ({ s, inserted, doomed, shuffles, atSlot }) => {
        const layouts = [0, 1].map((k) => {
          const rig = new Rig(s.nBuffers, s.displacementBits);
          for (const b of inserted) rig.insert(b);
          // Fisher–Yates over the doomed blocks with this order's stream of draws.
          const order = [...doomed];
          for (let i = order.length - 1; i > 0; i--) {
            const j = shuffles[k]![i]! % (i + 1);
            [order[i], order[j]] = [order[j]!, order[i]!];
          }
          for (const b of order) rig.remove(b, atSlot[k]!);
          rig.check();
          return { slots: Array.from(rig.table.slots) };
        });
        // The survivors alone, in their original order, with the same buffer ids.
        const alone = new Rig(s.nBuffers, s.displacementBits);
        const doomedSet = new Set(doomed);
        for (const b of inserted) {
          const id = alone.freeIds.pop()!;
          if (doomedSet.has(b)) continue;
          alone.tagRel[id] = REL;
          alone.tagBlock[id] = b;
          alone.table.insert(REL, 0, b, hashBufferTag(REL, 0, b), id);
        }
        expect(layouts[0]!.slots).toEqual(layouts[1]!.slots);
        expect(layouts[0]!.slots).toEqual(Array.from(alone.table.slots));
      }),
      { numRuns: 150 },
    );
  });
});
