/**
 * The simulator finds a planted bug: with the test-only switch on, synchronous_commit=remote_write
 * commits are acknowledged without waiting for the standby's write. Method: run seeds from 1 until
 * one fails (it must within 1,000), check the violation names the early acknowledgement, replay
 * that seed twice to the identical trace, and shrink it to a few commands that still fail. Also
 * SIM-1's failover rule with two nodes: a promotion that ends replay where it is (dropping flushed
 * WAL it had not replayed) loses a synchronous commit, found within 100 seeds and shrunk.
 */
import { afterEach, describe, expect, it } from 'vitest';
import { injectedBugs } from '../../common/injected-bugs.ts';
import { generateScenario, TWO_NODES } from '../../sim/scenario.ts';
import { runSimulation } from '../../sim/simulation.ts';
import { shrinkScenario } from '../../sim/shrink.ts';

describe('planted bug', () => {
  afterEach(() => {
    injectedBugs.ackRemoteWriteEarly = false;
    injectedBugs.promoteSkipsUnreplayedWal = false;
  });

  it('an early remote_write acknowledgement is found within 1,000 seeds and replays identically', async () => {
    injectedBugs.ackRemoteWriteEarly = true;
    let found: number | null = null;
    let violation = '';
    for (let seed = 1; seed <= 1000 && found === null; seed++) {
      const r = await runSimulation(generateScenario(seed, 40, TWO_NODES, 1));
      if (!r.ok) {
        found = seed;
        violation = r.violations[0]!;
      }
    }
    expect(found).not.toBeNull();
    expect(violation).toMatch(
      /acknowledged under synchronous_commit=remote_write, but the standby's write LSN is/,
    );
    const a = await runSimulation(generateScenario(found!, 40, TWO_NODES, 1), { trace: true });
    const b = await runSimulation(generateScenario(found!, 40, TWO_NODES, 1), { trace: true });
    expect(a.ok).toBe(false);
    expect(b.trace).toEqual(a.trace);
    expect(b.traceHash).toBe(a.traceHash);
    expect(b.violations).toEqual(a.violations);
    // The shrinker reduces the failing workload to a few commands that still fail.
    const small = await shrinkScenario(generateScenario(found!, 40, TWO_NODES, 1), 200);
    expect(small.commands.length).toBeLessThanOrEqual(5);
    expect((await runSimulation(small)).ok).toBe(false);
  }, 300_000);

  it('a promotion that drops flushed, unreplayed WAL loses a synchronous commit (SIM-1)', async () => {
    injectedBugs.promoteSkipsUnreplayedWal = true;
    const lost =
      /^t=\d+ ms: failover: acknowledged commit lost on B \(synchronous_commit=(on|remote_apply)/;
    let found: number | null = null;
    for (let seed = 1; seed <= 100 && found === null; seed++) {
      const r = await runSimulation(generateScenario(seed, 40, TWO_NODES, 1));
      if (!r.ok) {
        found = seed;
        expect(r.violations[0]).toMatch(lost);
      }
    }
    expect(found).not.toBeNull();
    const small = await shrinkScenario(generateScenario(found!, 40, TWO_NODES, 1), 200, (v) =>
      lost.test(v),
    );
    expect(small.commands.length).toBeLessThanOrEqual(5);
    expect((await runSimulation(small)).violations[0]).toMatch(lost);
    injectedBugs.promoteSkipsUnreplayedWal = false;
    expect((await runSimulation(generateScenario(found!, 40, TWO_NODES, 1))).violations).toEqual(
      [],
    );
  }, 300_000);

  it('the same seeds pass without the planted bug', async () => {
    for (let seed = 1; seed <= 20; seed++)
      expect((await runSimulation(generateScenario(seed, 40, undefined, 1))).violations).toEqual(
        [],
      );
  }, 120_000);
});
