/**
 * A node's status, typed: what the control endpoint's `status` answers, `cluster status --json`
 * prints, the test harness polls and the simulator reads. The node shell contributes what both
 * roles have (storage, WAL, drops, data images, walsenders); the role in force contributes its
 * part — `PrimaryStatus` (primary/primary-status.ts) or `StandbyStatus`
 * (standby/standby-status.ts) — discriminated by `role`.
 *
 * `commonStatus` assembles the shell's part from a `StatusSource` (a narrow view of the node, not
 * `ServerNode`: no import circle); `inspectNode` is the node's logical and physical state for
 * comparing nodes (`NodeInspection`).
 *
 * Entry points: `NodeStatus`, `ServerStatus`, `commonStatus`, `inspectNode`, `NodeInspection`.
 */
import type { Checkpointer, CheckpointerStats } from './checkpointer.ts';
import type { FaultName } from '../protocol/messages.ts';
import type { Disk } from '../common/disk.ts';
import { LatencyDisk, type DiskLatencyCounters } from '../common/latency-disk.ts';
import type { DropPath } from '../storage/drop.ts';
import type { DropStrategy } from '../storage/drop.ts';
import type { ImageWriteStats, NodeStorage } from '../storage/node-storage.ts';
import { formatSharedBuffers } from '../storage/shared-buffers.ts';
import { formatLsn, type Lsn, type TimeLineId } from '../wal/lsn.ts';
import type { ForkNumber } from '../wal/records.ts';
import { listSegmentFiles } from '../wal/segment.ts';
import { describeState, type LifecycleSnapshot } from '../lifecycle/lifecycle-machine.ts';
import type { WalSenderSet } from '../primary/walsender-set.ts';
import type { NodeConfig } from './node-config.ts';
import type { NodeFaults } from './node-faults.ts';
import type { FailoverReport } from '../standby/failover-report.ts';
import type { PrimaryStatus } from '../primary/primary-status.ts';
import type { ReplicationStatusRow } from '../primary/walsender-set.ts';
import type { StandbyStatus } from '../standby/standby-status.ts';

/** Records replayed when the node opened (crash recovery, or catch-up from local WAL). */
export interface StartupReplayStatus {
  records: number;
  fromLsn: string;
  toLsn: string;
  crashRecovery: boolean;
}

/** The part of the status every node has, whatever its role. */
export interface NodeCommonStatus {
  /** The lifecycle machine's state, e.g. 'recovery(streaming,paused)' or 'primary.readWrite'. */
  lifecycle: string;
  failover: FailoverReport | null;
  inRecovery: boolean;
  timeline: number;
  sharedBuffers: string;
  nBuffers: number;
  dropStrategy: DropStrategy;
  /** The real PostgreSQL major whose drop rules the node follows (`--pg-version`), or null. */
  pgVersion: number | null;
  drop: {
    drops: Record<DropPath, number>;
    scanned: number;
    probes: number;
    invalidated: number;
    bsearchScans: number;
    elapsedMsByPath: Record<DropPath, number>;
  };
  startupReplay: StartupReplayStatus;
  insertLsn: string;
  flushLsn: string;
  synchronousStandbyNames: string;
  checkpointer: CheckpointerStats;
  dataImage: {
    writes: number;
    inProgress: boolean;
    last: ImageWriteStats | null;
    /** Status requests answered while an image was being written (the node stays responsive). */
    statusAnsweredDuringWrite: number;
  };
  walFiles: number;
  /** pg_stat_replication: this node's walsenders (a standby's are cascading). */
  replication: ReplicationStatusRow[];
  /** Faults injected so far, by name. */
  faultsInjected: Record<FaultName, number>;
  /** The slow_disk fault's counters (common/latency-disk.ts); null when the disk has no latency layer. */
  slowDisk: DiskLatencyCounters | null;
}

export type NodeStatus = NodeCommonStatus & (PrimaryStatus | StandbyStatus);

/** The control endpoint's `status` reply: the node's status and its process. */
export type ServerStatus = NodeStatus & {
  pid: number;
  port: number;
  pgPort: number | null;
  dataDir: string;
};

