/**
 * The oracles of several nodes find planted bugs (common/injected-bugs.ts), each by the invariant
 * it breaks (sim/README): a quorum commit released one acknowledgement short (SIM-6, the
 * primary's pg_stat_replication and the standbys' own positions at the acknowledgement), a
 * cascade relaying WAL its upstream has not flushed (SIM-7, after every event), a rejoin that
 * skips the divergence check (SIM-9, a standby holding WAL past where the primary's history ends
 * its timeline), an old primary brought back as a standby that starts as a primary (SIM-8, one
 * writer), a promotion that ends replay where it is and drops flushed WAL (SIM-1n, an
 * acknowledged commit the promoted standby held lost at the failover), a standby whose flush
 * does not wake its cascading walsenders (SIM-4, a cascaded standby never converges) — and two
 * bugs of the node core that any topology runs: crash recovery that steps over a record whose CRC
 * fails (SIM-1b, the restarted primary replayed past the damaged record) and a relation drop
 * that unlinks the files before dropping the buffers (SIM-3, a buffer holds a dropped block).
 * Method: per bug, run the seeds that can show it (ANY n ≥ 2; a cascade; several nodes; a primary
 * WAL corruption drawn; any) until one fails — within a bound — with the invariant's message;
 * replay it to the identical trace; shrink it, keeping that message, to a few commands that still
 * fail; and the same seed passes with the bug off.
 */
import { afterEach, describe, expect, it } from 'vitest';
import { injectedBugs, type InjectedBug } from '../../common/injected-bugs.ts';
import { generateScenario, generateTopology } from '../../sim/scenario.ts';
import { runSimulation } from '../../sim/simulation.ts';
import { shrinkScenario } from '../../sim/shrink.ts';

interface Case {
  bug: InjectedBug;
  /** Seeds whose topology can show the bug. */
  fits: (seed: number) => boolean;
  /** How many of those may be tried before one fails. */
  within: number;
  violation: RegExp;
  /** Most commands the shrunk scenario may keep. */
  shrunkTo: number;
}

const CASES: Case[] = [
  {
    bug: 'releaseAnyOneShort',
    fits: (s) => /^ANY [2-9]/.test(generateTopology(s).synchronousStandbyNames),
    within: 20,
    violation: /'quorum' standbys have it, ANY \d needs \d/,
    shrunkTo: 3,
  },
  {
    bug: 'cascadeForwardsUnflushed',
    fits: (s) => generateTopology(s).upstreams.some((u) => u !== 'A'),
    within: 30,
    violation: /cascaded standby \w flushed .*, past its upstream \w's flush/,
    shrunkTo: 10,
  },
  {
    bug: 'skipRejoinDivergenceCheck',
    fits: (s) => generateTopology(s).upstreams.length > 1,
    within: 60,
    violation: /past .* where the primary \w's history ends it \(diverged WAL\)/,
    shrunkTo: 6,
  },
  {
    bug: 'crashedPrimaryIgnoresStandbySignal',
    fits: (s) => generateTopology(s).upstreams.length > 1,
    within: 20,
    violation: /nodes accepting writes: \w, \w/,
    shrunkTo: 3,
  },
  {
    bug: 'promoteSkipsUnreplayedWal',
    fits: (s) => generateTopology(s).upstreams.length > 1,
    within: 30,
    violation:
      /failover: acknowledged commit lost on \w \(synchronous_commit=(on|remote_apply|remote_write)/,
    shrunkTo: 20,
  },
  {
    bug: 'recoverySkipsBadCrcRecord',
    fits: (s) =>
      generateScenario(s, 40, undefined, 1).commands.some(
        (c) => c.op === 'corrupt' && c.node === 'primary',
      ),
    within: 20,
    violation: /crash recovery replayed to \S+, past the corrupt record at/,
    shrunkTo: 5,
  },
  {
    bug: 'unlinkBeforeDroppingBuffers',
    fits: () => true,
    within: 10,
    // SIM-10 sees it at the drop (on the primary: the files gone, the drop took the lookup
    // path a primary never takes; in replay: buffers left valid), before SIM-3's check after the
    // step finds the buffers left behind.
    violation: /\w buffers hold dropped blocks \d+\/\d\/\d+|SIM-10: /,
    shrunkTo: 3,
  },
  {
    bug: 'cascadeMissesFlushWakeup',
    fits: (s) => generateTopology(s).upstreams.some((u) => u !== 'A'),
    within: 10,
    violation: /no convergence within \d+ ms: .*standby \w flush/,
    shrunkTo: 2,
  },
];

describe('planted bugs of several nodes', () => {
  afterEach(() => {
    for (const c of CASES) injectedBugs[c.bug] = false;
  });

  for (const c of CASES) {
    it(`${c.bug}: found, replayed identically and shrunk`, async () => {
      injectedBugs[c.bug] = true;
      let found: number | null = null;
      let violation = '';
      for (let seed = 1, tried = 0; tried < c.within && found === null; seed++) {
        if (!c.fits(seed)) continue;
        tried++;
        const r = await runSimulation(generateScenario(seed, 40, undefined, 1));
        if (!r.ok) {
          found = seed;
          violation = r.violations[0]!;
        }
      }
      expect(found).not.toBeNull();
      expect(violation).toMatch(c.violation);
      const a = await runSimulation(generateScenario(found!, 40, undefined, 1), { trace: true });
      const b = await runSimulation(generateScenario(found!, 40, undefined, 1), { trace: true });
      expect(b.traceHash).toBe(a.traceHash);
      expect(b.violations).toEqual(a.violations);
      const small = await shrinkScenario(generateScenario(found!, 40, undefined, 1), 200, (v) =>
        c.violation.test(v),
      );
      expect(small.commands.length).toBeLessThanOrEqual(c.shrunkTo);
      const again = await runSimulation(small);
      expect(again.violations[0]).toMatch(c.violation);
      injectedBugs[c.bug] = false;
      expect((await runSimulation(generateScenario(found!, 40, undefined, 1))).violations).toEqual(
        [],
      );
    }, 300_000);
  }
});
