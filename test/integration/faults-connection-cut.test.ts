/**
 * The replication connection is cut in the middle of a batch (the standby's socket is destroyed,
 * no close handshake) several times while a large insert streams. Promised: the standby
 * reconnects with backoff, every reconnection starts at its flush LSN, no WAL byte is received
 * twice or skipped, no record is replayed twice, and after catch-up the nodes are equal.
 * Method: count what the walreceiver accepted (bytes) and what the startup process replayed
 * (records), and compare with the records actually in the WAL between the same positions.
 */
import { describe, expect, it } from 'vitest';
import { clustersPerTest, withoutBuffered } from '../helpers/cluster.ts';
import { recordsIn } from '../helpers/wal-files.ts';
import { parseLsn } from '../../wal/lsn.ts';
import { maxAlign } from '../../wal/codec.ts';

const clusters = clustersPerTest();

describe('replication connection cut mid-batch', () => {
  it('reconnects from the flush LSN; no byte received twice, no record replayed twice; nodes equal', async () => {
    const c = await clusters.start({ synchronousCommit: 'on' });
    const standby = await c.client('standby');
    const s0 = await c.status('standby');
    const firstStart = parseLsn(s0.receiverStartLsns[0]);
    let done = false;
    await c.sql('primary', 'CREATE TABLE big (c int)');
    // A stream of commits, each waiting for the standby's flush (synchronous_commit=on).
    const insert = (async () => {
      for (let i = 0; i < 200; i++)
        await c.sql(
          'primary',
          `INSERT INTO big SELECT generate_series(${i * 2000 + 1}, ${(i + 1) * 2000})`,
        );
      done = true;
    })();
    let cutsMidStatement = 0;
    for (let i = 0; i < 6; i++) {
      const seen = (await c.status('standby')).receivedMessages;
      // Cut only once new WAL is arriving, i.e. while batches are on the wire.
      await c.pollUntil(
        async () => done || (await c.status('standby')).receivedMessages > seen,
        'WAL arriving',
      );
      if (done) break;
      await standby.request({ op: 'fault', fault: 'cut_replication', holdMs: i * 50 });
      cutsMidStatement++;
    }
    await insert;
    await c.sql('primary', 'DELETE FROM big WHERE c > 200000');
    await c.sql('primary', 'VACUUM big');
    await c.waitForCatchup('replay');
    expect(cutsMidStatement).toBe(6);
    const s = await c.status('standby');
    expect(s.faultsInjected.cut_replication).toBe(cutsMidStatement);
    expect(s.receiverConnects).toBe(1 + cutsMidStatement);
    expect(s.replayError).toBeNull();
    // Each reconnection started at the flush LSN: start positions only grow, and the bytes
    // accepted add up to exactly the WAL between the first start and the final flush position.
    const starts = (s.receiverStartLsns as string[]).map(parseLsn);
    expect(starts).toHaveLength(1 + cutsMidStatement);
    for (let i = 1; i < starts.length; i++)
      expect(starts[i]!).toBeGreaterThanOrEqual(starts[i - 1]!);
    const flush = parseLsn(s.receiveLsn);
    expect(s.receivedBytes).toBe(flush - firstStart);
    // Replayed records = records in the WAL from where replay began to where it ended.
    const inWal = recordsIn(c.dataDir('standby'), maxAlign(firstStart), flush, {
      timeline: 1,
      segmentSize: 1 << 20,
    });
    expect(s.recordsReplayed).toBe(inWal.length);
    expect(maxAlign(inWal.at(-1)!.endLsn)).toBe(flush);
    const p = await (await c.client('primary')).inspect();
    const q = await standby.inspect();
    expect(withoutBuffered(q.tables)).toEqual(withoutBuffered(p.tables));
    expect(q.orphanBuffers).toEqual([]);
    expect(await c.scalar('standby', 'SELECT count(*) FROM big')).toBe(200000);
  });

  it('a reconnecting standby releases no remote_apply commit it has not replayed (apply is unknown until its first reply)', async () => {
    // Replay paused: the standby flushes the commit but cannot apply it. Before the fix the
    // walsender took the START_REPLICATION position as the apply position and released the commit.
    const c = await clusters.start({ synchronousCommit: 'remote_apply' });
    await c.sql('primary', 'CREATE TABLE a (c int)');
    await c.sql('standby', 'SELECT pg_wal_replay_pause()');
    await c.pollUntil(
      async () =>
        (await c.scalar('standby', 'SELECT pg_get_wal_replay_pause_state()')) === 'paused',
      'paused',
    );
    let acked = false;
    const insert = c.sql('primary', 'INSERT INTO a VALUES (1)').then(
      () => (acked = true),
      (e: Error) => e,
    );
    await c.waitForCatchup('flush');
    await (await c.client('standby')).request({ op: 'fault', fault: 'cut_replication', holdMs: 0 });
    await c.pollUntil(async () => {
      const p = await c.status('primary');
      return (
        (await c.status('standby')).receiverConnects === 2 &&
        p.replication.length === 1 &&
        p.replication[0].state === 'streaming'
      );
    }, 'standby reconnected');
    const p = await c.status('primary');
    expect(p.syncWaiters).toBe(1);
    expect(acked).toBe(false);
    expect(await c.scalar('standby', 'SELECT count(*) FROM a')).toBe(0);
    await c.sql('standby', 'SELECT pg_wal_replay_resume()');
    expect(await insert).toBe(true);
    expect(await c.scalar('standby', 'SELECT count(*) FROM a')).toBe(1);
  });
});
