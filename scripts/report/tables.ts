/**
 * The seed's result tables from sweep summaries, as Markdown (pure). Test A: % regression
 * ((optimized − full)/full), optimized seconds, full-scan seconds, one row per NB/k and one column
 * per shared_buffers, plus the crossover. Test B: per variant, one row per shared_buffers with
 * master (full-scan), patched (cached-lookup) and % regression.
 *
 * Entry points: `markdownTable`, `thresholdTables`, `computeCrossover`, `multiTables`,
 * `formatSeconds`, `formatRegression`.
 */
import type { CellSummary, Variant } from '../experiment/sweep.ts';

/** A Markdown table; `align` per column: 'l' or 'r' (default 'r' except the first column). */
export function markdownTable(headers: string[], rows: string[][], align?: Array<'l' | 'r'>): string {
  const al = align ?? headers.map((_, i) => (i === 0 ? 'l' : 'r'));
  const widths = headers.map((h, i) => Math.max(h.length, 3, ...rows.map((r) => (r[i] ?? '').length)));
  const cell = (s: string, i: number) => (al[i] === 'r' ? s.padStart(widths[i]!) : s.padEnd(widths[i]!));
  const line = (cells: string[]) => `| ${cells.map(cell).join(' | ')} |`;
  const rule = `| ${widths.map((w, i) => (al[i] === 'r' ? '-'.repeat(w - 1) + ':' : '-'.repeat(w))).join(' | ')} |`;
  return [line(headers), rule, ...rows.map(line)].join('\n');
}

/** Seconds with 3 decimals, like the seed's tables (results.csv keeps full precision in ms). */
export function formatSeconds(ms: number | null | undefined): string {
  if (ms === null || ms === undefined || !Number.isFinite(ms)) return 'n/a';
  return (ms / 1000).toFixed(3);
}

/** (a − b) / b as a percentage with 3 decimals (the seed's format), or n/a. */
export function regression(optimizedMs: number | undefined, fullMs: number | undefined): number | null {
  if (optimizedMs === undefined || fullMs === undefined || !Number.isFinite(optimizedMs) || !Number.isFinite(fullMs) || fullMs <= 0) return null;
  return (optimizedMs - fullMs) / fullMs;
}

export function formatRegression(r: number | null, digits = 3): string {
  return r === null ? 'n/a' : `${(r * 100).toFixed(digits)}%`;
}

function unique<T>(xs: T[]): T[] {
  return [...new Set(xs)];
}

function find(cells: CellSummary[], pred: (c: CellSummary) => boolean): CellSummary | undefined {
  return cells.find(pred);
}

export interface Crossover {
  sharedBuffers: string;
  nBuffers: number;
  /** The largest NB/k up to which the optimized path was faster at every smaller size; null if not even the smallest. */
  largestWinning: string | null;
  largestWinningPages: number | null;
  /** The smallest NB/k at which it was slower; null if never. */
  smallestLosing: string | null;
  /** Every size, smallest first: did the optimized path win? */
  wins: Array<{ relSize: string; pages: number; regression: number | null; optimizedWins: boolean | null }>;
}

/** Per shared_buffers: where the forced lookup path stops beating the full scan. */
export function computeCrossover(cells: CellSummary[]): Crossover[] {
  const th = cells.filter((c) => c.kind === 'threshold');
  return unique(th.map((c) => c.sharedBuffers)).map((sb) => {
    const here = th.filter((c) => c.sharedBuffers === sb);
    const sizes = unique(here.map((c) => c.relSize!)).map((rs) => here.find((c) => c.relSize === rs)!)
      .sort((a, b) => a.pagesPerTable - b.pagesPerTable);
    const wins = sizes.map((s) => {
      const opt = find(here, (c) => c.relSize === s.relSize && c.strategy === 'cached-lookup');
      const full = find(here, (c) => c.relSize === s.relSize && c.strategy === 'full-scan');
      const r = regression(opt?.failoverMsMean, full?.failoverMsMean);
      return { relSize: s.relSize!, pages: s.pagesPerTable, regression: r, optimizedWins: r === null ? null : r < 0 };
    });
    // The seed's reading: the optimized path wins from the smallest size up to some NB/k and
    // regresses beyond it. Take the wins contiguous from the smallest size, so a noisy win above
    // a loss does not move the threshold up.
    const firstNonWin = wins.findIndex((w) => w.optimizedWins !== true);
    const winning = firstNonWin < 0 ? wins : wins.slice(0, firstNonWin);
    const losing = wins.filter((w) => w.optimizedWins === false);
    return {
      sharedBuffers: sb, nBuffers: here[0]!.nBuffers,
      largestWinning: winning.at(-1)?.relSize ?? null,
      largestWinningPages: winning.at(-1)?.pages ?? null,
      smallestLosing: losing[0]?.relSize ?? null,
      wins,
    };
  });
}

