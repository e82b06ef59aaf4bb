/**
 * Dropping relation buffers (bufmgr.c's part): the drop strategies behind one interface. The smgr
 * operations that call them (smgrtruncate, smgrdounlinkall, and smgrcreate) live in smgr.ts, as
 * in PostgreSQL's smgr.c.
 *
 * Entry points: `dropRelFileNodeBuffers` (DropRelFileNodeBuffers, pg-internals §1.4),
 * `dropRelFileNodesAllBuffers` (DropRelFileNodesAllBuffers, §2), `dropStrategyImpl`,
 * `DROP_STRATEGIES`, `DropCounters` (`emptyDropCounters`, `countDrop`), `DEFAULT_DROP_SETTINGS`,
 * `poolOptionsFor`, `endOfRecovery`, `timedSteps`.
 *
 * Strategies (storage/README.md "Drop strategies" has each one's PostgreSQL history):
 *   - `full-scan` (pre-PG14): always visit all NBuffers descriptors; sizes are not read.
 *   - `cached-lookup` (PG14+): the sizes of the forks involved come from `smgr.nblocksCached`,
 *     which answers only in recovery (INV-STORAGE-1). If every size is known and the blocks to drop
 *     total strictly less than floor(NBuffers / thresholdDivisor) (BUF_DROP_FULL_SCAN_THRESHOLD,
 *     divisor 32), each block is probed in the mapping table; otherwise the full scan.
 *     `forceOptimized` skips only the threshold test (the seed's threshold experiment).
 *   - `cache-at-create`: `cached-lookup`, plus smgrcreate in recovery caches size 0 for a fork it
 *     creates, so a fork replay created but never wrote no longer forces the full scan.
 *   - `rel-list` (seed 000's first design): the pool keeps a list of each relation's buffers,
 *     maintained on every allocation and invalidation; a drop walks the relation's list.
 *   - `recovery-hash` (seed 000's reviewer): in recovery, the startup process builds a hash from
 *     relation to buffers by one full scan at its first drop and keeps it current through its
 *     own allocations; later drops walk it. Outside recovery: the full scan.
 *
 * Dropped buffers are discarded, dirty or not, never written (INV-BUF-6, asserted here), and every
 * strategy leaves the same pool (INV-BUF-8; test/property/storage-drop-equivalence.test.ts).
 */
import { assert, fail } from '../common/assert.ts';
import {
  InvalidBlockNumber,
  MAX_FORKNUM,
  type BlockNumber,
  type ForkNumber,
  type RelFileNumber,
} from '../wal/records.ts';
import type { BufferPool, BufferPoolOptions } from './buffer-pool.ts';
import type { PgDropRules } from './pg-drop-rules.ts';
import { LookupDropper } from './drop-cached-lookup.ts';
import {
  fullScanDropRelFileNodeBuffersSteps,
  fullScanDropRelsAllBuffersSteps,
  runSteps,
} from './drop-full-scan.ts';
import {
  buildRecoveryHashSteps,
  listDropRelFileNodeBuffersSteps,
  listDropRelsAllBuffersSteps,
  recoveryHashOf,
  releaseRecoveryHash,
} from './drop-rel-list.ts';
export { runSteps } from './drop-full-scan.ts';

export { RELS_BSEARCH_THRESHOLD } from './drop-full-scan.ts';

/** The drop strategies a node can run (`--drop-strategy`). */
/**
 * What a drop asks of the storage manager: whether a fork exists, its size as cached in recovery
 * (smgrnblocks_cached), and whether this is recovery. StorageManager (smgr.ts) is one; the
 * interface lives here so that drop.ts need not import smgr.ts, which calls into the drops.
 */
export interface SmgrSizes {
  readonly inRecovery: boolean;
  exists(rel: RelFileNumber, fork: ForkNumber): boolean;
  nblocksCached(rel: RelFileNumber, fork: ForkNumber): number;
}

export type DropStrategy =
  'full-scan' | 'cached-lookup' | 'rel-list' | 'recovery-hash' | 'cache-at-create';
export const DROP_STRATEGIES: readonly DropStrategy[] = [
  'full-scan',
  'cached-lookup',
  'rel-list',
  'recovery-hash',
  'cache-at-create',
];

