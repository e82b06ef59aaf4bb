/**
 * Synchronous replication waits (syncrep.c): a committing backend waits until the synchronous
 * standbys have written / flushed / applied WAL past its commit record, as synchronous_commit says.
 * Waiters are kept per mode in LSN order and released when the synchronous set's acknowledged
 * positions (primary/sync-standbys.ts) pass them.
 *
 * While a transaction waits here its commit record is flushed and CLOG says committed, but other
 * sessions must still see it as in progress (PostgreSQL removes it from the proc array only after
 * the wait, in ProcArrayEndTransaction): `waitingXids()` is that set. A wait ends in one of three
 * ways: released by the synchronous set's acknowledgement; cancelled by the user (`cancel`: a
 * WARNING, the commit returns normally); or terminated by a fast shutdown (`terminateAll`: a
 * WARNING with SQLSTATE 57P01, and the connection ends). After a cancellation the rows are
 * visible; they may never have reached the standby (the "locally committed, not replicated" window).
 */
import { assert } from '../common/assert.ts';
import { WalsimError } from '../common/errors.ts';
import { injectedBugs } from '../common/injected-bugs.ts';
import type { Lsn } from '../wal/lsn.ts';
import type { Notice, SynchronousCommit } from '../protocol/messages.ts';

export type SyncRepWaitMode = 'write' | 'flush' | 'apply';

/** Which standby position a commit waits for (SyncRepWaitMode in PostgreSQL). */
export function waitModeFor(level: SynchronousCommit): SyncRepWaitMode | null {
  switch (level) {
    case 'remote_write':
      return 'write';
    case 'on':
      return 'flush';
    case 'remote_apply':
      return 'apply';
    default:
      return null; // off, local: no remote wait
  }
}

/** PostgreSQL's DETAIL for every cancelled or terminated wait (syncrep.c SyncRepWaitForLSN). */
export const SYNC_REP_CANCEL_DETAIL =
  'The transaction has already committed locally, but might not have been replicated to the standby.';

export type { Notice };

/** The user cancelled the wait: the commit stands and returns, with this WARNING (SQLSTATE 01000). */
export const SYNC_REP_USER_CANCEL: Notice = {
  severity: 'WARNING',
  code: '01000',
  message: 'canceling wait for synchronous replication due to user request',
  detail: SYNC_REP_CANCEL_DETAIL,
};

/**
 * A fast shutdown terminated the wait. PostgreSQL sends this as a WARNING (ERRCODE_ADMIN_SHUTDOWN)
 * and then closes the connection without a command tag: the client never sees the commit
 * acknowledged. walsim answers the request with this error (severity WARNING) and closes.
 */
export class SyncRepTerminated extends WalsimError {
  readonly severity = 'WARNING';
  constructor() {
    super(
      'shutting_down',
      'canceling the wait for synchronous replication and terminating connection due to administrator command',
      '57P01',
      SYNC_REP_CANCEL_DETAIL,
    );
  }
}

interface Waiter {
  lsn: Lsn;
  xid: number;
  mode: SyncRepWaitMode;
  sinceMs: number;
  resolve(n: Notice | null): void;
  reject(e: Error): void;
}

/** One waiting commit, for status. */
export interface SyncRepWaiterInfo {
  xid: number;
  lsn: Lsn;
  mode: SyncRepWaitMode;
  sinceMs: number;
}

export interface StandbyPositions {
  write: Lsn;
  flush: Lsn;
  apply: Lsn;
}

export class SyncRepQueue {
  private readonly queues: Record<SyncRepWaitMode, Waiter[]> = { write: [], flush: [], apply: [] };
  private released: StandbyPositions = { write: 0, flush: 0, apply: 0 };
  private readonly waitingXidSet = new Set<number>();
  private terminated = false;

  /**
   * sync_standbys_defined: synchronous_standby_names is set. While false, commits do not wait
   * (SyncRepWaitForLSN's fast exit); the walsender set keeps it in step with the configuration.
   */
  enabled = true;

