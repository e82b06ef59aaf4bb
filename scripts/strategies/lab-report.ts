/**
 * The strategy lab's files (`npm run sweep -- strategies`), rendered like the other sweeps'
 * (pure; write-results.ts writes them): tables.md (the summary table "The seed debate, replayed"
 * and one table per measure), results.json (settings, every run, every cell), results.csv
 * (failover runs), readonly.csv, memory.csv, and one SVG chart per measure.
 *
 * Entry points: `renderStrategies`, `summaryTable`, `StrategiesOutput`.
 */
import type { DropStrategy } from '../../storage/drop.ts';
import { formatSharedBuffers } from '../../storage/shared-buffers.ts';
import {
  PG_BUFFER_TABLE_BYTES_PER_BUFFER,
  type ReadOnlyCell,
  type ReadOnlyRun,
  type StrategyMemory,
} from './readonly-workload.ts';
import {
  WORKLOAD_TITLES,
  type StrategyFailoverCell,
  type StrategyFailoverRun,
  type StrategyWorkload,
} from './lab.ts';
import { toCsv } from '../report/csv.ts';
import { lineChart, STRATEGY_COLORS, type ChartSeries } from '../report/svg-chart.ts';
import { formatRegression, markdownTable } from '../report/tables.ts';

/** One colour per strategy in every chart (full scan red and lookup blue as in the other sweeps). */
export interface StrategiesOutput {
  startedAt: string;
  finishedAt: string;
  wallSeconds: number;
  settings: Record<string, unknown>;
  profile: string;
  failover: { runs: StrategyFailoverRun[]; cells: StrategyFailoverCell[] };
  readOnly: { runs: ReadOnlyRun[]; cells: ReadOnlyCell[]; sharedBuffers: string };
  /** Per strategy and shared_buffers (the sweep's sizes plus 100GB). */
  memory: StrategyMemory[];
}

const unique = <T>(xs: T[]): T[] => [...new Set(xs)];
const s3 = (v: number | null | undefined) =>
  v === null || v === undefined || !Number.isFinite(v) ? 'n/a' : v.toFixed(3);
const pct = (r: number | null) => formatRegression(r, 1);
const mib = (bytes: number) =>
  bytes < 2 ** 20
    ? `${(bytes / 1024).toFixed(0)} KiB`
    : `${(bytes / 2 ** 20).toLocaleString('en-US', { maximumFractionDigits: 0 })} MiB`;
const perSec = (v: number) =>
  v >= 1e6 ? `${(v / 1e6).toFixed(2)} M/s` : `${(v / 1e3).toFixed(0)} k/s`;

function strategiesOf(o: StrategiesOutput): DropStrategy[] {
  return unique([
    ...o.failover.cells.map((c) => c.strategy),
    ...o.readOnly.cells.map((c) => c.strategy),
    ...o.memory.map((m) => m.strategy),
  ]);
}

