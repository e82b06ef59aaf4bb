/**
 * The shrinker: given a failing scenario, remove commands (halves, then quarters, … then single
 * commands) while the run still fails (the same way, if asked), and return the smallest failing scenario found. Each trial
 * is a full deterministic run, so the result replays exactly like the original.
 */
import type { Scenario } from './scenario.ts';
import { runSimulation, type SimRunOptions } from './simulation.ts';

export async function shrinkScenario(
  scenario: Scenario,
  maxRuns = 400,
  /** Which failure counts (default: any): keeps the shrinker on the bug it was given. */
  same: (violation: string) => boolean = () => true,
  /** Run options of every trial (e.g. one oracle off, so that another's finding is kept). */
  opts: SimRunOptions = {},
): Promise<Scenario> {
  const fails = async (s: Scenario) => {
    const r = await runSimulation(s, opts);
    return !r.ok && same(r.violations[0]!);
  };
  let best = scenario;
  let runs = 0;
  let chunk = Math.max(1, Math.floor(best.commands.length / 2));
  while (chunk >= 1 && runs < maxRuns) {
    let removed = false;
    for (let at = 0; at < best.commands.length && runs < maxRuns;) {
      const candidate: Scenario = {
        ...best,
        commands: [...best.commands.slice(0, at), ...best.commands.slice(at + chunk)],
      };
      runs++;
      if (await fails(candidate)) {
        best = candidate;
        removed = true;
      } else {
        at += chunk;
      }
    }
    if (!removed) chunk = Math.floor(chunk / 2);
  }
  return best;
}
