/**
 * Hostile input on the replication and control endpoints (real processes): garbage bytes, a valid
 * msgpack frame of the wrong type, oversized frames, START_REPLICATION from the future or on an
 * unknown timeline, status updates that go backwards, a second standby with the same name, and
 * missing or wrong tokens. Method: each attack on its own connection must end in a close code and
 * reason; afterwards the primary still streams to its real standby, answers SQL, and neither node's
 * WAL position or table state moved (nothing was written).
 */
import * as fs from 'node:fs';
import * as net from 'node:net';
import WebSocket from 'ws';
import { pack } from 'msgpackr';
import { beforeAll, describe, expect, it } from 'vitest';
import { clustersPerSuite, TestCluster } from '../helpers/cluster.ts';
import { readPidFile, readToken, tokenPath } from '../../server/cluster-files.ts';
import { encodeMessage, type StreamMessage } from '../../wal/stream-messages.ts';
import { parseLsn } from '../../wal/lsn.ts';

interface Closed {
  code: number;
  reason: string;
  received: unknown[];
}

/** Open an endpoint, send `frames` in order (after `open`), resolve with the close code and reason. */
function attack(
  url: string,
  headers: Record<string, string>,
  frames: Array<Buffer | string>,
  gapMs = 0,
): Promise<Closed> {
  return new Promise((resolve, reject) => {
    const ws = new WebSocket(url, { headers, perMessageDeflate: false, maxPayload: 64 << 20 });
    const received: unknown[] = [];
    ws.on('open', async () => {
      for (const f of frames) {
        if (ws.readyState !== ws.OPEN) break;
        ws.send(f);
        if (gapMs) await new Promise((r) => setTimeout(r, gapMs));
      }
    });
    ws.on('message', (d) => received.push(d));
    ws.on('close', (code, reason) => resolve({ code, reason: reason.toString(), received }));
    ws.on('error', (e) => (e.message.includes('closed before') ? undefined : reject(e)));
  });
}

/**
 * A raw TCP client: a valid upgrade request to `path` with `headers`, then, once the 101 answer
 * arrived, `frame` as raw bytes (so it can be malformed: unmasked, or longer than the endpoint's
 * limit). Resolves when the server closes the TCP connection (or after 5 s of silence).
 */
function rawUpgradeThenFrame(
  port: number,
  path: string,
  headers: Record<string, string>,
  frame: Buffer,
): Promise<{ upgraded: boolean }> {
  return new Promise((resolve) => {
    const sock = net.connect(port, '127.0.0.1');
    let upgraded = false;
    let got = '';
    const done = () => {
      clearTimeout(timer);
      sock.destroy();
      resolve({ upgraded });
    };
    const timer = setTimeout(done, 5000);
    sock.on('connect', () => {
      const extra = Object.entries(headers)
        .map(([k, v]) => `${k}: ${v}\r\n`)
        .join('');
      sock.write(
        `GET ${path} HTTP/1.1\r\nHost: 127.0.0.1:${port}\r\nUpgrade: websocket\r\n` +
          `Connection: Upgrade\r\nSec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n` +
          `Sec-WebSocket-Version: 13\r\n${extra}\r\n`,
      );
    });
    sock.on('data', (d) => {
      if (upgraded) return;
      got += d.toString('latin1');
      if (got.includes('\r\n\r\n')) {
        upgraded = got.startsWith('HTTP/1.1 101');
        sock.write(frame);
      }
    });
    sock.on('error', done);
    sock.on('close', done);
  });
}

/** A masked client frame (opcode `opcode`) whose header announces `length` payload bytes. */
function maskedFrame(opcode: number, length: number): Buffer {
  const header =
    length < 126
      ? Buffer.from([0x80 | opcode, 0x80 | length])
      : length < 65536
        ? Buffer.from([0x80 | opcode, 0x80 | 126, length >> 8, length & 0xff])
        : Buffer.concat([Buffer.from([0x80 | opcode, 0x80 | 127]), u64(length)]);
  return Buffer.concat([header, Buffer.from([1, 2, 3, 4]), Buffer.alloc(length, 0x20)]);
}
function u64(n: number): Buffer {
  const b = Buffer.alloc(8);
  b.writeBigUInt64BE(BigInt(n));
  return b;
}

const msg = (m: StreamMessage) => Buffer.from(encodeMessage(m));

