/**
 * A byte flipped in a WAL segment on the standby's disk (real processes). Replay stops at exactly
 * that record, with an error naming its LSN and segment file in status; queries still work; nothing
 * after it is applied. Promotion then ends recovery at the last valid record (the new timeline
 * branches there, not after the garbage) and the promoted node survives a restart with every write;
 * a restart instead of a promotion heals the standby by streaming the record again.
 * Method: pause replay, commit single-row inserts, flip a byte in the k-th insert's record in the
 * standby's segment file, resume, and compare counts and positions.
 */
import * as fs from 'node:fs';
import * as path from 'node:path';
import { describe, expect, it } from 'vitest';
import { clustersPerTest, TestCluster } from '../helpers/cluster.ts';
import { flipByteIn, recordsIn } from '../helpers/wal-files.ts';
import { formatLsn, parseLsn } from '../../wal/lsn.ts';
import { maxAlign } from '../../wal/codec.ts';
import { readTimelineHistory } from '../../wal/segment.ts';
import type { WalRecord } from '../../wal/records.ts';
import { nodeDisk } from '../../common/node-disk.ts';

const SEG = 1024 * 1024;
const WAL = { timeline: 1, segmentSize: SEG };

const clusters = clustersPerTest();

/** Pause replay, commit rows 1..n one per statement, flip a byte in row k's HEAP_INSERT on the standby. */
async function corruptRow(
  c: TestCluster,
  n: number,
  k: number,
): Promise<{ bad: WalRecord; file: string; pausedAt: number }> {
  await c.sql('primary', 'CREATE TABLE r (c int)');
  await c.waitForCatchup('replay');
  await c.sql('standby', 'SELECT pg_wal_replay_pause()');
  await c.pollUntil(
    async () => (await c.scalar('standby', 'SELECT pg_get_wal_replay_pause_state()')) === 'paused',
    'paused',
  );
  const pausedAt = parseLsn((await c.status('standby')).replayLsn);
  for (let i = 1; i <= n; i++) await c.sql('primary', `INSERT INTO r VALUES (${i})`);
  await c.waitForCatchup('flush');
  const recs = recordsIn(
    c.dataDir('standby'),
    maxAlign(pausedAt),
    parseLsn((await c.status('standby')).receiveLsn),
    WAL,
  );
  const inserts = recs.filter((r) => r.body.kind === 'HEAP_INSERT');
  expect(inserts).toHaveLength(n);
  const bad = inserts[k - 1]!;
  expect(bad.body).toMatchObject({ value: k });
  const file = flipByteIn(c.dataDir('standby'), bad, WAL);
  return { bad, file, pausedAt };
}

describe('corrupt WAL on the standby', () => {
  it('stops replay at the bad record, reports LSN and file, keeps answering, applies nothing after it', async () => {
    const c = await clusters.start({ synchronousCommit: 'on' });
    const { bad, file } = await corruptRow(c, 20, 8);
    await c.sql('standby', 'SELECT pg_wal_replay_resume()');
    await c.pollUntil(async () => (await c.status('standby')).replayError !== null, 'replay error');
    const s = await c.status('standby');
    expect(s.replayError.lsn).toBe(formatLsn(bad.lsn));
    expect(s.replayError.message).toContain(formatLsn(bad.lsn));
    expect(s.replayError.message).toContain(file);
    expect(s.replayError.message).toMatch(/crc/i);
    expect(parseLsn(s.replayLsn)).toBeLessThanOrEqual(bad.lsn); // nothing after the bad record
    expect(await c.scalar('standby', 'SELECT count(*) FROM r')).toBe(7);
    // More WAL keeps arriving and being flushed, but is not replayed; status keeps saying why.
    await c.sql('primary', 'INSERT INTO r VALUES (100)');
    await c.waitForCatchup('flush');
    const later = await c.status('standby');
    expect(later.replayError).toEqual(s.replayError);
    expect(later.replayLsn).toBe(s.replayLsn);
    expect(await c.scalar('standby', 'SELECT count(*) FROM r')).toBe(7);
    expect(await c.scalar('standby', 'SELECT pg_is_in_recovery()')).toBe(true);
    expect(fs.readFileSync(path.join(c.dataDir('standby'), 'server.log'), 'utf8')).toContain(
      `replay stopped: invalid WAL record at ${formatLsn(bad.lsn)}`,
    );
  });

  it('a restart heals the standby: local WAL ends at the bad record and is streamed again', async () => {
    const c = await clusters.start({ synchronousCommit: 'on' });
    await corruptRow(c, 12, 5);
    await c.sql('standby', 'SELECT pg_wal_replay_resume()');
    await c.pollUntil(async () => (await c.status('standby')).replayError !== null, 'replay error');
    await c.stopNode('standby', 'fast');
    await c.startNode('standby');
    await c.waitForCatchup('replay');
    expect((await c.status('standby')).replayError).toBeNull();
    expect(await c.scalar('standby', 'SELECT count(*) FROM r')).toBe(12);
    const p = await (await c.client('primary')).inspect();
    const q = await (await c.client('standby')).inspect();
    expect(q.tables.map(({ buffered: _, ...t }) => t)).toEqual(
      p.tables.map(({ buffered: _, ...t }) => t),
    );
  });

  it('promotion ends recovery at the last valid record; the new timeline does not start after garbage', async () => {
    const c = await clusters.start({ synchronousCommit: 'on' });
    const { bad } = await corruptRow(c, 10, 4);
    await c.sql('standby', 'SELECT pg_wal_replay_resume()');
    await c.pollUntil(async () => (await c.status('standby')).replayError !== null, 'replay error');
    await c.stopNode('primary', 'immediate');
    const promoted = (await (
      await c.client('standby')
    ).request({ op: 'promote', wait: true, waitSeconds: 60 })) as { promoted: boolean };
    expect(promoted.promoted).toBe(true);
    // The switch point of timeline 2 is the bad record's start (EndOfLog), not the received end.
    const history = readTimelineHistory(c.dataDir('standby'), 2, nodeDisk);
    expect(history[0]).toMatchObject({ tli: 1, endLsn: bad.lsn });
    expect(await c.scalar('standby', 'SELECT count(*) FROM r')).toBe(3);
    await c.sql('standby', 'INSERT INTO r VALUES (1000), (1001)');
    // Restart (immediate: crash recovery reads the new timeline from the last checkpoint).
    await c.stopNode('standby', 'immediate');
    await c.startNode('standby');
    const s = await c.status('standby');
    expect(s.inRecovery).toBe(false);
    expect(s.timeline).toBe(2);
    expect(await c.scalar('standby', 'SELECT count(*) FROM r')).toBe(5);
    // Every record from the branch point on is readable on timeline 2, up to the flushed end.
    const recs = recordsIn(c.dataDir('standby'), bad.lsn, parseLsn(s.flushLsn), {
      timeline: 2,
      segmentSize: SEG,
    });
    expect(recs[0]!.body.kind).toBe('END_OF_RECOVERY');
    expect(recs.at(-1)!.endLsn).toBeLessThanOrEqual(parseLsn(s.flushLsn));
    expect(maxAlign(recs.at(-1)!.endLsn)).toBe(parseLsn(s.flushLsn));
  });
});
