/**
 * All walsenders of one node (WalSndCtl->walsnds): their slots, their synchronous priorities, the
 * release of waiting commits when replies arrive (SyncRepReleaseWaiters), configuration reloads of
 * synchronous_standby_names (SyncRepInitConfig in every walsender, SyncRepUpdateSyncStandbysDefined)
 * and the rows of pg_stat_replication.
 *
 * Entry points: `WalSenderSet` (`add`, `remove`, `startStreaming`, `onReply`, `reload`, `rows`,
 * `pumpAll`).
 *
 * Where walsim differs: PostgreSQL recomputes the synchronous set only when a synchronous
 * walsender processes a reply; walsim also recomputes when a walsender goes away or the
 * configuration is reloaded, so a potential standby that takes over releases what it has already
 * acknowledged at once instead of at its next status message (wal_receiver_status_interval).
 * The positions released are the same, only earlier.
 */
import { formatLsn, type Lsn } from '../wal/lsn.ts';
import type { SyncRepQueue } from './syncrep.ts';
import type { SyncRepConfig } from './sync-standby-names.ts';
import {
  acknowledgedBy,
  candidateStandbys,
  standbyPriority,
  syncStates,
  type SyncState,
  type WalSndState,
} from './sync-standbys.ts';
import type { WalSender } from './walsender.ts';

/**
 * One row of pg_stat_replication (the columns walsim has, sql/functions.ts
 * PG_STAT_REPLICATION_COLUMNS; LSNs NULL while unknown).
 */
export interface PgStatReplicationRow {
  application_name: string;
  state: WalSndState;
  sent_lsn: string | null;
  write_lsn: string | null;
  flush_lsn: string | null;
  replay_lsn: string | null;
  sync_priority: number;
  sync_state: SyncState;
  reply_time: string | null;
}

/**
 * One walsender past startup in a node's status (`NodeStatus.replication`): pg_stat_replication's
 * row with LSNs always formatted, and the lags in bytes behind this node's flush LSN.
 */
export interface ReplicationStatusRow {
  applicationName: string;
  state: WalSndState;
  sentLsn: string;
  writeLsn: string;
  flushLsn: string;
  replayLsn: string;
  writeLagBytes: number;
  flushLagBytes: number;
  replayLagBytes: number;
  syncPriority: number;
  syncState: SyncState;
  cascading: boolean;
  timelineEnds: number;
  replyTime: string | null;
}

const lsnOrNull = (lsn: number) => (lsn === 0 ? null : formatLsn(lsn));

export class WalSenderSet {
  /** The walsender array: a new walsender takes the lowest free slot (InitWalSenderSlot). */
  private readonly slots: Array<WalSender | null> = [];
  private configValue: SyncRepConfig | null;
  /** Walsenders already announced as synchronous (announce_next_takeover). */
  private readonly announced = new Set<WalSender>();

  constructor(
    private readonly queue: SyncRepQueue,
    config: SyncRepConfig | null,
    private readonly log: (message: string) => void,
  ) {
    this.configValue = config;
    queue.enabled = config !== null;
  }

  get config(): SyncRepConfig | null {
    return this.configValue;
  }

  /** Connected walsenders in slot order (the order of pg_stat_replication's rows). */
  senders(): WalSender[] {
    return this.slots.filter((s): s is WalSender => s !== null);
  }

  get size(): number {
    return this.senders().length;
  }

  add(sender: WalSender): void {
    let slot = this.slots.indexOf(null);
    if (slot < 0) slot = this.slots.push(null) - 1;
    this.slots[slot] = sender;
    sender.slot = slot;
  }

  remove(sender: WalSender): void {
    if (sender.slot >= 0 && this.slots[sender.slot] === sender) this.slots[sender.slot] = null;
    this.announced.delete(sender);
    this.release(undefined);
  }

  /** START_REPLICATION accepted: SyncRepInitConfig for this walsender. */
  startStreaming(sender: WalSender, cascading: boolean): void {
    sender.cascading = cascading;
    sender.priority = standbyPriority(this.configValue, sender.applicationName, cascading);
  }