/** What the shell's part of the status reads of the node. */
export interface StatusSource {
  readonly storage: Pick<
    NodeStorage,
    'dropCounters' | 'dropBusyMs' | 'imagesWritten' | 'imageWriteInProgress' | 'lastImageWrite'
  >;
  readonly lifecycle: { getSnapshot(): LifecycleSnapshot };
  readonly inRecovery: boolean;
  readonly timeline: TimeLineId;
  readonly nBuffers: number;
  readonly config: NodeConfig;
  readonly startupReplay: StartupReplayStatus;
  readonly wal: { readonly insertLsn: Lsn; readonly flushLsn: Lsn };
  readonly dataDir: string;
  readonly disk: Disk;
  readonly checkpointer: Pick<Checkpointer, 'stats'>;
  readonly walsenders: Pick<WalSenderSet, 'statusRows'>;
  readonly faults: Pick<NodeFaults, 'injected'>;
  failoverReport(): FailoverReport | null;
}

/** The part of the status every node has; copies, so a later change does not show through. */
export function commonStatus(
  node: StatusSource,
  statusAnsweredDuringWrite: number,
): NodeCommonStatus {
  const drop = node.storage.dropCounters;
  const snap = node.lifecycle.getSnapshot();
  return {
    lifecycle: describeState(snap),
    failover: node.failoverReport(),
    inRecovery: node.inRecovery,
    timeline: node.timeline,
    sharedBuffers: formatSharedBuffers(node.nBuffers),
    nBuffers: node.nBuffers,
    dropStrategy: node.config.dropStrategy,
    pgVersion: node.config.pgVersion ?? null,
    drop: {
      drops: { ...drop.drops },
      scanned: drop.scanned,
      probes: drop.probes,
      invalidated: drop.invalidated,
      bsearchScans: drop.bsearchScans,
      elapsedMsByPath: { ...node.storage.dropBusyMs },
    },
    startupReplay: node.startupReplay,
    insertLsn: formatLsn(node.wal.insertLsn),
    flushLsn: formatLsn(node.wal.flushLsn),
    synchronousStandbyNames: node.config.synchronousStandbyNames,
    checkpointer: { ...node.checkpointer.stats },
    dataImage: {
      writes: node.storage.imagesWritten,
      inProgress: node.storage.imageWriteInProgress,
      last: node.storage.lastImageWrite,
      statusAnsweredDuringWrite,
    },
    walFiles: listSegmentFiles(node.dataDir, node.config.walSegmentSize, node.disk).length,
    replication: node.walsenders.statusRows(node.wal.flushLsn),
    faultsInjected: { ...node.faults.injected },
    slowDisk: node.disk instanceof LatencyDisk ? { ...node.disk.latency.counters } : null,
  };
}

export interface NodeInspection {
  tables: Array<{
    name: string;
    rel: number;
    rows: number;
    digest: string;
    forks: Array<number | null>;
    buffered: string[];
  }>;
  orphanBuffers: string[];
  relations: number[];
  usedBuffers: number;
}

/**
 * The node's logical and physical state, for comparing nodes in tests and tools: per table its
 * rows, content digest, fork sizes and buffered blocks; and buffers that hold a block which no
 * longer exists (must always be none).
 */
export function inspectNode(storage: NodeStorage): NodeInspection {
  const { heap, clog, smgr, pool, catalog } = storage;
  const tables = catalog.tables().map(([name, rel]) => {
    const forks = [0, 1, 2, 3].map((f) =>
      smgr.exists(rel, f as ForkNumber) ? smgr.diskNblocks(rel, f as ForkNumber) : null,
    );
    return {
      name,
      rel,
      rows: heap.hasRelation(rel) ? heap.countVisible(rel, clog) : 0,
      digest: heap.hasRelation(rel) ? heap.contentDigest(rel, clog) : '',
      forks,
      buffered: pool.bufferedBlocks(rel).map((b) => `${b.fork}:${b.block}`),
    };
  });
  return {
    tables,
    orphanBuffers: storage.orphanBuffers(),
    relations: smgr.relations(),
    usedBuffers: pool.usedBuffers,
  };
}
