/**
 * PostgreSQL 15 WAL records as `pg_waldump` prints them (one line per record) and as
 * `pg_walinspect`'s `pg_get_wal_records_info()` returns them, parsed into one shape: resource
 * manager, record type (rm_identify's name, the one `pg_waldump --stats=record` groups by), lengths,
 * block references, and what the drop logic needs from the description (Storage CREATE/TRUNCATE,
 * the relations a commit or abort drops, DROP DATABASE). Pure.
 *
 * Entry points: `parseWaldumpLine`, `recordFromWalinspect`, `heapPageFreeAfter`, `heapFreeAfter`,
 * `PgWalRecord`, `RelFileNode`, `relKey`, `FORK_NAMES`.
 *
 * A line or row that is not a record is refused with the text; a record type this module does not
 * know is still a record (rmgr and type kept), never dropped.
 */
import { WalsimError } from '../../common/errors.ts';
import { parseLsn, type Lsn } from '../../wal/lsn.ts';

/** PostgreSQL's RelFileNode: tablespace, database and relfilenode OIDs. */
export interface RelFileNode {
  spc: number;
  db: number;
  rel: number;
}

/** ForkNumber: main 0, fsm 1, vm 2, init 3 (relpath.h). */
export const FORK_NAMES = ['main', 'fsm', 'vm', 'init'] as const;
export type ForkNumber = 0 | 1 | 2 | 3;

export interface BlockRef {
  node: RelFileNode;
  fork: ForkNumber;
  block: number;
}

export interface PgWalRecord {
  lsn: Lsn;
  /** Where replay is after this record (EndRecPtr); pg-wal/ gives it, the text sources do not. */
  endLsn?: Lsn;
  /**
   * Transaction COMMIT/ABORT(_PREPARED): the transaction it ends (the prepared one's xid for
   * _PREPARED) and xact_time (µs since 2000-01-01 UTC): what a recovery target by xid or time reads.
   */
  xactEnd?: { xid: number; time: number };
  /** XLOG RESTORE_POINT: its name (recovery_target_name). */
  restorePoint?: string;
  /** Resource manager name (`Heap2`, `Transaction`, …). */
  rmgr: string;
  /** rm_identify's name (`PRUNE`, `INSERT+INIT`, `COMMIT`, …). */
  type: string;
  /**
   * xl_rmid * 256 + xl_info, when the source read them (pg-wal/; not the text sources): within
   * one major a key always names the same rmgr and type, so the replay model's tally finds the
   * type by it.
   */
  typeKey?: number;
  /** Total record length (xl_tot_len). */
  totalLength: number;
  xid: number;
  blocks: BlockRef[];
  /** Storage CREATE: the fork created. */
  create?: { node: RelFileNode; fork: ForkNumber };
  /** Storage TRUNCATE: new length of the main fork, and SMGR_TRUNCATE_* flags. */
  truncate?: { node: RelFileNode; blkno: number; flags: number };
  /** Transaction COMMIT/ABORT(_PREPARED) with `rels:`: the relations dropped at its redo. */
  dropRels?: RelFileNode[];
  /** Database DROP: the database dropped. */
  dropDatabase?: number;
  /**
   * Heap INSERT, non-HOT UPDATE, Heap2 MULTI_INSERT: the free space left on the (new) tuple's page
   * after the redo, estimated from the record (`heapPageFreeAfter`); their redo updates the FSM
   * when it is below BLCKSZ / 5.
   */
  heapPageFreeAfter?: number;
  /** Heap2 MULTI_INSERT(+INIT): the tuples it places (heap_desc's "N tuples"). */
  multiInsertTuples?: number;
  /**
   * Heap2 PRUNE_ON_ACCESS / PRUNE_VACUUM_SCAN / PRUNE_VACUUM_CLEANUP (17+): whether the record
   * redirected, killed or freed a line pointer (XLHP_HAS_REDIRECTIONS | XLHP_HAS_DEAD_ITEMS |
   * XLHP_HAS_NOW_UNUSED_ITEMS in its flags) — heap_xlog_prune_freeze updates the FSM only then (a
   * freeze-only record does not). Undefined: not known (a description without the item counts).
   */
  freedSpace?: boolean;
}

