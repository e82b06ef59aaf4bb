/**
 * The storage manager's view of relation sizes (smgr.c + md.c), with the per-process size cache.
 *
 * Entry points: `StorageManager` — `create`, `exists`, `nblocks` (smgrnblocks), `nblocksCached`
 * (smgrnblocks_cached), `extend` (smgrextend), `truncateForks` (the tail of smgrtruncate),
 * `resetCachedSizes` (RelationTruncate's reset), `unlink`, `open`, `close` (smgrclose),
 * `serialize` / `deserialize` (the data directory across a restart), and the `inRecovery` flag;
 * and smgr.c's composite operations over a buffer pool and a StorageManager: `smgrcreate`,
 * `smgrtruncate` / `smgrtruncateSteps` (DropRelFileNodeBuffers, then truncate) and
 * `smgrdounlinkall` / `smgrdounlinkallSteps` (DropRelFileNodesAllBuffers, then close and unlink).
 *
 * Two things are modelled separately, as in PostgreSQL:
 *   - the "disk": which forks of a relfilenumber exist and how many blocks each has (md.c files);
 *   - the process's SMgrRelation size cache, `smgr_cached_nblocks[fork]`, which is what the
 *     optimized buffer-drop path relies on. It is trusted only while `inRecovery` is true.
 * The buffer contents are not here (see buffer-pool.ts, heap-store.ts).
 *
 * Rules (pg-internals §1.5; numbered as in storage/README.md):
 *   INV-STORAGE-1  nblocksCached returns the cached size only when inRecovery is true and the size is
 *                  cached; otherwise InvalidBlockNumber.
 *   INV-STORAGE-2  open (smgropen) of a relation not open starts with every fork uncached; close
 *                  (smgrclose) forgets all cached sizes; a restart (deserialize) caches nothing.
 *   INV-STORAGE-3  nblocks returns the cached size if usable (in recovery), else the disk size, and
 *                  stores that in the cache in any process. Under 13's rules (pg-drop-rules.ts
 *                  rule 8) it asks the disk every time: each call is a counted mdnblocks. A call
 *                  that asks the disk of a fork of a whole number of 1 GB segments also counts a
 *                  failed open of the next segment (rule 9, `failedSegmentOpens`).
 *   INV-STORAGE-4  extend(blocknum) sets the cache to blocknum + 1 if it equalled blocknum, else
 *                  invalidates it; the disk size becomes blocknum + 1 (holes read as zeros).
 *   INV-STORAGE-5  truncateForks invalidates each fork's cached size, truncates the file, then stores
 *                  the new size in the cache — even when, in recovery, the file was already shorter
 *                  and md.c left it alone (PostgreSQL's behaviour).
 *   INV-STORAGE-6  resetCachedSizes invalidates the four forks (RelationTruncate on the primary).
 *   INV-STORAGE-7  a valid cached size is never below the fork's size on disk, and only a fork that
 *                  exists has a cached size. So no buffer of a fork can lie at or beyond a valid
 *                  cached size as long as pages are only read below the disk size (asserted by
 *                  nblocksCached and checkStorage).
 *   INV-STORAGE-8  cacheCreatedEmpty (the cache-at-create strategy) caches 0 only in recovery, for
 *                  an existing fork of 0 blocks.
 */
import { assert, fail } from '../common/assert.ts';
import { WalsimError } from '../common/errors.ts';
import { injectedBugs } from '../common/injected-bugs.ts';
import {
  FORK_NAMES,
  InvalidBlockNumber,
  MAX_FORKNUM,
  type BlockNumber,
  type ForkNumber,
  type RelFileNumber,
} from '../wal/records.ts';
import type { BufferPool } from './buffer-pool.ts';
import {
  DEFAULT_DROP_SETTINGS,
  dropRelFileNodeBuffersSteps,
  dropRelFileNodesAllBuffersSteps,
  dropStrategyImpl,
  runSteps,
  type DropResult,
  type DropSettings,
} from './drop.ts';
import {
  mdnblocksOpensNextSegment,
  smgrnblocksAsksFile,
  type PgDropRules,
} from './pg-drop-rules.ts';

const NFORKS = MAX_FORKNUM + 1;
/** Sentinel in `disk`: the fork's file does not exist. */
const NO_FILE = -1;
/** Largest relation size in blocks: MaxBlockNumber + 1. */
const MAX_NBLOCKS = InvalidBlockNumber;

