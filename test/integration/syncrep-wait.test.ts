/**
 * A commit waiting for its synchronous standby (syncrep.c SyncRepWaitForLSN), with real processes:
 * a fast stop of the primary ends the wait with PostgreSQL's WARNING (57P01) instead of hanging
 * (issue 9 item 3); the commit stands locally and is visible after the restart; a write queued
 * behind the waiting one never runs.
 */
import { afterEach, describe, expect, it } from 'vitest';
import { TestCluster } from '../helpers/cluster.ts';
import { ControlError } from '../../server/control-client.ts';

let cluster: TestCluster | null = null;
afterEach(async () => {
  await cluster?.destroy();
  cluster = null;
});

const DETAIL = 'The transaction has already committed locally, but might not have been replicated to the standby.';

/** The statement's outcome without throwing: its result or its error. */
const settle = <T>(p: Promise<T>): Promise<T | Error> => p.then((v) => v, (e: Error) => e);

describe('a commit waiting for synchronous replication', () => {
  it('fast stop of the primary ends the wait with the WARNING, does not hang, and keeps the local commit', async () => {
    const c = (cluster = await TestCluster.start({ synchronousCommit: 'on' }));
    await c.sql('primary', 'CREATE TABLE v (c int)');
    await c.stopNode('standby', 'fast');
    const waiting = settle(c.sql('primary', 'INSERT INTO v VALUES (1)'));
    await c.pollUntil(async () => (await c.status('primary')).syncWaiters === 1, 'commit waiting for the standby');
    // A second write queues behind the first (writes run one at a time) on its own session.
    const other = await (await import('../../server/control-client.ts')).ControlClient.connect(
      '127.0.0.1', (await c.status('primary')).port as number, (await import('node:fs')).readFileSync(`${c.dir}/token`, 'utf8').trim());
    const queued = settle(other.sql('INSERT INTO v VALUES (2)'));
    expect(await c.stopNode('primary', 'fast')).toBe(true);
    const err = await waiting;
    expect(err).toBeInstanceOf(ControlError);
    expect(err).toMatchObject({
      code: '57P01', severity: 'WARNING', detail: DETAIL,
      message: 'canceling the wait for synchronous replication and terminating connection due to administrator command',
    });
    expect(await queued).toMatchObject({ code: '57P01', message: 'terminating connection due to administrator command' });
    other.close();
    await c.startNode('primary');
    // Committed locally before the wait: after the restart the row is there; the queued one never ran.
    expect(await c.scalar('primary', 'SELECT count(*) FROM v')).toBe(1);
    await c.startNode('standby');
    await c.waitForCatchup('replay');
    expect(await c.scalar('standby', 'SELECT count(*) FROM v')).toBe(1);
  });
});
