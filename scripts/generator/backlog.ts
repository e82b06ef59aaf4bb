/**
 * The workload generator (generator/README.md): a seed → one backlog a real system could have made
 * — the standby's pool, the relations, the setup the standby replayed, its history (restarted
 * mid-stream, caught up or not) and the statements after the pause that a promotion would replay —
 * and that backlog printed as the SQL it runs. Deterministic: the same seed and limits give the
 * same SQL on every machine (`SeededRandom`); a draw the limits refuse is drawn again, and the
 * notes say what was redrawn.
 *
 * Entry points: `generateBacklog`, `renderBacklogSql`, `GeneratedBacklog`, `GeneratorLimits`,
 * `DEFAULT_GENERATOR_LIMITS`, `POOL_LADDER`, `GENERATOR_VERSION`, `largestStartablePool`,
 * `machineGeneratorLimits`.
 */
import * as fs from 'node:fs';
import * as os from 'node:os';
import { WalsimError } from '../../common/errors.ts';
import { SeededRandom } from '../../common/random.ts';
import { parseSharedBuffers } from '../../storage/shared-buffers.ts';
import { createSql, drawRelation, fillSql, lockFootprint, logUniformPages } from './shapes.ts';
import {
  drawTransactions,
  OP_KINDS,
  type DrawState,
  type GenStatement,
  type LiveRelation,
  type OpKind,
} from './transactions.ts';

/** Bumped whenever a seed would draw a different backlog: stored beside the seeds a profile used. */
export const GENERATOR_VERSION = 1;

/** The standby pools a seed draws from (uniformly), 128MB to the 20GB a 24 GiB machine starts. */
export const POOL_LADDER = [
  '128MB',
  '256MB',
  '512MB',
  '1GB',
  '2GB',
  '4GB',
  '8GB',
  '12GB',
  '16GB',
  '20GB',
] as const;

export interface GeneratorLimits {
  /** The largest standby shared_buffers the machine can start; a larger draw is drawn again. */
  maxSharedBuffers: string;
  /** One transaction holds at most this many relation locks (the clusters' setting: 10000). */
  maxLocksPerTransaction: number;
  /** Heap pages the setup and the backlog may write, each half (keeps a run to seconds). */
  maxPages: number;
  /** Relations the setup creates, at most (drawn log-uniform from 1). */
  maxRelations: number;
  /** Transactions after the pause, at most (drawn log-uniform from 1). */
  maxTransactions: number;
}

export const DEFAULT_GENERATOR_LIMITS: GeneratorLimits = {
  maxSharedBuffers: '20GB',
  maxLocksPerTransaction: 10_000,
  maxPages: 16_384,
  maxRelations: 400,
  maxTransactions: 120,
};

/**
 * The largest pool of the ladder this machine can start for a standby, from its memory and swap:
 * the kernel's heuristic overcommit refuses one mapping larger than RAM + swap, and PostgreSQL
 * maps the pool with its descriptors (64 B a buffer) beside a lock table sized by
 * max_locks_per_transaction = 10000 (about 0.5 GiB), with the primary, the OS and the page cache
 * beside it: 3 GiB are kept free. On the 24 GiB machine of BENCHMARKS.md: 20GB.
 */
export function largestStartablePool(memBytes: number, swapBytes: number): string | null {
  const room = memBytes + swapBytes - 3 * 2 ** 30;
  const fits = POOL_LADDER.filter((p) => parseSharedBuffers(p).bytes * 1.02 <= room);
  return fits.at(-1) ?? null;
}

/** This machine's limits: the default ones with the largest pool it starts (RAM and swap now). */
export function machineGeneratorLimits(): GeneratorLimits {
  let swap = 0;
  try {
    const m = /^SwapTotal:\s+(\d+) kB/m.exec(fs.readFileSync('/proc/meminfo', 'utf8'));
    swap = m ? Number(m[1]) * 1024 : 0;
  } catch {
    /* no /proc: memory alone */
  }
  const pool = largestStartablePool(os.totalmem(), swap);
  if (pool === null)
    throw new WalsimError(
      'invalid_input',
      `this machine (${Math.round(os.totalmem() / 2 ** 20)} MiB) cannot start a ${POOL_LADDER[0]} standby beside 3 GiB for the rest: no backlog to draw`,
    );
  return { ...DEFAULT_GENERATOR_LIMITS, maxSharedBuffers: pool };
}

export interface StandbyHistory {
  /** The standby was restarted (pg_ctl restart) before statement `before` of the setup, or never. */
  restart: { before: number; mode: 'fast' | 'immediate' } | null;
  /** Replay paused before statement `pauseAt`: `setupEnd` when the standby had caught up. */
  pauseAt: number;
  caughtUp: boolean;
}