export const relKey = (n: RelFileNode) => `${n.spc}/${n.db}/${n.rel}`;

const GLOBALTABLESPACE_OID = 1664;
const DEFAULTTABLESPACE_OID = 1663;

/** relpathperm()'s forms: base/DB/REL, global/REL, pg_tblspc/SPC/VERSION_DIR/DB/REL, with _fsm/_vm/_init. */
function parseRelPath(p: string): { node: RelFileNode; fork: ForkNumber } | null {
  const m =
    /^(?:base\/(\d+)\/(\d+)|global\/(\d+)|pg_tblspc\/(\d+)\/[^/]+\/(\d+)\/(\d+))(?:_(fsm|vm|init))?$/.exec(
      p,
    );
  if (m === null) return null;
  const fork = (m[7] === undefined ? 0 : FORK_NAMES.indexOf(m[7] as 'fsm')) as ForkNumber;
  if (m[1] !== undefined)
    return { node: { spc: DEFAULTTABLESPACE_OID, db: Number(m[1]), rel: Number(m[2]) }, fork };
  if (m[3] !== undefined)
    return { node: { spc: GLOBALTABLESPACE_OID, db: 0, rel: Number(m[3]) }, fork };
  return { node: { spc: Number(m[4]), db: Number(m[5]), rel: Number(m[6]) }, fork };
}

const BLKREF = /blkref #\d+: rel (\d+)\/(\d+)\/(\d+)(?: fork (\w+))? blk (\d+)/g;

function parseBlockRefs(text: string | null): BlockRef[] {
  if (text === null) return [];
  const out: BlockRef[] = [];
  for (const m of text.matchAll(BLKREF)) {
    const fork = m[4] === undefined ? 0 : FORK_NAMES.indexOf(m[4] as 'fsm');
    if (fork < 0) throw new WalsimError('invalid_input', `unknown fork "${m[4]}" in: ${m[0]}`);
    out.push({
      node: { spc: Number(m[1]), db: Number(m[2]), rel: Number(m[3]) },
      fork: fork as ForkNumber,
      block: Number(m[5]),
    });
  }
  return out;
}

/** Fill the drop-relevant fields from the rmgr's description (the text after the type). */
function interpret(rec: PgWalRecord, desc: string): void {
  if (rec.rmgr === 'Storage' && rec.type === 'CREATE') {
    const r = parseRelPath(desc.trim().split(/\s+/)[0] ?? '');
    if (r === null) throw bad(rec, `Storage CREATE without a relation path: "${desc}"`);
    rec.create = r;
  } else if (rec.rmgr === 'Storage' && rec.type === 'TRUNCATE') {
    const m = /^(\S+) to (\d+) blocks flags (\d+)/.exec(desc.trim());
    const r = m === null ? null : parseRelPath(m[1]!);
    if (m === null || r === null) throw bad(rec, `Storage TRUNCATE not understood: "${desc}"`);
    rec.truncate = { node: r.node, blkno: Number(m[2]), flags: Number(m[3]) };
  } else if (rec.rmgr === 'Transaction' && /^(COMMIT|ABORT)(_PREPARED)?$/.test(rec.type)) {
    const m = /; rels:((?: [^\s;]+)+)/.exec(desc);
    if (m !== null) {
      rec.dropRels = m[1]!
        .trim()
        .split(' ')
        .map((p) => {
          const r = parseRelPath(p);
          if (r === null) throw bad(rec, `relation path "${p}" not understood`);
          return r.node;
        });
    }
  } else if (rec.rmgr === 'Heap2' && /^MULTI_INSERT(\+INIT)?$/.test(rec.type)) {
    const m = /^(\d+) tuples/.exec(desc.trim());
    if (m === null) throw bad(rec, `Heap2 MULTI_INSERT without its tuple count: "${desc}"`);
    rec.multiInsertTuples = Number(m[1]);
  } else if (rec.rmgr === 'Database' && rec.type === 'DROP') {
    const m = /dir \d+\/(\d+)/.exec(desc);
    if (m === null) throw bad(rec, `Database DROP without a database: "${desc}"`);
    rec.dropDatabase = Number(m[1]);
  } else if (rec.rmgr === 'Heap2' && PRUNE_17_TYPES.has(rec.type)) {
    // heap2_desc (17+) prints the item counts only when the block data is in the record.
    const m = /nredirected: (\d+), ndead: (\d+), nunused: (\d+)/.exec(desc);
    if (m !== null) rec.freedSpace = Number(m[1]) + Number(m[2]) + Number(m[3]) > 0;
  }
}

