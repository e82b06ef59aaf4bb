/**
 * Dropping a relation's buffers by walking its list of buffers (storage/rel-buffer-lists.ts): the
 * drop half of the `rel-list` strategy (seed 000's first design, lists in the pool maintained on
 * every allocation) and of `recovery-hash` (the reviewer's counter-proposal, lists built by one
 * full scan in the startup process at its first drop). Entry points: `listDropRelFileNodeBuffersSteps`,
 * `listDropRelsAllBuffersSteps`, `recoveryHashOf`, `buildRecoveryHashSteps`, `releaseRecoveryHash`.
 *
 * A walk visits exactly the relation's tagged buffers (all forks), locks each header to re-check
 * the tag like the full scan's locked re-check (counted in `headerLocks`), collects the victims,
 * and invalidates them afterwards in ascending buffer id order (INV-BUF-8), so the pool after a
 * drop is identical whichever strategy ran. Invalidating unlinks each victim from its list
 * through the pool's tag observer; nothing is unlinked while a list is being walked.
 */
import { assert, fail } from '../common/assert.ts';
import type { BlockNumber, ForkNumber, RelFileNumber } from '../wal/records.ts';
import { BM_TAG_VALID, type BufferPool } from './buffer-pool.ts';
import { invalidateInIdOrderSteps, LOOKUP_CHUNK_PROBES } from './drop-cached-lookup.ts';
import { SCAN_CHUNK_BUFFERS } from './drop-full-scan.ts';
import { LIST_END, RelBufferLists } from './rel-buffer-lists.ts';

export interface ListWalkCounters {
  /** List elements visited (each one buffer header locked and re-checked). */
  listSteps: number;
  headerLocks: number;
  invalidated: number;
}

/** Collect `rel`'s buffers of `forks[j]` at block ≥ `firstDelBlock[j]` by walking its list. */
function* collectFromList(
  pool: BufferPool,
  lists: RelBufferLists,
  rel: RelFileNumber,
  forks: readonly ForkNumber[] | null,
  firstDelBlock: readonly BlockNumber[] | null,
  victims: number[],
): Generator<void, number, void> {
  const { tagRel, tagFork, tagBlock } = pool;
  const next = lists.next;
  let steps = 0;
  for (let id = lists.head(rel); id !== LIST_END; id = next[id]!) {
    if (steps > 0 && steps % LOOKUP_CHUNK_PROBES === 0) yield;
    steps++;
    // The locked re-check: the list says `rel`, the header must agree.
    if (!(tagRel[id] === rel && (pool.flags[id]! & BM_TAG_VALID) !== 0))
      fail(`INV-LIST-2: buffer ${id} on ${rel}'s list has another tag`);
    if (forks === null || firstDelBlock === null) {
      victims.push(id);
      continue;
    }
    for (let j = 0; j < forks.length; j++) {
      if (tagFork[id] === forks[j] && tagBlock[id]! >= firstDelBlock[j]!) {
        victims.push(id);
        break;
      }
    }
  }
  return steps;
}

/** DropRelFileNodeBuffers by list walk. */
export function* listDropRelFileNodeBuffersSteps(
  pool: BufferPool,
  lists: RelBufferLists,
  rel: RelFileNumber,
  forks: readonly ForkNumber[],
  firstDelBlock: readonly BlockNumber[],
): Generator<void, ListWalkCounters, void> {
  const victims: number[] = [];
  const listSteps = yield* collectFromList(pool, lists, rel, forks, firstDelBlock, victims);
  const invalidated = yield* invalidateInIdOrderSteps(pool, victims);
  return { listSteps, headerLocks: listSteps, invalidated };
}

/** DropRelFileNodesAllBuffers by list walk: every buffer of every relation in `rels`. */
export function* listDropRelsAllBuffersSteps(
  pool: BufferPool,
  lists: RelBufferLists,
  rels: readonly RelFileNumber[],
): Generator<void, ListWalkCounters, void> {
  const victims: number[] = [];
  let listSteps = 0;
  for (const rel of new Set(rels))
    listSteps += yield* collectFromList(pool, lists, rel, null, null, victims);
  const invalidated = yield* invalidateInIdOrderSteps(pool, victims);
  return { listSteps, headerLocks: listSteps, invalidated };
}

/** The recovery hash attached to `pool`, or null (not built, released, or a rel-list pool). */
export function recoveryHashOf(pool: BufferPool): RelBufferLists | null {
  const o = pool.tagObserver;
  return o instanceof RelBufferLists && o !== pool.relationLists ? o : null;
}

/**
 * Build the startup process's hash from relation to buffers with one pass over all NBuffers
 * descriptors, then attach it to the pool so that every later allocation and invalidation (in
 * recovery, all of them are the startup process's own) keeps it current. Yields every
 * SCAN_CHUNK_BUFFERS descriptors; nothing else may change the pool meanwhile (as for a stepped
 * full scan). Returns the lists, descriptors scanned and buffers inserted.
 */
export function* buildRecoveryHashSteps(
  pool: BufferPool,
): Generator<void, { lists: RelBufferLists; scanned: number; inserted: number }, void> {
  assert(
    pool.tagObserver === null,
    'INV-DROP-3: the recovery hash needs a pool without another tag observer',
  );
  const lists = new RelBufferLists(pool.nBuffers);
  const { tagRel, flags, nBuffers } = pool;
  let inserted = 0;
  for (let from = 0; from < nBuffers; from += SCAN_CHUNK_BUFFERS) {
    if (from > 0) yield;
    const to = Math.min(nBuffers, from + SCAN_CHUNK_BUFFERS);
    for (let id = from; id < to; id++) {
      if ((flags[id]! & BM_TAG_VALID) === 0) continue;
      lists.tagged(id, tagRel[id]!);
      inserted++;
    }
  }
  pool.tagObserver = lists;
  return { lists, scanned: nBuffers, inserted };
}

/** End of recovery (promotion) or a drop outside recovery: the startup process's hash is gone. */
export function releaseRecoveryHash(pool: BufferPool): void {
  if (recoveryHashOf(pool) !== null) pool.tagObserver = null;
}
