/**
 * pg_ctl's stop modes (real processes): smart waits for open sessions to end and refuses new ones,
 * a fast request during a smart wait takes over, and both end with a shutdown checkpoint that the
 * standby receives. Method: signal the primary's pid as pg_ctl does (SIGTERM smart, SIGINT fast).
 */
import { readFileSync } from 'node:fs';
import * as path from 'node:path';
import { beforeAll, describe, expect, it } from 'vitest';
import { clustersPerSuite, TestCluster } from '../helpers/cluster.ts';
import { ControlClient } from '../../server/control-client.ts';
import { readPidFile, readToken } from '../../server/cluster-files.ts';
import { parseLsn } from '../../wal/lsn.ts';

function alive(pid: number): boolean {
  try {
    process.kill(pid, 0);
    return true;
  } catch {
    return false;
  }
}

describe('stop modes', () => {
  const clusters = clustersPerSuite();
  let c: TestCluster;
  beforeAll(async () => {
    c = await clusters.start({ sharedBuffers: '16MB' });
    await c.sql('primary', 'CREATE TABLE s (c int)');
    await c.sql('primary', 'INSERT INTO s SELECT generate_series(1, 1000)');
  });

  /**
   * pg_ctl stop -m smart, then wait for the event that proves the signal was handled: the server's
   * log line saying it waits for its open sessions (server/main.ts waitForSessions).
   */
  async function smartStopAndWait(pid: number): Promise<void> {
    const from = c.serverLog('primary').length;
    process.kill(pid, 'SIGTERM');
    await c.pollUntil(
      async () =>
        /smart shutdown waits for \d+ session\(s\) to end/.test(c.serverLog('primary').slice(from)),
      'the primary to log its smart-shutdown wait',
    );
  }

  const connect = () =>
    ControlClient.connect('127.0.0.1', readPidFile(c.dataDir('primary'))!.port, readToken(c.dir));

  it('smart waits for open sessions, refuses new ones, then shuts down with a checkpoint the standby gets', async () => {
    await c.stopNode('primary', 'fast'); // drop the harness's cached session
    await c.startNode('primary');
    // The standby reconnects with backoff (up to 2 s): only a connected standby can receive the
    // shutdown checkpoint, so wait for it before the smart stop (the test raced it before).
    const probe = await connect(); // not the harness's cached session: smart would wait for it
    await c.pollUntil(
      async () =>
        ((await probe.status()).replication as Array<{ state: string }>).some(
          (r) => r.state === 'streaming',
        ),
      'standby streaming again',
    );
    probe.close();
    const session = await connect();
    const pid = c.pid('primary')!;
    await smartStopAndWait(pid);
    // No fixed sleep to prove it did not exit: the server has logged that it waits, and a stop that
    // did not wait would already be shutting the node down, so this query on the open session
    // would fail (57P03 or a closed connection). The open session keeps working; a new one is
    // refused.
    expect(alive(pid)).toBe(true);
    expect((await session.sql('SELECT count(*) FROM s')).rows[0]).toEqual({ count: 1000 });
    await expect(connect()).rejects.toThrow(/shutting down/);
    session.close();
    await c.pollUntil(async () => !alive(pid), 'the primary to exit after its last session ended');
    const control = JSON.parse(
      readFileSync(path.join(c.dataDir('primary'), 'global', 'pg_control'), 'utf8'),
    );
    expect(control.state).toBe('shut down');
    // The walsender delivered the shutdown checkpoint before exiting.
    const s = await c.status('standby');
    expect(parseLsn(String(s.receiveLsn))).toBeGreaterThan(control.checkpointLsn);
  });

  it('a fast request during a smart wait takes over', async () => {
    await c.startNode('primary');
    const session = await connect();
    const pid = c.pid('primary')!;
    await smartStopAndWait(pid);
    expect(alive(pid)).toBe(true);
    process.kill(pid, 'SIGINT');
    await c.pollUntil(async () => !alive(pid), 'the primary to exit on the fast request');
    session.close();
    // The fast request found the smart wait (not a plain fast stop of a server that had not yet
    // seen the SIGTERM).
    expect(c.serverLog('primary')).toContain(
      'received fast shutdown request during smart shutdown',
    );
    await c.startNode('primary');
    expect(await c.scalar('primary', 'SELECT count(*) FROM s')).toBe(1000);
    expect((await c.status('primary')).startupReplay.crashRecovery).toBe(false);
  });
});
