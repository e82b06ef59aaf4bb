/**
 * One node's storage: buffer pool, storage manager (sizes + size cache), heap contents, CLOG and
 * catalog, with the drop settings and cumulative drop counters. Also the data-file image written
 * at checkpoints/restartpoints and loaded at start: a restart is "last checkpoint + WAL replay".
 *
 * Data files live in `<datadir>/base/`; a new image is written to `base.new/` and swapped in with
 * renames, and it records its own REDO LSN, so the image and the LSN replay must start from can
 * never disagree (INV-NODE-1).
 */
import * as path from 'node:path';
import { assert } from '../common/assert.ts';
import { systemClock } from '../common/clock.ts';
import { nodeDisk, readTextFile, type Disk } from '../common/disk.ts';
import { fsyncDir, makeDir, writeFileSynced } from '../common/durable-file.ts';
import { BufferPool } from './buffer-pool.ts';
import { Catalog, type CatalogSnapshot } from './catalog.ts';
import { Clog } from './clog.ts';
import {
  DropStats, endOfRecovery, poolOptionsFor, smgrdounlinkallSteps, smgrtruncateSteps, type DropResult, type DropSettings,
} from './drop.ts';
import { HeapStore } from './heap-store.ts';
import { StorageManager } from './smgr.ts';
import { ReplayCounters } from './cost-model/counts.ts';
import type { ForkNumber, RelFileNumber } from '../wal/records.ts';
import type { Lsn, TimeLineId } from '../wal/lsn.ts';

export interface DataImageHeader {
  /** Replay must start at this LSN to reach the state after the image. */
  redoLsn: Lsn;
  /** prev-link of the record at redoLsn. */
  redoPrevLsn: Lsn;
  timeline: TimeLineId;
  catalog: CatalogSnapshot;
  relations: RelFileNumber[];
  writtenAt: string;
}

export class NodeStorage {
  readonly dropStats = new DropStats();
  /** Records replayed and the control-file updates replay forced (the cost model's counters). */
  readonly replayCounters = new ReplayCounters();
  /** Called for every drop, e.g. to attribute counters to a failover. */
  onDrop: ((r: DropResult) => void) | null = null;

  constructor(
    readonly pool: BufferPool,
    readonly smgr: StorageManager,
    readonly heap: HeapStore,
    readonly clog: Clog,
    readonly catalog: Catalog,
    public dropSettings: DropSettings,
  ) {}

  static create(nBuffers: number, dropSettings: DropSettings): NodeStorage {
    return new NodeStorage(new BufferPool(nBuffers, poolOptionsFor(dropSettings)), new StorageManager(), new HeapStore(), new Clog(), new Catalog(), dropSettings);
  }

  /** smgrtruncate in steps (yields inside long scans; see storage/drop-full-scan.ts). */
  smgrtruncateSteps(rel: RelFileNumber, forks: ForkNumber[], nblocks: number[]): Generator<void, DropResult, void> {
    return smgrtruncateSteps(this.pool, this.smgr, rel, forks, nblocks, this.dropSettings);
  }

  smgrdounlinkallSteps(rels: RelFileNumber[]): Generator<void, DropResult, void> {
    return smgrdounlinkallSteps(this.pool, this.smgr, rels, this.dropSettings);
  }

  /** Recovery ended (promotion): not in recovery any more, and the strategy drops recovery-only state. */
  endRecovery(): void {
    this.smgr.inRecovery = false;
    endOfRecovery(this.pool, this.dropSettings);
  }

  recordDrop(r: DropResult, elapsedMs = 0): void {
    this.dropStats.add(r, elapsedMs);
    this.onDrop?.(r);
  }

  /**
   * Write a new data image for `redoLsn` (checkpoint or restartpoint). Buffers are flushed first.
   * The image's files and directory are synced before it is renamed into place, and the data
   * directory after, so a crash leaves either the old image or the new one, whole (INV-NODE-1).
   */
  writeImage(dataDir: string, header: Omit<DataImageHeader, 'catalog' | 'relations' | 'writtenAt'>, disk: Disk = nodeDisk, nowMs = systemClock.now()): number {
    const written = this.pool.flushAll();
    const base = path.join(dataDir, 'base');
    const next = path.join(dataDir, 'base.new');
    disk.rmrf(next);
    makeDir(next, disk);
    const relations = this.heap.relations();
    for (const rel of relations) writeFileSynced(path.join(next, String(rel)), this.heap.serializeRelation(rel), undefined, disk);
    writeFileSynced(path.join(next, 'smgr'), this.smgr.serialize(), undefined, disk);
    writeFileSynced(path.join(next, 'pg_xact'), this.clog.serialize(), undefined, disk);
    const full: DataImageHeader = { ...header, catalog: this.catalog.snapshot(), relations, writtenAt: new Date(nowMs).toISOString() };
    writeFileSynced(path.join(next, 'image.json'), JSON.stringify(full), undefined, disk);
    fsyncDir(next, disk); // the entries of base.new, before it becomes base
    const old = path.join(dataDir, 'base.old');
    disk.rmrf(old);
    if (disk.exists(base)) disk.rename(base, old);
    disk.rename(next, base);
    fsyncDir(dataDir, disk);
    disk.rmrf(old);
    return written;
  }

  /** Load the data image of `dataDir` (a restart: empty buffer pool, no cached sizes). */
  static loadImage(dataDir: string, nBuffers: number, dropSettings: DropSettings, disk: Disk = nodeDisk): { storage: NodeStorage; header: DataImageHeader } {
    let base = path.join(dataDir, 'base');
    // A crash between the two renames of writeImage leaves only base.old (the previous image).
    if (!disk.exists(path.join(base, 'image.json'))) base = path.join(dataDir, 'base.old');
    const headerPath = path.join(base, 'image.json');
    assert(disk.exists(headerPath), `INV-NODE-1: no data image in ${dataDir} (base/image.json missing)`);
    const header = JSON.parse(readTextFile(disk, headerPath)) as DataImageHeader;
    const heap = new HeapStore();
    for (const rel of header.relations) heap.deserializeRelation(rel, disk.readFile(path.join(base, String(rel))));
    const smgr = StorageManager.deserialize(disk.readFile(path.join(base, 'smgr')));
    const clog = Clog.deserialize(disk.readFile(path.join(base, 'pg_xact')));
    const storage = new NodeStorage(new BufferPool(nBuffers, poolOptionsFor(dropSettings)), smgr, heap, clog, Catalog.fromSnapshot(header.catalog), dropSettings);
    return { storage, header };
  }
}
