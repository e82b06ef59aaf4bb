/**
 * The one polling loop: call a check until it says yes or a deadline passes. Every wait of the
 * process shell goes through it — pg_ctl's start and stop, the topology waits (streaming,
 * switchover's catch-up), the cluster handle (tests, torture runner), the cluster lock, and the
 * experiment scripts (walsim and PostgreSQL engines).
 *
 * Entry points: `pollUntil`, `StopPolling`.
 */

/**
 * A check failed in a way that waiting cannot fix: `pollUntil` rethrows it at once — or, when it
 * was built around an error (`new StopPolling(err)`), throws that error, so a caller's own error
 * kind (a WalsimError with its SQLSTATE) passes through unchanged.
 */
export class StopPolling extends Error {
  readonly error: Error | null;
  constructor(reason: string | Error) {
    super(typeof reason === 'string' ? reason : reason.message);
    this.error = typeof reason === 'string' ? null : reason;
  }
}

/**
 * Poll `fn` until true, every `intervalMs`. Errors thrown by fn count as "not yet", except
 * StopPolling. At the deadline it throws `onTimeout(lastError)` when given, else an Error naming
 * `what` and the last error fn threw.
 */
export async function pollUntil(
  fn: () => Promise<boolean>,
  what: string,
  timeoutMs: number,
  intervalMs = 25,
  onTimeout?: (lastError: Error | null) => Error,
): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  let last: Error | null = null;
  while (Date.now() < deadline) {
    try {
      if (await fn()) return;
    } catch (e) {
      if (e instanceof StopPolling) throw e.error ?? e;
      last = e as Error;
    }
    await new Promise((r) => setTimeout(r, intervalMs));
  }
  if (onTimeout) throw onTimeout(last);
  throw new Error(
    `timed out after ${timeoutMs} ms waiting for ${what}${last ? ` (last error: ${last.message})` : ''}`,
  );
}
