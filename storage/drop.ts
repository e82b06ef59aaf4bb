/**
 * Dropping relation buffers: the choice between the full scan and the cached-size lookup path,
 * and the two smgr operations that drop buffers (smgrtruncate, smgrdounlinkall).
 *
 * Entry points: `dropRelFileNodeBuffers` (DropRelFileNodeBuffers, pg-internals §1.4),
 * `dropRelFileNodesAllBuffers` (DropRelFileNodesAllBuffers, §2), `smgrtruncate`, `smgrdounlinkall`,
 * `DropStats`, `DEFAULT_DROP_SETTINGS`.
 *
 * Path choice (PG14+, `strategy: 'cached-lookup'`): the sizes of the forks involved come from
 * `smgr.nblocksCached`, which answers only in recovery (INV-STORAGE-1). If every size is known and
 * the blocks to drop total strictly less than floor(NBuffers / thresholdDivisor)
 * (BUF_DROP_FULL_SCAN_THRESHOLD, divisor 32), each block is probed in the mapping table; otherwise
 * all NBuffers descriptors are scanned. `forceOptimized` skips only the threshold test (the seed
 * thread's threshold experiment). `strategy: 'full-scan'` is pre-PG14: always scan, sizes unread.
 *
 * Dropped buffers are discarded, dirty or not, never written (INV-BUF-6, asserted here).
 */
import { assert } from '../common/assert.ts';
import {
  InvalidBlockNumber,
  MAX_FORKNUM,
  type BlockNumber,
  type ForkNumber,
  type RelFileNumber,
} from '../wal/records.ts';
import type { BufferPool } from './buffer-pool.ts';
import { LookupDropper } from './drop-cached-lookup.ts';
import { fullScanDropRelFileNodeBuffersSteps, fullScanDropRelsAllBuffersSteps, runSteps } from './drop-full-scan.ts';
export { runSteps } from './drop-full-scan.ts';
import type { StorageManager } from './smgr.ts';

export { RELS_BSEARCH_THRESHOLD } from './drop-full-scan.ts';

export type DropPath = 'full-scan' | 'cached-lookup';

export interface DropSettings {
  /** 'full-scan': pre-PG14, always scan the pool. 'cached-lookup': PG14+ choice. */
  strategy: DropPath;
  /** BUF_DROP_FULL_SCAN_THRESHOLD = floor(NBuffers / thresholdDivisor); PostgreSQL uses 32. */
  thresholdDivisor: number;
  /** Take the lookup path whenever every size is cached, whatever the total. */
  forceOptimized: boolean;
}

export const DEFAULT_DROP_SETTINGS: Readonly<DropSettings> = Object.freeze({
  strategy: 'cached-lookup',
  thresholdDivisor: 32,
  forceOptimized: false,
});

export interface DropResult {
  path: DropPath;
  /** Descriptors visited by the full scan (NBuffers), else 0. */
  scanned: number;
  /** Mapping-table probes by the lookup path (each one shared partition-lock acquisition), else 0. */
  probes: number;
  /** Buffers invalidated. */
  invalidated: number;
  /** Blocks to drop per the cached sizes; null when some size was not cached or not consulted. */
  nBlocksToInvalidate: number | null;
  /** Buffer header locks taken (pre-check hits of a scan, mapping hits of a lookup). */
  headerLocks: number;
  /** Full-scan pre-check: one relation, linear over ≤ 20, binary search over > 20; null for lookups. */
  matcher: 'single' | 'linear' | 'bsearch' | null;
}

/** BUF_DROP_FULL_SCAN_THRESHOLD for this pool and settings. */
export function dropFullScanThreshold(nBuffers: number, settings: DropSettings): number {
  assert(
    Number.isInteger(settings.thresholdDivisor) && settings.thresholdDivisor > 0,
    `INV-DROP-1: thresholdDivisor ${settings.thresholdDivisor} must be a positive integer`,
  );
  return Math.floor(nBuffers / settings.thresholdDivisor);
}

function useLookupPath(total: number | null, nBuffers: number, settings: DropSettings): boolean {
  if (settings.strategy === 'full-scan' || total === null) return false;
  return settings.forceOptimized || total < dropFullScanThreshold(nBuffers, settings);
}

/**
 * DropRelFileNodeBuffers: invalidate the buffers of `rel` in `forks[i]` at block ≥ `firstDelBlock[i]`.
 */
export function dropRelFileNodeBuffers(
  pool: BufferPool,
  smgr: StorageManager,
  rel: RelFileNumber,
  forks: readonly ForkNumber[],
  firstDelBlock: readonly BlockNumber[],
  settings: DropSettings = DEFAULT_DROP_SETTINGS,
): DropResult {
  return runSteps(dropRelFileNodeBuffersSteps(pool, smgr, rel, forks, firstDelBlock, settings));
}

