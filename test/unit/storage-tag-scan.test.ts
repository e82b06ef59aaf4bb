/**
 * The WebAssembly SIMD pre-check of full-scan drops (storage/tag-scan.ts) against the JavaScript
 * one: the same pools dropped through either give the same counters, the same descriptors, the
 * same freelist order (buffers invalidated in the same order) and the same yields, for matches at
 * the first and last descriptors, on block and chunk boundaries, in pools whose size is no multiple
 * of the block, and for relfilenumbers with the top bit set (signed in WebAssembly's i32).
 */
import { describe, expect, it } from 'vitest';
import { BufferPool } from '../../storage/buffer-pool.ts';
import {
  fullScanDropRelFileNodeBuffers,
  fullScanDropRelFileNodeBuffersSteps,
  fullScanDropRelsAllBuffers,
  fullScanDropRelsAllBuffersSteps,
  HEADER_LOCKS_PER_STEP,
} from '../../storage/drop-full-scan.ts';
import { allocateTagColumn, TAG_BLOCK, WASM_TAG_MIN_BUFFERS } from '../../storage/tag-scan.ts';
import { MAIN_FORKNUM, type ForkNumber } from '../../wal/records.ts';
import { drainSteps } from '../helpers/storage.ts';

const HIGH_REL = 0xfffffff0;

/** A deterministic pseudo-random sequence (xorshift32). */
function rng(seed: number): () => number {
  let x = seed | 0 || 1;
  return () => {
    x ^= x << 13;
    x ^= x >>> 17;
    x ^= x << 5;
    return (x >>> 0) / 0x100000000;
  };
}

/** The same reads into a pool with the WebAssembly column and one with the plain column. */
function twinPools(nBuffers: number, reads: Array<[number, ForkNumber, number]>) {
  const make = (wasmTags: boolean) => {
    const pool = new BufferPool(nBuffers, { wasmTags });
    for (const [rel, fork, block] of reads) pool.accessBlock(rel, fork, block);
    return pool;
  };
  const wasm = make(true);
  const js = make(false);
  expect(wasm.findTagBlock).not.toBeNull();
  expect(js.findTagBlock).toBeNull();
  return { wasm, js };
}

function expectSamePools(a: BufferPool, b: BufferPool): void {
  expect(Array.from(a.tagRel)).toEqual(Array.from(b.tagRel));
  expect(a.bufferedBlocks()).toEqual(b.bufferedBlocks());
  expect(Array.from(a.freeNext)).toEqual(Array.from(b.freeNext));
  expect([a.firstFreeBuffer, a.lastFreeBuffer]).toEqual([b.firstFreeBuffer, b.lastFreeBuffer]);
  expect(a.counters).toEqual(b.counters);
  a.checkConsistency();
  b.checkConsistency();
}

describe('tag column', () => {
  it('lives in WebAssembly memory from WASM_TAG_MIN_BUFFERS buffers on, zero-filled', () => {
    expect(allocateTagColumn(WASM_TAG_MIN_BUFFERS - 1).findBlock).toBeNull();
    const big = allocateTagColumn(WASM_TAG_MIN_BUFFERS);
    expect(big.findBlock).not.toBeNull();
    expect(big.tagRel.length).toBe(WASM_TAG_MIN_BUFFERS);
    expect(big.tagRel.every((t) => t === 0)).toBe(true);
  });

  it('findBlock stops at the first block holding the tag, or where no whole block is left', () => {
    const { tagRel, findBlock } = allocateTagColumn(100, true);
    const find = findBlock!;
    expect(find(0, 100, 7)).toBe(96); // nothing: 96..99 is less than a block
    tagRel[37] = 7;
    expect(find(0, 100, 7)).toBe(32);
    expect(find(30, 100, 7)).toBe(30); // [30, 46) holds 37
    expect(find(38, 100, 7)).toBe(86); // steps of TAG_BLOCK from 38: 38, 54, 70, 86 (86+16 > 100)
    tagRel[99] = HIGH_REL;
    expect(find(0, 100, HIGH_REL)).toBe(96);
    expect(find(0, 99, HIGH_REL)).toBe(96);
    expect(find(84, 100, HIGH_REL)).toBe(84);
    expect(TAG_BLOCK).toBe(16);
  });
});

