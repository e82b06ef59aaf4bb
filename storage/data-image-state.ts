/**
 * The data image writer's state between images (data-image.ts writes images, data-image-read.ts
 * loads them): the index of every relation as one Float64Array ascending by relfilenumber
 * (INV-IMAGE-3, storage/README "The data image"), and per-pack relation counts.
 */
import { fail } from '../common/assert.ts';
import type { RelFileNumber } from '../wal/records.ts';

/**
 * A file of the image's directory: `base` is that directory as path.join made it (normalized, never
 * the root) and `name` a file name without a slash, so joining is concatenation. path.join's
 * normalization of every file name of every image was half a percent of a simulated seed.
 */
export function imageFile(base: string, name: string): string {
  return `${base}/${name}`;
}

/** Float64s per relation in the index: [relfilenumber, pack generation, offset, length]. */
export const INDEX_STRIDE = 4;

/**
 * What the current image on disk holds, kept in memory so the next image writes only changes.
 * The per-relation part is the index file's content itself, one Float64Array ascending by
 * relfilenumber (INV-IMAGE-3), not a JS object per relation: at 100,000 tables a Map of entry
 * objects, partly rebuilt by every image, was what the young-generation scavenger copied.
 */
export class ImageState {
  constructor(
    public generation: number,
    /** [rel, pack, offset, length] per relation, ascending by rel; replaced, never mutated. */
    public index: Float64Array,
    /** Relations per pack generation, live and ever written (a few packs, not per relation). */
    readonly packLive: Map<number, number>,
    readonly packTotal: Map<number, number>,
    /** Files of the current image other than packs (index, smgr, clog), removed when replaced. */
    public files: string[],
    /** Format-1 files to remove once a format-2 image is in place. */
    public legacyFiles: string[],
  ) {}

  static empty(): ImageState {
    return new ImageState(0, new Float64Array(0), new Map(), new Map(), [], []);
  }

  /** Relations in the image. */
  get size(): number {
    return this.index.length / INDEX_STRIDE;
  }

  /** The position of `rel` in the index (binary search), or -1. */
  find(rel: RelFileNumber): number {
    const index = this.index;
    let lo = 0;
    let hi = this.size - 1;
    while (lo <= hi) {
      const mid = (lo + hi) >>> 1;
      const r = index[mid * INDEX_STRIDE]!;
      if (r === rel) return mid;
      if (r < rel) lo = mid + 1;
      else hi = mid - 1;
    }
    return -1;
  }

  /** The pack generation of the relation at position `pos`. */
  packAt(pos: number): number {
    return this.index[pos * INDEX_STRIDE + 1]!;
  }
}

/**
 * The index ascending by relfilenumber (INV-IMAGE-3): images written before the state was kept
 * sorted list carried-over relations first, then the pack's; the file format is the same, so such
 * an index is sorted here, once, at load. A relation listed twice fails INV-IMAGE-1.
 */
export function ascendingIndex(index: Float64Array): Float64Array {
  const n = index.length / INDEX_STRIDE;
  let sorted = true;
  for (let i = 1; i < n && sorted; i++)
    sorted = index[(i - 1) * INDEX_STRIDE]! < index[i * INDEX_STRIDE]!;
  if (sorted) return index;
  const order = Uint32Array.from({ length: n }, (_, i) => i).sort(
    (x, y) => index[x * INDEX_STRIDE]! - index[y * INDEX_STRIDE]!,
  );
  const out = new Float64Array(index.length);
  for (let i = 0; i < n; i++) {
    out.set(
      index.subarray(order[i]! * INDEX_STRIDE, (order[i]! + 1) * INDEX_STRIDE),
      i * INDEX_STRIDE,
    );
    if (i > 0)
      if (!(out[(i - 1) * INDEX_STRIDE]! < out[i * INDEX_STRIDE]!))
        fail(`INV-IMAGE-1: relation ${out[i * INDEX_STRIDE]} is listed twice in the index`);
  }
  return out;
}
