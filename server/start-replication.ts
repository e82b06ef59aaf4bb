/**
 * A replication connection accepted by the node (walsender.c): the walsender that streams this
 * node's WAL to it — on a primary, or a cascading walsender on a standby streaming what this node
 * has received and flushed (never synchronous) — and the node's checks of START_REPLICATION once
 * the walsender's own timeline checks passed (StartReplication, CheckXLogRemoved).
 *
 * Entry points: `acceptWalSender`, `checkStartReplication`, `startSegmentRemoved`,
 * `ReplicationSource`.
 */
import type { MessageConn } from '../common/transport.ts';
import { injectedBugs } from '../common/injected-bugs.ts';
import type { Clock } from '../common/clock.ts';
import type { Disk } from '../common/disk.ts';
import { formatLsn, type Lsn, type TimeLineId } from '../wal/lsn.ts';
import { readTimelineHistory, segmentOf, type TimelineHistoryEntry } from '../wal/segment.ts';
import { walSegmentRemovedMessage, type WalReadOptions } from '../wal/wal-reader.ts';
import { WalSender } from '../primary/walsender.ts';
import type { WalSenderSet } from '../primary/walsender-set.ts';
import type { StopMode } from '../protocol/messages.ts';
import type { Checkpointer } from './checkpointer.ts';
import type { NodeConfig } from './node-config.ts';

/** What a walsender and START_REPLICATION's checks read of the node. */
export interface ReplicationSource {
  readonly dataDir: string;
  readonly clock: Clock;
  readonly disk: Disk;
  readonly config: NodeConfig;
  readonly wal: { readonly flushLsn: Lsn; readonly writeLsn: Lsn };
  readonly timeline: TimeLineId;
  readonly inRecovery: boolean;
  readonly shuttingDown: StopMode | null;
  readonly walsenders: WalSenderSet;
  readonly checkpointer: Pick<Checkpointer, 'lastRemovedSegno'>;
  history(): readonly TimelineHistoryEntry[];
  readOptions(): WalReadOptions;
}

/** A walsender for `conn`, added to the node's set. */
export function acceptWalSender(
  node: ReplicationSource,
  conn: MessageConn,
  log: (message: string) => void,
): void {
  const sender = new WalSender(conn, {
    dataDir: node.dataDir,
    clock: node.clock,
    // (The planted bug of common/injected-bugs.ts lets a cascading walsender send written WAL.)
    flushedLsn: () =>
      injectedBugs.cascadeForwardsUnflushed && node.inRecovery
        ? node.wal.writeLsn
        : node.wal.flushLsn,
    timeline: () => node.timeline,
    history: () => node.history(),
    readOptions: () => node.readOptions(),
    checkStart: (startLsn, timeline, applicationName, self) =>
      checkStartReplication(node, startLsn, timeline, applicationName, self),
    onReply: (s) => node.walsenders.onReply(s),
    onClose: (s) => node.walsenders.remove(s),
    log,
  });
  node.walsenders.add(sender);
}

/**
 * CheckXLogRemoved for a standby that would start streaming at `startLsn`: a checkpoint (or the
 * base backup this node was made from) removed the segment it starts in, so every
 * START_REPLICATION there is refused.
 */
export function startSegmentRemoved(
  node: Pick<ReplicationSource, 'config' | 'wal' | 'checkpointer'>,
  startLsn: Lsn,
): boolean {
  return (
    startLsn < node.wal.flushLsn &&
    segmentOf(startLsn, node.config.walSegmentSize) <= node.checkpointer.lastRemovedSegno
  );
}

/**
 * The walsender's timeline checks passed; these are the node's (walsender.c StartReplication).
 * Null: streaming starts; otherwise the refusal's message.
 */
export function checkStartReplication(
  node: ReplicationSource,
  startLsn: Lsn,
  timeline: TimeLineId,
  applicationName: string,
  self: WalSender,
): string | null {
  if (node.shuttingDown !== null) return 'the database system is shutting down';
  if (timeline === node.timeline && startLsn > node.wal.flushLsn) {
    return `requested starting point ${formatLsn(startLsn)} is ahead of the WAL flush position of this server ${formatLsn(node.wal.flushLsn)}`;
  }
  if (startSegmentRemoved(node, startLsn)) {
    return walSegmentRemovedMessage(
      segmentOf(startLsn, node.config.walSegmentSize),
      readTimelineHistory(node.dataDir, node.timeline, node.disk),
      node.config.walSegmentSize,
    );
  }
  node.walsenders.startStreaming(self, node.inRecovery);
  if (applicationName !== '' && self.priority > 0) {
    // walsim refuses a second synchronous candidate under a name already streaming (PostgreSQL
    // accepts it and orders the two by slot): a stray client must not speak for a standby.
    for (const s of node.walsenders.senders()) {
      if (
        s !== self &&
        s.state !== 'startup' &&
        s.applicationName.toLowerCase() === applicationName.toLowerCase()
      ) {
        return `a standby named "${applicationName}" is already streaming`;
      }
    }
  }
  return null;
}
