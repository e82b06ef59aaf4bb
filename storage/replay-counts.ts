/**
 * The event counts of a replay span and of a failover: what the cost model multiplies by its
 * constants. Exact and deterministic: they come from the records replayed and from the storage
 * counters (drops, smgr file operations), never from a clock.
 *
 * Entry points: `ReplayCounters` (records by kind, the PostgreSQL records they stand for, WAL
 * bytes, minRecoveryPoint updates), `replayCountsOf(storage)` (a snapshot of everything a replay
 * span is priced by), `diffReplayCounts`, `FailoverCounts`, `PG_RECORD_KINDS`, `pgRecordsFor`.
 * The cost model (cost-model/) prices these counts; storage/ only counts.
 *
 * walsim logs a leaner record mix than PostgreSQL 15 (one record per heap page for VACUUM's two
 * passes, one catalog record where PostgreSQL logs a heap update plus its index inserts). Rather
 * than change what walsim logs, each replayed walsim record is counted as the PostgreSQL records it
 * stands for (`pgRecordsFor`, documented in cost-model/README.md), and the cost profile
 * prices PostgreSQL's records.
 */
import { fail } from '../common/assert.ts';
import { diffCounters } from '../common/counters.ts';
import { segmentOffset } from '../wal/segment.ts';
import {
  RMGR_INFO,
  type TransactionId,
  type WalRecord,
  type WalRecordBody,
  type WalRecordKind,
} from '../wal/records.ts';
import { copyDropCounters, emptyDropCounters, type DropCounters } from './drop.ts';
import type { SmgrFileOps } from './smgr.ts';

/** PostgreSQL 15 record kinds (rmgr_INFO names) the walsim records stand for. */
export const PG_RECORD_KINDS = [
  'XLOG_CHECKPOINT_SHUTDOWN',
  'XLOG_CHECKPOINT_ONLINE',
  'XLOG_NOOP',
  'XLOG_END_OF_RECOVERY',
  'XLOG_FPI',
  'XACT_COMMIT',
  'XACT_ABORT',
  'SMGR_CREATE',
  'SMGR_TRUNCATE',
  'STANDBY_LOCK',
  'HEAP_INSERT',
  'HEAP_DELETE',
  'HEAP_UPDATE',
  'HEAP_INPLACE',
  'HEAP2_PRUNE',
  'HEAP2_VACUUM',
  'HEAP2_VISIBLE',
  'HEAP2_MULTI_INSERT',
  'BTREE_INSERT_LEAF',
] as const;
export type PgRecordKind = (typeof PG_RECORD_KINDS)[number];

/** Indexes of pg_class (oid, relname+relnamespace, reltablespace+relfilenode): a non-HOT update inserts into each. */
export const PG_CLASS_INDEXES = 3;

/** What a transaction has logged so far (for the records its commit stands for). */
interface XactShape {
  vacuum: boolean;
  lock: boolean;
}

/** Rows in a run list (start, count pairs: multi-insert runs, delete offsets). */
export function runTuples(ranges: readonly number[]): number {
  let n = 0;
  for (let i = 1; i < ranges.length; i += 2) n += ranges[i]!;
  return n;
}

/**
 * The PostgreSQL records one walsim record stands for, given what its transaction logged before.
 * Calls `add(kind, n)` per PostgreSQL record kind. See README "Record mix".
 */
