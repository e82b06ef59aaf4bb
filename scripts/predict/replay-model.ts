/**
 * From PostgreSQL's WAL records (13–18) to the cost model's counts: what the standby's startup process
 * would do replaying them — records by resource manager and type, the buffer-drop call of every
 * Storage TRUNCATE, every commit/abort that drops relations and every DROP DATABASE (its path,
 * descriptors scanned, probes, buffers invalidated), smgr file operations, and pg_control updates.
 * Pure: the record stream, NBuffers and what is known of the standby's files and buffers in;
 * `ReplayCounts` (storage/replay-counts.ts) and a per-drop account out.
 *
 * Entry points: `RecoveryModel` (`learn` the WAL replayed before the range, `replay` the range,
 * `result`; for the exporter's LSN windows: `takeTally`/`peekTally` the counts since a point, a
 * `journal` of what a window changed, `clone`, `relStates`), `pgKindOf`, `fsmBlocksAfterTruncate`,
 * `vmBlocksAfterTruncate`, `StandbyFiles`, `ReplayTally`, `RelJournal`, `copyRelState`.
 *
 * Which drop functions run, whether the lookup path exists, whether truncation replay caches the
 * truncated forks' sizes and which records forget every cached size are the standby's version's
 * (storage/pg-drop-rules.ts `PgDropRules`); the rest is the same in 14–18 and moot in 13, which
 * caches no sizes and scans every descriptor at every drop.
 *
 * The "size cached" rule (PostgreSQL 14–18, smgr.c smgrnblocks_cached + bufmgr.c):
 *   a fork's size is cached in the startup process iff replay, since the startup process began,
 *   read a block of it (XLogReadBufferExtended calls smgrnblocks), truncated it (smgrtruncate
 *   stores the new size), or asked its size while preparing an FSM/VM truncation; the cache dies
 *   with the relation's SMgrRelation (dropped at commit/abort redo) and with every SMgrRelation at
 *   DROP DATABASE redo (XLogDropDatabase → smgrcloseall; 15+ also CREATE DATABASE FILE_COPY and
 *   DROP TABLESPACE, through the SMGRRELEASE barrier). Storage CREATE does not cache a size, so
 *   a relation created and never written (an empty TOAST table) is uncached: dropping it takes
 *   the full scan. What "since the startup process began" covers is the WAL this module was given
 *   to `learn` (predict.ts: from the redo point replay started at).
 */
import { countDrop, type DropPath } from '../../storage/drop.ts';
import {
  forgetsCachedSizes,
  mdnblocksOpensNextSegment,
  pgDropRules,
  smgrnblocksAsksFile,
  type DropAllFn,
  type PgDropRules,
  type TruncateDropFn,
} from '../../storage/pg-drop-rules.ts';
import {
  emptyReplayCounts,
  PG_RECORD_KINDS,
  type PgRecordKind,
  type ReplayCounts,
} from '../../storage/replay-counts.ts';
import {
  FORK_NAMES,
  PRUNE_17_TYPES,
  relKey,
  type BlockRef,
  type ForkNumber,
  type PgWalRecord,
  type RelFileNode,
} from './wal-records.ts';

/** What is known of the standby's files and buffers at the replay LSN (null/undefined = unknown). */
export interface StandbyFiles {
  /** Blocks of a fork on disk now; null when the fork does not exist; undefined when unknown. */
  diskBlocks(node: RelFileNode, fork: ForkNumber): number | null | undefined;
  /** Blocks of a fork in shared_buffers now (pg_buffercache); undefined when unknown. */
  residentBlocks(node: RelFileNode, fork: ForkNumber): readonly number[] | undefined;
}

export const NO_FILES: StandbyFiles = {
  diskBlocks: () => undefined,
  residentBlocks: () => undefined,
};

/** rmgr names (pg_waldump) → the prefix of storage/replay-counts.ts PgRecordKind names. */
const RMGR_PREFIX: Readonly<Record<string, string>> = {
  XLOG: 'XLOG',
  Transaction: 'XACT',
  Storage: 'SMGR',
  Standby: 'STANDBY',
  Heap: 'HEAP',
  Heap2: 'HEAP2',
  Btree: 'BTREE',
};

/**
 * Heap2 records whose redo always updates the FSM: 13's CLEAN, 14–16's PRUNE and VACUUM, and
 * VISIBLE in every major (heap_xlog_visible records the heap page's free space when the record
 * sets a visibility-map bit, which visibilitymap_set asserts every VISIBLE record does).
 */
const ALWAYS_FSM_TYPES: ReadonlySet<string> = new Set(['CLEAN', 'PRUNE', 'VACUUM', 'VISIBLE']);

/**
 * Other majors' names for the redo routines a kind stands for: 13's CLEAN is 14–16's PRUNE (it also
 * logged VACUUM's second pass); 17+ log pruning and freezing as PRUNE_ON_ACCESS / PRUNE_VACUUM_SCAN
 * (heap_page_prune_execute, PageRepairFragmentation) and VACUUM's second pass as
 * PRUNE_VACUUM_CLEANUP (line pointers set unused, as 14–16's VACUUM). Without them these records
 * were priced by the generic constant and left out of a calibration's counts.
 */