/** How one drop found its buffers. `cache-at-create` takes the cached-lookup or full-scan path. */
export type DropPath = 'full-scan' | 'cached-lookup' | 'rel-list' | 'recovery-hash';
export const DROP_PATHS: readonly DropPath[] = [
  'full-scan',
  'cached-lookup',
  'rel-list',
  'recovery-hash',
];

export interface DropSettings {
  strategy: DropStrategy;
  /** BUF_DROP_FULL_SCAN_THRESHOLD = floor(NBuffers / thresholdDivisor); PostgreSQL uses 32. */
  thresholdDivisor: number;
  /** Take the lookup path whenever every size is cached, whatever the total. */
  forceOptimized: boolean;
  /**
   * The real PostgreSQL major the node follows (`--pg-version`; pg-drop-rules.ts), which chose
   * `strategy` and `thresholdDivisor` (dropSettingsForRules) and decides whether truncation replay
   * caches each truncated fork's size first (redo.ts). Absent: walsim's own `--drop-strategy`, whose
   * truncation replay caches only FSM and VM (as before the January 2025 minors).
   */
  rules?: PgDropRules;
}

/** The drop settings of a node following real PostgreSQL `rules`: 13 full scan, 14+ lookup. */
export function dropSettingsForRules(rules: PgDropRules, forceOptimized = false): DropSettings {
  return {
    strategy: rules.cachedLookup ? 'cached-lookup' : 'full-scan',
    thresholdDivisor: rules.thresholdDivisor ?? DEFAULT_DROP_SETTINGS.thresholdDivisor,
    forceOptimized: rules.cachedLookup && forceOptimized,
    rules,
  };
}

export const DEFAULT_DROP_SETTINGS: Readonly<DropSettings> = Object.freeze({
  strategy: 'cached-lookup',
  thresholdDivisor: 32,
  forceOptimized: false,
});

export interface DropResult {
  path: DropPath;
  /** Descriptors visited by a full scan or by the recovery hash's build (NBuffers), else 0. */
  scanned: number;
  /** Mapping-table probes by the lookup path (each one shared partition-lock acquisition), else 0. */
  probes: number;
  /** Buffers invalidated. */
  invalidated: number;
  /** Blocks to drop per the cached sizes; null when some size was not cached or not consulted. */
  nBlocksToInvalidate: number | null;
  /** Buffer header locks taken (pre-check hits of a scan, mapping hits of a lookup, list elements). */
  headerLocks: number;
  /** Full-scan pre-check: one relation, linear over ≤ 20, binary search over > 20; null otherwise. */
  matcher: 'single' | 'linear' | 'bsearch' | null;
  /** List elements walked by `rel-list` / `recovery-hash`, else 0. */
  listSteps: number;
  /** Buffers inserted into the recovery hash when this drop built it, else 0. */
  hashInserts: number;
}

/** One drop strategy: how it finds a relation's buffers, and what it needs elsewhere. */
export interface DropStrategyImpl {
  readonly name: DropStrategy;
  /** The pool must maintain relation lists from its first allocation (BufferPoolOptions.relationLists). */
  readonly needsRelationLists: boolean;
  /** smgrcreate in recovery caches size 0 for a fork it creates. */
  readonly cachesSizeAtCreate: boolean;
  dropRelFileNodeBuffersSteps(
    pool: BufferPool,
    smgr: SmgrSizes,
    rel: RelFileNumber,
    forks: readonly ForkNumber[],
    firstDelBlock: readonly BlockNumber[],
    settings: DropSettings,
  ): Generator<void, DropResult, void>;
  dropRelsAllBuffersSteps(
    pool: BufferPool,
    smgr: SmgrSizes,
    rels: readonly RelFileNumber[],
    settings: DropSettings,
  ): Generator<void, DropResult, void>;
  /** Recovery ended (promotion): release recovery-only state. */
  endOfRecovery(pool: BufferPool): void;
}

/** BUF_DROP_FULL_SCAN_THRESHOLD for this pool and settings. */
export function dropFullScanThreshold(nBuffers: number, settings: DropSettings): number {
  if (!(Number.isInteger(settings.thresholdDivisor) && settings.thresholdDivisor > 0))
    fail(`INV-DROP-1: thresholdDivisor ${settings.thresholdDivisor} must be a positive integer`);
  return Math.floor(nBuffers / settings.thresholdDivisor);
}

