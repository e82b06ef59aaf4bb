/**
 * The extended query protocol message by message (real primary, raw TCP): portal lifecycle,
 * statement and portal names, parameters, Describe/Close subtypes. Method: send exact message
 * sequences no driver sends and compare every reply with what PostgreSQL 15 answers to the same
 * bytes (recorded beside each case: postgres.c exec_execute_message, exec_bind_message,
 * portalmem.c; pquery.c PortalRun).
 */
import { beforeAll, describe, expect, it } from 'vitest';
import { clustersPerSuite, TestCluster } from '../helpers/cluster.ts';
import {
  bind,
  execute,
  errorOf,
  exchange,
  parse,
  query,
  readyFor,
  replies,
  startupPacket,
  message,
  sync,
  USER,
  type Exchange,
} from '../helpers/pg-raw.ts';

describe('extended query protocol (raw messages)', () => {
  const clusters = clustersPerSuite();
  let c: TestCluster;
  let port: number;

  /** One connection: start-up, `msgs`, then wait for `readyCount` ReadyForQuery after start-up's. */
  async function session(msgs: Buffer[], readyCount = 1): Promise<string[]> {
    const x = await exchange(port, [startupPacket(USER), ...msgs], {
      until: (ms) => ms.filter((m) => m.type === 'Z').length >= readyCount + 1,
    });
    return replies(x);
  }

  beforeAll(async () => {
    // No standby: commits do not wait for one.
    c = await clusters.create({ synchronousCommit: 'local' });
    await c.startNode('primary');
    port = c.pgPort('primary');
    await c.sql('primary', 'CREATE TABLE t (c int)');
  });

  it('runs a write portal once: a second Execute is 55000 "cannot be run" (PORTAL_MULTI_QUERY is done)', async () => {
    const p = 'p1';
    const five = [1, 2, 3, 4, 5].map(() => execute(p));
    expect(
      await session([
        parse('', 'INSERT INTO t SELECT generate_series(1,10)'),
        bind(p, ''),
        ...five,
        sync(),
      ]),
    ).toEqual(['1', '2', 'C:INSERT 0 10', 'E:55000 portal "p1" cannot be run', 'Z']);
    expect(await c.scalar('primary', 'SELECT count(*) FROM t')).toBe(10);
    expect(
      await session([parse('', 'VACUUM t'), bind('', ''), execute(''), execute(''), sync()]),
    ).toEqual(['1', '2', 'C:VACUUM', 'E:55000 portal "" cannot be run', 'Z']);
  });

  it('fetches a row portal to its end: later Executes return no rows (SELECT 0), SHOW keeps its tag', async () => {
    const count = 'SELECT count(*) FROM t';
    expect(
      await session([
        parse('', count),
        bind('p1', ''),
        execute('p1'),
        execute('p1'),
        execute('p1'),
        sync(),
      ]),
    ).toEqual(['1', '2', 'D:10', 'C:SELECT 1', 'C:SELECT 0', 'C:SELECT 0', 'Z']);
    // A row limit that is reached suspends the portal even when no row is left (PortalRunSelect).
    expect(
      await session([
        parse('', count),
        bind('p1', ''),
        execute('p1', 1),
        execute('p1', 1),
        execute('p1', 1),
        sync(),
      ]),
    ).toEqual(['1', '2', 'D:10', 's', 'C:SELECT 0', 'C:SELECT 0', 'Z']);
    expect(
      await session([
        parse('', 'SHOW synchronous_commit'),
        bind('p1', ''),
        execute('p1'),
        execute('p1'),
        sync(),
      ]),
    ).toEqual(['1', '2', 'D:local', 'C:SHOW', 'C:SHOW', 'Z']);
    expect(
      await session([
        parse('', 'SELECT pg_is_in_recovery()'),
        bind('p1', ''),
        execute('p1'),
        execute('p1'),
        sync(),
      ]),
    ).toEqual(['1', '2', 'D:f', 'C:SELECT 1', 'C:SELECT 0', 'Z']);
    expect(await session([parse('', ''), bind('', ''), execute(''), execute(''), sync()])).toEqual([
      '1',
      '2',
      'I',
      'I',
      'Z',
    ]);
  });

  it('drops every portal and the unnamed statement at a simple Query (34000 / 26000 afterwards)', async () => {
    const count = 'SELECT count(*) FROM t';
    const afterQuery = ['T', 'D:local', 'C:SHOW', 'Z'];
    expect(
      await session(
        [parse('', count), bind('', ''), query('SHOW synchronous_commit'), execute(''), sync()],
        2,
      ),
    ).toEqual(['1', '2', ...afterQuery, 'E:34000 portal "" does not exist', 'Z']);
    expect(
      await session(
        [parse('', count), bind('p2', ''), query('SHOW synchronous_commit'), execute('p2'), sync()],
        2,
      ),
    ).toEqual(['1', '2', ...afterQuery, 'E:34000 portal "p2" does not exist', 'Z']);
    expect(
      await session(
        [parse('', count), sync(), query('SHOW synchronous_commit'), bind('', ''), sync()],
        3,
      ),
    ).toEqual(['1', 'Z', ...afterQuery, 'E:26000 unnamed prepared statement does not exist', 'Z']);
    // A named statement outlives the Query (only its portals go).
    expect(
      await session(
        [
          parse('s1', count),
          sync(),
          query('SHOW synchronous_commit'),
          bind('', 's1'),
          execute(''),
          sync(),
        ],
        3,
      ),
    ).toEqual(['1', 'Z', ...afterQuery, '2', 'D:10', 'C:SELECT 1', 'Z']);
    expect(await c.scalar('primary', 'SELECT count(*) FROM t')).toBe(10);
  });

  it('checks declared parameters at Bind (08P01) and refuses an unspecified one (42P18)', async () => {
    const INT4 = 23;
    const count = 'SELECT count(*) FROM t';
    expect(await session([parse('', count, [INT4]), bind('', ''), sync()])).toEqual([
      '1',
      'E:08P01 bind message supplies 0 parameters, but prepared statement "" requires 1',
      'Z',
    ]);
    expect(
      await session([parse('', count, [INT4]), bind('', '', ['5']), execute(''), sync()]),
    ).toEqual(['1', '2', 'D:10', 'C:SELECT 1', 'Z']);
    expect(await session([parse('', count, [0]), sync()])).toEqual([
      'E:42P18 could not determine data type of parameter $1',
      'Z',
    ]);
    expect(await session([parse('', `${count} WHERE c > $1`), sync()])).toEqual([
      expect.stringMatching(/^E:0A000 parameters \(\$1\) are not supported by walsim/),
      'Z',
    ]);
  });

  it('answers a bad Describe or Close subtype, a duplicate portal and invalid UTF-8 with an ERROR; the session goes on', async () => {
    expect(
      await session(
        [
          message('D', 'Xname\0'),
          sync(),
          message('C', 'Xname\0'),
          sync(),
          parse('', 'SHOW port'),
          bind('p1', ''),
          bind('p1', ''),
          sync(),
          message('Q', Buffer.from([...Buffer.from('SELECT '), 0xff, 0x28, 0])),
          query('SELECT 1'),
        ],
        5,
      ),
    ).toEqual([
      'E:08P01 invalid DESCRIBE message subtype 88',
      'Z',
      'E:08P01 invalid CLOSE message subtype 88',
      'Z',
      '1',
      '2',
      'E:42P03 cursor "p1" already exists',
      'Z',
      'E:22021 invalid byte sequence for encoding "UTF8": 0xff',
      'Z',
      'T',
      'D:1',
      'C:SELECT 1',
      'Z',
    ]);
  });

  it('sends the NOTICE of a truncated identifier before the result', async () => {
    const long = 'é'.repeat(40);
    expect(await session([query(`CREATE TABLE ${long} (c int); DROP TABLE ${long}`)])).toEqual([
      `N:42622 identifier "${long}" will be truncated to "${'é'.repeat(31)}"`,
      `N:42622 identifier "${long}" will be truncated to "${'é'.repeat(31)}"`,
      'C:CREATE TABLE',
      'C:DROP TABLE',
      'Z',
    ]);
  });

  it('applies or refuses options=-c … from the start-up packet; every session has its own BackendKeyData', async () => {
    const start = async (options: string): Promise<Exchange> =>
      exchange(port, [startupPacket({ ...USER, options })], {
        until: (ms) => ms.some((m) => m.type === 'Z'),
      });
    const ok = await start('-c application_name=from\\ options --client_encoding=utf8');
    const status = ok.messages
      .filter((m) => m.type === 'S')
      .map((m) => m.body.toString('utf8').split('\0').slice(0, 2));
    expect(status).toContainEqual(['application_name', 'from options']);
    const refused = await start('-c synchronous_commit=off');
    expect(refused.closed).toBe(true);
    expect(refused.messages.find((m) => m.type === 'E')?.fields).toMatchObject({
      S: 'FATAL',
      C: '0A000',
      M: expect.stringContaining('walsim cannot apply "-c synchronous_commit=off"'),
    });
    const bad = await start('-x');
    expect(bad.messages.find((m) => m.type === 'E')?.fields).toMatchObject({ C: '42601' });
    const keys = await Promise.all([1, 2, 3].map(() => start('')));
    const pids = keys.map((x) => x.messages.find((m) => m.type === 'K')!.body.readInt32BE(0));
    expect(new Set(pids).size).toBe(3);
  });

  it("takes the start-up packet's client_encoding as PostgreSQL does, or refuses what walsim cannot convert", async () => {
    const start = (client_encoding: string): Promise<Exchange> =>
      exchange(port, [startupPacket({ ...USER, client_encoding })], {
        until: (ms) => ms.some((m) => m.type === 'Z' || m.type === 'E'),
      });
    const reported = (x: Exchange) =>
      x.messages
        .filter((m) => m.type === 'S')
        .map((m) => m.body.toString('utf8').split('\0'))
        .find(([k]) => k === 'client_encoding')?.[1];
    // UTF8 under its aliases, and SQL_ASCII (psql's choice in a C locale): no conversion needed.
    for (const [asked, shown] of [
      ['UTF8', 'UTF8'],
      ['utf-8', 'UTF8'],
      ['unicode', 'UTF8'],
      ['SQL_ASCII', 'SQL_ASCII'],
    ]) {
      const x = await start(asked!);
      expect(readyFor(x.messages), asked).toBe(true);
      expect(reported(x), asked).toBe(shown);
    }
    // SHOW and current_setting() answer what this session asked for, as PostgreSQL's GUC does.
    for (const asked of ['SQL_ASCII', 'UTF8']) {
      const x = await exchange(
        port,
        [
          startupPacket({ ...USER, client_encoding: asked, application_name: `enc-${asked}` }),
          query('SHOW client_encoding'),
          query("SELECT current_setting('client_encoding')"),
          query('SHOW application_name'),
        ],
        { until: (ms) => ms.filter((m) => m.type === 'Z').length >= 4 },
      );
      expect(
        replies(x).filter((r) => r.startsWith('D:')),
        asked,
      ).toEqual([`D:${asked}`, `D:${asked}`, `D:enc-${asked}`]);
    }
    // An encoding walsim would have to convert to: refused, never accepted and reported UTF8.
    const latin1 = await start('LATIN1');
    expect(errorOf(latin1)).toMatchObject({
      S: 'FATAL',
      C: '0A000',
      M: 'conversion between LATIN1 and UTF8 is not supported',
    });
    const bogus = await start('klingon');
    expect(errorOf(bogus)).toMatchObject({
      S: 'FATAL',
      C: '22023',
      M: 'invalid value for parameter "client_encoding": "klingon"',
    });
  });

  it("refuses pg_promote(true, 0) on a primary for not being in recovery first, with PostgreSQL's HINT", async () => {
    const x = await exchange(port, [startupPacket(USER), query('SELECT pg_promote(true, 0)')], {
      until: (ms) => ms.filter((m) => m.type === 'Z').length >= 2,
    });
    expect(x.messages.find((m) => m.type === 'E')?.fields).toMatchObject({
      C: '55000',
      M: 'recovery is not in progress',
      H: 'Recovery control functions can only be executed during recovery.',
    });
  });
});
