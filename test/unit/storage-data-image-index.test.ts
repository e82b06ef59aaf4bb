/**
 * The image state is the index itself: one Float64Array of [rel, pack, offset, length] ascending
 * by relfilenumber (INV-IMAGE-3), merged with each new pack's relations. Checks: the state after
 * a write equals the index file and what a load reads back; relations added (below, between and
 * above the existing numbers), dropped and resized between images keep it ascending and exact;
 * an index written unsorted (older writer) is sorted at load and a duplicate fails INV-IMAGE-1;
 * a power loss at any turn of an image leaves the previous image or the new one, never a mix.
 * Method: in-memory storage on the simulator's strict disk (MemDisk) and on node's disk.
 */
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { nodeDisk } from '../../common/node-disk.ts';
import type { Disk } from '../../common/disk.ts';
import { SeededRandom } from '../../common/random.ts';
import { systemClock } from '../../common/system-clock.ts';
import { readDataImage } from '../../storage/data-image-read.ts';
import { ascendingIndex, INDEX_STRIDE } from '../../storage/data-image-state.ts';
import type { DropSettings } from '../../storage/drop.ts';
import { NodeStorage } from '../../storage/node-storage.ts';
import { MemDisk } from '../../sim/mem-disk.ts';
import { heapContentOf } from '../helpers/storage.ts';

const SETTINGS = {
  strategy: 'cached-lookup',
  thresholdDivisor: 32,
  forceOptimized: false,
} as DropSettings;
const noPause = async () => {};
const header = (n: number) => ({ redoLsn: n << 20, redoPrevLsn: 0, timeline: 1 });
let dir = '';
afterEach(() => {
  if (dir !== '') fs.rmSync(dir, { recursive: true, force: true });
  dir = '';
});

function addRel(st: NodeStorage, rel: number, blocks = 1): void {
  st.heap.createRelation(rel);
  st.smgr.create(rel, 0);
  st.heap.extendTo(rel, blocks);
  st.catalog.set(`t${rel}`, rel);
}

function dropRel(st: NodeStorage, rel: number): void {
  st.heap.dropRelation(rel);
  st.catalog.set(`t${rel}`, 0);
}

/** The index on disk as [rel, pack, offset, length] rows, and the state a load builds from it. */
function indexRows(index: Float64Array): number[][] {
  const rows: number[][] = [];
  for (let i = 0; i < index.length; i += INDEX_STRIDE)
    rows.push([...index.subarray(i, i + INDEX_STRIDE)]);
  return rows;
}

function expectAscendingAndExact(dataDir: string, disk: Disk, st: NodeStorage): void {
  const image = readDataImage(dataDir, disk);
  const rels = indexRows(image.state.index).map((r) => r[0]!);
  expect(rels).toEqual([...rels].sort((a, b) => a - b)); // INV-IMAGE-3
  expect(new Set(rels).size).toBe(rels.length); // INV-IMAGE-1
  expect(rels).toEqual(
    st.heap
      .relations()
      .slice()
      .sort((a, b) => a - b),
  );
  expect(image.state.size).toBe(rels.length);
  for (const [i, rel] of rels.entries()) expect(image.state.find(rel)).toBe(i);
  expect(image.state.find(1)).toBe(-1);
  expect(heapContentOf(NodeStorage.loadImage(dataDir, 1024, SETTINGS, disk).storage)).toBe(
    heapContentOf(st),
  );
}

