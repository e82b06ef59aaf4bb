/**
 * Seed 001's largest relation fits: 1,638,400 pages (NBuffers/8 at shared_buffers=100GB, ~370M
 * rows) of generate_series, then DELETE FROM t, VACUUM (prune every page) and truncation to 0.
 * Method: drive HeapStore the way the executor does (one multi-insert per page, plan-and-apply
 * per page for delete and prune), assert counts and the store's typed-array memory, and print
 * elapsed times and process memory (reported, not asserted).
 */
import { describe, expect, it } from 'vitest';
import { Clog } from '../../storage/clog.ts';
import { HeapStore } from '../../storage/heap-store.ts';
import { shouldAttemptTruncation } from '../../storage/vacuum-truncation.ts';
import { TUPLES_PER_PAGE } from '../../wal/records.ts';

const PAGES = 1_638_400;
const REL = 16384;
const MB = 1024 * 1024;

function mem(): string {
  const m = process.memoryUsage();
  return (
    `rss ${(m.rss / MB).toFixed(0)} MB, heapUsed ${(m.heapUsed / MB).toFixed(0)} MB, ` +
    `arrayBuffers ${(m.arrayBuffers / MB).toFixed(0)} MB`
  );
}

describe('heap store at seed-001 scale', () => {
  it('inserts, deletes, prunes and truncates 1,638,400 one-run pages', () => {
    const store = new HeapStore();
    const clog = new Clog();
    store.createRelation(REL);
    const timings: string[] = [];
    let t0 = performance.now();
    const lap = (what: string): void => {
      const t1 = performance.now();
      timings.push(`${what} ${(t1 - t0).toFixed(0)} ms`);
      t0 = t1;
    };

    // INSERT INTO t SELECT generate_series(1, N): one HEAP2_MULTI_INSERT per page, one run each.
    const insertXid = 3;
    const runs = [0, TUPLES_PER_PAGE];
    for (let block = 0; block < PAGES; block++) {
      runs[0] = 1 + block * TUPLES_PER_PAGE;
      store.applyMultiInsert(REL, block, 1, runs, insertXid, true);
    }
    clog.setCommitted(insertXid);
    lap('insert');
    const storeBytes = store.memoryBytes(REL);
    const afterInsert = mem();
    expect(store.nblocks(REL)).toBe(PAGES);
    expect(store.countVisible(REL, clog)).toBe(PAGES * TUPLES_PER_PAGE);
    lap('count');
    const digest = store.contentDigest(REL, clog);
    lap('digest');
    expect(store.checkInvariants(REL)).toBe(PAGES); // one run per page
    lap('check');

    // The standby's copy comes from the same bytes a checkpoint would write.
    const bytes = store.serializeRelation(REL);
    const standby = new HeapStore();
    standby.deserializeRelation(REL, bytes);
    expect(standby.contentDigest(REL, clog)).toBe(digest);
    lap('serialize+deserialize');

    // DELETE FROM t: plan and apply one HEAP_DELETE per page.
    const deleteXid = 4;
    let deletedPages = 0;
    store.forEachPageToDelete(REL, { op: 'all' }, clog, (block, offsets) => {
      store.applyDelete(REL, block, offsets, deleteXid);
      deletedPages++;
    });
    clog.setCommitted(deleteXid);
    lap('delete');
    expect(deletedPages).toBe(PAGES);
    expect(store.countVisible(REL, clog)).toBe(0);
    expect(store.checkInvariants(REL)).toBe(PAGES); // a fully deleted page is still one run

    // VACUUM: prune every page (HEAP2_PRUNE), then truncate to nonEmptyPages.
    let prunedPages = 0;
    store.forEachPageToPrune(REL, clog, new Set(), (block, offsets) => {
      store.applyPrune(REL, block, offsets);
      prunedPages++;
    });
    lap('prune');
    expect(prunedPages).toBe(PAGES);
    const nonEmpty = store.nonEmptyPages(REL);
    expect(nonEmpty).toBe(0);
    expect(shouldAttemptTruncation(PAGES, nonEmpty)).toBe(true);
    store.truncate(REL, nonEmpty);
    lap('truncate');
    expect(store.nblocks(REL)).toBe(0);
    expect(store.countVisible(REL, clog)).toBe(0);

    // Typed arrays only: ~15 bytes per run + 6 per page, with growth headroom.
    expect(storeBytes).toBeLessThan(100 * MB);
    expect(bytes.length).toBe(16 + 15 * PAGES + 2 * PAGES);
    console.log(
      `heap-scale: ${PAGES} pages; ${timings.join(', ')}; store ${(storeBytes / MB).toFixed(1)} MB, ` +
        `file ${(bytes.length / MB).toFixed(1)} MB; after insert: ${afterInsert}; at end: ${mem()}`,
    );
  }, 120_000);
});
