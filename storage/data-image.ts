/**
 * The data image: the on-disk state a checkpoint or restartpoint leaves in `<datadir>/base/` and a
 * start loads ("last checkpoint + WAL replay"). Its cost grows with what changed since the last
 * image, not with the number of relations, like PostgreSQL's checkpointer, which writes dirty
 * buffers only and fsyncs each touched file once.
 *
 * Layout (format 2), every file but image.json named by the image generation that wrote it:
 *
 *   base/image.json     header: REDO LSN, timeline, catalog, generation, names of the files below
 *   base/rels.<g>       pack: the relations changed since image g−1, serialized back to back
 *   base/index.<g>      for every relation: [relfilenumber, pack generation, offset, length] (f64)
 *   base/smgr.<g>       storage manager sizes;  base/pg_xact.<g>  CLOG
 *   base/catalog.<g>    the catalog's [name, relfilenumber] list (JSON)
 *
 * An image writes one pack (changed relations only), the index, smgr and CLOG files, each fsynced
 * once, then image.json through a temp file, rename and a directory fsync: the image switches
 * atomically, and only then are files no image refers to any more removed. A pack stays while any
 * relation lives in it; when fewer than half of its relations do, they are rewritten into the new
 * pack (compaction), so the space of dead relations is bounded. Format 1 (one file per relation,
 * swapped as a whole directory) is still read; the first image after it writes every relation.
 *
 * Entry points: `writeDataImage`, `ImageWriteStats` (the state between images, `ImageState`, is
 * data-image-state.ts); the reading side
 * (`readDataImage`, `readDataImageRedoLsn`) is data-image-read.ts.
 * storage/ has no timers: the caller passes `pause()` (a turn of the event loop).
 */
import { isoTimestamp } from '../common/iso-time.ts';
import * as path from 'node:path';
import { fail } from '../common/assert.ts';
import type { Clock } from '../common/clock.ts';
import type { AsyncFile, Disk } from '../common/disk.ts';
import { fsyncDir, FILE_MODE, makeDir } from '../common/durable-file.ts';
import type { CatalogSnapshot } from './catalog.ts';
import type { RelFileNumber } from '../wal/records.ts';
import type { Lsn, TimeLineId } from '../wal/lsn.ts';
import { INDEX_STRIDE, type ImageState, imageFile } from './data-image-state.ts';

export interface DataImageHeader {
  /** Replay must start at this LSN to reach the state after the image. */
  redoLsn: Lsn;
  /** prev-link of the record at redoLsn. */
  redoPrevLsn: Lsn;
  timeline: TimeLineId;
  catalog: CatalogSnapshot;
  writtenAt: string;
  /** Format 2 (absent in format 1). */
  format?: 2;
  generation?: number;
  /** File names in base/ (format 2; the catalog's tables are in `catalogTables`, not in `catalog`). */
  index?: string;
  smgr?: string;
  clog?: string;
  catalogTables?: string;
  /** Format 1: every relation has a file named by its number. */
  relations?: RelFileNumber[];
}

export interface ImageWriteStats {
  generation: number;
  /** Relations serialized into the new pack: changed ones plus those moved by compaction. */
  relationsWritten: number;
  relationsChanged: number;
  relationsCompacted: number;
  relationsDropped: number;
  /** Relations in the image (written or carried over from earlier packs). */
  relations: number;
  /** Files created and fsyncs issued (the directory fsync included). */
  filesWritten: number;
  fsyncs: number;
  bytesWritten: number;
  filesRemoved: number;
  buffersWritten: number;
  /** Times the writer gave the event loop a turn. */
  pauses: number;
  /** Longest synchronous stretch between two turns, ms (reported, never asserted: wall clock). */
  longestStepMs: number;
}

