/**
 * Helpers the storage unit tests share: run a drop's steps to the end counting its yields, and a
 * node's heap content as one comparable string.
 */
import type { NodeStorage } from '../../storage/node-storage.ts';

/** Run `g` to completion; its return value and how many times it yielded (its steps − 1). */
export function drainSteps<T>(g: Generator<void, T, void>): { value: T; yields: number } {
  let yields = 0;
  for (;;) {
    const r = g.next();
    if (r.done) return { value: r.value, yields };
    yields++;
  }
}

/** Every relation of `st`'s heap with its size and serialized pages, as JSON. */
export function heapContentOf(st: NodeStorage): string {
  return JSON.stringify(
    st.heap
      .relations()
      .map((r) => [
        r,
        st.heap.nblocks(r),
        Buffer.from(st.heap.serializeRelation(r)).toString('base64'),
      ]),
  );
}