export interface ThresholdTables {
  regression: string;
  optimized: string;
  fullScan: string;
  /** Time inside the buffer drop only (optimized / full-scan), the cost the threshold is about. */
  dropOnly: string;
  crossover: string;
  markdown: string;
}

/** Test A's three tables (rows NB/k in the given order, columns shared_buffers) and the crossover. */
export function thresholdTables(cells: CellSummary[]): ThresholdTables {
  const th = cells.filter((c) => c.kind === 'threshold');
  const sbs = unique(th.map((c) => c.sharedBuffers));
  const sizes = unique(th.map((c) => c.relSize!));
  const get = (sb: string, rs: string, strategy: string) =>
    th.find((c) => c.sharedBuffers === sb && c.relSize === rs && c.strategy === strategy);
  const headers = ['rel_size', ...sbs];
  const grid = (f: (sb: string, rs: string) => string) => markdownTable(headers, sizes.map((rs) => [rs, ...sbs.map((sb) => f(sb, rs))]));
  const regressionT = grid((sb, rs) => formatRegression(regression(get(sb, rs, 'cached-lookup')?.failoverMsMean, get(sb, rs, 'full-scan')?.failoverMsMean)));
  const optimized = grid((sb, rs) => formatSeconds(get(sb, rs, 'cached-lookup')?.failoverMsMean));
  const fullScan = grid((sb, rs) => formatSeconds(get(sb, rs, 'full-scan')?.failoverMsMean));
  const dropOnly = grid((sb, rs) => {
    const o = get(sb, rs, 'cached-lookup')?.dropMsMean;
    const f = get(sb, rs, 'full-scan')?.dropMsMean;
    return `${formatSeconds(o)} / ${formatSeconds(f)}`;
  });
  const cross = computeCrossover(cells);
  const crossover = markdownTable(
    ['shared_buffers', 'NBuffers', 'largest NB/k where optimized wins', 'pages', 'smallest NB/k where it loses'],
    cross.map((x) => [x.sharedBuffers, x.nBuffers.toLocaleString('en-US'), x.largestWinning ?? 'none',
      x.largestWinningPages?.toLocaleString('en-US') ?? '-', x.smallestLosing ?? 'none']),
  );
  const forced = th.some((c) => c.strategy === 'cached-lookup' && c.forceOptimized);
  const runs = unique(th.map((c) => c.runs));
  const markdown = [
    `### 1. % regression: (optimized − full-scan) / full-scan`, '',
    `Average of ${runs.join('/')} run${runs.length === 1 && runs[0] === 1 ? '' : 's'}; negative = the lookup path is faster.`, '',
    regressionT, '',
    `### 2. Optimized (cached-lookup${forced ? ', optimized path forced' : ''}), failover seconds`, '', optimized, '',
    `### 3. Full scan (pre-PG14 "master"), failover seconds`, '', fullScan, '',
    `### 4. Inside the buffer drop only, seconds (optimized / full scan)`, '',
    'The busy time of the drop itself during the failover, without the replay of the VACUUM\'s other records.', '',
    dropOnly, '',
    `### Crossover`, '', crossover,
  ].join('\n');
  return { regression: regressionT, optimized, fullScan, dropOnly, crossover, markdown };
}

/** Test B: one table per variant, rows shared_buffers, Master | Patched | %reg. */
export function multiTables(cells: CellSummary[]): { byVariant: Partial<Record<Variant, string>>; markdown: string } {
  const mc = cells.filter((c) => c.kind === 'multi');
  const byVariant: Partial<Record<Variant, string>> = {};
  const parts: string[] = [];
  for (const variant of unique(mc.map((c) => c.variant))) {
    const here = mc.filter((c) => c.variant === variant);
    const rows = unique(here.map((c) => c.sharedBuffers)).map((sb) => {
      const master = here.find((c) => c.sharedBuffers === sb && c.strategy === 'full-scan');
      const patched = here.find((c) => c.sharedBuffers === sb && c.strategy === 'cached-lookup');
      return [sb, formatSeconds(master?.failoverMsMean), formatSeconds(patched?.failoverMsMean),
        formatRegression(regression(patched?.failoverMsMean, master?.failoverMsMean), 2)];
    });
    const table = markdownTable(['s_b', 'Master (full-scan)', 'Patched (cached-lookup)', '%reg'], rows);
    byVariant[variant] = table;
    const tables = here[0]!.tables;
    const runs = unique(here.map((c) => c.runs));
    parts.push(
      `### ${variant.toUpperCase()} recovery performance for ${tables} relation${tables === 1 ? '' : 's'}`, '',
      `Failover seconds, average of ${runs.join('/')} run${runs.length === 1 && runs[0] === 1 ? '' : 's'}; %reg = (patched − master) / master.`, '',
      table, '',
    );
  }
  return { byVariant, markdown: parts.join('\n').trimEnd() };
}
