/**
 * WAL record kinds, as a discriminated union on `kind`.
 *
 * Each kind carries PostgreSQL's resource manager id and info opcode (rmgrlist.h, xlog_internal.h,
 * storage_xlog.h, xact.h, heapam_xlog.h). Payloads are walsim's: they keep what replay needs and
 * log bulk work one heap page per record (see primary/README.md for where that deviates).
 *
 * Tuple payloads use runs: `[firstValue, count, firstValue, count, ...]` meaning the consecutive
 * integers firstValue .. firstValue+count-1, so a page of generate_series() is two numbers.
 * Offset payloads use ranges: `[firstOffset, count, ...]` of 1-based line-pointer numbers.
 */
import type { Lsn, TimeLineId } from './lsn.ts';

export type RelFileNumber = number;
export type TransactionId = number;
export type BlockNumber = number;

export const InvalidTransactionId: TransactionId = 0;
/** First xid handed out (FirstNormalTransactionId). */
export const FirstNormalTransactionId: TransactionId = 3;
/** First relfilenumber for user relations (FirstNormalObjectId). */
export const FirstNormalRelFileNumber: RelFileNumber = 16384;
/** InvalidBlockNumber (0xFFFFFFFF). */
export const InvalidBlockNumber: BlockNumber = 0xffffffff;

/** ForkNumber (relpath.h). */
export const MAIN_FORKNUM = 0;
export const FSM_FORKNUM = 1;
export const VISIBILITYMAP_FORKNUM = 2;
export const INIT_FORKNUM = 3;
export const MAX_FORKNUM = 3;
export type ForkNumber = 0 | 1 | 2 | 3;
export const FORK_NAMES = ['main', 'fsm', 'vm', 'init'] as const;

/** Resource manager ids (rmgrlist.h). */
export const RM_XLOG_ID = 0;
export const RM_XACT_ID = 1;
export const RM_SMGR_ID = 2;
export const RM_STANDBY_ID = 8;
export const RM_HEAP2_ID = 9;
export const RM_HEAP_ID = 10;
export const RMGR_NAMES: Record<number, string> = {
  0: 'XLOG',
  1: 'Transaction',
  2: 'Storage',
  8: 'Standby',
  9: 'Heap2',
  10: 'Heap',
};

/** xl_smgr_truncate.flags (storage_xlog.h). */
export const SMGR_TRUNCATE_HEAP = 0x0001;
export const SMGR_TRUNCATE_VM = 0x0002;
export const SMGR_TRUNCATE_FSM = 0x0004;
export const SMGR_TRUNCATE_ALL = 0x0007;

/** Rows of the one-int-column table per 8 kB heap page: PostgreSQL's density (MaxHeapTuplesPerPage for int4 rows). */
export const TUPLES_PER_PAGE = 226;

export interface CheckpointBody {
  /** REDO point: replay from here reproduces the state the checkpoint's data files hold. */
  redo: Lsn;
  timeline: TimeLineId;
  prevTimeline: TimeLineId;
  nextXid: TransactionId;
  nextRelFileNumber: RelFileNumber;
  /** Wall-clock time of the checkpoint, ms since the epoch. */
  time: number;
}

