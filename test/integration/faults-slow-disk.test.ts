/**
 * A slow disk on a real server process (fault `slow_disk`: the production binding wraps node:fs
 * in common/latency-disk.ts, the same layer the simulator puts over its in-memory disk).
 * Promised: while the fault holds, the node's WAL writes and fsyncs are delayed (counted in
 * status.slowDisk), commits still complete with the durability their level promises on both
 * roles, and after the hold every operation is at full speed again (the counters stop growing);
 * nothing is damaged (a crash restart replays to the same data). Invalid latencies are refused.
 * Method: inject on the primary, then on the standby under synchronous_commit=on, write, compare
 * counters (never wall-clock durations) and contents.
 */
import { describe, expect, it } from 'vitest';
import { clustersPerTest, withoutBuffered } from '../helpers/cluster.ts';

const clusters = clustersPerTest();

describe('slow disk', () => {
  it('delays WAL writes and fsyncs on either role, loses nothing, and ends with the hold', async () => {
    const c = await clusters.start({ synchronousCommit: 'on' });
    await c.sql('primary', 'CREATE TABLE s (c int)');
    await c.waitForCatchup('replay');
    const primary = await c.client('primary');
    const standby = await c.client('standby');
    expect((await c.status('primary')).slowDisk).toEqual({
      delayedWrites: 0,
      delayedFsyncs: 0,
      delayedMs: 0,
    });

    // Primary: the commit's WAL write and fsync wait 30 ms each.
    await primary.request({ op: 'fault', fault: 'slow_disk', holdMs: 600_000, latencyMs: 30 });
    await c.sql('primary', 'INSERT INTO s SELECT generate_series(1, 500)');
    const p1 = (await c.status('primary')).slowDisk;
    expect(p1.delayedWrites).toBeGreaterThanOrEqual(1);
    expect(p1.delayedFsyncs).toBeGreaterThanOrEqual(1);
    expect(p1.delayedMs).toBe(30 * (p1.delayedWrites + p1.delayedFsyncs));
    expect((await c.status('standby')).slowDisk.delayedFsyncs).toBe(0); // the standby's disk is its own

    // Standby: synchronous_commit=on waits for its flush, which is slow now; the commit still lands.
    await standby.request({ op: 'fault', fault: 'slow_disk', holdMs: 600_000, latencyMs: 20 });
    await c.sql('primary', 'INSERT INTO s SELECT generate_series(501, 1000)');
    const s1 = (await c.status('standby')).slowDisk;
    expect(s1.delayedWrites).toBeGreaterThanOrEqual(1);
    expect(s1.delayedFsyncs).toBeGreaterThanOrEqual(1);
    expect(await c.scalar('standby', 'SELECT count(*) FROM s')).toBe(1000); // on: flushed there, and replayed since
    await c.waitForCatchup('replay');

    // holdMs 0 ends the fault: later writes are not delayed.
    await primary.request({ op: 'fault', fault: 'slow_disk', holdMs: 0 });
    await standby.request({ op: 'fault', fault: 'slow_disk', holdMs: 0 });
    const p2 = (await c.status('primary')).slowDisk;
    const s2 = (await c.status('standby')).slowDisk;
    await c.sql('primary', 'INSERT INTO s SELECT generate_series(1001, 1500)');
    await c.waitForCatchup('replay');
    expect((await c.status('primary')).slowDisk).toEqual(p2);
    expect((await c.status('standby')).slowDisk).toEqual(s2);
    const after = await c.status('primary');
    expect(after.faultsInjected.slow_disk).toBe(2);

    // Nothing damaged: both nodes equal, and a crash restart of each replays to the same data.
    const p = await primary.inspect();
    expect(withoutBuffered((await standby.inspect()).tables)).toEqual(withoutBuffered(p.tables));
    await c.kill('primary');
    await c.startNode('primary');
    expect(await c.scalar('primary', 'SELECT count(*) FROM s')).toBe(1500);
    await c.kill('standby');
    await c.startNode('standby');
    await c.waitForCatchup('replay');
    expect(withoutBuffered((await (await c.client('standby')).inspect()).tables)).toEqual(
      withoutBuffered(p.tables),
    );
  });

  it('refuses a latency out of range or on another fault, naming it', async () => {
    const c = await clusters.start();
    const primary = await c.client('primary');
    await expect(
      primary.request({ op: 'fault', fault: 'slow_disk', holdMs: 10, latencyMs: 5000 }),
    ).rejects.toThrow('"latencyMs" must be an integer between 0 and 1000');
    await expect(
      primary.request({ op: 'fault', fault: 'redo_fail', holdMs: 0, latencyMs: 5 }),
    ).rejects.toThrow('"latencyMs" applies to the slow_disk fault only');
    expect((await c.status('primary')).faultsInjected.slow_disk).toBe(0);
    expect((await primary.status()).role).toBe('primary'); // the connection stays usable
  });
});
