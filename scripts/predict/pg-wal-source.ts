/**
 * Reading a standby's WAL range with pg-wal/ (PostgreSQL's WAL read in TypeScript, any major
 * 13–18) instead of `pg_waldump` (which reads its own major only): the records in the shape the
 * prediction consumes (wal-records.ts), the same fields pg_waldump's text gives, so the two
 * sources are interchangeable and can check each other.
 *
 * Entry points: `pgWalRecords`, `toPredictRecord`, `READ_SLICE_MS`.
 */
import * as fs from 'node:fs';
import { WalsimError } from '../../common/errors.ts';
import { PgWalReader } from '../../pg-wal/reader.ts';
import type { PgMajor } from '../../pg-wal/format.ts';
import type { PgWalRecord as ReadRecord } from '../../pg-wal/record.ts';
import { detectSegmentSize, WalDirectory } from '../../pg-wal/wal-dir.ts';
import { formatLsn, parseLsn } from '../../wal/lsn.ts';
import type { TimelineHistoryEntry } from '../../wal/segment.ts';
import { tliOfPointInHistory } from '../../wal/timeline-range.ts';
import { MissingWalError, type RangeRead } from './wal-source.ts';
import {
  heapPageFreeAfter,
  XLHP_FREES_SPACE,
  type ForkNumber,
  type PgWalRecord,
} from './wal-records.ts';

/**
 * The prediction's record for a record the reader decoded. The heap free-space estimate takes
 * pg_waldump's description words from the decoded main data ("off N", "; new off N", "N tuples").
 */
export function toPredictRecord(r: ReadRecord): PgWalRecord {
  const out: PgWalRecord = {
    lsn: r.lsn,
    rmgr: r.rmgr,
    type: r.type,
    totalLength: r.totalLength,
    xid: r.xid,
    blocks: r.blocks.map((b) => ({ node: b.node, fork: b.fork as ForkNumber, block: b.block })),
  };
  out.endLsn = r.endLsn;
  const d = r.data;
  if (d?.kind === 'xact_commit' || d?.kind === 'xact_abort')
    out.xactEnd = { xid: /_PREPARED$/.test(r.type) ? d.twophaseXid : r.xid, time: d.xactTime };
  else if (d?.kind === 'xlog_restore_point') out.restorePoint = d.name;
  let desc = '';
  if (d?.kind === 'smgr_create') out.create = { node: d.node, fork: d.fork as ForkNumber };
  else if (d?.kind === 'smgr_truncate')
    out.truncate = { node: d.node, blkno: d.blkno, flags: d.flags };
  else if ((d?.kind === 'xact_commit' || d?.kind === 'xact_abort') && d.rels.length > 0)
    out.dropRels = d.rels;
  else if (d?.kind === 'dbase_drop') out.dropDatabase = d.dbId;
  else if (d?.kind === 'heap_prune_17') out.freedSpace = (d.flags & XLHP_FREES_SPACE) !== 0;
  else if (d?.kind === 'heap_multi_insert') {
    out.multiInsertTuples = d.ntuples;
    desc = `${d.ntuples} tuples`;
  } else if (d?.kind === 'heap_insert') desc = `off ${d.offnum}`;
  else if (d?.kind === 'heap_update') desc = `; new off ${d.newOffnum} `;
  const free = heapPageFreeAfter(r.rmgr, r.type, desc, r.recordLength, r.blocks.length);
  if (free !== undefined) out.heapPageFreeAfter = free;
  return out;
}

/**
 * The longest a read holds the event loop between two turns (plus the batch it is in): the
 * exporter reads WAL in the thread that answers scrapes (scripts/exporter/README.md "Cost").
 */
export const READ_SLICE_MS = 10;

/**
 * The records of [from, to) in `walDir`, along `history`, each to `onRecord`: records that end at
 * or before `to`, as pg_waldump -e. A range the files do not hold to its end (a missing segment,
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
  for await (const batch of reader.batches()) {
    for (const r of batch) onRecord(toPredictRecord(r));
    next = batch[batch.length - 1]!.endLsn;
    // A turn of the event loop once READ_SLICE_MS have passed since the last: an exporter's
    // scrape, in the same thread, waits at most that plus one batch (256 records).
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
