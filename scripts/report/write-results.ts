/**
 * Write a sweep's files into `<base>/<timestamp>/`: results.json (settings, every run, the
 * averaged cells, crossover), results.csv (one row per run), tables.md (the seed's tables) and
 * SVG charts. Rendering is pure (`renderResults`); `writeResults` only touches the disk.
 *
 * Entry points: `renderResults`, `writeResults`, `writeResultFiles`, `resultsDirName`.
 */
import * as fs from 'node:fs';
import * as path from 'node:path';
import type { CellSummary, PublishedPoint, RunRecord, SweepKind } from './records.ts';
import { toCsv } from './csv.ts';
import { lineChart, STRATEGY_COLORS, type ChartSeries } from './svg-chart.ts';
import {
  computeCrossover,
  isModelOnly,
  multiTables,
  pgColumnName,
  sideBySideTables,
  thresholdTables,
} from './tables.ts';

export interface SweepOutput {
  kind: SweepKind;
  startedAt: string;
  finishedAt: string;
  wallSeconds: number;
  settings: Record<string, unknown>;
  records: RunRecord[];
  cells: CellSummary[];
  /** Published figures drawn and tabled beside the cells (seed 001's Test B); none by default. */
  published?: PublishedPoint[];
}

const CSV_COLUMNS = [
  'kind',
  'sharedBuffers',
  'nBuffers',
  'variant',
  'relSize',
  'pagesPerTable',
  'tables',
  'strategy',
  'forceOptimized',
  'run',
  'failoverMs',
  'replayMs',
  'endOfRecoveryMs',
  'openForWritesMs',
  'recordsReplayed',
  'dropMs',
  'dropsFullScan',
  'dropsCachedLookup',
  'scanned',
  'probes',
  'invalidated',
  'promoted',
  'resumeAt',
  'promotedAt',
  'stepMs',
  'engine',
  'seedMethodMs',
  'walBytes',
  'stall',
  'mode',
  'modelProfile',
  'modeledS',
  'modeledPolledS',
  'modeledReplayS',
  'modeledEndOfRecoveryS',
  'modeledOpenForWritesS',
  'modeledDropS',
  'warmup',
  'loadAvg1',
  'cpuPressure',
];

const strategyName = (c: CellSummary) =>
  c.pgVersion !== undefined
    ? `walsim, PostgreSQL ${c.pgVersion} rules (${c.strategy})`
    : c.strategy === 'full-scan'
      ? 'full-scan (master)'
      : c.strategy === 'cached-lookup'
        ? `cached-lookup${c.forceOptimized ? ', forced' : ''} (patched)`
        : c.strategy;

const defaultY = (c: CellSummary) => c.failoverMsMean / 1000;

/** Real PostgreSQL series: greens and browns, apart from the strategies' colours. */
const PG_COLORS = ['#2ca02c', '#8c564b', '#17becf', '#bcbd22', '#7f7f7f', '#e377c2'];

/**
 * The seed's published master and patched seconds (dotted: another machine, another method): the
 * points `which` keeps, at `x` (Test B: NBuffers; Test A: the relation's pages or NBuffers).
 */
function publishedSeries(
  points: readonly PublishedPoint[],
  which: (p: PublishedPoint) => boolean,
  x: (p: PublishedPoint) => number,
): ChartSeries[] {
  return (['master', 'patched'] as const)
    .map((build) => ({
      name: `seed 001 published ${build}`,
      color: build === 'master' ? STRATEGY_COLORS['full-scan'] : STRATEGY_COLORS['cached-lookup'],
      dashed: true,
      points: points
        .filter((p) => which(p) && p.build === build)
        .map((p) => ({ x: x(p), y: p.seconds })),
    }))
    .filter((s) => s.points.length > 0);
}

/** Ticks at each relation size of Test A cells, labelled NB/k. */
const pageTicks = (cells: CellSummary[]) => [
  ...new Map(
    cells.map((c) => [c.pagesPerTable, { value: c.pagesPerTable, label: c.relSize! }]),
  ).values(),
];

/**
 * Test A's time-vs-shared_buffers series: for the smallest and largest relation sizes, every
 * failover series and the seed's published points of that NB/k, named by it.
 */
function thresholdVsSbSeries(o: SweepOutput): { cells: CellSummary[]; series: ChartSeries[] } {
  const sizes = [...new Set(o.cells.map((c) => c.relDivisor!))].sort((a, b) => b - a);
  const pick = [...new Set([sizes[0]!, sizes.at(-1)!])];
  const cells = o.cells.filter((c) => pick.includes(c.relDivisor!));
  const series: ChartSeries[] = [];
  // Two relation sizes × several series: the size keeps the default palette, not the strategy colour.
  for (const k of pick) {
    const here = failoverSeries(
      cells.filter((c) => c.relDivisor === k),
      (c) => c.nBuffers,
    );
    const pub = publishedSeries(
      o.published ?? [],
      (p) => p.relDivisor === k,
      (p) => p.nBuffers,
    );
    for (const s of [...here, ...pub])
      series.push({ name: `NB/${k} ${s.name}`, points: s.points, dashed: s.dashed });
  }
  return { cells, series };
}

