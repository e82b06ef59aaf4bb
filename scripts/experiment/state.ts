/**
 * What the step scripts remember between runs: which tables `create` made, what `insert` put in
 * them, whether `delete` and `vacuum`/`truncate` ran. Kept in `<cluster dir>/experiment.json`,
 * one entry per workload (`rel`, `multi`), whatever the engine; everything else (is the primary
 * running, is replay paused, is the standby promoted) is read from the cluster itself when a step
 * runs.
 */
import * as fs from 'node:fs';
import * as path from 'node:path';
import { writeFileAtomic } from '../../server/cluster-files.ts';
import { nodeDisk } from '../../common/node-disk.ts';
import type { Workload } from '../engines/engine.ts';

export interface WorkloadState {
  tables: number;
  /** Pages per table inserted by `insert`; null before it. */
  pagesPerTable: number | null;
  /** The size as given to `insert` (rel), e.g. `NB/32`. */
  sizeSpec: string | null;
  rowsPerTable: number | null;
  deleted: boolean;
  /** The drop step that ran while replay was paused. */
  dropStep: 'vacuum' | 'truncate' | null;
  /**
   * The standby's replay LSN when `pause` paused it, and the primary's flush LSN the standby had
   * flushed when `stop` stopped the primary: the WAL replayed at failover (PostgreSQL's resume
   * step runs pg_waldump over it). Null before those steps (and in files written before them).
   */
  pauseLsn?: string | null;
  endLsn?: string | null;
}

type StateFile = Partial<Record<Workload, WorkloadState>>;

export function stateFilePath(clusterDir: string): string {
  return path.join(clusterDir, 'experiment.json');
}

function readAll(clusterDir: string): StateFile {
  const p = stateFilePath(clusterDir);
  if (!fs.existsSync(p)) return {};
  try {
    return JSON.parse(fs.readFileSync(p, 'utf8')) as StateFile;
  } catch {
    return {};
  }
}

export function readWorkloadState(clusterDir: string, workload: Workload): WorkloadState | null {
  return readAll(clusterDir)[workload] ?? null;
}

export function writeWorkloadState(
  clusterDir: string,
  workload: Workload,
  state: WorkloadState,
): void {
  const all = readAll(clusterDir);
  all[workload] = state;
  writeFileAtomic(stateFilePath(clusterDir), JSON.stringify(all, null, 2) + '\n', nodeDisk);
}

/** Table names of a workload: `rel_t` for the single relation, `multi_t1 … multi_tN`. */
export function tableNames(workload: Workload, tables: number): string[] {
  if (workload === 'rel') return ['rel_t'];
  return Array.from({ length: tables }, (_, i) => `multi_t${i + 1}`);
}