/** The summary: one row per strategy, at the largest shared_buffers of the sweep. */
export function summaryTable(o: StrategiesOutput): string {
  const sbs = unique(o.failover.cells.map((c) => c.sharedBuffers));
  const sb = sbs.at(-1) ?? '';
  const ratios = unique(o.readOnly.cells.map((c) => c.targetHitRatio));
  const cell = (strategy: DropStrategy, w: StrategyWorkload) => {
    const c = o.failover.cells.find(
      (x) => x.sharedBuffers === sb && x.workload === w && x.strategy === strategy,
    );
    return c ? `${s3(c.modeledS)} (${s3(c.replayMsMedian / 1000)})` : 'n/a';
  };
  const workloads = unique(o.failover.cells.map((c) => c.workload)).filter(
    (w) => w !== 'vacuum-toast',
  );
  const headers = [
    'strategy',
    ...workloads.map(
      (w) => `${w.toUpperCase().replace('-TOAST', ' TOAST')} @${sb}: modeled (measured) s`,
    ),
    ...ratios.map((h) => `read-only tax, hit ${h}`),
    'B/buffer added',
    'added @100GB',
  ];
  const rows = strategiesOf(o).map((strategy) => {
    const mem100 = o.memory.find((m) => m.strategy === strategy && m.nBuffers === 13_107_200);
    return [
      strategy,
      ...workloads.map((w) => cell(strategy, w)),
      ...ratios.map((h) => {
        const r = o.readOnly.cells.find((c) => c.strategy === strategy && c.targetHitRatio === h);
        return r === undefined
          ? 'n/a'
          : strategy === 'cached-lookup'
            ? 'baseline'
            : pct(r.regressionVsCachedLookup);
      }),
      mem100 ? mem100.addedBytesPerBuffer.toFixed(1) : 'n/a',
      mem100 ? (mem100.addedBytes === 0 ? '0' : mib(mem100.addedBytes)) : 'n/a',
    ];
  });
  rows.push([
    'PostgreSQL buffer table (reference)',
    ...workloads.map(() => ''),
    ...ratios.map(() => ''),
    `~${PG_BUFFER_TABLE_BYTES_PER_BUFFER}`,
    mib(PG_BUFFER_TABLE_BYTES_PER_BUFFER * 13_107_200),
  ]);
  return markdownTable(headers, rows);
}

function failoverGrid(
  o: StrategiesOutput,
  w: StrategyWorkload,
  value: (c: StrategyFailoverCell) => string,
): string {
  const here = o.failover.cells.filter((c) => c.workload === w);
  const sbs = unique(here.map((c) => c.sharedBuffers));
  return markdownTable(
    ['strategy', ...sbs],
    unique(here.map((c) => c.strategy)).map((s) => [
      s,
      ...sbs.map((sb) => {
        const c = here.find((x) => x.strategy === s && x.sharedBuffers === sb);
        return c ? value(c) : 'n/a';
      }),
    ]),
  );
}

function countersTable(o: StrategiesOutput, sb: string): string {
  const here = o.failover.cells.filter((c) => c.sharedBuffers === sb);
  return markdownTable(
    [
      'workload',
      'strategy',
      'drops (path: calls)',
      'descriptors scanned',
      'hash build scanned',
      'probes',
      'list steps',
      'invalidated',
      'records',
    ],
    here.map((c) => [
      c.workload,
      c.strategy,
      Object.entries(c.drops)
        .filter(([, n]) => n > 0)
        .map(([p, n]) => `${p}: ${n}`)
        .join(', ') || '0',
      c.scanned.toLocaleString('en-US'),
      c.hashBuildScanned.toLocaleString('en-US'),
      c.probes.toLocaleString('en-US'),
      c.listSteps.toLocaleString('en-US'),
      c.invalidated.toLocaleString('en-US'),
      c.records.toLocaleString('en-US'),
    ]),
    ['l', 'l', 'l', 'r', 'r', 'r', 'r', 'r', 'r'],
  );
}

function readOnlyTable(o: StrategiesOutput): string {
  const ratios = unique(o.readOnly.cells.map((c) => c.targetHitRatio));
  const headers = [
    'strategy',
    ...ratios.flatMap((h) => [`hit ${h}: allocations/s`, `hit ${h}: vs cached-lookup`]),
  ];
  const rows = unique(o.readOnly.cells.map((c) => c.strategy)).map((s) => [
    s,
    ...ratios.flatMap((h) => {
      const c = o.readOnly.cells.find((x) => x.strategy === s && x.targetHitRatio === h);
      if (!c) return ['n/a', 'n/a'];
      return [
        perSec(c.allocationsPerSec),
        s === 'cached-lookup' ? 'baseline' : pct(c.regressionVsCachedLookup),
      ];
    }),
  ]);
  const measured = ratios.map((h) => {
    const c = o.readOnly.cells.find((x) => x.targetHitRatio === h)!;
    return `target ${h}: measured ${c.hitRatio.toFixed(3)}, data set ${c.dataSetBlocks.toLocaleString('en-US')} blocks`;
  });
  const rel = o.readOnly.cells.filter((c) => c.strategy === 'rel-list');
  const maint =
    rel.length > 0
      ? ` rel-list's maintenance per allocation: ${rel.map((c) => `${c.listMaintenanceOpsPerAllocation.toFixed(2)} link/unlink and ${c.listTableProbesPerAllocation.toFixed(2)} relation-table probes at hit ${c.targetHitRatio}`).join('; ')}.`
      : '';
  return [
    table(headers, rows),
    '',
    `Hit ratios: ${measured.join('; ')}.${maint}${noiseFloorText(o)}`,
  ].join('\n');
}

