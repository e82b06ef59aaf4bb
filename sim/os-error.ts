/**
 * The errors the simulated OS raises (a refused connection, ENOENT, ENOSPC): an Error with the
 * message Node's would have, and the `code` when it has one, without a stack trace. They are
 * routine — a node probes for files that may be missing, a standby reconnects to a dead primary
 * many times a seed — and capturing a stack for each was half a percent of a run; their origin
 * is the simulator, so a stack would tell nothing.
 */
export function osError(message: string, code?: string): Error & { code?: string } {
  const limit = Error.stackTraceLimit;
  Error.stackTraceLimit = 0;
  const e: Error & { code?: string } = new Error(message);
  Error.stackTraceLimit = limit;
  if (code !== undefined) e.code = code;
  return e;
}
