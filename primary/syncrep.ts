/**
 * Synchronous replication waits (syncrep.c): a committing backend waits until the synchronous
 * standby has written / flushed / applied WAL past its commit record, as synchronous_commit says.
 * Waiters are kept per mode in LSN order and released when the standby's reply passes them.
 */
import { assert } from '../common/assert.ts';
import { WalsimError } from '../common/errors.ts';
import type { Lsn } from '../wal/lsn.ts';
import type { SynchronousCommit } from '../server/settings.ts';

export type SyncRepWaitMode = 'write' | 'flush' | 'apply';

/** Which standby position a commit waits for (SyncRepWaitMode in PostgreSQL). */
export function waitModeFor(level: SynchronousCommit): SyncRepWaitMode | null {
  switch (level) {
    case 'remote_write': return 'write';
    case 'on': return 'flush';
    case 'remote_apply': return 'apply';
    default: return null; // off, local: no remote wait
  }
}

interface Waiter { lsn: Lsn; resolve(): void; reject(e: Error): void }

export interface StandbyPositions { write: Lsn; flush: Lsn; apply: Lsn }

export class SyncRepQueue {
  private readonly queues: Record<SyncRepWaitMode, Waiter[]> = { write: [], flush: [], apply: [] };
  private released: StandbyPositions = { write: 0, flush: 0, apply: 0 };

  /**
   * synchronous_standby_names as a list of application names ('*' matches any). walsim supports
   * the simple list form: the first connected standby in the list is the synchronous one.
   */
  constructor(readonly standbyNames: string[]) {}

  static parseNames(text: string): string[] {
    const t = text.trim();
    if (t === '') return [];
    if (/^(FIRST|ANY)\s/i.test(t) || t.includes('(')) {
      throw new WalsimError('invalid_input', `synchronous_standby_names "${text}": walsim supports a plain comma-separated list of names`);
    }
    return t.split(',').map((s) => s.trim().replace(/^"(.*)"$/, '$1')).filter((s) => s.length > 0);
  }

  get enabled(): boolean {
    return this.standbyNames.length > 0;
  }

  /** Priority of a standby's application_name, or -1 if it is not a synchronous candidate. */
  priorityOf(applicationName: string): number {
    const i = this.standbyNames.findIndex((n) => n === '*' || n === applicationName);
    return i;
  }

  wait(lsn: Lsn, mode: SyncRepWaitMode): Promise<void> {
    const already = this.released[mode] >= lsn;
    if (already || !this.enabled) return Promise.resolve();
    return new Promise((resolve, reject) => {
      const q = this.queues[mode];
      // Commits arrive in LSN order in practice; insert sorted regardless.
      let i = q.length;
      while (i > 0 && q[i - 1]!.lsn > lsn) i--;
      q.splice(i, 0, { lsn, resolve, reject });
    });
  }

  /** The synchronous standby replied: release every waiter its positions cover. */
  release(pos: StandbyPositions): void {
    for (const mode of ['write', 'flush', 'apply'] as const) {
      const at = pos[mode];
      assert(Number.isSafeInteger(at), 'INV-SYNCREP-1: released position must be an integer LSN');
      if (at > this.released[mode]) this.released[mode] = at;
      const q = this.queues[mode];
      let n = 0;
      while (n < q.length && q[n]!.lsn <= at) n++;
      for (const w of q.splice(0, n)) w.resolve();
    }
  }

  /** The synchronous standby changed: new standby starts from its own positions. */
  resetReleased(pos: StandbyPositions): void {
    this.released = { ...pos };
    this.release(pos);
  }

  waiting(): number {
    return this.queues.write.length + this.queues.flush.length + this.queues.apply.length;
  }

  /** Shutdown: wake every waiter with an error (the commit is durable locally, not confirmed remotely). */
  cancelAll(err: Error): void {
    for (const q of Object.values(this.queues)) for (const w of q.splice(0)) w.reject(err);
  }
}
