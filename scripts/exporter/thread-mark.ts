/**
 * How a module knows it runs as the exporter's cycle thread (cycle-host.ts starts it with this
 * mark in workerData). A module of its own, without imports of walsim's, so that the packed
 * bundle's entry (walsim.ts) can look for the mark before loading any command.
 *
 * Entry points: `CYCLE_THREAD_MARK`, `isCycleThread`.
 */
import { isMainThread, workerData } from 'node:worker_threads';

/** workerData's `mark` of a cycle thread. */
export const CYCLE_THREAD_MARK = 'walsim-exporter-cycle-thread';

/** True in a worker started by cycle-host.ts. */
export function isCycleThread(): boolean {
  return (
    !isMainThread &&
    typeof workerData === 'object' &&
    workerData !== null &&
    (workerData as { mark?: unknown }).mark === CYCLE_THREAD_MARK
  );
}