export type WalRecordBody =
  // XLOG rmgr
  | ({ kind: 'CHECKPOINT_SHUTDOWN' } & CheckpointBody)
  | ({ kind: 'CHECKPOINT_ONLINE' } & CheckpointBody)
  | { kind: 'END_OF_RECOVERY'; newTimeline: TimeLineId; prevTimeline: TimeLineId; time: number }
  | { kind: 'NOOP' }
  // XLOG_FPI (log_newpage): a whole page written at once, e.g. a new btree index's metapage.
  | { kind: 'FPI'; rel: RelFileNumber; fork: ForkNumber; block: BlockNumber }
  // Transaction rmgr: droppedRels are relfilenumbers whose storage is dropped when the record is applied.
  | { kind: 'XACT_COMMIT'; xactTime: number; droppedRels: RelFileNumber[] }
  | { kind: 'XACT_ABORT'; xactTime: number; droppedRels: RelFileNumber[] }
  // Storage rmgr
  | { kind: 'SMGR_CREATE'; rel: RelFileNumber; fork: ForkNumber }
  | { kind: 'SMGR_TRUNCATE'; rel: RelFileNumber; blkno: BlockNumber; flags: number }
  // pg_class change (CREATE TABLE, DROP TABLE, TRUNCATE's new relfilenumber): a relation name now
  // maps to `rel`, or to nothing when rel is 0. PostgreSQL logs these as catalog heap changes.
  | { kind: 'CATALOG_UPDATE'; relname: string; rel: RelFileNumber }
  // Standby rmgr: AccessExclusiveLock taken on the primary (VACUUM truncation, TRUNCATE, DROP).
  | { kind: 'STANDBY_LOCK'; rel: RelFileNumber }
  // Heap rmgr. initPage: XLOG_HEAP_INIT_PAGE, the record (re)initialises the page.
  | {
      kind: 'HEAP_INSERT';
      rel: RelFileNumber;
      block: BlockNumber;
      offset: number;
      value: number;
      initPage: boolean;
    }
  | { kind: 'HEAP_DELETE'; rel: RelFileNumber; block: BlockNumber; offsets: number[] }
  // Heap2 rmgr
  | {
      kind: 'HEAP2_MULTI_INSERT';
      rel: RelFileNumber;
      block: BlockNumber;
      firstOffset: number;
      runs: number[];
      initPage: boolean;
    }
  /** Vacuum's per-page cleanup: the listed line pointers become unused (prune + second heap pass in one). */
  | {
      kind: 'HEAP2_PRUNE';
      rel: RelFileNumber;
      block: BlockNumber;
      latestRemovedXid: TransactionId;
      offsets: number[];
    }
  /** Page became all-visible: sets the page's bit in the visibility map fork (touches the VM block). */
  | { kind: 'HEAP2_VISIBLE'; rel: RelFileNumber; block: BlockNumber };

export type WalRecordKind = WalRecordBody['kind'];

/** (rmid, info) of every kind: PostgreSQL's opcodes. */
export const RMGR_INFO: Record<WalRecordKind, { rmid: number; info: number }> = {
  CHECKPOINT_SHUTDOWN: { rmid: RM_XLOG_ID, info: 0x00 },
  CHECKPOINT_ONLINE: { rmid: RM_XLOG_ID, info: 0x10 },
  NOOP: { rmid: RM_XLOG_ID, info: 0x20 },
  END_OF_RECOVERY: { rmid: RM_XLOG_ID, info: 0x90 },
  FPI: { rmid: RM_XLOG_ID, info: 0xb0 },
  XACT_COMMIT: { rmid: RM_XACT_ID, info: 0x00 },
  XACT_ABORT: { rmid: RM_XACT_ID, info: 0x20 },
  SMGR_CREATE: { rmid: RM_SMGR_ID, info: 0x10 },
  SMGR_TRUNCATE: { rmid: RM_SMGR_ID, info: 0x20 },
  STANDBY_LOCK: { rmid: RM_STANDBY_ID, info: 0x00 },
  CATALOG_UPDATE: { rmid: RM_HEAP_ID, info: 0x70 },
  HEAP_INSERT: { rmid: RM_HEAP_ID, info: 0x00 },
  HEAP_DELETE: { rmid: RM_HEAP_ID, info: 0x10 },
  HEAP2_PRUNE: { rmid: RM_HEAP2_ID, info: 0x10 },
  HEAP2_VISIBLE: { rmid: RM_HEAP2_ID, info: 0x40 },
  HEAP2_MULTI_INSERT: { rmid: RM_HEAP2_ID, info: 0x50 },
};

/** XLOG_HEAP_INIT_PAGE, or-ed into info for inserts that initialise their page. */
export const XLOG_HEAP_INIT_PAGE = 0x80;

/** The fixed header every record carries (XLogRecord). */
export interface WalRecordHeader {
  /** xl_tot_len: bytes of the whole framed record, header included. */
  totalLength: number;
  /** xl_xid: top-level transaction id, 0 if none. */
  xid: TransactionId;
  /** xl_prev: start LSN of the previous record. */
  prev: Lsn;
  /** xl_info and xl_rmid. */
  info: number;
  rmid: number;
  /** xl_crc: CRC-32C over the payload, then the header up to the crc field. */
  crc: number;
}

/** A decoded record and where it lives in the WAL stream. */
export interface WalRecord {
  lsn: Lsn;
  /**
   * Position just past this record: the next record's start, lsn + MAXALIGN(totalLength), as
   * PostgreSQL's EndRecPtr (so it is already MAXALIGNed; maxAlign(endLsn) === endLsn).
   */
  endLsn: Lsn;
  header: WalRecordHeader;
  body: WalRecordBody;
}