const SERIAL_MAGIC = 0x47_4d_53_57; // "WSMG" read little-endian
const SERIAL_VERSION = 1;
const SERIAL_HEADER_BYTES = 12;
const SERIAL_REL_BYTES = 4 + 1 + 4 * NFORKS;

function assertRel(rel: number): void {
  if (!(Number.isInteger(rel) && rel > 0 && rel <= 0xffffffff))
    fail(`INV-STORAGE-0: bad relfilenumber ${rel}`);
}

function assertFork(fork: number): void {
  if (!(Number.isInteger(fork) && fork >= 0 && fork <= MAX_FORKNUM))
    fail(`INV-STORAGE-0: bad fork ${fork}`);
}

/** The file name PostgreSQL would report (base/<db>/<relfilenumber>[_fork]); database oid 5 is walsim's. */
export function relpath(rel: RelFileNumber, fork: ForkNumber): string {
  return fork === 0 ? `base/5/${rel}` : `base/5/${rel}_${FORK_NAMES[fork]}`;
}

/**
 * A fault inside a drop, armed once on a storage manager (the simulator's faults, tests): where
 * the buffers are already gone but the files are not. `truncate`: smgrtruncate's truncation of
 * its `fork`-th fork (0: right after the buffer drop; 1, 2: after the forks before it were
 * truncated); `unlink`: smgrdounlinkall between the buffer drop and the unlinks (crash only: md.c
 * only warns when an unlink fails). `io`: the file operation fails (EIO); `crash`: the process
 * dies there.
 */
export interface DropFault {
  kind: 'io' | 'crash';
  where: 'truncate' | 'unlink';
  fork: number;
}

/** The error an armed DropFault raises. */
export class InjectedDropFault extends WalsimError {
  constructor(
    readonly fault: DropFault,
    message: string,
  ) {
    super('io_error', message, 'XX000');
    this.name = 'InjectedDropFault';
  }
}

/**
 * File operations md.c would make, per fork (index = ForkNumber): the cost model's smgr counters
 * (cost-model/README.md). Counted only when PostgreSQL would touch the file: a create of an
 * existing fork, a truncation to the current size or beyond, and an unlink of a missing fork are
 * no-ops in md.c too.
 */
export interface SmgrFileOps {
  /** mdcreate: a fork's file created. */
  create: number[];
  /** mdextend: one block written at the end. */
  extend: number[];
  /** mdtruncate: ftruncate to a shorter size. */
  truncate: number[];
  /** mdunlink: a fork's file removed. */
  unlink: number[];
  /** mdnblocks: the size asked of the file (lseek) because no cached size could answer. */
  nblocks: number[];
}

export function emptySmgrFileOps(): SmgrFileOps {
  return {
    create: [0, 0, 0, 0],
    extend: [0, 0, 0, 0],
    truncate: [0, 0, 0, 0],
    unlink: [0, 0, 0, 0],
    nblocks: [0, 0, 0, 0],
  };
}

export class StorageManager {
  /** File operations so far (monotonic; a failover's are the difference of two snapshots). */
  readonly fileOps: SmgrFileOps = emptySmgrFileOps();
  /** Size queries that also failed to open a next segment (pg-drop-rules.ts rule 9). */
  private failedOpens = 0;
  /** Disk: per relfilenumber, the size of each fork in blocks, or NO_FILE. */
  private readonly disk = new Map<RelFileNumber, Float64Array>();
  /** Open SMgrRelations: per relfilenumber, smgr_cached_nblocks (InvalidBlockNumber = not cached). */
  private readonly cache = new Map<RelFileNumber, Float64Array>();
  private recovery = false;
  /** Armed once: the next drop that reaches its point fails there (and disarms it). */
  dropFault: DropFault | null = null;

  /** Throw the armed fault if this is its point (it fires once). */
  fireDropFault(where: DropFault['where'], fork: number, what: string): void {
    const f = this.dropFault;
    if (f === null || f.where !== where || f.fork !== fork) return;
    this.dropFault = null;
    throw new InjectedDropFault(
      f,
      f.kind === 'io'
        ? `could not ${what}: Input/output error (injected fault)`
        : `process killed before it could ${what} (injected fault)`,
    );
  }

