/**
 * Which standbys are synchronous, and up to which positions their acknowledgements release
 * waiting commits: syncrep.c's SyncRepGetStandbyPriority, SyncRepGetCandidateStandbys,
 * SyncRepGetSyncRecPtr (oldest / Nth-latest) and pg_stat_get_wal_senders' sync_priority and
 * sync_state, as pure functions of the walsender slots.
 *
 * Entry points: `standbyPriority`, `candidateStandbys`, `syncRecPtr` (`acknowledgedBy` given the
 * candidates), `syncStates`.
 *
 * Slots: PostgreSQL keeps walsenders in an array of max_wal_senders slots; a new walsender takes
 * the lowest free slot (InitWalSenderSlot). Equal priorities (several standbys matching `*`, or the
 * same name) are ordered by slot index — "utterly bogus, since that is arrival order dependent,
 * but there are regression tests that rely on it" (standby_priority_comparator). Callers pass the
 * slot index so that the same tie-break holds here.
 */
import { assert } from '../common/assert.ts';
import type { Lsn } from '../wal/lsn.ts';
import type { SyncRepConfig } from './sync-standby-names.ts';
import { injectedBugs } from '../common/injected-bugs.ts';

export type WalSndState = 'startup' | 'catchup' | 'streaming' | 'stopping';

/** What the sync-rep computation reads of one walsender (WalSnd in shared memory). */
export interface WalSndInfo {
  /** Index in the walsender array: the tie-break between equal priorities. */
  slot: number;
  state: WalSndState;
  /** sync_standby_priority as set at connection and at each reload (0 = asynchronous). */
  priority: number;
  /** Last reported positions; 0 (InvalidXLogRecPtr) until the first reply. */
  writeLsn: Lsn;
  flushLsn: Lsn;
  applyLsn: Lsn;
}

export interface SyncPositions {
  write: Lsn;
  flush: Lsn;
  apply: Lsn;
}

export type SyncState = 'sync' | 'potential' | 'async' | 'quorum';

/**
 * SyncRepGetStandbyPriority: 1-based position of the first member matching `applicationName`
 * (case-insensitively, or '*'); 1 for every member under ANY; 0 if none matches, if synchronous
 * replication is off, or for a cascading walsender (synchronous cascading is not allowed).
 */
export function standbyPriority(
  config: SyncRepConfig | null,
  applicationName: string,
  cascading = false,
): number {
  if (cascading || config === null) return 0;
  const name = applicationName.toLowerCase();
  const i = config.members.findIndex((m) => m === '*' || m.toLowerCase() === name);
  if (i < 0) return 0;
  return config.method === 'priority' ? i + 1 : 1;
}

/**
 * SyncRepGetCandidateStandbys: the walsenders that count as synchronous right now. A candidate is
 * streaming or stopping, has a non-zero priority and a valid flush position. Under ANY all
 * candidates are returned; under FIRST, when there are more than num_sync, the num_sync with the
 * lowest priority value, ties broken by slot.
 */
export function candidateStandbys<T extends WalSndInfo>(
  config: SyncRepConfig | null,
  senders: readonly T[],
): T[] {
  if (config === null) return [];
  const c = senders.filter(
    (s) =>
      (s.state === 'streaming' || s.state === 'stopping') && s.priority !== 0 && s.flushLsn !== 0,
  );
  if (config.method === 'priority' && c.length > config.numSync) {
    insertionSort(c, (a, b) => a.priority - b.priority || a.slot - b.slot);
    c.length = config.numSync;
  }
  return c;
}

/**
 * Sort a few walsenders or positions in place (at most max_wal_senders): Array.prototype.sort
 * allocates a work array on every call, and this runs at every status update of a standby.
 */
function insertionSort<T>(a: T[], cmp: (x: T, y: T) => number): void {
  for (let i = 1; i < a.length; i++) {
    const v = a[i]!;
    let j = i - 1;
    for (; j >= 0 && cmp(a[j]!, v) > 0; j--) a[j + 1] = a[j]!;
    a[j + 1] = v;
  }
}

/**
 * SyncRepGetSyncRecPtr: the positions the synchronous set has acknowledged, or null when fewer
 * standbys than num_sync are candidates (nothing may be released). FIRST: the oldest (minimum)
 * of each position over the chosen standbys. ANY: for each position separately, the num_sync-th
 * highest over all candidates (SyncRepGetNthLatestSyncRecPtr).
 *
 * PostgreSQL runs this in a walsender after its standby replied, and only if that walsender is a
 * candidate itself (am_sync); `replier` expresses that condition when given.
 */
export function syncRecPtr<T extends WalSndInfo>(
  config: SyncRepConfig | null,
  senders: readonly T[],
  replier?: T,
): SyncPositions | null {
  if (config === null) return null;
  return acknowledgedBy(config, candidateStandbys(config, senders), replier);
}

/**
 * `syncRecPtr` given the candidates (`candidateStandbys`), for a caller that needs them too: a
 * walsender set computes them once per status update, the hottest path of a replicating primary.
 */
export function acknowledgedBy<T extends WalSndInfo>(
  config: SyncRepConfig,
  cands: readonly T[],
  replier?: T,
): SyncPositions | null {
  if (replier !== undefined && !cands.includes(replier)) return null;
  // Test-only planted bug (common/injected-bugs.ts): a quorum of one acknowledgement too few.
  const numSync =
    injectedBugs.releaseAnyOneShort && config.method === 'quorum' && config.numSync > 1
      ? config.numSync - 1
      : config.numSync;
  if (cands.length < numSync) return null;
  if (config.method === 'priority') {
    let write = Infinity;
    let flush = Infinity;
    let apply = Infinity;
    for (const s of cands) {
      write = Math.min(write, s.writeLsn);
      flush = Math.min(flush, s.flushLsn);
      apply = Math.min(apply, s.applyLsn);
    }
    return { write, flush, apply };
  }
  const nth = (values: Lsn[]) => {
    insertionSort(values, (a, b) => b - a);
    const v = values[numSync - 1];
    assert(v !== undefined, 'INV-SYNCREP-2: quorum needs num_sync candidates');
    return v;
  };
  return {
    write: nth(cands.map((s) => s.writeLsn)),
    flush: nth(cands.map((s) => s.flushLsn)),
    apply: nth(cands.map((s) => s.applyLsn)),
  };
}

/**
 * pg_stat_replication's sync_priority and sync_state per walsender (pg_stat_get_wal_senders): a
 * standby without a valid flush position (yet) shows priority 0; priority 0 is 'async'; a member of
 * the candidate set is 'sync' (FIRST) or 'quorum' (ANY); any other listed standby is 'potential'.
 */
export function syncStates<T extends WalSndInfo>(
  config: SyncRepConfig | null,
  senders: readonly T[],
): Map<T, { priority: number; state: SyncState }> {
  const cands = new Set(candidateStandbys(config, senders));
  const out = new Map<T, { priority: number; state: SyncState }>();
  for (const s of senders) {
    const priority = s.flushLsn === 0 ? 0 : s.priority;
    let state: SyncState;
    if (priority === 0) state = 'async';
    else if (cands.has(s)) state = config?.method === 'quorum' ? 'quorum' : 'sync';
    else state = 'potential';
    out.set(s, { priority, state });
  }
  return out;
}
