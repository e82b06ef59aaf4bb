/**
 * Generated backlogs run on real PostgreSQL 15 (skipped, naming the reason, without the server
 * binaries): the SQL of 60 seeds (small limits, so each seed takes a moment) runs on a primary
 * without an error — every statement's relation in the state it needs, no transaction block around
 * VACUUM or DROP DATABASE, no statement waiting for another session's lock (a wait would hang the
 * serial runner: the test's timeout) —, then one seed whose standby history has a restart and a
 * pause inside the setup is made by the runner predict-bench uses (scripts/calibration/
 * gen-backlog.ts): the standby ends paused with WAL left to replay, the primary stopped.
 */
import { afterAll, describe, expect, it } from 'vitest';
import type pg from 'pg';
import { pgUnavailableReason, PgDirs } from '../helpers/postgres.ts';
import {
  DEFAULT_GENERATOR_LIMITS,
  generateBacklog,
  type GeneratorLimits,
} from '../../scripts/generator/backlog.ts';
import { initPgCluster, pgConnectionString, pgCtl } from '../../scripts/postgres/pg-cluster.ts';
import { connectPg } from '../../scripts/engines/walsim-engine.ts';
import { makeGeneratedBacklog } from '../../scripts/calibration/gen-backlog.ts';

const reason = pgUnavailableReason();
const dirs = new PgDirs();
afterAll(() => dirs.removeAll(), 300_000); // stopping two pairs on a loaded machine

const SMALL: GeneratorLimits = {
  ...DEFAULT_GENERATOR_LIMITS,
  maxSharedBuffers: '128MB',
  maxPages: 64,
  maxRelations: 12,
  maxTransactions: 25,
};

describe.skipIf(reason !== null)(
  `generated backlogs on real PostgreSQL 15${reason ? ` (skipped: ${reason})` : ''}`,
  () => {
    it('the SQL of 60 seeds runs without an error, sessions interleaved as printed', async () => {
      const dir = dirs.fresh('gen-sql');
      await initPgCluster(dir, { sharedBuffers: '128MB', primarySharedBuffers: '128MB' });
      const clients: pg.Client[] = [];
      try {
        for (let i = 0; i < 3; i++)
          clients.push(await connectPg(pgConnectionString(dir, 'primary'), 'walsim-gen-test'));
        for (let seed = 0; seed < 60; seed++) {
          const b = generateBacklog(seed, SMALL);
          for (const [i, st] of b.statements.entries())
            await clients[st.session - 1]!.query(st.sql).catch((e: Error) => {
              throw new Error(`seed ${seed} statement ${i + 1} (${st.sql}): ${e.message}`);
            });
        }
      } finally {
        await Promise.all(clients.map((c) => c.end()));
      }
    }, 600_000);

    it('makes a backlog with a restart and a pause inside the setup: standby paused, WAL left', async () => {
      const seed = Array.from({ length: 400 }, (_, s) => s).find((s) => {
        const h = generateBacklog(s, SMALL).history;
        return h.restart !== null && !h.caughtUp;
      })!;
      const b = generateBacklog(seed, SMALL);
      const dir = dirs.fresh('gen-run');
      await initPgCluster(dir, { sharedBuffers: '128MB', primarySharedBuffers: '128MB' });
      await makeGeneratedBacklog(dir, b);
      expect((await pgCtl(dir, 'primary', 'status', { allowFail: true })).code).not.toBe(0);
      const c = await connectPg(pgConnectionString(dir, 'standby'), 'walsim-gen-test');
      try {
        const r = await c.query(
          'SELECT pg_get_wal_replay_pause_state() AS s, pg_wal_lsn_diff(pg_last_wal_receive_lsn(), pg_last_wal_replay_lsn()) AS left',
        );
        expect(r.rows[0].s).toBe('paused');
        expect(Number(r.rows[0].left)).toBeGreaterThan(0);
      } finally {
        await c.end();
      }
    }, 600_000);
  },
);
