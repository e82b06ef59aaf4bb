/**
 * The torture runner's handle on a real two-node cluster in a temp directory: the shared
 * ClusterHandle (server/cluster-handle.ts) with the runner's 60 s polling timeout.
 */
import type { InitOptions } from '../../server/initdb.ts';
import { ClusterHandle, StopPolling } from '../../server/cluster-handle.ts';

export type NodeName = 'primary' | 'standby';

export class TortureCluster extends ClusterHandle {
  static async create(opts: InitOptions): Promise<TortureCluster> {
    return new TortureCluster(await ClusterHandle.initTemp('walsim-torture-', opts), 60_000);
  }
}

/** A check failed in a way that waiting cannot fix. */
export class FatalCheck extends StopPolling {}
