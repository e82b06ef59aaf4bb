/**
 * The workload generator (scripts/generator/): a seed names one backlog — the same SQL on every
 * call, another seed another —; over many seeds the grammar's every statement kind, relation
 * kind, transaction size and standby history is drawn; the limits hold (pool, locks per
 * transaction, page budget), and an impossible draw is drawn again or refused with a clear message.
 */
import { createHash } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import {
  DEFAULT_GENERATOR_LIMITS,
  generateBacklog,
  largestStartablePool,
  POOL_LADDER,
  renderBacklogSql,
  type GeneratedBacklog,
} from '../../scripts/generator/backlog.ts';
import { OP_KINDS } from '../../scripts/generator/transactions.ts';
import { lockFootprint, rowsPerPage } from '../../scripts/generator/shapes.ts';
import { parseSharedBuffers } from '../../storage/shared-buffers.ts';

const SEEDS = Array.from({ length: 300 }, (_, i) => i);
const all = SEEDS.map((s) => generateBacklog(s));
const sha = (text: string) => createHash('sha256').update(text).digest('hex').slice(0, 16);

/** Per session, the transactions as lists of statements (BEGIN … COMMIT, or one statement). */
function transactions(b: GeneratedBacklog): string[][] {
  const open = new Map<number, string[]>();
  const out: string[][] = [];
  for (const st of b.statements.slice(b.setupEnd)) {
    const cur = open.get(st.session);
    if (st.sql === 'BEGIN') open.set(st.session, []);
    else if (st.sql === 'COMMIT') {
      out.push(cur!);
      open.delete(st.session);
    } else if (cur !== undefined) cur.push(st.sql);
    else out.push([st.sql]);
  }
  expect(open.size).toBe(0); // every transaction committed
  return out;
}

describe('workload generator: a seed names one backlog', () => {
  it('the same seed gives the same SQL, exactly; another seed other SQL', () => {
    for (const s of [0, 1, 17, 1001]) {
      expect(renderBacklogSql(generateBacklog(s))).toBe(renderBacklogSql(generateBacklog(s)));
      expect(renderBacklogSql(generateBacklog(s))).not.toBe(
        renderBacklogSql(generateBacklog(s + 1)),
      );
    }
  });

  it('seed 1 prints the SQL it printed when generator 1 was written (bump GENERATOR_VERSION)', () => {
    const b = generateBacklog(1);
    expect(b.generator).toBe(1);
    expect(sha(renderBacklogSql(b))).toBe('a5363d1d9399b32c');
  });

  it('a fixed pool draws the same backlog whatever the machine limit', () => {
    const small = { ...DEFAULT_GENERATOR_LIMITS, maxSharedBuffers: '1GB' };
    expect(renderBacklogSql(generateBacklog(5, small, '512MB'))).toBe(
      renderBacklogSql(generateBacklog(5, DEFAULT_GENERATOR_LIMITS, '512MB')),
    );
  });

  it('refuses a negative or fractional seed with one line', () => {
    expect(() => generateBacklog(-1)).toThrow(/a generator seed is a whole number ≥ 0, got -1/);
    expect(() => generateBacklog(1.5)).toThrow(/got 1.5/);
  });
});

describe('workload generator: grammar coverage over 300 seeds', () => {
  it('draws every statement kind after the pause', () => {
    const total = Object.fromEntries(
      OP_KINDS.map((k) => [k, all.reduce((a, b) => a + b.ops[k], 0)]),
    );
    for (const k of OP_KINDS) expect(total[k], k).toBeGreaterThan(0);
  });

  it('draws every relation kind, fillfactors below 100, 0 to 3 indexes, TOAST written or not', () => {
    const rels = all.flatMap((b) => b.relations);
    expect(new Set(rels.map((r) => r.kind))).toEqual(new Set(['plain', 'toast', 'partitioned']));
    expect(new Set(rels.map((r) => r.fillfactor))).toEqual(new Set([50, 70, 90, 100]));
    const setupIndexes = all.flatMap((b) =>
      b.statements.slice(0, b.setupEnd).filter((st) => st.sql.startsWith('CREATE INDEX')),
    );
    expect(setupIndexes.some((st) => /_i2 ON/.test(st.sql))).toBe(true);
    expect(rels.some((r) => r.indexes.length === 0)).toBe(true);
    const toast = rels.filter((r) => r.kind === 'toast');
    expect(toast.some((r) => r.toastEvery === 0) && toast.some((r) => r.toastEvery > 0)).toBe(true);
    expect(Math.min(...rels.map((r) => r.pages))).toBe(1);
  });

  it('draws every pool of the ladder and relations up to NBuffers/8', () => {
    expect(new Set(all.map((b) => b.sharedBuffers))).toEqual(new Set(POOL_LADDER));
    for (const b of all)
      for (const r of b.relations) expect(r.pages).toBeLessThanOrEqual(Math.max(1, b.nBuffers / 8));
    const small = all.filter((b) => b.nBuffers <= 32768);
    expect(small.some((b) => b.relations.some((r) => r.pages > b.nBuffers / 16))).toBe(true);
  });

  it('draws one-statement, multi-statement and wide (≥ 100 relations) transactions', () => {
    const sizes = all.flatMap(transactions).map((t) => t.length);
    expect(sizes).toContain(1);
    expect(sizes.some((n) => n >= 2 && n <= 8)).toBe(true);
    expect(Math.max(...all.map((b) => b.maxTransactionRelations))).toBeGreaterThanOrEqual(100);
  });

  it('draws every standby history and up to three interleaved sessions', () => {
    const h = all.map((b) => b.history);
    expect(h.some((x) => x.restart?.mode === 'fast')).toBe(true);
    expect(h.some((x) => x.restart?.mode === 'immediate')).toBe(true);
    expect(h.some((x) => x.restart === null)).toBe(true);
    expect(h.some((x) => x.caughtUp) && h.some((x) => !x.caughtUp)).toBe(true);
    expect(new Set(all.map((b) => b.sessions))).toEqual(new Set([1, 2, 3]));
    const interleaved = all.some((b) => {
      const open = new Set<number>();
      return b.statements.some((st) => {
        if (st.sql === 'BEGIN') open.add(st.session);
        if (st.sql === 'COMMIT') open.delete(st.session);
        return open.size > 1;
      });
    });
    expect(interleaved).toBe(true);
  });
});

