/**
 * synchronous_standby_names with several real standbys: pg_stat_replication's (application_name,
 * sync_priority, sync_state) rows through `s1,s2` → `*` → `FIRST 2(s1,s2,s3)` → a sync standby
 * stops → `ANY 2(s1,s2)`, changed at run time with ALTER SYSTEM + pg_reload_conf(); commits wait for
 * the right set; and no acknowledged commit is lost across a failover under FIRST 1 and ANY 1 with
 * two standbys, when the most advanced standby is promoted.
 * Method: real processes; rows compared exactly; waiting commits seen in status.syncWaiters.
 */
import { describe, expect, it } from 'vitest';
import { clustersPerTest, TestCluster } from '../helpers/cluster.ts';
import { ControlError } from '../../server/control-client.ts';
import { parseLsn } from '../../wal/lsn.ts';

const clusters = clustersPerTest();

async function setNames(cl: TestCluster, value: string): Promise<void> {
  await cl.sql('primary', `ALTER SYSTEM SET synchronous_standby_names = '${value}'`);
  await cl.sql('primary', 'SELECT pg_reload_conf()');
}

async function rows(cl: TestCluster): Promise<Array<[string, number, string]>> {
  const r = await cl.sql(
    'primary',
    'SELECT application_name, sync_priority, sync_state FROM pg_stat_replication',
  );
  return r.rows.map((x) => [
    String(x.application_name),
    Number(x.sync_priority),
    String(x.sync_state),
  ]);
}

/** Wait until every listed standby streams and has reported a flush position, then read the rows. */
async function settledRows(cl: TestCluster, n: number): Promise<Array<[string, number, string]>> {
  await cl.pollUntil(async () => {
    const r = (await cl.sql('primary', 'SELECT state, flush_lsn FROM pg_stat_replication')).rows;
    return r.length === n && r.every((x) => x.state === 'streaming' && x.flush_lsn !== null);
  }, `${n} standbys streaming`);
  return rows(cl);
}

describe('synchronous_standby_names at run time', () => {
  it("gives PostgreSQL's sync_priority / sync_state rows and makes commits wait for the right set", async () => {
    const cl = await clusters.start({
      standbys: ['s1', 's2', 's3'],
      synchronousStandbyNames: 's1,s2',
      synchronousCommit: 'on',
    });
    await cl.sql('primary', 'CREATE TABLE t (c int)');
    expect(await cl.scalar('primary', 'SHOW synchronous_standby_names')).toBe('s1,s2');
    // Slots follow connection order: s1, s2, s3 (the cluster starts them in that order).
    expect(await settledRows(cl, 3)).toEqual([
      ['s1', 1, 'sync'],
      ['s2', 2, 'potential'],
      ['s3', 0, 'async'],
    ]);

    await setNames(cl, '*');
    expect(await rows(cl)).toEqual([
      ['s1', 1, 'sync'],
      ['s2', 1, 'potential'],
      ['s3', 1, 'potential'],
    ]);
    // Equal priorities: the lowest walsender slot is synchronous. s1 stops: s2 takes over; s1
    // comes back into the lowest free slot (its old one) and is synchronous again.
    await cl.stopNode('s1', 'fast');
    await cl.pollUntil(async () => (await rows(cl)).length === 2, 's1 gone');
    expect(await rows(cl)).toEqual([
      ['s2', 1, 'sync'],
      ['s3', 1, 'potential'],
    ]);
    await cl.startNode('s1');
    expect(await settledRows(cl, 3)).toEqual([
      ['s1', 1, 'sync'],
      ['s2', 1, 'potential'],
      ['s3', 1, 'potential'],
    ]);

    await setNames(cl, 'FIRST 2(s1,s2,s3)');
    expect(await rows(cl)).toEqual([
      ['s1', 1, 'sync'],
      ['s2', 2, 'sync'],
      ['s3', 3, 'potential'],
    ]);
    await cl.sql('primary', 'INSERT INTO t VALUES (1)');

    // A synchronous standby stops: the potential one takes over and commits go on.
    await cl.stopNode('s2', 'fast');
    await cl.pollUntil(async () => (await rows(cl)).length === 2, 's2 gone');
    expect(await rows(cl)).toEqual([
      ['s1', 1, 'sync'],
      ['s3', 3, 'sync'],
    ]);
    await cl.sql('primary', 'INSERT INTO t VALUES (2)');

    // ANY 2 (s1, s2) with s2 down: s3 is not listed, so a commit waits for s2.
    await setNames(cl, 'ANY 2(s1,s2)');
    expect(await rows(cl)).toEqual([
      ['s1', 1, 'quorum'],
      ['s3', 0, 'async'],
    ]);
    const primary = await cl.client('primary');
    let acked = false;
    const waiting = primary.sql('INSERT INTO t VALUES (3)').then(() => (acked = true));
    await cl.pollUntil(
      async () => (await cl.status('primary')).syncWaiters === 1,
      'the commit waiting for the quorum',
    );
    await cl.waitForCatchup('flush', 's3');
    await cl.waitForCatchup('flush', 's1');
    expect(acked).toBe(false); // s1 and s3 have it, but only s1 counts
    await cl.startNode('s2');
    await waiting;
    // s2 is back in the lowest free walsender slot, its old one.
    expect(await settledRows(cl, 3)).toEqual([
      ['s1', 1, 'quorum'],
      ['s2', 1, 'quorum'],
      ['s3', 0, 'async'],
    ]);
    expect((await cl.status('primary')).syncWaiters).toBe(0);

    // An empty setting: nothing is waited for any more; a bad one is refused with PostgreSQL's error.
    await setNames(cl, '');
    expect(await rows(cl)).toEqual([
      ['s1', 0, 'async'],
      ['s2', 0, 'async'],
      ['s3', 0, 'async'],
    ]);
    const err = await cl
      .sql('primary', "ALTER SYSTEM SET synchronous_standby_names = 'FIRST 2'")
      .catch((e: unknown) => e);
    expect(err).toBeInstanceOf(ControlError);
    expect(err).toMatchObject({
      code: '42601',
      message: 'invalid value for parameter "synchronous_standby_names": "FIRST 2"',
      detail: 'syntax error at end of input',
    });
    expect(await cl.scalar('primary', 'SHOW synchronous_standby_names')).toBe('');
  });
});

