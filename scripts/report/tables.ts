/**
 * The seed's result tables from sweep summaries, as Markdown (pure). Test A: % regression
 * ((optimized − full)/full), optimized seconds, full-scan seconds, one row per NB/k and one column
 * per shared_buffers, plus the crossover. Test B: per variant, one row per shared_buffers with
 * master (full-scan), patched (cached-lookup) and % regression.
 *
 * Entry points: `markdownTable`, `thresholdTables`, `computeCrossover`, `multiTables`,
 * `formatSeconds`, `formatRegression`.
 */
import type { CellSummary, PublishedPoint, Variant } from './records.ts';

/** A Markdown table; `align` per column: 'l' or 'r' (default 'r' except the first column). */
export function markdownTable(
  headers: string[],
  rows: string[][],
  align?: Array<'l' | 'r'>,
): string {
  const al = align ?? headers.map((_, i) => (i === 0 ? 'l' : 'r'));
  const widths = headers.map((h, i) =>
    Math.max(h.length, 3, ...rows.map((r) => (r[i] ?? '').length)),
  );
  const cell = (s: string, i: number) =>
    al[i] === 'r' ? s.padStart(widths[i]!) : s.padEnd(widths[i]!);
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
export function regression(
  optimizedMs: number | undefined,
  fullMs: number | undefined,
): number | null {
  if (
    optimizedMs === undefined ||
    fullMs === undefined ||
    !Number.isFinite(optimizedMs) ||
    !Number.isFinite(fullMs) ||
    fullMs <= 0
  )
    return null;
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
  wins: Array<{
    relSize: string;
    pages: number;
    regression: number | null;
    optimizedWins: boolean | null;
  }>;
}

/** Which seconds a table or crossover reads: walsim's measured ones or the modeled PostgreSQL ones. */
export type Metric = 'measured' | 'modeled';

/** A cell's failover milliseconds by metric (modeled: the unquantized modeled seconds × 1000). */
export function cellMs(c: CellSummary | undefined, metric: Metric): number | undefined {
  if (c === undefined) return undefined;
  return metric === 'measured' ? c.failoverMsMean : c.modeledS * 1000;
}

/** True when no cell was measured (the sweep ran with --model-only). */
export function isModelOnly(cells: CellSummary[]): boolean {
  return cells.length > 0 && cells.every((c) => !Number.isFinite(c.failoverMsMean));
}

/** Per shared_buffers: where the forced lookup path stops beating the full scan. */
export function computeCrossover(cells: CellSummary[], metric: Metric = 'measured'): Crossover[] {
  const th = cells.filter((c) => c.kind === 'threshold' && c.engine === 'walsim');
  return unique(th.map((c) => c.sharedBuffers)).map((sb) => {
    const here = th.filter((c) => c.sharedBuffers === sb);
    const sizes = unique(here.map((c) => c.relSize!))
      .map((rs) => here.find((c) => c.relSize === rs)!)
      .sort((a, b) => a.pagesPerTable - b.pagesPerTable);
    const wins = sizes.map((s) => {
      const opt = find(here, (c) => c.relSize === s.relSize && c.strategy === 'cached-lookup');
      const full = find(here, (c) => c.relSize === s.relSize && c.strategy === 'full-scan');
      const r = regression(cellMs(opt, metric), cellMs(full, metric));
      return {
        relSize: s.relSize!,
        pages: s.pagesPerTable,
        regression: r,
        optimizedWins: r === null ? null : r < 0,
      };
    });
    // The seed's reading: the optimized path wins from the smallest size up to some NB/k and
    // regresses beyond it. Take the wins contiguous from the smallest size, so a noisy win above
    // a loss does not move the threshold up.
    const firstNonWin = wins.findIndex((w) => w.optimizedWins !== true);
    const winning = firstNonWin < 0 ? wins : wins.slice(0, firstNonWin);
    const losing = wins.filter((w) => w.optimizedWins === false);
    return {
      sharedBuffers: sb,
      nBuffers: here[0]!.nBuffers,
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
  /** The same from modeled PostgreSQL seconds (cost-model). */
  modeledRegression: string;
  modeledOptimized: string;
  modeledFullScan: string;
  /** Modeled seconds as the profile's promotion poll reads them (optimized / full scan). */
  modeledPolled: string;
  modeledCrossover: string;
  markdown: string;
}

function crossoverTable(cross: Crossover[]): string {
  return markdownTable(
    [
      'shared_buffers',
      'NBuffers',
      'largest NB/k where optimized wins',
      'pages',
      'smallest NB/k where it loses',
    ],
    cross.map((x) => [
      x.sharedBuffers,
      x.nBuffers.toLocaleString('en-US'),
      x.largestWinning ?? 'none',
      x.largestWinningPages?.toLocaleString('en-US') ?? '-',
      x.smallestLosing ?? 'none',
    ]),
  );
}

/** Test A's walsim cells as grids: rows NB/k (in the given order), columns shared_buffers. */
interface ThresholdGrid {
  th: CellSummary[];
  get(sb: string, rs: string, strategy: string): CellSummary | undefined;
  grid(f: (sb: string, rs: string) => string): string;
}

function thresholdGrid(cells: CellSummary[]): ThresholdGrid {
  const th = cells.filter((c) => c.kind === 'threshold' && c.engine === 'walsim');
  const sbs = unique(th.map((c) => c.sharedBuffers));
  const sizes = unique(th.map((c) => c.relSize!));
  const headers = ['rel_size', ...sbs];
  return {
    th,
    get: (sb, rs, strategy) =>
      th.find((c) => c.sharedBuffers === sb && c.relSize === rs && c.strategy === strategy),
    grid: (f) =>
      markdownTable(
        headers,
        sizes.map((rs) => [rs, ...sbs.map((sb) => f(sb, rs))]),
      ),
  };
}

type MeasuredThreshold = Pick<
  ThresholdTables,
  'regression' | 'optimized' | 'fullScan' | 'dropOnly' | 'crossover'
>;
type ModeledThreshold = Pick<
  ThresholdTables,
  | 'modeledRegression'
  | 'modeledOptimized'
  | 'modeledFullScan'
  | 'modeledPolled'
  | 'modeledCrossover'
>;

/** Test A's tables of walsim's measured seconds. */
function measuredThreshold(cells: CellSummary[], { get, grid }: ThresholdGrid): MeasuredThreshold {
  return {
    regression: grid((sb, rs) =>
      formatRegression(
        regression(
          get(sb, rs, 'cached-lookup')?.failoverMsMean,
          get(sb, rs, 'full-scan')?.failoverMsMean,
        ),
      ),
    ),
    optimized: grid((sb, rs) => formatSeconds(get(sb, rs, 'cached-lookup')?.failoverMsMean)),
    fullScan: grid((sb, rs) => formatSeconds(get(sb, rs, 'full-scan')?.failoverMsMean)),
    dropOnly: grid((sb, rs) => {
      const o = get(sb, rs, 'cached-lookup')?.dropMsMean;
      const f = get(sb, rs, 'full-scan')?.dropMsMean;
      return `${formatSeconds(o)} / ${formatSeconds(f)}`;
    }),
    crossover: crossoverTable(computeCrossover(cells)),
  };
}

/** Test A's tables of modeled PostgreSQL seconds (cost-model). */
function modeledThreshold(cells: CellSummary[], { get, grid }: ThresholdGrid): ModeledThreshold {
  const polled = (c: CellSummary | undefined) =>
    formatSeconds(c?.modeledPolledS == null ? null : c.modeledPolledS * 1000);
  return {
    modeledRegression: grid((sb, rs) =>
      formatRegression(
        regression(
          cellMs(get(sb, rs, 'cached-lookup'), 'modeled'),
          cellMs(get(sb, rs, 'full-scan'), 'modeled'),
        ),
      ),
    ),
    modeledOptimized: grid((sb, rs) =>
      formatSeconds(cellMs(get(sb, rs, 'cached-lookup'), 'modeled')),
    ),
    modeledFullScan: grid((sb, rs) => formatSeconds(cellMs(get(sb, rs, 'full-scan'), 'modeled'))),
    modeledPolled: grid(
      (sb, rs) => `${polled(get(sb, rs, 'cached-lookup'))} / ${polled(get(sb, rs, 'full-scan'))}`,
    ),
    modeledCrossover: crossoverTable(computeCrossover(cells, 'modeled')),
  };
}

/** The modeled half of Test A's Markdown (all of it after --model-only). */
function modeledThresholdMarkdown(t: ModeledThreshold, profile: string, forced: boolean): string[] {
  return [
    `### Modeled PostgreSQL seconds (cost profile ${profile})`,
    '',
    'From the exact counts of each failover (cost-model/README.md); identical on every run.',
    '',
    `#### M1. Modeled % regression: (optimized − full-scan) / full-scan`,
    '',
    t.modeledRegression,
    '',
    `#### M2. Modeled optimized (cached-lookup${forced ? ', optimized path forced' : ''}), failover seconds`,
    '',
    t.modeledOptimized,
    '',
    `#### M3. Modeled full scan (pre-PG14 "master"), failover seconds`,
    '',
    t.modeledFullScan,
    '',
    `#### M4. Modeled, as the profile's promotion poll reads them (optimized / full scan)`,
    '',
    t.modeledPolled,
    '',
    `#### Modeled crossover`,
    '',
    t.modeledCrossover,
  ];
}

/** The measured half of Test A's Markdown, in the seed's order and wording. */
function measuredThresholdMarkdown(
  t: MeasuredThreshold,
  runs: number[],
  forced: boolean,
): string[] {
  return [
    `### 1. % regression: (optimized − full-scan) / full-scan`,
    '',
    `Average of ${runs.join('/')} run${runs.length === 1 && runs[0] === 1 ? '' : 's'}; negative = the lookup path is faster.`,
    '',
    t.regression,
    '',
    `### 2. Optimized (cached-lookup${forced ? ', optimized path forced' : ''}), failover seconds`,
    '',
    t.optimized,
    '',
    `### 3. Full scan (pre-PG14 "master"), failover seconds`,
    '',
    t.fullScan,
    '',
    `### 4. Inside the buffer drop only, seconds (optimized / full scan)`,
    '',
    "The busy time of the drop itself during the failover, without the replay of the VACUUM's other records.",
    '',
    t.dropOnly,
    '',
    `### Crossover`,
    '',
    t.crossover,
    '',
  ];
}

/**
 * Test A's three tables (rows NB/k in the given order, columns shared_buffers) and the crossover,
 * measured then modeled, in the seed's order and wording.
 */
export function thresholdTables(cells: CellSummary[]): ThresholdTables {
  const g = thresholdGrid(cells);
  const tables = { ...measuredThreshold(cells, g), ...modeledThreshold(cells, g) };
  // A PostgreSQL-only sweep has no walsim cells: its one table is the side-by-side one.
  if (g.th.length === 0) return { ...tables, markdown: '' };
  const profile = g.th[0]!.modelProfile;
  const forced = g.th.some((c) => c.strategy === 'cached-lookup' && c.forceOptimized);
  const modeledMd = modeledThresholdMarkdown(tables, profile, forced);
  if (isModelOnly(cells)) return { ...tables, markdown: modeledMd.join('\n') };
  const runs = unique(g.th.map((c) => c.runs));
  const markdown = [...measuredThresholdMarkdown(tables, runs, forced), ...modeledMd].join('\n');
  return { ...tables, markdown };
}

/**
 * One row of a Test B table: shared_buffers, walsim's measured master, patched, %reg and the other
 * strategies (left out after --model-only), then the same modeled.
 */
function multiRow(here: CellSummary[], sb: string, others: string[], modelOnly: boolean): string[] {
  const at = (strategy: string) =>
    here.find((c) => c.sharedBuffers === sb && c.strategy === strategy);
  const master = at('full-scan');
  const patched = at('cached-lookup');
  const modeled = [
    formatSeconds(cellMs(master, 'modeled')),
    formatSeconds(cellMs(patched, 'modeled')),
    formatRegression(regression(cellMs(patched, 'modeled'), cellMs(master, 'modeled')), 2),
    ...others.map((s) => formatSeconds(cellMs(at(s), 'modeled'))),
  ];
  if (modelOnly) return [sb, ...modeled];
  return [
    sb,
    formatSeconds(master?.failoverMsMean),
    formatSeconds(patched?.failoverMsMean),
    formatRegression(regression(patched?.failoverMsMean, master?.failoverMsMean), 2),
    ...others.map((s) => formatSeconds(at(s)?.failoverMsMean)),
    ...modeled,
  ];
}

/** Test B's table of one variant's cells (`here`): rows shared_buffers. */
function multiTable(here: CellSummary[], modelOnly: boolean): string {
  // The seed debate's other strategies (--strategies rel-list,…) get a column each.
  const others = unique(here.map((c) => c.strategy)).filter(
    (s) => s !== 'full-scan' && s !== 'cached-lookup',
  );
  const rows = unique(here.map((c) => c.sharedBuffers)).map((sb) =>
    multiRow(here, sb, others, modelOnly),
  );
  const modeledHeaders = [
    'Master modeled',
    'Patched modeled',
    '%reg modeled',
    ...others.map((s) => `${s} modeled`),
  ];
  return markdownTable(
    modelOnly
      ? ['s_b', ...modeledHeaders]
      : [
          's_b',
          'Master (full-scan)',
          'Patched (cached-lookup)',
          '%reg',
          ...others,
          ...modeledHeaders,
        ],
    rows,
  );
}

/** Test B: one table per variant, rows shared_buffers, Master | Patched | %reg. */
export function multiTables(cells: CellSummary[]): {
  byVariant: Partial<Record<Variant, string>>;
  markdown: string;
} {
  const mc = cells.filter((c) => c.kind === 'multi' && c.engine === 'walsim');
  const byVariant: Partial<Record<Variant, string>> = {};
  const parts: string[] = [];
  const modelOnly = isModelOnly(mc);
  const profile = mc[0]?.modelProfile ?? '?';
  for (const variant of unique(mc.map((c) => c.variant))) {
    const here = mc.filter((c) => c.variant === variant);
    const table = multiTable(here, modelOnly);
    byVariant[variant] = table;
    const tables = here[0]!.tables;
    const runs = unique(here.map((c) => c.runs));
    parts.push(
      `### ${variant.toUpperCase()} recovery performance for ${tables} relation${tables === 1 ? '' : 's'}`,
      '',
      modelOnly
        ? `Modeled PostgreSQL failover seconds (cost profile ${profile}; model only, nothing measured); %reg = (patched − master) / master.`
        : `Failover seconds measured by walsim, average of ${runs.join('/')} run${runs.length === 1 && runs[0] === 1 ? '' : 's'}, and modeled PostgreSQL seconds (cost profile ${profile}); %reg = (patched − master) / master.`,
      '',
      table,
      '',
    );
  }
  return { byVariant, markdown: parts.join('\n').trimEnd() };
}

const VARIANT_TITLE: Record<Variant, string> = {
  vacuum: 'VACUUM',
  truncate: 'TRUNCATE',
  'truncate-toast': 'TRUNCATE (tables with a TOAST table)',
  drop: 'DROP TABLE, one table a transaction',
  insert: 'INSERT of 2,260 rows per table',
  delete: 'DELETE of every row',
  copy: 'COPY of 2,260 int rows per table',
  'copy-wide': 'COPY of 900 wide rows per table',
  generated: 'a generated backlog (scripts/generator/)',
};

/** A cell's label in a side-by-side table: which engine, and how its seconds were obtained. */
function pgNote(c: CellSummary | undefined): string {
  if (c === undefined) return 'n/a';
  return `${formatSeconds(c.failoverMsMedian)}${c.stalls > 0 ? ` (${c.stalls} stall${c.stalls === 1 ? '' : 's'} excluded)` : ''}`;
}

/** "PostgreSQL 13 (master)": the major and which of the seed's builds its drop path is. */
export function pgColumnName(v: number | undefined): string {
  if (v === undefined) return 'PostgreSQL';
  return `PostgreSQL ${v} (${v < 14 ? 'master' : 'patched'})`;
}

/** The published point of a cell's row (Test A: its NB/k too), or undefined. */
function publishedOf(
  published: readonly PublishedPoint[],
  c: CellSummary,
  build: 'master' | 'patched',
): PublishedPoint | undefined {
  return published.find(
    (p) =>
      p.variant === c.variant &&
      p.sharedBuffers === c.sharedBuffers &&
      (p.relDivisor ?? null) === (c.kind === 'threshold' ? c.relDivisor : null) &&
      p.build === build,
  );
}

/** The columns of a side-by-side table: which majors, strategies, modeled and published ones. */
interface SideColumns {
  versions: Array<number | undefined>;
  strategies: string[];
  hasModel: boolean;
  hasPub: boolean;
  published: readonly PublishedPoint[];
}

/** A walsim column: its strategy, or the major whose rules it followed (`--pg-version`). */
const strategyKey = (c: CellSummary) =>
  c.pgVersion !== undefined
    ? `PostgreSQL ${c.pgVersion} rules (${c.strategy})`
    : c.strategy + (c.forceOptimized ? '+forced' : '');

function sideHeaders(first: string, k: SideColumns): string[] {
  return [
    first,
    ...k.versions.flatMap((v) => [pgColumnName(v), `${pgColumnName(v)} (seed method)`]),
    ...k.strategies.map((s) => `walsim measured ${s}`),
    ...(k.hasModel ? k.strategies.map((s) => `walsim modeled ${s}`) : []),
    ...(k.hasPub ? ['seed 001 published master', 'seed 001 published patched'] : []),
  ];
}

function sideRow(first: string, pgcs: CellSummary[], wcs: CellSummary[], k: SideColumns) {
  const by = (s: string) => wcs.find((c) => strategyKey(c) === s);
  const of = (v: number | undefined) => pgcs.find((c) => c.pgVersion === v);
  const pub = (build: 'master' | 'patched') =>
    publishedOf(k.published, pgcs[0]!, build)?.seconds.toFixed(3) ?? 'n/a';
  return [
    first,
    ...k.versions.flatMap((v) => [pgNote(of(v)), formatSeconds(of(v)?.seedMethodMsMedian)]),
    ...k.strategies.map((s) => formatSeconds(by(s)?.failoverMsMean)),
    ...(k.hasModel ? k.strategies.map((s) => formatSeconds(by(s)?.modeledMsMean)) : []),
    ...(k.hasPub ? [pub('master'), pub('patched')] : []),
  ];
}

/** The paragraph above each side-by-side table: how each column's seconds were obtained. */
function sideNote(pgCells: CellSummary[], k: SideColumns): string {
  const runs = unique(pgCells.map((c) => c.runs));
  const testA = pgCells[0]!.kind === 'threshold';
  return (
    `Failover seconds. PostgreSQL: median of ${runs.join('/')} run${runs.length === 1 && runs[0] === 1 ? '' : 's'}, resume (clock_timestamp()) → "ready to accept connections" in the standby's log; ` +
    `seed method: pg_ctl promote -w as the seed timed it (100 ms polling). walsim measured: its own clock, mean; modeled: the cost profile.` +
    (k.versions.some((v) => v !== undefined)
      ? " A PostgreSQL column with a major is the npm registry's build of it (every major compiled alike: gcc 7.5, -Os); one without is Debian's 15 (-O2) or --pg-bin."
      : '') +
    (k.hasPub
      ? ` seed 001 published: the seed's tables (5-run averages, 100 ms polling, its own machine${testA ? '; patched = its optimized path forced by its test patch' : ''}).`
      : '')
  );
}

/**
 * Real PostgreSQL next to walsim (sweeps with `--engine walsim,postgres`): per variant (Test B) or
 * per shared_buffers (Test A), each PostgreSQL major's median failover (log method, runs whose
 * promote request stalled excluded) and the seed's own pg_ctl-polling figure, walsim measured for
 * each strategy, walsim modeled where the cells carry a modeled time, and the seed's published
 * master and patched seconds where `published` has them (Test A and Test B).
 */
export function sideBySideTables(
  cells: CellSummary[],
  published: readonly PublishedPoint[] = [],
): string {
  const pgCells = cells.filter((c) => c.engine === 'postgres');
  if (pgCells.length === 0) return '';
  const ws = cells.filter((c) => c.engine === 'walsim');
  const k: SideColumns = {
    versions: unique(pgCells.map((c) => c.pgVersion)),
    strategies: unique(ws.map(strategyKey)),
    hasModel: ws.some((c) => c.modeledMsMean !== undefined),
    hasPub: pgCells.some((c) => publishedOf(published, c, 'master') !== undefined),
    published,
  };
  const note = sideNote(pgCells, k);
  const parts: string[] = [];
  const multi = pgCells[0]!.kind === 'multi';
  // Test B: one table per variant, a row per shared_buffers; Test A: one per size, a row per NB/k.
  const groups = multi
    ? unique(pgCells.map((c) => c.variant))
    : unique(pgCells.map((c) => c.sharedBuffers));
  for (const g of groups) {
    const pv = pgCells.filter((c) => (multi ? c.variant : c.sharedBuffers) === g);
    const rowKey = (c: CellSummary) => (multi ? c.sharedBuffers : c.relSize!);
    const rows = unique(pv.map(rowKey)).map((r) =>
      sideRow(
        r,
        pv.filter((c) => rowKey(c) === r),
        ws.filter((c) => rowKey(c) === r && (multi ? c.variant === g : c.sharedBuffers === g)),
        k,
      ),
    );
    parts.push(
      multi
        ? `### ${VARIANT_TITLE[g as Variant]} of ${pv[0]!.tables} relations: PostgreSQL and walsim`
        : `### VACUUM of one relation at shared_buffers=${g}: PostgreSQL and walsim`,
      '',
      note,
      '',
      markdownTable(sideHeaders(multi ? 's_b' : 'rel_size', k), rows),
      '',
    );
  }
  return parts.join('\n').trimEnd();
}
