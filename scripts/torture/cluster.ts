/**
 * The torture runner's handle on a real two-node cluster in a temp directory: start/stop/kill a
 * node, SQL and status over the control endpoint, catch-up waits. Like test/helpers/cluster.ts,
 * but for the CLI (scripts do not import test code).
 */
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { ControlClient } from '../../server/control-client.ts';
import type { QueryResult, SqlValue, StopMode } from '../../server/control-protocol.ts';
import { nodeDir, readPidFile, readToken } from '../../server/cluster-files.ts';
import { initCluster, type InitOptions } from '../../server/initdb.ts';
import { runningPid, sleep, startNode, stopNode } from '../../server/pg-ctl.ts';
import { parseLsn } from '../../wal/lsn.ts';

export type NodeName = 'primary' | 'standby';

export class TortureCluster {
  private readonly clients = new Map<NodeName, ControlClient>();

  private constructor(readonly dir: string) {}

  static async create(opts: InitOptions): Promise<TortureCluster> {
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'walsim-torture-'));
    await initCluster(dir, opts);
    return new TortureCluster(dir);
  }

  dataDir(name: NodeName): string {
    return nodeDir(this.dir, name);
  }

  async start(name: NodeName): Promise<void> {
    await startNode(this.dir, name);
  }

  async stop(name: NodeName, mode: StopMode): Promise<void> {
    const c = this.forget(name);
    await stopNode(this.dir, name, mode);
    c?.close();
  }

  /** SIGKILL (a crash), then wait until the process is gone. */
  async kill(name: NodeName): Promise<void> {
    // Forget the client but leave its socket open: requests in flight must fail because the server
    // died (not_connected), not because we hung up first.
    const c = this.forget(name);
    const pid = runningPid(this.dir, name);
    if (pid === null) throw new Error(`${name} is not running`);
    process.kill(pid, 'SIGKILL');
    for (let i = 0; i < 1000; i++) {
      try {
        process.kill(pid, 0);
      } catch {
        c?.close();
        return;
      }
      await sleep(10);
    }
    throw new Error(`${name} (pid ${pid}) survived SIGKILL`);
  }

  private forget(name: NodeName): ControlClient | undefined {
    const c = this.clients.get(name);
    this.clients.delete(name);
    return c;
  }

  async client(name: NodeName): Promise<ControlClient> {
    let c = this.clients.get(name);
    if (c) return c;
    const pid = readPidFile(this.dataDir(name));
    if (!pid) throw new Error(`${name} is not running`);
    c = await ControlClient.connect('127.0.0.1', pid.port, readToken(this.dir));
    this.clients.set(name, c);
    return c;
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

  /** Poll `fn` until true; throws after `timeoutMs` naming `what`. Errors thrown by fn count as "not yet". */
  async until(fn: () => Promise<boolean>, what: string, timeoutMs = 60_000): Promise<void> {
    const deadline = Date.now() + timeoutMs;
    let last: unknown = null;
    while (Date.now() < deadline) {
      try {
        if (await fn()) return;
      } catch (e) {
        if (e instanceof FatalCheck) throw e;
        last = e;
      }
      await sleep(20);
    }
    throw new Error(`timed out after ${timeoutMs} ms waiting for ${what}${last ? ` (last error: ${(last as Error).message})` : ''}`);
  }

  /** Wait until the standby has replayed up to the primary's flush LSN. */
  async waitForReplay(): Promise<void> {
    const target = parseLsn(String((await this.status('primary')).flushLsn));
    await this.until(async () => {
      const s = await this.status('standby');
      if (s.replayError) throw new FatalCheck(`standby replay stopped: ${JSON.stringify(s.replayError)}`);
      return parseLsn(String(s.replayLsn)) >= target && s.caughtUp === true;
    }, 'standby replay to reach the primary flush LSN');
  }

  serverLog(name: NodeName): string {
    const p = path.join(this.dataDir(name), 'server.log');
    return fs.existsSync(p) ? fs.readFileSync(p, 'utf8') : '';
  }

  async destroy(keep = false): Promise<void> {
    for (const c of this.clients.values()) c.close();
    this.clients.clear();
    for (const name of ['primary', 'standby'] as const) {
      try {
        await stopNode(this.dir, name, 'immediate');
      } catch {
        /* best effort */
      }
    }
    if (!keep) fs.rmSync(this.dir, { recursive: true, force: true });
  }
}

/** A check failed in a way that waiting cannot fix. */
export class FatalCheck extends Error {}
