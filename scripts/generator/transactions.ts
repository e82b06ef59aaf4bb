/**
 * The backlog's transactions (README.md "The grammar", 5–6):
 * which statement kinds a relation's state allows, the statement's SQL and its effect on that
 * state, transactions of one statement to hundreds of relations, and the interleaving of up to
 * three sessions' transactions in one serial order. Pure: every choice comes from the caller's
 * `SeededRandom`.
 *
 * Entry points: `drawTransactions`, `OP_KINDS`, `OpKind`, `LiveRelation`, `GenStatement`.
 */
import type { SeededRandom } from '../../common/random.ts';
import {
  createIndexSql,
  fillSql,
  keyRangeSql,
  lockFootprint,
  logUniformPages,
  MAX_INDEXES,
  rowsPerPage,
  type RelationShape,
} from './shapes.ts';

export const OP_KINDS = [
  'insert',
  'copy',
  'updateHot',
  'updateNonHot',
  'delete',
  'vacuum',
  'vacuumNoTruncate',
  'truncate',
  'dropTable',
  'dropIndex',
  'createIndex',
  'cluster',
  'vacuumFull',
  'dropDatabase',
] as const;
export type OpKind = (typeof OP_KINDS)[number];

/** Kinds PostgreSQL refuses inside a transaction block: each runs as its own statement. */
const OUTSIDE_BLOCK: readonly OpKind[] = [
  'vacuum',
  'vacuumNoTruncate',
  'vacuumFull',
  'dropDatabase',
];

/** How often each kind is drawn among the kinds the relation's state allows. */
const OP_WEIGHTS: Record<OpKind, number> = {
  insert: 3,
  copy: 2,
  updateHot: 2,
  updateNonHot: 1.5,
  delete: 3,
  vacuum: 3,
  vacuumNoTruncate: 1,
  truncate: 2.5,
  dropTable: 2.5,
  dropIndex: 0.8,
  createIndex: 0.8,
  cluster: 0.6,
  vacuumFull: 0.6,
  dropDatabase: 0.4,
};

/** A relation as the backlog finds it: its shape now, live rows, whether it was dropped. */
export interface LiveRelation extends RelationShape {
  dropped: boolean;
  /** The largest key inserted so far (new rows continue from it). */
  maxKey: number;
}

export interface GenStatement {
  /** 1..sessions: the connection that runs it (statements run one at a time, in list order). */
  session: number;
  sql: string;
  /** The statement kind (setup statements: null). */
  op: OpKind | null;
}

export interface DrawState {
  rng: SeededRandom;
  relations: LiveRelation[];
  databases: string[];
  /** Heap pages the backlog may still write (inserted, updated, rewritten). */
  budgetPages: number;
  maxLocks: number;
  /** Relations an open transaction of another session holds (never touched: no lock waits). */
  reserved: Set<string>;
  notes: string[];
  ops: Record<OpKind, number>;
  /** The most relation locks one transaction held. */
  maxTransactionLocks: number;
  /** The most relations one transaction touched. */
  maxTransactionRelations: number;
}

const livePages = (r: LiveRelation) => Math.ceil(r.rows / rowsPerPage(r.kind, r.fillfactor));

/** Heap pages an op writes (the backlog's budget): rows appended, updated or rewritten. */
function opCost(op: OpKind, r: LiveRelation, pages: number): number {
  switch (op) {
    case 'insert':
    case 'copy':
      return pages;
    case 'updateHot':
    case 'cluster':
    case 'vacuumFull':
    case 'createIndex':
      return livePages(r);
    case 'updateNonHot':
      return livePages(r) * 2;
    default:
      return 0;
  }
}

/** The kinds the relation's state allows inside (or outside) a transaction block. */
function allowedOps(s: DrawState, r: LiveRelation, inBlock: boolean): OpKind[] {
  const ok = (op: OpKind): boolean => {
    if (inBlock && OUTSIDE_BLOCK.includes(op)) return false;
    if (opCost(op, r, 1) > s.budgetPages) return false;
    switch (op) {
      case 'copy':
        return r.kind !== 'toast';
      case 'updateHot':
      case 'delete':
        return r.rows > 0;
      case 'updateNonHot':
        return r.rows > 0 && r.indexes.length > 0;
      case 'dropIndex':
        return r.indexes.length > 0;
      case 'createIndex':
        return r.indexes.length < MAX_INDEXES;
      case 'cluster':
        return r.kind !== 'partitioned' && r.indexes.length > 0;
      case 'dropDatabase':
        return s.databases.length > 0;
      default:
        return true;
    }
  };
  return OP_KINDS.filter(ok);
}