describe('workload generator: limits', () => {
  it('never puts VACUUM, VACUUM FULL or DROP DATABASE inside a transaction block', () => {
    for (const b of all)
      for (const t of transactions(b).filter((x) => x.length > 1))
        for (const sql of t) expect(sql).not.toMatch(/^(VACUUM|DROP DATABASE)/);
  });

  it('no statement touches a relation another session’s open transaction holds (no lock waits)', () => {
    // Seed 1016 once handed a relation to a second session while the first still held it: the
    // serial runner waited for a lock forever.
    for (const b of [...all, generateBacklog(1016)]) {
      const held = new Map<number, Set<string>>();
      for (const st of b.statements.slice(b.setupEnd)) {
        const names = st.sql.match(/\bg\d+_\d+\b/g) ?? [];
        for (const [session, rels] of held)
          if (session !== st.session)
            for (const n of names) expect(rels.has(n), `${b.seed}: ${st.sql}`).toBe(false);
        if (st.sql === 'BEGIN') held.set(st.session, new Set());
        else if (st.sql === 'COMMIT') held.delete(st.session);
        else for (const n of names) held.get(st.session)?.add(n);
      }
    }
  });

  it('keeps a transaction within max_locks_per_transaction, drawing a smaller one and saying so', () => {
    const limits = { ...DEFAULT_GENERATOR_LIMITS, maxLocksPerTransaction: 64 };
    const bs = SEEDS.slice(0, 120).map((s) => generateBacklog(s, limits));
    for (const b of bs) {
      expect(b.maxTransactionLocks).toBeLessThanOrEqual(64);
      // Independently: relations a transaction names, each at least its own table's lock.
      for (const t of transactions(b)) {
        const names = new Set(t.flatMap((q) => q.match(/\bg\d+_\d+\b/g) ?? []));
        const locks = [...names].reduce(
          (a, n) => a + lockFootprint(b.relations.find((r) => r.name === n)!),
          0,
        );
        expect(locks).toBeLessThanOrEqual(64);
      }
    }
    expect(bs.some((b) => b.notes.some((n) => /max_locks_per_transaction = 64/.test(n)))).toBe(
      true,
    );
  });

  it('refuses max_locks_per_transaction below one TOAST table', () => {
    expect(() =>
      generateBacklog(1, { ...DEFAULT_GENERATOR_LIMITS, maxLocksPerTransaction: 3 }),
    ).toThrow(/max_locks_per_transaction 3 cannot hold one table with a TOAST relation/);
  });

  it('draws the pool again when the machine cannot start it; refuses a machine below 128MB', () => {
    const limits = { ...DEFAULT_GENERATOR_LIMITS, maxSharedBuffers: '1GB' };
    const bs = SEEDS.slice(0, 60).map((s) => generateBacklog(s, limits));
    for (const b of bs) expect(b.nBuffers).toBeLessThanOrEqual(parseSharedBuffers('1GB').nBuffers);
    expect(bs.some((b) => b.notes.some((n) => /drawn again: above the largest/.test(n)))).toBe(
      true,
    );
    expect(() =>
      generateBacklog(1, { ...DEFAULT_GENERATOR_LIMITS, maxSharedBuffers: '64MB' }),
    ).toThrow(/cannot start a 128MB standby \(largest: 64MB\)/);
  });

  it("keeps the setup's heap pages within half the page budget (one page each at least)", () => {
    for (const b of all)
      expect(b.relations.reduce((a, r) => a + r.pages, 0)).toBeLessThanOrEqual(
        DEFAULT_GENERATOR_LIMITS.maxPages / 2 + b.relations.length,
      );
  });

  it('the largest pool a machine starts: RAM + swap less 3 GiB, on the ladder', () => {
    expect(largestStartablePool(24 * 2 ** 30, 0)).toBe('20GB');
    expect(largestStartablePool(23.4 * 2 ** 30, 0)).toBe('20GB');
    expect(largestStartablePool(8 * 2 ** 30, 0)).toBe('4GB');
    expect(largestStartablePool(2 * 2 ** 30, 2 * 2 ** 30)).toBe('512MB');
    expect(largestStartablePool(2 * 2 ** 30, 0)).toBeNull();
  });

  it('rows a page: 185 int rows at fillfactor 100, fewer at 50 and for TOAST rows', () => {
    expect(rowsPerPage('plain', 100)).toBe(185);
    expect(rowsPerPage('plain', 50)).toBe(92);
    expect(rowsPerPage('toast', 100)).toBe(136);
  });
});
