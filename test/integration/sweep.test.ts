/**
 * Both sweeps end to end as real CLI processes at tiny sizes (16MB and 32MB, 6 tables, one run):
 * each cell starts a fresh cluster, runs the whole procedure and promotes.
 * Method: check the --json summary's counters (full scan: scanned = drops × NBuffers; lookup:
 * probes > 0, nothing scanned) and the files written (results.json/csv, tables.md, SVG charts).
 */
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { runScript } from '../helpers/cli.ts';

const out = fs.mkdtempSync(path.join(os.tmpdir(), 'walsim-sweep-test-'));
afterAll(() => fs.rmSync(out, { recursive: true, force: true }));

const NB = { '16MB': 2048, '32MB': 4096 } as Record<string, number>;

type Counts = Record<string, unknown>;

/**
 * Model-only counts are provably a real run's: the same sweep with --model-only (in-process, no
 * servers) must give every cell exactly the counts the real clusters' failover reports gave.
 */
async function expectModelOnlyCountsEqual(args: string[], realDir: string): Promise<void> {
  const real = JSON.parse(fs.readFileSync(path.join(realDir, 'results.json'), 'utf8')) as {
    runs: Array<Counts & { counts: Counts }>;
  };
  const r = await runScript('sweep.ts', [...args, '--model-only', '--out', out, '--json'], 240_000);
  expect(r.code, r.stderr).toBe(0);
  const mo = JSON.parse(fs.readFileSync(path.join(r.json.dir, 'results.json'), 'utf8')) as {
    runs: Array<Counts & { counts: Counts }>;
  };
  expect(mo.runs).toHaveLength(real.runs.length);
  const key = (x: Counts) => [x.sharedBuffers, x.variant, x.relSize, x.strategy].join(' ');
  for (const run of real.runs) {
    const twin = mo.runs.find((m) => key(m) === key(run))!;
    expect(twin.mode).toBe('model-only');
    expect(twin.counts, key(run)).toEqual(run.counts);
    expect(twin.modeledS, key(run)).toBe(run.modeledS);
  }
}

function checkFiles(dir: string, charts: string[]): void {
  const files = fs.readdirSync(dir).sort();
  expect(files).toEqual(['results.csv', 'results.json', 'tables.md', ...charts].sort());
  for (const c of charts) {
    const svg = fs.readFileSync(path.join(dir, c), 'utf8');
    expect(svg).toMatch(/^<svg xmlns="http:\/\/www\.w3\.org\/2000\/svg"/);
    expect(svg.match(/<polyline class="series"/g)!.length).toBeGreaterThanOrEqual(2);
  }
}