  constructor(
    /** Wall clock for the waiters' start times (the node's injected clock). */
    private readonly now: () => number,
  ) {}

  /**
   * Wait until the synchronous standby's `mode` position reaches `lsn` (the end of transaction
   * `xid`'s commit record). Resolves with null when released, or with the WARNING when the user
   * cancelled the wait; rejects with SyncRepTerminated when a fast shutdown ended it (also at once
   * once the shutdown began).
   */
  wait(lsn: Lsn, mode: SyncRepWaitMode, xid = 0): Promise<Notice | null> {
    if (this.terminated) return Promise.reject(new SyncRepTerminated());
    if (injectedBugs.ackRemoteWriteEarly && mode === 'write') return Promise.resolve(null); // test-only planted bug
    const already = this.released[mode] >= lsn;
    if (already || !this.enabled) return Promise.resolve(null);
    return new Promise((resolve, reject) => {
      const q = this.queues[mode];
      // Commits arrive in LSN order in practice; insert sorted regardless.
      let i = q.length;
      while (i > 0 && q[i - 1]!.lsn > lsn) i--;
      q.splice(i, 0, { lsn, xid, mode, sinceMs: this.now(), resolve, reject });
      if (xid !== 0) this.waitingXidSet.add(xid);
    });
  }

  /** Transactions whose commit waits here: other sessions treat them as in progress. */
  waitingXids(): ReadonlySet<number> {
    return this.waitingXidSet;
  }

  /** The waiting commits, oldest LSN first within each mode. */
  waiters(): SyncRepWaiterInfo[] {
    return Object.values(this.queues)
      .flat()
      .map(({ xid, lsn, mode, sinceMs }) => ({ xid, lsn, mode, sinceMs }));
  }

  private finish(w: Waiter): Waiter {
    this.waitingXidSet.delete(w.xid);
    return w;
  }

  /** The user cancels transaction `xid`'s wait: it returns with the WARNING. False if not waiting. */
  cancel(xid: number): boolean {
    for (const q of Object.values(this.queues)) {
      const i = q.findIndex((w) => w.xid === xid);
      if (i >= 0) {
        this.finish(q.splice(i, 1)[0]!).resolve(SYNC_REP_USER_CANCEL);
        return true;
      }
    }
    return false;
  }

  /**
   * Fast shutdown: end every wait with SyncRepTerminated, and every later one at once. Runs first
   * in a shutdown, so that the sessions holding the write lock let go of it.
   */
  terminateAll(): void {
    this.terminated = true;
    for (const q of Object.values(this.queues))
      for (const w of q.splice(0)) this.finish(w).reject(new SyncRepTerminated());
  }

  /**
   * The synchronous set acknowledged `pos` (computed by sync-standbys.ts): release every waiter
   * these positions cover. The released positions only move forward (WalSndCtl->lsn[mode]).
   */
  release(pos: StandbyPositions): void {
    for (const mode of ['write', 'flush', 'apply'] as const) {
      const at = pos[mode];
      assert(Number.isSafeInteger(at), 'INV-SYNCREP-1: released position must be an integer LSN');
      if (at > this.released[mode]) this.released[mode] = at;
      const q = this.queues[mode];
      let n = 0;
      while (n < q.length && q[n]!.lsn <= at) n++;
      for (const w of q.splice(0, n)) this.finish(w).resolve(null);
    }
  }

  /**
   * synchronous_standby_names became empty (SyncRepUpdateSyncStandbysDefined): nothing is waited
   * for any more, so every waiter is woken as released.
   */
  releaseAll(): void {
    this.enabled = false;
    for (const q of Object.values(this.queues))
      for (const w of q.splice(0)) this.finish(w).resolve(null);
  }

  waiting(): number {
    return this.queues.write.length + this.queues.flush.length + this.queues.apply.length;
  }
}