function emptyResult(path: DropPath): DropResult {
  return {
    path,
    scanned: 0,
    probes: 0,
    invalidated: 0,
    nBlocksToInvalidate: null,
    headerLocks: 0,
    matcher: null,
    listSteps: 0,
    hashInserts: 0,
  };
}

function* fullScanOneSteps(
  pool: BufferPool,
  rel: RelFileNumber,
  forks: readonly ForkNumber[],
  firstDelBlock: readonly BlockNumber[],
  nBlocksToInvalidate: number | null,
): Generator<void, DropResult, void> {
  const c = yield* fullScanDropRelFileNodeBuffersSteps(pool, rel, forks, firstDelBlock);
  return { ...emptyResult('full-scan'), nBlocksToInvalidate, ...c };
}

function* fullScanAllSteps(
  pool: BufferPool,
  rels: readonly RelFileNumber[],
  nBlocksToInvalidate: number | null,
): Generator<void, DropResult, void> {
  const c = yield* fullScanDropRelsAllBuffersSteps(pool, rels);
  return { ...emptyResult('full-scan'), nBlocksToInvalidate, ...c };
}

/** PG14's DropRelFileNodeBuffers: lookup path iff every size is cached and the total is below the threshold. */
function* cachedLookupOneSteps(
  pool: BufferPool,
  smgr: SmgrSizes,
  rel: RelFileNumber,
  forks: readonly ForkNumber[],
  firstDelBlock: readonly BlockNumber[],
  settings: DropSettings,
): Generator<void, DropResult, void> {
  let nBlocksToInvalidate: number | null = 0;
  const nForkBlock: number[] = [];
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
  if (!useLookupPath(nBlocksToInvalidate, pool.nBuffers, settings)) {
    return yield* fullScanOneSteps(pool, rel, forks, firstDelBlock, nBlocksToInvalidate);
  }
  const dropper = new LookupDropper(pool);
  for (let i = 0; i < forks.length; i++)
    yield* dropper.findBuffersSteps(rel, forks[i]!, nForkBlock[i]!, firstDelBlock[i]!);
  const invalidated = yield* dropper.freeInvalidatedSteps();
  return {
    ...emptyResult('cached-lookup'),
    probes: dropper.probes,
    invalidated,
    nBlocksToInvalidate,
    headerLocks: dropper.headerLocks,
  };
}

/** PG14's DropRelFileNodesAllBuffers: every existing fork cached and the total below the threshold. */
function* cachedLookupAllSteps(
  pool: BufferPool,
  smgr: SmgrSizes,
  rels: readonly RelFileNumber[],
  settings: DropSettings,
): Generator<void, DropResult, void> {
  let nBlocksToInvalidate: number | null = 0;
  // block[i][j]: cached size of fork j of rels[i], InvalidBlockNumber when the fork does not exist.
  const block: number[][] = [];
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
  if (!useLookupPath(nBlocksToInvalidate, pool.nBuffers, settings))
    return yield* fullScanAllSteps(pool, rels, nBlocksToInvalidate);
  const dropper = new LookupDropper(pool);
  for (let i = 0; i < rels.length; i++) {
    for (let j = 0; j <= MAX_FORKNUM; j++) {
      const n = block[i]![j]!;
      if (n !== InvalidBlockNumber)
        yield* dropper.findBuffersSteps(rels[i]!, j as ForkNumber, n, 0);
    }
  }
  const invalidated = yield* dropper.freeInvalidatedSteps();
  return {
    ...emptyResult('cached-lookup'),
    probes: dropper.probes,
    invalidated,
    nBlocksToInvalidate,
    headerLocks: dropper.headerLocks,
  };
}

function useLookupPath(total: number | null, nBuffers: number, settings: DropSettings): boolean {
  if (total === null) return false;
  return settings.forceOptimized || total < dropFullScanThreshold(nBuffers, settings);
}

const noRecoveryState = (): void => {};

const FULL_SCAN: DropStrategyImpl = {
  name: 'full-scan',
  needsRelationLists: false,
  cachesSizeAtCreate: false,
  dropRelFileNodeBuffersSteps: (pool, _smgr, rel, forks, firstDelBlock) =>
    fullScanOneSteps(pool, rel, forks, firstDelBlock, null),
  dropRelsAllBuffersSteps: (pool, _smgr, rels) => fullScanAllSteps(pool, rels, null),
  endOfRecovery: noRecoveryState,
};