const PG_KIND_ALIASES: Readonly<Record<string, PgRecordKind>> = {
  // heap_redo replays a HOT update with heap_xlog_update (hot_update = true): one tuple, one page.
  'Heap/HOT_UPDATE': 'HEAP_UPDATE',
  // heap_update logs a LOCK of the old tuple before it moves the new version to another page (one
  // per such update); heap_xlog_lock rewrites that tuple's xmax and infomask on one page, the work
  // of heap_xlog_delete without the line pointer: priced as that one-tuple record.
  'Heap/LOCK': 'HEAP_DELETE',
  'Heap2/CLEAN': 'HEAP2_PRUNE',
  'Heap2/PRUNE_ON_ACCESS': 'HEAP2_PRUNE',
  'Heap2/PRUNE_VACUUM_SCAN': 'HEAP2_PRUNE',
  'Heap2/PRUNE_VACUUM_CLEANUP': 'HEAP2_VACUUM',
};

/**
 * The cost model's record kind of a PostgreSQL record, or null when the profile has no constant
 * of its own for it (priced by the generic per-record constant). `+INIT` (the page is
 * re-initialised) is the same redo routine.
 */
export function pgKindOf(rmgr: string, type: string): PgRecordKind | null {
  const alias = PG_KIND_ALIASES[`${rmgr}/${type.replace(/\+INIT$/, '')}`];
  if (alias !== undefined) return alias;
  const prefix = RMGR_PREFIX[rmgr];
  if (prefix === undefined) return null;
  const k = `${prefix}_${type.replace(/\+INIT$/, '')}`;
  return (PG_RECORD_KINDS as readonly string[]).includes(k) ? (k as PgRecordKind) : null;
}

// freespace.c / visibilitymap.c geometry at BLCKSZ 8192.
const BLCKSZ = 8192;
const SIZE_OF_PAGE_HEADER = 24;
/** NodesPerPage − NonLeafNodesPerPage: heap pages one FSM leaf page covers. */
const SLOTS_PER_FSM_PAGE = BLCKSZ - SIZE_OF_PAGE_HEADER - 4 - (BLCKSZ / 2 - 1);
const FSM_TREE_DEPTH = 3;
/** MAPSIZE × HEAPBLOCKS_PER_BYTE: heap pages one VM page covers. */
const HEAPBLOCKS_PER_VM_PAGE = (BLCKSZ - SIZE_OF_PAGE_HEADER) * 4;

/** fsm_logical_to_physical for a leaf (level 0) page. */
function fsmLeafPhysical(logpageno: number): number {
  let leafno = logpageno;
  let pages = 0;
  for (let l = 0; l < FSM_TREE_DEPTH; l++) {
    pages += leafno + 1;
    leafno = Math.floor(leafno / SLOTS_PER_FSM_PAGE);
  }
  return pages - 1;
}

/** The FSM block holding heap block `heapBlk`'s slot. */
export function fsmBlockOf(heapBlk: number): number {
  return fsmLeafPhysical(Math.floor(heapBlk / SLOTS_PER_FSM_PAGE));
}

/** FreeSpaceMapPrepareTruncateRel: the FSM's new length when the heap is cut to `nblocks`. */
export function fsmBlocksAfterTruncate(nblocks: number): number {
  const slot = nblocks % SLOTS_PER_FSM_PAGE;
  const leaf = fsmLeafPhysical(Math.floor(nblocks / SLOTS_PER_FSM_PAGE));
  return slot === 0 ? leaf : leaf + 1;
}

/** visibilitymap_prepare_truncate: the VM's new length when the heap is cut to `nblocks`. */
export function vmBlocksAfterTruncate(nblocks: number): number {
  const truncBlock = Math.floor(nblocks / HEAPBLOCKS_PER_VM_PAGE);
  return nblocks % HEAPBLOCKS_PER_VM_PAGE === 0 ? truncBlock : truncBlock + 1;
}

export interface ForkState {
  /** The fork exists (true), does not (false), unknown (undefined: ask StandbyFiles). */
  exists: boolean | undefined;
  /** smgr_cached_nblocks is valid in the startup process. */
  cached: boolean;
  /** Current length in blocks when known (else: StandbyFiles' disk size at first need). */
  size: number | undefined;
  /** Blocks in shared_buffers. */
  resident: Set<number>;
}

export interface RelState {
  /** relKey(node), kept so that the journal needs no key per block. */
  key: string;
  node: RelFileNode;
  forks: [ForkState, ForkState, ForkState, ForkState];
}

/** One drop call PostgreSQL makes during replay (its version's function), and why it takes its path. */
export interface PredictedDrop {
  lsn: number;
  /** The record: Storage/TRUNCATE, Transaction/COMMIT, …, Database/DROP. */
  record: string;
  fn: TruncateDropFn | DropAllFn | 'DropDatabaseBuffers';
  relations: string[];
  path: 'full-scan' | 'cached-lookup';
  why: string;
  /** Blocks to invalidate by the cached sizes (null when a size is not cached). */
  blocksToDrop: number | null;
  descriptorsScanned: number;
  probes: number;
  invalidated: number;
}

export interface RecordTypeCount {
  rmgr: string;
  type: string;
  count: number;
  bytes: number;
  /** The profile constant that prices it (null: the generic per-record constant). */
  kind: PgRecordKind | null;
}

