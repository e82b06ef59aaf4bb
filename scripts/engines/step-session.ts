/**
 * The steps' connections to the nodes of one cluster (`StepSession`: one pipelined `pg` client per
 * node), the error a step run out of order throws (`StepOrderError`), and the engine and failover
 * types of either engine. steps.ts re-exports them; its own module so the session has no import
 * circle with the steps.
 *
 * Entry points: `StepSession`, `StepOrderError`, `AnyEngine`, `AnyFailover`.
 */
import type pg from 'pg';
import type { Engine, ExperimentNode } from './engine.ts';
import { connectPg, type WalsimFailover } from './walsim-engine.ts';
import type { PgFailover } from './pg-engine.ts';

/** Either engine's failover account (discriminated by `engine`). */
export type AnyFailover = WalsimFailover | PgFailover;
/** An engine of either kind, as the steps use it. */
export type AnyEngine = Engine<AnyFailover>;

/** A step run out of order: the message says which step (or command) to run first. */
export class StepOrderError extends Error {
  constructor(
    message: string,
    readonly runFirst: string,
  ) {
    super(message);
    this.name = 'StepOrderError';
  }
}

/** Statements in flight on one connection: the server still runs them one after another, in order. */
const PIPELINE_DEPTH = 32;

/**
 * Sessions per node that `runEach` spreads a step's statements over. Each statement is still its
 * own transaction; what concurrency changes is that commits of different sessions share a WAL
 * flush and a round trip to the synchronous standby (group commit), where one session's commits
 * each wait for their own.
 */
export const STEP_SESSIONS = 16;

/**
 * The connections of the steps to the nodes of one cluster, opened on first use: up to
 * STEP_SESSIONS pipelined `pg` clients per node, closed by `close` (the steps close the standby's
 * before anything is replayed that a session could hold up).
 */
export class StepSession {
  private readonly clients = new Map<ExperimentNode, pg.Client[]>();
  constructor(readonly engine: AnyEngine) {}

  get clusterDir(): string {
    return this.engine.clusterDir;
  }

  /** The node's first connection (opened on first use). */
  async client(node: ExperimentNode): Promise<pg.Client> {
    return (await this.sessions(node, 1))[0]!;
  }

  /** `n` connections to the node, the first the one `client` gives. */
  private async sessions(node: ExperimentNode, n: number): Promise<pg.Client[]> {
    const open = this.clients.get(node) ?? [];
    if (open.length >= n) return open.slice(0, n);
    const e = this.engine;
    if (open.length === 0) {
      if (!e.hasNode(node)) {
        throw new StepOrderError(
          `no ${e.name === 'walsim' ? 'walsim' : 'PostgreSQL'} cluster at ${e.clusterDir}; run "${e.startCommand}" first`,
          'cluster start',
        );
      }
      if (!(await e.isRunning(node))) {
        throw new StepOrderError(
          node === 'primary'
            ? `the primary of the cluster at ${e.clusterDir} is not running; run "${e.startCommand}" first (a stopped primary means this experiment already ran its stop step; start a fresh cluster)`
            : `the standby of the cluster at ${e.clusterDir} is not running; run "${e.startCommand}" first`,
          'cluster start',
        );
      }
    }
    this.clients.set(node, open);
    while (open.length < n)
      open.push(await connectPg(e.connectionString(node), 'walsim-experiment', true));
    return open.slice(0, n);
  }

  /** The first column of the first row of `sql` on `node`. */
  async scalar(node: ExperimentNode, sql: string): Promise<unknown> {
    const r = await (await this.client(node)).query({ text: sql, rowMode: 'array' });
    return r.rows[0]?.[0];
  }

  /**
   * Run each statement as its own transaction, spread round-robin over up to STEP_SESSIONS of the
   * node's connections (statement i on session i mod n, so each session runs its share in
   * order). Each session has up to PIPELINE_DEPTH sent ahead (the server reads a session's next
   * statement only after the previous finished); the first failure stops sending on every
   * session and is thrown. Returns the first column of each first row, in statement order.
   */
  async runEach(node: ExperimentNode, statements: string[]): Promise<unknown[]> {
    const sessions = await this.sessions(
      node,
      Math.max(1, Math.min(STEP_SESSIONS, statements.length)),
    );
    const out: unknown[] = new Array(statements.length);
    let failed = false;
    await Promise.all(
      sessions.map(async (c, k) => {
        const inFlight: Array<{ i: number; p: Promise<pg.QueryArrayResult> }> = [];
        const settle = async () => {
          const { i, p } = inFlight.shift()!;
          try {
            out[i] = (await p).rows[0]?.[0];
          } catch (e) {
            failed = true;
            throw e;
          }
        };
        for (let i = k; i < statements.length && !failed; i += sessions.length) {
          if (inFlight.length >= PIPELINE_DEPTH) await settle();
          if (failed) break;
          const p = c.query({ text: statements[i]!, rowMode: 'array' });
          p.catch(() => {}); // observed when awaited below; avoids an unhandled rejection meanwhile
          inFlight.push({ i, p });
        }
        while (inFlight.length > 0) await settle();
      }),
    );
    return out;
  }

  async close(node?: ExperimentNode): Promise<void> {
    for (const [n, cs] of [...this.clients]) {
      if (node !== undefined && n !== node) continue;
      this.clients.delete(n);
      for (const c of cs) await c.end().catch(() => {});
    }
  }
}
