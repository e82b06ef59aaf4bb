/**
 * Pause/resume and standby restart with real processes. Pause holds replay while WAL keeps
 * arriving (PostgreSQL 005_replay_delay.pl, pause part); a fast-stopped standby restarts from its
 * restartpoint and local WAL, streams from its flush position and converges without loss or
 * double-apply (the heap asserts a record is never applied twice).
 */
import { beforeAll, describe, expect, it } from 'vitest';
import { clustersPerSuite, TestCluster } from '../helpers/cluster.ts';
import { parseLsn } from '../../wal/lsn.ts';

describe('pause, resume and restart', () => {
  const clusters = clustersPerSuite();
  let c: TestCluster;
  beforeAll(async () => {
    c = await clusters.start({ sharedBuffers: '16MB', synchronousCommit: 'remote_write' });
  });

  it('receives but does not replay while paused', async () => {
    await c.sql('primary', 'CREATE TABLE t (c int)');
    await c.sql('primary', 'INSERT INTO t SELECT generate_series(1, 1000)');
    await c.waitForCatchup('replay');
    expect(await c.scalar('standby', 'SELECT pg_get_wal_replay_pause_state()')).toBe('not paused');
    expect(await c.scalar('standby', 'SELECT pg_is_wal_replay_paused()')).toBe(false);
    await c.sql('standby', 'SELECT pg_wal_replay_pause()');
    expect(await c.scalar('standby', 'SELECT pg_is_wal_replay_paused()')).toBe(true);
    await c.pollUntil(
      async () =>
        (await c.scalar('standby', 'SELECT pg_get_wal_replay_pause_state()')) === 'paused',
      'paused',
    );
    const replayLsn = await c.scalar('standby', 'SELECT pg_last_wal_replay_lsn()');
    const receiveBefore = parseLsn(
      String(await c.scalar('standby', 'SELECT pg_last_wal_receive_lsn()')),
    );
    // remote_write commits keep returning while the standby is paused.
    await c.sql('primary', 'INSERT INTO t SELECT generate_series(1001, 50000)');
    await c.sql('primary', 'DELETE FROM t WHERE c < 500');
    await c.waitForCatchup('flush');
    expect(
      parseLsn(String(await c.scalar('standby', 'SELECT pg_last_wal_receive_lsn()'))),
    ).toBeGreaterThan(receiveBefore);
    expect(await c.scalar('standby', 'SELECT pg_last_wal_replay_lsn()')).toBe(replayLsn);
    expect(await c.scalar('standby', 'SELECT count(*) FROM t')).toBe(1000);
    await c.sql('standby', 'SELECT pg_wal_replay_resume()');
    await c.waitForCatchup('replay');
    expect(await c.scalar('standby', 'SELECT pg_get_wal_replay_pause_state()')).toBe('not paused');
    expect(await c.scalar('standby', 'SELECT count(*) FROM t')).toBe(50000 - 499);
    expect(await c.scalar('standby', 'SELECT pg_last_wal_replay_lsn()')).toBe(
      await c.scalar('primary', 'SELECT pg_current_wal_lsn()'),
    );
  });

  it('pause functions fail on a primary: recovery is not in progress', async () => {
    await expect(c.sql('primary', 'SELECT pg_wal_replay_pause()')).rejects.toThrow(
      'recovery is not in progress',
    );
    await expect(c.sql('primary', 'SELECT pg_wal_replay_resume()')).rejects.toThrow(
      'recovery is not in progress',
    );
    expect(await c.scalar('primary', 'SELECT pg_is_in_recovery()')).toBe(false);
    expect(await c.scalar('standby', 'SELECT pg_is_in_recovery()')).toBe(true);
  });

  it('a fast-stopped standby restarts from its flush position and converges', async () => {
    await c.sql('primary', 'CREATE TABLE r (c int)');
    await c.sql('primary', 'CREATE TABLE q (c int)');
    for (const t of ['r', 'q']) {
      await c.sql('primary', `INSERT INTO ${t} SELECT generate_series(1, 10000)`); // 45 pages
      await c.sql('primary', `DELETE FROM ${t} WHERE c > 2000`); // pages 9..44 become empty
    }
    await c.sql('primary', 'CHECKPOINT'); // a restartpoint on the standby
    await c.waitForCatchup('replay');
    // Control: without a restart, dropping q's 45+3+1 blocks (< NBuffers/32 = 64) uses the lookup.
    let d0 = (await c.status('standby')).drop;
    await c.sql('primary', 'TRUNCATE q');
    await c.waitForCatchup('replay');
    let d1 = (await c.status('standby')).drop;
    expect(d1.drops['cached-lookup'] - d0.drops['cached-lookup']).toBe(1);
    expect(d1.drops['full-scan'] - d0.drops['full-scan']).toBe(0);

    expect(await c.stopNode('standby', 'fast')).toBe(true); // shutdown restartpoint at the replay position
    expect(await c.scalar('primary', 'SELECT count(*) FROM r')).toBe(2000); // the primary keeps serving
    await c.startNode('standby');
    await c.pollUntil(
      async () => (await c.status('standby')).receiverState === 'streaming',
      'standby streaming again',
    );
    expect((await c.status('standby')).startupReplay.records).toBe(0);
    // After the restart r's sizes are not cached: the same drop must take the full scan.
    d0 = (await c.status('standby')).drop;
    await c.sql('primary', 'TRUNCATE r');
    await c.sql('primary', 'INSERT INTO r VALUES (1), (2), (3)');
    await c.waitForCatchup('replay');
    d1 = (await c.status('standby')).drop;
    expect(d1.drops['full-scan'] - d0.drops['full-scan']).toBe(1);
    expect(d1.scanned - d0.scanned).toBe((await c.status('standby')).nBuffers);
    await c.sql('primary', 'VACUUM'); // prunes touch r again: sizes cached, lookups again
    await c.waitForCatchup('replay');
    const p = await (await c.client('primary')).inspect();
    const s = await (await c.client('standby')).inspect();
    expect(
      s.tables.map(({ name, rows, digest, forks }) => ({ name, rows, digest, forks })),
    ).toEqual(p.tables.map(({ name, rows, digest, forks }) => ({ name, rows, digest, forks })));
    expect(s.orphanBuffers).toEqual([]);
    expect(await c.scalar('standby', 'SELECT count(*) FROM r')).toBe(3);
    expect(s.tables.find((t) => t.name === 'r')!.forks[0]).toBe(1);
  });

  it('a primary restarted after an immediate stop runs crash recovery and keeps every commit', async () => {
    await c.sql('primary', 'CREATE TABLE crash (c int)');
    await c.sql('primary', 'INSERT INTO crash SELECT generate_series(1, 3000)');
    await c.sql('primary', 'DELETE FROM crash WHERE c > 1000');
    const lsn = await c.scalar('primary', 'SELECT pg_current_wal_lsn()');
    expect(await c.stopNode('primary', 'immediate')).toBe(true);
    await c.startNode('primary');
    const s = await c.status('primary');
    expect(s.startupReplay.crashRecovery).toBe(true);
    expect(s.startupReplay.records).toBeGreaterThan(0);
    expect(s.startupReplay.toLsn).toBe(lsn);
    expect(await c.scalar('primary', 'SELECT count(*) FROM crash')).toBe(1000);
    // The standby reconnects to the restarted primary and both agree.
    await c.sql('primary', 'INSERT INTO crash VALUES (1)');
    await c.waitForCatchup('replay');
    expect(await c.scalar('standby', 'SELECT count(*) FROM crash')).toBe(1001);
  });
});
