/**
 * Bad input gets a clear error and loses nothing (real processes): unknown statements, unknown
 * tables, writes on a standby, malformed control frames, wrong or missing tokens, a garbage
 * replication frame. After each, the server keeps serving and its data is unchanged.
 */
import WebSocket from 'ws';
import { beforeAll, describe, expect, it } from 'vitest';
import { clustersPerSuite, TestCluster } from '../helpers/cluster.ts';
import { ControlClient } from '../../server/control-client.ts';
import { readPidFile } from '../../server/cluster-files.ts';

function closeOf(
  url: string,
  headers: Record<string, string>,
  send?: Buffer,
): Promise<{ code: number; reason: string }> {
  return new Promise((resolve, reject) => {
    const ws = new WebSocket(url, { headers, perMessageDeflate: false });
    ws.on('open', () => send && ws.send(send));
    ws.on('close', (code, reason) => resolve({ code, reason: reason.toString() }));
    ws.on('error', reject);
  });
}

describe('bad input', () => {
  const clusters = clustersPerSuite();
  let c: TestCluster;
  let port: number;
  beforeAll(async () => {
    c = await clusters.start({ sharedBuffers: '16MB', synchronousCommit: 'remote_apply' });
    await c.sql('primary', 'CREATE TABLE t (c int)');
    await c.sql('primary', 'INSERT INTO t SELECT generate_series(1, 500)');
    port = readPidFile(c.dataDir('primary'))!.port;
  });

  it('refuses bad statements with PostgreSQL errors and keeps the data', async () => {
    await expect(c.sql('primary', 'SELEC 1')).rejects.toMatchObject({ code: '42601' });
    await expect(c.sql('primary', 'SELECT count(*) FROM nope')).rejects.toMatchObject({
      code: '42P01',
      message: 'relation "nope" does not exist',
    });
    await expect(c.sql('primary', 'INSERT INTO nope VALUES (1)')).rejects.toMatchObject({
      code: '42P01',
    });
    await expect(c.sql('primary', 'CREATE TABLE t (c int)')).rejects.toMatchObject({
      code: '42P07',
    });
    await expect(c.sql('primary', 'INSERT INTO t VALUES (99999999999)')).rejects.toMatchObject({
      code: '22003',
    });
    await expect(c.sql('primary', 'TRUNCATE t, nope')).rejects.toMatchObject({ code: '42P01' });
    await expect(c.sql('standby', 'INSERT INTO t VALUES (1)')).rejects.toMatchObject({
      code: '25006',
      message: 'cannot execute INSERT in a read-only transaction',
    });
    await expect(c.sql('standby', 'VACUUM t')).rejects.toMatchObject({ code: '25006' });
    await expect(c.sql('standby', 'SELECT pg_no_such_function()')).rejects.toMatchObject({
      code: '42883',
    });
    // remote_apply: the acknowledged insert is visible on the standby as soon as it returns.
    expect(await c.scalar('standby', 'SELECT count(*) FROM t')).toBe(500);
    expect(await c.scalar('primary', 'SELECT count(*) FROM t')).toBe(500);
  });

  it('answers malformed control frames with an error and keeps the connection', async () => {
    const raw = await ControlClient.connect(
      '127.0.0.1',
      port,
      (await import('node:fs')).readFileSync(`${c.dir}/token`, 'utf8').trim(),
    );
    raw.sendRaw('{not json');
    raw.sendRaw(JSON.stringify({ id: 999, op: 'launch' }));
    await expect(raw.request({ op: 'stop', mode: 'sideways' })).rejects.toThrow(
      /"mode" must be one of smart, fast, immediate/,
    );
    expect((await raw.sql('SELECT count(*) FROM t')).rows[0]).toEqual({ count: 500 });
    raw.close();
  });

  it('refuses a missing or wrong token with close code 4001', async () => {
    const none = await closeOf(`ws://127.0.0.1:${port}/control`, {});
    expect(none).toEqual({ code: 4001, reason: 'authentication failed: no token given' });
    const wrong = await closeOf(`ws://127.0.0.1:${port}/replication`, {
      authorization: 'Bearer nope',
    });
    expect(wrong).toEqual({ code: 4001, reason: 'authentication failed: wrong token' });
    await expect(ControlClient.connect('127.0.0.1', port, 'wrong')).rejects.toMatchObject({
      kind: 'auth_failed',
    });
  });

  it('closes a replication connection that sends garbage, and keeps streaming to the standby', async () => {
    const token = (await import('node:fs')).readFileSync(`${c.dir}/token`, 'utf8').trim();
    const r = await closeOf(
      `ws://127.0.0.1:${port}/replication`,
      { authorization: `Bearer ${token}` },
      Buffer.from([0xc1, 0xff, 0x00, 0x13]),
    );
    expect(r.code).toBe(4002);
    await c.sql('primary', 'INSERT INTO t VALUES (1), (2)');
    expect(await c.scalar('standby', 'SELECT count(*) FROM t')).toBe(502);
    const s = await c.status('primary');
    expect(s.replication).toHaveLength(1);
    expect(s.replication[0]).toMatchObject({
      applicationName: 'walreceiver',
      state: 'streaming',
      syncState: 'sync',
    });
  });
});