const table = markdownTable;

/**
 * Outside recovery, full-scan, recovery-hash and cache-at-create run exactly cached-lookup's
 * allocation path (no tag observer): their "regression" is the measurement's noise floor.
 */
export function readOnlyNoiseFloor(o: Pick<StrategiesOutput, 'readOnly'>): number | null {
  const same = o.readOnly.cells.filter(
    (c) =>
      c.strategy !== 'cached-lookup' &&
      c.strategy !== 'rel-list' &&
      c.regressionVsCachedLookup !== null,
  );
  return same.length === 0
    ? null
    : Math.max(...same.map((c) => Math.abs(c.regressionVsCachedLookup!)));
}

function noiseFloorText(o: StrategiesOutput): string {
  const f = readOnlyNoiseFloor(o);
  return f === null
    ? ''
    : ` Noise floor: full-scan, recovery-hash (outside recovery) and cache-at-create run cached-lookup's own allocation path, so their figures measure the noise: up to ±${(f * 100).toFixed(1)}% here.`;
}

function memoryTable(o: StrategiesOutput): string {
  const sizes = unique(o.memory.map((m) => m.nBuffers)).sort((a, b) => a - b);
  const rows = unique(o.memory.map((m) => m.strategy)).map((s) => {
    const ms = sizes.map((n) => o.memory.find((m) => m.strategy === s && m.nBuffers === n)!);
    return [
      s,
      ...ms.map(
        (m) =>
          `${m.addedBytesPerBuffer.toFixed(1)} B (${m.addedBytes === 0 ? '0' : mib(m.addedBytes)})`,
      ),
      ms[0]!.where,
    ];
  });
  rows.push([
    'PostgreSQL buffer table (reference, seed 000)',
    ...sizes.map(
      (n) =>
        `~${PG_BUFFER_TABLE_BYTES_PER_BUFFER} B (${mib(PG_BUFFER_TABLE_BYTES_PER_BUFFER * n)})`,
    ),
    'shared memory',
  ]);
  const pool = o.memory[0];
  return [
    table(['strategy', ...sizes.map((n) => formatSharedBuffers(n)), 'where'], rows),
    '',
    pool
      ? `walsim's pool itself: ${pool.poolBytesPerBuffer.toFixed(1)} B/buffer at ${formatSharedBuffers(pool.nBuffers)} (descriptors + mapping table), the same for every strategy.`
      : '',
  ].join('\n');
}

function strategySeries<T>(
  items: T[],
  strategy: (t: T) => DropStrategy,
  point: (t: T) => { x: number; y: number },
): ChartSeries[] {
  return unique(items.map(strategy)).map((s) => ({
    name: s,
    color: STRATEGY_COLORS[s],
    points: items.filter((t) => strategy(t) === s).map(point),
  }));
}

/** Every file of the results directory, by name. */
export function renderStrategies(o: StrategiesOutput): Record<string, string> {
  return {
    ...strategiesCharts(o),
    'tables.md': strategiesMarkdown(o),
    ...strategiesData(o),
  };
}

