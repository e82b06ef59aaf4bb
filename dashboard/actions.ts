/**
 * The page's four buttons — the seed's procedure: pause replay, resume replay, stop the primary
 * immediately, promote a standby — each through the code the CLIs run:
 *
 * | action | walsim | PostgreSQL |
 * | --- | --- | --- |
 * | pause / resume | `npm run sql`'s path: `connectNode` + `SELECT pg_wal_replay_pause()` / `_resume()` | the same statements over the PostgreSQL port (`pgConnect`) |
 * | stop-immediate | `cluster stop --mode immediate`'s `stopNode` (server/pg-ctl.ts) | `cluster stop --engine postgres`'s `pgCtl(…, 'stop', { mode: 'immediate' })` |
 * | promote | `cluster promote`'s `promoteNode` (scripts/promote.ts) | `PgEngine.promote` (`pg_ctl promote -w`) |
 *
 * Requests are validated here (`parseActionRequest`) before anything runs: unknown actions, nodes
 * not in the cluster and malformed bodies are refused with a message naming what was wrong.
 */
import { stopNode } from '../server/pg-ctl.ts';
import { connectNode } from '../scripts/cli.ts';
import { promoteNode } from '../scripts/promote.ts';
import { pgConnect, pgCtl, type PgNodeName } from '../scripts/postgres/pg-cluster.ts';
import { PgEngine } from '../scripts/postgres/pg-engine.ts';
import type { CostProfile } from '../cost-model/profile.ts';
import type { EngineName } from './view.ts';

export const ACTIONS = ['pause', 'resume', 'stop-immediate', 'promote'] as const;
export type ActionName = (typeof ACTIONS)[number];

export interface ActionRequest {
  action: ActionName;
  node: string;
}

export class ActionRefused extends Error {}

/** Validate a POST /api/action body. Throws ActionRefused naming the problem. */
export function parseActionRequest(body: string, nodes: readonly string[]): ActionRequest {
  let v: unknown;
  try {
    v = JSON.parse(body);
  } catch {
    throw new ActionRefused('body is not valid JSON');
  }
  if (typeof v !== 'object' || v === null || Array.isArray(v))
    throw new ActionRefused('body is not a JSON object');
  const o = v as Record<string, unknown>;
  if (typeof o.action !== 'string' || !(ACTIONS as readonly string[]).includes(o.action))
    throw new ActionRefused(`"action" must be one of ${ACTIONS.join(', ')}`);
  if (typeof o.node !== 'string' || !nodes.includes(o.node))
    throw new ActionRefused(`"node" must be one of the cluster's nodes (${nodes.join(', ')})`);
  return { action: o.action as ActionName, node: o.node };
}

const PROMOTE_WAIT_S = 60;

export async function runAction(
  engine: EngineName,
  dir: string,
  req: ActionRequest,
  profile: CostProfile,
): Promise<{ message: string; result: unknown }> {
  const { action, node } = req;
  if (engine === 'walsim') {
    switch (action) {
      case 'pause':
      case 'resume': {
        const c = await connectNode(dir, node);
        try {
          await c.sql(`SELECT pg_wal_replay_${action}()`);
        } finally {
          c.close();
        }
        return { message: `${node}: pg_wal_replay_${action}()`, result: null };
      }
      case 'stop-immediate': {
        const stopped = await stopNode(dir, node, 'immediate');
        return {
          message: `${node}: ${stopped ? 'stopped (immediate)' : 'not running'}`,
          result: { stopped },
        };
      }
      case 'promote': {
        const r = await promoteNode(dir, node, {
          wait: true,
          waitSeconds: PROMOTE_WAIT_S,
          profile,
        });
        return {
          message: r.promoted
            ? `${node}: server promoted`
            : `${node}: server did not promote within ${PROMOTE_WAIT_S} seconds`,
          result: r,
        };
      }
    }
  }
  const pgNode = node as PgNodeName;
  switch (action) {
    case 'pause':
    case 'resume': {
      const c = await pgConnect(dir, pgNode, 'walsim-dashboard');
      try {
        await c.query(`SELECT pg_wal_replay_${action}()`);
      } finally {
        await c.end();
      }
      return { message: `${node}: pg_wal_replay_${action}()`, result: null };
    }
    case 'stop-immediate':
      await pgCtl(dir, pgNode, 'stop', { mode: 'immediate' });
      return { message: `${node}: stopped (immediate)`, result: { stopped: true } };
    case 'promote':
      await new PgEngine(dir).promote(pgNode, PROMOTE_WAIT_S);
      return { message: `${node}: server promoted`, result: { promoted: true } };
  }
}
