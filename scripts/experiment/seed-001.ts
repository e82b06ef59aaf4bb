/**
 * Seed 001's published results (pgsql-hackers, January 2021, v39 of the buffer-drop patch): Test A
 * (rel.sh, one relation of NBuffers/k pages, VACUUM replayed at failover, optimized path forced vs
 * master) and Test B (test.sh, 1000 one-block relations, VACUUM and TRUNCATE, master vs patched),
 * in seconds as printed there, as walsim sweep cells. The data the `seed-001` cost profile is
 * fitted to and compared with.
 *
 * Entry points: `SEED_001_CELLS`, `seedCells()`, `SEED_TEST_A`, `SEED_TEST_B`, `publishedPoints`.
 */
import { parseSharedBuffers } from '../../storage/shared-buffers.ts';
import type { PublishedPoint } from '../report/records.ts';
import { parseRelSize } from './rel-size.ts';
import type { CellSpec } from './sweep-runner.ts';

export const SEED_SIZES = ['128MB', '1GB', '20GB', '100GB'] as const;
export const SEED_DIVISORS = [512, 256, 128, 64, 32, 16, 8] as const;

/** Test A, "[PATCHED]" (optimized path forced) and "MASTER" tables: rows NB/k, columns SEED_SIZES. */
export const SEED_TEST_A: Record<
  'cached-lookup' | 'full-scan',
  Record<number, readonly number[]>
> = {
  'cached-lookup': {
    512: [0.106, 0.106, 0.106, 0.206],
    256: [0.106, 0.106, 0.106, 0.306],
    128: [0.106, 0.106, 0.206, 0.506],
    64: [0.106, 0.106, 0.306, 0.907],
    32: [0.106, 0.106, 0.406, 1.508],
    16: [0.106, 0.106, 0.706, 3.109],
    8: [0.106, 0.106, 1.307, 6.614],
  },
  'full-scan': {
    512: [0.106, 0.106, 0.106, 0.306],
    256: [0.106, 0.106, 0.106, 0.306],
    128: [0.106, 0.106, 0.206, 0.606],
    64: [0.106, 0.106, 0.306, 1.006],
    32: [0.106, 0.106, 0.406, 1.608],
    16: [0.106, 0.106, 0.706, 3.009],
    8: [0.106, 0.106, 1.307, 6.114],
  },
};

/** Test B: per variant, [master, patched] seconds per SEED_SIZES. */
export const SEED_TEST_B: Record<
  'vacuum' | 'truncate',
  { master: readonly number[]; patched: readonly number[] }
> = {
  vacuum: { master: [0.306, 0.506, 14.522, 66.564], patched: [0.306, 0.306, 0.306, 0.306] },
  truncate: { master: [0.206, 0.506, 16.476, 88.261], patched: [0.206, 0.206, 0.206, 0.206] },
};

export interface SeedCell {
  cell: CellSpec;
  /** The seed's figure, seconds (an average of 5 runs, each measured by a 100 ms promotion poll). */
  seedS: number;
  /** Short name: `A 100GB NB/32 full-scan`, `B 20GB truncate cached-lookup`. */
  label: string;
}

/** Every cell of both tables as a walsim cell (the sweeps' defaults: 1000 tables, divisor 32). */
export function seedCells(): SeedCell[] {
  const out: SeedCell[] = [];
  SEED_SIZES.forEach((sb, col) => {
    const { nBuffers } = parseSharedBuffers(sb);
    for (const k of SEED_DIVISORS) {
      const size = parseRelSize(`NB/${k}`, nBuffers);
      for (const strategy of ['cached-lookup', 'full-scan'] as const) {
        out.push({
          cell: {
            kind: 'threshold',
            engine: 'walsim',
            sharedBuffers: sb,
            nBuffers,
            strategy,
            forceOptimized: strategy === 'cached-lookup',
            variant: 'vacuum',
            relSize: size.spec,
            relDivisor: k,
            pagesPerTable: size.pages,
            tables: 1,
          },
          seedS: SEED_TEST_A[strategy][k]![col]!,
          label: `A ${sb} NB/${k} ${strategy}`,
        });
      }
    }
    for (const variant of ['vacuum', 'truncate'] as const) {
      for (const strategy of ['full-scan', 'cached-lookup'] as const) {
        out.push({
          cell: {
            kind: 'multi',
            engine: 'walsim',
            sharedBuffers: sb,
            nBuffers,
            strategy,
            forceOptimized: false,
            variant,
            relSize: null,
            relDivisor: null,
            pagesPerTable: 1,
            tables: 1000,
          },
          seedS: SEED_TEST_B[variant][strategy === 'full-scan' ? 'master' : 'patched'][col]!,
          label: `B ${sb} ${variant} ${strategy}`,
        });
      }
    }
  });
  return out;
}

/**
 * The seed's published seconds beside a sweep's cells, for the cells the seed measured (its four
 * shared_buffers sizes; Test A at its seven NB/k, Test B VACUUM and TRUNCATE of 1000 tables):
 * master = its MASTER tables (full scan), patched = its [PATCHED] ones (Test A: the optimized
 * path forced by its test patch; Test B: the patch as it became PostgreSQL 14).
 */
export function publishedPoints(cells: readonly CellSpec[]): PublishedPoint[] {
  const out = new Map<string, PublishedPoint>();
  for (const c of cells) {
    const col = (SEED_SIZES as readonly string[]).indexOf(c.sharedBuffers);
    if (col < 0) continue;
    for (const build of ['master', 'patched'] as const) {
      const seconds =
        c.kind === 'threshold'
          ? SEED_TEST_A[build === 'master' ? 'full-scan' : 'cached-lookup'][c.relDivisor!]?.[col]
          : c.tables === 1000 && (c.variant === 'vacuum' || c.variant === 'truncate')
            ? SEED_TEST_B[c.variant][build][col]
            : undefined;
      if (seconds === undefined) continue;
      const at =
        c.kind === 'threshold' ? { relDivisor: c.relDivisor!, pages: c.pagesPerTable } : {};
      const p = { variant: c.variant, sharedBuffers: c.sharedBuffers, nBuffers: c.nBuffers, build };
      out.set(`${c.kind} ${c.variant} ${c.sharedBuffers} ${c.relDivisor} ${build}`, {
        ...p,
        ...at,
        seconds,
      });
    }
  }
  return [...out.values()];
}
