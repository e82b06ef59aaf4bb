/**
 * Reading a standby's WAL range with pg-wal/ (PostgreSQL's WAL read in TypeScript, any major
 * 13–18) instead of `pg_waldump` (which reads its own major only): the records in the shape the
 * prediction consumes (wal-records.ts), the same fields pg_waldump's text gives, so the two
 * sources are interchangeable and can check each other.
 *
 * Entry points: `pgWalRecords`, `toPredictRecord`, `PredictRecordOfView`, `READ_SLICE_MS`.
 */
import * as fs from 'node:fs';
import { WalsimError } from '../../common/errors.ts';
import { PgWalReader } from '../../pg-wal/reader.ts';
import type { PgMajor } from '../../pg-wal/format.ts';
import type { PgWalRecord as ReadRecord } from '../../pg-wal/record.ts';
import { PgWalRecordView } from '../../pg-wal/view.ts';
import { detectSegmentSize, WalDirectory } from '../../pg-wal/wal-dir.ts';
import { formatLsn, parseLsn } from '../../wal/lsn.ts';
import type { TimelineHistoryEntry } from '../../wal/segment.ts';
import { tliOfPointInHistory } from '../../wal/timeline-range.ts';
import { MissingWalError, type RangeRead } from './wal-source.ts';
import {
  heapFreeAfter,
  XLHP_FREES_SPACE,
  type BlockRef,
  type ForkNumber,
  type PgWalRecord,
} from './wal-records.ts';

/**
 * The prediction's record for a record the reader decoded (a fresh object). The heap free-space
 * estimate takes the numbers pg_waldump's description shows ("off N", "new off N", "N tuples")
 * from the decoded main data.
 */
export function toPredictRecord(r: ReadRecord): PgWalRecord {
  const out: PgWalRecord = {
    lsn: r.lsn,
    rmgr: r.rmgr,
    type: r.type,
    typeKey: r.rmid * 256 + r.info,
    totalLength: r.totalLength,
    xid: r.xid,
    blocks: r.blocks.map((b) => ({ node: b.node, fork: b.fork as ForkNumber, block: b.block })),
  };
  out.endLsn = r.endLsn;
  setMainData(out, new PgWalRecordView().fromRecord(r));
  return out;
}

/**
 * The prediction's record of the reader's views, without an object per record: one record
 * object, one block array per block count and one RelFileNode per block slot, refilled for every
 * view. What `of` returns is valid until the next call (RecoveryModel copies what it keeps).
 */
export class PredictRecordOfView {
  private readonly rec: PgWalRecord = {
    lsn: 0,
    rmgr: '',
    type: '',
    typeKey: 0,
    totalLength: 0,
    xid: 0,
    blocks: [],
  };
  private readonly byCount: BlockRef[][] = [];

  of(v: PgWalRecordView): PgWalRecord {
    const out = this.rec;
    out.lsn = v.lsn;
    out.endLsn = v.endLsn;
    out.rmgr = v.rmgr;
    out.type = v.type;
    out.typeKey = v.rmid * 256 + v.info;
    out.totalLength = v.totalLength;
    out.xid = v.xid;
    const n = v.blockCount;
    const blocks = (this.byCount[n] ??= Array.from({ length: n }, () => ({
      node: { spc: 0, db: 0, rel: 0 },
      fork: 0 as ForkNumber,
      block: 0,
    })));
    for (let i = 0; i < n; i++) {
      const b = blocks[i]!;
      b.node.spc = v.blockSpc[i]!;
      b.node.db = v.blockDb[i]!;
      b.node.rel = v.blockRel[i]!;
      b.fork = v.blockFork[i]! as ForkNumber;
      b.block = v.blockNo[i]!;
    }
    out.blocks = blocks;
    out.xactEnd = out.restorePoint = out.create = out.truncate = out.dropRels = undefined;
    out.dropDatabase = out.heapPageFreeAfter = out.multiInsertTuples = out.freedSpace = undefined;
    setMainData(out, v);
    return out;
  }
}

