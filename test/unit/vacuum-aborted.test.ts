/**
 * VACUUM removes the tuples of aborted transactions — rolled back (an abort record) or killed by a
 * crash (no commit or abort record: after crash recovery the xid is neither running nor committed,
 * HeapTupleSatisfiesVacuum's "aborted or crashed") — and truncates the empty tail, on the primary
 * and, through the WAL-logged SMGR_TRUNCATE, on a standby (whose drop path runs).
 * Method: the executor logs into an in-test WAL; a primary and a standby apply every record by
 * redo. The crash: the INSERT's commit never happens (the process dies first); the restarted
 * primary is rebuilt by replaying the logged records from nothing (crash recovery).
 */
import { describe, expect, it } from 'vitest';
import { executeWrite, heapPlannerOf, type ExecutorContext } from '../../primary/executor.ts';
import { parseStatement } from '../../sql/parser.ts';
import { DEFAULT_DROP_SETTINGS, type DropResult } from '../../storage/drop.ts';
import { NodeStorage } from '../../storage/node-storage.ts';
import { redo } from '../../storage/redo.ts';
import { MAIN_FORKNUM, type TransactionId, type WalRecordBody } from '../../wal/records.ts';

class Killed extends Error {}

function pair() {
  const wal: Array<{ body: WalRecordBody; xid: TransactionId }> = [];
  const standby = NodeStorage.create(4096, DEFAULT_DROP_SETTINGS);
  standby.smgr.inRecovery = true;
  const drops: DropResult[] = [];
  standby.onDrop = (r) => drops.push(r);
  let primary = NodeStorage.create(4096, DEFAULT_DROP_SETTINGS);
  /** The next commit dies with the process: its record is never written. */
  let killAtCommit = false;
  const log = (body: WalRecordBody, xid: TransactionId) => {
    wal.push({ body, xid });
    redo(primary, body, xid);
    redo(standby, body, xid);
    return 0;
  };
  const ctx = (): ExecutorContext => ({
    catalog: primary.catalog,
    heap: heapPlannerOf(primary),
    log,
    commit: async (xid, droppedRels) => {
      if (killAtCommit) {
        killAtCommit = false;
        throw new Killed('SIGKILL before the commit record');
      }
      log({ kind: 'XACT_COMMIT', xactTime: 0, droppedRels }, xid);
    },
    checkpoint: async () => {},
    yieldNow: async () => {},
  });
  return {
    standby,
    drops,
    get primary() {
      return primary;
    },
    sql: (text: string) => executeWrite(ctx(), parseStatement(text)),
    killAtNextCommit: () => (killAtCommit = true),
    /** Restart after the kill: crash recovery replays the whole WAL into a fresh node. */
    crashRecovery: () => {
      killAtCommit = false;
      primary = NodeStorage.create(4096, DEFAULT_DROP_SETTINGS);
      primary.smgr.inRecovery = true;
      for (const { body, xid } of wal) redo(primary, body, xid);
      primary.endRecovery();
    },
    logRaw: log,
  };
}

const size = (st: NodeStorage, name: string) => {
  const rel = st.catalog.lookup(name)!;
  return { heap: st.heap.nblocks(rel), smgr: st.smgr.diskNblocks(rel, MAIN_FORKNUM) };
};

describe('VACUUM of aborted inserts', () => {
  it('prunes a crash-killed INSERT and truncates the relation to 0 pages on primary and standby', async () => {
    const c = pair();
    await c.sql('CREATE TABLE t (c int)');
    c.killAtNextCommit();
    await expect(c.sql('INSERT INTO t SELECT generate_series(1, 100000)')).rejects.toThrow(Killed);
    c.crashRecovery();
    const rel = c.primary.catalog.lookup('t')!;
    expect(c.primary.heap.countVisible(rel, c.primary.clog)).toBe(0);
    expect(size(c.primary, 't')).toEqual({ heap: 443, smgr: 443 });
    expect(c.primary.clog.status(c.primary.catalog.nextXid - 1)).toBe('in_progress');

    await c.sql('VACUUM t');
    expect(size(c.primary, 't')).toEqual({ heap: 0, smgr: 0 });
    expect(size(c.standby, 't')).toEqual({ heap: 0, smgr: 0 });
    // The standby replayed the truncation through its drop path (DropRelFileNodeBuffers: 443
    // cached blocks ≥ NBuffers/32 = 128, so the full scan), which invalidated the tail's buffers.
    expect(c.drops).toHaveLength(1);
    expect(c.drops[0]).toMatchObject({ path: 'full-scan', scanned: 4096, matcher: 'single' });
    expect(c.drops[0]!.invalidated).toBeGreaterThan(0);
    expect(c.standby.orphanBuffers()).toEqual([]);
    // New rows after it are visible, the crashed ones never come back.
    await c.sql('INSERT INTO t VALUES (7)');
    expect(c.primary.heap.countVisible(rel, c.primary.clog)).toBe(1);
    expect(c.standby.heap.countVisible(rel, c.standby.clog)).toBe(1);
  });

  it('prunes a rolled-back INSERT (abort record) the same way', async () => {
    const c = pair();
    await c.sql('CREATE TABLE t (c int)');
    await c.sql('INSERT INTO t VALUES (1)');
    c.killAtNextCommit();
    await expect(c.sql('INSERT INTO t SELECT generate_series(1, 50000)')).rejects.toThrow(Killed);
    const xid = c.primary.catalog.nextXid - 1;
    c.logRaw({ kind: 'XACT_ABORT', xactTime: 0, droppedRels: [] }, xid);
    await c.sql('VACUUM t');
    // Block 0 keeps the committed row; the rest of the tail goes.
    expect(size(c.primary, 't')).toEqual({ heap: 1, smgr: 1 });
    expect(size(c.standby, 't')).toEqual({ heap: 1, smgr: 1 });
    const rel = c.primary.catalog.lookup('t')!;
    expect(c.primary.heap.nitems(rel, 0)).toBe(1);
  });
});