function seriesBy(
  cells: CellSummary[],
  x: (c: CellSummary) => number,
  y: (c: CellSummary) => number = defaultY,
): ChartSeries[] {
  const pg = cells.filter((c) => c.engine === 'postgres');
  cells = cells.filter((c) => c.engine === 'walsim');
  const names = [...new Set(cells.map(strategyName))];
  // One series per PostgreSQL major (13 is the seed's master, 14+ its patched build).
  const pgSeries: ChartSeries[] = [...new Set(pg.map((c) => c.pgVersion))].map((v, i) => ({
    name: `${pgColumnName(v)}, median`,
    color: PG_COLORS[i % PG_COLORS.length],
    points: pg
      .filter((c) => c.pgVersion === v)
      .map((c) => ({ x: x(c), y: y === defaultY ? c.failoverMsMedian / 1000 : y(c) }))
      .filter((p) => Number.isFinite(p.y)),
  }));
  const modeled = cells.filter(
    (c) => c.modeledMsMean !== undefined && Number.isFinite(c.modeledMsMean),
  );
  const modelSeries: ChartSeries[] = [...new Set(modeled.map(strategyName))].map((name) => ({
    name: `${name}, modeled PostgreSQL (${modeled[0]!.modelProfile})`,
    dashed: true,
    color: STRATEGY_COLORS[modeled.find((c) => strategyName(c) === name)!.strategy],
    points: modeled
      .filter((c) => strategyName(c) === name)
      .map((c) => ({ x: x(c), y: c.modeledMsMean! / 1000 })),
  }));
  return [
    ...pgSeries,
    ...names.map((name) => ({
      name,
      // The same colour for a strategy in every chart (measured solid, modeled dashed).
      color: STRATEGY_COLORS[cells.find((c) => strategyName(c) === name)!.strategy],
      points: cells
        .filter((c) => strategyName(c) === name)
        .map((c) => ({ x: x(c), y: y(c) }))
        .filter((p) => Number.isFinite(p.y)),
    })),
    ...(y === defaultY ? modelSeries : []),
  ].filter((s) => s.points.length > 0);
}

/**
 * Failover seconds per strategy: measured (solid), modeled PostgreSQL seconds (dashed, same
 * colour) and real PostgreSQL where the sweep ran it; model-only sweeps have the modeled series only.
 */
function failoverSeries(cells: CellSummary[], x: (c: CellSummary) => number): ChartSeries[] {
  return seriesBy(cells, x);
}

/** x-axis ticks at each cell's NBuffers, labelled with its shared_buffers. */
const sbTicks = (cells: CellSummary[]) => [
  ...new Map(
    cells.map((c) => [c.nBuffers, { value: c.nBuffers, label: c.sharedBuffers }]),
  ).values(),
];

/** A sweep kind's tables (Markdown), charts (by file name) and extra results.json fields. */
interface KindResults {
  markdown: string;
  charts: Record<string, string>;
  extra: Record<string, unknown>;
}

/** Test B: the tables, and per variant failover seconds against shared_buffers. */
function multiResults(o: SweepOutput): KindResults {
  const charts: Record<string, string> = {};
  for (const variant of [...new Set(o.cells.map((c) => c.variant))]) {
    const cells = o.cells.filter((c) => c.variant === variant);
    charts[`chart-${variant}.svg`] = lineChart({
      title: `${variant.toUpperCase()} of ${cells[0]!.tables} one-block relations: failover time`,
      xLabel: 'shared_buffers',
      yLabel: 'failover seconds',
      xLog: true,
      yLog: true,
      xTicks: sbTicks(cells),
      series: [
        ...failoverSeries(cells, (c) => c.nBuffers),
        ...publishedSeries(
          o.published ?? [],
          (p) => p.variant === variant && p.relDivisor === undefined,
          (p) => p.nBuffers,
        ),
      ],
    });
  }
  return { markdown: multiTables(o.cells).markdown, charts, extra: {} };
}

/** Test A per shared_buffers: failover seconds, and the drop alone, against the relation size. */
function thresholdSizeCharts(o: SweepOutput, charts: Record<string, string>): void {
  for (const sb of [...new Set(o.cells.map((c) => c.sharedBuffers))]) {
    const cells = o.cells.filter((c) => c.sharedBuffers === sb);
    charts[`chart-threshold-${sb}.svg`] = lineChart({
      title: `VACUUM of one relation, shared_buffers=${sb}: failover time`,
      xLabel: 'relation size (pages; NB/k)',
      yLabel: 'failover seconds',
      xLog: true,
      yLog: true,
      xTicks: pageTicks(cells),
      series: [
        ...failoverSeries(cells, (c) => c.pagesPerTable),
        ...publishedSeries(
          o.published ?? [],
          (p) => p.sharedBuffers === sb,
          (p) => p.pages!,
        ),
      ],
    });
    // The drop alone: what the two paths differ in, without the VACUUM's replay around it.
    if (!isModelOnly(cells))
      charts[`chart-threshold-drop-${sb}.svg`] = lineChart({
        title: `VACUUM of one relation, shared_buffers=${sb}: time inside the buffer drop`,
        xLabel: 'relation size (pages; NB/k)',
        yLabel: 'seconds inside the drop',
        xLog: true,
        yLog: true,
        xTicks: pageTicks(cells),
        series: seriesBy(
          cells,
          (c) => c.pagesPerTable,
          (c) => c.dropMsMean / 1000,
        ),
      });
  }
}

