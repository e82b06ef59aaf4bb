/**
 * A lifecycle action that throws takes the node's ordinary failure path (lifecycle/lifecycle-actor.ts):
 * an Error is reported to the request that sent the event and the server goes on; an
 * InvariantViolation is FATAL — logged, exit code 1, and the data directory restarts with crash
 * recovery. Method: the `lifecycle_action_error` / `lifecycle_action_invariant` faults make the next
 * action throw; pg_wal_replay_pause() on the standby sends PAUSE, whose action then runs.
 */
import { describe, expect, it } from 'vitest';
import { clustersPerTest } from '../helpers/cluster.ts';

const clusters = clustersPerTest();

const settle = <T>(p: Promise<T>): Promise<T | Error> =>
  p.then(
    (v) => v,
    (e: Error) => e,
  );

describe('a lifecycle action that throws', () => {
  it('an Error goes to the requester; the server keeps running, replicating and taking events', async () => {
    const c = await clusters.start({ synchronousCommit: 'remote_write' });
    await c.sql('primary', 'CREATE TABLE t (c int)');
    await c.waitForCatchup('replay');
    const pid = c.pid('standby');
    await (
      await c.client('standby')
    ).request({ op: 'fault', fault: 'lifecycle_action_error', holdMs: 0 });
    const err = await settle(c.sql('standby', 'SELECT pg_wal_replay_pause()'));
    expect(err).toBeInstanceOf(Error);
    expect((err as Error).message).toMatch(
      /EIO: i\/o error \(injected failure of lifecycle action requestReplayPause\)/,
    );
    expect(c.serverLog('standby')).toMatch(
      /ERROR: {2}internal error: lifecycle action "requestReplayPause" on PAUSE failed/,
    );
    // Same process, machine still running: the transition stood, later events are taken.
    expect(c.pid('standby')).toBe(pid);
    expect(await c.scalar('standby', 'SELECT pg_get_wal_replay_pause_state()')).not.toBe(
      'not paused',
    );
    await c.sql('standby', 'SELECT pg_wal_replay_resume()');
    expect(await c.scalar('standby', 'SELECT pg_get_wal_replay_pause_state()')).toBe('not paused');
    await c.sql('primary', 'INSERT INTO t SELECT generate_series(1, 100)');
    await c.waitForCatchup('replay');
    expect(await c.scalar('standby', 'SELECT count(*) FROM t')).toBe(100);
    const status = await c.status('standby');
    expect(status.faultsInjected.lifecycle_action_error).toBe(1);
    expect(c.serverLog('standby')).not.toMatch(/FATAL/);
  });

  it('an InvariantViolation is FATAL: exit code 1, then a restart runs crash recovery and catches up', async () => {
    const c = await clusters.start({ synchronousCommit: 'remote_write' });
    await c.sql('primary', 'CREATE TABLE t (c int)');
    await c.waitForCatchup('replay');
    await (
      await c.client('standby')
    ).request({ op: 'fault', fault: 'lifecycle_action_invariant', holdMs: 0 });
    const err = await settle(c.sql('standby', 'SELECT pg_wal_replay_pause()'));
    expect(err).toBeInstanceOf(Error);
    expect((err as Error).message).toMatch(/connection closed/); // the session ends with the process
    await c.pollUntil(async () => c.pid('standby') === null, 'standby process gone');
    const log = c.serverLog('standby');
    expect(log).toMatch(
      /FATAL: {2}InvariantViolation: INV-FAULT: injected failure of lifecycle action requestReplayPause/,
    );
    expect(log).toMatch(/server process exiting with exit code 1/);
    await c.startNode('standby');
    expect((await c.status('standby')).startupReplay.crashRecovery).toBe(true);
    await c.sql('primary', 'INSERT INTO t SELECT generate_series(1, 100)'); // remote_write: the standby is back
    await c.waitForCatchup('replay');
    expect(await c.scalar('standby', 'SELECT count(*) FROM t')).toBe(100);
  });

  it("a failed WAL write while promotion writes END_OF_RECOVERY PANICs, as a primary's WAL write does", async () => {
    const c = await clusters.start({ synchronousCommit: 'remote_write' });
    await c.sql('primary', 'CREATE TABLE t (c int)');
    await c.waitForCatchup('replay');
    await c.stopNode('primary', 'immediate');
    await (
      await c.client('standby')
    ).request({ op: 'fault', fault: 'wal_write_fail', holdMs: 600_000 });
    const err = await settle(c.sql('standby', 'SELECT pg_promote()'));
    expect(err).toBeInstanceOf(Error);
    expect((err as Error).message).toMatch(/connection closed/);
    await c.pollUntil(async () => c.pid('standby') === null, 'standby process gone');
    const log = c.serverLog('standby');
    expect(log).toMatch(/FATAL: {2}Error: PANIC: {2}could not write to WAL: ENOSPC/);
    expect(log).toMatch(/server process exiting with exit code 1/);
    expect(log).not.toMatch(/internal error: lifecycle action/);
    // The data directory restarts (crash recovery), still a standby: promotion never completed.
    await c.startNode('standby');
    const st = await c.status('standby');
    expect(st.startupReplay.crashRecovery).toBe(true);
    expect(st.inRecovery).toBe(true);
    expect(await c.scalar('standby', 'SELECT pg_promote()')).toBe(true);
    await c.sql('standby', 'INSERT INTO t VALUES (1)');
    expect(await c.scalar('standby', 'SELECT count(*) FROM t')).toBe(1);
  });
});