export function pgRecordsFor(
  body: WalRecordBody,
  xact: Readonly<XactShape> | undefined,
  add: (k: PgRecordKind, n: number) => void,
): void {
  switch (body.kind) {
    case 'CHECKPOINT_SHUTDOWN':
      return add('XLOG_CHECKPOINT_SHUTDOWN', 1);
    case 'CHECKPOINT_ONLINE':
      return add('XLOG_CHECKPOINT_ONLINE', 1);
    case 'NOOP':
      return add('XLOG_NOOP', 1);
    case 'END_OF_RECOVERY':
      return add('XLOG_END_OF_RECOVERY', 1);
    case 'FPI':
      return add('XLOG_FPI', 1);
    case 'SMGR_CREATE':
      return add('SMGR_CREATE', 1);
    case 'SMGR_TRUNCATE':
      return add('SMGR_TRUNCATE', 1);
    case 'STANDBY_LOCK':
      return add('STANDBY_LOCK', 1);
    // INSERT … SELECT and INSERT … VALUES log one heap_insert per row in PostgreSQL (multi-insert is COPY's).
    case 'HEAP_INSERT':
      return add('HEAP_INSERT', 1);
    case 'HEAP2_MULTI_INSERT':
      return add('HEAP_INSERT', runTuples(body.runs));
    // heap_delete logs one record per row.
    case 'HEAP_DELETE':
      return add('HEAP_DELETE', runTuples(body.offsets));
    // walsim's prune is PostgreSQL's two passes over a table without indexes: PRUNE, then VACUUM.
    case 'HEAP2_PRUNE':
      add('HEAP2_PRUNE', 1);
      return add('HEAP2_VACUUM', 1);
    case 'HEAP2_VISIBLE':
      return add('HEAP2_VISIBLE', 1);
    // A pg_class row changed (CREATE/DROP/TRUNCATE): a non-HOT heap update plus one insert per index.
    case 'CATALOG_UPDATE':
      add('HEAP_UPDATE', 1);
      return add('BTREE_INSERT_LEAF', PG_CLASS_INDEXES);
    case 'XACT_COMMIT':
    case 'XACT_ABORT': {
      // VACUUM updates relpages/reltuples in place (vac_update_relstats: XLOG_HEAP_INPLACE). It has
      // an xid, hence a commit record, only when it logged an AccessExclusiveLock (truncation).
      if (xact?.vacuum) add('HEAP_INPLACE', 1);
      if (xact?.vacuum && !xact.lock) return;
      return add(body.kind === 'XACT_COMMIT' ? 'XACT_COMMIT' : 'XACT_ABORT', 1);
    }
    default: {
      const never: never = body;
      fail(`INV-COST-1: no PostgreSQL record mapping for ${(never as { kind: string }).kind}`);
    }
  }
}

/** What the counters need of a replayed record: its body, xid and framed length. */
export interface ReplayedRecord {
  body: WalRecordBody;
  header: Pick<WalRecord['header'], 'xid' | 'totalLength'>;
}

/** Every walsim record kind, in a fixed order: the index of its counter. */
const WAL_KINDS = Object.keys(RMGR_INFO) as WalRecordKind[];
const WAL_KIND_INDEX = new Map<WalRecordKind, number>(WAL_KINDS.map((k, i) => [k, i]));
const PG_KIND_INDEX = new Map<PgRecordKind, number>(PG_RECORD_KINDS.map((k, i) => [k, i]));

/**
 * Per-kind counts in a Float64Array, plus the order in which kinds were first counted: the sparse
 * record the snapshot gives lists kinds in that order, as the object it replaces did.
 */
class KindCounts<K extends string> {
  private readonly counts: Float64Array;
  private readonly firstSeen: number[] = [];

  constructor(private readonly kinds: readonly K[]) {
    this.counts = new Float64Array(kinds.length);
  }

  add(i: number, n: number): void {
    if (this.counts[i] === 0) this.firstSeen.push(i);
    this.counts[i]! += n;
  }

  /** The non-zero counts as a plain record (a copy). */
  toRecord(): Partial<Record<K, number>> {
    const out: Partial<Record<K, number>> = {};
    for (const i of this.firstSeen) out[this.kinds[i]!] = this.counts[i]!;
    return out;
  }
}

