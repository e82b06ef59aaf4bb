/**
 * The full-scan drop paths: visit all NBuffers descriptors (bufmgr.c, the pre-PG14 algorithm and
 * PG14+'s fallback). Entry points: `fullScanDropRelFileNodeBuffers`, `fullScanDropRelsAllBuffers`.
 *
 * PostgreSQL reads each tag's rnode without the header lock and only locks (and re-checks fork and
 * block) on a match; a stale read can only give a false positive because nobody may load pages of a
 * relation being dropped. The hot loop here is the same shape: Uint32Array compares with no call
 * (eight per branch), or on a large pool sixteen per turn in WebAssembly SIMD (tag-scan.ts), and
 * the locked re-check in a separate function on a hit. Buffers are invalidated in ascending buffer
 * id order as they are met; either pre-check visits every descriptor and finds the same hits.
 */
import type { BlockNumber, ForkNumber, RelFileNumber } from '../wal/records.ts';
import type { BufferPool } from './buffer-pool.ts';
import { TAG_BLOCK } from './tag-scan.ts';

/** RELS_BSEARCH_THRESHOLD (bufmgr.c): above this many relations the pre-check uses binary search. */
export const RELS_BSEARCH_THRESHOLD = 20;

export interface FullScanCounters {
  scanned: number;
  /** Pre-check hits: buffer header locks taken for the re-check. */
  headerLocks: number;
  invalidated: number;
  matcher: 'single' | 'linear' | 'bsearch';
}

/** The locked re-check of DropRelFileNodeBuffers: first requested fork that matches wins. */
function recheckAndInvalidate(
  pool: BufferPool,
  id: number,
  rel: RelFileNumber,
  forks: readonly ForkNumber[],
  firstDelBlock: readonly BlockNumber[],
): boolean {
  for (let j = 0; j < forks.length; j++) {
    if (
      pool.tagRel[id] === rel &&
      pool.tagFork[id] === forks[j] &&
      pool.tagBlock[id]! >= firstDelBlock[j]!
    ) {
      pool.invalidate(id);
      return true;
    }
  }
  return false;
}

/**
 * Descriptors visited between two yields of a stepped scan (~2 ms at ~2 ns per descriptor): lets a
 * caller (the startup process) answer control requests in the middle of a scan of a huge pool.
 * Nothing else modifies the pool meanwhile, so the result is the same as one uninterrupted pass.
 */
export const SCAN_CHUNK_BUFFERS = 1 << 20;

/**
 * Pre-check hits (header locks, each usually an invalidation at ~1 µs) between two yields: a
 * relation whose buffers fill a whole chunk would otherwise make one step cost a second.
 */
export const HEADER_LOCKS_PER_STEP = 4096;

/** Run a stepped operation to completion without yielding to anyone. */
export function runSteps<T>(steps: Generator<void, T, void>): T {
  for (;;) {
    const r = steps.next();
    if (r.done) return r.value;
  }
}

/** DropRelFileNodeBuffers's full scan: invalidate `rel`'s buffers of `forks[j]` at or beyond `firstDelBlock[j]`. */
export function fullScanDropRelFileNodeBuffers(
  pool: BufferPool,
  rel: RelFileNumber,
  forks: readonly ForkNumber[],
  firstDelBlock: readonly BlockNumber[],
): FullScanCounters {
  return runSteps(fullScanDropRelFileNodeBuffersSteps(pool, rel, forks, firstDelBlock));
}

/** The same scan in chunks of SCAN_CHUNK_BUFFERS descriptors, yielding between chunks. */
export function* fullScanDropRelFileNodeBuffersSteps(
  pool: BufferPool,
  rel: RelFileNumber,
  forks: readonly ForkNumber[],
  firstDelBlock: readonly BlockNumber[],
  chunk = SCAN_CHUNK_BUFFERS,
): Generator<void, FullScanCounters, void> {
  const acc = { headerLocks: 0, invalidated: 0 };
  const recheck = (k: number) => recheckAndInvalidate(pool, k, rel, forks, firstDelBlock);
  for (let id = 0; id < pool.nBuffers;) {
    if (id > 0) yield;
    id = scanRangeForOneRel(pool, rel, id, Math.min(pool.nBuffers, id + chunk), acc, recheck);
  }
  return {
    scanned: pool.nBuffers,
    headerLocks: acc.headerLocks,
    invalidated: acc.invalidated,
    matcher: 'single',
  };
}

/**
 * The hot loop of the single-relation scan over descriptors [from, to): the unlocked tagRel
 * pre-check against `rel`, and `recheck(id)` (the locked re-check; true = invalidated) on each
 * descriptor that passes it, in ascending id order. Stops early after the block in which the
 * HEADER_LOCKS_PER_STEP-th pre-check hit fell; returns the first descriptor not visited.
 */
