/**
 * walsim as an experiment engine (engine.ts): nodes started and stopped by server/pg-ctl.ts (the
 * cluster CLI's pg_ctl), statements over each node's PostgreSQL port, promotion by
 * `SELECT pg_promote(true, N)` and the failover observed through walsim's SQL extension
 * `SELECT walsim_failover_report()` — the server's failover report (monotonic-clock phases, the
 * drop counters, the exact counts), priced once, here, with the step's cost profile.
 *
 * Entry points: `WalsimEngine`, `WALSIM_ENGINE` (EngineKind), `WalsimFailover`, `formatFailover`,
 * `formatModel`.
 */
import pg from 'pg';
import { WalsimError } from '../../common/errors.ts';
import { assert } from '../../common/assert.ts';
import { ControlClient } from '../../server/control-client.ts';
import {
  nodeDir,
  readNodeConfig,
  readPgPassword,
  readPidFile,
  readToken,
} from '../../server/cluster-files.ts';
import { runningPid, startNode, stopNode } from '../../server/pg-ctl.ts';
import type { FailoverReport } from '../../standby/failover-report.ts';
import { withModel, type Priced } from '../../cost-model/price.ts';
import type { ModeledFailover } from '../../cost-model/model.ts';
import { DROP_PATHS, type DropPath } from '../../storage/drop.ts';
import type {
  Engine,
  EngineFailover,
  EngineKind,
  ExperimentNode,
  FailoverObserver,
  FailoverWindow,
  NewClusterSettings,
} from './engine.ts';
import { destroyCluster, startFreshCluster } from './fresh-cluster.ts';

/** walsim's account of a failover: the server's report, its drop counters and modeled seconds. */
export interface WalsimFailover extends EngineFailover {
  engine: 'walsim';
  drop: FailoverReport['drop'];
  report: Priced<FailoverReport>;
  /** Modeled PostgreSQL seconds of this failover (cost-model/), profile named. */
  model: ModeledFailover;
}

const fmtInt = (n: number) => n.toLocaleString('en-US');

/** A pg client to `connectionString` (errors surface on the next query, not as 'error' events). */
export async function connectPg(
  connectionString: string,
  applicationName = 'walsim-experiment',
  pipeline = false,
): Promise<pg.Client> {
  const c = new pg.Client({
    connectionString,
    application_name: applicationName,
    pipeline,
  } as pg.ClientConfig);
  c.on('error', () => {});
  await c.connect();
  return c;
}

export class WalsimEngine implements Engine<WalsimFailover> {
  readonly name = 'walsim' as const;
  readonly stepFlag = '';
  readonly resumeSql = 'SELECT pg_wal_replay_resume()';
  readonly pauseStateSql = 'SELECT pg_get_wal_replay_pause_state()';
  /** Control connections (status only: replayFailure), opened on first use. */
  private readonly control = new Map<ExperimentNode, ControlClient>();

  constructor(readonly clusterDir: string) {}

  get startCommand(): string {
    return `npm run cluster -- start --dir ${this.clusterDir}`;
  }

  hasNode(node: ExperimentNode): boolean {
    try {
      readNodeConfig(this.clusterDir, node);
      return true;
    } catch {
      return false;
    }
  }

  async isRunning(node: ExperimentNode): Promise<boolean> {
    return this.hasNode(node) && runningPid(this.clusterDir, node) !== null;
  }

  connectionString(node: ExperimentNode): string {
    const pid = readPidFile(nodeDir(this.clusterDir, node));
    if (pid === null || pid.pgPort === undefined)
      throw new WalsimError(
        'not_connected',
        `node "${node}" of the cluster at ${this.clusterDir} is not running`,
      );
    const host = this.hostOf(node);
    const password = readPgPassword(this.clusterDir);
    const auth =
      password === null ? 'postgres' : `postgres:${encodeURIComponent(password.password)}`;
    return `postgresql://${auth}@${host.includes(':') ? `[${host}]` : host}:${pid.pgPort}/postgres`;
  }

  private hostOf(node: ExperimentNode): string {
    const listen = readNodeConfig(this.clusterDir, node).listen;
    return listen === '0.0.0.0' ? '127.0.0.1' : listen;
  }

  async start(node: ExperimentNode): Promise<void> {
    await startNode(this.clusterDir, node);
  }

  async stop(node: ExperimentNode, mode: 'smart' | 'fast' | 'immediate'): Promise<void> {
    this.control.get(node)?.close();
    this.control.delete(node);
    await stopNode(this.clusterDir, node, mode);
  }

  /** The connection promotion uses, opened by prepareFailover before the timed window. */
  private promoteClient: pg.Client | null = null;

  async promote(node: ExperimentNode, waitSeconds: number): Promise<void> {
    const c =
      this.promoteClient ?? (this.promoteClient = await connectPg(this.connectionString(node)));
    const r = await c.query({ text: `SELECT pg_promote(true, ${waitSeconds})`, rowMode: 'array' });
    if (r.rows[0]?.[0] !== true)
      throw new WalsimError('timeout', `the ${node} did not promote within ${waitSeconds} s`);
  }

