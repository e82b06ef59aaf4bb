/**
 * SIM-10 (sim/README), at every drop of every node: the path the drop took and its counts are
 * PostgreSQL's for the size cache the process holds at that moment. The rule (bufmgr.c,
 * DropRelationBuffers and DropRelationsAllBuffers, PostgreSQL 14+): outside recovery no cached
 * size is trusted (smgrnblocks_cached); in recovery the lookup path is taken only if every fork
 * concerned (every existing fork, for a drop of whole relations) has a cached size and the blocks
 * to drop by those sizes number fewer than NBuffers / 32; otherwise the full scan, whose
 * pre-check is one relation's, a linear search over ≤ 20 relations or a binary search over more.
 * Either path must invalidate exactly the buffers holding the dropped blocks, and the lookup path
 * probes once per block to drop. The cache is read from the process's storage manager before the
 * drop (what a restart, an smgrclose or a truncation left there), the buffers from its pool.
 *
 * Also the coverage counts of RELIABILITY.md: which path each drop took, on which node kind.
 */
import { InvalidBlockNumber, MAX_FORKNUM, type ForkNumber } from '../../wal/records.ts';
import type { DropResult } from '../../storage/drop.ts';
import type { DropRequest, NodeStorage } from '../../storage/node-storage.ts';
import type { Host, SimCluster } from '../cluster.ts';

/** DropRelationsAllBuffers uses a binary search above this many relations (bufmgr.c). */
const RELS_BSEARCH_THRESHOLD = 20;

interface Expected {
  path: 'full-scan' | 'cached-lookup';
  /** Blocks to drop per the cached sizes, or null when a size was not usable. */
  nBlocksToInvalidate: number | null;
  matcher: DropResult['matcher'];
  /** Buffers holding a dropped block before the drop. */
  buffered: number;
  /** Why the full scan, for the coverage counts. */
  why: string;
}

/** What PostgreSQL's rule expects of a drop, given the process's cache and buffers now. */
export function expectedDrop(st: NodeStorage, d: DropRequest): Expected {
  const { smgr, pool } = st;
  const threshold = Math.floor(pool.nBuffers / 32);
  let nBlocks: number | null = 0;
  let buffered = 0;
  const blocks = pool.bufferedBlocks();
  if (d.op === 'truncate') {
    for (let i = 0; i < d.forks.length; i++) {
      const fork = d.forks[i]!;
      const cached = smgr.inRecovery ? smgr.peekCachedNblocks(d.rel, fork) : InvalidBlockNumber;
      if (cached === InvalidBlockNumber) nBlocks = null;
      else if (nBlocks !== null) nBlocks += cached - d.nblocks[i]!;
      buffered += blocks.filter(
        (b) => b.rel === d.rel && b.fork === fork && b.block >= d.nblocks[i]!,
      ).length;
    }
  } else {
    const rels = new Set(d.rels);
    for (const rel of d.rels) {
      for (let f = 0; f <= MAX_FORKNUM; f++) {
        const fork = f as ForkNumber;
        if (!smgr.exists(rel, fork)) continue;
        const cached = smgr.inRecovery ? smgr.peekCachedNblocks(rel, fork) : InvalidBlockNumber;
        if (cached === InvalidBlockNumber) nBlocks = null;
        else if (nBlocks !== null) nBlocks += cached;
      }
    }
    buffered = blocks.filter((b) => rels.has(b.rel)).length;
  }
  const lookup = nBlocks !== null && nBlocks < threshold;
  const n = d.op === 'truncate' ? 1 : d.rels.length;
  return {
    path: lookup ? 'cached-lookup' : 'full-scan',
    nBlocksToInvalidate: nBlocks,
    matcher: lookup
      ? null
      : d.op === 'truncate'
        ? 'single'
        : n > RELS_BSEARCH_THRESHOLD
          ? 'bsearch'
          : 'linear',
    buffered,
    why: !smgr.inRecovery
      ? 'not in recovery'
      : nBlocks === null
        ? 'a size not cached'
        : 'blocks to drop ≥ NBuffers/32',
  };
}

/** Watch every drop of a node's process (called at each start). */
export function watchDrops(cluster: SimCluster, h: Host, st: NodeStorage): void {
  let pending: { d: DropRequest; e: Expected } | null = null;
  // Set through locals, never `st.f = () => …` (sim/README rule 6).
  const beforeDrop: typeof st.beforeDrop = (d) => {
    pending = { d, e: expectedDrop(st, d) };
  };
  const onDrop: typeof st.onDrop = (r) => {
    if (pending === null) return;
    const { d, e } = pending;
    pending = null;
    checkDrop(cluster, h, st, d, e, r);
  };
  st.beforeDrop = beforeDrop;
  st.onDrop = onDrop;
}

function checkDrop(
  cluster: SimCluster,
  h: Host,
  st: NodeStorage,
  d: DropRequest,
  e: Expected,
  r: DropResult,
): void {
  const strategy = st.dropSettings.strategy;
  const what = d.op === 'truncate' ? `truncation of ${d.rel}` : `drop of ${d.rels.length} rels`;
  const kind = `${st.smgr.inRecovery ? 'replay' : 'primary'} ${d.op === 'truncate' ? 'truncation' : `drop of ${d.rels.length > RELS_BSEARCH_THRESHOLD ? '> 20' : '≤ 20'} relations`}`;
  cluster.countDrop(
    `${kind}: ${r.path}${r.path === 'full-scan' && strategy === 'cached-lookup' ? ` (${e.why})` : ''}`,
  );
  const fail = (m: string) => cluster.violation(`SIM-10: ${h.name} ${what} (${strategy}): ${m}`);
  if (r.invalidated !== e.buffered)
    fail(`invalidated ${r.invalidated} buffers, ${e.buffered} held dropped blocks`);
  if (strategy === 'full-scan') {
    if (r.path !== 'full-scan') fail(`took ${r.path}, the strategy is the full scan`);
    return;
  }
  if (strategy !== 'cached-lookup') return; // the other strategies have rules of their own
  if (r.path !== e.path)
    fail(
      `took ${r.path}, PostgreSQL takes ${e.path} (${e.why}; cached blocks ${e.nBlocksToInvalidate})`,
    );
  else if (r.path === 'cached-lookup' && r.probes !== e.nBlocksToInvalidate)
    fail(`probed ${r.probes} blocks, the cached sizes say ${e.nBlocksToInvalidate}`);
  else if (r.path === 'full-scan' && (r.scanned !== st.pool.nBuffers || r.matcher !== e.matcher))
    fail(`scanned ${r.scanned} of ${st.pool.nBuffers} with ${r.matcher}, expected ${e.matcher}`);
}
