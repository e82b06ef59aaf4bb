/**
 * Samples a real PostgreSQL cluster (`--engine postgres`, scripts/postgres/pg-cluster.ts) over
 * its PostgreSQL port: one node-postgres connection per running node (application_name
 * `walsim-dashboard`), and per poll one statement for the node's own positions and pause state,
 * one over pg_stat_replication and, in recovery, one over pg_stat_wal_receiver. A node whose
 * postmaster.pid is absent or that refuses connections is `stopped` — no `pg_ctl status` process
 * per poll.
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
  pgDataDir,
  readPgEngine,
  type PgNodeName,
} from '../scripts/postgres/pg-cluster.ts';
import type { ClusterSource, NodeSample } from './collector.ts';
import type { ReplicationView } from './view.ts';

const NODES: readonly PgNodeName[] = ['primary', 'standby'];

const UNAVAILABLE = ['lifecycle', 'drop counters', 'records replayed', 'failover report'];

/** Positions and pause state; each role's functions only where they do not raise. */
const SELF_SQL = `SELECT pg_is_in_recovery() AS in_recovery,
  CASE WHEN NOT pg_is_in_recovery() THEN pg_current_wal_insert_lsn()::text END AS insert_lsn,
  CASE WHEN NOT pg_is_in_recovery() THEN pg_current_wal_flush_lsn()::text END AS flush_lsn,
  pg_last_wal_receive_lsn()::text AS receive_lsn,
  pg_last_wal_replay_lsn()::text AS replay_lsn,
  CASE WHEN pg_is_in_recovery() THEN pg_get_wal_replay_pause_state() END AS pause_state,
  CASE WHEN NOT pg_is_in_recovery()
       THEN ('x' || substr(pg_walfile_name(pg_current_wal_lsn()), 1, 8))::bit(32)::int END AS timeline,
  (SELECT timeline_id FROM pg_control_checkpoint()) AS checkpoint_timeline,
  current_setting('shared_buffers') AS shared_buffers,
  (SELECT setting::bigint FROM pg_settings WHERE name = 'shared_buffers') AS nbuffers`;

const REPLICATION_SQL = `SELECT application_name, state, sent_lsn::text, write_lsn::text,
  flush_lsn::text, replay_lsn::text, sync_priority, sync_state,
  EXTRACT(epoch FROM replay_lag)::float8 AS replay_lag_s
  FROM pg_stat_replication ORDER BY application_name`;

const RECEIVER_SQL = `SELECT status, received_tli, written_lsn::text, flushed_lsn::text,
  sender_host, sender_port FROM pg_stat_wal_receiver`;

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

  private stopped(name: string): NodeSample {
    this.drop(name);
    const standby = fs.existsSync(
      path.join(pgDataDir(this.dir, name as PgNodeName), 'standby.signal'),
    );
    return {
      state: 'stopped',
      error: null,
      pid: null,
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

  async sample(name: string): Promise<NodeSample> {
    const pid = this.pidOf(name);
    if (pid === null) return this.stopped(name);
    let c = this.clients.get(name);
    try {
      if (c === undefined || this.broken.has(name)) {
        this.drop(name);
        c = await pgConnect(this.dir, name as PgNodeName, 'walsim-dashboard');
        c.on('error', () => this.broken.add(name));
        c.on('end', () => this.broken.add(name));
        this.clients.set(name, c);
      }
      const self = (await c.query(SELF_SQL)).rows[0] as Record<string, unknown>;
      const rep = (await c.query(REPLICATION_SQL)).rows as Array<Record<string, unknown>>;
      const replication: ReplicationView[] = rep.map((r) => ({
        applicationName: String(r.application_name),
        state: String(r.state),
        sentLsn: (r.sent_lsn as string | null) ?? null,
        writeLsn: (r.write_lsn as string | null) ?? null,
        flushLsn: (r.flush_lsn as string | null) ?? null,
        replayLsn: (r.replay_lsn as string | null) ?? null,
        syncPriority: Number(r.sync_priority),
        syncState: String(r.sync_state),
        replayLagS: r.replay_lag_s === null ? null : Number(r.replay_lag_s),
      }));
      const common = {
        state: 'running' as const,
        error: null,
        pid,
        lifecycle: null,
        drop: null,
        failover: null,
        recordsReplayed: null,
        sharedBuffers: String(self.shared_buffers),
        nBuffers: Number(self.nbuffers),
        replication,
        unavailable: UNAVAILABLE,
      };
      if (self.in_recovery !== true) {
        return {
          ...common,
          role: 'primary',
          timeline: Number(self.timeline),
          lsn: {
            current: self.insert_lsn as string,
            flush: self.flush_lsn as string,
            received: null,
            flushed: null,
            replayed: null,
          },
          upstreamFlush: self.flush_lsn as string,
        };
      }
      const recv = (await c.query(RECEIVER_SQL)).rows[0] as Record<string, unknown> | undefined;
      const engine = readPgEngine(this.dir);
      const senderPort = recv?.sender_port === undefined ? null : Number(recv.sender_port);
      const upstream =
        (Object.entries(engine.ports).find(([, p]) => p === senderPort)?.[0] as
          string | undefined) ?? (recv ? `${String(recv.sender_host)}:${senderPort}` : 'primary');
      return {
        ...common,
        role: 'standby',
        timeline:
          recv?.received_tli !== undefined && recv.received_tli !== null
            ? Number(recv.received_tli)
            : Number(self.checkpoint_timeline),
        upstream,
        // pg_basebackup -R writes primary_conninfo without application_name: 'walreceiver'.
        applicationName: 'walreceiver',
        receiver: recv ? String(recv.status) : 'stopped',
        lsn: {
          current: null,
          flush: null,
          received: (recv?.written_lsn as string | null | undefined) ?? null,
          flushed: (self.receive_lsn as string | null) ?? null,
          replayed: (self.replay_lsn as string | null) ?? null,
        },
        upstreamFlush: (self.receive_lsn as string | null) ?? null,
        pauseState: (self.pause_state as string | null) ?? null,
      };
    } catch (e) {
      this.drop(name);
      const err = e as NodeJS.ErrnoException;
      // Refused, or the server said it is starting up / shutting down: not serving.
      if (err.code === 'ECONNREFUSED' || err.code === '57P03' || err.code === '57P01')
        return { ...this.stopped(name), pid };
      return {
        state: 'unreachable',
        error: err.message,
        pid,
        role: null,
        unavailable: UNAVAILABLE,
      };
    }
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
