/**
 * The exporter's cycle thread (a node:worker_threads worker): it runs the `Collector` — WAL
 * reading, window tallies, tail model, prediction — renders each finished cycle's series as
 * exposition text, and posts the text with the snapshot to the thread that answers scrapes
 * (cycle-host.ts), so that no part of a cycle, its rendering included, runs on the HTTP thread's
 * event loop: a scrape serves the posted text as it is. The collector's code is the one the
 * dashboard runs in-process.
 *
 * Entry points: `serveCycles`, `CYCLE_THREAD_NICE`, `CycleThreadData`, `CycleThreadMessage`.
 */
import * as fs from 'node:fs';
import * as os from 'node:os';
import { parentPort, workerData } from 'node:worker_threads';
import type { CostProfile } from '../../cost-model/profile.ts';
import { Collector, type CycleSnapshot, type PredictFn, type Target } from './collector.ts';
import { renderCycleMetrics } from './metrics.ts';
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

/** What a cycle thread posts: each finished cycle's snapshot and its series' text; log lines. */
export type CycleThreadMessage =
  { type: 'snapshot'; snapshot: CycleSnapshot; text: string } | { type: 'log'; line: string };

/** The cycle thread's nice value at least (Linux): below the HTTP thread's on a busy host. */
export const CYCLE_THREAD_NICE = 10;

/**
 * The cycle is background work: on Linux, where setpriority(2) takes a thread id, this thread's
 * nice value is raised to CYCLE_THREAD_NICE (never lowered), so that on a busy host the thread
 * answering scrapes gets a core first. Elsewhere nothing changes. Returns the nice value set.
 */
function yieldToTheHttpThread(): number | null {
  try {
    const tid = Number(fs.readlinkSync('/proc/thread-self').split('/').pop());
    if (!Number.isInteger(tid)) return null;
    os.setPriority(tid, Math.max(CYCLE_THREAD_NICE, os.getPriority(tid)));
    return os.getPriority(tid);
  } catch {
    return null;
  }
}

/** Run the cycle in this worker until it is terminated; `predict` replaced in tests only. */
export function serveCycles(predict?: PredictFn): Collector {
  if (!isCycleThread() || parentPort === null)
    throw new Error('serveCycles runs in a worker started by the exporter (cycle-host.ts)');
  const port = parentPort;
  const d = workerData as CycleThreadData;
  yieldToTheHttpThread();
  const post = (m: CycleThreadMessage) => port.postMessage(m);
  const info = { name: d.profile.name, ref: d.profileRef, profile: d.profile };
  // Rendered in cycle order; the snapshot copied first (the collector's statuses are live objects).
  let posted = Promise.resolve();
  const postCycle = (live: CycleSnapshot) => {
    const snapshot = structuredClone(live);
    posted = posted
      .then(() => renderCycleMetrics(snapshot, info))
      .then((text) => post({ type: 'snapshot', snapshot, text }));
  };
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
    onCycle: postCycle,
  });
  collector.start();
  return collector;
}
