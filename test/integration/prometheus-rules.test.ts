/**
 * The Prometheus rules operators drop in (prometheus/): `promtool check rules` accepts them,
 * `promtool check config` the example prometheus.yml, and `promtool test rules` runs their unit
 * tests (input series → expected alerts). Skipped, naming the reason, without promtool (Debian's
 * `prometheus` package). The last test shows the unit tests can fail: the same tests against the
 * rules with a higher recovery-time objective do.
 */
import { spawnSync } from 'node:child_process';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { describe, expect, it } from 'vitest';
import { PROJECT_ROOT } from '../../server/entry.ts';

const DIR = path.join(PROJECT_ROOT, 'prometheus');

function promtoolUnavailable(): string | null {
  const r = spawnSync('promtool', ['--version'], { encoding: 'utf8' });
  return r.error !== undefined || r.status !== 0
    ? 'promtool not found (apt-get install prometheus)'
    : null;
}
const reason = promtoolUnavailable();

const promtool = (args: string[], cwd = DIR) =>
  spawnSync('promtool', args, { cwd, encoding: 'utf8', timeout: 60_000 });

describe.skipIf(reason !== null)(
  `prometheus/ rules under promtool${reason ? ` (skipped: ${reason})` : ''}`,
  () => {
    it('promtool check rules and check config accept them', () => {
      const r = promtool(['check', 'rules', 'walsim-rules.yml']);
      expect(r.stdout + r.stderr).toMatch(/SUCCESS: 16 rules found/);
      expect(r.status).toBe(0);
      const c = promtool(['check', 'config', 'prometheus.yml']);
      expect(c.stdout + c.stderr).toMatch(/is valid prometheus config file syntax/);
      expect(c.status).toBe(0);
    });

    it('promtool test rules: every expected alert fires and no other', () => {
      const r = promtool(['test', 'rules', 'tests/walsim-rules.test.yml']);
      expect(r.stdout + r.stderr).toMatch(/SUCCESS/);
      expect(r.status).toBe(0);
    });

    it('the unit tests fail against rules with another recovery-time objective', () => {
      const tmp = fs.mkdtempSync(path.join(os.tmpdir(), 'walsim-rules-'));
      try {
        fs.mkdirSync(path.join(tmp, 'tests'));
        const rules = fs.readFileSync(path.join(DIR, 'walsim-rules.yml'), 'utf8');
        expect(rules).toContain('expr: vector(60)');
        fs.writeFileSync(
          path.join(tmp, 'walsim-rules.yml'),
          rules.replace('expr: vector(60)', 'expr: vector(100)'),
        );
        fs.copyFileSync(
          path.join(DIR, 'tests', 'walsim-rules.test.yml'),
          path.join(tmp, 'tests', 'walsim-rules.test.yml'),
        );
        const r = promtool(['test', 'rules', 'tests/walsim-rules.test.yml'], tmp);
        expect(r.status).not.toBe(0);
        expect(r.stdout + r.stderr).toMatch(/WalsimStandbyTimeToWritableAboveRTO/);
      } finally {
        fs.rmSync(tmp, { recursive: true, force: true });
      }
    });
  },
);
