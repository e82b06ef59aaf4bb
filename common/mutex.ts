/** A FIFO mutex for async work: runs one function at a time, in the order they were queued. */
export class Mutex {
  private tail: Promise<void> = Promise.resolve();
  private queuedOrRunning = 0;

  /** Run `fn` after every function queued before it has settled; its result or error is returned. */
  run<T>(fn: () => Promise<T>): Promise<T> {
    this.queuedOrRunning++;
    const result = this.tail.then(fn);
    this.tail = result.then(
      () => void this.queuedOrRunning--,
      () => void this.queuedOrRunning--,
    );
    return result;
  }

  /** Functions queued behind the one running now (0 when the mutex is free or nobody waits). */
  get waiting(): number {
    return Math.max(0, this.queuedOrRunning - 1);
  }
}
