/**
 * `pg_waldump --stats=record` over an exact LSN range: records and bytes by resource manager and
 * record type. The parser is pure (`parseWaldumpStats`); `readerStats` gives the same table from
 * pg-wal/ (PostgreSQL's WAL read in TypeScript), for every major 13–18, where pg_waldump reads
 * one major only.
 *
 * Entry points: `parseWaldumpStats`, `readerStats`, `waldumpCount`, `WaldumpStats`.
 */
import { WalsimError } from '../../common/errors.ts';
import type { PgMajor } from '../../pg-wal/format.ts';
import { PgWalReader } from '../../pg-wal/reader.ts';
import { recordTypeName, rmgrName } from '../../pg-wal/rmgr-names.ts';
import { detectSegmentSize, WalDirectory } from '../../pg-wal/wal-dir.ts';
import { formatLsn, parseLsn } from '../../wal/lsn.ts';

export interface WaldumpRow {
  /** Resource manager, e.g. `Heap2`. */
  rmgr: string;
  /** Record type, e.g. `PRUNE` (`--stats=record`), or null for per-rmgr totals (`--stats`). */
  type: string | null;
  count: number;
  recordBytes: number;
  fpiBytes: number;
  combinedBytes: number;
}

export interface WaldumpStats {
  from: string;
  to: string;
  rows: WaldumpRow[];
  total: Omit<WaldumpRow, 'rmgr' | 'type'>;
}

const HEADER = /^WAL statistics between ([0-9A-F]+\/[0-9A-F]+) and ([0-9A-F]+\/[0-9A-F]+):$/;
const PCT = String.raw`\(\s*[\d.]+\)`;
const ROW = new RegExp(
  String.raw`^(\S+)\s+(\d+)\s+${PCT}\s+(\d+)\s+${PCT}\s+(\d+)\s+${PCT}\s+(\d+)\s+${PCT}\s*$`,
);
const TOTAL =
  /^Total\s+(\d+)\s+(\d+)\s+\[[\d.]+%\]\s+(\d+)\s+\[[\d.]+%\]\s+(\d+)\s+\[[\d.]+%\]\s*$/;

/** Parse the output of `pg_waldump --stats[=record]`; rows with N = 0 are dropped. */
export function parseWaldumpStats(text: string): WaldumpStats {
  let from: string | null = null;
  let to: string | null = null;
  let total: WaldumpStats['total'] | null = null;
  const rows: WaldumpRow[] = [];
  for (const line of text.split('\n')) {
    const h = HEADER.exec(line);
    if (h) {
      from = h[1]!;
      to = h[2]!;
      continue;
    }
    const t = TOTAL.exec(line);
    if (t) {
      total = {
        count: Number(t[1]),
        recordBytes: Number(t[2]),
        fpiBytes: Number(t[3]),
        combinedBytes: Number(t[4]),
      };
      continue;
    }
    const r = ROW.exec(line);
    if (r && r[1] !== 'Type' && Number(r[2]) > 0) {
      const slash = r[1]!.indexOf('/');
      rows.push({
        rmgr: slash < 0 ? r[1]! : r[1]!.slice(0, slash),
        type: slash < 0 ? null : r[1]!.slice(slash + 1),
        count: Number(r[2]),
        recordBytes: Number(r[3]),
        fpiBytes: Number(r[4]),
        combinedBytes: Number(r[5]),
      });
    }
  }
  if (from === null || to === null || total === null) {
    throw new WalsimError(
      'invalid_input',
      `not pg_waldump --stats output: ${text.trim().split('\n').slice(0, 2).join(' | ') || '(empty)'}`,
    );
  }
  const sum = rows.reduce((a, r) => a + r.count, 0);
  if (sum !== total.count)
    throw new WalsimError(
      'invalid_input',
      `pg_waldump --stats rows add up to ${sum} records, its Total says ${total.count}`,
    );
  return { from, to, rows, total };
}

/**
 * `pg_waldump --stats=record -p walDir -t 1 -s from -e to` computed by pg-wal/: the records that
 * end by `to`, by rmgr/type, record (less FPI), FPI and combined bytes; WAL of another major than
 * `major` is refused. A range the files do not hold to its end is an error naming where and why.
 */
export async function readerStats(
  walDir: string,
  from: string,
  to: string,
  major: PgMajor,
): Promise<WaldumpStats> {
  const rows = new Map<string, WaldumpRow>();
  const total = { count: 0, recordBytes: 0, fpiBytes: 0, combinedBytes: 0 };
  if (parseLsn(from) < parseLsn(to)) {
    // Timeline 1 open-ended, as `pg_waldump -t 1` (the span ends before the promotion).
    const history = [{ tli: 1, beginLsn: 0, endLsn: null }];
    const src = new WalDirectory(walDir, detectSegmentSize(walDir), history);
    const reader = new PgWalReader(src, {
      startLsn: parseLsn(from),
      endLsn: parseLsn(to),
      major,
    });
    // Columns, not records: no object per record; a row per rmid and xl_info seen.
    const byInfo = new Map<number, WaldumpRow>();
    for await (const c of reader.columns())
      for (let i = 0; i < c.length; i++) {
        const rmid = c.rmid[i]!;
        const info = c.info[i]!;
        let row = byInfo.get((rmid << 8) | info);
        if (row === undefined) {
          row = statsRow(rows, rmgrName(rmid), recordTypeName(major, rmid, info));
          byInfo.set((rmid << 8) | info, row);
        }
        const tot = c.totalLength[i]!;
        const fpi = c.fpiLength[i]!;
        for (const t of [row, total]) {
          t.count += 1;
          t.recordBytes += tot - fpi;
          t.fpiBytes += fpi;
          t.combinedBytes += tot;
        }
      }
    const end = reader.end;
    if (end !== null && end.reason !== 'end_lsn')
      throw new WalsimError(
        'invalid_input',
        `the WAL range ${from} → ${to} is not complete in ${walDir}: at ${formatLsn(end.lsn)}, ${end.message}`,
      );
  }
  return { from, to, rows: [...rows.values()], total };
}

/** The row of rmgr/type in `rows`, added (zeroed) when absent. */
function statsRow(rows: Map<string, WaldumpRow>, rmgr: string, type: string): WaldumpRow {
  const k = `${rmgr}/${type}`;
  let row = rows.get(k);
  if (row === undefined) {
    row = { rmgr, type, count: 0, recordBytes: 0, fpiBytes: 0, combinedBytes: 0 };
    rows.set(k, row);
  }
  return row;
}

/** Records of one resource manager (and type, if given) in the stats. */
export function waldumpCount(s: WaldumpStats, rmgr: string, type?: string): number {
  return s.rows
    .filter((r) => r.rmgr === rmgr && (type === undefined || r.type === type))
    .reduce((a, r) => a + r.count, 0);
}