/**
 * A token of the right length and alphabet that is not `token`: its first character changed. Not
 * a fixed substitute such as '0': the token is random hex, so a fixed first character was the
 * token itself one run in 16, the server accepted it and waited for a request, and the test that
 * expected a 4001 close timed out.
 */
const wrongToken = (token: string) => (token.startsWith('0') ? '1' : '0') + token.slice(1);

describe('hostile input on the endpoints', () => {
  const clusters = clustersPerSuite();
  let c: TestCluster;
  let port: number;
  let auth: Record<string, string>;
  let before: { primary: Record<string, any>; standby: Record<string, any>; tables: unknown };
  let flushLsn: number;

  beforeAll(async () => {
    c = await clusters.create({ sharedBuffers: '16MB', synchronousCommit: 'remote_apply' });
    // The token begins with '0' in every run (it is random hex; the file keeps its mode 0600): the
    // case in which the wrong tokens below once were the right one.
    fs.writeFileSync(tokenPath(c.dir), `0${readToken(c.dir).slice(1)}\n`);
    await c.startAll();
    await c.sql('primary', 'CREATE TABLE t (c int)');
    await c.sql('primary', 'INSERT INTO t SELECT generate_series(1, 300)');
    await c.waitForCatchup('replay');
    port = readPidFile(c.dataDir('primary'))!.port;
    auth = { authorization: `Bearer ${readToken(c.dir)}` };
    const p = await c.status('primary');
    flushLsn = parseLsn(p.flushLsn);
    before = {
      primary: p,
      standby: await c.status('standby'),
      tables: (await (await c.client('primary')).inspect()).tables,
    };
  });

  const repl = () => `ws://127.0.0.1:${port}/replication`;
  const control = () => `ws://127.0.0.1:${port}/control`;
  const start = (over: Partial<Extract<StreamMessage, { type: 'START_REPLICATION' }>> = {}) =>
    msg({
      type: 'START_REPLICATION',
      startLsn: flushLsn,
      timeline: 1,
      applicationName: 'intruder',
      ...over,
    });
  const status = (lsn: number) =>
    msg({
      type: 'StandbyStatusUpdate',
      writeLsn: lsn,
      flushLsn: lsn,
      applyLsn: lsn,
      sendTime: Date.now(),
      replyRequested: false,
    });

  it('replication endpoint: garbage bytes and valid msgpack of the wrong shape are protocol violations (4002)', async () => {
    const garbage = await attack(repl(), auth, [Buffer.from([0xc1, 0x00, 0xff, 0xde, 0xad])]);
    expect(garbage.code).toBe(4002);
    expect(garbage.reason).toMatch(/invalid replication message/);
    const notAMessage = await attack(repl(), auth, [pack({ hello: 'world' })]);
    expect(notAMessage).toMatchObject({ code: 4002 });
    expect(notAMessage.reason).toMatch(/invalid replication message/);
    // Well-formed, but a primary-to-standby message: a standby never sends XLogData.
    const wrongType = await attack(repl(), auth, [
      msg({
        type: 'XLogData',
        walStart: flushLsn,
        walEnd: flushLsn,
        sendTime: 0,
        data: new Uint8Array(0),
      }),
    ]);
    expect(wrongType).toMatchObject({
      code: 4002,
      reason: 'unexpected XLogData message on the replication connection',
    });
    const text = await attack(repl(), auth, ['{"type":"START_REPLICATION"}']);
    expect(text).toMatchObject({
      code: 4002,
      reason: 'replication messages must be binary msgpack frames',
    });
    const statusFirst = await attack(repl(), auth, [status(flushLsn)]);
    expect(statusFirst).toMatchObject({
      code: 4002,
      reason: 'status update before START_REPLICATION',
    });
    const twice = await attack(repl(), auth, [start(), start()], 20);
    expect(twice).toMatchObject({
      code: 4002,
      reason: 'START_REPLICATION sent twice on one connection',
    });
  });

  it('replication endpoint: an oversized frame is refused by maxPayload (1009)', async () => {
    const r = await attack(repl(), auth, [Buffer.alloc(1 << 20, 0x91)]);
    // ws closes with 1009 (RFC 6455 "message too big") before buffering the frame; it sends no
    // reason text with this code, the server logs one.
    expect(r.code).toBe(1009);
    await c.pollUntil(
      async () =>
        fs
          .readFileSync(`${c.dataDir('primary')}/server.log`, 'utf8')
          .includes('Max payload size exceeded'),
      'log line',
    );
  });

  it('refuses START_REPLICATION from the future, on an unknown timeline, or under a taken name (4004)', async () => {
    const future = await attack(repl(), auth, [start({ startLsn: flushLsn + (8 << 20) })]);
    expect(future.code).toBe(4004);
    expect(future.reason).toMatch(/requested starting point .* is ahead of the WAL flush position/);
    const tli = await attack(repl(), auth, [start({ timeline: 7 })]);
    expect(tli).toMatchObject({
      code: 4004,
      reason: "requested timeline 7 is not in this server's history",
    });
    const dup = await attack(repl(), auth, [start({ applicationName: 'walreceiver' })]);
    expect(dup).toMatchObject({
      code: 4004,
      reason: 'a standby named "walreceiver" is already streaming',
    });
  });

  it('closes a connection whose status update goes backwards or claims unsent WAL (4002)', async () => {
    const back = await attack(repl(), auth, [start(), status(flushLsn - 8)], 20);
    expect(back.code).toBe(4002);
    expect(back.reason).toMatch(/status update went backwards/);
    const ahead = await attack(repl(), auth, [start(), status(flushLsn + 4096)], 20);
    expect(ahead.code).toBe(4002);
    expect(ahead.reason).toMatch(/status update claims WAL beyond what was sent/);
  });

  it('refuses a status update whose sendTime no Date can hold, and stays up (it once crashed the primary)', async () => {
    for (const t of [1e300, -1e300, 8.65e15]) {
      // Built by hand: encodeMessage refuses such a time.
      const bogus = pack(['StandbyStatusUpdate', flushLsn, flushLsn, flushLsn, t, false]);
      const r = await attack(repl(), auth, [start(), bogus], 20);
      expect(r.code).toBe(4002);
      expect(r.reason).toMatch(/StandbyStatusUpdate\.sendTime must be a time in ms since 1970/);
    }
    expect(await c.scalar('primary', 'SELECT count(*) FROM t')).toBe(300);
  });

  it('refuses a status update whose apply or flush position is ahead of what it flushed or wrote', async () => {
    // A bogus apply position would release remote_apply commits no standby has replayed.
    const mk = (write: number, flush: number, apply: number) =>
      msg({
        type: 'StandbyStatusUpdate',
        writeLsn: write,
        flushLsn: flush,
        applyLsn: apply,
        sendTime: Date.now(),
        replyRequested: false,
      });
    const applyAhead = await attack(
      repl(),
      auth,
      [start(), mk(flushLsn, flushLsn, 2 ** 53 - 1)],
      20,
    );
    expect(applyAhead.code).toBe(4002);
    expect(applyAhead.reason).toMatch(/status update claims WAL beyond what was sent/);
    const applyPastFlush = await attack(
      repl(),
      auth,
      [start(), mk(flushLsn, flushLsn, flushLsn + 8)],
      20,
    );
    expect(applyPastFlush.code).toBe(4002);
    expect(applyPastFlush.reason).toMatch(/status update claims WAL beyond what was sent/);
    // The log names all three positions and the rule.
    await c.pollUntil(
      async () => c.serverLog('primary').includes('must satisfy apply <= flush <= write <= sent'),
      'log line',
    );
  });

  it('control endpoint: binary garbage, msgpack and oversized frames are refused with a close reason', async () => {
    const garbage = await attack(control(), auth, [Buffer.from([0x00, 0x01, 0xfe])]);
    expect(garbage).toMatchObject({
      code: 4002,
      reason: 'invalid control request: frames must be JSON text',
    });
    // The greeting and then the error reply (id null) arrive before the close.
    expect(garbage.received.map((d) => JSON.parse(String(d)).ok)).toEqual([true, false]);
    const mp = await attack(control(), auth, [pack({ id: 1, op: 'status' })]);
    expect(mp.code).toBe(4002);
    const big = await attack(control(), auth, ['x'.repeat((1 << 20) + 1)]);
    expect(big.code).toBe(1009);
  });

  it('refuses missing, empty and wrong tokens on both endpoints (4001)', async () => {
    const token = readToken(c.dir);
    // Wrong in one character, and one character too long or too short.
    const wrong = [wrongToken(token), `${token}0`, token.slice(0, -1)];
    expect(wrong).not.toContain(token);
    for (const url of [repl(), control()]) {
      expect(await attack(url, {}, [])).toEqual({
        code: 4001,
        reason: 'authentication failed: no token given',
        received: [],
      });
      expect((await attack(url, { authorization: 'Bearer ' }, [])).code).toBe(4001);
      for (const w of wrong) {
        expect(await attack(url, { authorization: `Bearer ${w}` }, [])).toEqual({
          code: 4001,
          reason: 'authentication failed: wrong token',
          received: [],
        });
      }
      expect((await attack(`${url}?token=guess`, {}, [])).code).toBe(4001);
    }
    // Refused before any message: a replication attempt with a bad token never reaches the walsender.
    expect((await attack(repl(), { authorization: 'Bearer nope' }, [start()])).received).toEqual(
      [],
    );
  });

  it('survives malformed and oversized frames from clients with no token or a wrong one (one frame once ended the process)', async () => {
    const pid = readPidFile(c.dataDir('primary'))!.pid;
    const frames: Array<[string, string, Buffer]> = [
      // RFC 6455 5.1: a client frame must be masked; ws refuses it ("MASK must be set").
      ['/control', 'unmasked frame', Buffer.from([0x81, 0x00])],
      ['/replication', 'unmasked frame', Buffer.from([0x81, 0x00])],
      ['/replication', '70 kB frame (limit 64 KiB)', maskedFrame(0x2, 70_000)],
      ['/control', '1.1 MB frame (limit 1 MB)', maskedFrame(0x1, 1_100_000)],
    ];
    const tokens: Array<[string, Record<string, string>]> = [
      ['no token', {}],
      ['wrong token', { authorization: `Bearer ${wrongToken(readToken(c.dir))}` }],
      ['wrong ?token=', {}],
    ];
    for (const [path, what, frame] of frames) {
      for (const [who, headers] of tokens) {
        const target = who === 'wrong ?token=' ? `${path}?token=guess` : path;
        const r = await rawUpgradeThenFrame(port, target, headers, frame);
        expect(r.upgraded, `${what} to ${path} with ${who}: upgrade answered`).toBe(true);
        // Still the same process, still answering, data intact.
        const s = await c.status('primary');
        expect(s.pid, `${what} to ${path} with ${who}`).toBe(pid);
        expect(await c.scalar('primary', 'SELECT count(*) FROM t')).toBe(300);
      }
    }
    expect(c.serverLog('primary')).not.toMatch(/FATAL/);
  });

  it('token file is mode 0600 and servers listen on 127.0.0.1 only', async () => {
    expect(fs.statSync(`${c.dir}/token`).mode & 0o777).toBe(0o600);
    for (const name of ['primary', 'standby'] as const) {
      const p = readPidFile(c.dataDir(name))!.port;
      const hexPort = p.toString(16).toUpperCase().padStart(4, '0');
      const listening = fs
        .readFileSync('/proc/net/tcp', 'utf8')
        .split('\n')
        .slice(1)
        .map((l) => l.trim().split(/\s+/))
        .filter((f) => f[3] === '0A' && f[1]?.endsWith(`:${hexPort}`))
        .map((f) => f[1]);
      expect(listening).toEqual([`0100007F:${hexPort}`]); // 127.0.0.1, not 0.0.0.0
      expect(c.config(name).listen).toBe('127.0.0.1');
    }
  });

  it('kept serving the real standby and wrote nothing during the attacks', async () => {
    const p = await c.status('primary');
    expect(p.flushLsn).toBe(before.primary.flushLsn);
    expect(p.insertLsn).toBe(before.primary.insertLsn);
    const s = await c.status('standby');
    expect(s.receiveLsn).toBe(before.standby.receiveLsn);
    expect(s.replayLsn).toBe(before.standby.replayLsn);
    expect(s.receiverConnects).toBe(before.standby.receiverConnects); // never disconnected
    expect((await (await c.client('primary')).inspect()).tables).toEqual(before.tables);
    expect(p.replication).toHaveLength(1);
    expect(p.replication[0]).toMatchObject({
      applicationName: 'walreceiver',
      state: 'streaming',
      syncState: 'sync',
    });
    // remote_apply commit still works through the real standby.
    await c.sql('primary', 'INSERT INTO t VALUES (1)');
    expect(await c.scalar('standby', 'SELECT count(*) FROM t')).toBe(301);
  });
});