/** A whole prediction: the tally of every record read, and what had to be assumed. */
export interface ReplayPrediction extends ReplayTally {
  /** What had to be assumed because a fact was unknown (each once). */
  assumptions: string[];
}

/**
 * What records replayed (not learned) added since a point: the counts of an LSN window
 * (scripts/exporter/windows.ts sums these instead of keeping records).
 */
export interface ReplayTally {
  counts: ReplayCounts;
  /** Records by rmgr/type, in first-seen order. */
  types: RecordTypeCount[];
  /** Records of types the profile has no constant for, by `rmgr/type`. */
  genericRecords: number;
  records: number;
  walBytes: number;
  /** Every drop call, or only the first full-scan one with `dropList: 'first-full-scan'`. */
  drops: PredictedDrop[];
}

/**
 * What changed in the relation state since the journal began (an LSN window of the exporter):
 * which relations were touched (`fresh`: created in the window, so their state at its start does
 * not matter), per fork the blocks that became resident and the lowest truncation point, and
 * whether every cached size was forgotten. windows.ts turns it into the window's image.
 */
export interface RelJournal {
  forgot: boolean;
  /** A full scan ran in the window: the descriptor array is mapped from then on. */
  fullScan: boolean;
  rels: Map<string, JournalEntry>;
}
export interface JournalEntry {
  /** The relation was in the state when the window began. */
  existed: boolean;
  fresh: boolean;
  newly: [Set<number> | null, Set<number> | null, Set<number> | null, Set<number> | null];
  truncFrom: [number | null, number | null, number | null, number | null];
}

export const newJournal = (): RelJournal => ({ forgot: false, fullScan: false, rels: new Map() });

const RELS_BSEARCH_THRESHOLD = 20;
/** sizeof(BufferDescPadded) on 64-bit builds, and the kernel's base page. */
const DESCRIPTOR_BYTES = 64;
const PAGE_BYTES = 4096;
/** Slots of RecoveryModel's cache of relation states (a power of two). */
const REL_CACHE = 64;
/** The cache slot of a relKey (`spc/db/rel`): its relfilenode OID modulo REL_CACHE. */
const relSlotOfKey = (k: string) => Number(k.slice(k.lastIndexOf('/') + 1)) & (REL_CACHE - 1);
const SMGR_TRUNCATE_HEAP = 1;
const SMGR_TRUNCATE_VM = 2;
const SMGR_TRUNCATE_FSM = 4;

/** The startup process's relation state, fed record by record. */
export class RecoveryModel {
  private readonly rels = new Map<string, RelState>();
  /**
   * States `rel` returned lately, by relfilenode OID modulo REL_CACHE (a slot is emptied when its
   * relation leaves `rels`; all are, once `rels` was handed out): a heap and its indexes
   * alternate, so one "last relation" would miss at every other record.
   */
  private readonly relCache: Array<RelState | null> = new Array<RelState | null>(REL_CACHE).fill(
    null,
  );
  /**
   * The block added last to a resident set, by (relfilenode OID × 4 + fork) modulo REL_CACHE:
   * the block is in that set as long as nothing removed blocks from sets (`forgetResidentMemo`).
   */
  private readonly residentMemoSet: Array<Set<number> | null> = new Array<Set<number> | null>(
    REL_CACHE,
  ).fill(null);
  private readonly residentMemoBlock = new Float64Array(REL_CACHE);
  private counts = emptyReplayCounts();
  private readonly types = new Map<string, RecordTypeCount>();
  /** The same entries by rmgr, then type (`typeCount`), and the one found last. */
  private readonly typeIndex = new Map<string, Map<string, RecordTypeCount>>();
  private lastType: RecordTypeCount | null = null;
  /** The same entries by `PgWalRecord.typeKey` (rmid * 256 + xl_info), when records carry it. */
  private readonly typeByKey: Array<RecordTypeCount | undefined> = new Array(256 * 256);
  /**
   * The keys set in `typeByKey` since the last take: a take clears those, not the whole array
   * (allocating it again cost 2.5 ms a take — the exporter takes one per LSN window it seals).
   */
  private readonly typeKeys: number[] = [];
  private drops: PredictedDrop[] = [];
  private readonly assumptions = new Set<string>();
  /** Changes since the exporter's current LSN window began (null: not journaled). */
  journal: RelJournal | null = null;
  private records = 0;
  private walBytes = 0;
  private genericRecords = 0;
  /** A full scan has run in this startup process (learned or replayed): the array is mapped. */
  private descriptorsMapped = false;
  /**
   * The LSN of the last full-scan drop counted since the last take (null: none): the exporter
   * keeps it per LSN window, to know whether a window has a full-scan drop after a replay LSN.
   */
  lastFullScanLsn: number | null = null;
  /** BUF_DROP_FULL_SCAN_THRESHOLD; null where the version has no lookup path (13). */
  readonly threshold: number | null;

