/**
 * A fresh primary + standby for one run of a sweep: what `npm run cluster -- start` does (initdb,
 * base backup, start both, wait until the standby streams), in-process, and its removal.
 *
 * Entry points: `startFreshCluster`, `destroyCluster`.
 */
import * as fs from 'node:fs';
import { WalsimError } from '../../common/errors.ts';
import { listNodes } from '../../server/cluster-files.ts';
import { initCluster } from '../../server/initdb.ts';
import { sleep, startNode, stopNode } from '../../server/pg-ctl.ts';
import type { DropStrategy } from '../../server/settings.ts';
import { ClusterSession } from './steps.ts';

export interface FreshClusterSettings {
  /** The standby's shared_buffers: the pool whose drops are measured. */
  sharedBuffers: string;
  /** The primary's shared_buffers (its own drops are not part of the failover). */
  primarySharedBuffers: string;
  dropStrategy: DropStrategy;
  forceOptimized: boolean;
  thresholdDivisor: number;
}

/** Initialise `dir` (must not hold a cluster) and start both nodes with the seed's settings. */
export async function startFreshCluster(dir: string, s: FreshClusterSettings): Promise<void> {
  if (listNodes(dir).length > 0) throw new WalsimError('invalid_input', `${dir} already holds a cluster`);
  await initCluster(dir, {
    sharedBuffers: s.primarySharedBuffers,
    standbySharedBuffers: s.sharedBuffers,
    synchronousCommit: 'remote_write',
    dropStrategy: s.dropStrategy,
    thresholdDivisor: s.thresholdDivisor,
    forceOptimized: s.forceOptimized,
    walSegmentSize: 16 * 1024 * 1024,
    listen: '127.0.0.1',
  });
  await startNode(dir, 'primary');
  await startNode(dir, 'standby');
  const session = new ClusterSession(dir);
  try {
    const standby = await session.standby();
    const deadline = Date.now() + 60_000;
    while ((await standby.status()).receiverState !== 'streaming') {
      if (Date.now() > deadline) throw new WalsimError('timeout', `standby in ${dir} is not streaming after 60 s`);
      await sleep(20);
    }
  } finally {
    session.close();
  }
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
