/**
 * One run of a sweep cell on real PostgreSQL: a fresh primary + standby (pg-cluster.ts) in its own
 * directory, the seed's steps (pg-steps.ts), the failover as a RunRecord, then the cluster is
 * stopped (immediate) and removed whatever happens.
 *
 * Entry points: `runPgCell`.
 */
import * as fs from 'node:fs';
import * as path from 'node:path';
import type { CellSpec, MeasuredRunRecord, SweepSettings } from '../experiment/sweep.ts';
import type { StepName } from '../experiment/steps.ts';
import { destroyPgCluster, initPgCluster } from './pg-cluster.ts';
import { runPgStep, type PgResumeResult } from './pg-steps.ts';

export async function runPgCell(cell: CellSpec, run: number, s: SweepSettings): Promise<MeasuredRunRecord> {
  fs.mkdirSync(s.workDir, { recursive: true });
  fs.chmodSync(s.workDir, 0o755); // the postgres OS user must reach the cluster directories
  const dir = fs.mkdtempSync(path.join(s.workDir, 'pg-cell-'));
  const stepMs: Record<string, number> = {};
  try {
    let t = performance.now();
    await initPgCluster(dir, { sharedBuffers: cell.sharedBuffers, primarySharedBuffers: s.primarySharedBuffers, pgBin: s.pgBin });
    stepMs.start = performance.now() - t;
    const workload = cell.kind === 'threshold' ? 'rel' : 'multi';
    const drop = cell.variant === 'vacuum' ? 'vacuum' : 'truncate';
    const steps: StepName[] = ['create', 'insert', ...(drop === 'vacuum' ? ['delete' as const] : []), 'pause', drop, 'stop', 'resume'];
    let r: PgResumeResult | null = null;
    for (const step of steps) {
      t = performance.now();
      const out = await runPgStep(step, {
        clusterDir: dir, workload, tables: cell.tables, waitSeconds: s.waitSeconds, toast: cell.variant === 'truncate-toast',
        size: cell.kind === 'threshold' ? String(cell.pagesPerTable) : undefined,
      });
      stepMs[step] = performance.now() - t;
      if (step === 'resume') r = out as PgResumeResult;
    }
    const res = r!;
    return {
      ...cell, run, failoverMs: res.failoverMs, replayMs: res.phases.replayMs, endOfRecoveryMs: res.phases.endOfRecoveryMs,
      openForWritesMs: res.phases.openForWritesMs, recordsReplayed: res.recordsReplayed,
      // PostgreSQL does not count its drops: not measured.
      dropMs: NaN, dropsFullScan: NaN, dropsCachedLookup: NaN, scanned: NaN, probes: NaN, invalidated: NaN,
      promoted: res.promoted, resumeAt: res.resumeAt, promotedAt: res.promotedAt, stepMs,
      seedMethodMs: res.seedMethod.ms, walBytes: res.waldump.total.combinedBytes, stall: res.stall,
    };
  } finally {
    await destroyPgCluster(dir);
  }
}