/** dropRelFileNodeBuffers in steps: yields between chunks of a scan or of probes (same result). */
export function* dropRelFileNodeBuffersSteps(
  pool: BufferPool,
  smgr: StorageManager,
  rel: RelFileNumber,
  forks: readonly ForkNumber[],
  firstDelBlock: readonly BlockNumber[],
  settings: DropSettings = DEFAULT_DROP_SETTINGS,
): Generator<void, DropResult, void> {
  assert(rel > 0, `INV-DROP-2: bad relfilenumber ${rel}`);
  assert(forks.length > 0 && forks.length === firstDelBlock.length, 'INV-DROP-2: forks/firstDelBlock mismatch');
  const writesBefore = pool.counters.writes;
  dropFullScanThreshold(pool.nBuffers, settings);
  let nBlocksToInvalidate: number | null = null;
  const nForkBlock: number[] = [];
  if (settings.strategy === 'cached-lookup') {
    nBlocksToInvalidate = 0;
    for (let i = 0; i < forks.length; i++) {
      const n = smgr.nblocksCached(rel, forks[i]!);
      if (n === InvalidBlockNumber) {
        nBlocksToInvalidate = null;
        break;
      }
      nForkBlock.push(n);
      // BlockNumber (uint32) arithmetic: a cached size below the cut wraps and forces the scan.
      nBlocksToInvalidate += (n - firstDelBlock[i]!) >>> 0;
    }
  }
  let result: DropResult;
  if (useLookupPath(nBlocksToInvalidate, pool.nBuffers, settings)) {
    const dropper = new LookupDropper(pool);
    for (let i = 0; i < forks.length; i++) yield* dropper.findBuffersSteps(rel, forks[i]!, nForkBlock[i]!, firstDelBlock[i]!);
    const invalidated = yield* dropper.invalidateFoundSteps();
    result = {
      path: 'cached-lookup', scanned: 0, probes: dropper.probes, invalidated, nBlocksToInvalidate,
      headerLocks: dropper.headerLocks, matcher: null,
    };
  } else {
    const c = yield* fullScanDropRelFileNodeBuffersSteps(pool, rel, forks, firstDelBlock);
    result = { path: 'full-scan', probes: 0, nBlocksToInvalidate, ...c };
  }
  assert(pool.counters.writes === writesBefore, 'INV-BUF-6: a dropped buffer was written');
  return result;
}

/**
 * DropRelFileNodesAllBuffers: invalidate every buffer of every relation in `rels` (all forks).
 * Forks that do not exist are skipped; the lookup path needs every existing fork cached.
 */
export function dropRelFileNodesAllBuffers(
  pool: BufferPool,
  smgr: StorageManager,
  rels: readonly RelFileNumber[],
  settings: DropSettings = DEFAULT_DROP_SETTINGS,
): DropResult {
  return runSteps(dropRelFileNodesAllBuffersSteps(pool, smgr, rels, settings));
}

/** dropRelFileNodesAllBuffers in steps: yields between chunks of a scan or of probes (same result). */
export function* dropRelFileNodesAllBuffersSteps(
  pool: BufferPool,
  smgr: StorageManager,
  rels: readonly RelFileNumber[],
  settings: DropSettings = DEFAULT_DROP_SETTINGS,
): Generator<void, DropResult, void> {
  for (const rel of rels) assert(rel > 0, `INV-DROP-2: bad relfilenumber ${rel}`);
  const writesBefore = pool.counters.writes;
  dropFullScanThreshold(pool.nBuffers, settings);
  if (rels.length === 0) {
    // PostgreSQL returns at once; vacuously every fork is cached and nothing is to drop.
    return {
      path: settings.strategy, scanned: 0, probes: 0, invalidated: 0, nBlocksToInvalidate: 0,
      headerLocks: 0, matcher: null,
    };
  }
  let nBlocksToInvalidate: number | null = null;
  // block[i][j]: cached size of fork j of rels[i], InvalidBlockNumber when the fork does not exist.
  const block: number[][] = [];
  if (settings.strategy === 'cached-lookup') {
    nBlocksToInvalidate = 0;
    outer: for (const rel of rels) {
      const sizes: number[] = [];
      block.push(sizes);
      for (let j = 0; j <= MAX_FORKNUM; j++) {
        const fork = j as ForkNumber;
        const n = smgr.nblocksCached(rel, fork);
        sizes.push(n);
        if (n === InvalidBlockNumber) {
          if (!smgr.exists(rel, fork)) continue;
          nBlocksToInvalidate = null;
          break outer;
        }
        nBlocksToInvalidate += n;
      }
    }
  }
  let result: DropResult;
  if (useLookupPath(nBlocksToInvalidate, pool.nBuffers, settings)) {
    const dropper = new LookupDropper(pool);
    for (let i = 0; i < rels.length; i++) {
      for (let j = 0; j <= MAX_FORKNUM; j++) {
        const n = block[i]![j]!;
        if (n !== InvalidBlockNumber) yield* dropper.findBuffersSteps(rels[i]!, j as ForkNumber, n, 0);
      }
    }
    const invalidated = yield* dropper.invalidateFoundSteps();
    result = {
      path: 'cached-lookup', scanned: 0, probes: dropper.probes, invalidated, nBlocksToInvalidate,
      headerLocks: dropper.headerLocks, matcher: null,
    };
  } else {
    const c = yield* fullScanDropRelsAllBuffersSteps(pool, rels);
    result = { path: 'full-scan', probes: 0, nBlocksToInvalidate, ...c };
  }
  assert(pool.counters.writes === writesBefore, 'INV-BUF-6: a dropped buffer was written');
  return result;
}

