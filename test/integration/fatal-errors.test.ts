/**
 * An exception inside redo ends the server process with FATAL, as PostgreSQL's startup process
 * failure stops the postmaster, on a standby (the startup process) and on a primary
 * (redo of a write statement's record: WAL would be ahead of storage). The data directory stays
 * restartable: the next start is crash recovery and the node catches up. Method: the `redo_fail`
 * fault makes the next record a node applies throw an InvariantViolation.
 */
import { describe, expect, it } from 'vitest';
import { clustersPerTest } from '../helpers/cluster.ts';

const clusters = clustersPerTest();

const settle = <T>(p: Promise<T>): Promise<T | Error> =>
  p.then(
    (v) => v,
    (e: Error) => e,
  );

describe('an exception inside redo is FATAL', () => {
  it('standby: the startup process fails inside a record, the server exits 1, a restart replays and catches up', async () => {
    const c = await clusters.start({ synchronousCommit: 'remote_write' });
    await c.sql('primary', 'CREATE TABLE t (c int)');
    await c.waitForCatchup('replay');
    await (await c.client('standby')).request({ op: 'fault', fault: 'redo_fail', holdMs: 0 });
    await c.sql('primary', 'INSERT INTO t SELECT generate_series(1, 1000)'); // remote_write: acknowledged on receipt
    await c.pollUntil(async () => c.pid('standby') === null, 'standby process gone');
    const log = c.serverLog('standby');
    expect(log).toMatch(/FATAL: {2}replay failed: INV-FAULT: injected redo failure/);
    expect(log).toMatch(/server process exiting with exit code 1/);
    await c.startNode('standby');
    expect((await c.status('standby')).startupReplay.crashRecovery).toBe(true);
    await c.waitForCatchup('replay');
    expect(await c.scalar('standby', 'SELECT count(*) FROM t')).toBe(1000);
  });

  it('primary: an InvariantViolation in redo of a write ends the process instead of answering XX000', async () => {
    const c = await clusters.start({ synchronousCommit: 'remote_write' });
    await c.sql('primary', 'CREATE TABLE t (c int)');
    await c.sql('primary', 'INSERT INTO t VALUES (1), (2)');
    await (await c.client('primary')).request({ op: 'fault', fault: 'redo_fail', holdMs: 0 });
    const err = await settle(c.sql('primary', 'INSERT INTO t VALUES (3)'));
    expect(err).toBeInstanceOf(Error);
    expect((err as { code?: string }).code).not.toBe('XX000'); // the session ends with the process
    expect((err as Error).message).toMatch(/connection closed/);
    await c.pollUntil(async () => c.pid('primary') === null, 'primary process gone');
    expect(c.serverLog('primary')).toMatch(
      /FATAL: {2}InvariantViolation: INV-FAULT: injected redo failure/,
    );
    await c.startNode('primary');
    expect((await c.status('primary')).startupReplay.crashRecovery).toBe(true);
    // The failed statement never committed; the node works again and the standby follows.
    expect(await c.scalar('primary', 'SELECT count(*) FROM t')).toBe(2);
    await c.sql('primary', 'INSERT INTO t VALUES (4)');
    await c.pollUntil(
      async () => (await c.status('standby')).receiverState === 'streaming',
      'standby streaming again',
    );
    await c.waitForCatchup('replay');
    expect(await c.scalar('standby', 'SELECT count(*) FROM t')).toBe(3);
  });
});