  constructor(
    readonly nBuffers: number,
    private readonly files: StandbyFiles = NO_FILES,
    private readonly residentKnown = false,
    /** The standby's version's rules (default: 15, a current minor). */
    readonly rules: PgDropRules = pgDropRules({ major: 15, minor: null }),
    /** Keep every drop call (predict lists them) or the first full scan only (bounded memory). */
    readonly dropList: 'all' | 'first-full-scan' = 'all',
  ) {
    this.threshold =
      rules.thresholdDivisor === null ? null : Math.floor(nBuffers / rules.thresholdDivisor);
  }

  /** The drop path and why, given the blocks to drop by cached sizes (null: a size not cached). */
  private choosePath(
    total: number | null,
    uncachedWhy: string,
    what: string,
  ): { lookup: boolean; why: string } {
    if (this.threshold === null)
      return {
        lookup: false,
        why: `PostgreSQL ${this.rules.major} has no cached-size lookup: every drop scans all NBuffers descriptors`,
      };
    if (total === null) return { lookup: false, why: uncachedWhy };
    return total < this.threshold
      ? { lookup: true, why: `sizes cached, ${total} ${what} < NBuffers/32 = ${this.threshold}` }
      : { lookup: false, why: `${total} ${what} ≥ NBuffers/32 = ${this.threshold}` };
  }

  /**
   * smgrnblocks: 14+ asks the file once and caches the answer in recovery; 13 asks every time. An
   * mdnblocks of a fork of whole 1 GB segments also fails to open the next segment (rule 9).
   */
  private askSize(r: RelState, f: ForkNumber, counted: boolean): void {
    const st = r.forks[f];
    if (smgrnblocksAsksFile(this.rules, st.cached)) {
      st.cached = true;
      if (!counted) return;
      this.counts.smgr.nblocks[f]! += 1;
      if (mdnblocksOpensNextSegment(this.sizeOf(r, f))) this.counts.failedSegmentOpens += 1;
    }
  }

  /**
   * The state of `node`'s relation, created when new. `node` may be refilled by the caller after
   * the call (pg-wal-source.ts reuses one per block slot): a new state keeps a copy.
   */
  private rel(node: RelFileNode): RelState {
    // Block references mostly name a few relations: no key string for those.
    const slot = node.rel & (REL_CACHE - 1);
    const last = this.relCache[slot]!;
    if (
      last !== null &&
      last.node.rel === node.rel &&
      last.node.db === node.db &&
      last.node.spc === node.spc
    ) {
      if (this.journal !== null) this.journaled(last.key, false);
      return last;
    }
    const k = relKey(node);
    let r = this.rels.get(k);
    if (r !== undefined) {
      if (this.journal !== null) this.journaled(k, false);
      return (this.relCache[slot] = r);
    }
    const copy = { spc: node.spc, db: node.db, rel: node.rel };
    const fork = (f: ForkNumber): ForkState => ({
      exists: undefined,
      cached: false,
      size: undefined,
      resident: new Set(this.files.residentBlocks(copy, f) ?? []),
    });
    r = { key: k, node: copy, forks: [fork(0), fork(1), fork(2), fork(3)] };
    this.rels.set(k, r);
    if (this.journal !== null) this.journaled(k, true);
    return (this.relCache[slot] = r);
  }

  /** The journal's entry of a relation read or changed in this window (`created`: just now). */
  private journaled(k: string, created: boolean): JournalEntry {
    const rels = this.journal!.rels;
    let e = rels.get(k);
    if (e === undefined) {
      e = {
        existed: !created,
        fresh: created,
        newly: [null, null, null, null],
        truncFrom: [null, null, null, null],
      };
      rels.set(k, e);
    } else if (created) e.fresh = true;
    return e;
  }

  /** A relation leaves the state: one created in this window leaves the journal too. */
  private deleteRel(k: string): void {
    this.forgetResidentMemo();
    this.rels.delete(k);
    const slot = relSlotOfKey(k);
    if (this.relCache[slot]?.key === k) this.relCache[slot] = null;
    if (this.journal !== null && this.journal.rels.get(k)?.existed === false)
      this.journal.rels.delete(k);
  }

  /** A block became resident (journaled: the window's image adds it). */
  private addResident(r: RelState, f: ForkNumber, block: number): void {
    const st = r.forks[f];
    // Runs of records write one page of a relation (a bulk INSERT: a heap page, a btree leaf):
    // the block added last to this slot's set is still in it, no hash lookup needed.
    const slot = (r.node.rel * 4 + f) & (REL_CACHE - 1);
    if (this.residentMemoSet[slot] === st.resident && this.residentMemoBlock[slot] === block)
      return;
    this.residentMemoSet[slot] = st.resident;
    this.residentMemoBlock[slot] = block;
    if (st.resident.has(block)) return;
    st.resident.add(block);
    if (this.journal !== null) (this.journaled(r.key, false).newly[f] ??= new Set()).add(block);
  }

  /** Blocks may have left resident sets (a truncation, a drop, states handed out): forget. */
  private forgetResidentMemo(): void {
    this.residentMemoSet.fill(null);
  }

  private exists(r: RelState, f: ForkNumber): boolean {
    const st = r.forks[f];
    if (st.exists !== undefined) return st.exists;
    const d = this.files.diskBlocks(r.node, f);
    if (d !== undefined) return (st.exists = d !== null);
    // Every relation in a drop list or truncated has a main fork; FSM/VM/init are created lazily.
    if (f === 0) return (st.exists = true);
    this.assumptions.add(
      'forks other than main that replay has not touched are assumed not to exist (pass --pgdata to read them)',
    );
    return (st.exists = false);
  }

