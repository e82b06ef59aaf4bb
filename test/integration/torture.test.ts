/**
 * The seeded torture runner in CI: a small fixed seed set (real processes, random workload, random
 * faults of every kind, a final primary crash and promotion) must pass every invariant with no
 * acknowledged commit lost. Method: run `npm run torture -- --seeds 3 --from 1 --json` as a child
 * process and read its summary line. A failing seed prints a command that re-runs it with the same
 * workload, faults and random choices; process timing is real, so the interleaving of WAL messages
 * can differ and a timing-dependent failure may not recur on the first re-run (RELIABILITY.md).
 */
import { describe, expect, it } from 'vitest';
import { expectOneLineError, runScript } from '../helpers/cli.ts';

describe('torture (fixed seeds)', () => {
  it('seeds 1-3: every invariant holds, every fault kind injected, nothing acknowledged is lost', async () => {
    const r = await runScript(
      'torture.ts',
      ['--seeds', '3', '--from', '1', '--ops', '30', '--json', '--quiet'],
      150_000,
    );
    expect(r.code, r.stdout + r.stderr).toBe(0);
    expect(r.json).toMatchObject({ seeds: 3, from: 1, lost: 0, failed: [] });
    expect(r.json.acked).toBeGreaterThan(100);
    for (const kind of [
      'cut_replication',
      'kill_standby',
      'wal_write_fail',
      'corrupt_wal',
      'crash_primary',
    ]) {
      expect(r.json.faultsByKind[kind], kind).toBeGreaterThan(0);
    }
    expect(r.stdout).toMatch(/^seed 1: ok \(/m);
  }, 180_000);

  it('refuses bad arguments with a one-line error', async () => {
    const r = await runScript('torture.ts', ['--seeds', '0']);
    expect(expectOneLineError(r, /--seeds/, 2)).toBe(
      'error: --seeds must be an integer >= 1, got "0"',
    );
  });
});
