/**
 * walsim nodes following a real PostgreSQL major (`cluster start --pg-version N`, InitOptions
 * pgVersion): seed 001's TRUNCATE of a one-block table, replayed at failover, full-scans the pool
 * at 13 and is looked up at 14–18, and the failover report names that major's drop functions
 * (RelFileNode names to 15, RelFileLocator names from 16). Real processes on 127.0.0.1; the same
 * drop is traced in real PostgreSQL of each major by test/integration/pg-versions.test.ts.
 */
import { describe, expect, it } from 'vitest';
import { loadProfile } from '../../cost-model/profile.ts';
import { withModel } from '../../cost-model/price.ts';
import { formatFailover } from '../../scripts/engines/walsim-engine.ts';
import { PG_RULE_MAJORS } from '../../storage/pg-drop-rules.ts';
import type { FailoverReport } from '../../standby/failover-report.ts';
import { clustersPerTest } from '../helpers/cluster.ts';
import { expectOneLineError, runScript } from '../helpers/cli.ts';

const clusters = clustersPerTest();

describe('walsim nodes at --pg-version', () => {
  it.each(PG_RULE_MAJORS.map((m) => [m]))(
    'PostgreSQL %i: a one-block TRUNCATE replayed at failover takes that major path and names',
    async (major) => {
      const c = await clusters.start({ sharedBuffers: '16MB', pgVersion: major });
      expect((await c.status('standby')).pgVersion).toBe(major);
      await c.sql('primary', 'CREATE TABLE t (c int)');
      await c.sql('primary', 'INSERT INTO t SELECT generate_series(1, 100)');
      await c.waitForCatchup('replay');
      await c.sql('standby', 'SELECT pg_wal_replay_pause()');
      await c.pollUntil(
        async () =>
          (await c.scalar('standby', 'SELECT pg_get_wal_replay_pause_state()')) === 'paused',
        'paused',
      );
      await c.sql('primary', 'TRUNCATE t');
      await c.waitForCatchup('flush');
      expect(await c.stopNode('primary', 'immediate')).toBe(true);
      const standby = await c.client('standby');
      await standby.sql('SELECT pg_wal_replay_resume()');
      const { failover } = (await standby.request({
        op: 'promote',
        wait: true,
        waitSeconds: 60,
      })) as { failover: FailoverReport };
      const d = failover.drop;
      expect(d.drops['full-scan']).toBe(major === 13 ? 1 : 0);
      expect(d.drops['cached-lookup']).toBe(major === 13 ? 0 : 1);
      expect(d.scanned).toBe(major === 13 ? failover.nBuffers : 0);
      const names = major >= 16 ? 'DropRelationsAllBuffers' : 'DropRelFileNodesAllBuffers';
      expect(failover.pgRules?.functions.dropRelations).toBe(names);
      expect(failover.pgRules?.version).toBe(String(major));
      const rules = formatFailover(withModel(failover, loadProfile())).find((l) =>
        l.startsWith('rules:'),
      );
      expect(rules).toContain(`PostgreSQL ${major}: `);
      expect(rules).toContain(names);
      if (major === 13) expect(rules).toContain('always scan all NBuffers descriptors');
      else
        expect(rules).toContain(
          major >= 16 ? 'FindAndDropRelationBuffers' : 'FindAndDropRelFileNodeBuffers',
        );
    },
  );

  it('refuses a major without known rules, and options the major decides, in one line', async () => {
    const run = (...args: string[]) =>
      runScript('cluster.ts', ['start', '--dir', clusters.dir(), ...args]);
    expectOneLineError(
      await run('--pg-version', '12'),
      /^error: --pg-version: PostgreSQL version "12" is not supported/,
      2,
    );
    expectOneLineError(
      await run('--pg-version', '15', '--drop-strategy', 'full-scan'),
      /--drop-strategy is decided by --pg-version 15/,
      2,
    );
    expectOneLineError(
      await run('--pg-version', '13', '--force-optimized'),
      /PostgreSQL 13 has no lookup path to force/,
      2,
    );
  });
});