  /** A status update arrived (SyncRepReleaseWaiters, not run by cascading walsenders). */
  onReply(sender: WalSender): void {
    if (sender.cascading) return;
    this.release(sender);
  }

  /** synchronous_standby_names reloaded: new priorities for every walsender, then release. */
  reload(config: SyncRepConfig | null): void {
    this.configValue = config;
    for (const s of this.senders())
      s.priority = standbyPriority(config, s.applicationName, s.cascading);
    this.announced.clear();
    if (config === null) {
      this.queue.releaseAll();
      return;
    }
    this.queue.enabled = true;
    this.release(undefined);
  }

  /**
   * The oldest WAL position a connected standby still needs: the lowest replay (apply) LSN a
   * walsender past startup holds, 0 (keep everything) until a reconnected standby has replied;
   * null when none is streaming. PostgreSQL keeps WAL for standbys only through replication slots
   * (from the flush position); walsim has no slots and keeps it for every connected standby from
   * its replay position, because a standby that finds a received record corrupt streams it again
   * from there (RELIABILITY.md). A paused but connected standby therefore holds back removal.
   */
  keepLsn(): Lsn | null {
    let keep: Lsn | null = null;
    for (const s of this.senders()) {
      if (s.state === 'startup') continue;
      if (keep === null || s.applyLsn < keep) keep = s.applyLsn;
    }
    return keep;
  }

  pumpAll(): void {
    for (const s of this.senders()) s.pump();
  }

  rows(): PgStatReplicationRow[] {
    const senders = this.senders();
    const states = syncStates(this.configValue, senders);
    return senders.map((s) => {
      const st = states.get(s)!;
      return {
        application_name: s.applicationName,
        state: s.state,
        sent_lsn: lsnOrNull(s.sentLsn),
        write_lsn: lsnOrNull(s.writeLsn),
        flush_lsn: lsnOrNull(s.flushLsn),
        replay_lsn: lsnOrNull(s.applyLsn),
        sync_priority: st.priority,
        sync_state: st.state,
        reply_time: s.replyTime,
      };
    });
  }

  /** Every walsender past startup, for status; lags are measured from `flushLsn` (this node's). */
  statusRows(flushLsn: Lsn): ReplicationStatusRow[] {
    const rows = this.rows();
    return this.senders().flatMap((s, i) => {
      const r = rows[i]!;
      if (s.state === 'startup') return [];
      return [
        {
          applicationName: s.applicationName,
          state: s.state,
          sentLsn: formatLsn(s.sentLsn),
          writeLsn: formatLsn(s.writeLsn),
          flushLsn: formatLsn(s.flushLsn),
          replayLsn: formatLsn(s.applyLsn),
          writeLagBytes: flushLsn - s.writeLsn,
          flushLagBytes: flushLsn - s.flushLsn,
          replayLagBytes: flushLsn - s.applyLsn,
          syncPriority: r.sync_priority,
          syncState: r.sync_state,
          cascading: s.cascading,
          timelineEnds: s.timelineEnds,
          replyTime: s.replyTime,
        },
      ];
    });
  }

  /** Compute what the synchronous set acknowledged and release those waiters; log takeovers. */
  private release(replier: WalSender | undefined): void {
    const cfg = this.configValue;
    if (cfg === null) return; // no synchronous standby named: nothing waits
    const senders = this.senders();
    const cands = candidateStandbys(cfg, senders);
    // A walsender that left the synchronous set is announced again when it returns.
    for (const s of this.announced) if (!cands.includes(s)) this.announced.delete(s);
    for (const s of cands) {
      if (this.announced.has(s)) continue;
      this.announced.add(s);
      this.log(
        cfg.method === 'priority'
          ? `LOG:  standby "${s.applicationName}" is now a synchronous standby with priority ${s.priority}`
          : `LOG:  standby "${s.applicationName}" is now a candidate for quorum synchronous standby`,
      );
    }
    const pos = acknowledgedBy(cfg, cands, replier);
    if (pos !== null) this.queue.release(pos);
  }
}
