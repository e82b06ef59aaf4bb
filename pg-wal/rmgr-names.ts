/**
 * Resource manager names (rmgrlist.h) and record type names (each rmgr's `*_identify` in
 * rmgrdesc/*.c), per major: the names `pg_waldump` prints and `pg_waldump --stats=record` groups
 * by. A type no identify function names is `UNKNOWN (%x)`, as pg_waldump prints it.
 *
 * Entry points: `rmgrName`, `recordTypeName`, `recordTypeNames`, `RM_*` ids.
 */
import type { PgMajor } from './format.ts';

export const RM_XLOG_ID = 0;
export const RM_XACT_ID = 1;
export const RM_SMGR_ID = 2;
export const RM_DBASE_ID = 4;
export const RM_STANDBY_ID = 8;
export const RM_HEAP2_ID = 9;
export const RM_HEAP_ID = 10;
/** RM_MAX_BUILTIN_ID: the last built-in rmgr (LogicalMessage); unchanged 13–18. */
export const RM_MAX_BUILTIN_ID = 21;
/** RM_MIN_CUSTOM_ID (15+): ids 128–255 belong to extensions. */
export const RM_MIN_CUSTOM_ID = 128;

/** rmgrlist.h's PG_RMGR names, by id (the same 22 in 13–18). */
const RMGR_NAMES = [
  'XLOG',
  'Transaction',
  'Storage',
  'CLOG',
  'Database',
  'Tablespace',
  'MultiXact',
  'RelMap',
  'Standby',
  'Heap2',
  'Heap',
  'Btree',
  'Hash',
  'Gin',
  'Gist',
  'Sequence',
  'SPGist',
  'BRIN',
  'CommitTs',
  'ReplicationOrigin',
  'Generic',
  'LogicalMessage',
] as const;

/**
 * The rmgr's name. pg_waldump names a custom rmgr it has no library for `custom%03d`
 * (rmgrdesc.c GetRmgrDesc).
 */
export function rmgrName(rmid: number): string {
  return RMGR_NAMES[rmid] ?? `custom${String(rmid).padStart(3, '0')}`;
}

type Names = Readonly<Record<number, string>>;

/** Names keyed by `info & ~XLR_INFO_MASK` (what the identify function switches on). */
const XLOG_NAMES: Names = {
  0x00: 'CHECKPOINT_SHUTDOWN',
  0x10: 'CHECKPOINT_ONLINE',
  0x20: 'NOOP',
  0x30: 'NEXTOID',
  0x40: 'SWITCH',
  0x50: 'BACKUP_END',
  0x60: 'PARAMETER_CHANGE',
  0x70: 'RESTORE_POINT',
  0x80: 'FPW_CHANGE',
  0x90: 'END_OF_RECOVERY',
  0xa0: 'FPI_FOR_HINT',
  0xb0: 'FPI',
  0xd0: 'OVERWRITE_CONTRECORD',
};
const XLOG_NAMES_17: Names = { ...XLOG_NAMES, 0xe0: 'CHECKPOINT_REDO' };

/** xact_identify switches on `info & XLOG_XACT_OPMASK` (0x70): XLOG_XACT_HAS_INFO is ignored. */
const XACT_NAMES_13: Names = {
  0x00: 'COMMIT',
  0x10: 'PREPARE',
  0x20: 'ABORT',
  0x30: 'COMMIT_PREPARED',
  0x40: 'ABORT_PREPARED',
  0x50: 'ASSIGNMENT',
};
const XACT_NAMES_14: Names = { ...XACT_NAMES_13, 0x60: 'INVALIDATIONS' };

const SMGR_NAMES: Names = { 0x10: 'CREATE', 0x20: 'TRUNCATE' };
const CLOG_NAMES: Names = { 0x00: 'ZEROPAGE', 0x10: 'TRUNCATE' };
const DBASE_NAMES_13: Names = { 0x00: 'CREATE', 0x10: 'DROP' };
const DBASE_NAMES_15: Names = { 0x00: 'CREATE_FILE_COPY', 0x10: 'CREATE_WAL_LOG', 0x20: 'DROP' };
const TBLSPC_NAMES: Names = { 0x00: 'CREATE', 0x10: 'DROP' };
const MXACT_NAMES: Names = {
  0x00: 'ZERO_OFF_PAGE',
  0x10: 'ZERO_MEM_PAGE',
  0x20: 'CREATE_ID',
  0x30: 'TRUNCATE_ID',
};
const RELMAP_NAMES: Names = { 0x00: 'UPDATE' };
const STANDBY_NAMES: Names = { 0x00: 'LOCK', 0x10: 'RUNNING_XACTS', 0x20: 'INVALIDATIONS' };