/** What the image writer needs of a node's storage (node-storage.ts provides it). */
export interface ImageSource {
  /** Buffers [from, to) flushed (BufferSync); returns how many were dirty. */
  flushBuffers(from: number, to: number): number;
  nBuffers: number;
  takeChanged(): Set<RelFileNumber>;
  markChanged(rels: Iterable<RelFileNumber>): void;
  hasRelation(rel: RelFileNumber): boolean;
  serializeRelation(rel: RelFileNumber): Uint8Array;
  smgrSteps(): Generator<void, Uint8Array, void>;
  serializeClog(): Uint8Array;
  /** The catalog's [name, rel] list as JSON (UTF-8), in steps; and its counters. */
  catalogTablesSteps(): Generator<void, Uint8Array, void>;
  catalogCounters(): Omit<CatalogSnapshot, 'tables'>;
}

/**
 * Image work between event-loop turns: a turn is given once this much has passed, so a stretch is
 * this plus one step (a step is well under 1 ms on a quiet machine: STEP_ENTRIES relations of a
 * loop, a 256k-buffer flush, one relation's serialization), within the node's 10 ms bound
 * (server/README rule 5). 2 ms, not more: on this shared 2-core machine a stretch is often
 * stretched 2-3× by preemption and a minor GC, and 5 ms slices gave 6-9 ms stretches at 100,000
 * tables (one turn costs a setImmediate, a few µs).
 */
const SLICE_MS = 2;
/**
 * Buffers flushed per step, and the pack's staging buffer (bytes gathered before a write). The
 * staging buffer replaced a writev of the relations' own buffers: its synchronous part grew with
 * the number of buffers (~5-10 ms for the tens of thousands of small relations that fit in 4 MB
 * at 100,000 tables), and the buffers waiting for it survived scavenges.
 */
const FLUSH_STEP_BUFFERS = 1 << 18;
const PACK_WRITE_BYTES = 4 << 20;
/**
 * The staging buffer's first size: the simulator writes an image of a few KB at every checkpoint
 * and restartpoint, and a zero-filled 64 KB per image was still half a percent of its CPU time.
 * The writes do not depend on it: the buffer grows to 4 MB before anything is flushed.
 */
const PACK_STAGING_MIN_BYTES = 4 << 10;
/** Entries of a per-relation loop (plan, index merge) between checks of the slice clock. */
export const STEP_ENTRIES = 256;

/** The header's file name in base/ (read by data-image-read.ts). */
export const HEADER_FILE = 'image.json';

/** The file system and clock an image is written with (the server's node:fs and Node's clock, or the simulator's). */
export interface ImageIo {
  disk: Disk;
  clock: Pick<Clock, 'now' | 'monoMs'>;
}

async function writeSynced(disk: Disk, p: string, data: Uint8Array | string): Promise<void> {
  const fh = await disk.openAsync(p, 'w', FILE_MODE);
  try {
    await fh.writeFile(data);
    await fh.sync();
  } finally {
    await fh.close();
  }
}

/**
 * Event-loop slicing of one image write: `turn` awaits (and accounts for the synchronous stretch
 * before the await), `maybePause` gives the event loop a turn once SLICE_MS of work has passed,
 * `drive` runs a generator with pauses between its steps.
 */
class ImageSlicer {
  private sliceStart: number;

  constructor(
    private readonly clock: ImageIo['clock'],
    private readonly pause: () => Promise<void>,
    private readonly stats: ImageWriteStats,
  ) {
    this.sliceStart = clock.monoMs();
  }

  /** Every await gives the event loop a turn: account for the synchronous stretch before it. */
  async turn<T>(p: Promise<T>): Promise<T> {
    this.endStretch();
    this.stats.pauses++;
    try {
      return await p;
    } finally {
      this.sliceStart = this.clock.monoMs();
    }
  }

  async maybePause(): Promise<void> {
    if (this.sliceExpired()) await this.turn(this.pause());
  }

  sliceExpired(): boolean {
    return this.clock.monoMs() - this.sliceStart >= SLICE_MS;
  }

  /** Run a serialization generator, giving the event loop turns between its steps. */
  async drive<T>(steps: Generator<void, T, void>): Promise<T> {
    for (;;) {
      const r = steps.next();
      if (r.done) return r.value;
      await this.maybePause();
    }
  }

