/**
 * The strategy lab (`npm run sweep -- strategies`): every drop strategy of storage/drop.ts on seed
 * 001's Test B failover — measured and modeled — and on the ordinary buffer path it would tax.
 *
 * Entry points: `STRATEGY_WORKLOADS`, `runStrategyFailovers`, `StrategyFailoverCell`.
 *
 * Failover: for each shared_buffers and workload, one in-process primary (the executor,
 * primary/executor.ts) feeds one standby per strategy in lockstep (scripts/experiment/in-process.ts:
 * every record framed by the real encoder and replayed through storage/redo.ts's one replay entry
 * point). The standbys differ only in their drop strategy, so they replay the very same WAL. The
 * span from the pause point (after create, insert and, for VACUUM, delete) to the end is:
 *   - measured: wall time of each standby's own replay of the span (this process, JavaScript);
 *   - modeled: the span's exact counts priced by a cost profile (cost-model), plus the
 *     end-of-recovery and open-for-writes steps of a promotion — PostgreSQL seconds.
 * The measured column is replay only, in one process: no WAL streaming, no promotion. The real
 * two-process failover of full-scan and cached-lookup is `npm run sweep -- multi`.
 *
 * Workloads (seed 001 test.sh, `tables` one-block tables): `vacuum` (DELETE then VACUUM each table:
 * one DropRelFileNodeBuffers per table), `truncate` (TRUNCATE each: one
 * DropRelFileNodesAllBuffers per table), and their TOAST-like twins, whose tables have a text
 * column: PostgreSQL gives them a TOAST table (created, never written — replay never caches its
 * size) and a TOAST index, so each TRUNCATE drops three relfilenodes.
 */
import type { DropStrategy } from '../../storage/drop.ts';
import { DROP_PATHS, type DropPath } from '../../storage/drop.ts';
import {
  diffReplayCounts,
  promotionStepCounts,
  type FailoverCounts,
} from '../../storage/replay-counts.ts';
import { price } from '../../cost-model/price.ts';
import type { CostProfile } from '../../cost-model/profile.ts';
import { NodeStorage } from '../../storage/node-storage.ts';
import { parseSharedBuffers } from '../../storage/shared-buffers.ts';
import { InProcessCluster } from '../experiment/in-process.ts';
import { tableNames } from '../experiment/state.ts';

export type StrategyWorkload = 'vacuum' | 'vacuum-toast' | 'truncate' | 'truncate-toast';
export const STRATEGY_WORKLOADS: readonly StrategyWorkload[] = [
  'vacuum',
  'vacuum-toast',
  'truncate',
  'truncate-toast',
];

export const WORKLOAD_TITLES: Record<StrategyWorkload, string> = {
  vacuum: 'VACUUM, int-only tables',
  'vacuum-toast': 'VACUUM, TOAST-like tables',
  truncate: 'TRUNCATE, int-only tables',
  'truncate-toast': 'TRUNCATE, TOAST-like tables (3 relfilenodes each)',
};

export interface StrategyFailoverRun {
  sharedBuffers: string;
  nBuffers: number;
  workload: StrategyWorkload;
  strategy: DropStrategy;
  tables: number;
  run: number;
  /** Measured: this standby's replay of the span, ms (wall clock, in-process). */
  replayMs: number;
  /** Measured: busy time inside buffer drops during the span, ms. */
  dropMs: number;
  /** Modeled PostgreSQL seconds (resume → read-write) and what the profile's poll would show. */
  modeledS: number;
  modeledPolledS: number | null;
  modeledReplayS: number;
  records: number;
  drops: Record<DropPath, number>;
  scanned: number;
  hashBuildScanned: number;
  probes: number;
  listSteps: number;
  invalidated: number;
}

export interface StrategyFailoverCell extends Omit<
  StrategyFailoverRun,
  'run' | 'replayMs' | 'dropMs'
> {
  runs: number;
  replayMsMedian: number;
  dropMsMedian: number;
}

function statements(
  workload: StrategyWorkload,
  tables: number,
): { before: string[]; failover: string[] } {
  const names = tableNames('multi', tables);
  const toast = workload.endsWith('-toast');
  const vacuum = workload.startsWith('vacuum');
  return {
    before: [
      ...names.map((n) =>
        toast ? `CREATE TABLE ${n} (c int, d text)` : `CREATE TABLE ${n} (c int)`,
      ),
      ...names.map((n) => `INSERT INTO ${n} SELECT generate_series(1, 1)`),
      ...(vacuum ? names.map((n) => `DELETE FROM ${n}`) : []),
    ],
    failover: names.map((n) => `${vacuum ? 'VACUUM' : 'TRUNCATE'} ${n}`),
  };
}

