/**
 * The three strategies beyond PostgreSQL's two (storage/README.md "Drop strategies") find their
 * buffers the way their designs say and cost what they should: rel-list walks only the relation's
 * list, recovery-hash scans NBuffers once at its first drop in recovery and walks afterwards, and
 * cache-at-create turns a never-written fork's full scan into an empty lookup.
 * Method: a 1024-buffer pool with a few relations read through, checking path and counters.
 */
import { describe, expect, it } from 'vitest';
import { BufferPool } from '../../storage/buffer-pool.ts';
import {
  DEFAULT_DROP_SETTINGS,
  countDrop,
  emptyDropCounters,
  endOfRecovery,
  poolOptionsFor,
  type DropSettings,
} from '../../storage/drop.ts';
import { smgrcreate, smgrdounlinkall, smgrtruncate } from '../../storage/smgr.ts';
import { recoveryHashOf } from '../../storage/drop-rel-list.ts';
import { RelBufferLists, relBufferListsBytes } from '../../storage/rel-buffer-lists.ts';
import { StorageManager } from '../../storage/smgr.ts';
import { fmix32 } from '../../common/hash.ts';
import { FSM_FORKNUM, MAIN_FORKNUM } from '../../wal/records.ts';

const N = 1024;
const REL = 16384;
const settings = (strategy: DropSettings['strategy']): DropSettings => ({
  ...DEFAULT_DROP_SETTINGS,
  strategy,
});

function node(strategy: DropSettings['strategy'], recovery = true) {
  const s = settings(strategy);
  const smgr = new StorageManager();
  smgr.inRecovery = recovery;
  return { s, smgr, pool: new BufferPool(N, poolOptionsFor(s)) };
}

function fill(
  n: ReturnType<typeof node>,
  rel: number,
  blocks: number,
  fork: 0 | 1 = MAIN_FORKNUM,
): void {
  smgrcreate(n.smgr, rel, fork, n.s);
  n.smgr.nblocks(rel, fork);
  for (let b = 0; b < blocks; b++) {
    n.smgr.extend(rel, fork, b);
    n.pool.accessBlock(rel, fork, b);
  }
}

describe('rel-list', () => {
  it("walks only the relation's own buffers, every fork, and scans nothing", () => {
    const n = node('rel-list');
    fill(n, REL, 40);
    fill(n, REL, 5, FSM_FORKNUM);
    fill(n, REL + 1, 300);
    const r = smgrtruncate(n.pool, n.smgr, REL, [MAIN_FORKNUM], [30], n.s);
    expect(r).toMatchObject({
      path: 'rel-list',
      scanned: 0,
      probes: 0,
      listSteps: 45,
      headerLocks: 45,
      invalidated: 10,
    });
    const d = smgrdounlinkall(n.pool, n.smgr, [REL, REL + 1], n.s);
    expect(d).toMatchObject({ path: 'rel-list', scanned: 0, listSteps: 335, invalidated: 335 });
    expect(n.pool.relationLists!.count).toBe(0);
    n.pool.checkConsistency();
  });

  it('keeps the lists through evictions: a pool smaller than the data', () => {
    const n = node('rel-list');
    fill(n, REL, 900);
    fill(n, REL + 1, 900); // evicts most of REL's buffers
    n.pool.checkConsistency();
    expect(n.pool.relationLists!.relations()).toEqual([REL, REL + 1]);
    const r = smgrdounlinkall(n.pool, n.smgr, [REL], n.s);
    expect(r.listSteps).toBe(r.invalidated);
    expect(r.invalidated).toBe(N - 900);
    expect(n.pool.bufferedBlocks(REL)).toEqual([]);
  });

  it('refuses a pool built without relation lists', () => {
    const n = node('rel-list');
    const bare = new BufferPool(N);
    expect(() => smgrdounlinkall(bare, n.smgr, [REL], n.s)).toThrow(/INV-DROP-3/);
  });
});

