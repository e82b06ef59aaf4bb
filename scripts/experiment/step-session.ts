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
import type { PgFailover } from '../postgres/pg-engine.ts';

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
 * The connections of the steps to the nodes of one cluster, opened on first use: one pipelined
 * `pg` client per node, closed by `close` (the steps close the standby's before anything is
 * replayed that a session could hold up).
 */
export class StepSession {
  private readonly clients = new Map<ExperimentNode, pg.Client>();
  constructor(readonly engine: AnyEngine) {}

  get clusterDir(): string {
    return this.engine.clusterDir;
  }

  async client(node: ExperimentNode): Promise<pg.Client> {
    const open = this.clients.get(node);
    if (open) return open;
    const e = this.engine;
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
    const c = await connectPg(e.connectionString(node), 'walsim-experiment', true);
    this.clients.set(node, c);
    return c;
  }

  /** The first column of the first row of `sql` on `node`. */
  async scalar(node: ExperimentNode, sql: string): Promise<unknown> {
    const r = await (await this.client(node)).query({ text: sql, rowMode: 'array' });
    return r.rows[0]?.[0];
  }

  /**
   * Run each statement, in order, as its own transaction over the node's one connection. Up to
   * PIPELINE_DEPTH are sent ahead (the server reads the next only after the previous finished);
   * the first failure stops sending and is thrown. Returns the first column of each first row.
   */
  async runEach(node: ExperimentNode, statements: string[]): Promise<unknown[]> {
    const c = await this.client(node);
    const inFlight: Array<Promise<pg.QueryArrayResult>> = [];
    const out: unknown[] = [];
    for (const text of statements) {
      if (inFlight.length >= PIPELINE_DEPTH) out.push((await inFlight.shift()!).rows[0]?.[0]);
      const p = c.query({ text, rowMode: 'array' });
      p.catch(() => {}); // observed when awaited below; avoids an unhandled rejection meanwhile
      inFlight.push(p);
    }
    for (const p of inFlight) out.push((await p).rows[0]?.[0]);
    return out;
  }

  async close(node?: ExperimentNode): Promise<void> {
    for (const [n, c] of [...this.clients]) {
      if (node !== undefined && n !== node) continue;
      this.clients.delete(n);
      await c.end().catch(() => {});
    }
  }
}
