/**
 * Test harness in the spirit of PostgreSQL::Test::Cluster: a real primary and standby as separate
 * processes on 127.0.0.1 in a temp directory, driven over the control endpoint. The handle itself
 * is server/cluster-handle.ts; this adds the tests' defaults (16MB, 1 MB WAL segments) and the one
 * set-up/teardown every real-process test uses:
 *
 *   const clusters = clustersPerTest();   // or clustersPerSuite(): one cluster for many tests
 *   it('…', async () => { const c = await clusters.start({ synchronousCommit: 'on' }); … });
 *
 * Each cluster (and each directory from `clusters.dir()`, for a cluster a CLI creates) is stopped
 * immediately and removed after the test (or the suite), whatever its outcome.
 */
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { afterAll, afterEach } from 'vitest';
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
    try {
      await c.startAll();
    } catch (e) {
      await c.destroy();
      throw e;
    }
    return c;
  }
}

/** The clusters (and cluster directories) of one test or suite, all destroyed together. */
export class TestClusters {
  private readonly made: TestCluster[] = [];

  /** A new cluster with every node started and each standby streaming. */
  async start(opts: TestClusterOptions = {}): Promise<TestCluster> {
    return this.keep(await TestCluster.start(opts));
  }

  /** A new cluster, initialised but not started. */
  async create(opts: TestClusterOptions = {}): Promise<TestCluster> {
    return this.keep(await TestCluster.create(opts));
  }

  /**
   * An empty temp directory for a cluster something else creates (`cluster start --dir D`, the
   * sweeps); whatever nodes it holds at the end are stopped immediately and it is removed.
   */
  dir(prefix = 'walsim-test-'): string {
    const d = fs.mkdtempSync(path.join(os.tmpdir(), prefix));
    this.adopt(d);
    return d;
  }

  /** A handle on a cluster something else created at `dir` (a CLI), destroyed with the others. */
  adopt(dir: string): TestCluster {
    return this.keep(new TestCluster(dir));
  }

  /** Stop every node immediately and remove every directory (the hooks call it). */
  async destroyAll(): Promise<void> {
    for (const c of this.made.splice(0).reverse()) await c.destroy();
  }

  private keep(c: TestCluster): TestCluster {
    this.made.push(c);
    return c;
  }
}

/** Clusters made inside a test of the enclosing file or describe, destroyed after each test. */
export function clustersPerTest(): TestClusters {
  const clusters = new TestClusters();
  afterEach(() => clusters.destroyAll());
  return clusters;
}

/** Clusters made in a beforeAll (or a test) of the enclosing file or describe, destroyed after its last test. */
export function clustersPerSuite(): TestClusters {
  const clusters = new TestClusters();
  afterAll(() => clusters.destroyAll());
  return clusters;
}

/**
 * Tables as a node's inspect reports them, without the blocks in its buffer pool (which differ
 * between a primary and its standby holding the same rows): comparable across nodes.
 */
export const withoutBuffered = <T extends { buffered: string[] }>(tables: T[]) =>
  tables.map(({ buffered: _, ...t }) => t);

/** Each table of `node` as name:rows:digest, in inspect's order: equal data, equal lists. */
export async function tableDigests(cl: TestCluster, node: string): Promise<string[]> {
  return (await (await cl.client(node)).inspect()).tables.map(
    (t) => `${t.name}:${t.rows}:${t.digest}`,
  );
}