/** Counts of the records replayed and of the control-file updates replay forced. Monotonic. */
export class ReplayCounters {
  private readonly byKind = new KindCounts(WAL_KINDS);
  private readonly byPgKind = new KindCounts(PG_RECORD_KINDS);
  walBytes = 0;
  /**
   * minRecoveryPoint updates PostgreSQL makes during replay: XLogFlush in recovery rewrites and
   * fsyncs pg_control (UpdateMinRecoveryPoint). smgr_redo does it before every truncation and
   * xact_redo_commit/abort before dropping relation files. walsim keeps no minRecoveryPoint; this
   * counts where PostgreSQL would write it.
   */
  minRecoveryPointUpdates = 0;
  /**
   * FSM updates PostgreSQL's redo makes outside the records' block references
   * (XLogRecordPageWithFreeSpace: an FSM page read, locked and its slot set): PRUNE, VACUUM and
   * VISIBLE always, INSERT / MULTI_INSERT when the page is left with less than BLCKSZ / 5 free.
   * Counted by storage/redo.ts where walsim touches the FSM, once per PostgreSQL record that would.
   */
  fsmUpdates = 0;
  /** Open transactions' shapes (bounded by concurrent transactions: one at a time in walsim). */
  private readonly xacts = new Map<TransactionId, XactShape>();
  /** pgRecordsFor's callback, made once (the replay path allocates nothing per record here). */
  private readonly addPg = (k: PgRecordKind, n: number): void => {
    if (n > 0) this.byPgKind.add(PG_KIND_INDEX.get(k)!, n);
  };

  /** walsim records replayed, by kind (a copy). */
  get records(): Partial<Record<WalRecordKind, number>> {
    return this.byKind.toRecord();
  }

  /** The PostgreSQL records they stand for (a copy). */
  get pgRecords(): Partial<Record<PgRecordKind, number>> {
    return this.byPgKind.toRecord();
  }

  /** Count one replayed record (before it is applied). */
  observe(rec: ReplayedRecord): void {
    const body = rec.body;
    const xid = rec.header.xid;
    this.byKind.add(WAL_KIND_INDEX.get(body.kind)!, 1);
    this.walBytes += rec.header.totalLength;
    const shape = xid !== 0 ? this.xacts.get(xid) : undefined;
    pgRecordsFor(body, shape, this.addPg);
    if (xid === 0) return;
    if (body.kind === 'XACT_COMMIT' || body.kind === 'XACT_ABORT') {
      this.xacts.delete(xid);
      return;
    }
    const s = shape ?? { vacuum: false, lock: false };
    if (
      body.kind === 'HEAP2_PRUNE' ||
      body.kind === 'HEAP2_VISIBLE' ||
      body.kind === 'SMGR_TRUNCATE'
    )
      s.vacuum = true;
    if (body.kind === 'STANDBY_LOCK') s.lock = true;
    if (shape === undefined) {
      // A transaction whose commit never comes (primary crashed) must not grow the map forever.
      if (this.xacts.size >= 1024) this.xacts.delete(this.xacts.keys().next().value!);
      this.xacts.set(xid, s);
    }
  }
}

/** Everything a replay span is priced by. All counts; plain JSON. */
export interface ReplayCounts {
  /** walsim records replayed, by kind. */
  records: Partial<Record<WalRecordKind, number>>;
  /** The PostgreSQL 15 records they stand for (pgRecordsFor). */
  pgRecords: Partial<Record<PgRecordKind, number>>;
  /** Bytes of the walsim records replayed (headers included). */
  walBytes: number;
  /** The node's drop counters over the span (storage/drop.ts). */
  drops: DropCounters;
  /** smgr file operations per fork [main, fsm, vm, init]. */
  smgr: SmgrFileOps;
  /** pg_control rewrites + fsyncs forced by replay (minRecoveryPoint). */
  controlFileUpdates: number;
  /** FSM updates by redo (XLogRecordPageWithFreeSpace; ReplayCounters.fsmUpdates). */
  fsmUpdates: number;
  /**
   * Tuples placed by PostgreSQL HEAP2_MULTI_INSERT records (COPY's heap_multi_insert: one record a
   * page, each tuple copied and PageAddItem'd). walsim logs none of these: its own multi-insert
   * stands for INSERT … SELECT, one HEAP_INSERT a row (pgRecordsFor); npm run predict counts them
   * from the real WAL.
   */
  multiInsertTuples: number;
  /**
   * 4 KiB pages of the buffer descriptor array that the standby's startup process maps at the
   * span's first full scan: a process's first touch of a shared page it has not mapped (PTEs of a
   * shared mapping are not copied at fork; on this project's virtual machine each such page costs
   * a hypervisor shadow-page fill, cost-model/README.md). walsim has no processes' address spaces
   * and counts none; npm run predict counts them from the startup process's page map.
   */
  descriptorPagesMapped: number;
  /**
   * Fork files a relation-dropping commit/abort removes that held blocks (counted in `smgr.unlink`
   * too): mdunlinkfork truncates each to 0 before the unlink (do_truncate), freeing its extents —
   * on a `discard` mount a synchronous discard per extent. walsim counts none (its files are not a
   * file system's); npm run predict counts them from the fork sizes (--pgdata, else the WAL's).
   */
  unlinkedNonEmptyForks: number;
  /**
   * Size queries that reached the file (counted in `smgr.nblocks` too) of a fork of a whole number
   * of 1 GB segments: mdnblocks finds its last open segment full and tries to open the next, which
   * does not exist (storage/pg-drop-rules.ts rule 9). Under 13's rules every block a record reads
   * of such a fork pays one; under 14+ only the fork's first, uncached, size query.
   */
  failedSegmentOpens: number;
}

