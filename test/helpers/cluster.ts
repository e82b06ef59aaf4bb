/**
 * Test harness in the spirit of PostgreSQL::Test::Cluster: a real primary and standby as separate
 * processes on 127.0.0.1 in a temp directory, driven over the control endpoint. The handle itself
 * is server/cluster-handle.ts; this adds the tests' defaults (16MB, 1 MB WAL segments).
 */
import type { InitOptions } from '../../server/initdb.ts';
import { ClusterHandle } from '../../server/cluster-handle.ts';

export { ReplayStopped } from '../../server/cluster-handle.ts';

export type NodeRef = 'primary' | 'standby';

export interface TestClusterOptions extends Partial<InitOptions> {}

export class TestCluster extends ClusterHandle {
  static async create(opts: TestClusterOptions = {}): Promise<TestCluster> {
    const dir = await ClusterHandle.initTemp('walsim-test-', {
      sharedBuffers: '16MB',
      standbySharedBuffers: opts.sharedBuffers ?? '16MB',
      synchronousCommit: 'remote_write',
      dropStrategy: 'cached-lookup',
      thresholdDivisor: 32,
      forceOptimized: false,
      walSegmentSize: 1024 * 1024,
      listen: '127.0.0.1',
      ...opts,
    });
    return new TestCluster(dir);
  }

  /** Create and start every node (a primary and `opts.standbys`, default one "standby"); wait until the standbys stream. */
  static async start(opts: TestClusterOptions = {}): Promise<TestCluster> {
    const c = await TestCluster.create(opts);
    await c.startAll();
    return c;
  }
}
