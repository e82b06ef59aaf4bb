/**
 * Samples a walsim cluster's nodes: one control connection per running node (the CLI's
 * `connectNode`, with the cluster token), one `status` request per poll. A node without a live
 * walsim server process (postmaster.pid absent or naming another process) is `stopped`; its role
 * and upstream come from its files. A restarted node (new pid) gets a new connection.
 *
 * Nothing here touches the replay path: `status` is the same request `cluster status` sends,
 * answered between replay slices (server/README rule 5).
 */
import * as fs from 'node:fs';
import * as path from 'node:path';
import { ControlClient } from '../server/control-client.ts';
import {
  applyAutoConf,
  isWalsimServer,
  listNodes,
  nodeDir,
  readAutoConf,
  readNodeConfig,
  readPidFile,
  upstreamOf,
} from '../server/cluster-files.ts';
import type { ServerStatus } from '../server/node-status.ts';
import { nodeDisk } from '../common/node-disk.ts';
import { STANDBY_SIGNAL } from '../server/startup-replay.ts';
import { connectNode } from '../scripts/cli/command.ts';
import type { NodeSample, ClusterSource } from './collector.ts';
import { answerWithin } from './answer-within.ts';

export class WalsimSource implements ClusterSource {
  readonly engine = 'walsim' as const;
  private readonly clients = new Map<string, { pid: number; client: ControlClient }>();
  /** Control port → node name (from the nodes' configuration), for upstream names. */
  private portToNode = new Map<number, string>();

  constructor(readonly dir: string) {}

  nodeNames(): string[] {
    const names = listNodes(this.dir);
    const m = new Map<number, string>();
    for (const n of names) {
      try {
        m.set(readNodeConfig(this.dir, n).port, n);
      } catch {
        // a half-written config: named next time
      }
    }
    this.portToNode = m;
    return names;
  }

  private upstreamName(u: { host: string; port: number } | null): string | null {
    if (u === null) return null;
    return this.portToNode.get(u.port) ?? `${u.host}:${u.port}`;
  }

  private offline(name: string, error: string | null, pid: number | null): NodeSample {
    const dataDir = nodeDir(this.dir, name);
    let upstream: string | null = null;
    try {
      const c = applyAutoConf(readNodeConfig(this.dir, name), readAutoConf(dataDir, nodeDisk));
      upstream = this.upstreamName(upstreamOf(c));
    } catch {
      // no config: nothing to say
    }
    const standby = fs.existsSync(path.join(dataDir, STANDBY_SIGNAL));
    return {
      state: error === null ? 'stopped' : 'unreachable',
      error,
      pid,
      role: standby ? 'standby' : 'primary',
      upstream: standby ? upstream : null,
    };
  }

  async sample(name: string): Promise<NodeSample> {
    const dataDir = nodeDir(this.dir, name);
    const pidFile = readPidFile(dataDir);
    if (pidFile === null || !isWalsimServer(pidFile.pid, dataDir)) {
      this.drop(name);
      return this.offline(name, null, null);
    }
    let entry = this.clients.get(name);
    if (entry !== undefined && (entry.client.closed || entry.pid !== pidFile.pid)) {
      this.drop(name);
      entry = undefined;
    }
    try {
      if (entry === undefined) {
        const client = await answerWithin(connectNode(this.dir, name), 'connect');
        entry = { pid: pidFile.pid, client };
        this.clients.set(name, entry);
      }
      const st = await answerWithin(entry.client.status(), 'status');
      return this.fromStatus(st);
    } catch (e) {
      // The node may have stopped between the pid check and the request: say stopped then.
      const again = readPidFile(dataDir);
      if (again === null || !isWalsimServer(again.pid, dataDir)) {
        this.drop(name);
        return this.offline(name, null, null);
      }
      this.drop(name);
      return this.offline(name, (e as Error).message, pidFile.pid);
    }
  }

  private fromStatus(st: ServerStatus): NodeSample {
    const common: NodeSample = {
      state: 'running',
      error: null,
      pid: st.pid,
      role: st.role,
      timeline: st.timeline,
      lifecycle: st.lifecycle,
      drop: {
        drops: { ...st.drop.drops },
        scanned: st.drop.scanned,
        probes: st.drop.probes,
        invalidated: st.drop.invalidated,
      },
      nBuffers: st.nBuffers,
      sharedBuffers: st.sharedBuffers,
      failover: st.failover,
      replication: st.replication.map((r) => ({
        applicationName: r.applicationName,
        state: r.state,
        sentLsn: r.sentLsn,
        writeLsn: r.writeLsn,
        flushLsn: r.flushLsn,
        replayLsn: r.replayLsn,
        syncPriority: r.syncPriority,
        syncState: r.syncState,
        replayLagS: null,
      })),
      unavailable: ['pg_stat_replication.replay_lag'],
    };
    if (st.role === 'primary') {
      return {
        ...common,
        lsn: {
          current: st.insertLsn,
          flush: st.flushLsn,
          received: null,
          flushed: null,
          replayed: null,
        },
        upstreamFlush: st.flushLsn,
      };
    }
    return {
      ...common,
      upstream: this.upstreamName(st.upstream),
      applicationName: st.upstream?.applicationName ?? null,
      receiver: st.receiverState,
      lsn: {
        current: null,
        flush: null,
        received: st.writeLsn,
        flushed: st.receiveLsn,
        replayed: st.replayLsn,
      },
      // What a cascaded standby can be sent: what this one flushed.
      upstreamFlush: st.receiveLsn,
      pauseState: st.pauseState,
      recordsReplayed: st.recordsReplayed,
    };
  }

  private drop(name: string): void {
    this.clients.get(name)?.client.close();
    this.clients.delete(name);
  }

  close(): void {
    for (const n of [...this.clients.keys()]) this.drop(n);
  }
}