const CACHED_LOOKUP: DropStrategyImpl = {
  name: 'cached-lookup',
  needsRelationLists: false,
  cachesSizeAtCreate: false,
  dropRelFileNodeBuffersSteps: cachedLookupOneSteps,
  dropRelsAllBuffersSteps: cachedLookupAllSteps,
  endOfRecovery: noRecoveryState,
};

const CACHE_AT_CREATE: DropStrategyImpl = {
  ...CACHED_LOOKUP,
  name: 'cache-at-create',
  cachesSizeAtCreate: true,
};

function relationListsOf(pool: BufferPool) {
  const lists = pool.relationLists;
  assert(
    lists !== null,
    'INV-DROP-3: the rel-list strategy needs a pool built with relationLists (poolOptionsFor)',
  );
  return lists;
}

const REL_LIST: DropStrategyImpl = {
  name: 'rel-list',
  needsRelationLists: true,
  cachesSizeAtCreate: false,
  *dropRelFileNodeBuffersSteps(pool, _smgr, rel, forks, firstDelBlock) {
    const c = yield* listDropRelFileNodeBuffersSteps(
      pool,
      relationListsOf(pool),
      rel,
      forks,
      firstDelBlock,
    );
    return { ...emptyResult('rel-list'), ...c };
  },
  *dropRelsAllBuffersSteps(pool, _smgr, rels) {
    const c = yield* listDropRelsAllBuffersSteps(pool, relationListsOf(pool), rels);
    return { ...emptyResult('rel-list'), ...c };
  },
  endOfRecovery: noRecoveryState,
};

/** The recovery hash, built now if this is the first drop in recovery; null outside recovery. */
function* recoveryHashSteps(pool: BufferPool, smgr: SmgrSizes) {
  if (!smgr.inRecovery) {
    releaseRecoveryHash(pool);
    return null;
  }
  const lists = recoveryHashOf(pool);
  if (lists !== null) return { lists, scanned: 0, inserted: 0 };
  return yield* buildRecoveryHashSteps(pool);
}

const RECOVERY_HASH: DropStrategyImpl = {
  name: 'recovery-hash',
  needsRelationLists: false,
  cachesSizeAtCreate: false,
  *dropRelFileNodeBuffersSteps(pool, smgr, rel, forks, firstDelBlock) {
    const h = yield* recoveryHashSteps(pool, smgr);
    if (h === null) return yield* fullScanOneSteps(pool, rel, forks, firstDelBlock, null);
    const c = yield* listDropRelFileNodeBuffersSteps(pool, h.lists, rel, forks, firstDelBlock);
    return { ...emptyResult('recovery-hash'), scanned: h.scanned, hashInserts: h.inserted, ...c };
  },
  *dropRelsAllBuffersSteps(pool, smgr, rels) {
    const h = yield* recoveryHashSteps(pool, smgr);
    if (h === null) return yield* fullScanAllSteps(pool, rels, null);
    const c = yield* listDropRelsAllBuffersSteps(pool, h.lists, rels);
    return { ...emptyResult('recovery-hash'), scanned: h.scanned, hashInserts: h.inserted, ...c };
  },
  endOfRecovery: releaseRecoveryHash,
};

const IMPLS: Readonly<Record<DropStrategy, DropStrategyImpl>> = Object.freeze({
  'full-scan': FULL_SCAN,
  'cached-lookup': CACHED_LOOKUP,
  'rel-list': REL_LIST,
  'recovery-hash': RECOVERY_HASH,
  'cache-at-create': CACHE_AT_CREATE,
});

/** The implementation of a strategy; refuses an unknown name (INV-DROP-1). */
export function dropStrategyImpl(name: DropStrategy): DropStrategyImpl {
  const impl = IMPLS[name];
  if (impl === undefined) fail(`INV-DROP-1: unknown drop strategy ${String(name)}`);
  return impl;
}

/** Pool options a node running `settings` needs (rel-list: relation lists from the first allocation). */
export function poolOptionsFor(
  settings: DropSettings,
  options: BufferPoolOptions = {},
): BufferPoolOptions {
  return { ...options, relationLists: dropStrategyImpl(settings.strategy).needsRelationLists };
}