/** Per workload, failover seconds against shared_buffers: modeled, and measured in-process. */
function failoverCharts(o: StrategiesOutput): Record<string, string> {
  const files: Record<string, string> = {};
  const cells = o.failover.cells;
  const sbTicks = [
    ...new Map(
      cells.map((c) => [c.nBuffers, { value: c.nBuffers, label: c.sharedBuffers }]),
    ).values(),
  ];
  const tables = cells[0]?.tables ?? 0;
  for (const w of unique(cells.map((c) => c.workload))) {
    const here = cells.filter((c) => c.workload === w);
    files[`chart-failover-modeled-${w}.svg`] = lineChart({
      title: `${WORKLOAD_TITLES[w]}, ${tables} tables: modeled failover (PostgreSQL s, profile ${o.profile})`,
      xLabel: 'shared_buffers',
      yLabel: 'modeled failover seconds',
      xLog: true,
      yLog: true,
      xTicks: sbTicks,
      series: strategySeries(
        here,
        (c) => c.strategy,
        (c) => ({ x: c.nBuffers, y: c.modeledS }),
      ),
    });
    files[`chart-failover-measured-${w}.svg`] = lineChart({
      title: `${WORKLOAD_TITLES[w]}, ${tables} tables: measured replay (walsim s, in-process)`,
      xLabel: 'shared_buffers',
      yLabel: 'measured replay seconds',
      xLog: true,
      yLog: true,
      xTicks: sbTicks,
      series: strategySeries(
        here,
        (c) => c.strategy,
        (c) => ({ x: c.nBuffers, y: c.replayMsMedian / 1000 }),
      ),
    });
  }
  return files;
}

/** The read-only workload's time against cached-lookup's, by target hit ratio. */
function readOnlyChart(o: StrategiesOutput): string {
  const ro = o.readOnly.cells.filter((c) => c.strategy !== 'cached-lookup');
  return lineChart({
    title: `Read-only workload (pgbench -S-like), shared_buffers=${o.readOnly.sharedBuffers}: time vs cached-lookup`,
    xLabel: 'target hit ratio',
    yLabel: '% regression (median paired ratio − 1)',
    series: strategySeries(
      ro,
      (c) => c.strategy,
      (c) => ({ x: c.targetHitRatio, y: (c.regressionVsCachedLookup ?? NaN) * 100 }),
    ),
  });
}

/** Bytes each strategy adds per buffer, beside PostgreSQL's buffer table. */
function memoryChart(o: StrategiesOutput): string {
  const memSeries = strategySeries(
    o.memory,
    (m) => m.strategy,
    (m) => ({ x: m.nBuffers, y: m.addedBytesPerBuffer }),
  );
  memSeries.push({
    name: 'PostgreSQL buffer table (~56 B)',
    color: '#7f7f7f',
    points: unique(o.memory.map((m) => m.nBuffers)).map((n) => ({
      x: n,
      y: PG_BUFFER_TABLE_BYTES_PER_BUFFER,
    })),
  });
  return lineChart({
    title: 'Memory each strategy adds per buffer',
    xLabel: 'shared_buffers',
    yLabel: 'bytes per buffer',
    xLog: true,
    xTicks: [
      ...new Map(
        o.memory.map((m) => [
          m.nBuffers,
          { value: m.nBuffers, label: formatSharedBuffers(m.nBuffers) },
        ]),
      ).values(),
    ],
    series: memSeries,
  });
}

/** The SVG charts: failover per workload (modeled and measured), read-only tax, memory. */
function strategiesCharts(o: StrategiesOutput): Record<string, string> {
  return {
    ...failoverCharts(o),
    'chart-readonly-regression.svg': readOnlyChart(o),
    'chart-memory.svg': memoryChart(o),
  };
}

