/**
 * The WAL segment PostgreSQL preallocates as recovery ends (StartupXLOG's PreallocXlogFiles), as
 * predict counts it, held against what a real PostgreSQL 15 promotion leaves in pg_wal (skipped
 * with the reason without it). Per case a fresh primary + standby; the standby runs with
 * `wal_recycle = off`, so no checkpoint renames an old segment into a future one and a segment of
 * the new timeline past the end of WAL exists only if something preallocated it. The primary
 * switches to a new segment and writes one logical message that ends the WAL at a chosen fraction
 * of it, then stops. Checked: predict counts the preallocation exactly when the end of WAL lies in
 * the last quarter of its segment, and after the promotion (and a CHECKPOINT, whose own
 * PreallocXlogFiles decides the same a few hundred bytes later) the new timeline's next segment
 * exists exactly then. No timing is asserted.
 */
import * as fs from 'node:fs';
import * as path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import { runScript } from '../helpers/cli.ts';
import { PgDirs, pgUnavailableReason } from '../helpers/postgres.ts';
import {
  initPgCluster,
  pgConnect,
  pgConnectionString,
  pgCtl,
  pgDataDir,
} from '../../scripts/postgres/pg-cluster.ts';
import { pollUntil } from '../../server/poll.ts';
import { parseLsn } from '../../wal/lsn.ts';
import { segmentFileName, segmentOf, segmentOffset } from '../../wal/segment.ts';

const reason = pgUnavailableReason();
const dirs = new PgDirs();
afterAll(() => dirs.removeAll());

const SEGMENT = 16 << 20; // initdb's default wal_segment_size

type Json = any; // eslint-disable-line @typescript-eslint/no-explicit-any

/** The end of WAL at `fraction` of a fresh segment; predict's count, the files after promotion. */
async function promoteEndingAt(fraction: number) {
  const dir = dirs.fresh('predict-prealloc');
  await initPgCluster(dir, { sharedBuffers: '128MB', primarySharedBuffers: '128MB' });
  const sData = pgDataDir(dir, 'standby');
  fs.appendFileSync(path.join(sData, 'postgresql.auto.conf'), 'wal_recycle = off\n');
  await pgCtl(dir, 'standby', 'stop', { mode: 'fast' });
  await pgCtl(dir, 'standby', 'start');
  const one = async (node: 'primary' | 'standby', q: string): Promise<Json> => {
    const c = await pgConnect(dir, node);
    try {
      return (await c.query(q)).rows[0];
    } finally {
      await c.end();
    }
  };
  await one('primary', 'SELECT pg_switch_wal()');
  const start = parseLsn(
    String((await one('primary', 'SELECT pg_current_wal_lsn()::text AS l')).l),
  );
  // One record of about `fraction` of a segment (its headers add under 0.5 %).
  const bytes = Math.round(fraction * SEGMENT) - segmentOffset(start, SEGMENT);
  await one('primary', `SELECT pg_logical_emit_message(false, 'walsim', repeat('x', ${bytes}))`);
  // A fast stop adds its shutdown checkpoint (about 100 bytes) and sends it before exiting.
  await pgCtl(dir, 'primary', 'stop', { mode: 'fast' });
  await pollUntil(
    async () =>
      segmentOf(
        parseLsn(String((await one('standby', 'SELECT pg_last_wal_replay_lsn()::text AS l')).l)),
        SEGMENT,
      ) === segmentOf(start, SEGMENT) &&
      (await one('standby', 'SELECT pg_last_wal_replay_lsn() = pg_last_wal_receive_lsn() AS ok'))
        .ok === true,
    'the standby to replay all it received',
    60_000,
    50,
  );
  const r = await runScript('predict.ts', [
    ...['--standby', pgConnectionString(dir, 'standby')],
    ...['--pgdata', sData, '--json'],
  ]);
  expect(r.stderr).toBe('');
  const p = r.json.predictions[0];
  await pgCtl(dir, 'standby', 'promote');
  await one('standby', 'CHECKPOINT');
  const endOfLog = parseLsn(p.range.to);
  const next = segmentFileName(2, segmentOf(endOfLog, SEGMENT) + 1, SEGMENT);
  return {
    offset: segmentOffset(endOfLog, SEGMENT) / SEGMENT,
    counted: p.counts.openForWrites.walSegmentPreallocs as number,
    nextExists: fs.existsSync(path.join(sData, 'pg_wal', next)),
  };
}

describe.skipIf(reason !== null)(
  `the segment preallocated at promotion, on real PostgreSQL 15${reason ? ` (skipped: ${reason})` : ''}`,
  () => {
    it('is counted, and made, when the end of WAL lies in the last quarter of its segment', async () => {
      const late = await promoteEndingAt(0.85);
      expect(late.offset).toBeGreaterThan(0.8);
      expect(late.offset).toBeLessThan(0.9);
      expect(late.counted).toBe(1);
      expect(late.nextExists).toBe(true);
    }, 300_000);

    it('is neither counted nor made when it lies before', async () => {
      const early = await promoteEndingAt(0.5);
      expect(early.offset).toBeGreaterThan(0.45);
      expect(early.offset).toBeLessThan(0.55);
      expect(early.counted).toBe(0);
      expect(early.nextExists).toBe(false);
    }, 300_000);
  },
);