  /**
   * mdnblocks calls (counted in `fileOps.nblocks` too) that also tried to open the segment after a
   * full last one, which does not exist (a fork of a whole number of 1 GB segments). Monotonic.
   */
  get failedSegmentOpens(): number {
    return this.failedOpens;
  }

  /** InRecovery: true in the startup process during standby replay or crash recovery. */
  get inRecovery(): boolean {
    return this.recovery;
  }

  set inRecovery(value: boolean) {
    this.recovery = value;
  }

  /** smgropen: make sure an SMgrRelation exists; a new one caches nothing (INV-STORAGE-2). */
  open(rel: RelFileNumber): void {
    this.cached(rel);
  }

  /** smgrclose: forget the SMgrRelation and with it every cached size (INV-STORAGE-2). */
  close(rel: RelFileNumber): void {
    assertRel(rel);
    this.cache.delete(rel);
  }

  /** Is the relation open (has an SMgrRelation)? For tests. */
  isOpen(rel: RelFileNumber): boolean {
    return this.cache.has(rel);
  }

  /** smgrcreate: create the fork's file, empty. Creating an existing fork is a no-op (as in redo). Returns whether it was created. */
  create(rel: RelFileNumber, fork: ForkNumber): boolean {
    assertFork(fork);
    this.open(rel);
    let sizes = this.disk.get(rel);
    if (!sizes) {
      sizes = new Float64Array(NFORKS).fill(NO_FILE);
      this.disk.set(rel, sizes);
    }
    if (sizes[fork] !== NO_FILE) return false;
    sizes[fork] = 0;
    this.fileOps.create[fork]!++;
    return true;
  }

  /** smgrexists. */
  exists(rel: RelFileNumber, fork: ForkNumber): boolean {
    assertRel(rel);
    assertFork(fork);
    const sizes = this.disk.get(rel);
    return sizes !== undefined && sizes[fork] !== NO_FILE;
  }

  /** Every relfilenumber with at least one fork on disk, ascending. */
  relations(): RelFileNumber[] {
    return [...this.disk.keys()].sort((a, b) => a - b);
  }

  /** The fork's size on disk, ignoring every cache (mdnblocks). Throws if the file does not exist. */
  diskNblocks(rel: RelFileNumber, fork: ForkNumber): number {
    assertRel(rel);
    assertFork(fork);
    const size = this.disk.get(rel)?.[fork] ?? NO_FILE;
    if (size === NO_FILE) {
      throw new WalsimError(
        'io_error',
        `could not open file "${relpath(rel, fork)}": No such file or directory`,
      );
    }
    return size;
  }

  /**
   * smgrnblocks (INV-STORAGE-3): cached size in recovery, else the disk size, which is cached.
   * `rules`: the major the node follows; under 13's (no smgrnblocks_cached) every call asks the
   * file and is counted.
   */
  nblocks(rel: RelFileNumber, fork: ForkNumber, rules?: PgDropRules): number {
    const cached = this.nblocksCached(rel, fork);
    if (!smgrnblocksAsksFile(rules, cached !== InvalidBlockNumber)) return cached;
    const size = this.diskNblocks(rel, fork);
    this.fileOps.nblocks[fork]!++;
    if (mdnblocksOpensNextSegment(size)) this.failedOpens++;
    this.cached(rel)[fork] = size;
    return size;
  }

  /**
   * `times` smgrnblocks calls of one fork in a row, nothing changed in between; returns the size.
   * After the first the state is steady (the size is cached in recovery, and what is asked and
   * counted repeats), so the second's counts stand for the rest: a replayed multi-insert record
   * is one HEAP_INSERT a row, and under 13's rules each asks the file — thousands of calls.
   */
  nblocksRepeated(
    rel: RelFileNumber,
    fork: ForkNumber,
    rules: PgDropRules | undefined,
    times: number,
  ): number {
    let size = this.nblocks(rel, fork, rules);
    if (times < 2) return size;
    const asked = this.fileOps.nblocks[fork]!;
    const failed = this.failedOpens;
    size = this.nblocks(rel, fork, rules);
    const more = times - 2;
    this.fileOps.nblocks[fork]! += (this.fileOps.nblocks[fork]! - asked) * more;
    this.failedOpens += (this.failedOpens - failed) * more;
    return size;
  }

