/**
 * A commit waiting for its synchronous standby (syncrep.c SyncRepWaitForLSN), with real processes.
 * While it waits, other sessions on the primary see the transaction as in progress: it
 * is flushed and committed in CLOG but not yet out of the proc array. A fast stop of the primary
 * ends the wait with PostgreSQL's WARNING (57P01) instead of hanging; the commit
 * stands locally and is visible after the restart; a write queued behind the waiting one never runs.
 * Writes on other tables run while a commit waits, and their commits wait beside it (group commit).
 */
import { describe, expect, it } from 'vitest';
import { clustersPerTest } from '../helpers/cluster.ts';
import { ControlClient, ControlError } from '../../server/control-client.ts';
import { readToken } from '../../server/cluster-files.ts';
import type { SynchronousCommit } from '../../server/settings.ts';

const clusters = clustersPerTest();

const DETAIL =
  'The transaction has already committed locally, but might not have been replicated to the standby.';

/** The statement's outcome without throwing: its result or its error. */
const settle = <T>(p: Promise<T>): Promise<T | Error> =>
  p.then(
    (v) => v,
    (e: Error) => e,
  );

describe('a commit waiting for synchronous replication', () => {
  for (const level of ['remote_write', 'on', 'remote_apply'] as SynchronousCommit[]) {
    it(`is invisible to other sessions until the standby confirms it (synchronous_commit=${level})`, async () => {
      const c = await clusters.start({ synchronousCommit: level });
      await c.sql('primary', 'CREATE TABLE v (c int)');
      // remote_apply: the standby receives the commit but cannot apply it (replay paused);
      // remote_write / on: the standby is down.
      if (level === 'remote_apply') {
        await c.sql('standby', 'SELECT pg_wal_replay_pause()');
        await c.pollUntil(
          async () =>
            (await c.scalar('standby', 'SELECT pg_get_wal_replay_pause_state()')) === 'paused',
          'paused',
        );
      } else {
        await c.stopNode('standby', 'fast');
      }
      let acked = false;
      const waiting = settle(
        c.sql('primary', 'INSERT INTO v VALUES (1)').then((r) => ((acked = true), r)),
      );
      await c.pollUntil(
        async () => (await c.status('primary')).syncWaiters === 1,
        'commit waiting for the standby',
      );
      const p = await c.status('primary');
      const mode = { remote_write: 'write', on: 'flush', remote_apply: 'apply' }[level as string];
      expect(p.syncWaitingCommits).toMatchObject([{ waitFor: mode }]);
      // Flushed on the primary, committed in its CLOG — yet another session counts 0 (PostgreSQL too).
      const other = await ControlClient.connect('127.0.0.1', p.port as number, readToken(c.dir));
      expect((await other.sql('SELECT count(*) FROM v')).rows[0]).toEqual({ count: 0 });
      expect((await other.sql('SELECT count(*) FROM v WHERE c = 1')).rows[0]).toEqual({ count: 0 });
      if (level === 'remote_apply')
        expect(await c.scalar('standby', 'SELECT count(*) FROM v')).toBe(0);
      expect(acked).toBe(false);
      // The standby comes back: the commit is acknowledged and visible everywhere.
      if (level === 'remote_apply') await c.sql('standby', 'SELECT pg_wal_replay_resume()');
      else await c.startNode('standby');
      expect(await waiting).toMatchObject({ command: 'INSERT 0 1' });
      expect((await other.sql('SELECT count(*) FROM v')).rows[0]).toEqual({ count: 1 });
      expect((await c.status('primary')).syncWaitingCommits).toEqual([]);
      if (level === 'remote_apply')
        expect(await c.scalar('standby', 'SELECT count(*) FROM v')).toBe(1);
      other.close();
    });
  }

  it('lets writes on other tables run while a commit waits, and holds writes on its table until it ends', async () => {
    const c = await clusters.start({ synchronousCommit: 'on' });
    await c.sql('primary', 'CREATE TABLE v (c int)');
    await c.sql('primary', 'CREATE TABLE w (c int)');
    await c.stopNode('standby', 'fast');
    const port = (await c.status('primary')).port as number;
    const sessions = await Promise.all(
      [1, 2, 3].map(() => ControlClient.connect('127.0.0.1', port, readToken(c.dir))),
    );
    const first = settle(sessions[0]!.sql('INSERT INTO v VALUES (1)'));
    await c.pollUntil(
      async () => (await c.status('primary')).syncWaiters === 1,
      'first commit waiting for the standby',
    );
    // Another table: it runs and its commit waits beside the first one's.
    const other = settle(sessions[1]!.sql('INSERT INTO w VALUES (1)'));
    await c.pollUntil(
      async () => (await c.status('primary')).syncWaiters === 2,
      'second commit waiting for the standby',
    );
    // The same table: it does not start while v's commit waits (no third waiter, row not applied).
    const sameTable = settle(sessions[2]!.sql('INSERT INTO v VALUES (2)'));
    await new Promise((r) => setTimeout(r, 300));
    expect((await c.status('primary')).syncWaiters).toBe(2);
    await c.startNode('standby');
    expect(await first).toMatchObject({ command: 'INSERT 0 1' });
    expect(await other).toMatchObject({ command: 'INSERT 0 1' });
    expect(await sameTable).toMatchObject({ command: 'INSERT 0 1' });
    expect(await c.scalar('primary', 'SELECT count(*) FROM v')).toBe(2);
    expect(await c.scalar('primary', 'SELECT count(*) FROM w')).toBe(1);
    for (const s of sessions) s.close();
  });

  it('fast stop of the primary ends the wait with the WARNING, does not hang, and keeps the local commit', async () => {
    const c = await clusters.start({ synchronousCommit: 'on' });
    await c.sql('primary', 'CREATE TABLE v (c int)');
    await c.stopNode('standby', 'fast');
    const waiting = settle(c.sql('primary', 'INSERT INTO v VALUES (1)'));
    await c.pollUntil(
      async () => (await c.status('primary')).syncWaiters === 1,
      'commit waiting for the standby',
    );
    // A second write on the same table, on its own session, waits for the first's commit to end
    // before it starts (walsim's stand-in for the committing transaction's locks).
    const other = await ControlClient.connect(
      '127.0.0.1',
      (await c.status('primary')).port as number,
      readToken(c.dir),
    );
    const queued = settle(other.sql('INSERT INTO v VALUES (2)'));
    expect(await c.stopNode('primary', 'fast')).toBe(true);
    const err = await waiting;
    expect(err).toBeInstanceOf(ControlError);
    expect(err).toMatchObject({
      code: '57P01',
      severity: 'WARNING',
      detail: DETAIL,
      message:
        'canceling the wait for synchronous replication and terminating connection due to administrator command',
    });
    expect(await queued).toMatchObject({
      code: '57P01',
      message: 'terminating connection due to administrator command',
    });
    other.close();
    await c.startNode('primary');
    // Committed locally before the wait: after the restart the row is there; the queued one never ran.
    expect(await c.scalar('primary', 'SELECT count(*) FROM v')).toBe(1);
    await c.startNode('standby');
    await c.waitForCatchup('replay');
    expect(await c.scalar('standby', 'SELECT count(*) FROM v')).toBe(1);
  });
});