describe('recovery-hash', () => {
  it('builds the hash with one full scan at the first drop in recovery, then walks it', () => {
    const n = node('recovery-hash');
    expect(n.pool.tagObserver).toBeNull(); // the ordinary path pays nothing until a drop in recovery
    for (let k = 0; k < 4; k++) fill(n, REL + k, 10);
    const stats = emptyDropCounters();
    countDrop(stats, smgrdounlinkall(n.pool, n.smgr, [REL], n.s));
    expect(recoveryHashOf(n.pool)).not.toBeNull();
    countDrop(stats, smgrdounlinkall(n.pool, n.smgr, [REL + 1], n.s));
    fill(n, REL + 9, 7); // replay's own reads keep the hash current
    countDrop(stats, smgrdounlinkall(n.pool, n.smgr, [REL + 9], n.s));
    expect(stats).toMatchObject({
      hashBuilds: 1,
      hashInserts: 40,
      scanned: N,
      listSteps: 27,
      invalidated: 27,
    });
    expect(stats.drops['recovery-hash']).toBe(3);
    n.pool.checkConsistency();
  });

  it('is released at the end of recovery; outside recovery drops full-scan', () => {
    const n = node('recovery-hash');
    fill(n, REL, 10);
    fill(n, REL + 1, 10);
    smgrtruncate(n.pool, n.smgr, REL, [MAIN_FORKNUM], [5], n.s);
    endOfRecovery(n.pool, n.s);
    n.smgr.inRecovery = false;
    expect(n.pool.tagObserver).toBeNull();
    expect(smgrdounlinkall(n.pool, n.smgr, [REL + 1], n.s)).toMatchObject({
      path: 'full-scan',
      scanned: N,
      invalidated: 10,
    });
  });

  it('a drop outside recovery releases a hash that was not released', () => {
    const n = node('recovery-hash');
    fill(n, REL, 10);
    smgrtruncate(n.pool, n.smgr, REL, [MAIN_FORKNUM], [5], n.s);
    n.smgr.inRecovery = false;
    expect(smgrtruncate(n.pool, n.smgr, REL, [MAIN_FORKNUM], [2], n.s).path).toBe('full-scan');
    expect(n.pool.tagObserver).toBeNull();
  });
});

describe('cache-at-create', () => {
  /** A TOAST-able table's TRUNCATE on a standby: heap written by replay, TOAST heap only created. */
  function toastLike(strategy: DropSettings['strategy']) {
    const n = node(strategy);
    fill(n, REL, 1);
    smgrcreate(n.smgr, REL + 1, MAIN_FORKNUM, n.s); // TOAST heap: created, never written
    fill(n, REL + 2, 1); // TOAST index: its metapage is written at creation
    return { n, r: smgrdounlinkall(n.pool, n.smgr, [REL, REL + 1, REL + 2], n.s) };
  }

  it('cached-lookup full-scans for a created but never written fork; cache-at-create probes', () => {
    expect(toastLike('cached-lookup').r).toMatchObject({
      path: 'full-scan',
      scanned: N,
      nBlocksToInvalidate: null,
      invalidated: 2,
    });
    expect(toastLike('cache-at-create').r).toMatchObject({
      path: 'cached-lookup',
      scanned: 0,
      probes: 2,
      nBlocksToInvalidate: 2,
      invalidated: 2,
    });
  });

  it('caches size 0 only for a fork created in recovery', () => {
    const n = node('cache-at-create', false);
    smgrcreate(n.smgr, REL, MAIN_FORKNUM, n.s);
    n.smgr.inRecovery = true;
    expect(n.smgr.nblocksCached(REL, MAIN_FORKNUM)).toBe(0xffffffff);
    smgrcreate(n.smgr, REL + 1, MAIN_FORKNUM, n.s);
    expect(n.smgr.nblocksCached(REL + 1, MAIN_FORKNUM)).toBe(0);
    // Created again by redo (the file exists): nothing new is known, nothing is cached.
    n.smgr.close(REL + 1);
    smgrcreate(n.smgr, REL + 1, MAIN_FORKNUM, n.s);
    expect(n.smgr.nblocksCached(REL + 1, MAIN_FORKNUM)).toBe(0xffffffff);
  });
});

describe('RelBufferLists', () => {
  it('survives colliding relations being unlinked in every order (backward-shift deletion)', () => {
    const lists = new RelBufferLists(8);
    const tagRel = new Uint32Array(8);
    const tagged = new Uint8Array(8);
    // 8 relations whose home slots in the 16-slot table are 14, 15 or 0: one cluster wrapping
    // around the end of the table, so every deletion has to shift later members back.
    expect(lists.capacity).toBe(16);
    const rels: number[] = [];
    for (let r = 1; rels.length < 8; r++) if ([14, 15, 0].includes(fmix32(r) & 15)) rels.push(r);
    rels.forEach((r, id) => {
      tagRel[id] = r;
      tagged[id] = 1;
      lists.tagged(id, r);
    });
    const check = () => lists.checkIntegrity(tagRel, (id) => tagged[id] === 1);
    check();
    for (const id of [3, 0, 7, 5, 1, 6, 2, 4]) {
      lists.untagged(id, tagRel[id]!);
      tagged[id] = 0;
      tagRel[id] = 0;
      check();
      for (let k = 0; k < 8; k++) if (tagged[k]) expect(lists.head(rels[k]!)).toBe(k);
    }
    expect(lists.count).toBe(0);
  });

  it('costs two Int32 links per buffer plus 8 bytes per relation-table slot', () => {
    expect(new RelBufferLists(16384).byteLength).toBe(relBufferListsBytes(16384));
    expect(relBufferListsBytes(13_107_200)).toBe(8 * 13_107_200 + 8 * 2 ** 25);
  });
});
