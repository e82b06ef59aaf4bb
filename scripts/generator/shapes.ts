/**
 * The relations a generated backlog works on (README.md "The grammar", 2): their kinds,
 * fill factors, indexes and sizes, how many locks a statement on one of them takes, and the SQL that
 * creates and fills them. Pure: no servers, no clocks; every choice comes from the caller's
 * `SeededRandom`.
 *
 * Entry points: `drawRelation`, `lockFootprint`, `rowsPerPage`, `createSql`, `fillSql`,
 * `keyRangeSql`, `RelationShape`, `RelationKind`.
 */
import type { SeededRandom } from '../../common/random.ts';

/**
 * `plain`: (k int, v int, w int). `toast`: the same plus `t text` stored EXTERNAL (never
 * compressed: a 2,560-byte value goes out of line in two TOAST chunks), so the table has a TOAST
 * relation and its index. `partitioned`: plain columns, PARTITION BY RANGE (k) over 2–8 partitions
 * (the last one up to MAXVALUE); its indexes are partitioned indexes, one per partition.
 */
export type RelationKind = 'plain' | 'toast' | 'partitioned';

export interface RelationShape {
  /** `g<seed>_<n>`; partitions `g<seed>_<n>_p<i>`; indexes `g<seed>_<n>_i<j>`. */
  name: string;
  kind: RelationKind;
  /** Partitions of a partitioned table (0 otherwise). */
  partitions: number;
  /** The heap's fillfactor, 10–100 (partitions inherit the parent's value as their own). */
  fillfactor: number;
  /** Index names in creation order: `_i0` on (w), `_i1` on (k), `_i2` on (w, k). */
  indexes: string[];
  /** Heap pages the setup fills (the draw's target: the real count is in the WAL). */
  pages: number;
  /** toast: every `toastEvery`-th row carries an out-of-line value; 0: the TOAST relation stays empty. */
  toastEvery: number;
  /** Rows the setup inserted: keys 1..rows. */
  rows: number;
}

/** Indexed columns in index order (v is never indexed: an UPDATE of v can be HOT). */
const INDEX_COLUMNS = ['w', 'k', 'w, k'];
export const MAX_INDEXES = INDEX_COLUMNS.length;

/** Bytes of one (k, v, w) row with its line pointer: 24-byte header + 12 → MAXALIGN 40, + 4. */
const INT_ROW_BYTES = 44;
/** A toast row: the same plus an 18-byte TOAST pointer (1-byte header) → 56 aligned, + 4. */
const TOAST_ROW_BYTES = 60;
/** The page less its 24-byte header. */
const PAGE_USABLE = 8192 - 24;

/**
 * Rows one heap page takes at a fillfactor (an INSERT leaves 8192 × (100 − ff) % free). Used to
 * turn a drawn page count into rows; the WAL, not this figure, is what the prediction reads.
 */
export function rowsPerPage(kind: RelationKind, fillfactor: number): number {
  const bytes = kind === 'toast' ? TOAST_ROW_BYTES : INT_ROW_BYTES;
  const free = Math.floor((8192 * (100 - fillfactor)) / 100);
  return Math.max(1, Math.floor((PAGE_USABLE - free) / bytes));
}

/** A page count log-uniform in [1, max]: small relations are common, large ones exist. */
export function logUniformPages(rng: SeededRandom, max: number): number {
  return Math.max(1, Math.min(max, Math.round(Math.exp(rng.float() * Math.log(max)))));
}

/**
 * One relation: kind (plain 60 %, toast 25 %, partitioned 15 %), fillfactor (100 in 70 %, else
 * 50, 70 or 90), 0–3 indexes, heap pages log-uniform in [1, maxPages].
 */
export function drawRelation(rng: SeededRandom, name: string, maxPages: number): RelationShape {
  const kind = rng.weighted({ plain: 60, toast: 25, partitioned: 15 }) as RelationKind;
  const fillfactor = rng.chance(0.7) ? 100 : rng.pick([50, 70, 90]);
  const nIndexes = rng.weighted({ '0': 30, '1': 40, '2': 20, '3': 10 });
  const pages = logUniformPages(rng, maxPages);
  const partitions = kind === 'partitioned' ? rng.int(2, 8) : 0;
  const toastEvery = kind === 'toast' ? rng.pick([0, 0, 1, 10, 100]) : 0;
  return {
    name,
    kind,
    partitions,
    fillfactor,
    indexes: Array.from({ length: Number(nIndexes) }, (_, j) => `${name}_i${j}`),
    pages,
    toastEvery,
    rows: pages * rowsPerPage(kind, fillfactor),
  };
}

