/**
 * The data image writes what changed since the last one, not every relation:
 * one pack of changed relations plus a fixed set of small files, an atomic switch, compaction of
 * packs that are mostly dead, garbage of an interrupted image removed at load, and format-1
 * images (one file per relation) still read and replaced.
 * Method: in-memory storage in a temp data directory; counters of each write; load and compare.
 */
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { NodeStorage } from '../../storage/node-storage.ts';
import type { DropSettings } from '../../storage/drop.ts';
import { smgrdounlinkall } from '../../storage/smgr.ts';
import { nodeDisk } from '../../common/node-disk.ts';
import type { Disk } from '../../common/disk.ts';
import { systemClock } from '../../common/system-clock.ts';
import { STEP_ENTRIES, writeDataImage } from '../../storage/data-image.ts';
import { ImageState } from '../../storage/data-image-state.ts';
import { heapContentOf } from '../helpers/storage.ts';

const SETTINGS = {
  strategy: 'cached-lookup',
  thresholdDivisor: 32,
  forceOptimized: false,
} as DropSettings;
const noPause = async () => {};
const IO = { disk: nodeDisk, clock: systemClock };
let dir = '';
afterEach(() => fs.rmSync(dir, { recursive: true, force: true }));

function storageWith(rels: number): NodeStorage {
  const st = NodeStorage.create(1024, SETTINGS);
  for (let i = 0; i < rels; i++) {
    st.heap.createRelation(20000 + i);
    st.smgr.create(20000 + i, 0);
    st.catalog.set(`t${i}`, 20000 + i);
  }
  return st;
}

const header = (n: number) => ({ redoLsn: n << 20, redoPrevLsn: 0, timeline: 1 });