  /** smgrnblocks_cached (INV-STORAGE-1): the cached size if in recovery and cached, else InvalidBlockNumber. */
  nblocksCached(rel: RelFileNumber, fork: ForkNumber): number {
    assertFork(fork);
    if (!this.recovery) return InvalidBlockNumber;
    const cache = this.cache.get(rel);
    if (cache === undefined || cache[fork] === InvalidBlockNumber) return InvalidBlockNumber;
    const value = cache[fork]!;
    if (!(this.exists(rel, fork) && value >= this.diskNblocks(rel, fork))) {
      fail(
        `INV-STORAGE-7: cached size ${value} of ${relpath(rel, fork as ForkNumber)} is below its disk size`,
      );
    }
    return value;
  }

  /** The raw cached size whatever the recovery state, or InvalidBlockNumber. For tests and tools. */
  peekCachedNblocks(rel: RelFileNumber, fork: ForkNumber): number {
    assertFork(fork);
    return this.cache.get(rel)?.[fork] ?? InvalidBlockNumber;
  }

  /** smgrextend (INV-STORAGE-4): write block `blocknum` at or beyond the end of the fork. */
  extend(rel: RelFileNumber, fork: ForkNumber, blocknum: BlockNumber): void {
    const size = this.diskNblocks(rel, fork);
    if (!(Number.isInteger(blocknum) && blocknum >= size && blocknum < MAX_NBLOCKS)) {
      fail(
        `INV-STORAGE-4: extend of ${relpath(rel, fork)} at block ${blocknum} but it has ${size} blocks`,
      );
    }
    this.disk.get(rel)![fork] = blocknum + 1;
    this.fileOps.extend[fork]!++;
    const cache = this.cached(rel);
    cache[fork] = cache[fork] === blocknum ? blocknum + 1 : InvalidBlockNumber;
  }

  /**
   * The storage half of smgrtruncate (INV-STORAGE-5): for each fork, invalidate the cached size,
   * truncate the file (mdtruncate: refusing to grow it, except in recovery where a shorter file is
   * left alone), then store the new size in the cache. Buffers are the caller's business
   * (drop.ts smgrtruncate drops them first).
   */
  truncateForks(
    rel: RelFileNumber,
    forks: readonly ForkNumber[],
    nblocks: readonly BlockNumber[],
  ): void {
    assert(forks.length === nblocks.length, 'INV-STORAGE-5: forks and nblocks differ in length');
    const cache = this.cached(rel);
    for (let i = 0; i < forks.length; i++) {
      const fork = forks[i]!;
      const target = nblocks[i]!;
      const size = this.diskNblocks(rel, fork);
      if (!(Number.isInteger(target) && target >= 0 && target <= MAX_NBLOCKS))
        fail(`INV-STORAGE-5: bad size ${target}`);
      cache[fork] = InvalidBlockNumber;
      this.fireDropFault(
        'truncate',
        i,
        `truncate file "${relpath(rel, fork)}" to ${target} blocks`,
      );
      if (target > size) {
        if (!this.recovery) {
          throw new WalsimError(
            'io_error',
            `could not truncate file "${relpath(rel, fork)}" to ${target} blocks: it's only ${size} blocks now`,
          );
        }
      } else {
        if (target < size) this.fileOps.truncate[fork]!++;
        this.disk.get(rel)![fork] = target;
      }
      cache[fork] = target;
    }
  }

  /**
   * The `cache-at-create` strategy's rule (INV-STORAGE-8): a fork smgrcreate has just created in
   * recovery is empty, so its size 0 is cached. Only an existing fork of 0 blocks qualifies.
   */
  cacheCreatedEmpty(rel: RelFileNumber, fork: ForkNumber): void {
    if (!(this.recovery && this.diskNblocks(rel, fork) === 0)) {
      fail(
        `INV-STORAGE-8: caching size 0 of ${relpath(rel, fork)} needs recovery and an empty fork`,
      );
    }
    this.cached(rel)[fork] = 0;
  }

  /** RelationTruncate's reset (INV-STORAGE-6): every fork's cached size becomes invalid. */
  resetCachedSizes(rel: RelFileNumber): void {
    this.cached(rel).fill(InvalidBlockNumber);
  }

