/**
 * `npm run sweep -- strategies` end to end as a user runs it: a tiny lab (16MB, 8 tables, a
 * 64-buffer read-only pool) writes every file and one JSON object; bad options are refused with
 * one line naming the option. Method: run scripts/sweep.ts as a child process.
 */
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { expectOneLineError, runScript } from '../helpers/cli.ts';

const out = fs.mkdtempSync(path.join(os.tmpdir(), 'walsim-strategies-'));
afterAll(() => fs.rmSync(out, { recursive: true, force: true }));

describe('npm run sweep -- strategies', () => {
  it('runs every strategy and writes the tables, CSVs, JSON and charts', async () => {
    const r = await runScript('sweep.ts', [
      'strategies',
      '--shared-buffers',
      '16MB',
      '--tables',
      '8',
      '--readonly-shared-buffers',
      '512kB',
      '--readonly-reads',
      '500',
      '--readonly-rounds',
      '2',
      '--out',
      out,
      '--json',
    ]);
    expect(r.code, r.stderr).toBe(0);
    expect(r.json).toMatchObject({ kind: 'strategies' });
    expect(r.json.failover).toHaveLength(4 * 5);
    const toast = r.json.failover.filter(
      (c: { workload: string }) => c.workload === 'truncate-toast',
    );
    expect(
      toast.find((c: { strategy: string }) => c.strategy === 'cached-lookup').drops['full-scan'],
    ).toBe(8);
    expect(
      toast.find((c: { strategy: string }) => c.strategy === 'cache-at-create').drops['full-scan'],
    ).toBe(0);
    expect(r.json.files).toEqual(
      expect.arrayContaining([
        'tables.md',
        'results.csv',
        'results.json',
        'readonly.csv',
        'memory.csv',
        'chart-memory.svg',
        'chart-readonly-regression.svg',
        'chart-failover-modeled-truncate-toast.svg',
      ]),
    );
    expect(fs.readFileSync(path.join(r.json.dir, 'tables.md'), 'utf8')).toContain(
      '## The seed debate, replayed',
    );
  });

  it('refuses bad options with one line naming the option', async () => {
    const bad = await runScript('sweep.ts', ['strategies', '--hit-ratios', '0.5,2']);
    expectOneLineError(bad, /--hit-ratios: "2" is not in \(0, 1\]/);
    const noBase = await runScript('sweep.ts', ['strategies', '--strategies', 'rel-list']);
    expectOneLineError(noBase, /must include cached-lookup/);
    const badStrategy = await runScript('sweep.ts', [
      'strategies',
      '--strategies',
      'cached-lookup,dlist',
    ]);
    expectOneLineError(badStrategy, /invalid drop strategy "dlist"/);
  });
});
