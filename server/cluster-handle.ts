/**
 * A handle on a running walsim cluster driven from another process, in the spirit of PostgreSQL's
 * PostgreSQL::Test::Cluster: start/stop/kill a node, SQL and status over the control endpoint
 * (one cached connection per node), polling and catch-up waits, removal. The one implementation
 * behind the test harness (test/helpers/cluster.ts) and the torture runner (scripts/torture/).
 */
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { ControlClient } from './control-client.ts';
import type { QueryResult, SqlValue, StopMode } from './control-protocol.ts';
import {
  isWalsimServer,
  listNodes,
  nodeDir,
  readNodeConfig,
  readPidFile,
  readToken,
  type NodeName,
} from './cluster-files.ts';
import { initCluster, type InitOptions } from './initdb.ts';
import { runningPid, startNode, stopNode } from './pg-ctl.ts';
import { parseLsn } from '../wal/lsn.ts';
import { STANDBY_SIGNAL } from './node.ts';
import { addStandby, rejoin, repoint, switchover, waitStreaming } from './topology.ts';
import { pollUntil, StopPolling } from './poll.ts';

export { StopPolling };

/** waitForCatchup found status.replayError set: replay will not continue, so fail at once. */
export class ReplayStopped extends StopPolling {}

export class ClusterHandle {
  private readonly clients = new Map<NodeName, ControlClient>();

  constructor(
    readonly dir: string,
    /** Default timeout of `pollUntil`. */
    private readonly pollTimeoutMs = 30_000,
  ) {}