/**
 * Failover with two standbys: one is cut off (10 s) while single-row commits are acknowledged;
 * the primary is killed; the standby with the highest flush LSN is promoted and must hold every
 * acknowledged row; the other is repointed to it and follows the new timeline.
 */
async function failoverKeepsAckedCommits(names: string, cutNode: 's1' | 's2'): Promise<void> {
  const cl = await clusters.start({
    standbys: ['s1', 's2'],
    synchronousStandbyNames: names,
    synchronousCommit: 'on',
  });
  await cl.sql('primary', 'CREATE TABLE t (c int)');
  await settledRows(cl, 2);
  const acked: number[] = [];
  for (let i = 1; i <= 60; i++) {
    if (i === 20)
      await (
        await cl.client(cutNode)
      ).request({ op: 'fault', fault: 'cut_replication', holdMs: 10_000 });
    await cl.sql('primary', `INSERT INTO t VALUES (${i})`);
    acked.push(i);
  }
  await cl.kill('primary');
  const flush = async (n: string) => parseLsn(String((await cl.status(n)).receiveLsn));
  const [f1, f2] = [await flush('s1'), await flush('s2')];
  expect(f1).not.toBe(f2); // the cut standby is behind: choosing matters
  const best = f1 > f2 ? 's1' : 's2';
  const other = best === 's1' ? 's2' : 's1';
  expect(other).toBe(cutNode);
  const r = (await (
    await cl.client(best)
  ).request({ op: 'promote', wait: true, waitSeconds: 60 })) as { promoted: boolean };
  expect(r.promoted).toBe(true);
  expect(await cl.scalar(best, 'SELECT count(*) FROM t')).toBe(acked.length);
  await cl.repoint(other, best);
  await cl.waitForCatchup('replay', other, best);
  expect((await cl.status(other)).timeline).toBe(2);
  expect(await cl.scalar(other, 'SELECT count(*) FROM t')).toBe(acked.length);
}

describe('no acknowledged commit lost across a failover with two standbys', () => {
  it('FIRST 1 (s1, s2): the sync standby is cut, the potential one takes over and acknowledges', async () => {
    await failoverKeepsAckedCommits('FIRST 1 (s1, s2)', 's1');
  });

  it('ANY 1 (s1, s2): one standby is cut, the other acknowledges alone', async () => {
    await failoverKeepsAckedCommits('ANY 1 (s1, s2)', 's2');
  });
});