/** 17+'s one record kind for pruning, freezing and VACUUM's second pass (xl_heap_prune). */
export const PRUNE_17_TYPES: ReadonlySet<string> = new Set([
  'PRUNE_ON_ACCESS',
  'PRUNE_VACUUM_SCAN',
  'PRUNE_VACUUM_CLEANUP',
]);
/** xl_heap_prune.flags (17+): XLHP_HAS_REDIRECTIONS | _DEAD_ITEMS | _NOW_UNUSED_ITEMS. */
export const XLHP_FREES_SPACE = (1 << 5) | (1 << 6) | (1 << 7);

const BLCKSZ = 8192;
const SIZE_OF_PAGE_HEADER = 24;
const ITEM_ID = 4;
const maxAlign = (n: number) => Math.ceil(n / 8) * 8;

/**
 * The free space (PageGetHeapFreeSpace) on the page a heap record puts its tuple(s) on, after the
 * redo, estimated from the record alone: heap_xlog_insert, heap_xlog_multi_insert and (non-HOT)
 * heap_xlog_update call XLogRecordPageWithFreeSpace when it is below BLCKSZ / 5, which reads the
 * FSM fork (XLogReadBufferExtended → smgrnblocks caches its size, and creates it if missing). The
 * tuple length comes from the record length less its fixed parts (XLogRecord 24 bytes, the first
 * block reference 20, the main data header 2, xl_heap_insert 3 / xl_heap_update 14, xl_heap_header
 * 5, plus SizeofHeapTupleHeader 23 back); the page is assumed to hold `off` tuples of this
 * length (INSERT, UPDATE: the tuple's offset number) or, for MULTI_INSERT+INIT, exactly the
 * record's tuples. Undefined for every other record, and for MULTI_INSERT onto a page that held
 * tuples before (its prior contents are not in the record).
 */
export function heapPageFreeAfter(
  rmgr: string,
  type: string,
  desc: string,
  recLength: number,
  blockRefs: number,
): number | undefined {
  let m: RegExpExecArray | null = null;
  if (rmgr === 'Heap' && (type === 'INSERT' || type === 'INSERT+INIT'))
    m = /^off (\d+)/.exec(desc.trim());
  else if (rmgr === 'Heap' && (type === 'UPDATE' || type === 'UPDATE+INIT'))
    m = /; new off (\d+)/.exec(desc);
  else if (rmgr === 'Heap2' && type === 'MULTI_INSERT+INIT') m = /^(\d+) tuples/.exec(desc.trim());
  return m === null ? undefined : heapFreeAfter(rmgr, type, Number(m[1]), recLength, blockRefs);
}

/** The free space on a page holding `tuples` tuples of `tupleLen` bytes (and their line pointers). */
function free(tuples: number, tupleLen: number): number {
  return Math.max(
    0,
    BLCKSZ - SIZE_OF_PAGE_HEADER - tuples * (ITEM_ID + maxAlign(Math.max(24, tupleLen))),
  );
}

/**
 * `heapPageFreeAfter` from the number the description gives: the tuple's offset number (Heap
 * INSERT, UPDATE) or the tuples placed (Heap2 MULTI_INSERT+INIT), as the main data carries it.
 */
