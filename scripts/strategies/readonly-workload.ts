/**
 * The ordinary path a drop strategy taxes: a read-only workload in the spirit of `pgbench -S`
 * (seed 000's reviewers, seed 003's table) run in this process against one buffer pool per
 * strategy — random single-block reads over a data set larger than shared_buffers, so that a
 * share of the reads (1 − hit ratio) allocate a buffer: clock sweep, eviction, retag, and whatever
 * the strategy maintains on that path (rel-list's list links; nothing for the others).
 *
 * Entry points: `measureReadOnly(options)`, `strategyMemory(nBuffers)`, `PG_BUFFER_TABLE_BYTES_PER_BUFFER`.
 *
 * Method: for a target hit ratio h the data set is ceil(NBuffers / h) blocks of one relation
 * (uniform random reads keep about NBuffers / D of them in the pool). One pool per strategy is
 * built as a node would (poolOptionsFor) and warmed: every block once, then 2 × NBuffers random
 * reads. Then, in rounds, every pool reads the same chunk of `reads` random blocks (seeded PRNG),
 * in an order rotated per round, timed by the process's CPU time (user + system: the loop is
 * single-threaded and allocates nothing, so on a busy machine that is still its own work). Round 0
 * is discarded (JIT warm-up). Reported: median CPU time per chunk (min, max), allocations/s at the
 * median, and the regression against cached-lookup as the median over rounds of the paired ratio
 * (same chunk, measured back to back), which cancels most of the machine's drift. walsim has one
 * backend and no locks, so what it measures is the CPU work of the allocation path only — the
 * seed's contention costs (new LWLocks, spinlocks) come on top in PostgreSQL.
 */
import { SeededRandom } from '../../common/random.ts';
import { BufferPool } from '../../storage/buffer-pool.ts';
import { bufTableCapacity } from '../../storage/buf-table.ts';
import { DEFAULT_DROP_SETTINGS, poolOptionsFor, type DropStrategy } from '../../storage/drop.ts';
import { relBufferListsBytes } from '../../storage/rel-buffer-lists.ts';
import { DESCRIPTOR_BYTES_PER_BUFFER } from '../../storage/buffer-pool.ts';

/** PostgreSQL's buffer mapping table, as Tom Lane put it in seed 000: "about 56 bytes per shared buffer". */
export const PG_BUFFER_TABLE_BYTES_PER_BUFFER = 56;

/** The relation the workload reads (any valid relfilenumber). */
const REL = 16384;

export interface ReadOnlyOptions {
  nBuffers: number;
  /** Target hit ratios, e.g. [0.5, 0.9, 0.99]. */
  hitRatios: number[];
  strategies: DropStrategy[];
  /** Timed reads per measurement. */
  reads: number;
  /** Measured rounds (after one discarded warm-up round); each reads `reads` blocks on every pool. */
  rounds: number;
  seed?: number;
  /** Called after each measurement (progress). */
  onMeasured?: (done: number, total: number, label: string) => void;
}

export interface ReadOnlyRun {
  strategy: DropStrategy;
  targetHitRatio: number;
  round: number;
  /** CPU ms of the timed reads. */
  elapsedMs: number;
  reads: number;
  hits: number;
  /** Buffer allocations (misses): each one a victim search, an eviction and a retag. */
  allocations: number;
  /** rel-list's link/unlink operations and relation-table probes during the timed reads. */
  listMaintenanceOps: number;
  listTableProbes: number;
}

export interface ReadOnlyCell {
  strategy: DropStrategy;
  nBuffers: number;
  targetHitRatio: number;
  dataSetBlocks: number;
  hitRatio: number;
  rounds: number;
  elapsedMsMedian: number;
  elapsedMsMin: number;
  elapsedMsMax: number;
  readsPerSec: number;
  allocationsPerSec: number;
  /** (elapsed − cached-lookup's elapsed) / cached-lookup's, medians of the same rounds; null for cached-lookup itself. */
  regressionVsCachedLookup: number | null;
  listMaintenanceOpsPerAllocation: number;
  listTableProbesPerAllocation: number;
}

function median(xs: number[]): number {
  const s = [...xs].sort((a, b) => a - b);
  const m = s.length >> 1;
  return s.length % 2 === 1 ? s[m]! : (s[m - 1]! + s[m]!) / 2;
}

/** One pool per strategy, warmed, timed chunk by chunk. */
class WarmPool {
  readonly pool: BufferPool;
  constructor(
    readonly strategy: DropStrategy,
    nBuffers: number,
    dataSetBlocks: number,
    warm: Int32Array,
  ) {
    this.pool = new BufferPool(nBuffers, poolOptionsFor({ ...DEFAULT_DROP_SETTINGS, strategy }));
    // Every block once (the pool ends up full of the last NBuffers), then random reads until the
    // usage counts settle.
    for (let b = 0; b < dataSetBlocks; b++) this.pool.accessBlock(REL, 0, b);
    for (let i = 0; i < warm.length; i++) this.pool.accessBlock(REL, 0, warm[i]!);
  }

  /** Time the reads of `chunk` in CPU ms (process user + system time). */
  run(chunk: Int32Array): Omit<ReadOnlyRun, 'targetHitRatio' | 'round' | 'strategy'> {
    const { pool } = this;
    const lists = pool.relationLists;
    const ops0 = lists?.maintenanceOps ?? 0;
    const probes0 = lists?.tableProbes ?? 0;
    const hits0 = pool.counters.hits;
    const misses0 = pool.counters.misses;
    // CPU time of this process, not wall time: the machine is shared, and a descheduled process
    // would otherwise charge other processes' work to whichever strategy was running.
    const c0 = process.cpuUsage();
    for (let i = 0; i < chunk.length; i++) pool.accessBlock(REL, 0, chunk[i]!);
    const c = process.cpuUsage(c0);
    return {
      elapsedMs: (c.user + c.system) / 1000,
      reads: chunk.length,
      hits: pool.counters.hits - hits0,
      allocations: pool.counters.misses - misses0,
      listMaintenanceOps: (lists?.maintenanceOps ?? 0) - ops0,
      listTableProbes: (lists?.tableProbes ?? 0) - probes0,
    };
  }
}

