/**
 * A fresh primary + standby for one run of a sweep: what `npm run cluster -- start` does (initdb,
 * base backup, start every node, wait until the standbys stream), in-process, and its removal.
 * With `standbys` > 1 the measured standby "standby" is the synchronous one and standby2…N are
 * asynchronous extras streaming from the same primary (with the primary's shared_buffers), to see
 * whether more walsenders change the measurement.
 *
 * Entry points: `startFreshCluster`, `destroyCluster`.
 */
import * as fs from 'node:fs';
import { WalsimError } from '../../common/errors.ts';
import { listNodes, readNodeConfig, writeNodeConfig } from '../../server/cluster-files.ts';
import { initCluster } from '../../server/initdb.ts';
import { startNode, stopNode } from '../../server/pg-ctl.ts';
import { waitStreaming } from '../../server/topology.ts';
import type { DropStrategy, WalSettings } from '../../server/settings.ts';

export interface FreshClusterSettings {
  /** The standby's shared_buffers: the pool whose drops are measured. */
  sharedBuffers: string;
  /** The primary's shared_buffers (its own drops are not part of the failover). */
  primarySharedBuffers: string;
  dropStrategy: DropStrategy;
  forceOptimized: boolean;
  thresholdDivisor: number;
  /** Standbys streaming from the primary (default 1: the seed's one). */
  standbys?: number;
  /**
   * walsim: the nodes follow this PostgreSQL major's drop rules (`cluster start --pg-version`),
   * which then decide strategy and divisor; PostgreSQL: that major's binaries (engine.ts).
   */
  pgVersion?: number;
}

/** The seed's postgresql.conf: checkpoint_timeout = 30min, max_wal_size = 20GB. */
export const SEED_WAL_SETTINGS: WalSettings = {
  checkpointTimeoutS: 30 * 60,
  maxWalSizeMb: 20 * 1024,
  walKeepSizeMb: 0,
};

/** Initialise `dir` (must not hold a cluster) and start both nodes with the seed's settings. */
export async function startFreshCluster(dir: string, s: FreshClusterSettings): Promise<void> {
  if (listNodes(dir).length > 0)
    throw new WalsimError('invalid_input', `${dir} already holds a cluster`);
  const n = s.standbys ?? 1;
  if (!Number.isInteger(n) || n < 1)
    throw new WalsimError('invalid_input', `standbys must be a positive integer, got ${n}`);
  const extras = ['standby', ...Array.from({ length: n - 1 }, (_, i) => `standby${i + 2}`)];
  await initCluster(dir, {
    sharedBuffers: s.primarySharedBuffers,
    standbySharedBuffers: s.sharedBuffers,
    synchronousCommit: 'remote_write',
    dropStrategy: s.dropStrategy,
    thresholdDivisor: s.thresholdDivisor,
    forceOptimized: s.forceOptimized,
    walSegmentSize: 16 * 1024 * 1024,
    listen: '127.0.0.1',
    ...(n > 1 ? { standbys: extras, synchronousStandbyNames: 'standby' } : {}),
    ...(s.pgVersion !== undefined ? { pgVersion: s.pgVersion } : {}),
    wal: SEED_WAL_SETTINGS,
  });
  for (const name of extras.slice(1))
    writeNodeConfig(dir, { ...readNodeConfig(dir, name), sharedBuffers: s.primarySharedBuffers });
  // Every node at once: a node's start is mostly its process loading the code (about 0.4–1 s
  // each), and a standby whose primary is not listening yet retries (its walreceiver's backoff
  // starts at 100 ms), as a PostgreSQL standby started before its primary does. On failure the
  // caller's destroyCluster stops the nodes that did start.
  const started = await Promise.allSettled(
    ['primary', ...extras].map((name) => startNode(dir, name)),
  );
  const failed = started.find((r) => r.status === 'rejected');
  if (failed) throw failed.reason;
  for (const name of extras) await waitStreaming(dir, name);
}

/** Stop every node of the cluster immediately (only our own, verified pids) and remove `dir`. */
export async function destroyCluster(dir: string): Promise<void> {
  for (const name of listNodes(dir)) {
    try {
      await stopNode(dir, name, 'immediate');
    } catch {
      /* already gone */
    }
  }
  fs.rmSync(dir, { recursive: true, force: true });
}