/** Test A: the tables and crossovers; the charts per shared_buffers, then against it. */
function thresholdResults(o: SweepOutput): KindResults {
  const extra = {
    ...(isModelOnly(o.cells) ? {} : { crossover: computeCrossover(o.cells) }),
    modeledCrossover: computeCrossover(o.cells, 'modeled'),
  };
  const charts: Record<string, string> = {};
  thresholdSizeCharts(o, charts);
  // Time vs shared_buffers too, for the smallest and largest relation sizes.
  const { cells, series } = thresholdVsSbSeries(o);
  charts['chart-threshold-vs-shared-buffers.svg'] = lineChart({
    title: 'VACUUM of one relation of NBuffers/k pages: failover time',
    xLabel: 'shared_buffers',
    yLabel: 'failover seconds',
    xLog: true,
    yLog: true,
    xTicks: sbTicks(cells),
    series,
  });
  return { markdown: thresholdTables(o.cells).markdown, charts, extra };
}

/**
 * A setting as tables.md prints it: lists joined by commas; a PostgreSQL installation
 * (`pgServers`) by its version line and build; any other object as JSON, never "[object Object]".
 */
function settingText(v: unknown): string {
  if (Array.isArray(v)) return v.map(settingText).join(',');
  if (typeof v !== 'object' || v === null) return String(v);
  const o = v as Record<string, unknown>;
  if (typeof o.version === 'string' && typeof o.build === 'string')
    return `${o.version} (${o.build})`;
  return JSON.stringify(v);
}

/** tables.md: the title, when and with which settings the sweep ran, the tables. */
function tablesFile(o: SweepOutput, tablesMd: string): string {
  const title =
    o.kind === 'multi'
      ? 'Seed 001 Test B (test.sh): failover after many one-block drops'
      : 'Seed 001 Test A (rel.sh): threshold of the optimized drop path';
  return [
    `## ${title}`,
    '',
    `walsim, ${o.startedAt} → ${o.finishedAt} (${o.wallSeconds.toFixed(0)} s). Settings: ${Object.entries(
      o.settings,
    )
      .map(([k, v]) => `${k}=${settingText(v)}`)
      .join(', ')}.`,
    '',
    tablesMd,
    '',
  ].join('\n');
}

/**
 * Every file of the results directory, by name, in the order the README lists them: the charts,
 * the seed's tables, the JSON, the CSV.
 */
export function renderResults(o: SweepOutput): Record<string, string> {
  const side = sideBySideTables(o.cells, o.published);
  const r = o.kind === 'multi' ? multiResults(o) : thresholdResults(o);
  const tablesMd = [r.markdown, side].filter((x) => x.length > 0).join('\n\n');
  const json = {
    kind: o.kind,
    startedAt: o.startedAt,
    finishedAt: o.finishedAt,
    wallSeconds: o.wallSeconds,
    settings: o.settings,
    cells: o.cells,
    ...r.extra,
    runs: o.records,
  };
  return {
    ...r.charts,
    'tables.md': tablesFile(o, tablesMd),
    'results.json': JSON.stringify(json, null, 2) + '\n',
    'results.csv': toCsv(o.records as unknown as Array<Record<string, unknown>>, CSV_COLUMNS),
  };
}

/** `2026-01-06T10-04-05Z`: an ISO time usable as a directory name. */
export function resultsDirName(d: Date): string {
  return d
    .toISOString()
    .replace(/\.\d+Z$/, 'Z')
    .replaceAll(':', '-');
}

/** Write the files into a new `<base>/<timestamp>[-n]/`; return its path and the file names. */
export function writeResults(base: string, o: SweepOutput): { dir: string; files: string[] } {
  return writeResultFiles(base, o.startedAt, renderResults(o));
}

/** Write rendered files (any sweep's) into a new `<base>/<timestamp of startedAt>[-n]/`. */
export function writeResultFiles(
  base: string,
  startedAt: string,
  files: Record<string, string>,
): { dir: string; files: string[] } {
  const name = resultsDirName(new Date(startedAt));
  let dir = path.resolve(base, name);
  for (let i = 2; fs.existsSync(dir); i++) dir = path.resolve(base, `${name}-${i}`);
  fs.mkdirSync(dir, { recursive: true });
  for (const [f, content] of Object.entries(files)) fs.writeFileSync(path.join(dir, f), content);
  return { dir, files: Object.keys(files).sort() };
}
