/**
 * Hostile input on the PostgreSQL port (real processes, raw TCP): bad start-up packets, protocol
 * versions other than 3.0, oversized and undersized messages, unknown message types, malformed
 * bodies, replication connections, bogus cancel requests, a byte-at-a-time client, wrong passwords.
 * Method: each attack on its own connection must end in the FATAL (or ERROR) PostgreSQL sends, with
 * its SQLSTATE, and a close where PostgreSQL closes; afterwards the same server process still
 * answers SQL over both the wire protocol and the control endpoint.
 */
import pg from 'pg';
import { beforeAll, describe, expect, it } from 'vitest';
import { clustersPerSuite, TestCluster } from '../helpers/cluster.ts';
import {
  errorOf,
  exchange,
  message,
  query,
  readyFor,
  startupPacket,
  USER,
} from '../helpers/pg-raw.ts';

describe('hostile input on the PostgreSQL port', () => {
  const clusters = clustersPerSuite();
  let c: TestCluster;
  let port: number;
  let pid: number;

  beforeAll(async () => {
    c = await clusters.start();
    await c.sql('primary', 'CREATE TABLE t (c int)');
    await c.sql('primary', 'INSERT INTO t SELECT generate_series(1, 10)');
    port = c.pgPort('primary');
    pid = c.pid('primary')!;
  });

  it('refuses start-up packets of a bad length or layout, and foreign protocols', async () => {
    const http = await exchange(port, [Buffer.from('GET / HTTP/1.1\r\nHost: x\r\n\r\n')]);
    expect(http.closed).toBe(true);
    expect(errorOf(http)).toMatchObject({
      S: 'FATAL',
      C: '08P01',
      M: expect.stringContaining('invalid length of startup packet'),
    });
    // pg-gateway alone would loop forever on a zero length; the guard refuses it first.
    const zero = await exchange(port, [Buffer.alloc(8)]);
    expect(errorOf(zero)).toMatchObject({
      C: '08P01',
      M: expect.stringContaining('invalid length of startup packet: 0'),
    });
    // Refused on the header alone: the 1 MB body is never buffered.
    const big = Buffer.alloc(8);
    big.writeInt32BE(1 << 20, 0);
    expect(errorOf(await exchange(port, [big]))).toMatchObject({
      C: '08P01',
      M: expect.stringContaining('invalid length of startup packet: 1048576'),
    });
    const unterminated = startupPacket(USER).subarray(0, -2); // ends inside the last value
    unterminated.writeInt32BE(unterminated.length, 0);
    expect(errorOf(await exchange(port, [unterminated]))).toMatchObject({
      C: '08P01',
      M: expect.stringContaining('terminator'),
    });
    const noUser = await exchange(port, [startupPacket({ database: 'postgres' })]);
    expect(errorOf(noUser)).toMatchObject({
      S: 'FATAL',
      C: '28000',
      M: 'no PostgreSQL user name specified in startup packet',
    });
  });

  it('speaks 3.0 only: 2.0 is refused, 3.1 is negotiated down', async () => {
    const v2 = await exchange(port, [startupPacket(USER, 2 << 16)]);
    expect(v2.closed).toBe(true);
    expect(errorOf(v2)).toMatchObject({
      S: 'FATAL',
      C: '0A000',
      M: 'unsupported frontend protocol 2.0: server supports 3.0 to 3.0',
    });
    const v31 = await exchange(
      port,
      [startupPacket({ ...USER, '_pq_.compression': 'on' }, (3 << 16) | 1)],
      { until: readyFor },
    );
    const negotiate = v31.messages.find((m) => m.type === 'v')!;
    expect(negotiate.body.readInt32BE(0)).toBe(0); // newest minor version we support
    expect(v31.messages.at(-1)!.type).toBe('Z');
  });

  it('answers SSLRequest and GSSENCRequest with N, then serves the session', async () => {
    const ssl = Buffer.alloc(8);
    ssl.writeInt32BE(8, 0);
    ssl.writeInt32BE(80877103, 4);
    const gss = Buffer.from(ssl);
    gss.writeInt32BE(80877104, 4);
    const x = await exchange(
      port,
      [ssl, gss, startupPacket(USER), query('SELECT count(*) FROM t')],
      {
        until: (ms) => ms.filter((m) => m.type === 'Z').length === 2,
        oneByteAnswers: 2,
        gapMs: 50,
      },
    );
    expect(x.messages.slice(0, 2).map((m) => m.type)).toEqual(['N', 'N']);
    expect(x.messages.some((m) => m.type === 'D' && m.body.toString().includes('10'))).toBe(true);
  });

  it('refuses replication connections with a clear error', async () => {
    const x = await exchange(port, [startupPacket({ ...USER, replication: 'true' })]);
    expect(x.closed).toBe(true);
    expect(errorOf(x)).toMatchObject({
      S: 'FATAL',
      C: '0A000',
      M: expect.stringContaining('does not accept replication connections'),
    });
    const db = await exchange(port, [startupPacket({ ...USER, replication: 'database' })]);
    expect(errorOf(db)).toMatchObject({ C: '0A000' });
  });

  it('refuses oversized, undersized and unknown messages after start-up', async () => {
    const hugeQuery = Buffer.alloc(5);
    hugeQuery.write('Q', 0);
    hugeQuery.writeInt32BE(64 << 20, 1);
    const huge = await exchange(port, [startupPacket(USER), hugeQuery], { gapMs: 50 });
    expect(huge.closed).toBe(true);
    expect(errorOf(huge)).toMatchObject({
      S: 'FATAL',
      C: '08P01',
      M: 'message of type "Q" is 67108860 bytes, larger than the limit of 1048576 bytes',
    });
    const bigSync = Buffer.alloc(5);
    bigSync.write('S', 0);
    bigSync.writeInt32BE(20_004, 1);
    expect(
      errorOf(await exchange(port, [startupPacket(USER), bigSync], { gapMs: 50 })),
    ).toMatchObject({ C: '08P01', M: expect.stringContaining('limit of 10000') });
    const short = Buffer.from([0x51, 0, 0, 0, 2]);
    expect(
      errorOf(await exchange(port, [startupPacket(USER), short], { gapMs: 50 })),
    ).toMatchObject({ C: '08P01', M: 'invalid message length 2 for message type "Q"' });
    const unknown = await exchange(port, [startupPacket(USER), message('z', 'abc')], { gapMs: 50 });
    expect(unknown.closed).toBe(true);
    expect(errorOf(unknown)).toMatchObject({
      S: 'FATAL',
      C: '08P01',
      M: 'invalid frontend message type 122 ("z")',
    });
  });

  it('refuses malformed message bodies without reading past them', async () => {
    const noNul = await exchange(
      port,
      [startupPacket(USER), message('Q', 'SELECT count(*) FROM t')],
      { gapMs: 50 },
    );
    expect(errorOf(noNul)).toMatchObject({
      S: 'FATAL',
      C: '08P01',
      M: 'invalid Query message: string is not NUL-terminated',
    });
    const shortBind = await exchange(
      port,
      [startupPacket(USER), message('B', Buffer.from([0, 0, 0, 5]))],
      { gapMs: 50 },
    );
    expect(errorOf(shortBind)).toMatchObject({
      S: 'FATAL',
      C: '08P01',
      M: 'invalid Bind message: ends early',
    });
    // An ERROR, not FATAL, in postgres.c: the session goes on after Sync.
    const badDescribe = await exchange(
      port,
      [startupPacket(USER), message('D', 'Xname\0'), message('S')],
      { gapMs: 50, until: (ms) => ms.filter((m) => m.type === 'Z').length >= 2 },
    );
    expect(errorOf(badDescribe)).toMatchObject({
      S: 'ERROR',
      C: '08P01',
      M: 'invalid DESCRIBE message subtype 88',
    });
  });

  it('answers what it does not support with an ERROR and keeps the session', async () => {
    const x = await exchange(
      port,
      [
        startupPacket(USER),
        message('F', Buffer.alloc(10)),
        message('d', 'junk'),
        query('SELECT count(*) FROM t'),
      ],
      {
        until: (ms) => ms.filter((m) => m.type === 'Z').length === 3,
        gapMs: 50,
      },
    );
    expect(errorOf(x)).toMatchObject({
      S: 'ERROR',
      C: '0A000',
      M: 'walsim does not support the function call protocol',
    });
    expect(
      x.messages
        .filter((m) => m.type === 'C')
        .map((m) => m.body.toString('utf8', 0, m.body.length - 1)),
    ).toEqual(['SELECT 1']);
  });

  it('serves a client that sends its bytes one at a time', async () => {
    const all = Buffer.concat([
      startupPacket(USER),
      query('SELECT count(*) FROM t; SHOW synchronous_commit'),
      message('X'),
    ]);
    const bytes = [...all].map((b) => Buffer.from([b]));
    const x = await exchange(port, bytes, { gapMs: 1 });
    expect(x.closed).toBe(true);
    expect(x.messages.filter((m) => m.type === 'D').map((m) => m.body.toString('utf8', 6))).toEqual(
      ['10', 'remote_write'],
    );
    expect(x.messages.some((m) => m.type === 'E')).toBe(false);
  });

  it('closes a cancel request without a reply, whatever its key', async () => {
    const cancel = Buffer.alloc(16);
    cancel.writeInt32BE(16, 0);
    cancel.writeInt32BE(80877102, 4);
    cancel.writeInt32BE(pid, 8);
    cancel.writeInt32BE(12345, 12);
    const x = await exchange(port, [cancel]);
    expect(x).toEqual({ messages: [], closed: true });
    const bad = Buffer.from(cancel.subarray(0, 12));
    bad.writeInt32BE(12, 0);
    expect(errorOf(await exchange(port, [bad]))).toMatchObject({
      C: '08P01',
      M: 'invalid length of cancel request packet: 12',
    });
  });

  it('is still the same process and still answers over both endpoints', async () => {
    expect(c.pid('primary')).toBe(pid);
    const client = new pg.Client({ host: '127.0.0.1', port, user: 'postgres' });
    await client.connect();
    expect((await client.query('SELECT count(*) FROM t')).rows).toEqual([{ count: '10' }]);
    await client.end();
    expect(await c.scalar('primary', 'SELECT count(*) FROM t')).toBe(10);
  });
});

