/**
 * After a failover the old primary is fenced, and the "locally committed, not replicated" window is
 * reported, with real processes and the real CLI. Method: at
 * synchronous_commit=on, hold the standby's connection down so a commit waits; crash the primary
 * during the wait; crash recovery of the old primary shows the row; the promoted standby never had
 * it; `cluster start` (all nodes, and `--node primary`) refuses to start the old primary as a second
 * read-write primary and names the commit only it has; `cluster status --json` reports the same;
 * `cluster start --node` starts the promoted node alone.
 */
import { describe, expect, it } from 'vitest';
import { clustersPerTest } from '../helpers/cluster.ts';
import { expectOneLineError, runScript } from '../helpers/cli.ts';

const clusters = clustersPerTest();

const settle = <T>(p: Promise<T>): Promise<T | Error> =>
  p.then(
    (v) => v,
    (e: Error) => e,
  );

describe('failover: fencing the old primary and the locally-committed window', () => {
  it('crash during a synchronous wait: the old primary has the row, the promoted standby does not; the old primary is refused', async () => {
    const c = await clusters.start({ synchronousCommit: 'on' });
    await c.sql('primary', 'CREATE TABLE v (c int)');
    await c.sql('primary', 'INSERT INTO v VALUES (0)');
    await c.waitForCatchup('replay');
    // The standby's connection stays down: the next commit is flushed on the primary and waits.
    await (
      await c.client('standby')
    ).request({ op: 'fault', fault: 'cut_replication', holdMs: 600_000 });
    const waiting = settle(c.sql('primary', 'INSERT INTO v VALUES (1)'));
    await c.pollUntil(
      async () => (await c.status('primary')).syncWaiters === 1,
      'commit waiting for the standby',
    );
    const window = (await c.status('primary')).syncWaitingCommits as Array<{
      xid: number;
      waitFor: string;
    }>;
    expect(window).toHaveLength(1);
    expect(window[0]!.waitFor).toBe('flush');
    const xid = window[0]!.xid;
    // Other sessions do not see it while it waits.
    expect(await c.scalar('primary', 'SELECT count(*) FROM v')).toBe(1);
    await c.kill('primary');
    expect(await waiting).toBeInstanceOf(Error); // never acknowledged
    // Crash recovery of the old primary replays the commit record: the row is there.
    await c.startNode('primary');
    expect((await c.status('primary')).startupReplay.crashRecovery).toBe(true);
    expect(await c.scalar('primary', 'SELECT count(*) FROM v')).toBe(2);
    await c.stopNode('primary', 'immediate');
    // The standby never received it; promoted, it has only the first row.
    await (await c.client('standby')).request({ op: 'promote', wait: true, waitSeconds: 60 });
    expect(await c.scalar('standby', 'SELECT count(*) FROM v')).toBe(1);
    expect((await c.status('standby')).timeline).toBe(2);

    // `cluster start` starts what may start and refuses the old primary (split brain).
    const all = await runScript('cluster.ts', ['start', '--dir', c.dir]);
    const refusal = expectOneLineError(
      all,
      /^error: node "primary" was a primary on timeline 1, but node "standby" has since been promoted \(timeline 2, forked off timeline 1 at \d+\/[0-9A-F]+\)/,
      1,
    );
    expect(refusal).toMatch(/split brain/);
    expect(refusal).toContain(
      `1 commit exists only on "primary" (committed locally, never replicated to "standby"): xid ${xid} at `,
    );
    expect(refusal).toMatch(
      /It cannot rejoin "standby" as a standby \(PostgreSQL would need pg_rewind, which walsim does not implement\)/,
    );
    expect(c.pid('primary')).toBeNull();
    const one = await runScript('cluster.ts', ['start', '--node', 'primary', '--dir', c.dir]);
    expect(expectOneLineError(one, /split brain/, 1)).toBe(refusal);
    expect(c.pid('primary')).toBeNull();

    // status reports the window for the stopped old primary.
    const st = await runScript('cluster.ts', ['status', '--json', '--dir', c.dir]);
    expect(st.code).toBe(0);
    expect(st.json.nodes.primary).toMatchObject({
      running: false,
      divergedFrom: {
        node: 'primary',
        timeline: 1,
        newerNode: 'standby',
        newerTimeline: 2,
        commits: [{ xid }],
      },
    });
    expect(st.json.nodes.standby.divergedFrom).toBeUndefined();

    // `cluster start --node` starts one node of an existing cluster: stop the promoted node, start it alone.
    await c.stopNode('standby', 'fast');
    const again = await runScript('cluster.ts', ['start', '--node', 'standby', '--dir', c.dir]);
    expect(again.code, again.stderr).toBe(0);
    expect(again.stdout).toMatch(/^standby: started/m);
    expect(c.pid('standby')).not.toBeNull();
    expect(c.pid('primary')).toBeNull();
    expect(await c.scalar('standby', 'SELECT count(*) FROM v')).toBe(1);
    const running = await runScript('cluster.ts', ['start', '--node', 'standby', '--dir', c.dir]);
    expect(running.code).toBe(1);
    expect(running.stdout).toMatch(/standby: already running/);
    const unknown = await runScript('cluster.ts', ['start', '--node', 'nosuch', '--dir', c.dir]);
    expect(expectOneLineError(unknown, /^error: no node "nosuch"/, 2)).toBe(
      `error: no node "nosuch" in ${c.dir} (nodes: primary, standby)`,
    );
  });
});