/** Recovery ended (promotion): the strategy releases recovery-only state (the recovery hash). */
export function endOfRecovery(pool: BufferPool, settings: DropSettings): void {
  dropStrategyImpl(settings.strategy).endOfRecovery(pool);
}

/**
 * DropRelFileNodeBuffers: invalidate the buffers of `rel` in `forks[i]` at block ≥ `firstDelBlock[i]`.
 */
export function dropRelFileNodeBuffers(
  pool: BufferPool,
  smgr: SmgrSizes,
  rel: RelFileNumber,
  forks: readonly ForkNumber[],
  firstDelBlock: readonly BlockNumber[],
  settings: DropSettings = DEFAULT_DROP_SETTINGS,
): DropResult {
  return runSteps(dropRelFileNodeBuffersSteps(pool, smgr, rel, forks, firstDelBlock, settings));
}

/** dropRelFileNodeBuffers in steps: yields between chunks of a scan, probes or list walk (same result). */
export function* dropRelFileNodeBuffersSteps(
  pool: BufferPool,
  smgr: SmgrSizes,
  rel: RelFileNumber,
  forks: readonly ForkNumber[],
  firstDelBlock: readonly BlockNumber[],
  settings: DropSettings = DEFAULT_DROP_SETTINGS,
): Generator<void, DropResult, void> {
  if (!(rel > 0)) fail(`INV-DROP-2: bad relfilenumber ${rel}`);
  assert(
    forks.length > 0 && forks.length === firstDelBlock.length,
    'INV-DROP-2: forks/firstDelBlock mismatch',
  );
  const writesBefore = pool.counters.writes;
  dropFullScanThreshold(pool.nBuffers, settings);
  const result = yield* dropStrategyImpl(settings.strategy).dropRelFileNodeBuffersSteps(
    pool,
    smgr,
    rel,
    forks,
    firstDelBlock,
    settings,
  );
  assert(pool.counters.writes === writesBefore, 'INV-BUF-6: a dropped buffer was written');
  return result;
}

/**
 * DropRelFileNodesAllBuffers: invalidate every buffer of every relation in `rels` (all forks).
 * Forks that do not exist are skipped; the lookup path needs every existing fork cached.
 */
export function dropRelFileNodesAllBuffers(
  pool: BufferPool,
  smgr: SmgrSizes,
  rels: readonly RelFileNumber[],
  settings: DropSettings = DEFAULT_DROP_SETTINGS,
): DropResult {
  return runSteps(dropRelFileNodesAllBuffersSteps(pool, smgr, rels, settings));
}

/** dropRelFileNodesAllBuffers in steps: yields between chunks of a scan, probes or list walk (same result). */
export function* dropRelFileNodesAllBuffersSteps(
  pool: BufferPool,
  smgr: SmgrSizes,
  rels: readonly RelFileNumber[],
  settings: DropSettings = DEFAULT_DROP_SETTINGS,
): Generator<void, DropResult, void> {
  for (const rel of rels) if (!(rel > 0)) fail(`INV-DROP-2: bad relfilenumber ${rel}`);
  const writesBefore = pool.counters.writes;
  dropFullScanThreshold(pool.nBuffers, settings);
  const impl = dropStrategyImpl(settings.strategy);
  if (rels.length === 0) {
    // PostgreSQL returns at once; vacuously every fork is cached and nothing is to drop.
    const path: DropPath =
      settings.strategy === 'cache-at-create' ? 'cached-lookup' : settings.strategy;
    return { ...emptyResult(path), nBlocksToInvalidate: 0 };
  }
  const result = yield* impl.dropRelsAllBuffersSteps(pool, smgr, rels, settings);
  assert(pool.counters.writes === writesBefore, 'INV-BUF-6: a dropped buffer was written');
  return result;
}

/**
 * Run a stepped operation, adding to `out.ms` only the time spent inside its steps (not the time
 * the caller spends elsewhere between them).
 */
export function* timedSteps<T>(
  steps: Generator<void, T, void>,
  out: { ms: number },
): Generator<void, T, void> {
  let t = performance.now();
  for (;;) {
    const r = steps.next();
    out.ms += performance.now() - t;
    if (r.done) return r.value;
    yield;
    t = performance.now();
  }
}

const perPath = (): Record<DropPath, number> => ({
  'full-scan': 0,
  'cached-lookup': 0,
  'rel-list': 0,
  'recovery-hash': 0,
});

