/**
 * `npm run predict-bench` end to end on real PostgreSQL 15 (skipped, naming the reason, without
 * the server binaries): one tiny cell (TRUNCATE of 5 one-block tables at 128MB, one run) and the
 * calibration's two DML backlogs over one table (their counts: one record a row, the pages
 * appended) — a fresh pair each, the backlog made with replay paused, predict's counts from the standby's unreplayed WAL,
 * the verified promotion, results.json and accuracy.md — then `--reprice` of the stored counts
 * gives the same predictions without PostgreSQL. No timing is asserted: only that each figure was
 * produced and that the arithmetic joins them.
 */
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { expectOneLineError, runScript } from '../helpers/cli.ts';
import { pgUnavailableReason } from '../helpers/postgres.ts';

const reason = pgUnavailableReason();
const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'walsim-predict-bench-'));
fs.chmodSync(tmp, 0o755);
afterAll(() => fs.rmSync(tmp, { recursive: true, force: true }));

type Json = any; // eslint-disable-line @typescript-eslint/no-explicit-any

describe.skipIf(reason !== null)(
  `npm run predict-bench on real PostgreSQL 15${reason ? ` (skipped: ${reason})` : ''}`,
  () => {
    const out = path.join(tmp, 'out');
    const profiles = ['--profile', 'seed-001', '--uncontended-profile', 'seed-001'];
    let first: Json = null;

    it('runs one cell: backlog, prediction from the unreplayed WAL, verified promotion', async () => {
      const r = await runScript(
        'predict-bench.ts',
        [
          '--cells',
          'truncate:5@128MB,insert:1@128MB,delete:1@128MB',
          '--runs',
          '1',
          ...profiles,
          '--out',
          out,
          '--work-dir',
          path.join(tmp, 'work'),
          '--no-wait', // timing does not matter here: no 60 s wait after an earlier removal
          '--json',
        ],
        240_000,
      );
      expect(r.json?.failures, r.stderr).toEqual([]);
      expect(r.code).toBe(0);
      first = r.json;
      const [s] = r.json.summaries as Json[];
      expect(s.cell.id).toBe('truncate:5@128MB');
      expect(s.runs).toBe(1);
      expect(s.seen).toBe(false); // seed-001 was not written by npm run calibrate
      // Five TRUNCATEs of cached one-block tables: five commits that drop the old relfilenode by lookup.
      expect(s.dropsLookup).toBe(5);
      expect(s.dropsFullScan).toBe(0);
      expect(s.records).toBeGreaterThanOrEqual(5 * 7);
      expect(s.wall.predictedS).toBeGreaterThan(0);
      expect(s.wall.medianS).toBeGreaterThan(0);
      expect(s.wall.errorPct).toBeCloseTo(
        ((s.wall.predictedS - s.wall.medianS) / s.wall.medianS) * 100,
        9,
      );
      const stored = JSON.parse(fs.readFileSync(path.join(out, 'results.json'), 'utf8'));
      expect(stored.runs).toHaveLength(3);
      const run = stored.runs.find((x: Json) => x.cell === 'truncate:5@128MB');
      expect(run.counts.replay.controlFileUpdates).toBe(5);
      // The descriptor array of a 128MB pool: 16,384 × 64 bytes = 256 pages of 4 KiB (257 when it
      // does not start on a page boundary); the startup process has mapped some of them at most.
      if (run.descriptorPages !== null) {
        expect(run.descriptorPages.pages).toBeGreaterThanOrEqual(256);
        expect(run.descriptorPages.pages).toBeLessThanOrEqual(257);
        expect(run.descriptorPages.unmapped).toBeGreaterThanOrEqual(0);
        expect(run.descriptorPages.unmapped).toBeLessThanOrEqual(run.descriptorPages.pages);
      }
      // The machine probe ran before the prediction; seed-001 stores none, so nothing was scaled.
      expect(run.probe === null || run.probe.fsyncS > 0).toBe(true);
      expect(run.unprobed.wallS).toBe(run.predictedWallS);
      expect(run.measuredWallS).toBeCloseTo(s.wall.medianS, 9);
      if (run.runQueueS !== null)
        expect(s.uncontended.medianS).toBeCloseTo(run.measuredWallS - run.runQueueS, 9);
      expect(fs.readFileSync(path.join(out, 'accuracy.md'), 'utf8')).toMatch(
        // A run whose promote request waited out the streaming retry loop (PostgreSQL's
        // wal_retrieve_retry_interval, 5 s) is shown as stalled: a timing the run cannot choose.
        /\| truncate:5@128MB +\| unseen +\| +1( \(1 stalled\))? \|/,
      );
      // The calibration's DML backlogs (experiment/dml.ts), as predict counts them from the WAL:
      // one HEAP_INSERT a row and 10 pages appended; one HEAP_DELETE a row of 2,486, none appended.
      const dml = (cell: string) => stored.runs.find((x: Json) => x.cell === cell).counts.replay;
      expect(dml('insert:1@128MB').pgRecords.HEAP_INSERT).toBe(2260);
      expect(dml('insert:1@128MB').smgr.extend[0]).toBe(10);
      expect(dml('delete:1@128MB').pgRecords.HEAP_DELETE).toBe(2486);
      expect(dml('delete:1@128MB').pgRecords.HEAP_INSERT ?? 0).toBe(0);
      expect(dml('delete:1@128MB').smgr.extend[0]).toBe(0);
      expect(fs.existsSync(path.join(tmp, 'work'))).toBe(false); // every pair removed
    }, 300_000);

    it('--reprice prices the stored counts again, without PostgreSQL, to the same seconds', async () => {
      expect(first).not.toBeNull();
      const r = await runScript('predict-bench.ts', [
        '--reprice',
        path.join(out, 'results.json'),
        ...profiles,
        '--out',
        path.join(tmp, 'repriced'),
        '--json',
      ]);
      expect(r.code, r.stderr).toBe(0);
      expect(r.json.summaries[0].wall.predictedS).toBe(first.summaries[0].wall.predictedS);
      expect(r.json.summaries[0].wall.medianS).toBe(first.summaries[0].wall.medianS);
    });
  },
);

describe('predict-bench refusals', () => {
  it('a malformed cell is one line naming it (exit 2)', async () => {
    const r = await runScript('predict-bench.ts', ['--cells', 'truncate:0@1GB']);
    expectOneLineError(
      r,
      /^error: invalid bench cell "truncate:0@1GB": truncate takes a table count/,
      2,
    );
    expect(r.stderr.trim().split('\n')).toHaveLength(1);
  });
});
