/**
 * A promise rejection nobody handles during a run is a violation (the server process would die
 * of it), reported within the seed: Node reports it at a real event-loop turn, which the
 * scheduler takes every 256 events and the simulation before its convergence checks and its
 * result — no longer after every step (sim/README, scheduler.ts).
 */
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { generateScenario } from '../../sim/scenario.ts';
import { runSimulation } from '../../sim/simulation.ts';

type Listener = (reason: unknown) => void;

describe('a rejection left unhandled during a run', () => {
  // The test runner's own listener would count the rejection made here as a failure of the test.
  let runners: Listener[] = [];
  beforeEach(() => {
    runners = process.rawListeners('unhandledRejection') as Listener[];
    process.removeAllListeners('unhandledRejection');
  });
  afterEach(() => {
    process.removeAllListeners('unhandledRejection');
    for (const l of runners) process.on('unhandledRejection', l);
  });

  it('is a violation of the seed it happened in', async () => {
    const run = runSimulation(generateScenario(3, 6));
    void Promise.reject(new Error('left unhandled by a simulated process'));
    const r = await run;
    expect(r.ok).toBe(false);
    expect(r.violations).toEqual([
      expect.stringMatching(
        /^uncaught exception \(the server process would die\): Error: left unhandled by a simulated process/,
      ),
    ]);
    // The next seed starts clean.
    expect((await runSimulation(generateScenario(3, 6))).violations).toEqual([]);
  });
});
