/**
 * Real PostgreSQL as an experiment engine (engine.ts): nodes made by pg-cluster.ts
 * (initdb, pg_basebackup -R -X stream, pg_ctl as the server's OS user), statements through the
 * `pg` client, promotion by `pg_ctl promote -w`, and the failover observed the way walsim times
 * itself, from the server's clocks.
 *
 * Entry points: `PgEngine`, `PG_ENGINE` (EngineKind), `PgFailover`, `STALL_MS`, `formatPgFailover`.
 *
 * Timing (the resume step):
 * - resume instant: `clock_timestamp()` evaluated right after `pg_wal_replay_resume()` in the same
 *   statement (`resumeSql`); the step closes its connection at once, so no session sits on the
 *   standby during replay (a session's snapshots conflict with replayed catalog prunes and make
 *   the startup process wait);
 * - then `pg_ctl promote -w` (pg_control polled every 100 ms); the standby's log gives the end of
 *   WAL, "received promote request", "redo done at", "archive recovery complete", the promotion's
 *   checkpoint request and "ready to accept connections" (read-write) to the millisecond;
 * - the seed's own figure (client clock before the resume → `pg_ctl promote -w` returned) is
 *   reported separately as `seedMethod`;
 * - a promote request seen more than STALL_MS after it was sent and after replay reached the end
 *   of WAL is flagged `stall` (the startup process slept out `wal_retrieve_retry_interval`).
 * WAL replayed at failover is counted as `pg_waldump --stats=record` would, from the replay LSN at
 * pause to the end of the WAL the standby received, before the resume (outside the timed window),
 * by pg-wal/ on the standby's pg_wal (`readerStats`): every major 13–18, where pg_waldump reads its
 * own major only (the npm packages ship none). A range the files do not hold is said
 * (`waldumpMissing`) and its counts are not known (`waldump: null`).
 */
import * as fs from 'node:fs';
import * as path from 'node:path';
import { WalsimError } from '../../common/errors.ts';
import { pollUntil } from '../../server/poll.ts';
import { parseLsn } from '../../wal/lsn.ts';
import type {
  Engine,
  EngineFailover,
  EngineKind,
  ExperimentNode,
  FailoverInstants,
  FailoverObserver,
  FailoverWindow,
  NewClusterSettings,
} from './engine.ts';
import {
  destroyPgCluster,
  initPgCluster,
  isPgCluster,
  pgConnectionString,
  pgCtl,
  pgDataDir,
  pgLogPath,
  pgNodeRunning,
  pauseStateSql,
  readPgEngine,
} from '../postgres/pg-cluster.ts';
import { parsePgLog, promotionTimeline, type PromotionTimeline } from '../postgres/pg-log.ts';
import { readerStats, type WaldumpStats } from '../postgres/pg-waldump.ts';
import type { PgMajor } from '../../pg-wal/format.ts';
import { startupSamplerOf, type StartupSched } from '../postgres/startup-sched.ts';

/** A promote request noticed later than this after it was sent (and after replay ran out of WAL) is a stall. */
export const STALL_MS = 1000;

/** PostgreSQL's account of a failover: its log's instants, the seed's method, the WAL replayed. */
export interface PgFailover extends EngineFailover {
  engine: 'postgres';
  /** The seed's method: client clock before the resume → pg_ctl promote -w returned. */
  seedMethod: { ms: number; resumeAt: string; promotedAt: string };
  log: PromotionTimeline;
  /** The promote request waited for the streaming retry loop (see STALL_MS); excluded from fits. */
  stall: boolean;
  /** promote request sent → seen by the startup process, less any replay still running, ms. */
  promoteNoticeMs: number | null;
  /** pg_waldump --stats=record's table of the replayed WAL (pg-wal/); null when not readable (`waldumpMissing` says why). */
  waldump: WaldumpStats | null;
  waldumpMissing?: string;
  /**
   * The standby's startup process over the failover (resume → its exit at the end of recovery):
   * CPU, run-queue wait, blocked time (startup-sched.ts); null where /proc has no schedstat.
   */
  startupSched: StartupSched | null;
}

const fmtInt = (n: number) => n.toLocaleString('en-US');

