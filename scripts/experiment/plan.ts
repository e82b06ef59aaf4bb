/**
 * The plan of a sweep: its cells (`planThreshold` for seed 001's Test A, `planMulti` for Test B),
 * their keys and labels, and a rough cost of each for the progress bar's ETA. The sweep
 * (sweep.ts) runs them; sweep.ts re-exports these for its callers.
 *
 * Entry points: `planThreshold`, `planMulti`, `cellKey`, `cellLabel`, `estimateCellSeconds`.
 */
import { pgDropRules } from '../../storage/pg-drop-rules.ts';
import { parseSharedBuffers } from '../../storage/shared-buffers.ts';
import type { DropStrategy } from '../../server/settings.ts';
import { parseRelSize } from './rel-size.ts';
import type { CellSpec, Engine, Variant } from '../report/records.ts';

export function cellKey(c: CellSpec): string {
  return [
    c.engine + (c.pgVersion === undefined ? '' : `-${c.pgVersion}`),
    c.kind,
    c.sharedBuffers,
    c.variant,
    c.relSize ?? `${c.tables}x1`,
    c.strategy + (c.forceOptimized ? '+forced' : ''),
    // A generated backlog is its seed: two seeds at one pool are two cells.
    ...(c.seed !== undefined ? [`seed${c.seed}`] : []),
  ].join(' ');
}

export function cellLabel(c: CellSpec): string {
  const what =
    c.kind === 'threshold'
      ? `${c.relSize} (${c.pagesPerTable.toLocaleString('en-US')} pages)`
      : `${c.tables} tables ${c.variant.toUpperCase()}`;
  if (c.engine === 'postgres') return `s_b=${c.sharedBuffers} ${what} ${pgName(c)}`;
  const rules = c.pgVersion === undefined ? '' : ` (${pgName(c)} rules)`;
  return `s_b=${c.sharedBuffers} ${what} ${c.strategy}${c.forceOptimized ? ' (forced)' : ''}${rules}`;
}

/** "PostgreSQL 13" for a cell of `--pg-version 13`, else "PostgreSQL". */
export function pgName(c: Pick<CellSpec, 'pgVersion'>): string {
  return c.pgVersion === undefined ? 'PostgreSQL' : `PostgreSQL ${c.pgVersion}`;
}

/** One PostgreSQL cell per `--pg-version` (none given: one cell of the default binaries). */
const versionsOf = (pgVersions: readonly number[]) =>
  pgVersions.length === 0 ? [{}] : pgVersions.map((v) => ({ pgVersion: v }));

/**
 * With `--pg-version`, the walsim cells follow each major's rules instead of the strategies: one
 * walsim cell per major (13 full scan, 14+ the lookup below NBuffers/32, unforced, as the real
 * server beside it), so each walsim column sits next to the real server it models.
 */
function walsimPerMajor(
  base: Omit<CellSpec, 'engine' | 'strategy' | 'forceOptimized'>,
  pgVersions: readonly number[],
): CellSpec[] {
  return pgVersions.map((v) => {
    const strategy = pgDropRules({ major: v, minor: null }).cachedLookup
      ? ('cached-lookup' as const)
      : ('full-scan' as const);
    return { ...base, engine: 'walsim', strategy, forceOptimized: false, pgVersion: v };
  });
}

/** Test A cells: shared_buffers × NB/k × {cached-lookup forced (or not), full-scan}. */
export function planThreshold(
  sharedBuffers: string[],
  divisors: number[],
  forceOptimized: boolean,
  engines: readonly Engine[] = ['walsim'],
  pgVersions: readonly number[] = [],
): CellSpec[] {
  const cells: CellSpec[] = [];
  for (const sb of sharedBuffers) {
    const { nBuffers } = parseSharedBuffers(sb);
    for (const k of divisors) {
      const size = parseRelSize(`NB/${k}`, nBuffers);
      const base = {
        kind: 'threshold',
        sharedBuffers: sb,
        nBuffers,
        variant: 'vacuum',
        relSize: size.spec,
        relDivisor: k,
        pagesPerTable: size.pages,
        tables: 1,
      } as const;
      // PostgreSQL 14+ is the cached-lookup path, unpatched: its threshold decides (13 always
      // scans; its cells are labelled by version, the strategy names what 14+ would do).
      if (engines.includes('postgres'))
        for (const v of versionsOf(pgVersions))
          cells.push({
            ...base,
            ...v,
            engine: 'postgres',
            strategy: 'cached-lookup',
            forceOptimized: false,
          });
      if (!engines.includes('walsim')) continue;
      if (pgVersions.length > 0) {
        cells.push(...walsimPerMajor(base, pgVersions));
        continue;
      }
      for (const strategy of ['cached-lookup', 'full-scan'] as const) {
        cells.push({
          ...base,
          engine: 'walsim',
          strategy,
          forceOptimized: strategy === 'cached-lookup' && forceOptimized,
        });
      }
    }
  }
  return cells;
}

/** Test B cells: shared_buffers × variant × strategy. */
export function planMulti(
  sharedBuffers: string[],
  tables: number,
  variants: Variant[],
  strategies: DropStrategy[],
  engines: readonly Engine[] = ['walsim'],
  pgVersions: readonly number[] = [],
): CellSpec[] {
  const cells: CellSpec[] = [];
  for (const sb of sharedBuffers) {
    const { nBuffers } = parseSharedBuffers(sb);
    for (const variant of variants) {
      const base = {
        kind: 'multi',
        sharedBuffers: sb,
        nBuffers,
        forceOptimized: false,
        variant,
        relSize: null,
        relDivisor: null,
        pagesPerTable: 1,
        tables,
      } as const;
      if (engines.includes('postgres'))
        for (const v of versionsOf(pgVersions))
          cells.push({ ...base, ...v, engine: 'postgres', strategy: 'cached-lookup' });
      if (!engines.includes('walsim')) continue;
      if (pgVersions.length > 0) cells.push(...walsimPerMajor(base, pgVersions));
      else for (const strategy of strategies) cells.push({ ...base, engine: 'walsim', strategy });
    }
  }
  return cells;
}

/**
 * A rough cost of one run in seconds, for the ETA only: cluster start and steps, statements,
 * pages written and replayed, and the drops' work (full scans of NBuffers at ~2 ns per
 * descriptor; lookups ~1 µs per block).
 */
export function estimateCellSeconds(c: CellSpec): number {
  if (c.engine === 'postgres') {
    // initdb + base backup + two starts, statements, rows, and full scans of ~5 ns a descriptor
    // where PostgreSQL takes them (TOAST TRUNCATE, or relations of NBuffers/32 and more).
    const full = c.variant === 'truncate-toast' || c.pagesPerTable >= c.nBuffers / 32;
    return (
      6 +
      c.tables * 0.012 +
      c.tables * c.pagesPerTable * 40e-6 +
      (full ? c.tables * c.nBuffers * 5e-9 : 0) +
      c.nBuffers * 2e-7
    );
  }
  const drops = c.tables;
  const blocks = c.tables * c.pagesPerTable;
  const lookup =
    c.strategy === 'cached-lookup' &&
    c.variant !== 'truncate-toast' &&
    (c.forceOptimized || c.kind === 'multi' || c.pagesPerTable < c.nBuffers / 32);
  const dropWork = lookup ? blocks * 2.5e-6 : drops * c.nBuffers * 2.3e-9;
  return 2.5 + c.tables * 0.005 + blocks * 25e-6 + dropWork;
}
