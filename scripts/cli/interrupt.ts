/**
 * Ctrl-C (SIGINT) and SIGTERM for the long-running CLIs (sweep, calibrate, predict-bench): run the
 * registered clean-ups (stop the clusters the run started), then exit 130 — the shell's code for
 * "ended by SIGINT" — whatever else the run was doing at that moment.
 *
 * Why one module: the signal races the run's own failure. A server the clean-up stops mid-start
 * makes the run reject with "exited during start" while the clean-up is still stopping the others;
 * `runCli` asks `interrupted()` and leaves the exit to the clean-up, so the code is 130, never 1,
 * and no cluster is left running because the process exited half-way through the clean-up.
 */
import { exitWhenFlushed } from '../../server/process-exit.ts';

let interruptedBy: NodeJS.Signals | null = null;
const cleanups: Array<() => Promise<void>> = [];

/** Whether SIGINT or SIGTERM arrived (the clean-up then owns the process exit). */
export function interrupted(): boolean {
  return interruptedBy !== null;
}

/** Run `cleanup` on the first SIGINT or SIGTERM, before the process exits 130. */
export function onInterrupt(cleanup: () => Promise<void>): void {
  cleanups.push(cleanup);
  if (cleanups.length > 1) return;
  const onSignal = (signal: NodeJS.Signals) => {
    if (interruptedBy !== null) return; // a second Ctrl-C while cleaning up: keep cleaning up
    interruptedBy = signal;
    void (async () => {
      for (const c of cleanups) {
        try {
          await c();
        } catch (e) {
          console.error(`error: clean-up after ${signal}: ${(e as Error).message}`);
        }
      }
      await exitWhenFlushed(130);
    })();
  };
  process.on('SIGINT', onSignal);
  process.on('SIGTERM', onSignal);
}