/** One statement of `op` on `r` (its SQL), applying its effect to `r`'s state and the budget. */
function statementOf(s: DrawState, op: OpKind, r: LiveRelation): string {
  const every = s.rng.pick([1, 2, 10, 100]);
  s.ops[op]++;
  switch (op) {
    case 'insert':
    case 'copy': {
      const pages = logUniformPages(s.rng, Math.max(1, Math.min(s.budgetPages, r.pages * 2)));
      const rows = pages * rowsPerPage(r.kind, r.fillfactor);
      s.budgetPages -= pages;
      const sql = fillSql(r, r.maxKey + 1, r.maxKey + rows, op === 'copy');
      r.maxKey += rows;
      r.rows += rows;
      return sql;
    }
    case 'updateHot':
    case 'updateNonHot':
      s.budgetPages -= Math.ceil(opCost(op, r, 0) / every);
      return `UPDATE ${r.name} SET ${op === 'updateHot' ? 'v = v + 1' : 'w = w + 1'}${keyRangeSql(every)}`;
    case 'delete':
      r.rows = every === 1 ? 0 : r.rows - Math.floor(r.rows / every);
      return `DELETE FROM ${r.name}${keyRangeSql(every)}`;
    default:
      return ddlOf(s, op, r);
  }
}

/** The statements that change a relation's files or catalog rather than its rows. */
function ddlOf(s: DrawState, op: OpKind, r: LiveRelation): string {
  switch (op) {
    case 'vacuum':
      return `VACUUM ${r.name}`;
    case 'vacuumNoTruncate':
      return `VACUUM (TRUNCATE false) ${r.name}`;
    case 'truncate':
      r.rows = 0;
      return `TRUNCATE ${r.name}`;
    case 'dropTable':
      r.dropped = true;
      return `DROP TABLE ${r.name}`;
    case 'dropIndex':
      return `DROP INDEX ${r.indexes.pop()!}`;
    case 'createIndex': {
      s.budgetPages -= opCost(op, r, 0);
      const used = new Set(r.indexes);
      const name = Array.from({ length: MAX_INDEXES }, (_, j) => `${r.name}_i${j}`).find(
        (n) => !used.has(n),
      )!;
      r.indexes.push(name);
      return createIndexSql(r, name);
    }
    case 'cluster':
      s.budgetPages -= opCost(op, r, 0);
      return `CLUSTER ${r.name} USING ${r.indexes[0]!}`;
    case 'vacuumFull':
      s.budgetPages -= opCost(op, r, 0);
      return `VACUUM FULL ${r.name}`;
    default:
      return `DROP DATABASE ${s.databases.shift()!}`;
  }
}

/** Relations a new transaction may touch: not dropped, not held by another session. */
const available = (s: DrawState) =>
  s.relations.filter((r) => !r.dropped && !s.reserved.has(r.name));

/** Locks a set of relations takes (each counted once, with its indexes and partitions). */
const locksOf = (rels: readonly LiveRelation[]) =>
  rels.reduce((a, r) => a + lockFootprint(r) + 1, 0);

/**
 * Relations for one transaction: `want` of the available ones, fewer when their locks exceed
 * max_locks_per_transaction (the draw shrinks the set and says so); none when not even one fits.
 */
function pickRelations(s: DrawState, want: number): LiveRelation[] {
  const pool = available(s).filter((r) => locksOf([r]) <= s.maxLocks);
  const picked: LiveRelation[] = [];
  const order = pool.map((r) => ({ r, key: s.rng.float() })).sort((a, b) => a.key - b.key);
  for (const { r } of order) {
    if (picked.length >= want) break;
    if (locksOf([...picked, r]) > s.maxLocks) {
      s.notes.push(
        `a transaction drawn over ${want} relations stopped at ${picked.length}: one more would hold more than max_locks_per_transaction = ${s.maxLocks} locks`,
      );
      break;
    }
    picked.push(r);
  }
  return picked;
}

/**
 * One transaction's statements: `single` (one statement, any kind), `small` (BEGIN, 2–8 statements
 * over 1–4 relations, COMMIT) or `wide` (one kind over 2–400 relations in one transaction: one
 * TRUNCATE or DROP TABLE naming them all, or one statement each inside BEGIN … COMMIT).
 */