/**
 * A node's cumulative drop counters: plain numbers only (no times), so that a span's counters are
 * `diffCounters(earlier, later)` (common/counters.ts) and the same workload gives the same record
 * on every run. The one shape for the node's totals, a failover's span and the cost model's input.
 */
export interface DropCounters {
  /** Drop calls by path (DropRelFileNodeBuffers and DropRelFileNodesAllBuffers together). */
  drops: Record<DropPath, number>;
  /** Buffers invalidated, by path (their sum is `invalidated`). */
  invalidatedByPath: Record<DropPath, number>;
  /** Descriptors visited, all paths (full scans and recovery-hash builds). */
  scanned: number;
  /** Lookup path: mapping-table probes (one shared partition lock each). */
  probes: number;
  /** Buffers invalidated (any path). */
  invalidated: number;
  /** Buffer header locks taken, all paths (their sum by path is `headerLocksByPath`). */
  headerLocks: number;
  /** Full scans whose pre-check used binary search (> RELS_BSEARCH_THRESHOLD relations). */
  bsearchScans: number;
  /** List elements walked (rel-list, recovery-hash). */
  listSteps: number;
  /** Recovery-hash builds (each one scan of NBuffers, counted in `scanned`). */
  hashBuilds: number;
  /** Buffers inserted into the recovery hash by its builds. */
  hashInserts: number;
  /**
   * Descriptors scanned, by pre-check: 'single' is DropRelFileNodeBuffers's loop, 'linear' and
   * 'bsearch' DropRelFileNodesAllBuffers's (the cost model prices them separately).
   */
  scannedByMatcher: Record<'single' | 'linear' | 'bsearch', number>;
  /**
   * Header locks by path: 'full-scan' = pre-check hits (LockBufHdr after the unlocked test),
   * 'cached-lookup' = probes that found a buffer, 'rel-list'/'recovery-hash' = list elements.
   */
  headerLocksByPath: Record<DropPath, number>;
  /** Descriptors visited by recovery-hash builds (part of `scanned`; no pre-check matcher). */
  hashBuildScanned: number;
}

/** Drop counters at zero. */
export function emptyDropCounters(): DropCounters {
  return {
    drops: perPath(),
    invalidatedByPath: perPath(),
    scanned: 0,
    probes: 0,
    invalidated: 0,
    headerLocks: 0,
    bsearchScans: 0,
    listSteps: 0,
    hashBuilds: 0,
    hashInserts: 0,
    scannedByMatcher: { single: 0, linear: 0, bsearch: 0 },
    headerLocksByPath: perPath(),
    hashBuildScanned: 0,
  };
}

/**
 * A copy of `c` (a snapshot of a node's cumulative counters): every field is a number or a record
 * of numbers. By hand, not structuredClone, which serializes and deserializes: a failover
 * snapshots the counters often enough that it was half a percent of a simulated run.
 */
export function copyDropCounters(c: DropCounters): DropCounters {
  return {
    ...c,
    drops: { ...c.drops },
    invalidatedByPath: { ...c.invalidatedByPath },
    scannedByMatcher: { ...c.scannedByMatcher },
    headerLocksByPath: { ...c.headerLocksByPath },
  };
}

/** Busy time inside drops per path, ms (a benchmark figure, not a count: kept apart from them). */
export type DropBusyMs = Record<DropPath, number>;
export const emptyDropBusyMs = (): DropBusyMs => perPath();

/** Add one drop's result to `c`. */
export function countDrop(c: DropCounters, result: DropResult): void {
  c.drops[result.path]++;
  c.scanned += result.scanned;
  c.probes += result.probes;
  c.invalidated += result.invalidated;
  c.invalidatedByPath[result.path] += result.invalidated;
  c.headerLocks += result.headerLocks;
  c.headerLocksByPath[result.path] += result.headerLocks;
  if (result.matcher !== null) c.scannedByMatcher[result.matcher] += result.scanned;
  else if (result.path === 'recovery-hash') c.hashBuildScanned += result.scanned;
  if (result.matcher === 'bsearch') c.bsearchScans++;
  c.listSteps += result.listSteps;
  if (result.path === 'recovery-hash' && result.scanned > 0) c.hashBuilds++;
  c.hashInserts += result.hashInserts;
}