function scanRangeForOneRel(
  pool: BufferPool,
  rel: RelFileNumber,
  from: number,
  to: number,
  acc: { headerLocks: number; invalidated: number },
  recheck: (id: number) => boolean,
): number {
  const tagRel = pool.tagRel;
  const findBlock = pool.findTagBlock;
  let headerLocks = 0;
  let invalidated = 0;
  let id = from;
  if (findBlock !== null) {
    // WebAssembly SIMD (tag-scan.ts) skips the blocks of TAG_BLOCK tags without a match; the
    // block it stops at (or the last < TAG_BLOCK tags) is checked tag by tag here.
    while (id < to && headerLocks < HEADER_LOCKS_PER_STEP) {
      if (to - id >= TAG_BLOCK) id = findBlock(id, to, rel);
      const end = Math.min(id + TAG_BLOCK, to);
      for (let k = id; k < end; k++) {
        if (tagRel[k] !== rel) continue;
        headerLocks++;
        if (recheck(k)) invalidated++;
      }
      id = end;
    }
  } else {
    // Eight unlocked compares per branch: the ORed comparisons compile to flag sets, so the loop
    // has one well-predicted branch per 32 bytes of tags (measured ~25 % faster than a branch per
    // buffer). The semantics are those of the plain per-buffer pre-check.
    for (; id + 8 <= to && headerLocks < HEADER_LOCKS_PER_STEP; id += 8) {
      const anyMatch =
        Number(tagRel[id] === rel) |
        Number(tagRel[id + 1] === rel) |
        Number(tagRel[id + 2] === rel) |
        Number(tagRel[id + 3] === rel) |
        Number(tagRel[id + 4] === rel) |
        Number(tagRel[id + 5] === rel) |
        Number(tagRel[id + 6] === rel) |
        Number(tagRel[id + 7] === rel);
      if (anyMatch === 0) continue;
      for (let k = id; k < id + 8; k++) {
        if (tagRel[k] !== rel) continue;
        headerLocks++;
        if (recheck(k)) invalidated++;
      }
    }
    if (headerLocks < HEADER_LOCKS_PER_STEP) {
      for (; id < to; id++) {
        if (tagRel[id] !== rel) continue;
        headerLocks++;
        if (recheck(id)) invalidated++;
      }
    }
  }
  acc.headerLocks += headerLocks;
  acc.invalidated += invalidated;
  return id;
}

/** Binary search of a sorted Uint32Array (bsearch with rnode_comparator). */
function containsSorted(sorted: Uint32Array, value: number): boolean {
  let lo = 0;
  let hi = sorted.length - 1;
  while (lo <= hi) {
    const mid = (lo + hi) >>> 1;
    const v = sorted[mid]!;
    if (v === value) return true;
    if (v < value) lo = mid + 1;
    else hi = mid - 1;
  }
  return false;
}

/**
 * DropRelFileNodesAllBuffers's full scan: one pass over the pool invalidating every buffer whose
 * relation is in `rels` (any fork, any block). The pre-check compares linearly against up to
 * RELS_BSEARCH_THRESHOLD relations and binary-searches a sorted copy above that.
 */
export function fullScanDropRelsAllBuffers(
  pool: BufferPool,
  rels: readonly RelFileNumber[],
): FullScanCounters {
  return runSteps(fullScanDropRelsAllBuffersSteps(pool, rels));
}

/** The same scan in chunks of SCAN_CHUNK_BUFFERS descriptors, yielding between chunks. */
export function* fullScanDropRelsAllBuffersSteps(
  pool: BufferPool,
  rels: readonly RelFileNumber[],
  chunk = SCAN_CHUNK_BUFFERS,
): Generator<void, FullScanCounters, void> {
  const nodes = Uint32Array.from(rels);
  const useBsearch = nodes.length > RELS_BSEARCH_THRESHOLD;
  if (useBsearch) nodes.sort();
  const acc = { headerLocks: 0, invalidated: 0 };
  const one = nodes.length === 1 ? nodes[0]! : 0;
  // Locked re-check of a one-relation pre-check hit: the tag still names the relation.
  const recheckOne = (k: number) => {
    if (pool.tagRel[k] !== one) return false;
    pool.invalidate(k);
    return true;
  };
  for (let id = 0; id < pool.nBuffers;) {
    if (id > 0) yield;
    const to = Math.min(pool.nBuffers, id + chunk);
    // One relation (a TRUNCATE or DROP of one table without TOAST): the same pre-check as
    // DropRelFileNodeBuffers's scan. Same buffers visited, same counters.
    id =
      one !== 0
        ? scanRangeForOneRel(pool, one, id, to, acc, recheckOne)
        : scanRangeForRels(pool, nodes, useBsearch, id, to, acc);
  }
  return {
    scanned: pool.nBuffers,
    headerLocks: acc.headerLocks,
    invalidated: acc.invalidated,
    matcher: useBsearch ? 'bsearch' : 'linear',
  };
}

/**
 * The hot loop of the many-relation scan over descriptors [from, to). Stops early after
 * HEADER_LOCKS_PER_STEP pre-check hits; returns the first descriptor not visited.
 */
function scanRangeForRels(
  pool: BufferPool,
  nodes: Uint32Array,
  useBsearch: boolean,
  from: number,
  nBuffers: number,
  acc: { headerLocks: number; invalidated: number },
): number {
  const tagRel = pool.tagRel;
  const n = nodes.length;
  let headerLocks = 0;
  let invalidated = 0;
  let id = from;
  for (; id < nBuffers; id++) {
    const r = tagRel[id]!;
    if (r === 0) continue; // never a relation (INV-BUF-3); saves the match loop on free buffers
    let hit = false;
    if (useBsearch) {
      hit = containsSorted(nodes, r);
    } else {
      for (let j = 0; j < n; j++) {
        if (nodes[j] === r) {
          hit = true;
          break;
        }
      }
    }
    if (!hit) continue;
    headerLocks++;
    // Locked re-check: the tag still names the matched relation.
    if (pool.tagRel[id] === r) {
      pool.invalidate(id);
      invalidated++;
    }
    if (headerLocks >= HEADER_LOCKS_PER_STEP) {
      acc.headerLocks += headerLocks;
      acc.invalidated += invalidated;
      return id + 1;
    }
  }
  acc.headerLocks += headerLocks;
  acc.invalidated += invalidated;
  return nBuffers;
}