  /**
   * Unlink every fork of the relation (mdunlink; a missing file is fine, as in redo). The cached
   * sizes go too: PostgreSQL keeps them until the smgrclose every caller does next, walsim folds
   * that in so a cached size never outlives its file (INV-STORAGE-7).
   */
  unlink(rel: RelFileNumber): void {
    assertRel(rel);
    const sizes = this.disk.get(rel);
    if (sizes) for (let f = 0; f < NFORKS; f++) if (sizes[f] !== NO_FILE) this.fileOps.unlink[f]!++;
    this.disk.delete(rel);
    this.cache.delete(rel);
  }

  /**
   * Check INV-STORAGE-7 for every open relation whatever the recovery state. For tests.
   */
  checkStorage(): void {
    for (const [rel, cache] of this.cache) {
      for (let fork = 0; fork <= MAX_FORKNUM; fork++) {
        if (cache[fork] === InvalidBlockNumber) continue;
        const f = fork as ForkNumber;
        if (!this.exists(rel, f))
          fail(`INV-STORAGE-7: ${relpath(rel, f)} is cached but does not exist`);
        if (!(cache[fork]! >= this.diskNblocks(rel, f)))
          fail(`INV-STORAGE-7: ${relpath(rel, f)} cached below disk size`);
      }
    }
  }

  /** The disk state (which forks exist and their sizes); never the cache. */
  serialize(): Uint8Array {
    const steps = this.serializeSteps();
    for (;;) {
      const r = steps.next();
      if (r.done) return r.value;
    }
  }

  /** serialize() in steps: yields every `stepRels` relations (a checkpoint gives the event loop turns). */
  *serializeSteps(stepRels = 256): Generator<void, Uint8Array, void> {
    // Filled by a loop and sorted natively, with a turn in between (Float64Array.from over the
    // keys iterator took ~10 ms at 100,000 relations).
    const rels = new Float64Array(this.disk.size);
    let k = 0;
    for (const rel of this.disk.keys()) {
      rels[k++] = rel;
      if (k % stepRels === 0) yield;
    }
    rels.sort();
    yield;
    const bytes = new Uint8Array(SERIAL_HEADER_BYTES + rels.length * SERIAL_REL_BYTES);
    const view = new DataView(bytes.buffer);
    view.setUint32(0, SERIAL_MAGIC, true);
    view.setUint32(4, SERIAL_VERSION, true);
    view.setUint32(8, rels.length, true);
    let off = SERIAL_HEADER_BYTES;
    let n = 0;
    for (const rel of rels) {
      if (++n % stepRels === 0) yield;
      const sizes = this.disk.get(rel)!;
      view.setUint32(off, rel, true);
      let mask = 0;
      for (let fork = 0; fork < NFORKS; fork++) {
        if (sizes[fork] !== NO_FILE) mask |= 1 << fork;
        view.setUint32(off + 5 + 4 * fork, sizes[fork]! === NO_FILE ? 0 : sizes[fork]!, true);
      }
      view.setUint8(off + 4, mask);
      off += SERIAL_REL_BYTES;
    }
    return bytes;
  }

  /** A restarted process's storage manager: the disk as serialized, nothing cached, not in recovery. */
  static deserialize(bytes: Uint8Array): StorageManager {
    const bad = (why: string): WalsimError =>
      new WalsimError('io_error', `invalid storage manager state file: ${why}`, 'XX001');
    if (bytes.byteLength < SERIAL_HEADER_BYTES) throw bad('too short');
    const view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
    if (view.getUint32(0, true) !== SERIAL_MAGIC) throw bad('bad magic number');
    if (view.getUint32(4, true) !== SERIAL_VERSION)
      throw bad(`unsupported version ${view.getUint32(4, true)}`);
    const count = view.getUint32(8, true);
    if (bytes.byteLength !== SERIAL_HEADER_BYTES + count * SERIAL_REL_BYTES)
      throw bad('length mismatch');
    const smgr = new StorageManager();
    let off = SERIAL_HEADER_BYTES;
    let prev = 0;
    for (let i = 0; i < count; i++, off += SERIAL_REL_BYTES) {
      const rel = view.getUint32(off, true);
      const mask = view.getUint8(off + 4);
      if (rel <= prev) throw bad(`relfilenumber ${rel} out of order`);
      if (mask === 0 || mask >= 1 << NFORKS) throw bad(`bad fork mask ${mask} for ${rel}`);
      prev = rel;
      const sizes = new Float64Array(NFORKS).fill(NO_FILE);
      for (let fork = 0; fork < NFORKS; fork++) {
        if (mask & (1 << fork)) sizes[fork] = view.getUint32(off + 5 + 4 * fork, true);
      }
      smgr.disk.set(rel, sizes);
    }
    return smgr;
  }

