/**
 * `simulate --steps N` does work linear in N (4000 steps once took 6 s, 16000 83 s).
 * The cause was the base backup of every failover: it copied all of pg_wal, and pg_wal kept one
 * copy of the switch segment per timeline (every ancestor timeline's segment with the same number
 * stays until a checkpoint passes it), so each failover copied more than the last. Method: one
 * seed (its two-node scenario, the one first measured) at 500 and at 1,000 steps; the bytes
 * written to every machine's disk (base-backup copies included) per step must not grow with the
 * run's length. Counters, not time.
 */
import { describe, expect, it } from 'vitest';
import { runSimulation } from '../../sim/simulation.ts';
import { generateScenario, TWO_NODES } from '../../sim/scenario.ts';

describe('simulate --steps', () => {
  it('writes no more disk bytes per step over 1,000 steps than 1.8 times those over 500', async () => {
    const perStep = async (steps: number) => {
      const r = await runSimulation(generateScenario(1, steps, TWO_NODES, 1));
      expect(r.ok, r.violations.join('\n')).toBe(true);
      expect(r.failovers).toBeGreaterThan(steps / 50); // the failovers whose copies grew
      return r.diskBytesWritten / steps;
    };
    const short = await perStep(500);
    const long = await perStep(1000);
    // 2.6 before (every failover copied one more timeline's switch segment); 1.4 after: what is
    // left is the current segment filling up (a copy takes its bytes so far, at most a segment).
    expect(long / short).toBeLessThan(1.8);
  }, 120_000);
});
