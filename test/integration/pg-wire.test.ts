/**
 * The PostgreSQL wire protocol with node-postgres as the client (real processes on 127.0.0.1).
 * Method: run every statement and function of walsim's SQL subset through `pg` against a primary
 * and its standby, check command tags, column names, type OIDs and text values against
 * PostgreSQL's, compare results with the control endpoint's (one executor), and check errors carry
 * PostgreSQL's SQLSTATE; then drive pause, resume and promotion through SQL alone.
 */
import * as net from 'node:net';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { clustersPerSuite, TestCluster } from '../helpers/cluster.ts';
import { runScript } from '../helpers/cli.ts';

/** pg_type OIDs PostgreSQL uses for these results. */
const OID = { bool: 16, int8: 20, text: 25, json: 114, void: 2278, pg_lsn: 3220 } as const;

async function connect(
  c: TestCluster,
  node: 'primary' | 'standby',
  opts: Partial<pg.ClientConfig> = {},
): Promise<pg.Client> {
  const client = new pg.Client({
    host: '127.0.0.1',
    port: c.pgPort(node),
    user: 'postgres',
    database: 'postgres',
    ...opts,
  });
  client.on('error', () => {}); // a FATAL from the server ends the client; tests look at the query's rejection
  await client.connect();
  return client;
}

/** A query sent with the extended protocol (Parse/Bind/Describe/Execute/Sync); @types/pg lacks the options. */
function extended(
  client: pg.Client,
  text: string,
  extra: { binary?: boolean } = {},
): Promise<pg.QueryResult> {
  const config = { text, queryMode: 'extended', ...extra };
  return client.query(config as pg.QueryConfig);
}

async function sqlstateOf(
  p: Promise<unknown>,
): Promise<{ code: string; severity: string; message: string }> {
  try {
    await p;
  } catch (e) {
    const err = e as { code: string; severity: string; message: string };
    return { code: err.code, severity: err.severity, message: err.message };
  }
  throw new Error('expected the statement to fail');
}

