/**
 * The primary is killed with SIGKILL during a stream of single-row commits (real processes), then
 * the standby is promoted. Promised, per synchronous_commit:
 *   remote_write (also on, remote_apply) — every acknowledged commit is on the promoted node;
 *   local (also off) — acknowledged commits whose WAL had not reached the standby may be missing,
 *   but what is there is exactly a prefix of the commits (no gaps, no duplicates, nothing never
 *   sent). The levels in brackets run on the simulator only (test/sim/faults.test.ts).
 * For every level the standby keeps every WAL byte it had flushed: timeline 2 branches exactly at
 * the flush LSN the standby reported after the kill, and promotion replays all of it.
 * Method: a client inserts 1, 2, 3, … and records the last acknowledged value; SIGKILL the pid
 * from postmaster.pid; promote; count rows by range.
 */
import { describe, expect, it } from 'vitest';
import { clustersPerTest, TestCluster } from '../helpers/cluster.ts';
import { parseLsn } from '../../wal/lsn.ts';
import { readTimelineHistory } from '../../wal/segment.ts';
import type { SynchronousCommit } from '../../server/settings.ts';
import { nodeDisk } from '../../common/node-disk.ts';

const clusters = clustersPerTest();

/**
 * `beforePromote` runs after the kill, with the standby's connection held down (it can no longer
 * stream), before the promotion: the old primary may be restarted there, since once the standby
 * is promoted walsim refuses to start the old primary (split brain).
 */
async function crashDuringCommits(
  level: SynchronousCommit,
  beforePromote?: (c: TestCluster, acked: number) => Promise<void>,
) {
  const c = await clusters.start({ synchronousCommit: level });
  await c.sql('primary', 'CREATE TABLE acks (c int)');
  // With synchronous_commit=off even the CREATE reaches the standby only after the WAL writer's
  // flush (≤ 200 ms): wait until the table is there, so that only the inserts are at stake.
  await c.pollUntil(
    async () => (await c.scalar('standby', 'SELECT count(*) FROM acks')) === 0,
    'table on the standby',
  );
  const primary = await c.client('primary');
  let acked = 0;
  let attempted = 0;
  const writer = (async () => {
    for (let n = 1; ; n++) {
      attempted = n;
      try {
        await primary.sql(`INSERT INTO acks VALUES (${n})`);
        acked = n;
      } catch {
        return; // the connection died with the primary: n was not acknowledged
      }
    }
  })();
  await c.pollUntil(async () => acked >= 200, '200 acknowledged commits');
  await c.kill('primary');
  await writer;
  // The standby cannot receive anything more; what it has flushed now is what it must keep.
  await c.pollUntil(
    async () => (await c.status('standby')).receiverState !== 'streaming',
    'standby notices',
  );
  const flushedAtKill = parseLsn((await c.status('standby')).receiveLsn);
  if (beforePromote) {
    await (
      await c.client('standby')
    ).request({ op: 'fault', fault: 'cut_replication', holdMs: 600_000 });
    await beforePromote(c, acked);
  }
  const r = (await (
    await c.client('standby')
  ).request({ op: 'promote', wait: true, waitSeconds: 60 })) as { promoted: boolean };
  expect(r.promoted).toBe(true);
  expect(readTimelineHistory(c.dataDir('standby'), 2, nodeDisk)[0]).toMatchObject({
    tli: 1,
    endLsn: flushedAtKill,
  });
  const present = Number(await c.scalar('standby', 'SELECT count(*) FROM acks'));
  // Exactly the prefix 1..present: no gap, no duplicate, nothing that was never attempted.
  expect(await c.scalar('standby', `SELECT count(*) FROM acks WHERE c < ${present + 1}`)).toBe(
    present,
  );
  expect(present).toBeLessThanOrEqual(attempted);
  return { c, acked, attempted, present, lost: Math.max(0, acked - present) };
}

describe('primary SIGKILL during synchronous commits', () => {
  // One real-process test per promise: remote_write (the seed's level) for "nothing acknowledged
  // is lost", local for "only what had not reached the standby". on and remote_apply make the
  // first promise, off the second; test/sim/faults.test.ts ("primary crash during commits")
  // checks all five levels on the simulator (the production node code on simulated processes).
  it('loses no acknowledged commit (synchronous_commit=remote_write)', async () => {
    const { acked, present, lost } = await crashDuringCommits('remote_write');
    expect(lost).toBe(0);
    expect(present).toBeGreaterThanOrEqual(acked); // plus at most the commit in flight
    expect(present).toBeLessThanOrEqual(acked + 1);
  });

  it('may lose acknowledged commits not yet streamed, and nothing else (synchronous_commit=local)', async () => {
    // `local` made each acknowledged commit durable on the primary's own disk: crash recovery of
    // the old primary (as a lone server: the standby cannot stream from it) finds all of them.
    const durableOnOldPrimary = async (c: TestCluster, ackedAtKill: number) => {
      await c.startNode('primary');
      expect(
        Number(await c.scalar('primary', `SELECT count(*) FROM acks WHERE c < ${ackedAtKill + 1}`)),
      ).toBe(ackedAtKill);
      expect((await c.status('primary')).startupReplay.crashRecovery).toBe(true);
      await c.stopNode('primary', 'immediate');
    };
    const { acked, present, lost } = await crashDuringCommits('local', durableOnOldPrimary);
    // What is missing is a suffix of the acknowledged commits (the prefix check above) — the
    // WAL the standby had not received when the primary died. Nothing is reordered or doubled.
    expect(present + lost).toBeGreaterThanOrEqual(acked);
  });
});