/**
 * Relation locks a statement on the relation holds until commit: the table, each index, and a
 * toast table's TOAST relation and its index; a partitioned table's parent, its partitioned
 * indexes, and every partition with its indexes. DROP and TRUNCATE take them all; DML may take
 * fewer (partition pruning): counting them all keeps a drawn transaction inside the lock table.
 */
export function lockFootprint(r: Pick<RelationShape, 'kind' | 'partitions' | 'indexes'>): number {
  const per = 1 + r.indexes.length + (r.kind === 'toast' ? 2 : 0);
  return r.kind === 'partitioned' ? 1 + r.indexes.length + r.partitions * per : per;
}

/** The keys partition i of n holds when the setup filled `rows` rows: [lo, hi). */
function partitionBounds(i: number, n: number, rows: number): string {
  const step = Math.max(1, Math.ceil(rows / n));
  const lo = i === 0 ? 'MINVALUE' : String(i * step + 1);
  const hi = i === n - 1 ? 'MAXVALUE' : String((i + 1) * step + 1);
  return `FOR VALUES FROM (${lo}) TO (${hi})`;
}

/** The index's CREATE INDEX (on a partitioned table: a partitioned index, one per partition). */
export function createIndexSql(r: RelationShape, index: string): string {
  const j = Number(/_i(\d+)$/.exec(index)![1]);
  return `CREATE INDEX ${index} ON ${r.name} (${INDEX_COLUMNS[j]})`;
}

/** CREATE TABLE (and partitions, the TOAST column's storage, the indexes), in order. */
export function createSql(r: RelationShape): string[] {
  const ff = r.fillfactor === 100 ? '' : ` WITH (fillfactor = ${r.fillfactor})`;
  const out: string[] = [];
  if (r.kind === 'partitioned') {
    out.push(`CREATE TABLE ${r.name} (k int, v int, w int) PARTITION BY RANGE (k)`);
    for (let i = 0; i < r.partitions; i++)
      out.push(
        `CREATE TABLE ${r.name}_p${i} PARTITION OF ${r.name} ${partitionBounds(i, r.partitions, r.rows)}${ff}`,
      );
  } else if (r.kind === 'toast') {
    out.push(`CREATE TABLE ${r.name} (k int, v int, w int, t text)${ff}`);
    out.push(`ALTER TABLE ${r.name} ALTER COLUMN t SET STORAGE EXTERNAL`);
  } else out.push(`CREATE TABLE ${r.name} (k int, v int, w int)${ff}`);
  for (const ix of r.indexes) out.push(createIndexSql(r, ix));
  return out;
}

/** The row expression of keys `i`: a toast table's every `toastEvery`-th row out of line. */
function rowValues(r: RelationShape): { cols: string; expr: string } {
  if (r.kind !== 'toast') return { cols: 'k, v, w', expr: 'i, i, i' };
  const big = 'repeat(md5(i::text), 80)';
  const t =
    r.toastEvery === 0
      ? 'NULL'
      : r.toastEvery === 1
        ? big
        : `CASE WHEN i % ${r.toastEvery} = 0 THEN ${big} END`;
  return { cols: 'k, v, w, t', expr: `i, i, i, ${t}` };
}

/**
 * Rows with keys from..to: INSERT … SELECT generate_series (one HEAP_INSERT a row), or COPY FROM
 * PROGRAM (COPY's multi-insert, one record a page; the primary's OS user runs `seq`). COPY is not
 * used for TOAST rows (the value would not survive the shell quoting unchanged).
 */
export function fillSql(r: RelationShape, from: number, to: number, copy: boolean): string {
  const { cols, expr } = rowValues(r);
  if (copy && cols === 'k, v, w')
    return `COPY ${r.name} (k, v, w) FROM PROGRAM 'seq ${from} ${to} | sed "s/.*/&\\t&\\t&/"'`;
  return `INSERT INTO ${r.name} (${cols}) SELECT ${expr} FROM generate_series(${from}, ${to}) i`;
}

/** A predicate choosing one row in `every` (every = 1: all rows). */
export function keyRangeSql(every: number): string {
  return every === 1 ? '' : ` WHERE k % ${every} = 0`;
}
