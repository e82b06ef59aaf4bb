/**
 * One node's storage: buffer pool, storage manager (sizes + size cache), heap contents, CLOG and
 * catalog, with the drop settings and cumulative drop counters. Also the data-file image written
 * at checkpoints/restartpoints and loaded at start: a restart is "last checkpoint + WAL replay".
 *
 * Data files live in `<datadir>/base/` (format in data-image.ts); an image records its own REDO
 * LSN and switches atomically, so the image and the LSN replay must start from can never disagree
 * (INV-NODE-1). An image writes only the relations changed since the last one.
 */
import { injectedBugs } from '../common/injected-bugs.ts';
import type { BlockNumber, ForkNumber, RelFileNumber } from '../wal/records.ts';
import { BufferPool } from './buffer-pool.ts';
import { Catalog } from './catalog.ts';
import { Clog } from './clog.ts';
import {
  countDrop,
  emptyDropBusyMs,
  emptyDropCounters,
  endOfRecovery,
  poolOptionsFor,
  type DropResult,
  type DropSettings,
} from './drop.ts';
import { HeapStore } from './heap-store.ts';
import { StorageManager } from './smgr.ts';
import { ReplayCounters } from './replay-counts.ts';
import type { Disk } from '../common/disk.ts';
import { readDataImage } from './data-image-read.ts';
import { ImageState } from './data-image-state.ts';
import {
  writeDataImage,
  type DataImageHeader,
  type ImageIo,
  type ImageSource,
  type ImageWriteStats,
} from './data-image.ts';

export type { DataImageHeader, ImageWriteStats } from './data-image.ts';

/** What a drop is about to drop: smgrtruncate's forks and new sizes, or smgrdounlinkall's relations. */
export type DropRequest =
  | {
      op: 'truncate';
      rel: RelFileNumber;
      forks: readonly ForkNumber[];
      nblocks: readonly BlockNumber[];
    }
  | { op: 'unlink'; rels: readonly RelFileNumber[] };

export class NodeStorage {
  /** Cumulative drop counters (counts only: a span is diffCounters of two snapshots). */
  readonly dropCounters = emptyDropCounters();
  /** Busy time inside drops per path, ms (measured, so kept apart from the counts). */
  readonly dropBusyMs = emptyDropBusyMs();
  /** Records replayed and the control-file updates replay forced (the cost model's counters). */
  readonly replayCounters = new ReplayCounters();
  /** Called for every drop, e.g. to attribute counters to a failover. */
  onDrop: ((r: DropResult) => void) | null = null;
  /** Called before every drop with what it drops (the simulator's drop-path oracle). */
  beforeDrop: ((d: DropRequest) => void) | null = null;
  /**
   * Planted bug `truncateFailureLeavesStalePages` only: each relation as the last data image
   * written or loaded by this process holds it — the "file" a failed truncation leaves readable.
   */
  private readonly imagedCopies = new Map<RelFileNumber, Uint8Array>();

  constructor(
    readonly pool: BufferPool,
    readonly smgr: StorageManager,
    readonly heap: HeapStore,
    readonly clog: Clog,
    readonly catalog: Catalog,
    public dropSettings: DropSettings,
  ) {}

  static create(nBuffers: number, dropSettings: DropSettings): NodeStorage {
    return new NodeStorage(
      new BufferPool(nBuffers, poolOptionsFor(dropSettings)),
      new StorageManager(),
      new HeapStore(),
      new Clog(),
      new Catalog(),
      dropSettings,
    );
  }

  /**
   * Buffers holding a block that no longer exists (its relation fork is gone, or the block is past
   * the fork's size): "rel/fork/block" each. Empty unless a drop missed a buffer.
   */
  orphanBuffers(): string[] {
    // Sorted by rel, fork, block; only the orphans are collected (the simulator asks after every
    // step, and a list of every valid buffer, sorted, was a visible share of its run).
    const orphans: Array<[RelFileNumber, ForkNumber, BlockNumber]> = [];
    this.pool.forEachValidTag((rel, fork, block) => {
      if (!this.smgr.exists(rel, fork) || block >= this.smgr.diskNblocks(rel, fork))
        orphans.push([rel, fork, block]);
    });
    return orphans
      .sort((a, b) => a[0] - b[0] || a[1] - b[1] || a[2] - b[2])
      .map(([rel, fork, block]) => `${rel}/${fork}/${block}`);
  }

  /** Recovery ended (promotion): not in recovery any more, and the strategy drops recovery-only state. */
  endRecovery(): void {
    this.smgr.inRecovery = false;
    endOfRecovery(this.pool, this.dropSettings);
  }

