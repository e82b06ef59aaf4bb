/**
 * A CHECKPOINT with many tables does not freeze the node: the data image's cost
 * grows with the relations changed since the last image, not with the number of relations, its
 * fsyncs are batched into a handful of files, and the node answers control requests while the
 * image is written — on the primary at a checkpoint and on the standby at the restartpoint it
 * makes when it replays the checkpoint record.
 * Method: 20,000 tables; keep several status requests in flight on a second connection while the
 * checkpoint (restartpoint) runs, and check the server's counter of status requests answered while
 * an image was being written; check the image writer's counters (relations written = relations
 * changed, files written, fsyncs). Latencies are printed, not asserted.
 */
import { describe, expect, it } from 'vitest';
import { clustersPerSuite, TestCluster } from '../helpers/cluster.ts';
import { ControlClient } from '../../server/control-client.ts';
import { readPidFile, readToken } from '../../server/cluster-files.ts';

const TABLES = 20_000;

const clusters = clustersPerSuite();
let c: TestCluster;

/** Status requests on a fresh connection, `depth` in flight at a time, until `done` settles. */
async function statusWhile(
  cluster: TestCluster,
  node: string,
  done: Promise<unknown>,
): Promise<{ answered: number; maxMs: number }> {
  const pid = readPidFile(cluster.dataDir(node))!;
  const client = await ControlClient.connect('127.0.0.1', pid.port, readToken(cluster.dir));
  let finished = false;
  void done.finally(() => (finished = true));
  let answered = 0;
  let maxMs = 0;
  const worker = async () => {
    while (!finished) {
      const t = performance.now();
      await client.status();
      maxMs = Math.max(maxMs, performance.now() - t);
      answered++;
    }
  };
  try {
    await Promise.all([worker(), worker(), worker(), worker(), done]);
  } finally {
    client.close();
  }
  return { answered, maxMs };
}

describe('checkpoint with many tables', () => {
  it(`writes only changed relations and keeps answering, with ${TABLES} tables (primary and standby)`, async () => {
    c = await clusters.start({ synchronousCommit: 'off', walSegmentSize: 16 << 20 });
    const primary = await c.client('primary');
    for (let i = 0; i < TABLES; i += 1000) {
      await Promise.all(
        Array.from({ length: 1000 }, (_, k) => primary.sql(`CREATE TABLE t${i + k} (c int)`)),
      );
    }
    await c.waitForCatchup('replay');
    await c.sql('standby', 'SELECT pg_wal_replay_pause()');
    await c.pollUntil(
      async () => (await c!.status('standby')).pauseState === 'paused',
      'standby paused',
    );

    // Checkpoint 1: all 20,000 relations are new since initdb's image.
    const cp1 = c.sql('primary', 'CHECKPOINT');
    const during1 = await statusWhile(c, 'primary', cp1);
    const p1 = (await c.status('primary')).dataImage;
    expect(p1.last).toMatchObject({
      relationsChanged: TABLES,
      relationsWritten: TABLES,
      relations: TABLES,
      relationsCompacted: 0,
    });
    // One pack, the index, smgr, CLOG, catalog and image.json: a fixed number of files and fsyncs.
    expect(p1.last.filesWritten).toBe(6);
    expect(p1.last.fsyncs).toBe(7);
    expect(p1.statusAnsweredDuringWrite).toBeGreaterThan(0);

    // Checkpoint 2: five tables changed.
    for (let k = 0; k < 5; k++)
      await c.sql('primary', `INSERT INTO t${k * 997} SELECT generate_series(1, 1000)`);
    const cp2 = c.sql('primary', 'CHECKPOINT');
    const during2 = await statusWhile(c, 'primary', cp2);
    const p2 = (await c.status('primary')).dataImage;
    expect(p2.last).toMatchObject({
      relationsChanged: 5,
      relationsWritten: 5,
      relations: TABLES,
      relationsDropped: 0,
    });
    expect(p2.last.filesWritten).toBe(6);

    // The standby replays both checkpoint records: a restartpoint at each, same counters, while it
    // keeps answering.
    await c.waitForCatchup('flush');
    const resumed = c
      .sql('standby', 'SELECT pg_wal_replay_resume()')
      .then(() => c!.waitForCatchup('replay'));
    const duringStandby = await statusWhile(c, 'standby', resumed);
    const s = (await c.status('standby')).dataImage;
    expect(s.writes).toBe(2);
    expect(s.last).toMatchObject({ relationsChanged: 5, relationsWritten: 5, relations: TABLES });
    expect(s.statusAnsweredDuringWrite).toBeGreaterThan(0);
    console.log(
      `status during checkpoint 1 (${TABLES} relations written): ${during1.answered} answered, max ${during1.maxMs.toFixed(1)} ms; ` +
        `checkpoint 2 (5 written): ${during2.answered}, max ${during2.maxMs.toFixed(1)} ms; ` +
        `standby replaying both restartpoints: ${duringStandby.answered}, max ${duringStandby.maxMs.toFixed(1)} ms`,
    );

    // Both nodes restart from these images and agree.
    await c.stopNode('standby', 'immediate');
    await c.startNode('standby');
    await c.waitForCatchup('replay');
    const tables = async (node: string) =>
      (await (await c!.client(node)).inspect()).tables.map(({ name, rows, digest }) => ({
        name,
        rows,
        digest,
      }));
    const [pt, st] = [await tables('primary'), await tables('standby')];
    expect(pt.length).toBe(TABLES);
    expect(st).toEqual(pt);
  }, 240_000);
});