/**
 * A ReplayCounts read back from JSON written before a counter existed (a stored calibration, a
 * bench's results.json): the counters added since then are absent there and read as 0 — they were
 * not counted, and the profiles fitted from those files price them at 0.
 */
export function withLaterCounters(c: ReplayCounts): ReplayCounts {
  return {
    ...c,
    fsmUpdates: c.fsmUpdates ?? 0,
    multiInsertTuples: c.multiInsertTuples ?? 0,
    descriptorPagesMapped: c.descriptorPagesMapped ?? 0,
    unlinkedNonEmptyForks: c.unlinkedNonEmptyForks ?? 0,
    failedSegmentOpens: c.failedSegmentOpens ?? 0,
  };
}

/** Counted steps of ending recovery (StartupXLOG after redo): see README "Counters". */
export interface EndOfRecoveryCounts {
  /** Timeline history files written and fsynced (writeTimelineHistory). */
  timelineHistoryFiles: number;
  /** WAL segments initialised on the new timeline (XLogInitNewTimeline). */
  walSegmentInits: number;
  /** Records written (XLOG_END_OF_RECOVERY). */
  records: number;
  /** WAL flushes (XLogFlush of the end-of-recovery record). */
  walFlushes: number;
}

/** Counted steps of opening for writes: pg_control to DB_IN_PRODUCTION. */
export interface OpenForWritesCounts {
  controlFileUpdates: number;
  /**
   * WAL segments of the new timeline preallocated after "archive recovery complete"
   * (StartupXLOG's PreallocXlogFiles(EndOfLog, newTLI): `walSegmentsPreallocated`). Optional
   * because counts stored before it existed lack it, and are read as 0; walsim's own promotion
   * does not preallocate (its WAL writer makes a segment when it first writes there).
   */
  walSegmentPreallocs?: number;
}

/** The counts of one failover (resume → read-write), per phase. */
export interface FailoverCounts {
  replay: ReplayCounts;
  endOfRecovery: EndOfRecoveryCounts;
  openForWrites: OpenForWritesCounts;
}

/** The storage a replay span runs against (a NodeStorage). */
export interface CountedStorage {
  readonly dropCounters: DropCounters;
  readonly smgr: { readonly fileOps: SmgrFileOps; readonly failedSegmentOpens: number };
  readonly replayCounters: ReplayCounters;
}

/** A snapshot of a node's cumulative counters (deep copy). */
export function replayCountsOf(st: CountedStorage): ReplayCounts {
  const r = st.replayCounters;
  const ops = st.smgr.fileOps;
  return {
    records: r.records,
    pgRecords: r.pgRecords,
    walBytes: r.walBytes,
    drops: copyDropCounters(st.dropCounters),
    smgr: {
      create: [...ops.create],
      extend: [...ops.extend],
      truncate: [...ops.truncate],
      unlink: [...ops.unlink],
      nblocks: [...ops.nblocks],
    },
    controlFileUpdates: r.minRecoveryPointUpdates,
    fsmUpdates: r.fsmUpdates,
    multiInsertTuples: 0,
    descriptorPagesMapped: 0,
    unlinkedNonEmptyForks: 0,
    failedSegmentOpens: st.smgr.failedSegmentOpens,
  };
}