describe('password authentication (cluster start --password)', () => {
  const clusters = clustersPerSuite();
  let scram: TestCluster;
  let md5: TestCluster;

  /** A cluster whose PostgreSQL port requires `password`, proven with `passwordEncryption`. */
  async function passwordCluster(passwordEncryption: 'scram-sha-256' | 'md5') {
    const c = await clusters.create({ password: 's3cret', passwordEncryption });
    await c.startNode('primary');
    return c;
  }

  beforeAll(async () => {
    scram = await passwordCluster('scram-sha-256');
    md5 = await passwordCluster('md5');
  });

  for (const method of ['scram-sha-256', 'md5'] as const) {
    it(`${method}: accepts the right password and refuses a wrong one with 28P01`, async () => {
      const port = (method === 'md5' ? md5 : scram).pgPort('primary');
      const ok = new pg.Client({ host: '127.0.0.1', port, user: 'alice', password: 's3cret' });
      await ok.connect();
      expect((await ok.query('SELECT pg_is_in_recovery()')).rows).toEqual([
        { pg_is_in_recovery: false },
      ]);
      await ok.end();
      const wrong = new pg.Client({ host: '127.0.0.1', port, user: 'alice', password: 'nope' });
      await expect(wrong.connect()).rejects.toMatchObject({
        code: '28P01',
        message: 'password authentication failed for user "alice"',
      });
      // The first authentication request names the method: 10 = SASL (SCRAM-SHA-256), 5 = MD5.
      const x = await exchange(port, [startupPacket(USER), query('SELECT count(*) FROM t')], {
        gapMs: 50,
      });
      expect(x.messages[0]!.type).toBe('R');
      expect(x.messages[0]!.body.readInt32BE(0)).toBe(method === 'md5' ? 5 : 10);
      if (method !== 'md5')
        expect(x.messages[0]!.body.subarray(4).toString()).toBe('SCRAM-SHA-256\0\0');
      // A client that answers the challenge with a query instead of a password.
      expect(errorOf(x)).toMatchObject({
        S: 'FATAL',
        C: '08P01',
        M: 'expected password response, got message type "Q"',
      });
      expect(x.closed).toBe(true);
    });
  }

  it('scram-sha-256: refuses other mechanisms, channel binding and malformed exchanges', async () => {
    const port = scram.pgPort('primary');
    const sasl = (mechanism: string, data: string) => {
      const d = Buffer.from(data);
      const len = Buffer.alloc(4);
      len.writeInt32BE(d.length);
      return message('p', Buffer.concat([Buffer.from(`${mechanism}\0`), len, d]));
    };
    const plain = await exchange(port, [startupPacket(USER), sasl('PLAIN', 'n,,n=,r=abc')], {
      gapMs: 50,
    });
    expect(errorOf(plain)).toMatchObject({
      S: 'FATAL',
      C: '28000',
      M: expect.stringContaining('invalid SASL authentication mechanism "PLAIN"'),
    });
    const binding = await exchange(
      port,
      [startupPacket(USER), sasl('SCRAM-SHA-256', 'p=tls-server-end-point,,n=,r=abc')],
      { gapMs: 50 },
    );
    expect(errorOf(binding)).toMatchObject({
      C: '28000',
      M: expect.stringContaining('channel binding is not supported'),
    });
    const garbage = await exchange(port, [startupPacket(USER), sasl('SCRAM-SHA-256', 'hello')], {
      gapMs: 50,
    });
    expect(errorOf(garbage)).toMatchObject({
      C: '08P01',
      M: expect.stringContaining('malformed SCRAM message'),
    });
    const badNonce = await exchange(
      port,
      [
        startupPacket(USER),
        sasl('SCRAM-SHA-256', 'n,,n=,r=abc'),
        message('p', 'c=biws,r=zzz,p=AAAA'),
      ],
      { gapMs: 50 },
    );
    expect(errorOf(badNonce)).toMatchObject({
      C: '08P01',
      M: 'malformed SCRAM message: the nonce does not match',
    });
    // Still serving.
    const ok = new pg.Client({ host: '127.0.0.1', port, user: 'bob', password: 's3cret' });
    await ok.connect();
    await ok.end();
  });
});
