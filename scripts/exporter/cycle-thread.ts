/**
 * The exporter's cycle thread (a node:worker_threads worker): it runs the `Collector` — WAL
 * reading, window tallies, tail model, prediction — and posts each finished cycle's snapshot to
 * the thread that answers scrapes (cycle-host.ts), so that no part of a cycle runs on the HTTP
 * thread's event loop. The collector's code is the one the dashboard runs in-process.
 *
 * Entry points: `serveCycles`, `CycleThreadData`, `CycleThreadMessage`.
 */
import { parentPort, workerData } from 'node:worker_threads';
import type { CostProfile } from '../../cost-model/profile.ts';
import { Collector, type CycleSnapshot, type PredictFn, type Target } from './collector.ts';
import { CYCLE_THREAD_MARK, isCycleThread } from './thread-mark.ts';

/** What the host gives a cycle thread (structured-cloned). */
export interface CycleThreadData {
  mark: typeof CYCLE_THREAD_MARK;
  targets: Target[];
  primary?: string;
  profile: CostProfile;
  profileRef: string;
  intervalMs: number;
  /** The previous thread's last snapshot, to count on from (counters stay monotonic). */
  carry?: CycleSnapshot;
  /** How many cycle threads ran before this one. */
  generation: number;
  /** Whatever a replacement entry (`CycleHostOptions.entry`, tests) needs; unused here. */
  extra?: unknown;
}

/** What a cycle thread posts. */
export type CycleThreadMessage =
  { type: 'snapshot'; snapshot: CycleSnapshot } | { type: 'log'; line: string };

/** Run the cycle in this worker until it is terminated; `predict` replaced in tests only. */
export function serveCycles(predict?: PredictFn): Collector {
  if (!isCycleThread() || parentPort === null)
    throw new Error('serveCycles runs in a worker started by the exporter (cycle-host.ts)');
  const port = parentPort;
  const d = workerData as CycleThreadData;
  const post = (m: CycleThreadMessage) => port.postMessage(m);
  const collector = new Collector({
    targets: d.targets,
    primary: d.primary,
    profile: d.profile,
    profileRef: d.profileRef,
    intervalMs: d.intervalMs,
    predict,
    carry: d.carry,
    onError: (s) =>
      post({
        type: 'log',
        line: `walsim exporter: ${s.target.label}: ${s.lastError!.reason}: ${s.lastError!.message}`,
      }),
    onCycle: (snapshot) => post({ type: 'snapshot', snapshot }),
  });
  collector.start();
  return collector;
}
