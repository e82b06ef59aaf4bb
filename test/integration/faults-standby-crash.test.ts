/**
 * The standby is killed with SIGKILL in the middle of replay (real processes), including in the
 * middle of a long run of full-scan buffer drops at a large shared_buffers. Promised: the stale
 * postmaster.pid does not block the restart; the standby recovers from its last restartpoint plus
 * its local WAL (crash recovery), reconnects, catches up, and equals the primary, with no buffer
 * holding a dropped block and no replay error.
 * Method: pause replay, build a backlog of TRUNCATEs (each a full scan of NBuffers descriptors at
 * 100GB) around a CHECKPOINT, resume, SIGKILL once replay is under way but not done, restart.
 */
import * as fs from 'node:fs';
import * as path from 'node:path';
import { describe, expect, it } from 'vitest';
import { clustersPerTest, withoutBuffered } from '../helpers/cluster.ts';
import { parseLsn } from '../../wal/lsn.ts';

const clusters = clustersPerTest();

describe('standby SIGKILL mid-replay', () => {
  it('restarts from its restartpoint and local WAL, catches up, equals the primary', async () => {
    const c = await clusters.start({
      sharedBuffers: '16MB',
      standbySharedBuffers: '100GB',
      dropStrategy: 'full-scan',
      synchronousCommit: 'remote_write',
    });
    const TABLES = 60;
    for (let i = 0; i < TABLES; i++) {
      await c.sql('primary', `CREATE TABLE t${i} (c int)`);
      await c.sql('primary', `INSERT INTO t${i} SELECT generate_series(1, 500)`);
    }
    await c.waitForCatchup('replay');
    await c.sql('standby', 'SELECT pg_wal_replay_pause()');
    await c.pollUntil(
      async () =>
        (await c.scalar('standby', 'SELECT pg_get_wal_replay_pause_state()')) === 'paused',
      'paused',
    );
    const before = await c.status('standby');
    // Backlog: truncations (each commit drops a relfilenumber: a full scan of 13,107,200 descriptors),
    // a checkpoint in the middle (a restartpoint on the standby), and more truncations.
    for (let round = 0; round < 3; round++) {
      for (let i = 0; i < TABLES; i++) {
        await c.sql('primary', `TRUNCATE t${i}`);
        await c.sql('primary', `INSERT INTO t${i} SELECT generate_series(1, ${50 + round})`);
      }
      if (round === 0) await c.sql('primary', 'CHECKPOINT');
    }
    await c.waitForCatchup('flush');
    const dropsBefore = before.drop.drops['full-scan'];
    await c.sql('standby', 'SELECT pg_wal_replay_resume()');
    // Kill once the restartpoint is behind replay and drops are under way, before the end.
    await c.pollUntil(
      async () => (await c.status('standby')).drop.drops['full-scan'] >= dropsBefore + TABLES + 5,
      'drops under way',
      60_000,
    );
    const mid = await c.status('standby');
    const killedPid = await c.kill('standby');
    expect(mid.caughtUp).toBe(false);
    expect(mid.drop.drops['full-scan']).toBeLessThan(dropsBefore + 3 * TABLES);
    // The crash left postmaster.pid naming the dead pid; startNode must not be fooled by it.
    const pidFile = path.join(c.dataDir('standby'), 'postmaster.pid');
    expect(JSON.parse(fs.readFileSync(pidFile, 'utf8')).pid).toBe(killedPid);
    await c.startNode('standby');
    const s = await c.status('standby');
    expect(s.pid).not.toBe(killedPid);
    expect(s.startupReplay.crashRecovery).toBe(true);
    // Recovery began at the restartpoint written during replay, after the pause position.
    expect(parseLsn(s.startupReplay.fromLsn)).toBeGreaterThan(parseLsn(before.replayLsn));
    await c.waitForCatchup('replay');
    const done = await c.status('standby');
    expect(done.replayError).toBeNull();
    expect(done.nBuffers).toBe(13107200);
    const p = await (await c.client('primary')).inspect();
    const q = await (await c.client('standby')).inspect();
    expect(withoutBuffered(q.tables)).toEqual(withoutBuffered(p.tables));
    expect(q.orphanBuffers).toEqual([]);
    expect(await c.scalar('standby', 'SELECT count(*) FROM t7')).toBe(52);
  });

  it('a standby killed while WAL is streaming in reconnects and resumes from its flush LSN', async () => {
    const c = await clusters.start({ synchronousCommit: 'on' });
    await c.sql('primary', 'CREATE TABLE s (c int)');
    let stop = false;
    let acked = 0;
    const writer = (async () => {
      for (let i = 1; !stop; i++) {
        await c.sql(
          'primary',
          `INSERT INTO s SELECT generate_series(${(i - 1) * 1000 + 1}, ${i * 1000})`,
        );
        acked = i;
      }
    })();
    await c.pollUntil(async () => acked >= 20, '20 commits');
    const flushed = parseLsn((await c.status('standby')).receiveLsn);
    await c.kill('standby');
    await c.startNode('standby');
    // The walreceiver starts after the startup process's local replay, which may end after the
    // node answers: wait for its first START_REPLICATION rather than read the status once.
    await c.pollUntil(
      async () => (await c.status('standby')).receiverStartLsns.length > 0,
      'the restarted standby to start streaming',
    );
    const s = await c.status('standby');
    // It kept what it had flushed before the kill and asked to stream from there on.
    expect(parseLsn(s.receiverStartLsns[0])).toBeGreaterThanOrEqual(flushed);
    expect(s.startupReplay.crashRecovery).toBe(true);
    stop = true;
    await writer;
    await c.waitForCatchup('replay');
    expect(await c.scalar('standby', 'SELECT count(*) FROM s')).toBe(acked * 1000);
    const p = await (await c.client('primary')).inspect();
    expect(withoutBuffered((await (await c.client('standby')).inspect()).tables)).toEqual(
      withoutBuffered(p.tables),
    );
  });
});