describe('full-scan drops: SIMD pre-check = JavaScript pre-check', () => {
  it('random pools: same counters, descriptors, freelist order, for both scans', () => {
    const next = rng(24);
    for (const nBuffers of [1, 15, 16, 17, 63, 64, 65, 1000, 4099]) {
      const rels = [16384, 16385, HIGH_REL, 7];
      const reads: Array<[number, ForkNumber, number]> = [];
      for (let i = 0; i < Math.min(nBuffers, 1200); i++)
        reads.push([
          rels[Math.floor(next() * rels.length)]!,
          (next() < 0.8 ? 0 : 1) as ForkNumber,
          i,
        ]);
      const { wasm, js } = twinPools(nBuffers, reads);
      for (const rel of rels) {
        const chunk = 1 + Math.floor(next() * 600);
        const a = drainSteps(
          fullScanDropRelFileNodeBuffersSteps(wasm, rel, [MAIN_FORKNUM, 1], [3, 5], chunk),
        );
        const b = drainSteps(
          fullScanDropRelFileNodeBuffersSteps(js, rel, [MAIN_FORKNUM, 1], [3, 5], chunk),
        );
        expect(a).toEqual(b);
        expectSamePools(wasm, js);
      }
      for (const rel of rels) {
        const chunk = 1 + Math.floor(next() * 600);
        const a = drainSteps(fullScanDropRelsAllBuffersSteps(wasm, [rel], chunk));
        const b = drainSteps(fullScanDropRelsAllBuffersSteps(js, [rel], chunk));
        expect(a).toEqual(b);
        expect(a.value.scanned).toBe(nBuffers);
        expectSamePools(wasm, js);
      }
      expect(wasm.usedBuffers).toBe(0);
    }
  });

  it('matches at the first and last descriptor and on every block boundary', () => {
    const n = 20 * TAG_BLOCK + 5;
    const reads: Array<[number, ForkNumber, number]> = [];
    for (let id = 0; id < n; id++)
      reads.push([
        id === 0 || id === n - 1 || id % TAG_BLOCK === 15 || id % TAG_BLOCK === 0 ? 16384 : 16385,
        0,
        id,
      ]);
    const { wasm, js } = twinPools(n, reads);
    const a = fullScanDropRelsAllBuffers(wasm, [16384]);
    expect(a).toEqual(fullScanDropRelsAllBuffers(js, [16384]));
    expect(a.invalidated).toBe(reads.filter((r) => r[0] === 16384).length);
    expectSamePools(wasm, js);
    const b = fullScanDropRelFileNodeBuffers(wasm, 16385, [MAIN_FORKNUM], [0]);
    expect(b).toEqual(fullScanDropRelFileNodeBuffers(js, 16385, [MAIN_FORKNUM], [0]));
    expect(wasm.usedBuffers).toBe(0);
    expectSamePools(wasm, js);
  });

  it('a relation filling whole chunks yields every HEADER_LOCKS_PER_STEP hits, as the JavaScript scan', () => {
    const n = 3 * HEADER_LOCKS_PER_STEP + 100;
    const reads: Array<[number, ForkNumber, number]> = [];
    for (let b = 0; b < n; b++) reads.push([16384, 0, b]);
    for (let b = 0; b < 50; b++) reads.push([16385, 0, b]);
    const { wasm, js } = twinPools(n + 50, reads);
    const a = drainSteps(
      fullScanDropRelFileNodeBuffersSteps(wasm, 16384, [MAIN_FORKNUM], [0], 1 << 20),
    );
    const b = drainSteps(
      fullScanDropRelFileNodeBuffersSteps(js, 16384, [MAIN_FORKNUM], [0], 1 << 20),
    );
    expect(a.yields).toBe(3);
    expect(a).toEqual(b);
    expect(a.value.invalidated).toBe(n);
    expectSamePools(wasm, js);
  });
});