  private sizeOf(r: RelState, f: ForkNumber): number {
    const st = r.forks[f];
    if (st.size !== undefined) return st.size;
    const d = this.files.diskBlocks(r.node, f);
    if (d === undefined)
      this.assumptions.add(
        'relation sizes are lower bounds from the WAL (the highest block referenced; pass --pgdata to read the files)',
      );
    return (st.size = d ?? 0);
  }

  private uncached(r: RelState, f: ForkNumber): string {
    return `${relKey(r.node)} ${FORK_NAMES[f]} fork: size not cached (${
      this.sizeOf(r, f) === 0
        ? 'an empty fork replay never read, e.g. a TOAST table never written'
        : 'not touched by replay since the standby started'
    })`;
  }

  /** XLogReadBufferExtended: smgrcreate + smgrnblocks (caches the size), extend to the block, read it. */
  private touch(node: RelFileNode, f: ForkNumber, block: number, counted: boolean): void {
    const r = this.rel(node);
    const st = r.forks[f];
    const size = this.sizeOf(r, f);
    this.askSize(r, f, counted);
    st.exists = true;
    if (block >= size) {
      if (counted) this.counts.smgr.extend[f]! += block + 1 - size;
      st.size = block + 1;
    }
    if (counted || !this.residentKnown) this.addResident(r, f, block);
  }

  /**
   * Redo routines that touch the FSM outside the block references (XLogRecordPageWithFreeSpace):
   * 13's CLEAN, 14–16's PRUNE and VACUUM, and VISIBLE always (for VISIBLE the heap page is its
   * second block reference, the first is the VM page); 17+'s PRUNE_* when they redirected, killed
   * or freed a line pointer (`freedSpace`; unknown counts as freed); INSERT, MULTI_INSERT and
   * non-HOT UPDATE when the page is left with less than BLCKSZ / 5 free (wal-records.ts
   * heapPageFreeAfter) — a one-block table filled by INSERT (226 int rows) has its FSM read,
   * created and cached by replay. Checked with gdb on XLogRecordPageWithFreeSpace in a 17.10
   * standby's startup process over three ranges (VACUUM of 100 pages, INSERT + DELETE of 60 pages,
   * VACUUM of those): 3,020 calls, 200 + 2,700 + 120 as counted here.
   */
  private touchFsm(rec: PgWalRecord, counted: boolean): void {
    const pruned =
      rec.rmgr === 'Heap2' &&
      (ALWAYS_FSM_TYPES.has(rec.type) ||
        (PRUNE_17_TYPES.has(rec.type) && rec.freedSpace !== false));
    const filled = rec.heapPageFreeAfter !== undefined && rec.heapPageFreeAfter < BLCKSZ / 5;
    if (!pruned && !filled) return;
    let b: BlockRef | undefined;
    for (const x of rec.blocks)
      if (x.fork === 0) {
        b = x;
        break;
      }
    if (b === undefined) return;
    this.touch(b.node, 1, fsmBlockOf(b.block), counted);
    if (counted) this.counts.fsmUpdates += 1;
  }

  /** A record replayed before the range (since the startup process began): state only, no counts. */
  learn(rec: PgWalRecord): void {
    this.apply(rec, false);
  }

  /** A record of the range: counted and priced. */
  replay(rec: PgWalRecord): void {
    this.records += 1;
    this.walBytes += rec.totalLength;
    // By the record's rmid and xl_info when it has them: one array read, no string compared.
    const key = rec.typeKey;
    let t = key !== undefined ? this.typeByKey[key] : undefined;
    if (t === undefined) {
      t = this.typeCount(rec.rmgr, rec.type);
      if (key !== undefined) {
        this.typeByKey[key] = t;
        this.typeKeys.push(key);
      }
    }
    t.count += 1;
    t.bytes += rec.totalLength;
    // counts.pgRecords is these counts summed by kind when the tally is read (countsNow).
    if (t.kind === null) this.genericRecords += 1;
    this.apply(rec, true);
  }

  /**
   * The counts, their `pgRecords` summed from the tally's types by kind, in the order the kinds
   * were first met (as a count per record would have added them).
   */
  private countsNow(): ReplayCounts {
    const pg: Partial<Record<PgRecordKind, number>> = {};
    for (const t of this.types.values())
      if (t.kind !== null) pg[t.kind] = (pg[t.kind] ?? 0) + t.count;
    this.counts.pgRecords = pg;
    return this.counts;
  }

  /**
   * The tally's entry of a record type, added in first-seen order: looked up by rmgr, then type
   * (two lookups of constant strings instead of building a `rmgr/type` key per record).
   */
  private typeCount(rmgr: string, type: string): RecordTypeCount {
    // Runs of one type (a bulk INSERT) skip the lookups.
    const last = this.lastType;
    if (last !== null && last.type === type && last.rmgr === rmgr) return last;
    let byType = this.typeIndex.get(rmgr);
    if (byType === undefined) this.typeIndex.set(rmgr, (byType = new Map()));
    let t = byType.get(type);
    if (t === undefined) {
      t = { rmgr, type, count: 0, bytes: 0, kind: pgKindOf(rmgr, type) };
      byType.set(type, t);
      this.types.set(`${rmgr}/${type}`, t);
    }
    return (this.lastType = t);
  }

