/**
 * The one way a walsim process exits once it may have written output: `exitWhenFlushed`.
 *
 * Why: on Linux, Node writes to a pipe without blocking; what the pipe cannot take at once (its
 * 64 KiB buffer, when the reader is slower than the writer) waits in the stream's queue, and
 * `process.exit` drops that queue. A `--json` object piped into `jq` or `grep` arrived cut at 64 KiB.
 * Waiting for stdout and stderr to hand every queued byte to the kernel first makes the output
 * whole, as a C program's exit() flushes stdio. Files and terminals are written synchronously, so
 * the wait costs nothing there.
 *
 * Entry points: `exitWhenFlushed`, `flushed`.
 */

/**
 * Resolve once everything written to `stream` so far has been handed to the OS (or the stream
 * failed: a reader that went away loses the rest, as with any program). Not bounded in time: a
 * reader that stops reading holds the writer, as it would hold `cat`.
 */
export function flushed(stream: NodeJS.WriteStream): Promise<void> {
  if (stream.destroyed || stream.writableEnded || stream.writableLength === 0)
    return Promise.resolve();
  return new Promise((resolve) => {
    const done = () => {
      stream.off('error', done);
      stream.off('close', done);
      resolve();
    };
    // EPIPE (the reader exited) must not become an uncaught 'error' while we wait.
    stream.once('error', done);
    stream.once('close', done);
    // An empty write queues behind every earlier chunk: its callback runs after they are written.
    stream.write('', () => done());
  });
}

/** Exit with `code` once stdout and stderr are flushed. Never resolves (the process ends). */
export async function exitWhenFlushed(code: number): Promise<never> {
  process.exitCode = code;
  await Promise.all([flushed(process.stdout), flushed(process.stderr)]);
  process.exit(code);
}
