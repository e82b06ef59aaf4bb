/** Invariant checks: programmer errors, never caught below the process top level. */

export class InvariantViolation extends Error {
  constructor(message: string) {
    super(message);
    this.name = 'InvariantViolation';
  }
}

/** Throw an InvariantViolation when `condition` is false. Messages start with the invariant id. */
export function assert(condition: boolean, message: string): asserts condition {
  if (!condition) throw new InvariantViolation(message);
}

/**
 * Throw an InvariantViolation. For hot paths: `if (!cond) fail(`...${x}`)` builds the message only
 * when the invariant is broken, where `assert(cond, `...${x}`)` would build it on every call.
 */
export function fail(message: string): never {
  throw new InvariantViolation(message);
}