export class PgEngine implements Engine<PgFailover> {
  readonly name = 'postgres' as const;
  readonly stepFlag = ' --engine postgres';
  readonly resumeSql =
    'SELECT pg_wal_replay_resume(), extract(epoch FROM clock_timestamp())::float8';

  constructor(readonly clusterDir: string) {}

  get pauseStateSql(): string {
    return pauseStateSql(readPgEngine(this.clusterDir).major);
  }

  get startCommand(): string {
    return `npm run cluster -- start --engine postgres --dir ${this.clusterDir}`;
  }

  hasNode(node: ExperimentNode): boolean {
    return isPgCluster(this.clusterDir) && fs.existsSync(pgDataDir(this.clusterDir, node));
  }

  isRunning(node: ExperimentNode): Promise<boolean> {
    return pgNodeRunning(this.clusterDir, node);
  }

  connectionString(node: ExperimentNode): string {
    return pgConnectionString(this.clusterDir, node);
  }

  async start(node: ExperimentNode): Promise<void> {
    await pgCtl(this.clusterDir, node, 'start');
  }

  async stop(node: ExperimentNode, mode: 'smart' | 'fast' | 'immediate'): Promise<void> {
    await pgCtl(this.clusterDir, node, 'stop', { mode });
  }

  async promote(node: ExperimentNode, waitSeconds: number): Promise<void> {
    const r = await pgCtl(this.clusterDir, node, 'promote', {
      timeoutS: waitSeconds,
      allowFail: true,
    });
    if (r.code !== 0)
      throw new WalsimError('timeout', `pg_ctl promote failed: ${(r.stderr || r.stdout).trim()}`);
  }

  /** pg_waldump --stats=record over [from, to) of the standby's timeline-1 WAL, by pg-wal/. */
  private async waldump(from: string, to: string): Promise<WaldumpStats | string> {
    const major = readPgEngine(this.clusterDir).major as PgMajor;
    const walDir = path.join(pgDataDir(this.clusterDir, 'standby'), 'pg_wal');
    try {
      return await readerStats(walDir, from, to, major);
    } catch (e) {
      if (e instanceof WalsimError) return e.message;
      throw e;
    }
  }

  async prepareFailover(w: FailoverWindow): Promise<FailoverObserver<PgFailover>> {
    const from = w.pauseLsn ?? w.receivedLsn;
    const to =
      w.endLsn !== null && parseLsn(w.endLsn) <= parseLsn(w.receivedLsn) ? w.endLsn : w.receivedLsn;
    const counted = await this.waldump(from, to);
    const stats = typeof counted === 'string' ? null : counted;
    const missing = typeof counted === 'string' ? counted : null;
    const sampler = startupSamplerOf(pgDataDir(this.clusterDir, 'standby'));
    return {
      finish: (instants) => this.observe(instants, stats, missing, to, sampler?.stop() ?? null),
    };
  }

  private async observe(
    i: FailoverInstants,
    stats: WaldumpStats | null,
    missing: string | null,
    endLsn: string,
    startupSched: StartupSched | null,
  ): Promise<PgFailover> {
    if (i.serverResumeMs === null)
      throw new WalsimError('invalid_input', 'the resume statement returned no clock_timestamp()');
    const resumeEpochMs = i.serverResumeMs;
    const logPath = pgLogPath(this.clusterDir, 'standby');
    const since = Math.floor(resumeEpochMs);
    let t: PromotionTimeline = promotionTimeline([], 0);
    await pollUntil(
      async () => {
        t = promotionTimeline(parsePgLog(fs.readFileSync(logPath, 'utf8')), since);
        return t.readyAt !== null;
      },
      '"database system is ready to accept connections" in the standby log',
      60_000,
      20,
    );
    // The promotion's checkpoint request is logged around the same instant; give it a moment.
    await pollUntil(
      async () => {
        t = promotionTimeline(parsePgLog(fs.readFileSync(logPath, 'utf8')), since);
        return t.checkpointStartAt !== null;
      },
      'the checkpoint promotion requests',
      5_000,
      20,
    ).catch(() => {});
    const ready = t.readyAt!;
    const diff = (a: number | null, b: number | null) => (a === null || b === null ? null : a - b);
    const noticeFrom = Math.max(i.promoteRequestedMs, t.endOfWalAt ?? i.promoteRequestedMs);
    const promoteNoticeMs = diff(t.promoteReceivedAt, noticeFrom);
    const result: Omit<PgFailover, 'lines'> = {
      engine: 'postgres',
      failoverMs: ready - resumeEpochMs,
      resumeAt: new Date(resumeEpochMs).toISOString(),
      promotedAt: new Date(ready).toISOString(),
      phases: {
        replayMs: diff(t.redoDoneAt, resumeEpochMs),
        endOfRecoveryMs: diff(t.archiveRecoveryCompleteAt, t.redoDoneAt),
        openForWritesMs: diff(ready, t.archiveRecoveryCompleteAt),
        checkpointMs: null,
      },
      seedMethod: {
        ms: i.clientPromotedMs - i.clientResumeMs,
        resumeAt: new Date(i.clientResumeMs).toISOString(),
        promotedAt: new Date(i.clientPromotedMs).toISOString(),
      },
      log: t,
      stall: promoteNoticeMs !== null && promoteNoticeMs > STALL_MS,
      promoteNoticeMs,
      recordsReplayed: stats?.total.count ?? NaN,
      waldump: stats,
      ...(missing !== null ? { waldumpMissing: missing } : {}),
      startupSched,
      newTimeline: t.newTimeline,
      promoted: true,
    };
    return { ...result, lines: formatPgFailover(result, endLsn) };
  }