  recordDrop(r: DropResult, elapsedMs = 0): void {
    countDrop(this.dropCounters, r);
    this.dropBusyMs[r.path] += elapsedMs;
    this.onDrop?.(r);
  }

  /** The image on disk (what the next one need not rewrite). */
  private imageState: ImageState = ImageState.empty();
  /** Image writes run one at a time (a checkpoint and a requested restartpoint may overlap). */
  private imageTail: Promise<unknown> = Promise.resolve();
  /** True while an image is being written; counters of the last one. */
  imageWriteInProgress = false;
  lastImageWrite: ImageWriteStats | null = null;
  imagesWritten = 0;

  /**
   * Write a new data image for `redoLsn` (checkpoint or restartpoint): buffers are flushed first,
   * then only the relations changed since the last image are written (storage/data-image.ts).
   * The caller keeps storage unchanged until it settles; `pause` gives the event loop a turn.
   */
  writeImage(
    dataDir: string,
    header: Pick<DataImageHeader, 'redoLsn' | 'redoPrevLsn' | 'timeline'>,
    pause: () => Promise<void>,
    io: ImageIo,
  ): Promise<ImageWriteStats> {
    const run = async (): Promise<ImageWriteStats> => {
      this.imageWriteInProgress = true;
      try {
        const stats = await writeDataImage(
          dataDir,
          header,
          this.imageSource(),
          this.imageState,
          pause,
          io,
        );
        this.lastImageWrite = stats;
        this.imagesWritten++;
        return stats;
      } finally {
        this.imageWriteInProgress = false;
      }
    };
    const result = this.imageTail.then(run, run);
    this.imageTail = result.catch(() => undefined);
    return result;
  }

  /** What the image writer reads of this storage (also for tests that count its calls). */
  imageSource(): ImageSource {
    return {
      nBuffers: this.pool.nBuffers,
      flushBuffers: (from, to) => this.pool.flushRange(from, to),
      takeChanged: () => this.heap.takeChanged(),
      markChanged: (rels) => this.heap.markChanged(rels),
      hasRelation: (rel) => this.heap.hasRelation(rel),
      serializeRelation: (rel) => {
        const bytes = this.heap.serializeRelation(rel);
        if (injectedBugs.truncateFailureLeavesStalePages) this.imagedCopies.set(rel, bytes.slice());
        return bytes;
      },
      smgrSteps: () => this.smgr.serializeSteps(),
      serializeClog: () => this.clog.serialize(),
      catalogTablesSteps: () => this.catalog.tablesJsonSteps(),
      catalogCounters: () => ({
        nextXid: this.catalog.nextXid,
        nextRelFileNumber: this.catalog.nextRelFileNumber,
      }),
    };
  }

  /**
   * Planted bug `truncateFailureLeavesStalePages`: a truncation to `blkno` failed after its
   * buffers were dropped; the pages from `blkno` on read back as the last image holds them.
   */
  readBackStaleTail(rel: RelFileNumber, blkno: number): void {
    if (!this.heap.hasRelation(rel)) return;
    this.heap.restorePagesFrom(rel, blkno, this.imagedCopies.get(rel) ?? null);
  }

  /**
   * Called with each storage loadImage builds, before the start-up replays WAL into it: the
   * simulator watches every drop of a process, crash recovery's included (set around one open).
   */
  static onLoad: ((storage: NodeStorage) => void) | null = null;

  /** Load the data image of `dataDir` (a restart: empty buffer pool, no cached sizes). */
  static loadImage(
    dataDir: string,
    nBuffers: number,
    dropSettings: DropSettings,
    disk: Disk,
  ): { storage: NodeStorage; header: DataImageHeader } {
    const image = readDataImage(dataDir, disk);
    const heap = new HeapStore();
    for (const [rel, bytes] of image.relations) heap.deserializeRelation(rel, bytes);
    // Loading is no change; but a format-1 image has no pack yet, so the next image writes all.
    heap.takeChanged();
    if (image.header.format !== 2) heap.markChanged(image.relations.map(([rel]) => rel));
    const smgr = StorageManager.deserialize(image.smgr);
    const clog = Clog.deserialize(image.clog);
    const storage = new NodeStorage(
      new BufferPool(nBuffers, poolOptionsFor(dropSettings)),
      smgr,
      heap,
      clog,
      Catalog.fromSnapshot(image.header.catalog),
      dropSettings,
    );
    storage.imageState = image.state;
    NodeStorage.onLoad?.(storage);
    if (injectedBugs.truncateFailureLeavesStalePages)
      for (const [rel, bytes] of image.relations) storage.imagedCopies.set(rel, bytes.slice());
    return { storage, header: image.header };
  }
}