export interface GeneratedBacklog {
  seed: number;
  generator: number;
  sharedBuffers: string;
  nBuffers: number;
  limits: GeneratorLimits;
  relations: LiveRelation[];
  databases: string[];
  sessions: number;
  /** Every statement in the order it runs: setup first (`setupEnd` of them), then the backlog. */
  statements: GenStatement[];
  setupEnd: number;
  history: StandbyHistory;
  /** Statements of each kind after the setup (a TRUNCATE naming 5 tables counts 5). */
  ops: Record<OpKind, number>;
  maxTransactionLocks: number;
  maxTransactionRelations: number;
  /** What was drawn again, and why (limits). */
  notes: string[];
}

/** The pool: uniform over the ladder, drawn again (at most 32 times) while the machine cannot start it. */
function drawPool(rng: SeededRandom, limits: GeneratorLimits, notes: string[]): string {
  const max = parseSharedBuffers(limits.maxSharedBuffers).nBuffers;
  if (parseSharedBuffers(POOL_LADDER[0]).nBuffers > max)
    throw new WalsimError(
      'invalid_input',
      `this machine cannot start a ${POOL_LADDER[0]} standby (largest: ${limits.maxSharedBuffers}): no backlog to draw`,
    );
  for (let i = 0; i < 32; i++) {
    const p = rng.pick(POOL_LADDER);
    if (parseSharedBuffers(p).nBuffers <= max) return p;
    notes.push(
      `pool ${p} drawn again: above the largest this machine starts (${limits.maxSharedBuffers})`,
    );
  }
  return POOL_LADDER.filter((p) => parseSharedBuffers(p).nBuffers <= max).at(-1)!;
}

/**
 * The relations: a count log-uniform in [1, maxRelations], each of 1 to NBuffers/8 heap pages
 * (at most half the page budget); a relation whose locks alone exceed max_locks_per_transaction
 * is drawn again; the setup's pages stop at half the budget (later relations are made smaller).
 */
function drawRelations(
  rng: SeededRandom,
  seed: number,
  nBuffers: number,
  limits: GeneratorLimits,
  notes: string[],
): LiveRelation[] {
  if (limits.maxLocksPerTransaction < 4)
    throw new WalsimError(
      'invalid_input',
      `max_locks_per_transaction ${limits.maxLocksPerTransaction} cannot hold one table with a TOAST relation (4 locks)`,
    );
  const n = logUniformPages(rng, limits.maxRelations);
  let left = Math.floor(limits.maxPages / 2);
  const out: LiveRelation[] = [];
  for (let i = 1; i <= n; i++) {
    const cap = Math.max(1, Math.min(Math.floor(nBuffers / 8), Math.floor(limits.maxPages / 2)));
    let r = drawRelation(rng, `g${seed}_${i}`, cap);
    while (lockFootprint(r) + 1 > limits.maxLocksPerTransaction) {
      notes.push(
        `${r.name} drawn again: its ${lockFootprint(r)} locks exceed max_locks_per_transaction`,
      );
      r = drawRelation(rng, r.name, cap);
    }
    if (r.pages > left)
      r = {
        ...r,
        pages: Math.max(1, left),
        rows: Math.round((r.rows / r.pages) * Math.max(1, left)),
      };
    left = Math.max(0, left - r.pages);
    out.push({ ...r, dropped: false, maxKey: r.rows });
  }
  return out;
}

/** The setup: databases, then each relation's CREATE statements and its fill (INSERT or COPY). */
function setupStatements(rng: SeededRandom, rels: LiveRelation[], dbs: string[]): GenStatement[] {
  const out: GenStatement[] = dbs.map((d) => ({
    session: 1,
    sql: `CREATE DATABASE ${d}`,
    op: null,
  }));
  for (const r of rels) {
    for (const sql of createSql(r)) out.push({ session: 1, sql, op: null });
    if (r.rows > 0) out.push({ session: 1, sql: fillSql(r, 1, r.rows, rng.chance(0.4)), op: null });
  }
  return out;
}

/** Restarted before a setup statement (25 %: fast or immediate); paused after it all (70 %) or inside it. */
function drawHistory(rng: SeededRandom, setupEnd: number): StandbyHistory {
  const restart = rng.chance(0.25)
    ? { before: rng.int(1, setupEnd), mode: rng.pick(['fast', 'immediate'] as const) }
    : null;
  const caughtUp = rng.chance(0.7);
  const from = restart?.before ?? 1;
  const pauseAt = caughtUp || from >= setupEnd ? setupEnd : rng.int(from, setupEnd - 1);
  return { restart, pauseAt, caughtUp: pauseAt === setupEnd };
}

