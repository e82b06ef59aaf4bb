/**
 * A big INSERT is killed with SIGKILL (real processes); after crash recovery its rows are gone
 * (no commit record: aborted) and VACUUM gives the space back as PostgreSQL does — it prunes the
 * crash-killed transaction's tuples and truncates the empty tail, so pg_relation_size is 0 on the
 * primary and, through the replayed SMGR_TRUNCATE, on the standby.
 * Method: kill once the INSERT's WAL has been written to segment files (the WAL buffers spill at
 * 16 MB), so that crash recovery finds its pages; restart; VACUUM; compare sizes.
 */
import fs from 'node:fs';
import { describe, expect, it } from 'vitest';
import { clustersPerTest } from '../helpers/cluster.ts';
import { walDir } from '../../wal/segment.ts';

const clusters = clustersPerTest();

const segments = (dataDir: string) =>
  fs.readdirSync(walDir(dataDir)).filter((f) => /^[0-9A-F]{24}$/.test(f)).length;

describe('VACUUM after a crash-killed INSERT', () => {
  it('prunes its tuples and truncates the relation to 0 bytes on primary and standby', async () => {
    // wal_keep_size: the end-of-recovery checkpoint would otherwise remove segments the standby
    // still needs (it had received only what the primary flushed), as PostgreSQL's would without a
    // replication slot.
    const c = await clusters.start({ wal: { walKeepSizeMb: 64 } });
    await c.sql('primary', 'CREATE TABLE big (c int)');
    const before = segments(c.dataDir('primary'));
    const primary = await c.client('primary');
    // 200M rows, ~885k pages: far more than the test waits for; it never commits.
    const insert = primary.sql('INSERT INTO big SELECT generate_series(1, 200000000)').then(
      () => 'committed',
      () => 'killed',
    );
    // Several MB of the INSERT's WAL are in segment files (written, not necessarily flushed).
    await c.pollUntil(
      async () => segments(c.dataDir('primary')) >= before + 8,
      'INSERT WAL on disk',
    );
    await c.kill('primary');
    expect(await insert).toBe('killed');

    await c.startNode('primary'); // crash recovery replays the INSERT's pages, no commit record
    expect((await c.status('primary')).startupReplay.crashRecovery).toBe(true);
    expect(Number(await c.scalar('primary', 'SELECT count(*) FROM big'))).toBe(0);
    const recovered = Number(await c.scalar('primary', "SELECT pg_relation_size('big')"));
    expect(recovered).toBeGreaterThan(1000 * 8192);
    await c.waitForCatchup();
    expect(Number(await c.scalar('standby', "SELECT pg_relation_size('big')"))).toBe(recovered);

    await c.sql('primary', 'VACUUM big');
    expect(Number(await c.scalar('primary', "SELECT pg_relation_size('big')"))).toBe(0);
    await c.waitForCatchup();
    expect(Number(await c.scalar('standby', "SELECT pg_relation_size('big')"))).toBe(0);
    expect(Number(await c.scalar('standby', 'SELECT count(*) FROM big'))).toBe(0);
    // And the table works on: a new row is there on both.
    await c.sql('primary', 'INSERT INTO big VALUES (1)');
    await c.waitForCatchup();
    expect(Number(await c.scalar('standby', 'SELECT count(*) FROM big'))).toBe(1);
  });
});
