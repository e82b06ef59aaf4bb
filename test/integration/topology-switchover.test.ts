/**
 * Switchover and rejoin with real processes. A switchover stops the primary cleanly, promotes a
 * standby that has received everything, brings the old primary back as its standby on the new
 * timeline and repoints the sibling standby; all nodes end with equal data, and a second
 * switchover goes back. After a failover whose old primary had written WAL the standby never
 * received, `cluster rejoin` refuses, stating how many bytes diverged and that pg_rewind would be
 * needed, and changes nothing; a failover without divergence rejoins.
 * Method: the cluster CLI where the user would use it, the test harness elsewhere; exact LSNs.
 */
import * as fs from 'node:fs';
import * as path from 'node:path';
import { describe, expect, it } from 'vitest';
import { clustersPerTest, tableDigests } from '../helpers/cluster.ts';
import { runScript } from '../helpers/cli.ts';
import { parseLsn } from '../../wal/lsn.ts';

const clusters = clustersPerTest();

describe('switchover', () => {
  it('promotes the target, rejoins the old primary and repoints the sibling: equal data on timeline 2, then back on 3', async () => {
    const cl = await clusters.start({
      standbys: ['s1', 's2'],
      synchronousStandbyNames: 's1',
      synchronousCommit: 'on',
    });
    await cl.sql('primary', 'CREATE TABLE t (c int)');
    await cl.sql('primary', 'INSERT INTO t SELECT generate_series(1, 20000)');
    const run = await runScript('cluster.ts', [
      'switchover',
      '--to',
      's1',
      '--json',
      '--dir',
      cl.dir,
    ]);
    expect(run.stderr).toBe('');
    expect(run.code).toBe(0);
    expect(run.json).toMatchObject({
      from: 'primary',
      to: 's1',
      newTimeline: 2,
      repointed: ['s2'],
      synchronousStandbyNames: 'primary',
    });

    expect(await cl.scalar('s1', 'SELECT pg_is_in_recovery()')).toBe(false);
    expect(await cl.scalar('primary', 'SELECT pg_is_in_recovery()')).toBe(true);
    // The old primary's WAL ended exactly at the switch point: it lost and repeated nothing.
    expect((await cl.status('primary')).timeline).toBe(2);
    await cl.sql('s1', 'INSERT INTO t SELECT generate_series(20001, 25000)'); // waits for "primary", the sync standby now
    await cl.waitForCatchup('replay', 'primary', 's1');
    await cl.waitForCatchup('replay', 's2', 's1');
    expect((await cl.status('s2')).timeline).toBe(2);
    const want = await tableDigests(cl, 's1');
    expect(await tableDigests(cl, 'primary')).toEqual(want);
    expect(await tableDigests(cl, 's2')).toEqual(want);
    expect(await cl.scalar('primary', 'SELECT count(*) FROM t')).toBe(25000);
    const rows = (
      await cl.sql(
        's1',
        'SELECT application_name, sync_priority, sync_state FROM pg_stat_replication ORDER BY application_name',
      )
    ).rows;
    expect(rows).toEqual([
      { application_name: 'primary', sync_priority: 1, sync_state: 'sync' },
      { application_name: 's2', sync_priority: 0, sync_state: 'async' },
    ]);

    // And back: the old primary becomes the primary again, on timeline 3.
    const back = await cl.switchover('primary');
    expect(back).toMatchObject({
      from: 's1',
      to: 'primary',
      newTimeline: 3,
      repointed: ['s2'],
      synchronousStandbyNames: 's1',
    });
    await cl.sql('primary', 'INSERT INTO t SELECT generate_series(25001, 26000)');
    await cl.waitForCatchup('replay', 's1', 'primary');
    await cl.waitForCatchup('replay', 's2', 'primary');
    const again = await tableDigests(cl, 'primary');
    expect(await tableDigests(cl, 's1')).toEqual(again);
    expect(await tableDigests(cl, 's2')).toEqual(again);
    expect((await cl.status('s2')).timeline).toBe(3);
  });
});

describe('rejoin after a failover', () => {
  it('refuses when the old primary wrote WAL the promoted standby never received, saying how many bytes diverged', async () => {
    const cl = await clusters.start({ synchronousCommit: 'local' });
    await cl.sql('primary', 'CREATE TABLE t (c int)');
    await cl.sql('primary', 'INSERT INTO t SELECT generate_series(1, 1000)');
    await cl.waitForCatchup('replay');
    await cl.stopNode('standby', 'fast');
    const forkAt = parseLsn(String(await cl.scalar('primary', 'SELECT pg_current_wal_lsn()')));
    await cl.sql('primary', 'INSERT INTO t SELECT generate_series(1001, 3000)'); // acknowledged locally only
    const endAt = parseLsn(String(await cl.scalar('primary', 'SELECT pg_current_wal_lsn()')));
    await cl.stopNode('primary', 'immediate');
    await cl.startNode('standby');
    await (await cl.client('standby')).request({ op: 'promote', wait: true, waitSeconds: 60 });
    expect(await cl.scalar('standby', 'SELECT count(*) FROM t')).toBe(1000);

    const run = await runScript('cluster.ts', [
      'rejoin',
      '--node',
      'primary',
      '--to',
      'standby',
      '--dir',
      cl.dir,
    ]);
    expect(run.code).toBe(1);
    const diverged = endAt - forkAt;
    expect(diverged).toBeGreaterThan(0);
    expect(run.stderr.trim()).toBe(
      `error: cannot rejoin "primary" as a standby of "standby": its WAL on timeline 1 ends at ${fmt(endAt)}, ${diverged} bytes past ${fmt(forkAt)}, ` +
        `where timeline 2 forked off timeline 1 (history file of timeline 2); those ${diverged} bytes exist only on this node, so it cannot follow timeline 2: ` +
        'PostgreSQL would need pg_rewind (or a new base backup) first',
    );
    // Nothing changed: not marked a standby, not started.
    expect(fs.existsSync(path.join(cl.dataDir('primary'), 'standby.signal'))).toBe(false);
    expect(cl.pid('primary')).toBeNull();
  });

  it('rejoins an old primary stopped immediately after its standby had everything', async () => {
    const cl = await clusters.start({ synchronousCommit: 'on' });
    await cl.sql('primary', 'CREATE TABLE t (c int)');
    await cl.sql('primary', 'INSERT INTO t SELECT generate_series(1, 5000)');
    await cl.waitForCatchup('flush');
    await cl.stopNode('primary', 'immediate');
    await (await cl.client('standby')).request({ op: 'promote', wait: true, waitSeconds: 60 });
    const r = await cl.rejoin('primary', 'standby');
    expect(r.verdict.ok).toBe(true);
    expect(r.newTimeline).toBe(2);
    await cl.sql('standby', "ALTER SYSTEM SET synchronous_standby_names = 'primary'");
    await cl.sql('standby', 'SELECT pg_reload_conf()');
    await cl.sql('standby', 'INSERT INTO t SELECT generate_series(5001, 6000)');
    await cl.waitForCatchup('replay', 'primary', 'standby');
    expect(await cl.scalar('primary', 'SELECT count(*) FROM t')).toBe(6000);
    expect(await tableDigests(cl, 'primary')).toEqual(await tableDigests(cl, 'standby'));
  });
});

function fmt(lsn: number): string {
  return `${Math.floor(lsn / 2 ** 32)
    .toString(16)
    .toUpperCase()}/${(lsn % 2 ** 32).toString(16).toUpperCase()}`;
}
