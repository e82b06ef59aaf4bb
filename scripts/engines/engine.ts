/**
 * What an engine is to the experiment steps: a way to create, start, stop and promote the nodes
 * of a primary + standby pair, a connection string per node, and its own way of observing a
 * failover. The steps (steps.ts) exist once and send every statement through the `pg` client to
 * those connection strings; walsim (walsim-engine.ts) and real PostgreSQL (pg-engine.ts)
 * differ only here.
 *
 * Entry points: `Engine`, `EngineKind`, `NewClusterSettings`, `FailoverWindow`, `FailoverInstants`,
 * `FailoverObserver`, `EngineFailover`.
 *
 * The resume step, engine by engine:
 *   1. `prepareFailover(window)` — before the timed window (PostgreSQL: pg_waldump over the WAL the
 *      standby will replay; walsim: open the connection promotion will use);
 *   2. the step runs `resumeSql` on the standby and closes its session (no session stays on the
 *      standby while it replays: on PostgreSQL its snapshots conflict with replayed catalog
 *      prunes);
 *   3. `promote('standby', waitSeconds)` (PostgreSQL: `pg_ctl promote -w`; walsim:
 *      `SELECT pg_promote(true, N)`), timed by the client for the seed's method;
 *   4. `observer.finish(instants)` — the engine's account: walsim's failover report (server
 *      clock, exact counters) through `SELECT walsim_failover_report()`, priced with the window's profile;
 *      PostgreSQL's standby log and the waldump of step 1.
 */
import type { CostProfile } from '../../cost-model/profile.ts';
import type { FreshClusterSettings } from './fresh-cluster.ts';
import type { Engine as EngineName } from '../report/records.ts';

/** The experiment steps' workloads: seed 001's rel.sh (Test A) and test.sh (Test B). */
export type Workload = 'rel' | 'multi';
export const ENGINE_NAMES: readonly EngineName[] = ['walsim', 'postgres'];

/** The two nodes an experiment uses: the primary it writes on, the standby whose failover it measures. */
export type ExperimentNode = 'primary' | 'standby';

/** What the resume step hands the engine before the timed window. */
export interface FailoverWindow {
  workload: Workload;
  /** Replay LSN when the standby paused: the start of the WAL replayed at failover (null: unknown). */
  pauseLsn: string | null;
  /** The primary's flush LSN the standby had flushed when the primary stopped: its end (null: unknown). */
  endLsn: string | null;
  /** The standby's pg_last_wal_receive_lsn() just before the resume. */
  receivedLsn: string;
  /** How long promotion may take. */
  waitSeconds: number;
  /**
   * The cost profile the walsim engine prices the failover's counts with: the caller's choice, never
   * a default of its own (required by walsim; real PostgreSQL has no modeled seconds).
   */
  profile?: CostProfile;
}

/** Instants the step took around the resume and the promotion (epoch ms). */
export interface FailoverInstants {
  /** Client clock just before the resume statement was sent. */
  clientResumeMs: number;
  /** The server's clock when it resumed replay (second column of `resumeSql`), or null. */
  serverResumeMs: number | null;
  /** Client clock just before `promote` was called. */
  promoteRequestedMs: number;
  /** Client clock when `promote` returned (the node accepts writes). */
  clientPromotedMs: number;
}

/** The fields every engine's account of a failover has (the resume step's JSON), and its human lines. */
export interface EngineFailover {
  engine: EngineName;
  /** Resume → read-write, from the server's clocks, ms. */
  failoverMs: number;
  resumeAt: string;
  promotedAt: string;
  phases: {
    replayMs: number | null;
    endOfRecoveryMs: number | null;
    openForWritesMs: number | null;
    checkpointMs: number | null;
  };
  recordsReplayed: number;
  newTimeline: number | null;
  promoted: boolean;
  lines: string[];
}

/**
 * How one engine observes a failover: `F` is its account (walsim-engine.ts WalsimFailover,
 * pg-engine.ts PgFailover; step-session.ts names their union). Generic so that this interface
 * does not import the engines that implement it.
 */
export interface FailoverObserver<F extends EngineFailover = EngineFailover> {
  /** After promotion: read the engine's record of the failover. */
  finish(instants: FailoverInstants): Promise<F>;
}

export interface Engine<F extends EngineFailover = EngineFailover> {
  readonly name: EngineName;
  readonly clusterDir: string;
  /** Added to step commands in messages: '' (walsim) or ' --engine postgres'. */
  readonly stepFlag: string;
  /** The command that starts a cluster of this engine in `clusterDir` (for "run … first" messages). */
  readonly startCommand: string;
  /** Does the directory hold this node of a cluster of this engine (running or not)? */
  hasNode(node: ExperimentNode): boolean;
  isRunning(node: ExperimentNode): Promise<boolean>;
  /** libpq connection URI of a running node (127.0.0.1, user and database postgres). */
  connectionString(node: ExperimentNode): string;
  start(node: ExperimentNode): Promise<void>;
  /** pg_ctl stop -m MODE, waiting until the node is gone. */
  stop(node: ExperimentNode, mode: 'smart' | 'fast' | 'immediate'): Promise<void>;
  /** Promote and wait until the node accepts writes; throws when it did not within waitSeconds. */
  promote(node: ExperimentNode, waitSeconds: number): Promise<void>;
  /** The statement that resumes replay; a second column, when present, is the server's clock then (epoch seconds). */
  readonly resumeSql: string;
  /** The statement answering 'not paused' | 'pause requested' | 'paused' (PostgreSQL 13 has no pause_state). */
  readonly pauseStateSql: string;
  /** Step 1 of the resume (see the file header); the observer finishes the account after promotion. */
  prepareFailover(window: FailoverWindow): Promise<FailoverObserver<F>>;
  /**
   * Why replay on `node` cannot continue (walsim: its startup process stopped on a redo error), or
   * null. Polled while waiting for replay, so a broken standby fails the step at once.
   */
  replayFailure(node: ExperimentNode): Promise<string | null>;
  /** Release what the engine holds open (connections); the cluster keeps running. */
  close(): Promise<void>;
}

/** Settings of a fresh cluster for one sweep run: walsim's (drop path, threshold, standbys; PostgreSQL 15 is cached-lookup, divisor 32) plus `--pg-bin`. */
export interface NewClusterSettings extends FreshClusterSettings {
  /** PostgreSQL only: `--pg-bin` (pg-bin.ts `resolvePgBin`, with FreshClusterSettings.pgVersion). */
  pgBin?: string;
}

/** How to make and remove clusters of one engine. */
export interface EngineKind<F extends EngineFailover = EngineFailover> {
  readonly name: EngineName;
  /** Initialise `dir` (missing or empty), start both nodes, wait until the standby streams. */
  createCluster(dir: string, s: NewClusterSettings): Promise<Engine<F>>;
  /** Stop every node immediately (verified pids only) and remove `dir`. */
  destroyCluster(dir: string): Promise<void>;
}
