/**
 * WAL is removed the way PostgreSQL's checkpoints remove it (xlog.c KeepLogSeg, RemoveOldXlogFiles,
 * XLogCheckpointNeeded): a checkpoint removes the segments before its REDO point, keeping what a
 * connected standby still needs (from its replay position, so a paused standby loses nothing);
 * a standby's restartpoint does the same with its own WAL; max_wal_size triggers checkpoints; a
 * standby that asks for a removed segment gets "requested WAL segment … has already been removed".
 * Method: 1 MB segments, real processes; count segment files and the checkpointer's counters,
 * compare them with the segment numbers of the REDO points, and check the nodes stay equal.
 */
import * as fs from 'node:fs';
import * as path from 'node:path';
import { describe, expect, it } from 'vitest';
import { clustersPerTest, TestCluster } from '../helpers/cluster.ts';
import { expectOneLineError, runScript } from '../helpers/cli.ts';
import { parseLsn } from '../../wal/lsn.ts';
import { listSegmentFiles, segmentFileName, segmentOf } from '../../wal/segment.ts';
import { readControlFile } from '../../wal/control-file.ts';
import { nodeDisk } from '../../common/node-disk.ts';

/** walsim's smallest segment (64 kB), so that a test crosses many segments cheaply. */
const SEG = 64 * 1024;

const clusters = clustersPerTest();

function segnos(cluster: TestCluster, node: string): number[] {
  return listSegmentFiles(cluster.dataDir(node), SEG, nodeDisk).map((s) => s.segno);
}

/** Insert batches until the primary's WAL reaches `segments` more segments than now. */
async function writeSegments(
  cluster: TestCluster,
  table: string,
  segments: number,
  rows = 100_000,
): Promise<void> {
  const start = segmentOf(parseLsn(String((await cluster.status('primary')).flushLsn)), SEG);
  for (
    let i = 0;
    segmentOf(parseLsn(String((await cluster.status('primary')).flushLsn)), SEG) < start + segments;
    i++
  ) {
    await cluster.sql('primary', `INSERT INTO ${table} SELECT generate_series(1, ${rows})`);
    expect(i).toBeLessThan(100);
  }
}