const HEAP2_COMMON: Names = {
  0x00: 'REWRITE',
  0x40: 'VISIBLE',
  0x50: 'MULTI_INSERT',
  0xd0: 'MULTI_INSERT+INIT',
  0x60: 'LOCK_UPDATED',
  0x70: 'NEW_CID',
};
const HEAP2_NAMES_13: Names = {
  ...HEAP2_COMMON,
  0x10: 'CLEAN',
  0x20: 'FREEZE_PAGE',
  0x30: 'CLEANUP_INFO',
};
const HEAP2_NAMES_14: Names = {
  ...HEAP2_COMMON,
  0x10: 'PRUNE',
  0x20: 'VACUUM',
  0x30: 'FREEZE_PAGE',
};
const HEAP2_NAMES_17: Names = {
  ...HEAP2_COMMON,
  0x10: 'PRUNE_ON_ACCESS',
  0x20: 'PRUNE_VACUUM_SCAN',
  0x30: 'PRUNE_VACUUM_CLEANUP',
};

const HEAP_NAMES: Names = {
  0x00: 'INSERT',
  0x80: 'INSERT+INIT',
  0x10: 'DELETE',
  0x20: 'UPDATE',
  0xa0: 'UPDATE+INIT',
  0x30: 'TRUNCATE',
  0x40: 'HOT_UPDATE',
  0xc0: 'HOT_UPDATE+INIT',
  0x50: 'HEAP_CONFIRM',
  0x60: 'LOCK',
  0x70: 'INPLACE',
};

const BTREE_NAMES: Names = {
  0x00: 'INSERT_LEAF',
  0x10: 'INSERT_UPPER',
  0x20: 'INSERT_META',
  0x30: 'SPLIT_L',
  0x40: 'SPLIT_R',
  0x50: 'INSERT_POST',
  0x60: 'DEDUP',
  0x70: 'DELETE',
  0x80: 'UNLINK_PAGE',
  0x90: 'UNLINK_PAGE_META',
  0xa0: 'NEWROOT',
  0xb0: 'MARK_PAGE_HALFDEAD',
  0xc0: 'VACUUM',
  0xd0: 'REUSE_PAGE',
  0xe0: 'META_CLEANUP',
};

const HASH_NAMES: Names = {
  0x00: 'INIT_META_PAGE',
  0x10: 'INIT_BITMAP_PAGE',
  0x20: 'INSERT',
  0x30: 'ADD_OVFL_PAGE',
  0x40: 'SPLIT_ALLOCATE_PAGE',
  0x50: 'SPLIT_PAGE',
  0x60: 'SPLIT_COMPLETE',
  0x70: 'MOVE_PAGE_CONTENTS',
  0x80: 'SQUEEZE_PAGE',
  0x90: 'DELETE',
  0xa0: 'SPLIT_CLEANUP',
  0xb0: 'UPDATE_META_PAGE',
  0xc0: 'VACUUM_ONE_PAGE',
};

const GIN_NAMES: Names = {
  0x10: 'CREATE_PTREE',
  0x20: 'INSERT',
  0x30: 'SPLIT',
  0x40: 'VACUUM_PAGE',
  0x50: 'DELETE_PAGE',
  0x60: 'UPDATE_META_PAGE',
  0x70: 'INSERT_LISTPAGE',
  0x80: 'DELETE_LISTPAGE',
  0x90: 'VACUUM_DATA_LEAF_PAGE',
};

const GIST_NAMES: Names = {
  0x00: 'PAGE_UPDATE',
  0x10: 'DELETE',
  0x20: 'PAGE_REUSE',
  0x30: 'PAGE_SPLIT',
  0x50: 'PAGE_DELETE',
  0x60: 'ASSIGN_LSN',
};

