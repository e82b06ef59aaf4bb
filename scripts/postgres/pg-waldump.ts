/**
 * `pg_waldump --stats=record` over an exact LSN range: records and bytes by resource manager and
 * record type. The parser is pure (`parseWaldumpStats`); `waldumpStats` runs the program.
 *
 * Entry points: `parseWaldumpStats`, `waldumpStats`, `WaldumpStats`.
 */
import { WalsimError } from '../../common/errors.ts';

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

/** Records of one resource manager (and type, if given) in the stats. */
export function waldumpCount(s: WaldumpStats, rmgr: string, type?: string): number {
  return s.rows
    .filter((r) => r.rmgr === rmgr && (type === undefined || r.type === type))
    .reduce((a, r) => a + r.count, 0);
}