describe('data image index state', () => {
  it('round trip: the index file is ascending, equals the loaded state, and loads the same content', async () => {
    dir = fs.mkdtempSync(path.join(os.tmpdir(), 'walsim-image-index-'));
    const st = NodeStorage.create(1024, SETTINGS);
    // Created out of order: the index is ascending all the same.
    for (const rel of [30000, 20000, 25000, 20001, 40000]) addRel(st, rel);
    const stats = await st.writeImage(dir, header(1), noPause, {
      disk: nodeDisk,
      clock: systemClock,
    });
    expect(stats).toMatchObject({ relations: 5, relationsWritten: 5 });
    const onDisk = new Float64Array(nodeDisk.readFile(path.join(dir, 'base', 'index.1')).buffer);
    expect(indexRows(onDisk).map((r) => r[0])).toEqual([20000, 20001, 25000, 30000, 40000]);
    expect(indexRows(onDisk).every((r) => r[1] === 1)).toBe(true);
    // Offsets are the pack's layout: back to back in relfilenumber order.
    const rows = indexRows(onDisk);
    for (let i = 1; i < rows.length; i++)
      expect(rows[i]![2]).toBe(rows[i - 1]![2]! + rows[i - 1]![3]!);
    expect(rows.at(-1)![2]! + rows.at(-1)![3]!).toBe(
      fs.statSync(path.join(dir, 'base', 'rels.1')).size,
    );
    expectAscendingAndExact(dir, nodeDisk, st);
  });

  it('relations added below, between and above, dropped and resized between images', async () => {
    dir = fs.mkdtempSync(path.join(os.tmpdir(), 'walsim-image-index-'));
    const io = { disk: nodeDisk, clock: systemClock };
    const st = NodeStorage.create(1024, SETTINGS);
    for (let i = 0; i < 50; i++) addRel(st, 20000 + 2 * i);
    await st.writeImage(dir, header(1), noPause, io);
    addRel(st, 19000); // below every existing number
    addRel(st, 20003); // between two
    addRel(st, 90000); // above
    dropRel(st, 20000); // the first
    dropRel(st, 20098); // the last
    st.heap.extendTo(20050, 3); // resized: its entry moves to the new pack
    const b = await st.writeImage(dir, header(2), noPause, io);
    expect(b).toMatchObject({ relationsChanged: 4, relationsDropped: 2, relations: 51 });
    expectAscendingAndExact(dir, nodeDisk, st);
    const rows = indexRows(readDataImage(dir, nodeDisk).state.index);
    const packOf = new Map(rows.map((r) => [r[0]!, r[1]!]));
    expect([packOf.get(19000), packOf.get(20003), packOf.get(90000), packOf.get(20050)]).toEqual([
      2, 2, 2, 2,
    ]);
    expect(packOf.get(20002)).toBe(1); // carried over with its old place
    // A relation dropped and created again under the same number between images.
    dropRel(st, 20004);
    addRel(st, 20004, 2);
    st.heap.truncate(20006, 0);
    await st.writeImage(dir, header(3), noPause, io);
    expectAscendingAndExact(dir, nodeDisk, st);
    // Every relation dropped (found by the simulator: the merge's bound was checked before a
    // dropped entry was skipped), then one created again.
    for (const rel of st.heap.relations()) dropRel(st, rel);
    expect(await st.writeImage(dir, header(4), noPause, io)).toMatchObject({ relations: 0 });
    expectAscendingAndExact(dir, nodeDisk, st);
    addRel(st, 20000);
    expect(await st.writeImage(dir, header(5), noPause, io)).toMatchObject({ relations: 1 });
    expectAscendingAndExact(dir, nodeDisk, st);
  });

  it("the catalog's table list is the same JSON in UTF-8 at every step size, names beyond ASCII included", () => {
    const st = NodeStorage.create(16, SETTINGS);
    const names = ['t', 'tæble', 'таблица', '表', '\u{1F418}', 'q"uote', 'back\\slash'];
    const tables: Array<[string, number]> = [];
    for (let i = 0; i < 600; i++) tables.push([`${names[i % names.length]}${i}`, 20000 + i]);
    for (const [name, rel] of tables) st.catalog.set(name, rel);
    const want = JSON.stringify(tables); // insertion order, as the catalog's map keeps it
    for (const step of [1, 7, 256, 1000]) {
      const steps = st.catalog.tablesJsonSteps(step);
      let r = steps.next();
      let yields = 0;
      for (; !r.done; r = steps.next()) yields++;
      expect(Buffer.from(r.value).toString('utf8')).toBe(want);
      expect(yields).toBe(Math.floor(600 / step));
    }
    expect(
      Buffer.from(
        NodeStorage.create(16, SETTINGS).catalog.tablesJsonSteps().next().value as Uint8Array,
      ).toString(),
    ).toBe('[]');
  });

  it('random adds, drops and resizes over many images match a model (compaction included)', async () => {
    dir = fs.mkdtempSync(path.join(os.tmpdir(), 'walsim-image-index-'));
    const io = { disk: nodeDisk, clock: systemClock };
    const rng = new SeededRandom(2411);
    const st = NodeStorage.create(1024, SETTINGS);
    const live = new Set<number>();
    let compacted = 0;
    for (let gen = 1; gen <= 25; gen++) {
      for (let k = rng.int(0, 40); k > 0; k--) {
        const rel = 16384 + rng.int(0, 300);
        if (!live.has(rel)) {
          addRel(st, rel, rng.int(0, 3));
          live.add(rel);
        } else if (rng.chance(0.4)) {
          dropRel(st, rel);
          live.delete(rel);
        } else st.heap.extendTo(rel, st.heap.nblocks(rel) + 1);
      }
      const stats = await st.writeImage(dir, header(gen), noPause, io);
      compacted += stats.relationsCompacted;
      expect(stats.relations).toBe(live.size);
      expectAscendingAndExact(dir, nodeDisk, st);
    }
    expect(compacted).toBeGreaterThan(0); // the compaction path ran over the typed index
  });

  it('an index written unsorted is sorted at load; a relation listed twice fails INV-IMAGE-1', () => {
    const row = (rel: number, off: number) => [rel, 1, off, 10];
    const unsorted = new Float64Array([...row(30, 0), ...row(10, 10), ...row(20, 20)]);
    expect(indexRows(ascendingIndex(unsorted))).toEqual([row(10, 10), row(20, 20), row(30, 0)]);
    const sorted = new Float64Array([...row(10, 0), ...row(20, 10)]);
    expect(ascendingIndex(sorted)).toBe(sorted); // already ascending: no copy
    const twice = new Float64Array([...row(20, 0), ...row(10, 10), ...row(20, 20)]);
    expect(() => ascendingIndex(twice)).toThrow(/INV-IMAGE-1/);
  });

  it('a power loss at any turn of an image leaves the previous image or the new one', async () => {
    // Image 1 of 40 relations; then adds, drops and a resize; image 2 is cut by a power loss at
    // its k-th turn (the clock advances 1 ms per read, so every slice check gives a turn).
    const base = (disk: MemDisk, st: NodeStorage) =>
      st.writeImage('/data', header(1), noPause, { disk, clock: systemClock });
    const change = (st: NodeStorage) => {
      for (let i = 0; i < 10; i++) dropRel(st, 20000 + 4 * i);
      for (let i = 0; i < 10; i++) addRel(st, 15000 + i);
      st.heap.extendTo(20001, 5);
    };
    const build = () => {
      const st = NodeStorage.create(1024, SETTINGS);
      for (let i = 0; i < 40; i++) addRel(st, 20000 + i);
      return st;
    };
    const before = build();
    const after = build();
    change(after);
    const [wantBefore, wantAfter] = [heapContentOf(before), heapContentOf(after)];
    const seen = { before: 0, after: 0 };
    for (let k = 1; ; k++) {
      const disk = new MemDisk();
      const st = build();
      await base(disk, st);
      disk.syncAll();
      change(st);
      let turns = 0;
      let ms = 0;
      const pause = async () => {
        if (++turns === k) {
          disk.powerLoss(new SeededRandom(k));
          throw new Error('power loss');
        }
      };
      const clock = { now: () => 0, monoMs: () => ms++ };
      const done = await st.writeImage('/data', header(2), pause, { disk, clock }).then(
        () => true,
        () => false,
      );
      if (done) disk.powerLoss(new SeededRandom(k)); // the image finished: a power loss after it
      const loaded = NodeStorage.loadImage('/data', 1024, SETTINGS, disk);
      const got = heapContentOf(loaded.storage);
      if (loaded.header.redoLsn === 1 << 20) {
        expect(got).toBe(wantBefore);
        seen.before++;
      } else {
        expect(loaded.header.redoLsn).toBe(2 << 20);
        expect(got).toBe(wantAfter);
        seen.after++;
      }
      expectAscendingAndExact('/data', disk, loaded.storage);
      if (done) break;
    }
    expect(seen.before).toBeGreaterThan(0);
    expect(seen.after).toBeGreaterThan(0);
  });
});