  async replayFailure(): Promise<string | null> {
    // A PostgreSQL startup process that fails replay takes the server down: the next query fails.
    return null;
  }

  async close(): Promise<void> {}
}

/** Fresh PostgreSQL clusters for sweep runs (pg-cluster.ts); walsim's drop settings do not apply. */
export const PG_ENGINE: EngineKind<PgFailover> = {
  name: 'postgres',
  async createCluster(dir: string, s: NewClusterSettings): Promise<PgEngine> {
    await initPgCluster(dir, {
      sharedBuffers: s.sharedBuffers,
      primarySharedBuffers: s.primarySharedBuffers,
      pgBin: s.pgBin,
      pgVersion: s.pgVersion,
    });
    return new PgEngine(dir);
  },
  destroyCluster: destroyPgCluster,
};

export function formatPgFailover(r: Omit<PgFailover, 'lines'>, endLsn?: string): string[] {
  const sec = (ms: number | null) => (ms === null ? 'n/a' : `${(ms / 1000).toFixed(3)} s`);
  const top = [...(r.waldump?.rows ?? [])]
    .sort((a, b) => b.count - a.count)
    .slice(0, 6)
    .map((x) => `${x.rmgr}/${x.type ?? '*'} ${fmtInt(x.count)}`);
  return [
    `resume:   ${r.resumeAt}  (clock_timestamp() after pg_wal_replay_resume())`,
    `promoted: ${r.promotedAt}  ("database system is ready to accept connections", timeline ${r.newTimeline ?? '?'})`,
    `failover: ${sec(r.failoverMs)}  = replay ${sec(r.phases.replayMs)} + end of recovery ${sec(r.phases.endOfRecoveryMs)} + open for writes ${sec(r.phases.openForWritesMs)}` +
      (r.log.checkpointStartAt !== null
        ? `  (checkpoint requested ${sec(r.log.checkpointStartAt - Date.parse(r.resumeAt))} after resume)`
        : ''),
    `seed's method (pg_ctl promote -w, 100 ms polling): ${sec(r.seedMethod.ms)}` +
      (r.stall
        ? `  STALL: the promote request waited ${sec(r.promoteNoticeMs)} (wal_retrieve_retry_interval)`
        : ''),
    ...(r.startupSched === null
      ? []
      : [
          `startup process: ${sec(r.startupSched.cpuMs)} on a CPU, ${sec(r.startupSched.runQueueMs)} waiting for a CPU, ${sec(r.startupSched.blockedMs)} blocked (${fmtInt(r.startupSched.slices)} timeslices; /proc schedstat)`,
        ]),
    r.waldump === null
      ? `replayed: not counted (${r.waldumpMissing ?? 'WAL not read'})`
      : `replayed: ${fmtInt(r.waldump.total.count)} records, ${fmtInt(r.waldump.total.combinedBytes)} bytes of WAL (${r.waldump.from} → ${endLsn ?? r.waldump.to}; pg-wal reader): ${top.join(', ')}`,
  ];
}
