/**
 * Samples a real PostgreSQL cluster (`--engine postgres`, scripts/postgres/pg-cluster.ts) over
 * its PostgreSQL port: one node-postgres connection per running node (application_name
 * `walsim-dashboard`), and per poll one statement for the node's own positions and pause state,
 * one over pg_stat_replication and, in recovery, one over pg_stat_wal_receiver. A node whose
 * postmaster.pid is absent or that refuses connections (or is starting up or shutting down) is
 * `stopped` — no `pg_ctl status` process per poll; one that does not answer within
 * SAMPLE_TIMEOUT_MS is `unreachable` and its connection is dropped.
 *
 * What PostgreSQL does not expose is left null and listed in `unavailable`: the lifecycle
 * machine's state (PostgreSQL's startup process has no such machine), buffer-drop counters, the
 * records replayed, and a live failover report.
 */
import * as fs from 'node:fs';
import * as path from 'node:path';
import type pg from 'pg';
import {
  pgConnect,
  pauseStateSql,
  pgDataDir,
  readPgEngine,
  type PgNodeName,
} from '../scripts/postgres/pg-cluster.ts';
import type { ClusterSource, NodeSample } from './collector.ts';
import { answerWithin, SAMPLE_TIMEOUT_MS } from './answer-within.ts';
import type { ReplicationView } from './view.ts';

const NODES: readonly PgNodeName[] = ['primary', 'standby'];

const UNAVAILABLE = ['lifecycle', 'drop counters', 'records replayed', 'failover report'];

/** Positions and pause state; each role's functions only where they do not raise. */
const selfSql = (major: number) => `SELECT pg_is_in_recovery() AS in_recovery,
  CASE WHEN NOT pg_is_in_recovery() THEN pg_current_wal_insert_lsn()::text END AS insert_lsn,
  CASE WHEN NOT pg_is_in_recovery() THEN pg_current_wal_flush_lsn()::text END AS flush_lsn,
  pg_last_wal_receive_lsn()::text AS receive_lsn,
  pg_last_wal_replay_lsn()::text AS replay_lsn,
  CASE WHEN pg_is_in_recovery() THEN (${pauseStateSql(major).replace(/^SELECT /, '')}) END AS pause_state,
  CASE WHEN NOT pg_is_in_recovery()
       THEN ('x' || substr(pg_walfile_name(pg_current_wal_lsn()), 1, 8))::bit(32)::int END AS timeline,
  (SELECT timeline_id FROM pg_control_checkpoint()) AS checkpoint_timeline,
  current_setting('shared_buffers') AS shared_buffers,
  (SELECT setting::bigint FROM pg_settings WHERE name = 'shared_buffers') AS nbuffers`;

const REPLICATION_SQL = `SELECT application_name, state, sent_lsn::text, write_lsn::text,
  flush_lsn::text, replay_lsn::text, sync_priority, sync_state,
  EXTRACT(epoch FROM replay_lag)::float8 AS replay_lag_s
  FROM pg_stat_replication ORDER BY application_name`;

// The walreceiver's application_name, as walreceiver.c picks it: primary_conninfo's, else
// cluster_name, else "walreceiver" (pg_basebackup -R writes none).
const RECEIVER_SQL = `SELECT status, received_tli, written_lsn::text, flushed_lsn::text,
  sender_host, sender_port,
  COALESCE(substring(conninfo from '(?:^|\\s)application_name=(\\S+)'),
           NULLIF(current_setting('cluster_name'), ''), 'walreceiver') AS application_name
  FROM pg_stat_wal_receiver`;

type Row = Record<string, unknown>;

const lsnOrNull = (v: unknown): string | null => (typeof v === 'string' ? v : null);

function replicationView(r: Row): ReplicationView {
  return {
    applicationName: String(r.application_name),
    state: String(r.state),
    sentLsn: lsnOrNull(r.sent_lsn),
    writeLsn: lsnOrNull(r.write_lsn),
    flushLsn: lsnOrNull(r.flush_lsn),
    replayLsn: lsnOrNull(r.replay_lsn),
    syncPriority: Number(r.sync_priority),
    syncState: String(r.sync_state),
    replayLagS: r.replay_lag_s === null ? null : Number(r.replay_lag_s),
  };
}

/** What both roles report: the node's own settings and its walsenders. */
function commonSample(pid: number, self: Row, replication: ReplicationView[]): NodeSample {
  return {
    state: 'running',
    error: null,
    pid,
    role: null,
    lifecycle: null,
    drop: null,
    failover: null,
    recordsReplayed: null,
    sharedBuffers: String(self.shared_buffers),
    nBuffers: Number(self.nbuffers),
    replication,
    unavailable: UNAVAILABLE,
  };
}

function primarySample(common: NodeSample, self: Row): NodeSample {
  return {
    ...common,
    role: 'primary',
    timeline: Number(self.timeline),
    lsn: {
      current: lsnOrNull(self.insert_lsn),
      flush: lsnOrNull(self.flush_lsn),
      received: null,
      flushed: null,
      replayed: null,
    },
    upstreamFlush: lsnOrNull(self.flush_lsn),
  };
}