  /** Record the stretch since the last turn in `longestStepMs`. */
  endStretch(): void {
    const ms = this.clock.monoMs() - this.sliceStart;
    this.stats.longestStepMs = Math.max(this.stats.longestStepMs, ms);
  }
}

function emptyWriteStats(generation: number): ImageWriteStats {
  return {
    generation,
    relationsWritten: 0,
    relationsChanged: 0,
    relationsCompacted: 0,
    relationsDropped: 0,
    relations: 0,
    filesWritten: 0,
    fsyncs: 0,
    bytesWritten: 0,
    filesRemoved: 0,
    buffersWritten: 0,
    pauses: 0,
    longestStepMs: 0,
  };
}

/** What the new pack holds and what the image drops. */
interface PackPlan {
  /** Relations to serialize into the new pack, ascending: changed ones plus compacted ones. */
  toWrite: Float64Array;
  /** Changed relations that no longer exist and were in the previous image, ascending. */
  dropped: Float64Array;
  /** Live relations per old pack once this image is in place. */
  liveAfter: Map<number, number>;
}

/** Changed relations, plus the live ones of packs that would be less than half alive. */
async function planPack(
  changed: ReadonlySet<RelFileNumber>,
  state: ImageState,
  src: ImageSource,
  slicer: ImageSlicer,
  stats: ImageWriteStats,
): Promise<PackPlan> {
  // Typed arrays, not boxed arrays: their backing stores are outside the young generation.
  const dropped = new Float64Array(changed.size);
  const written = new Float64Array(changed.size + state.size);
  let nDropped = 0;
  let nWritten = 0;
  const liveAfter = new Map(state.packLive);
  let n = 0;
  for (const rel of changed) {
    if (++n % STEP_ENTRIES === 0) await slicer.maybePause();
    const pos = state.find(rel);
    if (pos >= 0) {
      const pack = state.packAt(pos);
      liveAfter.set(pack, liveAfter.get(pack)! - 1);
    }
    if (src.hasRelation(rel)) written[nWritten++] = rel;
    else if (pos >= 0) dropped[nDropped++] = rel;
  }
  stats.relationsChanged = nWritten;
  stats.relationsDropped = nDropped;
  const compactPacks = new Set<number>();
  for (const [pack, live] of liveAfter)
    if (live > 0 && live * 2 < state.packTotal.get(pack)!) compactPacks.add(pack);
  if (compactPacks.size > 0) {
    const index = state.index;
    for (let i = 0; i < index.length; i += INDEX_STRIDE) {
      if (++n % STEP_ENTRIES === 0) await slicer.maybePause();
      const [rel, pack] = [index[i]!, index[i + 1]!];
      if (compactPacks.has(pack) && !changed.has(rel)) {
        written[nWritten++] = rel;
        stats.relationsCompacted++;
        liveAfter.set(pack, liveAfter.get(pack)! - 1);
      }
    }
  }
  await slicer.maybePause();
  // A typed array sorts numbers natively (an Array.sort with a comparator took ~20 ms at 100k).
  const toWrite = written.slice(0, nWritten).sort();
  return { toWrite, dropped: dropped.slice(0, nDropped).sort(), liveAfter };
}

/** Where the new pack put each relation of `toWrite` (same positions). */
interface Placed {
  offset: Float64Array;
  length: Float64Array;
}

/**
 * Serialized relations gathered into one staging buffer and written with one `writev` of it: no
 * array of thousands of small buffers waiting (and surviving scavenges) until their write, and
 * writev's synchronous part is one iovec. The buffer is reused after each awaited write (node's
 * FileHandle reads it until the promise settles; the simulator's disk copies it).
 */
class PackStager {
  /**
   * Grown by doubling up to PACK_WRITE_BYTES: most images are small (the simulator writes one per
   * checkpoint, a few KB), and a zero-filled 4 MB allocation per image was a third of its time.
   */
  private staging = new Uint8Array(PACK_STAGING_MIN_BYTES);
  private used = 0;

