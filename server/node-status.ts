/**
 * A node's status, typed: what the control endpoint's `status` answers, `cluster status --json`
 * prints, the test harness polls and the simulator reads. The node shell contributes what both
 * roles have (storage, WAL, drops, data images, walsenders); the role in force contributes its
 * part — `PrimaryStatus` (primary/primary-status.ts) or `StandbyStatus`
 * (standby/standby-status.ts) — discriminated by `role`.
 *
 * Entry points: `NodeStatus`, `ServerStatus`.
 */
import type { CheckpointerStats } from './checkpointer.ts';
import type { FaultName } from '../protocol/messages.ts';
import type { DiskLatencyCounters } from '../common/latency-disk.ts';
import type { DropPath } from '../storage/drop.ts';
import type { DropStrategy } from '../storage/drop.ts';
import type { ImageWriteStats } from '../storage/node-storage.ts';
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
