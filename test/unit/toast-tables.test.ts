/**
 * TOAST-able tables in PostgreSQL's terms: a table with a text/bytea column gets a TOAST heap
 * (created, never written) and a TOAST index (its metapage written by log_newpage), and TRUNCATE
 * or DROP of it drops three relfilenodes. On a standby, PostgreSQL 14's drop then full-scans (the
 * TOAST heap's size was never cached) while cache-at-create probes.
 * Method: the executor logs into an in-test WAL that a primary and two standbys replay by redo.
 */
import { describe, expect, it } from 'vitest';
import { parseStatement } from '../../sql/parser.ts';
import { redoCluster } from '../helpers/storage.ts';

describe('TOAST-able tables', () => {
  it('parse: one int column plus an optional text or bytea column', () => {
    expect(parseStatement('CREATE TABLE t (c int, d text)')).toEqual({
      type: 'create_table',
      name: 't',
      column: 'c',
      toastColumn: 'd',
    });
    expect(parseStatement('create table t (c int)')).toMatchObject({ toastColumn: null });
    expect(() => parseStatement('CREATE TABLE t (c int, d float)')).toThrow(
      /column "d" of type float is not supported by walsim: a table has one int column and optionally one text or bytea column/,
    );
    expect(() => parseStatement('CREATE TABLE t (c int, c text)')).toThrow(
      /specified more than once/,
    );
  });

  it('CREATE TABLE logs the TOAST table and index; replay sizes the index, not the TOAST heap', async () => {
    const c = redoCluster(['cached-lookup']);
    await c.sql('CREATE TABLE t (c int, d text)');
    const st = c.standbys[0]!;
    const toast = st.catalog.toastOf('t')!;
    expect(st.catalog.tables().map(([n]) => n)).toEqual(['t']);
    expect(c.logged.map((b) => b.kind)).toEqual([
      'SMGR_CREATE',
      'CATALOG_UPDATE',
      'SMGR_CREATE',
      'CATALOG_UPDATE',
      'SMGR_CREATE',
      'FPI',
      'CATALOG_UPDATE',
      'XACT_COMMIT',
    ]);
    expect(st.smgr.diskNblocks(toast.toast, 0)).toBe(0);
    expect(st.smgr.nblocksCached(toast.toast, 0)).toBe(0xffffffff);
    expect(st.smgr.nblocksCached(toast.index, 0)).toBe(1);
    expect(() => parseStatement('SELECT count(*) FROM pg_toast.pg_toast_t')).toThrow();
  });

  it('TRUNCATE drops three relfilenodes per table: a full scan for cached-lookup, probes for cache-at-create', async () => {
    const c = redoCluster(['cached-lookup', 'cache-at-create', 'rel-list']);
    await c.sql('CREATE TABLE t (c int, d text)');
    await c.sql('CREATE TABLE u (c int)');
    await c.sql('INSERT INTO t SELECT generate_series(1, 10)');
    await c.sql('INSERT INTO u SELECT generate_series(1, 10)');
    const before = c.primary.catalog.toastOf('t')!;
    const oldT = c.primary.catalog.lookup('t')!;
    await c.sql('TRUNCATE t');
    const commit = c.logged.at(-1)!;
    expect(commit).toMatchObject({
      kind: 'XACT_COMMIT',
      droppedRels: [oldT, before.toast, before.index],
    });
    // PostgreSQL logs an AccessExclusiveLock for the heap, the TOAST heap and the TOAST index
    // (three Standby/LOCK records per table in pg_waldump of a real TRUNCATE).
    const truncation = c.logged.slice(
      c.logged.map((r) => r.kind === 'STANDBY_LOCK' && r.rel === oldT).lastIndexOf(true),
    );
    expect(truncation.map((r) => r.kind)).toEqual([
      'STANDBY_LOCK',
      'SMGR_CREATE',
      'CATALOG_UPDATE',
      'STANDBY_LOCK',
      'SMGR_CREATE',
      'CATALOG_UPDATE',
      'STANDBY_LOCK',
      'SMGR_CREATE',
      'FPI',
      'CATALOG_UPDATE',
      'XACT_COMMIT',
    ]);
    expect(truncation.flatMap((r) => (r.kind === 'STANDBY_LOCK' ? [r.rel] : []))).toEqual([
      oldT,
      before.toast,
      before.index,
    ]);
    expect(c.primary.catalog.toastOf('t')).not.toEqual(before);
    expect(c.drops[0]!.at(-1)).toMatchObject({ path: 'full-scan', scanned: 4096, invalidated: 2 });
    expect(c.drops[1]!.at(-1)).toMatchObject({
      path: 'cached-lookup',
      scanned: 0,
      probes: 2,
      invalidated: 2,
    });
    expect(c.drops[2]!.at(-1)).toMatchObject({
      path: 'rel-list',
      scanned: 0,
      listSteps: 2,
      invalidated: 2,
    });
    // An int-only table takes the lookup path either way.
    await c.sql('TRUNCATE u');
    expect(c.drops[0]!.at(-1)).toMatchObject({ path: 'cached-lookup', probes: 1 });
    for (const st of c.standbys) st.pool.checkConsistency();
  });

  it('DROP TABLE drops the TOAST table and index too', async () => {
    const c = redoCluster(['cached-lookup']);
    await c.sql('CREATE TABLE t (c int, bytes bytea)');
    const toast = c.primary.catalog.toastOf('t')!;
    await c.sql('DROP TABLE t');
    expect(c.logged.at(-1)).toMatchObject({
      droppedRels: [expect.any(Number), toast.toast, toast.index],
    });
    expect(c.primary.catalog.toastOf('t')).toBeUndefined();
    expect(c.standbys[0]!.smgr.relations()).toEqual([]);
    await c.sql('CREATE TABLE t (c int)'); // the name is free again, without TOAST
    expect(c.primary.catalog.toastOf('t')).toBeUndefined();
    await expect(c.sql('CREATE TABLE "pg_toast.x" (c int)')).rejects.toThrow(
      /pg_toast schema is reserved/,
    );
  });
});
