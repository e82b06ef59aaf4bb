/**
 * The cost model: one pure function from a failover's event counts, a cost profile and NBuffers
 * to modeled PostgreSQL seconds per failover phase. No clock is read; the same inputs give the
 * same seconds on every run and machine.
 *
 * Entry points: `modelFailover(counts, profile, nBuffers)` (`price` in price.ts is the edges' call),
 * `modelReplay`, `costFeatures`
 * (the counter each constant multiplies — the model is linear in the constants, which is what the
 * fit in fit.ts relies on), `polledSeconds`, `ModeledFailover`.
 *
 * modeled seconds = Σ over constants  constant.seconds × (the count it multiplies)
 * The only use of NBuffers: a full scan's per-descriptor constant is the `.cache` one while the
 * descriptor array (NBuffers × cache.descriptorBytes) fits in the last-level cache, else `.memory`.
 * A full scan's count is the descriptors it visited (NBuffers per scan), so doubling NBuffers
 * doubles its cost within a tier; a lookup's probes do not depend on NBuffers.
 */
import { fail } from '../common/assert.ts';
import {
  PG_RECORD_KINDS,
  type FailoverCounts,
  type ReplayCounts,
} from '../storage/replay-counts.ts';
import type { CostConstantName, CostProfile } from './profile.ts';

export type Phase = 'replay' | 'endOfRecovery' | 'openForWrites';

/** Per phase, the count each constant multiplies (absent = 0). */
export type CostFeatures = Record<Phase, Partial<Record<CostConstantName, number>>>;

const sum = (xs: readonly number[]) => xs.reduce((a, b) => a + b, 0);

/** Does the descriptor array of `nBuffers` buffers fit in the profile's last-level cache? */
export function descriptorsFitInCache(
  profile: Pick<CostProfile, 'cache'>,
  nBuffers: number,
): boolean {
  return nBuffers * profile.cache.descriptorBytes <= profile.cache.llcBytes;
}

/** `record.<kind>` per PG_RECORD_KINDS entry: the feature names, built once, not per failover. */
const RECORD_KEYS = PG_RECORD_KINDS.map((k) => `record.${k}` as const);

/** The tiered constants' names per tier (built once, not per failover). */
const TIER_KEYS = {
  cache: {
    single: 'scan.single.cache',
    multi: 'scan.multi.cache',
    hashBuild: 'scan.hashBuild.cache',
  },
  memory: {
    single: 'scan.single.memory',
    multi: 'scan.multi.memory',
    hashBuild: 'scan.hashBuild.memory',
  },
} as const satisfies Record<'cache' | 'memory', Record<string, CostConstantName>>;

/** The replay phase's features. */
export function replayFeatures(
  c: ReplayCounts,
  profile: Pick<CostProfile, 'cache'>,
  nBuffers: number,
): Partial<Record<CostConstantName, number>> {
  const f: Partial<Record<CostConstantName, number>> = {};
  for (let i = 0; i < PG_RECORD_KINDS.length; i++) {
    const n = c.pgRecords[PG_RECORD_KINDS[i]!] ?? 0;
    if (n !== 0) f[RECORD_KEYS[i]!] = n;
  }
  f.walByte = c.walBytes;
  const tier = TIER_KEYS[descriptorsFitInCache(profile, nBuffers) ? 'cache' : 'memory'];
  const d = c.drops;
  f[tier.single] = d.scannedByMatcher.single;
  f[tier.multi] = d.scannedByMatcher.linear + d.scannedByMatcher.bsearch;
  f['scan.preCheckHit'] = d.headerLocksByPath['full-scan'];
  f['scan.descriptorPageMapped'] = c.descriptorPagesMapped;
  f['lookup.probe'] = d.probes;
  f['lookup.hit'] = d.headerLocksByPath['cached-lookup'];
  f.invalidate = d.invalidated;
  f['dropCall.fullScan'] = d.drops['full-scan'];
  f['dropCall.lookup'] = d.drops['cached-lookup'];
  f['dropCall.relList'] = d.drops['rel-list'];
  f['dropCall.recoveryHash'] = d.drops['recovery-hash'];
  f['list.step'] = d.listSteps;
  f[tier.hashBuild] = d.hashBuildScanned;
  f['hashBuild.insert'] = d.hashInserts;
  f['smgr.create'] = sum(c.smgr.create);
  f['smgr.extend'] = sum(c.smgr.extend);
  f['smgr.truncate'] = sum(c.smgr.truncate);
  f['smgr.unlink'] = sum(c.smgr.unlink);
  f['smgr.unlinkNonEmpty'] = c.unlinkedNonEmptyForks;
  f['smgr.nblocks'] = sum(c.smgr.nblocks);
  f['smgr.segmentOpenFailed'] = c.failedSegmentOpens;
  f['controlFile.update'] = c.controlFileUpdates;
  f['fsm.update'] = c.fsmUpdates;
  f['multiInsert.tuple'] = c.multiInsertTuples;
  return f;
}

/** Every phase's features: the design-matrix row of one failover. */
export function costFeatures(
  counts: FailoverCounts,
  profile: Pick<CostProfile, 'cache'>,
  nBuffers: number,
): CostFeatures {
  checkNBuffers(nBuffers);
  return {
    replay: replayFeatures(counts.replay, profile, nBuffers),
    endOfRecovery: endOfRecoveryFeatures(counts),
    openForWrites: openForWritesFeatures(counts),
  };
}

function checkNBuffers(nBuffers: number): void {
  if (!(Number.isSafeInteger(nBuffers) && nBuffers > 0))
    fail(`INV-COST-2: NBuffers ${nBuffers} must be a positive integer`);
}