  /** The SMgrRelation's cache array, opening the relation if needed. */
  private cached(rel: RelFileNumber): Float64Array {
    assertRel(rel);
    let cache = this.cache.get(rel);
    if (!cache) {
      cache = new Float64Array(NFORKS).fill(InvalidBlockNumber);
      this.cache.set(rel, cache);
    }
    return cache;
  }
}

// ---- smgr.c's composite operations (they call bufmgr's drops in storage/drop.ts) ----------

/**
 * smgrcreate: create the fork's file if it does not exist (redo may create it twice). With
 * `cache-at-create`, in recovery, a fork this call created is known to be empty: its size 0 is
 * cached, so a later drop of a fork that replay never wrote can take the lookup path (the 2026
 * pgsql-hackers proposal). Returns whether the file was created.
 */
export function smgrcreate(
  smgr: StorageManager,
  rel: RelFileNumber,
  fork: ForkNumber,
  settings: DropSettings = DEFAULT_DROP_SETTINGS,
): boolean {
  const created = smgr.create(rel, fork);
  if (created && smgr.inRecovery && dropStrategyImpl(settings.strategy).cachesSizeAtCreate)
    smgr.cacheCreatedEmpty(rel, fork);
  return created;
}

/**
 * smgrtruncate: drop the buffers at or beyond the new ends (while sizes are still cached), then
 * truncate the forks and cache the new sizes. `nblocks[i]` is the new size of `forks[i]`.
 */
export function smgrtruncate(
  pool: BufferPool,
  smgr: StorageManager,
  rel: RelFileNumber,
  forks: readonly ForkNumber[],
  nblocks: readonly BlockNumber[],
  settings: DropSettings = DEFAULT_DROP_SETTINGS,
): DropResult {
  return runSteps(smgrtruncateSteps(pool, smgr, rel, forks, nblocks, settings));
}

export function* smgrtruncateSteps(
  pool: BufferPool,
  smgr: StorageManager,
  rel: RelFileNumber,
  forks: readonly ForkNumber[],
  nblocks: readonly BlockNumber[],
  settings: DropSettings = DEFAULT_DROP_SETTINGS,
): Generator<void, DropResult, void> {
  const result = yield* dropRelFileNodeBuffersSteps(pool, smgr, rel, forks, nblocks, settings);
  smgr.truncateForks(rel, forks, nblocks);
  return result;
}

/**
 * smgrdounlinkall: drop every buffer of the relations first (PG14+ order, so cached sizes and
 * smgrexists still answer), then close them (forgetting cached sizes) and unlink their files.
 */
export function smgrdounlinkall(
  pool: BufferPool,
  smgr: StorageManager,
  rels: readonly RelFileNumber[],
  settings: DropSettings = DEFAULT_DROP_SETTINGS,
): DropResult {
  return runSteps(smgrdounlinkallSteps(pool, smgr, rels, settings));
}

export function* smgrdounlinkallSteps(
  pool: BufferPool,
  smgr: StorageManager,
  rels: readonly RelFileNumber[],
  settings: DropSettings = DEFAULT_DROP_SETTINGS,
): Generator<void, DropResult, void> {
  // (The planted bug of common/injected-bugs.ts unlinks the files before dropping the buffers.)
  const unlinkFirst = injectedBugs.unlinkBeforeDroppingBuffers;
  if (unlinkFirst) unlinkAll(smgr, rels);
  const result = yield* dropRelFileNodesAllBuffersSteps(pool, smgr, rels, settings);
  if (rels.length > 0) smgr.fireDropFault('unlink', 0, `unlink file "${relpath(rels[0]!, 0)}"`);
  if (!unlinkFirst) unlinkAll(smgr, rels);
  return result;
}

/** Close each relation (forgetting its cached sizes) and unlink its files. */
function unlinkAll(smgr: StorageManager, rels: readonly RelFileNumber[]): void {
  for (const rel of rels) {
    smgr.close(rel);
    smgr.unlink(rel);
  }
}
