/**
 * The extended query protocol message by message (real primary, raw TCP): portal lifecycle,
 * statement and portal names, parameters, Describe/Close subtypes. Method: send exact message
 * sequences no driver sends and compare every reply with what PostgreSQL 15 answers to the same
 * bytes (recorded beside each case: postgres.c exec_execute_message, exec_bind_message,
 * portalmem.c; pquery.c PortalRun).
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { TestCluster } from '../helpers/cluster.ts';
import {
  bind,
  execute,
  exchange,
  parse,
  query,
  replies,
  startupPacket,
  sync,
  USER,
} from '../helpers/pg-raw.ts';

describe('extended query protocol (raw messages)', () => {
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
    c = await TestCluster.create({ synchronousCommit: 'local' });
    await c.startNode('primary');
    port = c.pgPort('primary');
    await c.sql('primary', 'CREATE TABLE t (c int)');
  });
  afterAll(async () => {
    await c?.destroy();
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
});