  async prepareFailover(w: FailoverWindow): Promise<FailoverObserver<WalsimFailover>> {
    // The promote request then follows the resume by one round trip, as the control endpoint's did.
    this.promoteClient ??= await connectPg(this.connectionString('standby'));
    return {
      finish: async () => {
        const c = this.promoteClient!;
        const served = (
          await c.query({ text: 'SELECT walsim_failover_report()', rowMode: 'array' })
        ).rows[0]?.[0] as FailoverReport | null;
        await this.close();
        if (
          served === null ||
          served === undefined ||
          served.failoverMs === null ||
          served.resumeAt === null ||
          served.promotedAt === null
        ) {
          throw new WalsimError(
            'timeout',
            `promotion did not finish within ${w.waitSeconds} s: ${JSON.stringify(served)}`,
          );
        }
        // The server's report carries counts; this edge prices them once, with the chosen profile.
        assert(
          w.profile !== undefined,
          "the walsim engine prices with the caller's profile, none given",
        );
        const r = withModel(served, w.profile);
        return {
          engine: 'walsim',
          failoverMs: served.failoverMs,
          resumeAt: served.resumeAt,
          promotedAt: served.promotedAt,
          phases: r.phases,
          drop: r.drop,
          recordsReplayed: r.recordsReplayed,
          newTimeline: r.newTimeline,
          promoted: true,
          report: r,
          model: r.model!,
          lines: formatFailover(r),
        };
      },
    };
  }

  async replayFailure(node: ExperimentNode): Promise<string | null> {
    let c = this.control.get(node);
    if (c === undefined || c.closed) {
      const pid = readPidFile(nodeDir(this.clusterDir, node));
      if (pid === null) return null;
      c = await ControlClient.connect(this.hostOf(node), pid.port, readToken(this.clusterDir));
      this.control.set(node, c);
    }
    const s = await c.status();
    return s.role === 'standby' && s.replayError ? JSON.stringify(s.replayError) : null;
  }

  async close(): Promise<void> {
    const c = this.promoteClient;
    this.promoteClient = null;
    await c?.end().catch(() => {});
    for (const cc of this.control.values()) cc.close();
    this.control.clear();
  }
}

/** Fresh walsim clusters for sweep runs (fresh-cluster.ts). */
export const WALSIM_ENGINE: EngineKind<WalsimFailover> = {
  name: 'walsim',
  async createCluster(dir: string, s: NewClusterSettings): Promise<WalsimEngine> {
    await startFreshCluster(dir, s);
    return new WalsimEngine(dir);
  },
  destroyCluster,
};

/** `full-scan 1, cached-lookup 0` plus the list paths when they ran. */
function dropPathsText(drops: Record<DropPath, number>): string {
  return DROP_PATHS.filter((p) => p === 'full-scan' || p === 'cached-lookup' || drops[p] > 0)
    .map((p) => `${p} ${fmtInt(drops[p])}`)
    .join(', ');
}

/** The resume step's human output: the seed's two timestamps, their difference, and why. */
export function formatFailover(r: Priced<FailoverReport>): string[] {
  const ms = (v: number | null) => (v === null ? 'n/a' : `${(v / 1000).toFixed(3)} s`);
  const d = r.drop;
  return [
    `resume:   ${r.resumeAt}  (SELECT pg_wal_replay_resume())`,
    `promoted: ${r.promotedAt}  (read-write, timeline ${r.newTimeline ?? '?'})`,
    `failover: ${ms(r.failoverMs)}  = replay ${ms(r.phases.replayMs)} + end of recovery ${ms(r.phases.endOfRecoveryMs)} + open for writes ${ms(r.phases.openForWritesMs)}` +
      (r.phases.checkpointMs !== null ? `  (then checkpoint ${ms(r.phases.checkpointMs)})` : ''),
    `replayed: ${fmtInt(r.recordsReplayed)} records; drops: ${dropPathsText(d.drops)}; ` +
      `${fmtInt(d.scanned)} descriptors scanned, ${fmtInt(d.probes)} probes, ` +
      (d.listSteps > 0 ? `${fmtInt(d.listSteps)} list steps, ` : '') +
      `${fmtInt(d.invalidated)} buffers invalidated, ` +
      `${(d.ms / 1000).toFixed(3)} s inside drops`,
    ...(r.pgRules === undefined ? [] : [`rules:    ${r.pgRules.summary[0]}`]),
    ...(r.model === null ? [] : [formatModel(r.model)]),
  ];
}

/** One line: the modeled PostgreSQL seconds of a failover and their phases. */
export function formatModel(m: ModeledFailover): string {
  const s = (v: number) => `${v.toFixed(3)} s`;
  return (
    `modeled:  ${s(m.failoverS)} PostgreSQL (profile ${m.profile})  = replay ${s(m.phases.replayS)} + end of recovery ${s(m.phases.endOfRecoveryS)} + open for writes ${s(m.phases.openForWritesS)}` +
    (m.polledS === null ? '' : `; ${s(m.polledS)} as the profile's promotion poll would read it`)
  );
}