/** The fields the prediction reads from the decoded main data (and the heap free-space estimate). */
function setMainData(out: PgWalRecord, v: PgWalRecordView): void {
  const d = v.data;
  if (d === null) return;
  let n: number | undefined;
  switch (d.kind) {
    case 'xact_commit':
    case 'xact_abort':
      out.xactEnd = { xid: v.type.endsWith('_PREPARED') ? d.twophaseXid : v.xid, time: d.xactTime };
      if (d.rels.length > 0) out.dropRels = d.rels;
      break;
    case 'xlog_restore_point':
      out.restorePoint = d.name;
      break;
    case 'smgr_create':
      out.create = { node: d.node, fork: d.fork as ForkNumber };
      break;
    case 'smgr_truncate':
      out.truncate = { node: d.node, blkno: d.blkno, flags: d.flags };
      break;
    case 'dbase_drop':
      out.dropDatabase = d.dbId;
      break;
    case 'heap_prune_17':
      out.freedSpace = (d.flags & XLHP_FREES_SPACE) !== 0;
      break;
    case 'heap_multi_insert':
      out.multiInsertTuples = d.ntuples;
      n = d.ntuples;
      break;
    case 'heap_insert':
      n = d.offnum;
      break;
    case 'heap_update':
      n = d.newOffnum;
      break;
  }
  if (n === undefined) return;
  const free = heapFreeAfter(v.rmgr, v.type, n, v.recordLength, v.blockCount);
  if (free !== undefined) out.heapPageFreeAfter = free;
}

/**
 * The longest a read holds the event loop between two turns (plus the batch it is in): the
 * exporter reads WAL in the thread that answers scrapes (scripts/exporter/README.md "Cost").
 */
export const READ_SLICE_MS = 10;
/**
 * Records read between two looks at the clock (each look is a step of an async generator: fewer
 * steps cost less; 1,024 records are well under a millisecond of reading).
 */
const VIEWS_PER_TURN = 1024;

/**
 * The records of [from, to) in `walDir`, along `history`, each to `onRecord` (one object refilled
 * per record, valid during the call: `PredictRecordOfView`): records that end at or before `to`,
 * as pg_waldump -e. A range the files do not hold to its end (a missing segment,
 * the end of valid WAL before `to`) is one MissingWalError naming the file or LSN and why.
 */
export async function pgWalRecords(
  walDir: string,
  history: readonly TimelineHistoryEntry[],
  from: string,
  to: string,
  onRecord: (r: PgWalRecord) => void,
  /** The standby's major: WAL of another one (its page magic) is refused, naming the file. */
  major?: PgMajor,
): Promise<RangeRead> {
  const detail = `pg-wal reader over ${walDir} from ${from} to ${to}`;
  if (parseLsn(from) >= parseLsn(to)) return { source: 'pg-wal', detail, nextLsn: from };
  // The words pg_waldump's source uses for a segment that is not there (wal-source.ts).
  const missing = (segment: string | null, at: string) => {
    const tli = tliOfPointInHistory(parseLsn(at), history);
    return new MissingWalError(
      `${segment !== null ? `WAL segment ${segment} is not` : `no WAL segment of timeline ${tli} (the one holding ${at} first) is`} in ${walDir}: the range ${from} → ${to} on timeline ${tli} needs it (a restartpoint removed it, or the standby never received it there)`,
    );
  };
  if (!fs.readdirSync(walDir).some((n) => /^[0-9A-F]{24}$/.test(n))) throw missing(null, from);
  const src = new WalDirectory(walDir, detectSegmentSize(walDir), history);
  const reader = new PgWalReader(src, {
    startLsn: parseLsn(from),
    endLsn: parseLsn(to),
    ...(major !== undefined ? { major } : {}),
  });
  let next = parseLsn(from);
  let turn = performance.now();
  const rec = new PredictRecordOfView();
  const each = (v: PgWalRecordView) => {
    onRecord(rec.of(v));
    next = v.endLsn;
  };
  for await (const _ of reader.views(each, VIEWS_PER_TURN)) {
    // A turn of the event loop once READ_SLICE_MS have passed since the last: an exporter's
    // scrape, in the same thread, waits at most that plus VIEWS_PER_TURN records.
    if (performance.now() - turn >= READ_SLICE_MS) {
      await new Promise((r) => setImmediate(r));
      turn = performance.now();
    }
  }
  const end = reader.end;
  if (end === null || end.reason === 'end_lsn')
    return {
      source: 'pg-wal',
      detail: `${detail} (PostgreSQL ${reader.major ?? '?'} WAL)`,
      nextLsn: formatLsn(next),
    };
  if (end.reason === 'missing_segment')
    throw missing(/"([0-9A-F]{24})"/.exec(end.message)?.[1] ?? null, formatLsn(end.lsn));
  throw new WalsimError(
    'invalid_input',
    `the WAL range ${from} → ${to} is not complete in ${walDir}: at ${formatLsn(end.lsn)}, ${end.message}`,
  );
}
