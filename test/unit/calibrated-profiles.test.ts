/**
 * The shipped calibrated profiles (cost-model/profiles/pgN-calibrated-*.json, a pair per major
 * calibrated, each naming its major, and pg15-generated-*.json) are reproducible: fitting again
 * the measurements each one stores (fit.records, and fit.walCounts — the counts predict read from
 * the real WAL — where present, else the walsim twins' counts) with its target and cache tier
 * gives its constants exactly (under the rule of a measured term at the bound 0 when the file was
 * fitted under it). No PostgreSQL, no timing.
 */
import { describe, expect, it } from 'vitest';
import { costFeatures } from '../../cost-model/model.ts';
import { builtinProfileNames, loadProfile, profilePath } from '../../cost-model/profile.ts';
import { countCellsInProcess } from '../../scripts/experiment/in-process.ts';
import { summarise } from '../../scripts/experiment/sweep-runner.ts';
import {
  fitCalibration,
  fitTargets,
  identifiableGroups,
  measuredAtBound,
  planCalibration,
  readStoredCalibration,
  recordsFromStored,
  storedLabel,
  walsimTwin,
} from '../../scripts/calibration/design.ts';
import * as fs from 'node:fs';

const shipped = builtinProfileNames().filter((n) => /^pg\d+-(calibrated|generated)-/.test(n));

describe('shipped calibrated profiles', () => {
  it('one for each target, per major and design, each naming its major', () => {
    const pairs = [...new Set(shipped.map((n) => /^(pg(\d+)-\w+)-/.exec(n)![1]!))];
    expect(pairs).toContain('pg15-calibrated');
    expect(pairs).toContain('pg15-generated');
    for (const pair of pairs) {
      expect(shipped.filter((n) => n.startsWith(`${pair}-`))).toEqual([
        `${pair}-uncontended`,
        `${pair}-wall`,
      ]);
      const major = Number(/^pg(\d+)/.exec(pair)![1]);
      for (const t of ['uncontended', 'wall'])
        expect(loadProfile(`${pair}-${t}`).pgMajor).toBe(major);
    }
  });

  for (const name of shipped) {
    it(`${name}: its stored runs refit to its constants exactly`, async () => {
      const file = profilePath(name).file;
      const profile = loadProfile(name);
      const stored = readStoredCalibration(file);
      const s = stored.settings;
      const plan = planCalibration(s);
      const counts =
        stored.walCounts !== null
          ? plan.map((c) => stored.walCounts![storedLabel(c)]!)
          : await countCellsInProcess(plan.map(walsimTwin), { thresholdDivisor: 32 });
      const fit = (JSON.parse(fs.readFileSync(file, 'utf8')) as { fit: { target: string } }).fit;
      const target = /run-queue wait/.test(fit.target) ? 'uncontended' : 'wall';
      expect(target).toBe(name.endsWith('uncontended') ? 'uncontended' : 'wall');
      const cells = summarise(plan, fitTargets(recordsFromStored(stored.records, plan), target));
      const seed = { ...loadProfile('seed-001'), cache: profile.cache };
      const meta = { name: profile.name, description: profile.description, source: 'refit' };
      // As npm run calibrate fits WAL counts: the groups they identify, measured terms kept — and
      // kept at the bound 0 in a file fitted under that rule (`fit.measuredAtBound`, the groups it
      // named); a file fitted before the rule is reproduced as it was fitted, without it.
      const features = counts.map((n, i) => costFeatures(n, seed, plan[i]!.nBuffers));
      const identified =
        stored.walCounts !== null ? identifiableGroups(plan, features, seed) : null;
      const bound =
        identified !== null && stored.measuredAtBound !== null
          ? measuredAtBound(cells, counts, identified)
          : null;
      if (bound !== null) expect(bound.atBound).toEqual(stored.measuredAtBound);
      const wal = bound ?? identified;
      const again = fitCalibration(cells, counts, wal?.base ?? seed, meta, wal?.groups);
      for (const [k, c] of Object.entries(profile.constants))
        expect(again.profile.constants[k as keyof typeof profile.constants].seconds, k).toBe(
          c.seconds,
        );
    }, 120_000);
  }
});
