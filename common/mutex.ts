/** A FIFO mutex for async work: runs one function at a time, in the order they were queued. */
export class Mutex {
  private tail: Promise<void> = Promise.resolve();

  /** Run `fn` after every function queued before it has settled; its result or error is returned. */
  run<T>(fn: () => Promise<T>): Promise<T> {
    const result = this.tail.then(fn);
    this.tail = result.then(
      () => undefined,
      () => undefined,
    );
    return result;
  }
}
