/**
 * Test harness in the spirit of PostgreSQL::Test::Cluster: a real primary and standby as separate
 * processes on 127.0.0.1 in a temp directory, driven over the control endpoint.
 */
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { ControlClient } from '../../server/control-client.ts';
import type { QueryResult, SqlValue, StopMode } from '../../server/control-protocol.ts';
import { listNodes, nodeDir, readNodeConfig, readPidFile, readToken } from '../../server/cluster-files.ts';
import { initCluster, type InitOptions } from '../../server/initdb.ts';
import { runningPid, sleep, startNode, stopNode } from '../../server/pg-ctl.ts';
import { parseLsn } from '../../wal/lsn.ts';

export type NodeRef = 'primary' | 'standby';

/** waitForCatchup found status.replayError set: replay will not continue, so fail at once. */
export class ReplayStopped extends Error {}

export interface TestClusterOptions extends Partial<InitOptions> {}

export class TestCluster {
  private readonly clients = new Map<string, ControlClient>();

  private constructor(readonly dir: string) {}

  static async create(opts: TestClusterOptions = {}): Promise<TestCluster> {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'walsim-test-'));
    const c = new TestCluster(dir);
    await initCluster(dir, {
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
    return c;
  }

  /** Create and start both nodes; wait until the standby streams. */
  static async start(opts: TestClusterOptions = {}): Promise<TestCluster> {
    const c = await TestCluster.create(opts);
    await c.startNode('primary');
    await c.startNode('standby');
    await c.pollUntil(async () => (await c.status('standby')).receiverState === 'streaming', 'standby streaming');
    return c;
  }

  async startNode(name: NodeRef): Promise<void> {
    await startNode(this.dir, name);
  }

  async stopNode(name: NodeRef, mode: StopMode = 'fast'): Promise<boolean> {
    this.clients.get(name)?.close();
    this.clients.delete(name);
    return stopNode(this.dir, name, mode);
  }

  pid(name: NodeRef): number | null {
    return runningPid(this.dir, name);
  }

  /**
   * SIGKILL the node's server (a crash: no shutdown work, postmaster.pid stays behind) and wait
   * until the process is gone. Returns the killed pid.
   */
  async kill(name: NodeRef): Promise<number> {
    this.clients.get(name)?.close();
    this.clients.delete(name);
    const pid = runningPid(this.dir, name);
    if (pid === null) throw new Error(`node ${name} is not running`);
    process.kill(pid, 'SIGKILL');
    for (;;) {
      try {
        process.kill(pid, 0);
      } catch {
        return pid;
      }
      await sleep(10);
    }
  }

  dataDir(name: NodeRef): string {
    return nodeDir(this.dir, name);
  }

  async client(name: NodeRef): Promise<ControlClient> {
    let c = this.clients.get(name);
    if (c) return c;
    const pid = readPidFile(nodeDir(this.dir, name));
    if (!pid) throw new Error(`node ${name} is not running`);
    c = await ControlClient.connect('127.0.0.1', pid.port, readToken(this.dir));
    this.clients.set(name, c);
    return c;
  }

  async sql(name: NodeRef, sql: string): Promise<QueryResult> {
    return (await this.client(name)).sql(sql);
  }

  async scalar(name: NodeRef, sql: string): Promise<SqlValue> {
    const r = await this.sql(name, sql);
    return r.rows[0]![r.columns[0]!]!;
  }

  async status(name: NodeRef): Promise<Record<string, any>> {
    return (await this.client(name)).status();
  }

  async pollUntil(fn: () => Promise<boolean>, what: string, timeoutMs = 30_000): Promise<void> {
    const deadline = Date.now() + timeoutMs;
    while (Date.now() < deadline) {
      try {
        if (await fn()) return;
      } catch (e) {
        if (e instanceof ReplayStopped) throw e; // a stopped replay never catches up: fail now
        /* not ready yet */
      }
      await sleep(25);
    }
    throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}`);
  }

  /** Wait until the standby's write/flush/replay position reaches the primary's flush LSN. */
  async waitForCatchup(mode: 'write' | 'flush' | 'replay' = 'replay'): Promise<void> {
    const target = parseLsn(String((await this.status('primary')).flushLsn));
    await this.pollUntil(async () => {
      const s = await this.status('standby');
      if (mode === 'replay' && s.replayError) throw new ReplayStopped(`standby replay stopped: ${JSON.stringify(s.replayError)}`);
      const at = mode === 'replay' ? s.replayLsn : mode === 'write' ? s.writeLsn : s.receiveLsn;
      return parseLsn(String(at)) >= target && (mode !== 'replay' || s.caughtUp === true);
    }, `standby ${mode} to reach primary flush`);
  }

  /** Stop every node immediately and remove the directory. */
  async destroy(): Promise<void> {
    for (const c of this.clients.values()) c.close();
    this.clients.clear();
    for (const name of listNodes(this.dir)) {
      try {
        await stopNode(this.dir, name, 'immediate');
      } catch {
        /* best effort */
      }
    }
    fs.rmSync(this.dir, { recursive: true, force: true });
  }

  config(name: NodeRef) {
    return readNodeConfig(this.dir, name);
  }
}