  constructor(
    private readonly fh: AsyncFile,
    private readonly slicer: ImageSlicer,
  ) {}

  get pending(): number {
    return this.used;
  }

  /** Add `bytes`; a relation larger than the staging buffer is written on its own. */
  async add(bytes: Uint8Array): Promise<void> {
    const need = this.used + bytes.length;
    if (need > this.staging.length && this.staging.length < PACK_WRITE_BYTES) this.grow(need);
    if (need > this.staging.length) await this.flush();
    if (bytes.length > this.staging.length) {
      await this.slicer.turn(this.fh.writev([bytes]));
      return;
    }
    this.staging.set(bytes, this.used);
    this.used += bytes.length;
  }

  /** A larger buffer holding what is staged; only between writes (none is reading the old one). */
  private grow(need: number): void {
    let size = this.staging.length;
    while (size < need && size < PACK_WRITE_BYTES) size *= 2;
    const next = new Uint8Array(Math.min(size, PACK_WRITE_BYTES));
    next.set(this.staging.subarray(0, this.used));
    this.staging = next;
  }

  async flush(): Promise<void> {
    if (this.used === 0) return;
    await this.slicer.turn(this.fh.writev([this.staging.subarray(0, this.used)]));
    this.used = 0;
  }
}

/**
 * The pack: relations serialized back to back, written in large writes, fsynced once. Returns
 * where each relation went; the file's name joins `created` once it is open.
 */
async function writePack(
  { base, name, created }: { base: string; name: string; created: string[] },
  toWrite: Float64Array,
  src: ImageSource,
  disk: Disk,
  slicer: ImageSlicer,
  stats: ImageWriteStats,
): Promise<Placed> {
  const placed: Placed = {
    offset: new Float64Array(toWrite.length),
    length: new Float64Array(toWrite.length),
  };
  const fh = await slicer.turn(disk.openAsync(imageFile(base, name), 'w', FILE_MODE));
  created.push(name);
  try {
    const stager = new PackStager(fh, slicer);
    let offset = 0;
    for (let i = 0; i < toWrite.length; i++) {
      const bytes = src.serializeRelation(toWrite[i]!);
      placed.offset[i] = offset;
      placed.length[i] = bytes.length;
      offset += bytes.length;
      await stager.add(bytes);
      if (stager.pending > 0 && slicer.sliceExpired()) await stager.flush();
    }
    await stager.flush();
    await slicer.turn(fh.sync());
    stats.fsyncs++;
    stats.bytesWritten += offset;
  } finally {
    await slicer.turn(fh.close());
  }
  stats.filesWritten++;
  stats.relationsWritten = toWrite.length;
  return placed;
}

/**
 * The new index: a merge of the previous one (dropped and rewritten relations left out) with the
 * new pack's relations, both ascending, so the result is ascending (INV-IMAGE-3) and lists every
 * relation once (INV-IMAGE-1). It becomes the state once the image is in place.
 */
async function buildIndex(
  state: ImageState,
  plan: PackPlan,
  gen: number,
  placed: Placed,
  slicer: ImageSlicer,
  stats: ImageWriteStats,
): Promise<Float64Array> {
  const { toWrite, dropped } = plan;
  const old = state.index;
  const nOld = state.size;
  let added = 0;
  let n = 0;
  for (let i = 0; i < toWrite.length; i++) {
    if (++n % STEP_ENTRIES === 0) await slicer.maybePause();
    if (state.find(toWrite[i]!) < 0) added++;
  }
  const total = nOld - dropped.length + added;
  const index = new Float64Array(total * INDEX_STRIDE);
  let out = 0;
  let d = 0;
  let j = 0;
  const full = (): void => {
    if (out >= total) fail(`INV-IMAGE-1: index holds more than ${total} relations`);
  };
  for (let i = 0; i < nOld || j < toWrite.length;) {
    if (++n % STEP_ENTRIES === 0) await slicer.maybePause();
    const a = i < nOld ? old[i * INDEX_STRIDE]! : Infinity;
    const b = j < toWrite.length ? toWrite[j]! : Infinity;
    const o = out * INDEX_STRIDE;
    if (b <= a) {
      full();
      index[o] = b;
      index[o + 1] = gen;
      index[o + 2] = placed.offset[j]!;
      index[o + 3] = placed.length[j]!;
      j++;
      if (b === a) i++;
      out++;
    } else {
      // Dropped relations are in the old index and not in the pack: both lists ascend together.
      if (d < dropped.length && dropped[d] === a) d++;
      else {
        full();
        for (let k = 0; k < INDEX_STRIDE; k++) index[o + k] = old[i * INDEX_STRIDE + k]!;
        out++;
      }
      i++;
    }
  }
  if (!(out === total && d === dropped.length)) fail(`INV-IMAGE-1: index holds ${out} of ${total}`);
  stats.relations = total;
  return index;
}

