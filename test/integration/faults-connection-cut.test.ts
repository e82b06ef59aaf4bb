/**
 * The replication connection is cut in the middle of a batch (the standby's socket is destroyed,
 * no close handshake) several times while a large insert streams. Promised: the standby
 * reconnects with backoff, every reconnection starts at its flush LSN, no WAL byte is received
 * twice or skipped, no record is replayed twice, and after catch-up the nodes are equal.
 * Method: count what the walreceiver accepted (bytes) and what the startup process replayed
 * (records), and compare with the records actually in the WAL between the same positions.
 */
import { afterEach, describe, expect, it } from 'vitest';
import { TestCluster } from '../helpers/cluster.ts';
import { recordsIn } from '../helpers/wal-files.ts';
import { parseLsn } from '../../wal/lsn.ts';
import { maxAlign } from '../../wal/codec.ts';

let cluster: TestCluster | null = null;
afterEach(async () => {
  await cluster?.destroy();
  cluster = null;
});

const strip = (tables: Array<{ buffered: string[] }>) => tables.map(({ buffered: _, ...t }) => t);

describe('replication connection cut mid-batch', () => {
  it('reconnects from the flush LSN; no byte received twice, no record replayed twice; nodes equal', async () => {
    const c = (cluster = await TestCluster.start({ synchronousCommit: 'on' }));
    const standby = await c.client('standby');
    const s0 = await c.status('standby');
    const firstStart = parseLsn(s0.receiverStartLsns[0]);
    let done = false;
    await c.sql('primary', 'CREATE TABLE big (c int)');
    // A stream of commits, each waiting for the standby's flush (synchronous_commit=on).
    const insert = (async () => {
      for (let i = 0; i < 200; i++) await c.sql('primary', `INSERT INTO big SELECT generate_series(${i * 2000 + 1}, ${(i + 1) * 2000})`);
      done = true;
    })();
    let cutsMidStatement = 0;
    for (let i = 0; i < 6; i++) {
      const seen = (await c.status('standby')).receivedMessages;
      // Cut only once new WAL is arriving, i.e. while batches are on the wire.
      await c.pollUntil(async () => done || (await c.status('standby')).receivedMessages > seen, 'WAL arriving');
      if (done) break;
      await standby.request({ op: 'fault', fault: 'cut_replication', holdMs: i * 50 });
      cutsMidStatement++;
    }
    await insert;
    await c.sql('primary', 'DELETE FROM big WHERE c > 200000');
    await c.sql('primary', 'VACUUM big');
    await c.waitForCatchup('replay');
    expect(cutsMidStatement).toBe(6);
    const s = await c.status('standby');
    expect(s.faultsInjected.cut_replication).toBe(cutsMidStatement);
    expect(s.receiverConnects).toBe(1 + cutsMidStatement);
    expect(s.replayError).toBeNull();
    // Each reconnection started at the flush LSN: start positions only grow, and the bytes
    // accepted add up to exactly the WAL between the first start and the final flush position.
    const starts = (s.receiverStartLsns as string[]).map(parseLsn);
    expect(starts).toHaveLength(1 + cutsMidStatement);
    for (let i = 1; i < starts.length; i++) expect(starts[i]!).toBeGreaterThanOrEqual(starts[i - 1]!);
    const flush = parseLsn(s.receiveLsn);
    expect(s.receivedBytes).toBe(flush - firstStart);
    // Replayed records = records in the WAL from where replay began to where it ended.
    const inWal = recordsIn(c.dataDir('standby'), maxAlign(firstStart), flush, { timeline: 1, segmentSize: 1 << 20 });
    expect(s.recordsReplayed).toBe(inWal.length);
    expect(maxAlign(inWal.at(-1)!.endLsn)).toBe(flush);
    const p = await (await c.client('primary')).inspect();
    const q = await standby.inspect();
    expect(strip(q.tables)).toEqual(strip(p.tables));
    expect(q.orphanBuffers).toEqual([]);
    expect(await c.scalar('standby', 'SELECT count(*) FROM big')).toBe(200000);
  });
});