function median(xs: number[]): number {
  const s = [...xs].sort((a, b) => a - b);
  const m = s.length >> 1;
  return s.length % 2 === 1 ? s[m]! : (s[m - 1]! + s[m]!) / 2;
}

export interface StrategyFailoverOptions {
  sharedBuffers: string[];
  workloads: StrategyWorkload[];
  strategies: DropStrategy[];
  tables: number;
  runs: number;
  thresholdDivisor: number;
  profile: CostProfile;
  onProgress?: (done: number, total: number, label: string) => void;
}

/** One workload at one size, every strategy in lockstep; returns one run per strategy. */
async function runGroup(
  sb: string,
  workload: StrategyWorkload,
  o: StrategyFailoverOptions,
  run: number,
): Promise<StrategyFailoverRun[]> {
  const { nBuffers } = parseSharedBuffers(sb);
  const standbys = o.strategies.map((strategy) =>
    NodeStorage.create(nBuffers, {
      strategy,
      thresholdDivisor: o.thresholdDivisor,
      forceOptimized: false,
    }),
  );
  const cluster = new InProcessCluster(standbys);
  const { before, failover } = statements(workload, o.tables);
  await cluster.run(before);
  cluster.frameRecords = true;
  const atPause = cluster.snapshot();
  const dropMs0 = standbys.map((s) => DROP_PATHS.reduce((a, p) => a + s.dropBusyMs[p], 0));
  cluster.replayMs = standbys.map(() => 0);
  await cluster.run(failover);
  const replayMs = cluster.replayMs;
  cluster.replayMs = null;
  const atEnd = cluster.snapshot();
  return o.strategies.map((strategy, j) => {
    const replay = diffReplayCounts(atPause[j]!, atEnd[j]!);
    const counts: FailoverCounts = { replay, ...promotionStepCounts() };
    const m = price({ counts, nBuffers }, o.profile);
    const d = replay.drops;
    const st = standbys[j]!;
    return {
      sharedBuffers: sb,
      nBuffers,
      workload,
      strategy,
      tables: o.tables,
      run,
      replayMs: replayMs[j]!,
      dropMs: DROP_PATHS.reduce((a, p) => a + st.dropBusyMs[p], 0) - dropMs0[j]!,
      modeledS: m.failoverS,
      modeledPolledS: m.polledS,
      modeledReplayS: m.phases.replayS,
      records: Object.values(replay.records).reduce((a: number, n) => a + (n ?? 0), 0),
      drops: { ...d.drops },
      scanned: d.scannedByMatcher.single + d.scannedByMatcher.linear + d.scannedByMatcher.bsearch,
      hashBuildScanned: d.hashBuildScanned,
      probes: d.probes,
      listSteps: d.listSteps,
      invalidated: d.invalidated,
    };
  });
}

/** Every (shared_buffers, workload) group `runs` times; runs and per-cell medians in plan order. */
export async function runStrategyFailovers(
  o: StrategyFailoverOptions,
): Promise<{ runs: StrategyFailoverRun[]; cells: StrategyFailoverCell[] }> {
  const runs: StrategyFailoverRun[] = [];
  const total = o.sharedBuffers.length * o.workloads.length * o.runs;
  let done = 0;
  for (let run = 1; run <= o.runs; run++) {
    for (const sb of o.sharedBuffers) {
      for (const workload of o.workloads) {
        o.onProgress?.(
          done,
          total,
          `s_b=${sb} ${o.tables} tables ${workload}${o.runs > 1 ? ` run ${run}/${o.runs}` : ''}`,
        );
        runs.push(...(await runGroup(sb, workload, o, run)));
        done++;
      }
    }
  }
  o.onProgress?.(done, total, 'failovers done');
  const cells: StrategyFailoverCell[] = [];
  for (const sb of o.sharedBuffers) {
    for (const workload of o.workloads) {
      for (const strategy of o.strategies) {
        const rs = runs.filter(
          (r) => r.sharedBuffers === sb && r.workload === workload && r.strategy === strategy,
        );
        const { run: _run, replayMs: _r, dropMs: _d, ...first } = rs[0]!;
        cells.push({
          ...first,
          runs: rs.length,
          replayMsMedian: median(rs.map((r) => r.replayMs)),
          dropMsMedian: median(rs.map((r) => r.dropMs)),
        });
      }
    }
  }
  return { runs, cells };
}