function endOfRecoveryFeatures(counts: FailoverCounts): CostFeatures['endOfRecovery'] {
  const e = counts.endOfRecovery;
  return {
    'endOfRecovery.timelineHistoryFile': e.timelineHistoryFiles,
    'endOfRecovery.walSegmentInit': e.walSegmentInits,
    'endOfRecovery.record': e.records,
    'endOfRecovery.walFlush': e.walFlushes,
  };
}

function openForWritesFeatures(counts: FailoverCounts): CostFeatures['openForWrites'] {
  return {
    'controlFile.update': counts.openForWrites.controlFileUpdates,
    // After "archive recovery complete" in PostgreSQL's log, so in this phase (pg-log.ts).
    'walSegment.prealloc': counts.openForWrites.walSegmentPreallocs ?? 0,
  };
}

/** Seconds of `n` occurrences of feature `k` (INV-COST-3: a count is a non-negative number). */
function term(k: CostConstantName, n: number, profile: CostProfile): number {
  // fail, not assert: the message (a number formatted) only when the count is bad.
  if (!(Number.isFinite(n) && n >= 0))
    fail(`INV-COST-3: count for ${k} must be a non-negative number, got ${n}`);
  return n * profile.constants[k].seconds;
}

function priceFeatures(
  features: Partial<Record<CostConstantName, number>>,
  profile: CostProfile,
): number {
  let s = 0;
  for (const [k, n] of Object.entries(features) as Array<[CostConstantName, number]>)
    s += term(k, n, profile);
  return s;
}

/** Where the replay phase's modeled seconds go (for the docs and reports). */
export interface ReplayBreakdown {
  /** PostgreSQL records (+ WAL bytes), the FSM updates their redo makes and COPY's tuples. */
  recordsS: number;
  /** Buffer drops: scans, probes, hits, invalidations, per-call overhead. */
  dropsS: number;
  /** smgr file operations. */
  smgrS: number;
  /** pg_control updates (minRecoveryPoint). */
  controlFileS: number;
}

export interface ModeledFailover {
  /** The profile's name. */
  profile: string;
  /** Modeled seconds from resume to read-write (sum of the phases). */
  failoverS: number;
  /**
   * What a client polling for the end of recovery as the profile's reference did would have
   * measured: offsetS + quantumS × ceil(failoverS / quantumS) (at least one quantum); null when
   * the profile has no promotion poll.
   */
  polledS: number | null;
  phases: { replayS: number; endOfRecoveryS: number; openForWritesS: number };
  replay: ReplayBreakdown;
}

/** The poll's reading of a failover of `seconds` (pg_ctl promote checks every 100 ms). */
export function polledSeconds(
  seconds: number,
  poll: NonNullable<CostProfile['promotionPoll']>,
): number {
  // The tiny epsilon keeps an exact multiple (0.3 s) from rounding up through float error.
  const n = Math.max(1, Math.ceil(seconds / poll.quantumS - 1e-9));
  return poll.offsetS + n * poll.quantumS;
}

/** The breakdown part a replay feature belongs to (every replay feature belongs to one). */
function partOf(k: string): keyof ReplayBreakdown | null {
  if (k.startsWith('record.') || k === 'walByte' || k === 'fsm.update' || k === 'multiInsert.tuple')
    return 'recordsS';
  if (
    k.startsWith('scan.') ||
    k.startsWith('lookup.') ||
    k === 'invalidate' ||
    k.startsWith('dropCall.') ||
    k.startsWith('list.') ||
    k.startsWith('hashBuild.')
  )
    return 'dropsS';
  if (k.startsWith('smgr.')) return 'smgrS';
  if (k === 'controlFile.update') return 'controlFileS';
  return null;
}

/** partOf per feature name, memoized: the names are a fixed set, priced at every failover. */
const PART_OF = new Map<string, keyof ReplayBreakdown | null>();

/** Modeled seconds of one replay span (e.g. a `rel`/`multi` step's replay) alone. */
export function modelReplay(
  counts: ReplayCounts,
  profile: CostProfile,
  nBuffers: number,
): { seconds: number; breakdown: ReplayBreakdown } {
  const f = replayFeatures(counts, profile, nBuffers);
  // One pass in the features' order: each part, and the total, adds its terms in the same order
  // as pricing each part's features on their own would (the same floating-point sums).
  const breakdown: ReplayBreakdown = { recordsS: 0, dropsS: 0, smgrS: 0, controlFileS: 0 };
  let seconds = 0;
  for (const [k, n] of Object.entries(f) as Array<[CostConstantName, number]>) {
    const t = term(k, n, profile);
    seconds += t;
    let part = PART_OF.get(k);
    if (part === undefined) PART_OF.set(k, (part = partOf(k)));
    if (part !== null) breakdown[part] += t;
  }
  return { seconds, breakdown };
}

/**
 * Modeled PostgreSQL seconds of a failover, per phase. Pure: counts + profile + NBuffers (the
 * standby's shared_buffers in buffers) → seconds.
 */
export function modelFailover(
  counts: FailoverCounts,
  profile: CostProfile,
  nBuffers: number,
): ModeledFailover {
  checkNBuffers(nBuffers);
  const replay = modelReplay(counts.replay, profile, nBuffers);
  const phases = {
    replayS: replay.seconds,
    endOfRecoveryS: priceFeatures(endOfRecoveryFeatures(counts), profile),
    openForWritesS: priceFeatures(openForWritesFeatures(counts), profile),
  };
  const failoverS = phases.replayS + phases.endOfRecoveryS + phases.openForWritesS;
  return {
    profile: profile.name,
    failoverS,
    polledS:
      profile.promotionPoll === null ? null : polledSeconds(failoverS, profile.promotionPoll),
    phases,
    replay: replay.breakdown,
  };
}