/** A sparse map's span: kinds whose count did not change are left out (as in a fresh snapshot). */
function diffSparse<K extends string>(
  a: Partial<Record<K, number>>,
  b: Partial<Record<K, number>>,
): Partial<Record<K, number>> {
  const out: Partial<Record<K, number>> = {};
  for (const [k, v] of Object.entries(diffCounters(a, b)) as Array<[K, number]>)
    if (v !== 0) out[k] = v;
  return out;
}

/** The counts of the span between two snapshots (`later` − `earlier`). */
export function diffReplayCounts(earlier: ReplayCounts, later: ReplayCounts): ReplayCounts {
  return {
    ...diffCounters(earlier, later),
    records: diffSparse(earlier.records, later.records),
    pgRecords: diffSparse(earlier.pgRecords, later.pgRecords),
  };
}

export function emptyReplayCounts(): ReplayCounts {
  return {
    records: {},
    pgRecords: {},
    walBytes: 0,
    drops: emptyDropCounters(),
    smgr: {
      create: [0, 0, 0, 0],
      extend: [0, 0, 0, 0],
      truncate: [0, 0, 0, 0],
      unlink: [0, 0, 0, 0],
      nblocks: [0, 0, 0, 0],
    },
    controlFileUpdates: 0,
    fsmUpdates: 0,
    multiInsertTuples: 0,
    descriptorPagesMapped: 0,
    unlinkedNonEmptyForks: 0,
    failedSegmentOpens: 0,
  };
}

/**
 * The WAL segments PostgreSQL's StartupXLOG preallocates when recovery ends at `endOfLog` (the end
 * of the last record replayed): PreallocXlogFiles(EndOfLog, newTLI) creates, zero-fills and fsyncs
 * the segment after EndOfLog's when the offset of EndOfLog − 1 in its segment is at least 0.75 of
 * the segment size (13–18 alike). On the new timeline that segment never exists yet — except when
 * EndOfLog is a segment's first byte: XLogInitNewTimeline has just created that very segment, so
 * XLogFileInit finds it and adds nothing.
 */
export function walSegmentsPreallocated(endOfLog: number, walSegmentSize: number): 0 | 1 {
  if (!(Number.isSafeInteger(endOfLog) && endOfLog > 0))
    fail(`INV-COUNT-1: EndOfLog ${endOfLog} must be a positive LSN`);
  if (!(Number.isSafeInteger(walSegmentSize) && walSegmentSize > 0))
    fail(`INV-COUNT-1: wal_segment_size ${walSegmentSize} must be a positive integer`);
  if (segmentOffset(endOfLog, walSegmentSize) === 0) return 0;
  return segmentOffset(endOfLog - 1, walSegmentSize) >= Math.floor(0.75 * walSegmentSize) ? 1 : 0;
}

/**
 * The end-of-recovery and open-for-writes steps of a promotion: one of each, as walsim performs
 * them, and PostgreSQL's preallocated segments (`walSegmentsPreallocated`) where the caller knows
 * where recovery ends (predict); walsim's own promotion preallocates none.
 */
export function promotionStepCounts(
  walSegmentPreallocs?: number,
): Pick<FailoverCounts, 'endOfRecovery' | 'openForWrites'> {
  return {
    endOfRecovery: { timelineHistoryFiles: 1, walSegmentInits: 1, records: 1, walFlushes: 1 },
    // walsim's own steps (no argument) leave the count out, as its failover reports and the counts
    // stored from them do: absent reads as none.
    openForWrites:
      walSegmentPreallocs === undefined
        ? { controlFileUpdates: 1 }
        : { controlFileUpdates: 1, walSegmentPreallocs },
  };
}