function blockSequence(rng: SeededRandom, n: number, dataSetBlocks: number): Int32Array {
  const out = new Int32Array(n);
  for (let i = 0; i < n; i++) out[i] = Math.floor(rng.float() * dataSetBlocks);
  return out;
}

/** Run the workload for every hit ratio and strategy; returns every run and the per-cell medians. */
export function measureReadOnly(o: ReadOnlyOptions): {
  runs: ReadOnlyRun[];
  cells: ReadOnlyCell[];
} {
  const runs: ReadOnlyRun[] = [];
  const cells: ReadOnlyCell[] = [];
  const total = o.hitRatios.length * o.strategies.length * (o.rounds + 2);
  let done = 0;
  for (const h of o.hitRatios) {
    if (!(h > 0 && h <= 1)) throw new RangeError(`hit ratio ${h} must be in (0, 1]`);
    const dataSetBlocks = Math.ceil(o.nBuffers / h);
    const rng = new SeededRandom(o.seed ?? 13);
    const warm = blockSequence(rng, 2 * o.nBuffers, dataSetBlocks);
    const pools = o.strategies.map((strategy) => {
      const p = new WarmPool(strategy, o.nBuffers, dataSetBlocks, warm);
      o.onMeasured?.(++done, total, `read-only h=${h} ${strategy} warm-up`);
      return p;
    });
    const byStrategy = new Map<DropStrategy, ReadOnlyRun[]>(o.strategies.map((s) => [s, []]));
    // Round 0 is a discarded warm-up of the timed loop (JIT); then every round reads a new chunk,
    // the same chunk on every pool, in an order rotated per round.
    for (let round = 0; round <= o.rounds; round++) {
      const chunk = blockSequence(rng, o.reads, dataSetBlocks);
      for (let i = 0; i < pools.length; i++) {
        const p = pools[(i + round) % pools.length]!;
        const r: ReadOnlyRun = { ...p.run(chunk), strategy: p.strategy, targetHitRatio: h, round };
        if (round > 0) {
          runs.push(r);
          byStrategy.get(p.strategy)!.push(r);
        }
        o.onMeasured?.(++done, total, `read-only h=${h} ${p.strategy} round ${round}/${o.rounds}`);
      }
    }
    const base = byStrategy.get('cached-lookup');
    for (const strategy of o.strategies) {
      const rs = byStrategy.get(strategy)!;
      const ms = rs.map((r) => r.elapsedMs);
      const med = median(ms);
      const allocations = rs.reduce((a, r) => a + r.allocations, 0);
      const reads = rs.reduce((a, r) => a + r.reads, 0);
      // Paired per round: X's time over cached-lookup's on the same chunk, minutes apart at most.
      const ratios =
        base && strategy !== 'cached-lookup'
          ? rs.map((r, k) => r.elapsedMs / base[k]!.elapsedMs)
          : null;
      cells.push({
        strategy,
        nBuffers: o.nBuffers,
        targetHitRatio: h,
        dataSetBlocks,
        hitRatio: rs.reduce((a, r) => a + r.hits, 0) / reads,
        rounds: rs.length,
        elapsedMsMedian: med,
        elapsedMsMin: Math.min(...ms),
        elapsedMsMax: Math.max(...ms),
        readsPerSec: o.reads / (med / 1000),
        allocationsPerSec: allocations / rs.length / (med / 1000),
        regressionVsCachedLookup: ratios === null ? null : median(ratios) - 1,
        listMaintenanceOpsPerAllocation:
          allocations > 0 ? rs.reduce((a, r) => a + r.listMaintenanceOps, 0) / allocations : 0,
        listTableProbesPerAllocation:
          allocations > 0 ? rs.reduce((a, r) => a + r.listTableProbes, 0) / allocations : 0,
      });
    }
  }
  return { runs, cells };
}

export interface StrategyMemory {
  strategy: DropStrategy;
  nBuffers: number;
  /** walsim's pool (descriptors + mapping table) bytes per buffer, the same for every strategy. */
  poolBytesPerBuffer: number;
  /** Bytes per buffer the strategy adds, and where. */
  addedBytesPerBuffer: number;
  addedBytes: number;
  where: string;
}

/** Memory each strategy adds to a pool of `nBuffers` (exact typed-array sizes, see rel-buffer-lists.ts). */
export function strategyMemory(
  nBuffers: number,
  strategies: readonly DropStrategy[],
): StrategyMemory[] {
  const pool = DESCRIPTOR_BYTES_PER_BUFFER * nBuffers + 4 * bufTableCapacity(nBuffers);
  return strategies.map((strategy) => {
    const lists =
      strategy === 'rel-list' || strategy === 'recovery-hash' ? relBufferListsBytes(nBuffers) : 0;
    const where =
      strategy === 'rel-list'
        ? 'shared memory, always (links + relation table sized for one relation per buffer)'
        : strategy === 'recovery-hash'
          ? "startup process's local memory, from its first drop until promotion"
          : strategy === 'cache-at-create'
            ? 'none per buffer (one more cached size per created fork)'
            : 'none';
    return {
      strategy,
      nBuffers,
      poolBytesPerBuffer: pool / nBuffers,
      addedBytesPerBuffer: lists / nBuffers,
      addedBytes: lists,
      where,
    };
  });
}