describe('PostgreSQL wire protocol (node-postgres)', () => {
  const clusters = clustersPerSuite();
  let c: TestCluster;
  let primary: pg.Client;
  let standby: pg.Client;

  beforeAll(async () => {
    c = await clusters.start();
    primary = await connect(c, 'primary');
    standby = await connect(c, 'standby');
  });
  afterAll(async () => {
    await primary?.end().catch(() => {});
    await standby?.end().catch(() => {});
  });

  it("shows each node's PostgreSQL port in cluster status --json", async () => {
    const run = await runScript('cluster.ts', ['status', '--json', '--dir', c.dir]);
    expect(run.code).toBe(0);
    expect(run.json.nodes.primary.pgPort).toBe(c.pgPort('primary'));
    expect(run.json.nodes.standby.pgPort).toBe(c.pgPort('standby'));
    expect(c.pgPort('primary')).not.toBe(c.pgPort('standby'));
  });

  it('runs every write statement with PostgreSQL command tags', async () => {
    const tags: string[] = [];
    const run = async (sql: string) => {
      const r = await primary.query(sql);
      tags.push(`${r.command} ${r.rowCount ?? ''}`.trim());
    };
    await run('CREATE TABLE w (c int)');
    await run('INSERT INTO w SELECT generate_series(1, 5000)');
    await run('INSERT INTO w VALUES (7), (8), (9)');
    await run('DELETE FROM w WHERE c > 4000');
    await run('DELETE FROM w WHERE c = 7');
    await run('VACUUM w');
    await run('CREATE TABLE w2 (c integer)');
    await run('TRUNCATE TABLE w2');
    await run('TRUNCATE w2, w2');
    await run('CHECKPOINT');
    await run('DROP TABLE w2');
    await run('DROP TABLE IF EXISTS w2');
    await run('VACUUM');
    expect(tags).toEqual([
      'CREATE',
      'INSERT 5000',
      'INSERT 3',
      'DELETE 1000',
      'DELETE 2',
      'VACUUM',
      'CREATE',
      'TRUNCATE',
      'TRUNCATE',
      'CHECKPOINT',
      'DROP',
      'DROP',
      'VACUUM',
    ]);
    const count = await primary.query('SELECT count(*) FROM w');
    expect(count.fields.map((f) => [f.name, f.dataTypeID])).toEqual([['count', OID.int8]]);
    expect(count.rows).toEqual([{ count: '4001' }]); // int8 arrives as text in node-postgres, as from PostgreSQL
    expect((await primary.query('SELECT count(*) FROM w WHERE c < 100')).rows).toEqual([
      { count: '100' },
    ]); // 1..99 - 7 + 8, 9
  });

  it('answers functions and settings with PostgreSQL names, types and text forms', async () => {
    const q = async (client: pg.Client, sql: string) => {
      const r = await client.query(sql);
      return {
        field: [r.fields[0]!.name, r.fields[0]!.dataTypeID],
        value: Object.values(r.rows[0]!)[0],
        command: r.command,
      };
    };
    expect(await q(primary, 'SELECT pg_is_in_recovery()')).toEqual({
      field: ['pg_is_in_recovery', OID.bool],
      value: false,
      command: 'SELECT',
    });
    expect(await q(standby, 'SELECT pg_catalog.pg_is_in_recovery()')).toEqual({
      field: ['pg_is_in_recovery', OID.bool],
      value: true,
      command: 'SELECT',
    });
    const lsn = await q(primary, 'SELECT pg_current_wal_lsn()');
    expect(lsn.field).toEqual(['pg_current_wal_lsn', OID.pg_lsn]);
    expect(lsn.value).toMatch(/^[0-9A-F]+\/[0-9A-F]+$/);
    expect((await q(primary, 'SELECT pg_current_wal_flush_lsn()')).field).toEqual([
      'pg_current_wal_flush_lsn',
      OID.pg_lsn,
    ]);
    expect(await q(primary, 'SELECT pg_last_wal_receive_lsn()')).toEqual({
      field: ['pg_last_wal_receive_lsn', OID.pg_lsn],
      value: null,
      command: 'SELECT',
    });
    expect((await q(standby, 'SELECT pg_last_wal_replay_lsn()')).value).toMatch(
      /^[0-9A-F]+\/[0-9A-F]+$/,
    );
    expect((await q(standby, 'SELECT pg_last_wal_receive_lsn()')).value).toMatch(
      /^[0-9A-F]+\/[0-9A-F]+$/,
    );
    expect(await q(standby, 'SELECT pg_is_wal_replay_paused()')).toEqual({
      field: ['pg_is_wal_replay_paused', OID.bool],
      value: false,
      command: 'SELECT',
    });
    expect(await q(standby, 'SELECT pg_get_wal_replay_pause_state()')).toEqual({
      field: ['pg_get_wal_replay_pause_state', OID.text],
      value: 'not paused',
      command: 'SELECT',
    });
    expect(await q(primary, 'SHOW shared_buffers')).toEqual({
      field: ['shared_buffers', OID.text],
      value: '16MB',
      command: 'SHOW',
    });
    expect((await q(primary, 'SHOW server_version_num')).value).toBe('150000');
    expect((await q(standby, 'SHOW transaction_read_only')).value).toBe('on');
    expect((await q(primary, 'SHOW port')).value).toBe(String(c.pgPort('primary')));
    expect(await q(primary, "SELECT current_setting('synchronous_commit')")).toEqual({
      field: ['current_setting', OID.text],
      value: 'remote_write',
      command: 'SELECT',
    });
    expect((await q(primary, "SELECT current_setting('no_such_thing', true)")).value).toBe(null);
    expect((await q(primary, 'SELECT version()')).value).toMatch(/^PostgreSQL 15\.0 \(walsim\) /);
    // walsim's extension: no promotion on this node yet.
    expect(await q(standby, 'SELECT walsim_failover_report()')).toEqual({
      field: ['walsim_failover_report', OID.json],
      value: null,
      command: 'SELECT',
    });
  });

  it("answers pg_relation_size() in bytes of the main fork, with regclass input's name rules", async () => {
    await primary.query('CREATE TABLE rs (c int)');
    await primary.query('CREATE TABLE rs_empty (c int, d text)');
    await primary.query(`INSERT INTO rs SELECT generate_series(1, ${3 * 226})`);
    const size = await primary.query("SELECT pg_relation_size('rs')");
    expect(size.fields.map((f) => [f.name, f.dataTypeID])).toEqual([
      ['pg_relation_size', OID.int8],
    ]);
    expect(size.rows).toEqual([{ pg_relation_size: String(3 * 8192) }]);
    expect((await primary.query("SELECT pg_relation_size('RS')")).rows).toEqual([
      { pg_relation_size: String(3 * 8192) },
    ]); // unquoted: folded
    expect((await primary.query("SELECT pg_relation_size('public.rs_empty')")).rows).toEqual([
      { pg_relation_size: '0' },
    ]);
    expect(await sqlstateOf(primary.query(`SELECT pg_relation_size('"RS"')`))).toMatchObject({
      code: '42P01',
      message: 'relation "RS" does not exist',
    });
    expect(await sqlstateOf(primary.query("SELECT pg_relation_size('nope')"))).toMatchObject({
      code: '42P01',
      message: 'relation "nope" does not exist',
    });
    expect((await sqlstateOf(primary.query('SELECT pg_relation_size(1, 2)'))).code).toBe('42883');
    await c.waitForCatchup('replay');
    expect((await standby.query("SELECT pg_relation_size('rs')")).rows).toEqual([
      { pg_relation_size: String(3 * 8192) },
    ]);
  });

  it('gives the same results as the control endpoint (one executor)', async () => {
    for (const sql of [
      'SELECT count(*) FROM w',
      'SHOW synchronous_commit',
      'SELECT pg_is_in_recovery()',
      'SELECT pg_current_wal_lsn()',
    ]) {
      const viaControl = await c.sql('primary', sql);
      const viaWire = await primary.query({ text: sql, rowMode: 'array' });
      expect(viaWire.fields.map((f) => f.name)).toEqual(viaControl.columns);
      const controlText = viaControl.rows.map((r) =>
        viaControl.columns.map((k) => (r[k] === null ? null : String(r[k]))),
      );
      const wireText = viaWire.rows.map((r: unknown[]) =>
        r.map((v) => (v === null ? null : String(v))),
      );
      expect(wireText).toEqual(controlText);
    }
  });

  it('reports errors with SQLSTATE and severity, and the session stays usable', async () => {
    expect(await sqlstateOf(primary.query('SELECT count(*) FROM nope'))).toEqual({
      code: '42P01',
      severity: 'ERROR',
      message: 'relation "nope" does not exist',
    });
    expect((await sqlstateOf(primary.query('SELEC 1'))).code).toBe('42601');
    expect((await sqlstateOf(primary.query('CREATE TABLE w (c int)'))).code).toBe('42P07');
    expect((await sqlstateOf(primary.query('SELECT no_such_function()'))).code).toBe('42883');
    expect((await sqlstateOf(primary.query('SHOW no_such_setting'))).code).toBe('42704');
    expect((await sqlstateOf(primary.query('SELECT pg_wal_replay_pause()'))).code).toBe('55000');
    expect((await sqlstateOf(standby.query('SELECT pg_current_wal_lsn()'))).code).toBe('55000');
    expect(await sqlstateOf(standby.query('INSERT INTO w VALUES (1)'))).toEqual({
      code: '25006',
      severity: 'ERROR',
      message: 'cannot execute INSERT in a read-only transaction',
    });
    expect((await sqlstateOf(standby.query('VACUUM w'))).code).toBe('25006');
    expect((await sqlstateOf(standby.query('CREATE TABLE s (c int)'))).code).toBe('25006');
    expect((await primary.query('SELECT pg_is_in_recovery()')).rows).toEqual([
      { pg_is_in_recovery: false },
    ]);
    expect((await standby.query('SELECT pg_is_in_recovery()')).rows).toEqual([
      { pg_is_in_recovery: true },
    ]);
  });

  it('runs a query string of several statements like exec_simple_query', async () => {
    const results = (await primary.query(
      'CREATE TABLE m (c int); INSERT INTO m VALUES (1), (2); SELECT count(*) FROM m',
    )) as unknown as pg.QueryResult[];
    expect(results.map((r) => r.command)).toEqual(['CREATE', 'INSERT', 'SELECT']);
    expect(results[2]!.rows).toEqual([{ count: '2' }]);
    // The whole string is parsed first: a syntax error in the second statement runs nothing.
    expect((await sqlstateOf(primary.query('INSERT INTO m VALUES (3); SELEC'))).code).toBe('42601');
    expect((await primary.query('SELECT count(*) FROM m')).rows).toEqual([{ count: '2' }]);
    // Several statements form an implicit transaction block, where VACUUM cannot run.
    expect(await sqlstateOf(primary.query('INSERT INTO m VALUES (3); VACUUM m'))).toMatchObject({
      code: '25001',
      message: 'VACUUM cannot run inside a transaction block',
    });
    expect((await primary.query('SELECT count(*) FROM m')).rows).toEqual([{ count: '2' }]);
    // Empty statements are ignored; an empty string is an empty query.
    expect((await primary.query(';; SELECT count(*) FROM m; ;')).rows).toEqual([{ count: '2' }]);
    expect((await primary.query('')).command).toBe(null);
  });

  it('speaks the extended protocol for parameterless statements (named, row mode, re-use)', async () => {
    const named = { name: 'count_m', text: 'SELECT count(*) FROM m', rowMode: 'array' as const };
    expect((await primary.query(named)).rows).toEqual([['2']]);
    await primary.query('INSERT INTO m VALUES (5)');
    expect((await primary.query(named)).rows).toEqual([['3']]); // the prepared statement runs again
    const ext = await extended(primary, 'SELECT pg_is_in_recovery()');
    expect(ext.fields.map((f) => [f.name, f.dataTypeID])).toEqual([
      ['pg_is_in_recovery', OID.bool],
    ]);
    expect((await extended(primary, 'INSERT INTO m VALUES (6)')).rowCount).toBe(1);
    expect((await sqlstateOf(extended(primary, 'SELECT count(*) FROM nowhere'))).code).toBe(
      '42P01',
    );
    expect(
      (
        await sqlstateOf(
          primary.query({ text: 'SELECT count(*) FROM m WHERE c = $1', values: [1] }),
        )
      ).code,
    ).toBe('0A000'); // parameters are not supported by walsim
    expect(
      (await sqlstateOf(extended(primary, 'SELECT count(*) FROM m', { binary: true }))).code,
    ).toBe('0A000');
    expect((await standby.query({ name: 'rec', text: 'SELECT pg_is_in_recovery()' })).rows).toEqual(
      [{ pg_is_in_recovery: true }],
    );
    expect((await sqlstateOf(extended(standby, 'DELETE FROM m'))).code).toBe('25006');
    expect((await primary.query('SELECT count(*) FROM m')).rows).toEqual([{ count: '4' }]);
  });

  it('pauses, resumes and promotes through SQL; the session sees in_hot_standby change', async () => {
    const reported: string[] = [];
    const watcher = new pg.Client({
      host: '127.0.0.1',
      port: c.pgPort('standby'),
      user: 'postgres',
    });
    (
      watcher as unknown as {
        connection: {
          on(ev: string, f: (m: { parameterName: string; parameterValue: string }) => void): void;
        };
      }
    ).connection.on(
      'parameterStatus',
      (m) => m.parameterName === 'in_hot_standby' && reported.push(m.parameterValue),
    );
    await watcher.connect();
    await primary.query('CREATE TABLE f (c int)');
    await primary.query('INSERT INTO f SELECT generate_series(1, 100)');
    await c.waitForCatchup('replay');
    await standby.query('SELECT pg_wal_replay_pause()');
    await c.pollUntil(
      async () =>
        (await standby.query('SELECT pg_get_wal_replay_pause_state()')).rows[0]
          .pg_get_wal_replay_pause_state === 'paused',
      'paused',
    );
    const replayLsn = (await standby.query('SELECT pg_last_wal_replay_lsn()')).rows[0]
      .pg_last_wal_replay_lsn;
    await primary.query('DELETE FROM f');
    await c.waitForCatchup('flush');
    expect(
      (await standby.query('SELECT pg_last_wal_receive_lsn()')).rows[0].pg_last_wal_receive_lsn,
    ).not.toBe(replayLsn);
    expect(
      (await standby.query('SELECT pg_last_wal_replay_lsn()')).rows[0].pg_last_wal_replay_lsn,
    ).toBe(replayLsn);
    expect((await standby.query('SELECT count(*) FROM f')).rows).toEqual([{ count: '100' }]);
    await c.stopNode('primary', 'immediate');
    await standby.query('SELECT pg_wal_replay_resume()');
    const promoted = await standby.query('SELECT pg_promote()');
    expect(promoted.rows).toEqual([{ pg_promote: true }]);
    expect(promoted.fields[0]!.dataTypeID).toBe(OID.bool);
    expect((await standby.query('SELECT pg_is_in_recovery()')).rows).toEqual([
      { pg_is_in_recovery: false },
    ]);
    expect((await standby.query('SELECT count(*) FROM f')).rows).toEqual([{ count: '0' }]);
    expect((await standby.query('INSERT INTO f VALUES (1)')).rowCount).toBe(1);
    expect((await sqlstateOf(standby.query('SELECT pg_promote()'))).code).toBe('55000');
    // walsim's extension: the node's failover report (counts, no seconds), as json.
    const report = (await standby.query('SELECT walsim_failover_report()')).rows[0]
      .walsim_failover_report;
    const served = (await c.status('standby')).failover;
    expect(report).toMatchObject({
      newTimeline: 2,
      failoverMs: served.failoverMs,
      resumeAt: served.resumeAt,
      promotedAt: served.promotedAt,
      counts: served.counts,
    });
    expect(report.failoverMs).toBeGreaterThan(0);
    // Counts only: the server never prices; the client does, once, with the profile it was given.
    expect(report).not.toHaveProperty('model');
    await watcher.query('SELECT pg_is_in_recovery()'); // any round trip: the report comes before ReadyForQuery
    expect(reported).toEqual(['on', 'off']);
    await watcher.end();
  });
});