/** tables.md: the summary, the per-workload grids, drop counters, read-only tax and memory. */
function strategiesMarkdown(o: StrategiesOutput): string {
  const cells = o.failover.cells;
  const workloads = unique(cells.map((c) => c.workload));
  const tables = cells[0]?.tables ?? 0;
  const largest = unique(cells.map((c) => c.sharedBuffers)).at(-1) ?? '';
  const md: string[] = [
    '## The seed debate, replayed (walsim strategy lab)',
    '',
    `walsim, ${o.startedAt} → ${o.finishedAt} (${o.wallSeconds.toFixed(0)} s). Settings: ${Object.entries(
      o.settings,
    )
      .map(([k, v]) => `${k}=${Array.isArray(v) ? v.join(',') : String(v)}`)
      .join(', ')}.`,
    '',
    `Failover of seed 001's Test B (${tables} one-block tables) at shared_buffers=${largest}: modeled PostgreSQL seconds (profile ${o.profile}), with walsim's measured in-process replay in parentheses; read-only tax = CPU time of the pgbench -S-like workload against cached-lookup's (median of paired rounds); memory added per buffer and in total at 100GB.`,
    '',
    summaryTable(o),
    '',
  ];
  for (const w of workloads) {
    md.push(
      `### ${WORKLOAD_TITLES[w]}: failover, modeled PostgreSQL seconds (profile ${o.profile})`,
      '',
      failoverGrid(o, w, (c) => s3(c.modeledS)),
      '',
    );
    md.push(
      `### ${WORKLOAD_TITLES[w]}: replay, measured walsim seconds (in-process, median of ${cells[0]?.runs ?? 0} run(s))`,
      '',
      failoverGrid(o, w, (c) => s3(c.replayMsMedian / 1000)),
      '',
    );
  }
  md.push(`### Drop counters at shared_buffers=${largest}`, '', countersTable(o, largest), '');
  md.push(
    `### Read-only workload (pgbench -S-like), shared_buffers=${o.readOnly.sharedBuffers}`,
    '',
    readOnlyTable(o),
    '',
  );
  md.push('### Memory added per buffer (and in total)', '', memoryTable(o), '');
  return md.join('\n');
}

/** results.json and the CSV files of runs, read-only rounds and memory. */
function strategiesData(o: StrategiesOutput): Record<string, string> {
  const files: Record<string, string> = {};
  files['results.json'] =
    JSON.stringify(
      {
        kind: 'strategies',
        startedAt: o.startedAt,
        finishedAt: o.finishedAt,
        wallSeconds: o.wallSeconds,
        settings: o.settings,
        profile: o.profile,
        failover: { cells: o.failover.cells, runs: o.failover.runs },
        readOnly: o.readOnly,
        memory: o.memory,
      },
      null,
      2,
    ) + '\n';
  const flat = o.failover.runs.map((r) => ({
    ...r,
    drops: Object.entries(r.drops)
      .map(([p, n]) => `${p}:${n}`)
      .join(' '),
  }));
  files['results.csv'] = toCsv(flat, [
    'sharedBuffers',
    'nBuffers',
    'workload',
    'strategy',
    'tables',
    'run',
    'replayMs',
    'dropMs',
    'modeledS',
    'modeledPolledS',
    'modeledReplayS',
    'records',
    'drops',
    'scanned',
    'hashBuildScanned',
    'probes',
    'listSteps',
    'invalidated',
  ]);
  files['readonly.csv'] = toCsv(o.readOnly.runs as unknown as Array<Record<string, unknown>>, [
    'strategy',
    'targetHitRatio',
    'round',
    'elapsedMs',
    'reads',
    'hits',
    'allocations',
    'listMaintenanceOps',
    'listTableProbes',
  ]);
  files['memory.csv'] = toCsv(o.memory as unknown as Array<Record<string, unknown>>, [
    'strategy',
    'nBuffers',
    'poolBytesPerBuffer',
    'addedBytesPerBuffer',
    'addedBytes',
    'where',
  ]);
  return files;
}
