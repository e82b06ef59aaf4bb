/**
 * Test-only switches that plant a known bug in the node core, so that a test can show the
 * simulator finds it (and replays it exactly). They are false everywhere else; nothing but
 * test/sim/injected-bug.test.ts and `npm run simulate -- --inject-bug NAME` sets them.
 */
export const injectedBugs = {
  /** Acknowledge synchronous_commit=remote_write commits without waiting for the standby's write. */
  ackRemoteWriteEarly: false,
  /** The lifecycle machine's openForWrites action (promotion) throws an Error. */
  lifecycleActionError: false,
  /** The lifecycle machine's openForWrites action (promotion) throws an InvariantViolation. */
  lifecycleActionInvariant: false,
};

export type InjectedBug = keyof typeof injectedBugs;
export const INJECTED_BUGS = Object.keys(injectedBugs) as InjectedBug[];
