/**
 * pg_promote(wait, wait_seconds) (xlogfuncs.c): trigger promotion; with wait, poll 10 times a
 * second until the node is out of recovery (true) or wait_seconds pass (WARNING "server did not
 * promote within %d seconds", false). The wait ends on a cancel request with 57014.
 *
 * Entry points: `pgPromote`, `executePgPromote` (the SQL call's arguments and result).
 */
import type { Clock } from '../common/clock.ts';
import { WalsimError } from '../common/errors.ts';
import {
  refusalOf,
  type LifecycleEvent,
  type LifecycleSnapshot,
} from '../lifecycle/lifecycle-machine.ts';
import type { QueryResult } from '../protocol/messages.ts';

/** The node as pg_promote sees it: its lifecycle machine and its clock. */
export interface PromoteTarget {
  readonly lifecycle: { getSnapshot(): LifecycleSnapshot };
  readonly inRecovery: boolean;
  readonly clock: Clock;
  send(event: LifecycleEvent): void;
}

export async function pgPromote(
  node: PromoteTarget,
  wait: boolean,
  waitSeconds: number,
  signal: AbortSignal | undefined,
  log: (message: string) => void,
): Promise<boolean> {
  // xlogfuncs.c checks recovery first: pg_promote(true, 0) on a primary is 55000, not 22023.
  const refused = refusalOf(node.lifecycle.getSnapshot(), 'PROMOTE');
  if (refused) throw refused;
  if (!Number.isInteger(waitSeconds) || waitSeconds <= 0) {
    throw new WalsimError('invalid_input', '"wait_seconds" must not be negative or zero', '22023');
  }
  if (node.lifecycle.getSnapshot().matches('recovery')) node.send({ type: 'PROMOTE' });
  if (!wait) return true;
  for (let i = 0; i < waitSeconds * 10; i++) {
    if (!node.inRecovery) return true;
    if (signal?.aborted)
      throw new WalsimError('canceled', 'canceling statement due to user request', '57014');
    await node.clock.sleep(i === 0 ? 1 : 100);
  }
  log(`WARNING:  server did not promote within ${waitSeconds} seconds`);
  return false;
}

/** SELECT pg_promote(wait, wait_seconds): its arguments checked, its one-row result. */
export async function executePgPromote(
  args: ReadonlyArray<number | boolean | string>,
  promote: (wait: boolean, waitSeconds: number) => Promise<boolean>,
): Promise<QueryResult> {
  const [wait = true, waitSeconds = 60] = args;
  if (typeof wait !== 'boolean' || typeof waitSeconds !== 'number') {
    throw new WalsimError(
      'invalid_input',
      'function pg_promote takes (wait boolean, wait_seconds integer)',
      '42883',
    );
  }
  return {
    command: 'SELECT 1',
    columns: ['pg_promote'],
    rows: [{ pg_promote: await promote(wait, waitSeconds) }],
  };
}