function drawTransaction(s: DrawState): { sql: string[]; ops: OpKind[]; rels: LiveRelation[] } {
  const size = s.rng.weighted({ single: 55, small: 30, wide: 15 });
  const free = available(s).length;
  if (size === 'wide' && free >= 2)
    return wideTransaction(s, logUniformPages(s.rng, Math.min(400, free)));
  const rels = pickRelations(s, size === 'small' ? s.rng.int(1, 4) : 1);
  if (rels.length === 0) return { sql: [], ops: [], rels };
  const n = size === 'small' ? s.rng.int(2, 8) : 1;
  const sql: string[] = [];
  const ops: OpKind[] = [];
  for (let i = 0; i < n; i++) {
    const live = rels.filter((x) => !x.dropped);
    if (live.length === 0) break;
    const r = s.rng.pick(live);
    const kinds = allowedOps(s, r, n > 1);
    const op = weightedOp(s.rng, kinds);
    if (op === null) break;
    ops.push(op);
    sql.push(statementOf(s, op, r));
  }
  if (sql.length > 1) return { sql: ['BEGIN', ...sql, 'COMMIT'], ops, rels };
  return { sql, ops, rels };
}

function weightedOp(rng: SeededRandom, kinds: readonly OpKind[]): OpKind | null {
  if (kinds.length === 0) return null;
  return rng.weighted(
    Object.fromEntries(kinds.map((k) => [k, OP_WEIGHTS[k]])) as Record<OpKind, number>,
  );
}

/** One kind over many relations in one transaction (the kinds that make real wide commits). */
function wideTransaction(s: DrawState, want: number) {
  const rels = pickRelations(s, Math.max(2, want));
  const drawn = s.rng.pick(['truncate', 'dropTable', 'delete', 'insert'] as const);
  // An INSERT of at least a page into each: only while the budget has a page for each.
  const op = drawn === 'insert' && s.budgetPages < rels.length ? 'truncate' : drawn;
  const usable = op === 'delete' ? rels.filter((r) => r.rows > 0) : rels;
  if (usable.length === 0) return { sql: [], ops: [] as OpKind[], rels };
  if ((op === 'truncate' || op === 'dropTable') && s.rng.chance(0.5)) {
    for (const r of usable) statementOf(s, op, r); // the effects; one statement names them all
    const names = usable.map((r) => r.name).join(', ');
    const sql = op === 'truncate' ? `TRUNCATE ${names}` : `DROP TABLE ${names}`;
    return { sql: [sql], ops: usable.map(() => op), rels: usable };
  }
  const sql = usable.map((r) => statementOf(s, op, r));
  return { sql: ['BEGIN', ...sql, 'COMMIT'], ops: usable.map(() => op), rels: usable };
}

/**
 * `count` transactions over `sessions` sessions, interleaved: at each step one session is chosen
 * among those with statements pending or a transaction still to start; a session's open
 * transaction holds its relations (reserved) until its COMMIT, so no statement waits for a lock.
 */
export function drawTransactions(s: DrawState, count: number, sessions: number): GenStatement[] {
  const pending: Array<{ sql: string[]; ops: Array<OpKind | null>; rels: LiveRelation[] }> =
    Array.from({ length: sessions }, () => ({ sql: [], ops: [], rels: [] }));
  const out: GenStatement[] = [];
  let started = 0;
  while (true) {
    const ready = pending
      .map((_, i) => i)
      .filter((i) => pending[i]!.sql.length > 0 || started < count);
    if (ready.length === 0) break;
    const k = s.rng.pick(ready);
    const p = pending[k]!;
    if (p.sql.length === 0) {
      const t = drawTransaction(s);
      started++;
      if (t.sql.length === 0) continue; // nothing left to touch: the transaction is not made
      noteSize(s, t.rels);
      p.rels = t.rels;
      p.sql = t.sql;
      p.ops = t.sql.map((q) => (q === 'BEGIN' || q === 'COMMIT' ? null : (t.ops.shift() ?? null)));
      for (const r of t.rels) s.reserved.add(r.name);
    }
    out.push({ session: k + 1, sql: p.sql.shift()!, op: p.ops.shift() ?? null });
    if (p.sql.length === 0) release(s, p);
  }
  return out;
}

/** A committed transaction's relations are free again (and forgotten: they may be another's next). */
function release(s: DrawState, p: { rels: LiveRelation[] }): void {
  for (const r of p.rels) s.reserved.delete(r.name);
  p.rels = [];
}

function noteSize(s: DrawState, rels: readonly LiveRelation[]): void {
  s.maxTransactionLocks = Math.max(s.maxTransactionLocks, locksOf(rels));
  s.maxTransactionRelations = Math.max(s.maxTransactionRelations, rels.length);
}