  /** initdb a primary and a standby in a new temp directory named with `prefix`. */
  static async initTemp(prefix: string, opts: InitOptions): Promise<string> {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), prefix));
    await initCluster(dir, opts);
    return dir;
  }

  dataDir(name: NodeName): string {
    return nodeDir(this.dir, name);
  }

  pid(name: NodeName): number | null {
    return runningPid(this.dir, name);
  }

  config(name: NodeName) {
    return readNodeConfig(this.dir, name);
  }

  serverLog(name: NodeName): string {
    const p = path.join(this.dataDir(name), 'server.log');
    return fs.existsSync(p) ? fs.readFileSync(p, 'utf8') : '';
  }

  async startNode(name: NodeName): Promise<void> {
    // A cached connection to an earlier process of this node (one that died on its own) is dead.
    this.forget(name)?.close();
    await startNode(this.dir, name);
  }

  /**
   * pg_ctl stop. The node's cached connection is closed once the node is down (a request in
   * flight ends because the server stopped), except for smart mode, which waits for sessions to
   * end and so needs ours closed first.
   */
  async stopNode(name: NodeName, mode: StopMode = 'fast'): Promise<boolean> {
    const c = this.forget(name);
    if (mode === 'smart') c?.close();
    try {
      return await stopNode(this.dir, name, mode);
    } finally {
      c?.close();
    }
  }

  /**
   * SIGKILL the node's server (a crash: no shutdown work, postmaster.pid stays behind) and wait
   * until the process is gone. Returns the killed pid. The cached connection stays open until the
   * process is dead, so requests in flight fail because the server died, not because we hung up.
   */
  async kill(name: NodeName): Promise<number> {
    const c = this.forget(name);
    const pid = runningPid(this.dir, name);
    if (pid === null) throw new Error(`node ${name} is not running`);
    process.kill(pid, 'SIGKILL');
    // Gone as pg-ctl's stop means it: no longer a walsim server for this data directory (a zombie
    // whose parent does not reap it still answers kill(pid, 0)).
    await pollUntil(
      async () => !isWalsimServer(pid, this.dataDir(name)),
      `node ${name} (pid ${pid}) to die of SIGKILL`,
      10_000,
      10,
      () => new Error(`node ${name} (pid ${pid}) survived SIGKILL`),
    );
    c?.close();
    return pid;
  }

  private forget(name: NodeName): ControlClient | undefined {
    const c = this.clients.get(name);
    this.clients.delete(name);
    return c;
  }

  async client(name: NodeName): Promise<ControlClient> {
    let c = this.clients.get(name);
    // A node restarted by someone else (a CLI, a switchover) closed our connection: reconnect.
    if (c && !c.closed) return c;
    const pid = readPidFile(this.dataDir(name));
    if (!pid) throw new Error(`node ${name} is not running`);
    c = await ControlClient.connect('127.0.0.1', pid.port, readToken(this.dir));
    this.clients.set(name, c);
    return c;
  }

  /** The node's PostgreSQL wire-protocol port (psql, node-postgres), from its postmaster.pid. */
  pgPort(name: NodeName): number {
    const pgPort = readPidFile(this.dataDir(name))?.pgPort;
    if (pgPort === undefined)
      throw new Error(`node ${name} is not running (no PostgreSQL port in its postmaster.pid)`);
    return pgPort;
  }

  async sql(name: NodeName, sql: string): Promise<QueryResult> {
    return (await this.client(name)).sql(sql);
  }

  async scalar(name: NodeName, sql: string): Promise<SqlValue> {
    const r = await this.sql(name, sql);
    return r.rows[0]![r.columns[0]!]!;
  }

  async status(name: NodeName): Promise<Record<string, any>> {
    return (await this.client(name)).status();
  }

  /** Poll `fn` until true. Errors thrown by fn count as "not yet", except StopPolling. */
  pollUntil(
    fn: () => Promise<boolean>,
    what: string,
    timeoutMs = this.pollTimeoutMs,
  ): Promise<void> {
    return pollUntil(fn, what, timeoutMs);
  }

  /**
   * Wait until a standby's write/flush/replay position reaches its upstream's flush LSN (the
   * primary's, or a cascading standby's receive LSN).
   */
  async waitForCatchup(
    mode: 'write' | 'flush' | 'replay' = 'replay',
    standby: NodeName = 'standby',
    upstream: NodeName = 'primary',
  ): Promise<void> {
    const target = parseLsn(String((await this.status(upstream)).flushLsn));
    await this.pollUntil(async () => {
      const s = await this.status(standby);
      if (mode === 'replay' && s.replayError)
        throw new ReplayStopped(`standby replay stopped: ${JSON.stringify(s.replayError)}`);
      const at = mode === 'replay' ? s.replayLsn : mode === 'write' ? s.writeLsn : s.receiveLsn;
      return parseLsn(String(at)) >= target && (mode !== 'replay' || s.caughtUp === true);
    }, `${standby} ${mode} to reach ${upstream} flush`);
  }

  /** Start every node that is not running (primaries first) and wait until each standby streams. */
  async startAll(): Promise<void> {
    const nodes = listNodes(this.dir);
    const standby = (n: NodeName) => fs.existsSync(path.join(this.dataDir(n), STANDBY_SIGNAL));
    for (const n of [...nodes.filter((n) => !standby(n)), ...nodes.filter(standby)])
      if (this.pid(n) === null) await this.startNode(n);
    for (const n of nodes.filter(standby)) await waitStreaming(this.dir, n);
  }

  addStandby(name: NodeName, from: NodeName, sharedBuffers?: string) {
    return addStandby(this.dir, name, from, sharedBuffers);
  }

  repoint(node: NodeName, to: NodeName) {
    return repoint(this.dir, node, to);
  }

  rejoin(old: NodeName, to: NodeName) {
    this.forget(old)?.close();
    return rejoin(this.dir, old, to);
  }

  switchover(to: NodeName) {
    for (const c of this.clients.values()) c.close();
    this.clients.clear();
    return switchover(this.dir, to);
  }

  /** Stop every node immediately and remove the directory (unless `keep`). */
  async destroy(keep = false): Promise<void> {
    for (const c of this.clients.values()) c.close();
    this.clients.clear();
    for (const name of listNodes(this.dir)) {
      try {
        await stopNode(this.dir, name, 'immediate');
      } catch {
        /* best effort */
      }
    }
    if (!keep) fs.rmSync(this.dir, { recursive: true, force: true });
  }
}
