/**
 * Cascading replication with real processes: P → S1 → S2, where S1's cascading walsender sends
 * only WAL it has flushed; S1 stopping stalls only S2; S2 repointed to P without losing or
 * repeating a record; S1 promoted with S2 following the new timeline on the same walreceiver
 * connection; and a base backup taken before the promotion following the latest timeline.
 * Method: one cluster walked through these steps; positions from status, data from inspect().
 */
import { describe, expect, it } from 'vitest';
import { clustersPerSuite, tableDigests, TestCluster } from '../helpers/cluster.ts';
import { parseLsn } from '../../wal/lsn.ts';

const clusters = clustersPerSuite();
let c: TestCluster;

describe('cascade P -> S1 -> S2', () => {
  it('S2 receives through S1, never ahead of what S1 has flushed, and ends equal', async () => {
    // Asynchronous replication: stopping S1 must not hold up the primary's commits.
    c = await clusters.start({ standbys: ['s1'], synchronousStandbyNames: '' });
    const added = await c.addStandby('s2', 's1');
    expect(added.timeline).toBe(1);
    expect((await c.status('s2')).upstream).toMatchObject({
      port: c.config('s1').port,
      applicationName: 's2',
    });

    await c.sql('primary', 'CREATE TABLE t (c int)');
    let violations = 0;
    let samples = 0;
    for (let i = 0; i < 20; i++) {
      await c.sql(
        'primary',
        `INSERT INTO t SELECT generate_series(${i * 2000 + 1}, ${(i + 1) * 2000})`,
      );
      // Read S2 first: S1's flush LSN only grows, so S2 <= S1 must hold at the later read too.
      const s2 = parseLsn(String((await c.status('s2')).receiveLsn));
      const s1 = parseLsn(String((await c.status('s1')).receiveLsn));
      samples++;
      if (s2 > s1) violations++;
    }
    expect(samples).toBe(20);
    expect(violations).toBe(0);
    await c.waitForCatchup('replay', 's1', 'primary');
    await c.waitForCatchup('replay', 's2', 's1');
    expect(await c.scalar('s2', 'SELECT count(*) FROM t')).toBe(40000);
    expect(await tableDigests(c, 's2')).toEqual(await tableDigests(c, 'primary'));

    // The primary serves s1 only; s1 serves s2 as an asynchronous cascaded standby.
    const p = await c.sql(
      'primary',
      'SELECT application_name, state, sync_priority, sync_state FROM pg_stat_replication',
    );
    expect(p.rows).toEqual([
      { application_name: 's1', state: 'streaming', sync_priority: 0, sync_state: 'async' },
    ]);
    const s1 = await c.sql(
      's1',
      'SELECT application_name, state, sync_priority, sync_state, flush_lsn FROM pg_stat_replication',
    );
    expect(s1.rows).toEqual([
      {
        application_name: 's2',
        state: 'streaming',
        sync_priority: 0,
        sync_state: 'async',
        flush_lsn: (await c.status('s1')).receiveLsn,
      },
    ]);
  });

  it('stopping S1 stalls only S2, which catches up after S1 restarts', async () => {
    await c.stopNode('s1', 'fast');
    const stalledAt = (await c.status('s2')).receiveLsn;
    await c.sql('primary', 'INSERT INTO t SELECT generate_series(40001, 50000)'); // the primary does not wait
    expect(await c.scalar('primary', 'SELECT count(*) FROM t')).toBe(50000);
    expect((await c.status('s2')).receiveLsn).toBe(stalledAt);
    expect(await c.scalar('s2', 'SELECT count(*) FROM t')).toBe(40000);
    await c.startNode('s1');
    await c.waitForCatchup('replay', 's1', 'primary');
    await c.waitForCatchup('replay', 's2', 's1');
    expect(await c.scalar('s2', 'SELECT count(*) FROM t')).toBe(50000);
    expect(await tableDigests(c, 's2')).toEqual(await tableDigests(c, 'primary'));
  });

  it('repointing S2 to P restarts streaming at its flush LSN: nothing lost, nothing received twice', async () => {
    const before = await c.status('s2');
    const flushAt = before.receiveLsn;
    const r = await c.repoint('s2', 'primary');
    expect(r).toEqual({
      running: true,
      conninfo: `host=127.0.0.1 port=${c.config('primary').port} application_name=s2`,
    });
    await c.pollUntil(
      async () =>
        (
          await c.sql(
            'primary',
            'SELECT application_name FROM pg_stat_replication ORDER BY application_name',
          )
        ).rows.length === 2,
      'primary serves s1 and s2',
    );
    await c.sql('primary', 'INSERT INTO t SELECT generate_series(50001, 60000)');
    await c.waitForCatchup('replay', 's2', 'primary');
    const after = await c.status('s2');
    // The new connection started exactly where the old one had flushed up to.
    expect(after.receiverStartLsns.at(-1)).toBe(flushAt);
    // Every byte between the start and now arrived once: received bytes = LSN distance.
    expect(after.receivedBytes).toBe(parseLsn(after.receiveLsn) - parseLsn(flushAt)); // the new walreceiver counts from there
    expect(await c.scalar('s2', 'SELECT count(*) FROM t')).toBe(60000);
    expect(await tableDigests(c, 's2')).toEqual(await tableDigests(c, 'primary'));
    expect(await c.scalar('s2', 'SHOW primary_conninfo')).toBe(r.conninfo);
    expect((await c.sql('s1', 'SELECT application_name FROM pg_stat_replication')).rows).toEqual(
      [],
    );
  });

  it('S1 promoted: S2 (repointed back to S1) follows timeline 2 without restarting its walreceiver; an old base backup follows too', async () => {
    await c.repoint('s2', 's1');
    await c.waitForCatchup('replay', 's2', 's1');
    // A base backup of the primary, taken now (timeline 1) and started only after the promotion.
    await c.addStandby('s3', 'primary');
    await c.stopNode('s3', 'fast');
    await c.sql('primary', 'INSERT INTO t SELECT generate_series(60001, 61000)');
    await c.waitForCatchup('replay', 's2', 'primary');
    await c.stopNode('primary', 'immediate');
    const connectsBefore = (await c.status('s2')).receiverConnects;

    const promoted = (await (
      await c.client('s1')
    ).request({ op: 'promote', wait: true, waitSeconds: 60 })) as { promoted: boolean };
    expect(promoted.promoted).toBe(true);
    expect((await c.status('s1')).timeline).toBe(2);
    await c.sql('s1', 'INSERT INTO t SELECT generate_series(61001, 62000)');
    await c.waitForCatchup('replay', 's2', 's1');
    const s2 = await c.status('s2');
    expect(s2.timeline).toBe(2);
    expect(s2.receiverConnects).toBe(connectsBefore); // same connection
    expect(s2.receiverTimelineSwitches).toBe(1);
    expect((await c.sql('s2', 'SELECT received_tli FROM pg_stat_wal_receiver')).rows).toEqual([
      { received_tli: 2 },
    ]);
    expect(await c.scalar('s2', 'SELECT count(*) FROM t')).toBe(62000);
    expect(await tableDigests(c, 's2')).toEqual(await tableDigests(c, 's1'));
    // S1 now lists s2 as a regular (non-cascading) walsender.
    const rows = (await c.sql('s1', 'SELECT application_name, state FROM pg_stat_replication'))
      .rows;
    expect(rows).toEqual([{ application_name: 's2', state: 'streaming' }]);

    // The old base backup (timeline 1, behind the switch point) streams from S1 and follows.
    await c.repoint('s3', 's1');
    await c.startNode('s3');
    await c.waitForCatchup('replay', 's3', 's1');
    expect((await c.status('s3')).timeline).toBe(2);
    expect(await c.scalar('s3', 'SELECT count(*) FROM t')).toBe(62000);
    expect(await tableDigests(c, 's3')).toEqual(await tableDigests(c, 's1'));
  });
});
