/**
 * The one polling loop: call a check until it says yes or a deadline passes. Used by the cluster
 * handle (tests, torture runner) and by the experiment scripts (walsim and PostgreSQL engines).
 *
 * Entry points: `pollUntil`, `StopPolling`.
 */

/** A check failed in a way that waiting cannot fix: `pollUntil` rethrows it at once. */
export class StopPolling extends Error {}

/** Poll `fn` until true. Errors thrown by fn count as "not yet", except StopPolling. */
export async function pollUntil(
  fn: () => Promise<boolean>,
  what: string,
  timeoutMs: number,
  intervalMs = 25,
): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  let last: unknown = null;
  while (Date.now() < deadline) {
    try {
      if (await fn()) return;
    } catch (e) {
      if (e instanceof StopPolling) throw e;
      last = e;
    }
    await new Promise((r) => setTimeout(r, intervalMs));
  }
  throw new Error(
    `timed out after ${timeoutMs} ms waiting for ${what}${last ? ` (last error: ${(last as Error).message})` : ''}`,
  );
}
