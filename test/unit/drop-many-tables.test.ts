/**
 * DROP TABLE a, b, … (PostgreSQL's syntax): every table dropped in one transaction, so one commit
 * record lists every relfilenumber and replay drops them all at once — smgrdounlinkall's one
 * DropRelationsAllBuffers call, whose full scan matches the relations linearly up to 20 of them
 * and by binary search above (bufmgr.c RELS_BSEARCH_THRESHOLD), and whose lookup path is taken in
 * recovery when every fork's size is cached and the blocks to drop are fewer than NBuffers / 32.
 * Method: the executor logs into an in-test WAL that a primary and two standbys replay by redo.
 */
import { describe, expect, it } from 'vitest';
import { parseStatement } from '../../sql/parser.ts';
import { redoCluster, type RedoCluster } from '../helpers/storage.ts';

async function tables(c: RedoCluster, n: number): Promise<string[]> {
  const names = Array.from({ length: n }, (_, i) => `t${i}`);
  for (const t of names) {
    await c.sql(`CREATE TABLE ${t} (c int)`);
    await c.sql(`INSERT INTO ${t} SELECT generate_series(1, 10)`);
  }
  return names;
}

describe('DROP TABLE of many tables', () => {
  it('parses a list of names, with and without IF EXISTS', () => {
    expect(parseStatement('DROP TABLE a, B, "c"')).toEqual({
      type: 'drop_table',
      names: ['a', 'b', 'c'],
      ifExists: false,
    });
    expect(parseStatement('drop table if exists a,b')).toEqual({
      type: 'drop_table',
      names: ['a', 'b'],
      ifExists: true,
    });
    expect(() => parseStatement('DROP TABLE a,')).toThrow(/table name/);
  });

  for (const [n, matcher] of [
    [5, 'linear'],
    [20, 'linear'],
    [21, 'bsearch'],
    [30, 'bsearch'],
  ] as const) {
    it(`${n} tables: one commit record drops them all; replay's scan matches ${matcher}`, async () => {
      const c = redoCluster(['full-scan', 'cached-lookup']);
      const names = await tables(c, n);
      const rels = names.map((t) => c.primary.catalog.lookup(t)!);
      const before = c.logged.length;
      expect(await c.sql(`DROP TABLE ${names.join(', ')}`)).toMatchObject({
        command: 'DROP TABLE',
      });
      const commits = c.logged.slice(before).filter((r) => r.kind === 'XACT_COMMIT');
      expect(commits).toEqual([{ kind: 'XACT_COMMIT', xactTime: 0, droppedRels: rels }]);
      // One drop per node for the whole set: every table's one block invalidated at once.
      expect(c.drops[0]).toEqual([
        expect.objectContaining({ path: 'full-scan', matcher, scanned: 4096, invalidated: n }),
      ]);
      // Every size cached by replay and n blocks < 4096 / 32: the lookup, one probe per block.
      expect(c.drops[1]).toEqual([
        expect.objectContaining({ path: 'cached-lookup', probes: n, invalidated: n }),
      ]);
      for (const st of [c.primary, ...c.standbys]) {
        expect(st.catalog.tables()).toEqual([]);
        expect(st.smgr.relations()).toEqual([]);
        st.pool.checkConsistency();
      }
    });
  }

  it('a missing table drops nothing; IF EXISTS drops the others', async () => {
    const c = redoCluster(['cached-lookup']);
    await tables(c, 2);
    const before = c.logged.length;
    await expect(c.sql('DROP TABLE t0, nope, t1')).rejects.toThrow(
      /relation "nope" does not exist/,
    );
    expect(c.logged.length).toBe(before);
    expect(c.primary.catalog.tables().map(([t]) => t)).toEqual(['t0', 't1']);
    await c.sql('DROP TABLE IF EXISTS t0, nope, t0, t1');
    expect(c.logged.filter((r) => r.kind === 'XACT_COMMIT').at(-1)).toMatchObject({
      droppedRels: [expect.any(Number), expect.any(Number)],
    });
    expect(c.standbys[0]!.catalog.tables()).toEqual([]);
    expect(await c.sql('DROP TABLE IF EXISTS nope, gone')).toMatchObject({
      command: 'DROP TABLE',
    });
  });
});
