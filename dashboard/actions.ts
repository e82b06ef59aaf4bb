/**
 * The page's four buttons — the seed's procedure: pause replay, resume replay, stop the primary
 * immediately, promote a standby — each through the code the CLIs run:
 *
 * | action | walsim | PostgreSQL |
 * | --- | --- | --- |
 * | pause / resume | `npm run sql`'s path: `connectNode` + `SELECT pg_wal_replay_pause()` / `_resume()` | the same statements over the PostgreSQL port (`pgConnect`) |
 * | stop-immediate | `cluster stop --mode immediate`'s `stopNode` (server/pg-ctl.ts) under the cluster lock | `cluster stop --engine postgres`'s `stopPgNode` |
 * | promote | `cluster promote`'s `promoteNode` (scripts/cluster/promote.ts) under the cluster lock | the experiment's resume step's `PgEngine.promote` (`pg_ctl promote -w`) |
 *
 * The walsim stop and promote take the cluster lock as the CLI does (scripts/cluster/lock.ts), waiting
 * at most LOCK_WAIT_MS for a CLI operation in progress; then the button answers 409 naming it.
 *
 * Requests are validated here (`parseActionRequest`) before anything runs: unknown actions, nodes
 * not in the cluster and malformed bodies are refused with a message naming what was wrong.
 */
import { stopNode } from '../server/pg-ctl.ts';
import { connectNode } from '../scripts/cli/command.ts';
import { promoteNode } from '../scripts/cluster/promote.ts';
import { locked } from '../scripts/cluster/lock.ts';
import { pgConnect, stopPgNode, type PgNodeName } from '../scripts/postgres/pg-cluster.ts';
import { PgEngine } from '../scripts/engines/pg-engine.ts';
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
const LOCK_WAIT_MS = 10_000;

type ActionResult = { message: string; result: unknown };

export function runAction(
  engine: EngineName,
  dir: string,
  req: ActionRequest,
  profile: CostProfile,
): Promise<ActionResult> {
  return engine === 'walsim' ? walsimAction(dir, req, profile) : pgAction(dir, req);
}

async function walsimAction(
  dir: string,
  { action, node }: ActionRequest,
  profile: CostProfile,
): Promise<ActionResult> {
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
      const stopped = await locked(
        dir,
        'dashboard stop-immediate',
        () => stopNode(dir, node, 'immediate'),
        LOCK_WAIT_MS,
      );
      return {
        message: `${node}: ${stopped ? 'stopped (immediate)' : 'not running'}`,
        result: { stopped },
      };
    }
    case 'promote': {
      const r = await locked(
        dir,
        'dashboard promote',
        () => promoteNode(dir, node, { wait: true, waitSeconds: PROMOTE_WAIT_S, profile }),
        LOCK_WAIT_MS,
      );
      return {
        message: r.promoted
          ? `${node}: server promoted`
          : `${node}: server did not promote within ${PROMOTE_WAIT_S} seconds`,
        result: r,
      };
    }
  }
}

async function pgAction(dir: string, { action, node }: ActionRequest): Promise<ActionResult> {
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
    case 'stop-immediate': {
      const stopped = await stopPgNode(dir, pgNode, 'immediate');
      return {
        message: `${node}: ${stopped ? 'stopped (immediate)' : 'not running'}`,
        result: { stopped },
      };
    }
    case 'promote':
      await new PgEngine(dir).promote(pgNode, PROMOTE_WAIT_S);
      return { message: `${node}: server promoted`, result: { promoted: true } };
  }
}
