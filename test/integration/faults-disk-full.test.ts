/**
 * The standby's disk is full (real processes; the fault hook `wal_write_fail` makes every WAL
 * segment write fail with ENOSPC for a while, since a read-only directory does not stop root and a
 * size-capped tmpfs needs privileges). Promised: a clear error in status and the log, no damage
 * (nothing half-written is reported, flushed or replayed), a synchronous commit waits instead of
 * being acknowledged, and once writes succeed again the standby streams the rest, catches up and
 * equals the primary, also after a restart.
 * Method: inject the fault, run a remote_write commit on the primary, watch status, then compare.
 */
import { describe, expect, it } from 'vitest';
import { clustersPerTest, withoutBuffered } from '../helpers/cluster.ts';
import { parseLsn } from '../../wal/lsn.ts';

const clusters = clustersPerTest();

describe('standby disk full', () => {
  it('reports the write error, holds synchronous commits, and recovers when writable again', async () => {
    const c = await clusters.start({ synchronousCommit: 'remote_write' });
    await c.sql('primary', 'CREATE TABLE d (c int)');
    await c.sql('primary', 'INSERT INTO d SELECT generate_series(1, 1000)');
    await c.waitForCatchup('replay');
    const before = await c.status('standby');
    await (
      await c.client('standby')
    ).request({ op: 'fault', fault: 'wal_write_fail', holdMs: 1500 });
    let acked = false;
    const insert = c
      .sql('primary', 'INSERT INTO d SELECT generate_series(1001, 21000)')
      .then(() => (acked = true));
    await c.pollUntil(
      async () => (await c.status('standby')).walWriteFailures >= 2,
      'failed writes retried',
    );
    const during = await c.status('standby');
    expect(during.walWriteError).toMatch(
      /^could not write to WAL segment at \d+\/[0-9A-F]+: ENOSPC: no space left on device/,
    );
    expect(during.receiverLastError).toMatch(/ENOSPC/);
    expect(during.receiveLsn).toBe(before.receiveLsn); // nothing half-written counts as received
    expect(during.replayError).toBeNull();
    expect(acked).toBe(false); // remote_write: not acknowledged while the standby cannot write
    expect(await c.scalar('standby', 'SELECT count(*) FROM d')).toBe(1000); // still answers queries
    await insert; // acknowledged once the disk has room again
    await c.waitForCatchup('replay');
    const after = await c.status('standby');
    expect(after.walWriteError).toBeNull();
    expect(after.replayError).toBeNull();
    expect(after.receiverConnects).toBeGreaterThan(before.receiverConnects); // reconnected
    expect(after.faultsInjected.wal_write_fail).toBe(1);
    // Every accepted byte was appended exactly once, contiguously from the first start position.
    expect(after.receivedBytes).toBe(
      parseLsn(after.receiveLsn) - parseLsn(after.receiverStartLsns[0]),
    );
    const p = await (await c.client('primary')).inspect();
    expect(withoutBuffered((await (await c.client('standby')).inspect()).tables)).toEqual(
      withoutBuffered(p.tables),
    );
    // No damage on disk: a crash restart replays the local WAL and still equals the primary.
    await c.kill('standby');
    await c.startNode('standby');
    await c.waitForCatchup('replay');
    const q = await (await c.client('standby')).inspect();
    expect(withoutBuffered(q.tables)).toEqual(withoutBuffered(p.tables));
    expect(q.orphanBuffers).toEqual([]);
    expect(await c.scalar('standby', 'SELECT count(*) FROM d')).toBe(21000);
  });

  it('refuses the fault on a primary (faults are standby-side)', async () => {
    const c = await clusters.start();
    await expect(
      (await c.client('primary')).request({ op: 'fault', fault: 'wal_write_fail', holdMs: 10 }),
    ).rejects.toThrow('wal_write_fail needs a standby with a walreceiver');
  });
});