/** Names of the image's files other than the pack (the header lists them). */
interface ImageFiles {
  index: string;
  smgr: string;
  clog: string;
  catalogTables: string;
}

/** Index, sizes, CLOG and catalog files, each written and fsynced once (names in `created` first). */
async function writeMetadataFiles(
  base: string,
  files: ImageFiles,
  index: Float64Array,
  src: ImageSource,
  disk: Disk,
  slicer: ImageSlicer,
  stats: ImageWriteStats,
  created: string[],
): Promise<void> {
  const contents: Array<[string, Uint8Array | string]> = [
    [files.index, new Uint8Array(index.buffer, index.byteOffset, index.byteLength)],
    [files.smgr, await slicer.drive(src.smgrSteps())],
    [files.clog, src.serializeClog()],
    [files.catalogTables, await slicer.drive(src.catalogTablesSteps())],
  ];
  for (const [name, data] of contents) {
    created.push(name);
    await slicer.turn(writeSynced(disk, imageFile(base, name), data));
    stats.filesWritten++;
    stats.fsyncs++;
    stats.bytesWritten += data.length;
  }
}

/**
 * image.json through a temp file and a rename: the image switches atomically (the caller then
 * fsyncs the directory). From the rename on, the header names the new files.
 */
async function switchHeader(
  base: string,
  full: DataImageHeader,
  disk: Disk,
  slicer: ImageSlicer,
  stats: ImageWriteStats,
): Promise<void> {
  const tmp = imageFile(base, `${HEADER_FILE}.tmp`);
  await slicer.turn(writeSynced(disk, tmp, JSON.stringify(full)));
  await slicer.turn(disk.renameAsync(tmp, imageFile(base, HEADER_FILE)));
  stats.filesWritten++;
  stats.fsyncs += 2;
}

/**
 * The new image is in place: its index becomes the state (no per-relation work); returns the
 * files nothing refers to any more.
 */
function advanceState(
  state: ImageState,
  gen: number,
  plan: PackPlan,
  index: Float64Array,
  files: ImageFiles,
): string[] {
  const { toWrite, liveAfter } = plan;
  const obsolete = [...state.files, ...state.legacyFiles];
  state.index = index;
  if (toWrite.length > 0) {
    liveAfter.set(gen, toWrite.length);
    state.packTotal.set(gen, toWrite.length);
  }
  for (const [pack, live] of liveAfter) {
    if (live > 0) continue;
    liveAfter.delete(pack);
    state.packTotal.delete(pack);
    obsolete.push(`rels.${pack}`);
  }
  state.packLive.clear();
  for (const [pack, live] of liveAfter) state.packLive.set(pack, live);
  state.generation = gen;
  state.files = Object.values(files);
  return obsolete;
}

/** Remove the files of earlier images (and, after the first format-2 image, format 1's). */
async function removeObsolete(
  dataDir: string,
  base: string,
  obsolete: readonly string[],
  state: ImageState,
  disk: Disk,
  slicer: ImageSlicer,
  stats: ImageWriteStats,
): Promise<void> {
  if (state.legacyFiles.length > 0) {
    // The first format-2 image: the format-1 swap directories go too.
    for (const dir of ['base.old', 'base.new'])
      await slicer.turn(disk.rmrfAsync(path.join(dataDir, dir)));
  }
  state.legacyFiles = [];
  for (const name of obsolete) {
    await slicer.turn(disk.rmrfAsync(imageFile(base, name)));
    stats.filesRemoved++;
  }
}