/** `recv`: the pg_stat_wal_receiver row (absent while no walreceiver runs). */
function standbySample(
  common: NodeSample,
  self: Row,
  recv: Row | undefined,
  ports: Record<string, number>,
): NodeSample {
  const senderPort = recv === undefined ? null : Number(recv.sender_port);
  const upstream =
    Object.entries(ports).find(([, p]) => p === senderPort)?.[0] ??
    (recv ? `${String(recv.sender_host)}:${senderPort}` : 'primary');
  return {
    ...common,
    role: 'standby',
    timeline:
      recv?.received_tli != null ? Number(recv.received_tli) : Number(self.checkpoint_timeline),
    upstream,
    applicationName: recv ? String(recv.application_name) : null,
    receiver: recv ? String(recv.status) : 'stopped',
    lsn: {
      current: null,
      flush: null,
      // NULL until this walreceiver wrote something (PostgreSQL: writtenUpto still invalid).
      received: lsnOrNull(recv?.written_lsn),
      flushed: lsnOrNull(self.receive_lsn),
      replayed: lsnOrNull(self.replay_lsn),
    },
    upstreamFlush: lsnOrNull(self.receive_lsn),
    pauseState: lsnOrNull(self.pause_state),
  };
}

export class PgSource implements ClusterSource {
  readonly engine = 'postgres' as const;
  private readonly clients = new Map<string, pg.Client>();
  private readonly broken = new Set<string>();

  constructor(readonly dir: string) {
    readPgEngine(dir); // a clear error when the directory holds no PostgreSQL cluster
  }

  nodeNames(): string[] {
    return NODES.filter((n) => fs.existsSync(pgDataDir(this.dir, n)));
  }

  private stopped(name: string, pid: number | null = null): NodeSample {
    this.drop(name);
    const standby = fs.existsSync(
      path.join(pgDataDir(this.dir, name as PgNodeName), 'standby.signal'),
    );
    return {
      state: 'stopped',
      error: null,
      pid,
      role: standby ? 'standby' : 'primary',
      upstream: standby ? 'primary' : null,
      unavailable: UNAVAILABLE,
    };
  }

  private pidOf(name: string): number | null {
    try {
      const first = fs.readFileSync(
        path.join(pgDataDir(this.dir, name as PgNodeName), 'postmaster.pid'),
        'utf8',
      );
      const pid = Number(first.split('\n')[0]);
      return Number.isInteger(pid) && pid > 0 ? pid : null;
    } catch {
      return null;
    }
  }

  /** The node's connection, made anew after an error or the server's end. */
  private async connection(name: string): Promise<pg.Client> {
    const c = this.clients.get(name);
    if (c !== undefined && !this.broken.has(name)) return c;
    this.drop(name);
    const fresh = await pgConnect(this.dir, name as PgNodeName, 'walsim-dashboard', {
      connectTimeoutMs: SAMPLE_TIMEOUT_MS,
    });
    fresh.on('error', () => this.broken.add(name));
    fresh.on('end', () => this.broken.add(name));
    this.clients.set(name, fresh);
    return fresh;
  }

  private async rows(c: pg.Client, sql: string, what: string): Promise<Row[]> {
    return (await answerWithin(c.query(sql), what)).rows as Row[];
  }

  async sample(name: string): Promise<NodeSample> {
    const pid = this.pidOf(name);
    if (pid === null) return this.stopped(name);
    try {
      const c = await this.connection(name);
      const sql = selfSql(readPgEngine(this.dir).major);
      const self = (await this.rows(c, sql, 'positions'))[0]!;
      const rep = await this.rows(c, REPLICATION_SQL, 'pg_stat_replication');
      const common = commonSample(pid, self, rep.map(replicationView));
      if (self.in_recovery !== true) return primarySample(common, self);
      const recv = (await this.rows(c, RECEIVER_SQL, 'pg_stat_wal_receiver'))[0];
      return standbySample(common, self, recv, readPgEngine(this.dir).ports);
    } catch (e) {
      return this.failed(name, pid, e as NodeJS.ErrnoException);
    }
  }

  private failed(name: string, pid: number, err: NodeJS.ErrnoException): NodeSample {
    this.drop(name);
    // Refused, or the server said it is starting up / shutting down: not serving.
    if (err.code === 'ECONNREFUSED' || err.code === '57P03' || err.code === '57P01')
      return this.stopped(name, pid);
    return { ...this.stopped(name, pid), state: 'unreachable', error: err.message };
  }

  private drop(name: string): void {
    const c = this.clients.get(name);
    this.clients.delete(name);
    this.broken.delete(name);
    if (c) void c.end().catch(() => {});
  }

  close(): void {
    for (const n of [...this.clients.keys()]) this.drop(n);
  }
}