  private apply(rec: PgWalRecord, counted: boolean): void {
    for (const b of rec.blocks) this.touch(b.node, b.fork, b.block, counted);
    this.touchFsm(rec, counted);
    if (counted && rec.multiInsertTuples !== undefined)
      this.counts.multiInsertTuples += rec.multiInsertTuples;
    if (rec.create !== undefined) {
      const r = this.rel(rec.create.node);
      const st = r.forks[rec.create.fork];
      if (counted && st.exists !== true) this.counts.smgr.create[rec.create.fork]! += 1;
      st.exists = true;
      st.size ??= this.files.diskBlocks(r.node, rec.create.fork) ?? 0;
    }
    if (rec.truncate !== undefined) this.truncate(rec, counted);
    if (rec.dropRels !== undefined && rec.dropRels.length > 0) this.dropRelations(rec, counted);
    if (rec.dropDatabase !== undefined) this.dropDatabase(rec, counted);
    else if (forgetsCachedSizes(this.rules, rec.rmgr, rec.type) !== null) this.forgetSizes();
  }

  private forgetSizes(): void {
    for (const r of this.rels.values()) for (const st of r.forks) st.cached = false;
    if (this.journal !== null) this.journal.forgot = true;
  }

  /** smgr_redo's forks to truncate (main, then FSM and VM when they shrink) and their new ends. */
  private forksToTruncate(
    r: RelState,
    t: NonNullable<PgWalRecord['truncate']>,
    counted: boolean,
  ): Array<{ fork: ForkNumber; first: number }> {
    const list: Array<{ fork: ForkNumber; first: number }> = [];
    if (t.flags & SMGR_TRUNCATE_HEAP) {
      list.push({ fork: 0, first: t.blkno });
      // The January 2025 minors: smgr_redo asks smgrnblocks of the main fork before truncating.
      if (this.rules.truncateCachesSizes) this.askSize(r, 0, counted);
    }
    // FreeSpaceMapPrepareTruncateRel / visibilitymap_prepare_truncate: only an existing fork that
    // is longer than its new length joins; both ask smgrnblocks, which caches the fork's size. The
    // January 2025 minors ask it again for the fork's old size (a second lseek in 13).
    const prepare = (fork: ForkNumber, newLen: number) => {
      if (!this.exists(r, fork)) return;
      this.askSize(r, fork, counted);
      if (this.sizeOf(r, fork) <= newLen) return;
      list.push({ fork, first: newLen });
      if (this.rules.truncateCachesSizes) this.askSize(r, fork, counted);
    };
    if (t.flags & SMGR_TRUNCATE_FSM) prepare(1, fsmBlocksAfterTruncate(t.blkno));
    if (t.flags & SMGR_TRUNCATE_VM) prepare(2, vmBlocksAfterTruncate(t.blkno));
    return list;
  }

  private truncate(rec: PgWalRecord, counted: boolean): void {
    const t = rec.truncate!;
    const r = this.rel(t.node);
    // smgr_redo: XLogFlush(lsn) before truncating → UpdateMinRecoveryPoint rewrites pg_control.
    if (counted) this.counts.controlFileUpdates += 1;
    r.forks[0].exists = true;
    const list = this.forksToTruncate(r, t, counted);
    if (list.length === 0) return;
    // DropRelFileNodeBuffers / DropRelationBuffers: every listed fork's size cached and
    // Σ (size − first) < NBuffers/32.
    let total: number | null = 0;
    let uncachedWhy = '';
    for (const { fork, first } of list) {
      if (!r.forks[fork].cached) {
        total = null;
        uncachedWhy = this.uncached(r, fork);
        break;
      }
      total += Math.max(0, this.sizeOf(r, fork) - first);
    }
    const { lookup, why } = this.choosePath(total, uncachedWhy, 'blocks to drop');
    let invalidated = 0;
    let preCheckHits = 0;
    this.forgetResidentMemo();
    for (const { fork, first } of list) {
      const st = r.forks[fork];
      for (const b of [...st.resident]) {
        if (b >= first) {
          invalidated += 1;
          st.resident.delete(b);
        }
      }
      if (this.journal !== null) {
        const t = this.journaled(r.key, false).truncFrom;
        t[fork] = Math.min(t[fork] ?? first, first);
      }
    }
    if (!lookup) for (const st of r.forks) preCheckHits += st.resident.size;
    this.record(rec, counted, {
      fn: this.rules.fn.truncate,
      relations: [relKey(r.node)],
      path: lookup ? 'cached-lookup' : 'full-scan',
      why,
      blocksToDrop: total,
      matcher: 'single',
      invalidated,
      preCheckHits: preCheckHits + (lookup ? 0 : invalidated),
    });
    // smgrtruncate: mdtruncate each fork that shrinks, then cache its new size.
    for (const { fork, first } of list) {
      const st = r.forks[fork];
      if (counted && this.sizeOf(r, fork) > first) this.counts.smgr.truncate[fork]! += 1;
      st.size = first;
      st.cached = true;
    }
  }