describe('data image', () => {
  it('writes only changed relations, in a fixed number of files, and loads back', async () => {
    dir = fs.mkdtempSync(path.join(os.tmpdir(), 'walsim-image-'));
    const st = storageWith(300);
    const a = await st.writeImage(dir, header(1), noPause, IO);
    expect(a).toMatchObject({
      relationsChanged: 300,
      relationsWritten: 300,
      relations: 300,
      filesWritten: 6,
      fsyncs: 7,
    });
    const b = await st.writeImage(dir, header(2), noPause, IO);
    expect(b).toMatchObject({
      relationsChanged: 0,
      relationsWritten: 0,
      relations: 300,
      filesWritten: 5,
    }); // no pack
    st.heap.extendTo(20007, 4);
    st.heap.dropRelation(20008);
    st.catalog.set('t8', 0);
    const c = await st.writeImage(dir, header(3), noPause, IO);
    expect(c).toMatchObject({
      relationsChanged: 1,
      relationsWritten: 1,
      relationsDropped: 1,
      relations: 299,
      filesWritten: 6,
    });
    const { storage, header: h } = NodeStorage.loadImage(dir, 1024, SETTINGS, nodeDisk);
    expect(h.redoLsn).toBe(3 << 20);
    expect(heapContentOf(storage)).toBe(heapContentOf(st));
    expect(storage.catalog.lookup('t8')).toBeUndefined();
    expect(storage.catalog.lookup('t7')).toBe(20007);
    // Files on disk: image.json, the first pack, the third pack, and generation 3's four files.
    expect(fs.readdirSync(path.join(dir, 'base')).sort()).toEqual(
      ['catalog.3', 'image.json', 'index.3', 'pg_xact.3', 'rels.1', 'rels.3', 'smgr.3'].sort(),
    );
    // After a load, nothing counts as changed.
    expect((await storage.writeImage(dir, header(4), noPause, IO)).relationsWritten).toBe(0);
  });

  it('compacts a pack once fewer than half of its relations live in it', async () => {
    dir = fs.mkdtempSync(path.join(os.tmpdir(), 'walsim-image-'));
    const st = storageWith(10);
    await st.writeImage(dir, header(1), noPause, IO); // rels.1 holds 10
    for (let i = 0; i < 5; i++) st.heap.extendTo(20000 + i, 1);
    expect((await st.writeImage(dir, header(2), noPause, IO)).relationsCompacted).toBe(0); // 5 of 10 live: kept
    st.heap.extendTo(20005, 1);
    const c = await st.writeImage(dir, header(3), noPause, IO); // 4 of 10 live in rels.1: moved
    expect(c).toMatchObject({ relationsChanged: 1, relationsCompacted: 4, relationsWritten: 5 });
    expect(
      fs
        .readdirSync(path.join(dir, 'base'))
        .filter((f) => f.startsWith('rels.'))
        .sort(),
    ).toEqual(['rels.2', 'rels.3']);
    expect(heapContentOf(NodeStorage.loadImage(dir, 1024, SETTINGS, nodeDisk).storage)).toBe(
      heapContentOf(st),
    );
  });

  it('a failed write keeps the previous image and writes the changes next time', async () => {
    dir = fs.mkdtempSync(path.join(os.tmpdir(), 'walsim-image-'));
    const st = storageWith(3);
    await st.writeImage(dir, header(1), noPause, IO);
    st.heap.extendTo(20001, 2);
    // A directory where the next pack goes makes its creation fail (EISDIR), like a full disk would.
    fs.mkdirSync(path.join(dir, 'base', 'rels.2'));
    await expect(st.writeImage(dir, header(2), noPause, IO)).rejects.toThrow(/EISDIR/);
    // The leftover is removed at load; the image on disk is still generation 1.
    expect(NodeStorage.loadImage(dir, 1024, SETTINGS, nodeDisk).header.redoLsn).toBe(1 << 20);
    expect(fs.existsSync(path.join(dir, 'base', 'rels.2'))).toBe(false);
    expect((await st.writeImage(dir, header(3), noPause, IO)).relationsChanged).toBe(1);
  });

  it('a failure after the switch (removing an old file) keeps the new image loadable', async () => {
    dir = fs.mkdtempSync(path.join(os.tmpdir(), 'walsim-image-'));
    const st = storageWith(3);
    await st.writeImage(dir, header(1), noPause, IO);
    st.heap.extendTo(20001, 2);
    // The old index cannot be removed (EIO on a real disk): image.json already names generation 2.
    const disk: Disk = Object.create(nodeDisk) as Disk;
    disk.rmrfAsync = async (p) => {
      if (p.endsWith('index.1')) throw new Error('EIO: i/o error, unlink index.1');
      return nodeDisk.rmrfAsync(p);
    };
    await expect(
      st.writeImage(dir, header(2), noPause, { disk, clock: systemClock }),
    ).rejects.toThrow(/EIO/);
    // Before the fix the failure removed generation 2's files: ENOENT base/index.2 at load.
    const loaded = NodeStorage.loadImage(dir, 1024, SETTINGS, nodeDisk);
    expect(loaded.header.redoLsn).toBe(2 << 20);
    expect(heapContentOf(loaded.storage)).toBe(heapContentOf(st));
    expect(fs.existsSync(path.join(dir, 'base', 'index.1'))).toBe(false); // a leftover, removed at load
  });

  it('a loaded image gets the buffer pool its drop strategy needs (rel-list keeps relation lists)', async () => {
    dir = fs.mkdtempSync(path.join(os.tmpdir(), 'walsim-image-'));
    const st = storageWith(2);
    await st.writeImage(dir, header(1), noPause, IO);
    const relList = { ...SETTINGS, strategy: 'rel-list' } as DropSettings;
    const { storage } = NodeStorage.loadImage(dir, 1024, relList, nodeDisk);
    expect(() => smgrdounlinkall(storage.pool, storage.smgr, [20000], relList)).not.toThrow();
  });

  it('reads a format-1 image (one file per relation) and replaces it', async () => {
    dir = fs.mkdtempSync(path.join(os.tmpdir(), 'walsim-image-'));
    const st = storageWith(4);
    st.heap.extendTo(20002, 3);
    const base = path.join(dir, 'base');
    fs.mkdirSync(base, { recursive: true });
    for (const rel of st.heap.relations())
      fs.writeFileSync(path.join(base, String(rel)), st.heap.serializeRelation(rel));
    fs.writeFileSync(path.join(base, 'smgr'), st.smgr.serialize());
    fs.writeFileSync(path.join(base, 'pg_xact'), st.clog.serialize());
    fs.writeFileSync(
      path.join(base, 'image.json'),
      JSON.stringify({
        ...header(5),
        catalog: st.catalog.snapshot(),
        relations: st.heap.relations(),
        writtenAt: '',
      }),
    );
    const loaded = NodeStorage.loadImage(dir, 1024, SETTINGS, nodeDisk).storage;
    expect(heapContentOf(loaded)).toBe(heapContentOf(st));
    const w = await loaded.writeImage(dir, header(6), noPause, IO);
    expect(w.relationsWritten).toBe(4);
    expect(fs.readdirSync(base).sort()).toEqual([
      'catalog.1',
      'image.json',
      'index.1',
      'pg_xact.1',
      'rels.1',
      'smgr.1',
    ]);
    expect(heapContentOf(NodeStorage.loadImage(dir, 1024, SETTINGS, nodeDisk).storage)).toBe(
      heapContentOf(st),
    );
  });

  it('works in bounded steps: no stretch between event-loop turns visits more than a few steps of relations', async () => {
    // A clock that advances 1 ms per read (every slice check "costs" 1 ms), so the writer's turns
    // depend on how often each loop checks, not on this machine's speed. The source counts the
    // per-relation calls (planning's hasRelation, the pack's serializeRelation) between turns.
    dir = fs.mkdtempSync(path.join(os.tmpdir(), 'walsim-image-'));
    const n = 20_000;
    const st = storageWith(n);
    let ms = 0;
    const clock = { now: () => 0, monoMs: () => ms++ };
    let calls = 0;
    let maxCalls = 0;
    const inner = st.imageSource();
    const src = {
      ...inner,
      hasRelation: (rel: number) => (calls++, inner.hasRelation(rel)),
      serializeRelation: (rel: number) => (calls++, inner.serializeRelation(rel)),
    };
    // Every await of the writer is a turn: its pause, and each asynchronous file operation.
    const turn = (): void => {
      maxCalls = Math.max(maxCalls, calls);
      calls = 0;
    };
    const pause = async () => turn();
    const disk: Disk = {
      ...nodeDisk,
      openAsync: async (p, flags, mode) => {
        turn();
        const fh = await nodeDisk.openAsync(p, flags, mode);
        return {
          writev: (chunks) => (turn(), fh.writev(chunks)),
          writeFile: (data) => (turn(), fh.writeFile(data)),
          sync: () => (turn(), fh.sync()),
          close: () => (turn(), fh.close()),
        };
      },
      renameAsync: (from, to) => (turn(), nodeDisk.renameAsync(from, to)),
      rmrfAsync: (p) => (turn(), nodeDisk.rmrfAsync(p)),
    };
    const stats = await writeDataImage(dir, header(1), src, ImageState.empty(), pause, {
      disk,
      clock,
    });
    maxCalls = Math.max(maxCalls, calls);
    expect(stats.relationsWritten).toBe(n);
    // Planning checks the clock every STEP_ENTRIES relations, the pack after every relation;
    // a turn comes within 5 checks (SLICE_MS at 1 ms per read).
    expect(maxCalls).toBeLessThanOrEqual(5 * STEP_ENTRIES);
    expect(stats.pauses).toBeGreaterThanOrEqual(n / 5);
  });
});