/**
 * smgrtruncate: drop the buffers at or beyond the new ends (while sizes are still cached), then
 * truncate the forks and cache the new sizes. `nblocks[i]` is the new size of `forks[i]`.
 */
export function smgrtruncate(
  pool: BufferPool,
  smgr: StorageManager,
  rel: RelFileNumber,
  forks: readonly ForkNumber[],
  nblocks: readonly BlockNumber[],
  settings: DropSettings = DEFAULT_DROP_SETTINGS,
): DropResult {
  return runSteps(smgrtruncateSteps(pool, smgr, rel, forks, nblocks, settings));
}

export function* smgrtruncateSteps(
  pool: BufferPool,
  smgr: StorageManager,
  rel: RelFileNumber,
  forks: readonly ForkNumber[],
  nblocks: readonly BlockNumber[],
  settings: DropSettings = DEFAULT_DROP_SETTINGS,
): Generator<void, DropResult, void> {
  const result = yield* dropRelFileNodeBuffersSteps(pool, smgr, rel, forks, nblocks, settings);
  smgr.truncateForks(rel, forks, nblocks);
  return result;
}

/**
 * smgrdounlinkall: drop every buffer of the relations first (PG14+ order, so cached sizes and
 * smgrexists still answer), then close them (forgetting cached sizes) and unlink their files.
 */
export function smgrdounlinkall(
  pool: BufferPool,
  smgr: StorageManager,
  rels: readonly RelFileNumber[],
  settings: DropSettings = DEFAULT_DROP_SETTINGS,
): DropResult {
  return runSteps(smgrdounlinkallSteps(pool, smgr, rels, settings));
}

export function* smgrdounlinkallSteps(
  pool: BufferPool,
  smgr: StorageManager,
  rels: readonly RelFileNumber[],
  settings: DropSettings = DEFAULT_DROP_SETTINGS,
): Generator<void, DropResult, void> {
  const result = yield* dropRelFileNodesAllBuffersSteps(pool, smgr, rels, settings);
  for (const rel of rels) {
    smgr.close(rel);
    smgr.unlink(rel);
  }
  return result;
}

/**
 * Run a stepped operation, adding to `out.ms` only the time spent inside its steps (not the time
 * the caller spends elsewhere between them).
 */
export function* timedSteps<T>(steps: Generator<void, T, void>, out: { ms: number }): Generator<void, T, void> {
  let t = performance.now();
  for (;;) {
    const r = steps.next();
    out.ms += performance.now() - t;
    if (r.done) return r.value;
    yield;
    t = performance.now();
  }
}

/** Cumulative drop counters, per path. */
export class DropStats {
  readonly drops: Record<DropPath, number> = { 'full-scan': 0, 'cached-lookup': 0 };
  readonly invalidatedByPath: Record<DropPath, number> = { 'full-scan': 0, 'cached-lookup': 0 };
  scanned = 0;
  probes = 0;
  invalidated = 0;
  headerLocks = 0;
  /** Full scans whose pre-check used binary search (> RELS_BSEARCH_THRESHOLD relations). */
  bsearchScans = 0;
  /** Time spent inside drops (busy time, not counting event-loop turns between steps), per path. */
  readonly elapsedMsByPath: Record<DropPath, number> = { 'full-scan': 0, 'cached-lookup': 0 };

  add(result: DropResult, elapsedMs = 0): void {
    this.elapsedMsByPath[result.path] += elapsedMs;
    this.drops[result.path]++;
    this.scanned += result.scanned;
    this.probes += result.probes;
    this.invalidated += result.invalidated;
    this.invalidatedByPath[result.path] += result.invalidated;
    this.headerLocks += result.headerLocks;
    if (result.matcher === 'bsearch') this.bsearchScans++;
  }
}
