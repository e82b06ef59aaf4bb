/**
 * Each major's pruning records in the replay model: 13 logs CLEAN, 14–16 PRUNE and VACUUM, 17+
 * PRUNE_ON_ACCESS / PRUNE_VACUUM_SCAN / PRUNE_VACUUM_CLEANUP (one xl_heap_prune with flags). The
 * records are built as bytes of each major (test/helpers/pg-wal-build.ts), read by pg-wal/ and
 * turned into predict's records as a real standby's are (scripts/predict/pg-wal-source.ts): each
 * is priced as the redo routine it is, not by the generic constant, and its FSM update is counted
 * as its redo does it (13–16 always; 17+ only when the flags say line pointers changed; VISIBLE
 * always, on its heap page).
 */
import { describe, expect, it } from 'vitest';
import type { PgMajor } from '../../pg-wal/format.ts';
import { PgWalReader } from '../../pg-wal/reader.ts';
import { toPredictRecord } from '../../scripts/predict/pg-wal-source.ts';
import { RecoveryModel } from '../../scripts/predict/replay-model.ts';
import { recordFromWalinspect } from '../../scripts/predict/wal-records.ts';
import { buildWal, MemorySegments, type BuildRecord } from '../helpers/pg-wal-build.ts';

const REL = { spc: 1663, db: 5, rel: 16384 };
const HEAP2 = 9;
// xl_heap_prune.flags (17+).
const XLHP_HAS_CONFLICT_HORIZON = 1 << 3;
const XLHP_HAS_FREEZE_PLANS = 1 << 4;
const XLHP_HAS_DEAD_ITEMS = 1 << 6;
const XLHP_HAS_NOW_UNUSED_ITEMS = 1 << 7;

/** A Heap2 record on block `block` of REL with the given main data. */
const heap2 = (info: number, main: Buffer, block: number): BuildRecord => ({
  rmid: HEAP2,
  info,
  xid: 0,
  blocks: [{ id: 0, node: REL, block, data: Buffer.alloc(8, 1) }],
  main,
});

/** 17+'s xl_heap_prune: reason, flags, then the conflict horizon when flagged. */
const prune17 = (info: number, flags: number, block: number) => {
  const main = Buffer.alloc(6);
  main[0] = 2; // PRUNE_VACUUM_SCAN's reason
  main[1] = flags | XLHP_HAS_CONFLICT_HORIZON;
  main.writeUInt32LE(740, 2);
  return heap2(info, main, block);
};

/** 14–16's xl_heap_prune (horizon, nredirected, ndead, 16: isCatalogRel) / 13's xl_heap_clean. */
const prune14 = (info: number, block: number) => heap2(info, Buffer.alloc(9), block);

/** Read the records as predict does and replay them into a fresh model. */
async function replayed(major: PgMajor, records: BuildRecord[]) {
  const w = buildWal(records, { major, segmentSize: 1 << 20, startSegno: 1 });
  const reader = new PgWalReader(new MemorySegments(w.segments, w.segmentSize), {
    startLsn: w.records[0]!.lsn,
  });
  const m = new RecoveryModel(16384);
  for await (const r of reader.records()) m.replay(toPredictRecord(r));
  return m.result();
}

describe("each major's pruning records in the replay model", () => {
  it('17 and 18: PRUNE_* priced as PRUNE / VACUUM, FSM updated only when line pointers changed', async () => {
    for (const major of [17, 18] as const) {
      const r = await replayed(major, [
        prune17(0x10, XLHP_HAS_DEAD_ITEMS, 0), // PRUNE_ON_ACCESS
        prune17(0x20, XLHP_HAS_NOW_UNUSED_ITEMS, 1), // PRUNE_VACUUM_SCAN
        prune17(0x20, XLHP_HAS_FREEZE_PLANS, 2), // a freeze-only scan record: no FSM update
        prune17(0x30, XLHP_HAS_NOW_UNUSED_ITEMS, 3), // PRUNE_VACUUM_CLEANUP
      ]);
      expect(r.types.map((t) => [t.type, t.kind, t.count])).toEqual([
        ['PRUNE_ON_ACCESS', 'HEAP2_PRUNE', 1],
        ['PRUNE_VACUUM_SCAN', 'HEAP2_PRUNE', 2],
        ['PRUNE_VACUUM_CLEANUP', 'HEAP2_VACUUM', 1],
      ]);
      expect(r.genericRecords).toBe(0);
      expect(r.counts.pgRecords).toMatchObject({ HEAP2_PRUNE: 3, HEAP2_VACUUM: 1 });
      expect(r.counts.fsmUpdates).toBe(3);
    }
  });

  it('14–16 PRUNE and VACUUM, and 13 CLEAN, update the FSM every time', async () => {
    for (const major of [14, 15, 16] as const) {
      const r = await replayed(major, [prune14(0x10, 0), prune14(0x20, 1)]);
      expect(r.types.map((t) => [t.type, t.kind])).toEqual([
        ['PRUNE', 'HEAP2_PRUNE'],
        ['VACUUM', 'HEAP2_VACUUM'],
      ]);
      expect(r.counts.fsmUpdates).toBe(2);
    }
    const r13 = await replayed(13, [prune14(0x10, 0)]);
    expect(r13.types.map((t) => [t.type, t.kind])).toEqual([['CLEAN', 'HEAP2_PRUNE']]);
    expect(r13.genericRecords).toBe(0);
    expect(r13.counts.fsmUpdates).toBe(1);
  });

  it('VISIBLE updates the FSM of its heap page (block reference 1) in every major', async () => {
    for (const major of [13, 14, 15, 16, 17, 18] as const) {
      const main = Buffer.alloc(5);
      main[4] = 0x03; // VISIBILITYMAP_ALL_VISIBLE | VISIBILITYMAP_ALL_FROZEN
      const r = await replayed(major, [
        {
          rmid: HEAP2,
          info: 0x40,
          xid: 0,
          blocks: [
            { id: 0, fork: 2, node: REL, block: 0 },
            { id: 1, node: REL, block: 7 },
          ],
          main,
        },
      ]);
      expect(r.types.map((t) => [t.type, t.kind])).toEqual([['VISIBLE', 'HEAP2_VISIBLE']]);
      expect(r.counts.fsmUpdates).toBe(1);
      // The FSM fork is read (its size asked, as XLogReadBufferExtended does), not the VM's twice.
      expect(r.counts.smgr.nblocks[1]).toBe(1);
    }
  });

  it("17+ through pg_walinspect's description: the item counts decide the FSM update", () => {
    const row = (desc: string) =>
      recordFromWalinspect({
        start_lsn: '0/3000028',
        xid: 0,
        resource_manager: 'Heap2',
        record_type: 'PRUNE_VACUUM_SCAN',
        record_length: 60,
        description: desc,
        block_ref: 'blkref #0: rel 1663/5/16384 fork main blk 0',
      });
    const m = new RecoveryModel(16384);
    m.replay(
      row(
        'snapshotConflictHorizon: 740, isCatalogRel: F, nplans: 0, nredirected: 0, ndead: 0, nunused: 226',
      ),
    );
    m.replay(row('isCatalogRel: F, nplans: 1, nredirected: 0, ndead: 0, nunused: 0, plans: [...]'));
    expect(m.result().counts.fsmUpdates).toBe(1);
  });
});