describe('WAL recycling', () => {
  it('a checkpoint keeps what a paused standby needs; a restartpoint and a later checkpoint remove the rest', async () => {
    const c = await clusters.start({ synchronousCommit: 'remote_write', walSegmentSize: SEG });
    await c.sql('primary', 'CREATE TABLE t (c int)');
    await writeSegments(c, 't', 2);
    await c.waitForCatchup('replay');
    await c.sql('standby', 'SELECT pg_wal_replay_pause()');
    await c.pollUntil(async () => (await c!.status('standby')).pauseState === 'paused', 'paused');
    const pausedAt = parseLsn(String((await c.status('standby')).replayLsn));
    await writeSegments(c, 't', 4); // the seed's procedure: the primary writes while replay is paused
    await c.waitForCatchup('flush');
    await c.sql('primary', 'CHECKPOINT');
    const redo1 = readControlFile(c.dataDir('primary'), nodeDisk).redoLsn;
    const p1 = await c.status('primary');
    // Everything before the paused standby's replay segment went, nothing after it.
    expect(segnos(c, 'primary')[0]).toBe(segmentOf(pausedAt, SEG));
    expect(p1.checkpointer.walFilesRemoved).toBe(segmentOf(pausedAt, SEG) - 1); // segments 1 .. paused-1
    expect(segmentOf(redo1, SEG) - segmentOf(pausedAt, SEG)).toBeGreaterThanOrEqual(4);
    expect(segmentOf(pausedAt, SEG)).toBeGreaterThan(1);
    // The standby lost nothing: it replays all of it after resume and equals the primary.
    await c.sql('standby', 'SELECT pg_wal_replay_resume()');
    await c.waitForCatchup('replay');
    const s = await c.status('standby');
    // Its restartpoint at the replayed checkpoint record removed its own WAL before that REDO point.
    expect(s.checkpointer.walFilesRemoved).toBeGreaterThan(0);
    expect(segnos(c, 'standby')[0]).toBe(segmentOf(redo1, SEG));
    const content = async (node: string) =>
      (await (await c!.client(node)).inspect()).tables.map(({ name, rows, digest }) => ({
        name,
        rows,
        digest,
      }));
    expect(await content('standby')).toEqual(await content('primary'));
    // The standby has replayed everything: the next checkpoint keeps only its own REDO segment on.
    await c.sql('primary', 'CHECKPOINT');
    const redo2 = readControlFile(c.dataDir('primary'), nodeDisk).redoLsn;
    expect(segnos(c, 'primary')[0]).toBe(segmentOf(redo2, SEG));
  });

  it("a standby asking for a removed segment gets PostgreSQL's error", async () => {
    const c = await clusters.start({ synchronousCommit: 'local', walSegmentSize: SEG });
    await c.sql('primary', 'CREATE TABLE t (c int)');
    await c.waitForCatchup('replay');
    const standbyFlush = parseLsn(String((await c.status('standby')).receiveLsn));
    await c.stopNode('standby', 'fast');
    await writeSegments(c, 't', 3);
    await c.sql('primary', 'CHECKPOINT');
    expect(segnos(c, 'primary')[0]).toBeGreaterThan(segmentOf(standbyFlush, SEG));
    await c.startNode('standby');
    const wanted = segmentFileName(1, segmentOf(standbyFlush, SEG), SEG);
    await c.pollUntil(
      async () =>
        String((await c!.status('standby')).receiverLastError).includes('has already been removed'),
      'the refusal',
    );
    const s = await c.status('standby');
    expect(s.receiverLastError).toContain(
      `requested WAL segment ${wanted} has already been removed`,
    );
    expect(s.receiverState).not.toBe('streaming');
    expect(c.serverLog('primary')).toContain(
      `requested WAL segment ${wanted} has already been removed`,
    );
  });

  it('wal_keep_size keeps segments for a standby that was down', async () => {
    const c = await clusters.start({
      synchronousCommit: 'local',
      walSegmentSize: SEG,
      wal: { walKeepSizeMb: 1 },
    });
    await c.sql('primary', 'CREATE TABLE t (c int)');
    await writeSegments(c, 't', 12);
    await c.waitForCatchup('replay');
    await c.stopNode('standby', 'fast');
    await writeSegments(c, 't', 8); // fewer than the 16 segments wal_keep_size keeps
    await c.sql('primary', 'CHECKPOINT');
    const redo = readControlFile(c.dataDir('primary'), nodeDisk).redoLsn;
    // KeepLogSeg: 1 MB = 16 segments back from the checkpoint record's segment (never below 1).
    expect(segmentOf(redo, SEG)).toBeGreaterThan(16);
    expect(segnos(c, 'primary')[0]).toBe(segmentOf(redo, SEG) - 16);
    await c.startNode('standby');
    await c.waitForCatchup('replay');
  });

  it('max_wal_size requests checkpoints that bound pg_wal', async () => {
    // 2 MB of max_wal_size with 64 kB segments: CheckPointSegments = floor(32 / 1.9) = 16.
    const c = await clusters.start({
      synchronousCommit: 'remote_write',
      walSegmentSize: SEG,
      wal: { maxWalSizeMb: 2 },
    });
    await c.sql('primary', 'CREATE TABLE t (c int)');
    await writeSegments(c, 't', 48, 400_000);
    await c.waitForCatchup('replay');
    await c.pollUntil(
      async () => (await c!.status('primary')).checkpointer.walVolumeCheckpoints >= 2,
      'checkpoints by WAL volume',
    );
    const p = await c.status('primary');
    expect(p.checkpointer.checkpointSegments).toBe(16);
    expect(p.checkpointer.timedCheckpoints).toBe(0);
    expect(p.checkpointer.walFilesRemoved).toBeGreaterThan(0);
    expect(p.walFiles).toBeLessThan(48);
    expect(await c.scalar('primary', 'SHOW max_wal_size')).toBe('2MB');
    // The standby's restartpoints at the replayed checkpoint records bound its pg_wal too.
    const s = await c.status('standby');
    expect(s.checkpointer.walFilesRemoved).toBeGreaterThan(0);
  });

  it("cluster start accepts the seed's checkpoint_timeout = 30min and max_wal_size = 20GB and refuses bad values", async () => {
    const dir = path.join(clusters.dir('walsim-walset-'), 'c');
    const bad = await runScript('cluster.ts', [
      'start',
      '--dir',
      dir,
      '--checkpoint-timeout',
      '10s',
    ]);
    expectOneLineError(
      bad,
      /^error: 10 s is outside the valid range for parameter "checkpoint_timeout"/,
    );
    expect(fs.existsSync(dir)).toBe(false);
    const start = await runScript('cluster.ts', [
      'start',
      '--dir',
      dir,
      '--shared-buffers',
      '16MB',
      '--wal-segment-size',
      '1MB',
      '--checkpoint-timeout',
      '30min',
      '--max-wal-size',
      '20GB',
    ]);
    expect(start.code, start.stderr).toBe(0);
    const h = clusters.adopt(dir);
    for (const node of ['primary', 'standby']) {
      expect(await h.scalar(node, 'SHOW checkpoint_timeout')).toBe('30min');
      expect(await h.scalar(node, 'SHOW max_wal_size')).toBe('20GB');
      expect(await h.scalar(node, 'SHOW wal_keep_size')).toBe('0');
    }
  });
});
