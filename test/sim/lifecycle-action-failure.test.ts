/**
 * In the simulator a lifecycle action that throws is a violation of the scenario, not an uncaught
 * exception: an Error is the node's logged internal error, an InvariantViolation its FATAL exit.
 * Method: plant a throwing openForWrites (promotion's effect) with the test-only switches and run
 * seeds until one promotes; the violation must name the action, and nothing may escape as uncaught.
 */
import { afterEach, describe, expect, it } from 'vitest';
import { injectedBugs } from '../../common/injected-bugs.ts';
import { generateScenario } from '../../sim/scenario.ts';
import { runSimulation, type SimResult } from '../../sim/simulation.ts';

/** The first seed from 1 whose run fails (every seed with a promotion must). */
async function firstFailure(): Promise<SimResult> {
  for (let seed = 1; seed <= 100; seed++) {
    const r = await runSimulation(generateScenario(seed, 40, undefined, 1));
    if (!r.ok) return r;
    expect(r.failovers, `seed ${seed} promoted without the planted failure showing`).toBe(0);
  }
  throw new Error('no seed in 1..100 promoted');
}

describe('a throwing lifecycle action in the simulator', () => {
  afterEach(() => {
    injectedBugs.lifecycleActionError = false;
    injectedBugs.lifecycleActionInvariant = false;
  });

  it('an Error is a violation naming the action (the node logged an internal error)', async () => {
    injectedBugs.lifecycleActionError = true;
    const r = await firstFailure();
    expect(r.violations[0]).toMatch(
      /internal error: lifecycle action "openForWrites" on END_OF_RECOVERY_WRITTEN failed: EIO/,
    );
    expect(r.violations.filter((v) => /uncaught/.test(v))).toEqual([]);
  });

  it("an InvariantViolation is the node's FATAL exit, a violation naming the action", async () => {
    injectedBugs.lifecycleActionInvariant = true;
    const r = await firstFailure();
    expect(r.violations.join('\n')).toMatch(
      /FATAL: InvariantViolation: INV-FAULT: injected failure of lifecycle action openForWrites/,
    );
    expect(r.violations.filter((v) => /uncaught/.test(v))).toEqual([]);
  });
});