  private dropRelations(rec: PgWalRecord, counted: boolean): void {
    const nodes = rec.dropRels!;
    // xact_redo_commit/abort: XLogFlush(lsn) before DropRelationFiles → pg_control rewritten.
    if (counted) this.counts.controlFileUpdates += 1;
    const rs = nodes.map((n) => this.rel(n));
    // DropRelFileNodesAllBuffers: sizes of every fork; a missing fork is skipped (smgrexists),
    // an existing uncached one ends the size scan and forces the full scan.
    let total: number | null = 0;
    let uncachedWhy = '';
    outer: for (const r of rs) {
      for (const f of [0, 1, 2, 3] as const) {
        if (r.forks[f].cached) {
          total += this.sizeOf(r, f);
        } else if (this.exists(r, f)) {
          total = null;
          uncachedWhy = this.uncached(r, f);
          break outer;
        }
      }
    }
    const { lookup, why } = this.choosePath(total, uncachedWhy, 'blocks');
    let invalidated = 0;
    for (const r of rs) for (const st of r.forks) invalidated += st.resident.size;
    this.record(rec, counted, {
      fn: this.rules.fn.dropRelations,
      relations: rs.map((r) => relKey(r.node)),
      path: lookup ? 'cached-lookup' : 'full-scan',
      why,
      blocksToDrop: total,
      matcher: rs.length > RELS_BSEARCH_THRESHOLD ? 'bsearch' : 'linear',
      invalidated,
      preCheckHits: invalidated,
    });
    for (const r of rs) {
      for (const f of [0, 1, 2, 3] as const) {
        if (!counted || !(r.forks[f].cached || this.exists(r, f))) continue;
        this.counts.smgr.unlink[f]! += 1;
        if (this.heldAllocatedBlocks(r, f)) this.counts.unlinkedNonEmptyForks += 1;
      }
      this.deleteRel(r.key);
    }
  }

  /**
   * mdunlinkfork's do_truncate frees the fork's allocated extents first, a discard each on a
   * `discard` mount. Blocks replay wrote after the standby's file was last written back are
   * delayed allocations with no extent yet (ext4 delalloc): a fork created in the range, or one
   * whose file was empty, frees none. So: the blocks the standby's file held when predict read it
   * (before the range); without the files, the blocks the model knows of.
   */
  private heldAllocatedBlocks(r: RelState, f: ForkNumber): boolean {
    const d = this.files.diskBlocks(r.node, f);
    return d === undefined ? this.sizeOf(r, f) > 0 : (d ?? 0) > 0;
  }

  private dropDatabase(rec: PgWalRecord, counted: boolean): void {
    const db = rec.dropDatabase!;
    let invalidated = 0;
    for (const [k, r] of this.rels) {
      if (r.node.db === db) {
        for (const st of r.forks) invalidated += st.resident.size;
        if (this.journal !== null) this.journaled(k, false);
        this.deleteRel(k);
      }
    }
    // XLogDropDatabase → smgrcloseall/smgrdestroyall: every cached size is gone (pg-drop-rules).
    this.forgetSizes();
    this.record(rec, counted, {
      fn: this.rules.fn.dropDatabase,
      relations: [`database ${db}`],
      path: 'full-scan',
      why: `DropDatabaseBuffers always scans every descriptor; then the startup process forgets ${this.rules.dropDatabaseForgets}`,
      blocksToDrop: null,
      matcher: 'single',
      invalidated,
      preCheckHits: invalidated,
    });
  }

  private record(
    rec: PgWalRecord,
    counted: boolean,
    d: Omit<PredictedDrop, 'lsn' | 'record' | 'descriptorsScanned' | 'probes'> & {
      matcher: 'single' | 'linear' | 'bsearch';
      preCheckHits: number;
    },
  ): void {
    const full = d.path === 'full-scan';
    if (full && this.journal !== null) this.journal.fullScan = true;
    if (full && !this.descriptorsMapped) {
      this.descriptorsMapped = true;
      if (counted) this.counts.descriptorPagesMapped += this.unmappedDescriptorPages();
    }
    if (!counted) return;
    const probes = full ? 0 : d.blocksToDrop!;
    // One drop call as walsim's own drops count it (storage/drop.ts DropResult → DropCounters).
    countDrop(this.counts.drops, {
      path: d.path as DropPath,
      scanned: full ? this.nBuffers : 0,
      probes,
      invalidated: d.invalidated,
      nBlocksToInvalidate: d.blocksToDrop,
      headerLocks: full ? d.preCheckHits : d.invalidated,
      matcher: full ? d.matcher : null,
      listSteps: 0,
      hashInserts: 0,
    });
    if (full) this.lastFullScanLsn = rec.lsn;
    if (this.dropList === 'first-full-scan' && (!full || this.drops.length > 0)) return;
    this.drops.push({
      lsn: rec.lsn,
      record: `${rec.rmgr}/${rec.type}`,
      fn: d.fn,
      relations: d.relations,
      path: d.path,
      why: d.why,
      blocksToDrop: d.blocksToDrop,
      descriptorsScanned: full ? this.nBuffers : 0,
      probes,
      invalidated: d.invalidated,
    });
  }