describe('npm run sweep', () => {
  it('multi: VACUUM and TRUNCATE × both strategies × 2 sizes, tables, CSV and charts', async () => {
    const r = await runScript(
      'sweep.ts',
      [
        'multi',
        '--shared-buffers',
        '16MB,32MB',
        '--tables',
        '6',
        '--runs',
        '1',
        '--out',
        out,
        '--json',
      ],
      240_000,
    );
    expect(r.code, r.stderr).toBe(0);
    expect(r.stderr).toContain('runs | '); // the progress bar
    const j = r.json;
    expect(j.kind).toBe('multi');
    expect(j.cells).toHaveLength(2 * 2 * 2);
    for (const c of j.cells) {
      expect(c.runs).toBe(1);
      expect(c.failoverMsMean).toBeGreaterThan(0);
      if (c.strategy === 'full-scan') {
        expect(c.dropsFullScan).toBe(6);
        expect(c.scanned).toBe(6 * NB[c.sharedBuffers]!);
        expect(c.probes).toBe(0);
      } else {
        expect(c.dropsCachedLookup).toBe(6);
        expect(c.scanned).toBe(0);
        expect(c.probes).toBeGreaterThan(0);
      }
      expect(c.invalidated).toBeGreaterThanOrEqual(6);
    }
    checkFiles(j.dir, ['chart-truncate.svg', 'chart-vacuum.svg']);
    const csv = fs.readFileSync(path.join(j.dir, 'results.csv'), 'utf8').trimEnd().split('\r\n');
    expect(csv).toHaveLength(1 + 8);
    expect(csv[0]).toMatch(/^kind,sharedBuffers,nBuffers,variant,/);
    const md = fs.readFileSync(path.join(j.dir, 'tables.md'), 'utf8');
    expect(md).toContain('### VACUUM recovery performance for 6 relations');
    expect(md).toMatch(
      /\| 32MB +\| +\d+\.\d{3} \| +\d+\.\d{3} \| +-?\d+\.\d{2}% \| +\d+\.\d{3} \| +\d+\.\d{3} \| +-?\d+\.\d{2}% \|/,
    );
    for (const c of j.cells) expect(c).toMatchObject({ modelProfile: 'seed-001' });
    await expectModelOnlyCountsEqual(
      ['multi', '--shared-buffers', '16MB,32MB', '--tables', '6'],
      j.dir,
    );
  }, 300_000); // a real sweep of 8 cells plus its --model-only twin

  it('--standbys 3: the measured standby is synchronous, two extra walsenders stream; the same exact drop counters', async () => {
    const r = await runScript(
      'sweep.ts',
      [
        'multi',
        '--shared-buffers',
        '16MB',
        '--tables',
        '6',
        '--variants',
        'truncate',
        '--strategies',
        'cached-lookup',
        '--runs',
        '1',
        '--standbys',
        '3',
        '--out',
        out,
        '--json',
      ],
      240_000,
    );
    expect(r.code, r.stderr).toBe(0);
    expect(r.json.settings.standbys).toBe(3);
    expect(r.json.cells).toHaveLength(1);
    expect(r.json.cells[0]).toMatchObject({ dropsCachedLookup: 6, scanned: 0 });
  });

  it('threshold: forced lookup vs full scan per NB/k, the crossover and per-size charts', async () => {
    const r = await runScript(
      'sweep.ts',
      [
        'threshold',
        '--shared-buffers',
        '16MB,32MB',
        '--rel-sizes',
        '64,8',
        '--runs',
        '1',
        '--out',
        out,
        '--json',
      ],
      240_000,
    );
    expect(r.code, r.stderr).toBe(0);
    const j = r.json;
    expect(j.cells).toHaveLength(2 * 2 * 2);
    for (const c of j.cells) {
      expect(c.pagesPerTable).toBe(NB[c.sharedBuffers]! / c.relDivisor);
      if (c.strategy === 'full-scan') {
        expect(c).toMatchObject({ dropsFullScan: 1, scanned: NB[c.sharedBuffers], probes: 0 });
      } else {
        // Forced: the lookup path even for NB/8, above the NB/32 threshold.
        expect(c).toMatchObject({ forceOptimized: true, dropsCachedLookup: 1, scanned: 0 });
        expect(c.probes).toBeGreaterThanOrEqual(c.pagesPerTable);
      }
      expect(c.invalidated).toBeGreaterThanOrEqual(c.pagesPerTable);
    }
    expect(j.crossover.map((x: { sharedBuffers: string }) => x.sharedBuffers)).toEqual([
      '16MB',
      '32MB',
    ]);
    checkFiles(j.dir, [
      'chart-threshold-16MB.svg',
      'chart-threshold-32MB.svg',
      'chart-threshold-drop-16MB.svg',
      'chart-threshold-drop-32MB.svg',
      'chart-threshold-vs-shared-buffers.svg',
    ]);
    const md = fs.readFileSync(path.join(j.dir, 'tables.md'), 'utf8');
    for (const h of [
      '### 1. % regression',
      '### 2. Optimized',
      '### 3. Full scan',
      '### Crossover',
      '#### Modeled crossover',
    ])
      expect(md).toContain(h);
    expect(j.modeledCrossover.map((x: { sharedBuffers: string }) => x.sharedBuffers)).toEqual([
      '16MB',
      '32MB',
    ]);
    await expectModelOnlyCountsEqual(
      ['threshold', '--shared-buffers', '16MB,32MB', '--rel-sizes', '64,8'],
      j.dir,
    );
  }, 300_000); // a real sweep of 8 cells plus its --model-only twin

  it('refuses unknown sweeps and options with the usage', async () => {
    const r = await runScript('sweep.ts', ['multi', '--variants', 'drop']);
    expect(r.code).toBe(2);
    expect(r.stderr).toContain(
      'unknown variant "drop" (accepted: vacuum, truncate, truncate-toast)',
    );
    expect((await runScript('sweep.ts', ['everything'])).stderr).toContain('usage: npm run sweep');
  });
});
