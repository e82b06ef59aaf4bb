/**
 * The samplers' bound on one request (INV-DASH-3): a node that does not answer within
 * `SAMPLE_TIMEOUT_MS` is `unreachable`, and its loop goes on (a stopped-but-not-dead process, a
 * SIGSTOPped backend, a network that drops packets never hold the dashboard).
 *
 * Entry points: `answerWithin`, `SAMPLE_TIMEOUT_MS`.
 */
export const SAMPLE_TIMEOUT_MS = 5_000;

/** `p`, or a rejection naming `what` after `ms`. */
export function answerWithin<T>(p: Promise<T>, what: string, ms = SAMPLE_TIMEOUT_MS): Promise<T> {
  return new Promise((resolve, reject) => {
    const t = setTimeout(() => reject(new Error(`${what}: no answer within ${ms} ms`)), ms);
    p.then(
      (v) => (clearTimeout(t), resolve(v)),
      (e: unknown) => (clearTimeout(t), reject(e instanceof Error ? e : new Error(String(e)))),
    );
  });
}