/** The new image.json: the caller's REDO point, the catalog's counters, the image's files. */
function imageHeader(
  header: Pick<DataImageHeader, 'redoLsn' | 'redoPrevLsn' | 'timeline'>,
  src: ImageSource,
  nowMs: number,
  gen: number,
  files: ImageFiles,
): DataImageHeader {
  // Object.assign, not spreads: Node 20's V8 builds `{ ...a, k, ...b }` on a slow path.
  return Object.assign(
    {},
    header,
    {
      catalog: Object.assign({ tables: [] }, src.catalogCounters()),
      writtenAt: isoTimestamp(nowMs),
      format: 2 as const,
      generation: gen,
    },
    files,
  );
}

/**
 * Write a new image for `header` into `<dataDir>/base`. The caller guarantees the storage does not
 * change until the promise settles (the primary holds its write lock, a standby holds replay);
 * between steps the event loop runs, so the node answers its clients meanwhile. On failure the
 * changed relations are put back (the next image writes them) and the previous image stays.
 */
export async function writeDataImage(
  dataDir: string,
  header: Pick<DataImageHeader, 'redoLsn' | 'redoPrevLsn' | 'timeline'>,
  src: ImageSource,
  state: ImageState,
  pause: () => Promise<void>,
  io: ImageIo,
): Promise<ImageWriteStats> {
  const { disk, clock } = io;
  const base = path.join(dataDir, 'base');
  const fresh = !disk.exists(base);
  makeDir(base, disk);
  // A new base/ is an entry of the data directory: durable only once that directory is fsynced
  // (found by the simulator's strict disk: a power loss lost the first image's directory).
  if (fresh) fsyncDir(dataDir, disk);
  const gen = state.generation + 1;
  const stats = emptyWriteStats(gen);
  const slicer = new ImageSlicer(clock, pause, stats);

  // BufferSync, in steps.
  for (let from = 0; from < src.nBuffers; from += FLUSH_STEP_BUFFERS) {
    stats.buffersWritten += src.flushBuffers(from, from + FLUSH_STEP_BUFFERS);
    await slicer.maybePause();
  }

  const changed = src.takeChanged();
  const created: string[] = [];
  // Once image.json is renamed into place it names the files in `created`: a later failure (the
  // directory fsync, removing an old file) must not roll them back, or the header names files
  // that are gone and the next start cannot load the image.
  let switched = false;
  try {
    const plan = await planPack(changed, state, src, slicer, stats);
    let placed: Placed = { offset: new Float64Array(0), length: new Float64Array(0) };
    if (plan.toWrite.length > 0) {
      const pack = { base, name: `rels.${gen}`, created };
      placed = await writePack(pack, plan.toWrite, src, disk, slicer, stats);
    }
    const index = await buildIndex(state, plan, gen, placed, slicer, stats);
    await slicer.maybePause();
    const files: ImageFiles = {
      index: `index.${gen}`,
      smgr: `smgr.${gen}`,
      clog: `pg_xact.${gen}`,
      catalogTables: `catalog.${gen}`,
    };
    await writeMetadataFiles(base, files, index, src, disk, slicer, stats, created);
    const full = imageHeader(header, src, clock.now(), gen, files);
    await switchHeader(base, full, disk, slicer, stats);
    switched = true;
    const obsolete = advanceState(state, gen, plan, index, files);
    fsyncDir(base, disk);
    await removeObsolete(dataDir, base, obsolete, state, disk, slicer, stats);
    slicer.endStretch();
    return stats;
  } catch (e) {
    if (!switched) {
      src.markChanged(changed);
      for (const name of created) disk.rmrf(imageFile(base, name));
    }
    throw e;
  }
}