export function heapFreeAfter(
  rmgr: string,
  type: string,
  n: number,
  recLength: number,
  blockRefs: number,
): number | undefined {
  if (rmgr === 'Heap' && (type === 'INSERT' || type === 'INSERT+INIT'))
    return free(n, recLength - 31);
  // Two block references (new page, old page: 8 more bytes) unless the new tuple stays on its page.
  if (rmgr === 'Heap' && (type === 'UPDATE' || type === 'UPDATE+INIT'))
    return free(n, recLength - (blockRefs > 1 ? 50 : 42));
  if (rmgr === 'Heap2' && type === 'MULTI_INSERT+INIT') {
    if (n < 1) return undefined;
    // Block data: per tuple a SHORTALIGNed xl_multi_insert_tuple (7 → 8 bytes) and the tuple
    // less its 23-byte header; main data xl_heap_multi_insert (3 bytes; no offsets with INIT).
    const blockData = recLength - 24 - 20 - 2 - 3;
    return free(n, blockData / n - 8 + 23);
  }
  return undefined;
}

function bad(rec: Pick<PgWalRecord, 'lsn' | 'rmgr' | 'type'>, what: string): WalsimError {
  return new WalsimError(
    'invalid_input',
    `WAL record at ${rec.lsn} (${rec.rmgr}/${rec.type}): ${what}`,
  );
}

const LINE =
  /^rmgr: (\S+)\s+len \(rec\/tot\):\s*(\d+)\/\s*(\d+), tx:\s*(\d+), lsn: ([0-9A-F]+\/[0-9A-F]+), prev [0-9A-F]+\/[0-9A-F]+, desc: (.*)$/;

/**
 * One line of `pg_waldump` (PostgreSQL 15, without -b/--stats). Returns null for a line that is not
 * a record line (blank); throws on a line that starts like a record but does not parse.
 */
export function parseWaldumpLine(line: string): PgWalRecord | null {
  if (line.trim() === '') return null;
  const m = LINE.exec(line);
  if (m === null)
    throw new WalsimError('invalid_input', `not a pg_waldump record line: "${line.slice(0, 200)}"`);
  const rest = m[6]!;
  // "TYPE desc…, blkref #0: …": rm_identify's name is the first word; UNKNOWN carries "(%x)".
  const tm = /^(UNKNOWN \([0-9a-f]+\)|\S+)\s?(.*)$/.exec(rest);
  const type = tm?.[1] ?? rest;
  const descAndRefs = tm?.[2] ?? '';
  const cut = descAndRefs.search(/(^|, )blkref #\d+:/);
  const desc = cut < 0 ? descAndRefs : descAndRefs.slice(0, cut);
  const rec: PgWalRecord = {
    lsn: parseLsn(m[5]!),
    rmgr: m[1]!,
    type,
    totalLength: Number(m[3]),
    xid: Number(m[4]),
    blocks: parseBlockRefs(cut < 0 ? null : descAndRefs.slice(cut)),
  };
  interpret(rec, desc);
  const free = heapPageFreeAfter(rec.rmgr, type, desc, Number(m[2]), rec.blocks.length);
  if (free !== undefined) rec.heapPageFreeAfter = free;
  return rec;
}

/** A row of `pg_get_wal_records_info(start, end)` (PostgreSQL 15 columns). */
export interface WalinspectRow {
  start_lsn: string;
  xid: string | number;
  resource_manager: string;
  record_type: string;
  record_length: string | number;
  description: string | null;
  block_ref: string | null;
}

export function recordFromWalinspect(row: WalinspectRow): PgWalRecord {
  if (typeof row.resource_manager !== 'string' || typeof row.record_type !== 'string')
    throw new WalsimError(
      'invalid_input',
      `not a pg_get_wal_records_info row: ${JSON.stringify(row).slice(0, 200)}`,
    );
  const rec: PgWalRecord = {
    lsn: parseLsn(row.start_lsn),
    rmgr: row.resource_manager,
    type: row.record_type,
    totalLength: Number(row.record_length),
    xid: Number(row.xid),
    blocks: parseBlockRefs(row.block_ref),
  };
  interpret(rec, row.description ?? '');
  // record_length includes full-page images: without them the estimate is pg_waldump's.
  const free = heapPageFreeAfter(
    rec.rmgr,
    rec.type,
    row.description ?? '',
    rec.totalLength,
    rec.blocks.length,
  );
  if (free !== undefined) rec.heapPageFreeAfter = free;
  return rec;
}