/** A CancelRequest for `client`'s session, sent on a new connection as libpq's PQcancel does. */
function sendCancel(port: number, client: pg.Client): Promise<void> {
  const { processID, secretKey } = client as unknown as { processID: number; secretKey: number };
  const packet = Buffer.alloc(16);
  packet.writeInt32BE(16, 0);
  packet.writeInt32BE(80877102, 4);
  packet.writeInt32BE(processID, 8);
  packet.writeInt32BE(secretKey, 12);
  return new Promise((resolve, reject) => {
    const s = net.connect(port, '127.0.0.1', () => s.write(packet));
    s.on('close', () => resolve()); // the server answers a cancel request by closing
    s.on('error', reject);
  });
}

describe('cancel requests (node-postgres)', () => {
  const clusters = clustersPerSuite();
  let c: TestCluster;

  beforeAll(async () => {
    c = await clusters.start({ synchronousCommit: 'remote_apply' });
  });

  /**
   * PostgreSQL's SyncRepWaitForLSN on a cancel: the commit stands, the statement returns with a
   * WARNING. Method: pause replay on the standby so a remote_apply commit waits, cancel it.
   */
  it("ends a commit's synchronous-replication wait with PostgreSQL's WARNING; the rows stay", async () => {
    const primary = await connect(c, 'primary');
    const notices: Array<{ severity?: string; code?: string; message: string; detail?: string }> =
      [];
    primary.on('notice', (n) =>
      notices.push({
        severity: n.severity,
        code: n.code,
        message: n.message ?? '',
        detail: n.detail,
      }),
    );
    await primary.query('CREATE TABLE k (c int)');
    await c.sql('standby', 'SELECT pg_wal_replay_pause()');
    await c.pollUntil(
      async () =>
        (await c.scalar('standby', 'SELECT pg_get_wal_replay_pause_state()')) === 'paused',
      'paused',
    );
    let settled = false;
    const insert = primary
      .query('INSERT INTO k VALUES (1), (2), (3)')
      .finally(() => (settled = true));
    await c.pollUntil(
      async () => (await c.status('primary')).syncWaiters === 1,
      'the commit to wait for the standby',
    );
    expect(settled).toBe(false);
    // A cancel with the wrong key changes nothing.
    const wrong = Object.assign(Object.create(primary) as pg.Client, { secretKey: 1 });
    await sendCancel(c.pgPort('primary'), wrong);
    expect((await c.status('primary')).syncWaiters).toBe(1);
    await sendCancel(c.pgPort('primary'), primary);
    const r = await insert;
    expect(r.rowCount).toBe(3);
    expect(notices).toEqual([
      {
        severity: 'WARNING',
        code: '01000',
        message: 'canceling wait for synchronous replication due to user request',
        detail:
          'The transaction has already committed locally, but might not have been replicated to the standby.',
      },
    ]);
    expect((await primary.query('SELECT count(*) FROM k')).rows).toEqual([{ count: '3' }]);
    await c.sql('standby', 'SELECT pg_wal_replay_resume()');
    await primary.end();
  });

  it('smart shutdown waits for PostgreSQL-port sessions and refuses new ones (57P03); fast ends them (57P01)', async () => {
    await c.stopNode('primary', 'fast'); // drops the harness's cached control session
    await c.startNode('primary');
    const session = await connect(c, 'primary');
    const pid = c.pid('primary')!;
    process.kill(pid, 'SIGTERM'); // pg_ctl stop -m smart
    /** A new connection's refusal, or null (closing it) if it was accepted: the signal may not have arrived yet. */
    const refusal = async () => {
      const probe = new pg.Client({
        host: '127.0.0.1',
        port: c.pgPort('primary'),
        user: 'postgres',
      });
      probe.on('error', () => {});
      try {
        await probe.connect();
        await probe.end();
        return null;
      } catch (e) {
        return e as { code?: string; severity?: string; message: string };
      }
    };
    await c.pollUntil(async () => (await refusal())?.code === '57P03', 'new sessions refused');
    expect(await refusal()).toMatchObject({
      code: '57P03',
      severity: 'FATAL',
      message: 'the database system is shutting down',
    });
    expect((await session.query('SELECT count(*) FROM k')).rows).toEqual([{ count: '3' }]); // the open session still works
    expect(c.pid('primary')).toBe(pid);
    await session.end();
    await c.pollUntil(
      async () => c.pid('primary') === null,
      'the primary to exit after its last session ended',
    );
    // Fast: the standby's session is ended with PostgreSQL's FATAL.
    const standby = await connect(c, 'standby');
    const ended = new Promise<{ code?: string; message: string }>((resolve) =>
      standby.on('error', (e) => resolve(e as { code?: string; message: string })),
    );
    await c.stopNode('standby', 'fast');
    expect(await ended).toMatchObject({
      code: '57P01',
      message: 'terminating connection due to administrator command',
    });
  });
});