/** Draw the backlog of `seed` within `limits` (the pool fixed to `sharedBuffers` when given). */
export function generateBacklog(
  seed: number,
  limits: GeneratorLimits = DEFAULT_GENERATOR_LIMITS,
  sharedBuffers?: string,
): GeneratedBacklog {
  if (!Number.isSafeInteger(seed) || seed < 0)
    throw new WalsimError('invalid_input', `a generator seed is a whole number ≥ 0, got ${seed}`);
  const rng = new SeededRandom(seed);
  const notes: string[] = [];
  // A fixed pool draws the same way on every machine: one pick, never drawn again.
  const drawn = drawPool(
    rng,
    sharedBuffers === undefined ? limits : DEFAULT_GENERATOR_LIMITS,
    notes,
  );
  const pool = sharedBuffers ?? drawn;
  const { nBuffers } = parseSharedBuffers(pool);
  const relations = drawRelations(rng, seed, nBuffers, limits, notes);
  const databases = Array.from(
    { length: Number(rng.weighted({ '0': 70, '1': 20, '2': 10 })) },
    (_, i) => `g${seed}_db${i + 1}`,
  );
  const setup = setupStatements(rng, relations, databases);
  const history = drawHistory(rng, setup.length);
  const s: DrawState = {
    rng,
    relations,
    databases: [...databases],
    budgetPages: Math.floor(limits.maxPages / 2),
    maxLocks: limits.maxLocksPerTransaction,
    reserved: new Set(),
    notes,
    ops: Object.fromEntries(OP_KINDS.map((k) => [k, 0])) as Record<OpKind, number>,
    maxTransactionLocks: 0,
    maxTransactionRelations: 0,
  };
  const sessions = Number(rng.weighted({ '1': 60, '2': 25, '3': 15 }));
  const backlog = drawTransactions(s, logUniformPages(rng, limits.maxTransactions), sessions);
  return {
    seed,
    generator: GENERATOR_VERSION,
    sharedBuffers: pool,
    nBuffers,
    limits,
    relations,
    databases,
    sessions,
    statements: [...setup, ...backlog],
    setupEnd: setup.length,
    history,
    ops: s.ops,
    maxTransactionLocks: s.maxTransactionLocks,
    maxTransactionRelations: s.maxTransactionRelations,
    notes,
  };
}

/** The header comment: seed, pool, sizes, history, redraws. */
function headerLines(b: GeneratedBacklog): string[] {
  const h = b.history;
  const replayed = b.statements.length - h.pauseAt;
  return [
    `-- walsim generated backlog: seed ${b.seed} (generator ${b.generator}); standby shared_buffers ${b.sharedBuffers} (${b.nBuffers} buffers)`,
    `-- ${b.relations.length} relations, ${b.databases.length} extra databases, ${b.sessions} session${b.sessions === 1 ? '' : 's'}; ${replayed} statements replayed at failover; largest transaction ${b.maxTransactionRelations} relations (${b.maxTransactionLocks} locks)`,
    `-- standby history: ${h.restart === null ? 'never restarted' : `restarted (pg_ctl restart -m ${h.restart.mode}) before statement ${h.restart.before + 1}`}; ${h.caughtUp ? 'caught up with the setup when paused' : `paused ${b.setupEnd - h.pauseAt} setup statements behind`}`,
    ...b.notes.map((n) => `-- redrawn: ${n}`),
  ];
}

/**
 * The backlog as SQL: a header comment, then every statement in the order it runs (`;`-ended; a
 * `/* session N *\/` prefix when several sessions interleave), with comment lines where the standby
 * restarts and where its replay pauses.
 */
export function renderBacklogSql(b: GeneratedBacklog): string {
  const out = headerLines(b);
  out.push('-- setup (primary; replayed by the standby before the pause unless it is behind)');
  b.statements.forEach((st, i) => {
    if (b.history.restart?.before === i)
      out.push(
        `-- standby restarted here (pg_ctl restart -m ${b.history.restart.mode}), then caught up`,
      );
    if (i === b.history.pauseAt)
      out.push(
        '-- standby replay paused here (pg_wal_replay_pause()): everything below is replayed at failover',
      );
    if (i === b.setupEnd && b.history.pauseAt !== b.setupEnd) out.push('-- the backlog');
    out.push(`${b.sessions > 1 ? `/* session ${st.session} */ ` : ''}${st.sql};`);
  });
  if (b.history.pauseAt === b.statements.length)
    out.push('-- standby replay paused here (pg_wal_replay_pause()): nothing after it');
  out.push('-- primary stopped (immediate) once the standby flushed everything: then promote');
  return out.join('\n') + '\n';
}