const SEQ_NAMES: Names = { 0x00: 'LOG' };

const SPG_NAMES: Names = {
  0x10: 'ADD_LEAF',
  0x20: 'MOVE_LEAFS',
  0x30: 'ADD_NODE',
  0x40: 'SPLIT_TUPLE',
  0x50: 'PICKSPLIT',
  0x60: 'VACUUM_LEAF',
  0x70: 'VACUUM_ROOT',
  0x80: 'VACUUM_REDIRECT',
};

const BRIN_NAMES: Names = {
  0x00: 'CREATE_INDEX',
  0x10: 'INSERT',
  0x90: 'INSERT+INIT',
  0x20: 'UPDATE',
  0xa0: 'UPDATE+INIT',
  0x30: 'SAMEPAGE_UPDATE',
  0x40: 'REVMAP_EXTEND',
  0x50: 'DESUMMARIZE',
};

const COMMIT_TS_NAMES: Names = { 0x00: 'ZEROPAGE', 0x10: 'TRUNCATE' };
const REPLORIGIN_NAMES: Names = { 0x00: 'SET', 0x10: 'DROP' };
const GENERIC_NAMES: Names = { 0x00: 'Generic' };
const LOGICALMSG_NAMES: Names = { 0x00: 'MESSAGE' };

/** Per rmgr id: the names for a major. */
function namesOf(rmid: number, major: PgMajor): Names | null {
  switch (rmid) {
    case 0:
      return major >= 17 ? XLOG_NAMES_17 : XLOG_NAMES;
    case 1:
      return major >= 14 ? XACT_NAMES_14 : XACT_NAMES_13;
    case 2:
      return SMGR_NAMES;
    case 3:
      return CLOG_NAMES;
    case 4:
      return major >= 15 ? DBASE_NAMES_15 : DBASE_NAMES_13;
    case 5:
      return TBLSPC_NAMES;
    case 6:
      return MXACT_NAMES;
    case 7:
      return RELMAP_NAMES;
    case 8:
      return STANDBY_NAMES;
    case 9:
      return major >= 17 ? HEAP2_NAMES_17 : major >= 14 ? HEAP2_NAMES_14 : HEAP2_NAMES_13;
    case 10:
      return HEAP_NAMES;
    case 11:
      return BTREE_NAMES;
    case 12:
      return HASH_NAMES;
    case 13:
      return GIN_NAMES;
    case 14:
      return GIST_NAMES;
    case 15:
      return SEQ_NAMES;
    case 16:
      return SPG_NAMES;
    case 17:
      return BRIN_NAMES;
    case 18:
      return COMMIT_TS_NAMES;
    case 19:
      return REPLORIGIN_NAMES;
    case 20:
      return GENERIC_NAMES;
    case 21:
      return LOGICALMSG_NAMES;
    default:
      return null;
  }
}

/**
 * The identify masks: xact switches on the opmask (0x70), Heap/Heap2/BRIN keep their INIT bit
 * (0x80) and name it, the others use `info & ~XLR_INFO_MASK`.
 */
function identifyKey(rmid: number, info: number): number {
  return rmid === 1 ? info & 0x70 : info & 0xf0;
}

/** Cache: names per (major, rmid, info): a record type lookup is one array read. */
const cache = new Map<PgMajor, Array<string | undefined>>();

/**
 * The names of `major` found so far, by `rmid * 256 + info` (undefined: not asked yet, ask
 * `recordTypeName`): a reader keeps its major's to look a name up without the map.
 */
export function recordTypeNames(major: PgMajor): Array<string | undefined> {
  let table = cache.get(major);
  if (table === undefined) {
    table = new Array<string | undefined>(256 * 256).fill(undefined);
    cache.set(major, table);
  }
  return table;
}

/** The record type name pg_waldump prints for a record of `rmid` with `info` (xl_info). */
export function recordTypeName(major: PgMajor, rmid: number, info: number): string {
  const table = recordTypeNames(major);
  const slot = rmid * 256 + info;
  const hit = table[slot];
  if (hit !== undefined) return hit;
  const name =
    namesOf(rmid, major)?.[identifyKey(rmid, info)] ?? `UNKNOWN (${(info & 0xf0).toString(16)})`;
  table[slot] = name;
  return name;
}