  /**
   * The pages of the descriptor array (NBuffers × 64-byte BufferDescPadded) the startup process
   * maps at its first full scan, from the WAL alone: all of them (no full scan in the WAL learned
   * since the startup process began; it touched only its own buffers' descriptors).
   * `withDescriptorPageMap` puts the page map's figure in their place when it could be read.
   */
  private unmappedDescriptorPages(): number {
    return Math.ceil((this.nBuffers * DESCRIPTOR_BYTES) / PAGE_BYTES);
  }

  /**
   * A copy that later records change independently of this one: the exporter keeps the state
   * learned up to the replay LSN and replays the unreplayed range on a copy (scripts/exporter/).
   */
  clone(): RecoveryModel {
    const c = new RecoveryModel(
      this.nBuffers,
      this.files,
      this.residentKnown,
      this.rules,
      this.dropList,
    );
    for (const [k, r] of this.rels) c.rels.set(k, copyRelState(r));
    c.counts = structuredClone(this.countsNow());
    for (const t of this.types.values()) Object.assign(c.typeCount(t.rmgr, t.type), t);
    for (const d of this.drops) c.drops.push({ ...d, relations: [...d.relations] });
    for (const a of this.assumptions) c.assumptions.add(a);
    c.descriptorsMapped = this.descriptorsMapped;
    c.lastFullScanLsn = this.lastFullScanLsn;
    c.records = this.records;
    c.walBytes = this.walBytes;
    c.genericRecords = this.genericRecords;
    return c;
  }

  /** Records replayed since the last take (or since the model began). */
  peekRecords(): number {
    return this.records;
  }

  /** What was replayed since the last take (or since the model began), copied. */
  peekTally(): ReplayTally {
    return {
      counts: structuredClone(this.countsNow()),
      types: [...this.types.values()].map((t) => ({ ...t })),
      genericRecords: this.genericRecords,
      records: this.records,
      walBytes: this.walBytes,
      drops: this.drops.map((d) => ({ ...d, relations: [...d.relations] })),
    };
  }

  /** What was replayed since the last take; the counts start again from zero (state is kept). */
  takeTally(): ReplayTally {
    const t: ReplayTally = {
      counts: this.countsNow(),
      types: [...this.types.values()],
      genericRecords: this.genericRecords,
      records: this.records,
      walBytes: this.walBytes,
      drops: this.drops,
    };
    this.counts = emptyReplayCounts();
    this.types.clear();
    this.typeIndex.clear();
    for (const k of this.typeKeys) this.typeByKey[k] = undefined;
    this.typeKeys.length = 0;
    this.lastType = null;
    this.drops = [];
    this.lastFullScanLsn = null;
    this.records = this.walBytes = this.genericRecords = 0;
    return t;
  }

  /**
   * What had to be assumed, each once, in the order first met; the descriptor pages' note when
   * `counts` (default: this tally's) priced pages no page map gave; the buffers note last.
   */
  assumptionList(counts: ReplayCounts = this.counts): string[] {
    const out = [...this.assumptions];
    if (counts.descriptorPagesMapped > 0) out.push(DESCRIPTOR_NOTE);
    if (!this.residentKnown) out.push(RESIDENT_NOTE);
    return out;
  }

  /**
   * The relation states by relKey, for the exporter's LSN windows only (windows.ts reads a
   * window's image from the head model and applies images to the tail model).
   */
  relStates(): Map<string, RelState> {
    // The caller may delete or replace entries (and blocks): `rel` must look them up again.
    this.relCache.fill(null);
    this.forgetResidentMemo();
    return this.rels;
  }

  /** A full scan ran: a window image whose records scanned (windows.ts). */
  markDescriptorsMapped(): void {
    this.descriptorsMapped = true;
  }

  /** Every cached size forgotten: a window image whose records forgot them (windows.ts). */
  forgetAllSizes(): void {
    this.forgetSizes();
  }

  result(): ReplayPrediction {
    return { ...this.peekTally(), assumptions: this.assumptionList() };
  }
}

const DESCRIPTOR_NOTE =
  "the startup process is assumed to have mapped none of the buffer descriptor array before the range's first full scan (no full scan in the WAL replayed since the last restartpoint; run with --pgdata on the standby's host to read its page map)";

/**
 * The prediction with the descriptor pages its first full scan maps as the startup process's page
 * map reports them now (`unmapped`; null: not readable, the WAL's count and its note stay).
 */
export function withDescriptorPageMap(
  rp: ReplayPrediction,
  unmapped: number | null,
): ReplayPrediction {
  if (unmapped === null || rp.counts.descriptorPagesMapped === 0) return rp;
  return {
    ...rp,
    counts: { ...rp.counts, descriptorPagesMapped: unmapped },
    assumptions: rp.assumptions.filter((a) => a !== DESCRIPTOR_NOTE),
  };
}

const RESIDENT_NOTE =
  'buffers to invalidate = the blocks replay read since the standby started (pg_buffercache not installed)';

/** A relation's state, its own copy (resident sets included). */
export function copyRelState(r: RelState): RelState {
  const forks = r.forks.map((f) => ({ ...f, resident: new Set(f.resident) }));
  return { key: r.key, node: r.node, forks: forks as RelState['forks'] };
}
