/**
 * The primary role's part of a node's status (`NodeStatus` in server/node-status.ts): the
 * synchronous_commit level in force and the commits waiting for synchronous standbys.
 *
 * Entry points: `PrimaryStatus`, `primaryStatusOf`.
 */
import { formatLsn } from '../wal/lsn.ts';
import type { SynchronousCommit } from '../protocol/messages.ts';
import type { SyncRepQueue, SyncRepWaitMode } from './syncrep.ts';

/** A commit flushed here whose wait for the synchronous standby has not ended. */
export interface SyncWaitingCommit {
  xid: number;
  commitEndLsn: string;
  waitFor: SyncRepWaitMode;
  waitingMs: number;
}

export interface PrimaryStatus {
  role: 'primary';
  synchronousCommit: SynchronousCommit;
  /** Commits waiting in SyncRepWaitForLSN now. */
  syncWaiters: number;
  /**
   * The "locally committed, not (yet) replicated" window: these commits are durable here, and
   * other sessions do not see them until their wait ends.
   */
  syncWaitingCommits: SyncWaitingCommit[];
}

export function primaryStatusOf(
  syncRep: SyncRepQueue,
  synchronousCommit: SynchronousCommit,
  nowMs: number,
): PrimaryStatus {
  return {
    role: 'primary',
    synchronousCommit,
    syncWaiters: syncRep.waiting(),
    syncWaitingCommits: syncRep.waiters().map((w) => ({
      xid: w.xid,
      commitEndLsn: formatLsn(w.lsn),
      waitFor: w.mode,
      waitingMs: nowMs - w.sinceMs,
    })),
  };
}
