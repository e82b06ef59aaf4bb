/**
 * The storage manager keeps sizes and the size cache by PostgreSQL's smgr rules (INV-STORAGE-1..7).
 * Method: drive one relation through create/nblocks/extend/truncate/close/unlink/restart with the
 * recovery flag on and off and check nblocksCached after each step.
 */
import { describe, expect, it } from 'vitest';
import { WalsimError } from '../../common/errors.ts';
import { pgDropRules } from '../../storage/pg-drop-rules.ts';
import { StorageManager } from '../../storage/smgr.ts';
import {
  FSM_FORKNUM,
  INIT_FORKNUM,
  InvalidBlockNumber,
  MAIN_FORKNUM,
  VISIBILITYMAP_FORKNUM,
} from '../../wal/records.ts';

const REL = 16384;

function relWithBlocks(n: number, recovery = true): StorageManager {
  const smgr = new StorageManager();
  smgr.inRecovery = recovery;
  smgr.create(REL, MAIN_FORKNUM);
  for (let b = 0; b < n; b++) smgr.extend(REL, MAIN_FORKNUM, b);
  return smgr;
}

describe('StorageManager', () => {
  it('creates forks empty and reports existence per fork', () => {
    const smgr = new StorageManager();
    expect(smgr.create(REL, MAIN_FORKNUM)).toBe(true);
    expect(smgr.create(REL, MAIN_FORKNUM)).toBe(false);
    expect(smgr.exists(REL, MAIN_FORKNUM)).toBe(true);
    expect(smgr.exists(REL, FSM_FORKNUM)).toBe(false);
    expect(smgr.nblocks(REL, MAIN_FORKNUM)).toBe(0);
  });

  it('trusts the cached size only in recovery (INV-STORAGE-1)', () => {
    const smgr = relWithBlocks(3, false);
    smgr.nblocks(REL, MAIN_FORKNUM);
    expect(smgr.peekCachedNblocks(REL, MAIN_FORKNUM)).toBe(3);
    expect(smgr.nblocksCached(REL, MAIN_FORKNUM)).toBe(InvalidBlockNumber);
    smgr.inRecovery = true;
    expect(smgr.nblocksCached(REL, MAIN_FORKNUM)).toBe(3);
  });

  it('caches nothing until a fork is sized, and nblocks fills the cache in any process (INV-STORAGE-3)', () => {
    const smgr = new StorageManager();
    smgr.create(REL, MAIN_FORKNUM);
    smgr.extend(REL, MAIN_FORKNUM, 0); // cache was invalid, stays invalid
    smgr.inRecovery = true;
    expect(smgr.nblocksCached(REL, MAIN_FORKNUM)).toBe(InvalidBlockNumber);
    expect(smgr.nblocks(REL, MAIN_FORKNUM)).toBe(1);
    expect(smgr.nblocksCached(REL, MAIN_FORKNUM)).toBe(1);
  });

  it('extend bumps a cache that equals blocknum and invalidates it otherwise (INV-STORAGE-4)', () => {
    const smgr = relWithBlocks(0);
    smgr.nblocks(REL, MAIN_FORKNUM);
    smgr.extend(REL, MAIN_FORKNUM, 0);
    smgr.extend(REL, MAIN_FORKNUM, 1);
    expect(smgr.nblocksCached(REL, MAIN_FORKNUM)).toBe(2);
    smgr.extend(REL, MAIN_FORKNUM, 5); // a hole: cache no longer known
    expect(smgr.nblocksCached(REL, MAIN_FORKNUM)).toBe(InvalidBlockNumber);
    expect(smgr.nblocks(REL, MAIN_FORKNUM)).toBe(6);
    expect(() => smgr.extend(REL, MAIN_FORKNUM, 2)).toThrow(/INV-STORAGE-4/);
  });

  it('truncateForks stores the new size in the cache (INV-STORAGE-5)', () => {
    const smgr = relWithBlocks(10);
    smgr.create(REL, FSM_FORKNUM);
    smgr.extend(REL, FSM_FORKNUM, 0);
    smgr.truncateForks(REL, [MAIN_FORKNUM, FSM_FORKNUM], [4, 0]);
    expect(smgr.nblocksCached(REL, MAIN_FORKNUM)).toBe(4);
    expect(smgr.nblocksCached(REL, FSM_FORKNUM)).toBe(0);
    expect(smgr.diskNblocks(REL, MAIN_FORKNUM)).toBe(4);
  });

  it('truncating beyond the end fails on a primary and leaves the file alone in recovery', () => {
    const primary = relWithBlocks(3, false);
    expect(() => primary.truncateForks(REL, [MAIN_FORKNUM], [5])).toThrow(WalsimError);
    const standby = relWithBlocks(3, true);
    standby.truncateForks(REL, [MAIN_FORKNUM], [5]);
    expect(standby.diskNblocks(REL, MAIN_FORKNUM)).toBe(3);
    expect(standby.nblocksCached(REL, MAIN_FORKNUM)).toBe(5); // PostgreSQL caches the requested size
    standby.checkStorage();
  });

  it('resetCachedSizes, close and unlink forget cached sizes (INV-STORAGE-2, -6)', () => {
    const smgr = relWithBlocks(2);
    smgr.nblocks(REL, MAIN_FORKNUM);
    smgr.resetCachedSizes(REL);
    expect(smgr.nblocksCached(REL, MAIN_FORKNUM)).toBe(InvalidBlockNumber);
    smgr.nblocks(REL, MAIN_FORKNUM);
    smgr.close(REL);
    expect(smgr.isOpen(REL)).toBe(false);
    expect(smgr.nblocksCached(REL, MAIN_FORKNUM)).toBe(InvalidBlockNumber);
    smgr.nblocks(REL, MAIN_FORKNUM);
    smgr.unlink(REL);
    expect(smgr.exists(REL, MAIN_FORKNUM)).toBe(false);
    expect(smgr.nblocksCached(REL, MAIN_FORKNUM)).toBe(InvalidBlockNumber);
    expect(() => smgr.nblocks(REL, MAIN_FORKNUM)).toThrow(/could not open file "base\/5\/16384"/);
  });

  it('a restart keeps sizes and existence but caches nothing', () => {
    const smgr = relWithBlocks(7);
    smgr.create(REL, VISIBILITYMAP_FORKNUM);
    smgr.create(REL + 1, INIT_FORKNUM);
    smgr.nblocks(REL, MAIN_FORKNUM);
    const restarted = StorageManager.deserialize(smgr.serialize());
    restarted.inRecovery = true;
    expect(restarted.relations()).toEqual([REL, REL + 1]);
    expect(restarted.nblocksCached(REL, MAIN_FORKNUM)).toBe(InvalidBlockNumber);
    expect(restarted.diskNblocks(REL, MAIN_FORKNUM)).toBe(7);
    expect(restarted.exists(REL, VISIBILITYMAP_FORKNUM)).toBe(true);
    expect(restarted.exists(REL, FSM_FORKNUM)).toBe(false);
    expect(restarted.exists(REL + 1, INIT_FORKNUM)).toBe(true);
    expect(restarted.exists(REL + 1, MAIN_FORKNUM)).toBe(false);
  });

  it('nblocksRepeated counts and caches as that many nblocks calls', () => {
    const rulesOf = [
      undefined,
      pgDropRules({ major: 13, minor: 0 }),
      pgDropRules({ major: 17, minor: 0 }),
    ];
    for (const recovery of [false, true])
      for (const rules of rulesOf)
        for (const blocks of [0, 3, 131072])
          for (const times of [1, 2, 500]) {
            // 131072 blocks: a whole segment, where each call also fails to open the next one.
            const [a, b] = [relWithBlocks(blocks, recovery), relWithBlocks(blocks, recovery)];
            let size = -1;
            for (let i = 0; i < times; i++) size = a.nblocks(REL, MAIN_FORKNUM, rules);
            expect(b.nblocksRepeated(REL, MAIN_FORKNUM, rules, times)).toBe(size);
            expect(b.fileOps).toEqual(a.fileOps);
            expect(b.failedSegmentOpens).toBe(a.failedSegmentOpens);
            expect(b.peekCachedNblocks(REL, MAIN_FORKNUM)).toBe(
              a.peekCachedNblocks(REL, MAIN_FORKNUM),
            );
          }
  });

  it('refuses a corrupt state file', () => {
    const bytes = relWithBlocks(1).serialize();
    expect(() => StorageManager.deserialize(bytes.slice(0, 5))).toThrow(/too short/);
    const bad = bytes.slice();
    bad[0]! ^= 0xff;
    expect(() => StorageManager.deserialize(bad)).toThrow(/magic/);
    expect(() => StorageManager.deserialize(bytes.slice(0, bytes.length - 1))).toThrow(/length/);
  });
});
