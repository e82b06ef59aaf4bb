/**
 * Parse a PostgreSQL server log written with `log_line_prefix = '%m [%p] '` and `log_timezone =
 * 'UTC'` (pure), and find the instants of a promotion in the standby's log: end of the WAL
 * received, "received promote request", "redo done at", "selected new timeline ID", "archive
 * recovery complete", the checkpoint promotion requests ("checkpoint starting: force") and
 * "database system is ready to accept connections" (the postmaster, once the startup process
 * exits: the node accepts writes).
 *
 * Entry points: `parsePgLog`, `promotionTimeline`, `PromotionTimeline`.
 */
import { WalsimError } from '../../common/errors.ts';

export interface PgLogLine {
  /** Epoch milliseconds (the `%m` prefix has millisecond resolution). */
  atMs: number;
  pid: number;
  /** LOG, FATAL, HINT, DETAIL, ERROR, WARNING, … */
  level: string;
  message: string;
}

const LINE = /^(\d{4}-\d\d-\d\d) (\d\d:\d\d:\d\d\.\d{3}) UTC \[(\d+)\] ([A-Z]+):  (.*)$/;

/** Every prefixed line; continuation lines (tab-indented) are appended to the previous message. */
export function parsePgLog(text: string): PgLogLine[] {
  const out: PgLogLine[] = [];
  for (const raw of text.split('\n')) {
    const m = LINE.exec(raw);
    if (m !== null) {
      const atMs = Date.parse(`${m[1]}T${m[2]}Z`);
      if (!Number.isFinite(atMs))
        throw new WalsimError('invalid_input', `bad timestamp in log line: ${raw}`);
      out.push({ atMs, pid: Number(m[3]), level: m[4]!, message: m[5]! });
    } else if (raw.startsWith('\t') && out.length > 0) {
      out[out.length - 1]!.message += ' ' + raw.trim();
    }
  }
  return out;
}

/** The instants of one promotion (epoch ms, null when the line is absent). */
export interface PromotionTimeline {
  /** The startup process found no more WAL ("invalid record length at …" and the like). */
  endOfWalAt: number | null;
  endOfWalLsn: string | null;
  promoteReceivedAt: number | null;
  redoDoneAt: number | null;
  /** LSN of the last record replayed. */
  redoDoneLsn: string | null;
  newTimelineAt: number | null;
  newTimeline: number | null;
  archiveRecoveryCompleteAt: number | null;
  /** "checkpoint starting: force": the checkpoint promotion requests (not waited for). */
  checkpointStartAt: number | null;
  /** "database system is ready to accept connections": read-write. */
  readyAt: number | null;
}

/** Messages with which the startup process reports the end of the WAL it has (xlogreader.c). */
const END_OF_WAL =
  /^(invalid record length at|record with incorrect prev-link|invalid magic number|invalid resource manager ID|record with invalid length at|contrecord is requested|incorrect resource manager data checksum|invalid info bits|unexpected pageaddr)/;
const LSN = /([0-9A-F]+\/[0-9A-F]+)/;

/**
 * The promotion after `sinceMs` (epoch ms; lines stamped earlier are ignored — note the log has
 * millisecond resolution, so pass the resume instant truncated to the millisecond).
 */
export function promotionTimeline(lines: PgLogLine[], sinceMs: number): PromotionTimeline {
  const t: PromotionTimeline = {
    endOfWalAt: null,
    endOfWalLsn: null,
    promoteReceivedAt: null,
    redoDoneAt: null,
    redoDoneLsn: null,
    newTimelineAt: null,
    newTimeline: null,
    archiveRecoveryCompleteAt: null,
    checkpointStartAt: null,
    readyAt: null,
  };
  for (const l of lines) {
    if (l.atMs < sinceMs || l.level !== 'LOG') continue;
    const msg = l.message;
    if (t.promoteReceivedAt === null && t.endOfWalAt === null && END_OF_WAL.test(msg)) {
      t.endOfWalAt = l.atMs;
      t.endOfWalLsn = LSN.exec(msg)?.[1] ?? null;
    } else if (
      t.promoteReceivedAt === null &&
      (msg === 'received promote request' || msg.startsWith('promote trigger file found'))
    ) {
      t.promoteReceivedAt = l.atMs;
    } else if (t.redoDoneAt === null && msg.startsWith('redo done at ')) {
      t.redoDoneAt = l.atMs;
      t.redoDoneLsn = LSN.exec(msg)?.[1] ?? null;
    } else if (t.newTimelineAt === null && msg.startsWith('selected new timeline ID: ')) {
      t.newTimelineAt = l.atMs;
      t.newTimeline = Number(msg.slice('selected new timeline ID: '.length));
    } else if (t.archiveRecoveryCompleteAt === null && msg === 'archive recovery complete') {
      t.archiveRecoveryCompleteAt = l.atMs;
    } else if (
      t.checkpointStartAt === null &&
      t.redoDoneAt !== null &&
      /^checkpoint starting: .*\bforce\b/.test(msg)
    ) {
      t.checkpointStartAt = l.atMs;
    } else if (
      t.readyAt === null &&
      t.redoDoneAt !== null &&
      msg === 'database system is ready to accept connections'
    ) {
      t.readyAt = l.atMs;
    }
  }
  return t;
}
