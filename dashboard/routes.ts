/**
 * The dashboard's HTTP routes: the page (with its token and a strict CSP) and its assets, the
 * lifecycle graph, the nodes' views, the results view's data, and POST /api/action. Nothing but
 * the files in ASSETS is served from disk; /app.js is the page's bundle, made at start. Every request passes the Guard first.
 *
 * Entry points: `routeHandler`, `RouteContext`.
 */
import * as fs from 'node:fs';
import type * as http from 'node:http';
import * as path from 'node:path';
import type { CostProfile } from '../cost-model/profile.ts';
import { ActionRefused, parseActionRequest, runAction } from './actions.ts';
import type { ClusterSource, Collector } from './collector.ts';
import type { Guard } from './guard.ts';
import { readBody, send, sendJson } from './http-reply.ts';
import type { LifecycleGraph } from './machine-graph.ts';
import { listResults, readResults } from './results.ts';
import type { ClusterMeta } from './view.ts';

export const PUBLIC = path.join(import.meta.dirname, 'public');
const MODULES = path.resolve(import.meta.dirname, '..', 'node_modules');
const JS = 'text/javascript; charset=utf-8';
const CSS = 'text/css; charset=utf-8';

/** URL path → file and content type. */
const ASSETS: Record<string, { file: string; type: string }> = {
  '/style.css': { file: path.join(PUBLIC, 'style.css'), type: CSS },
  '/vendor/uPlot.iife.min.js': {
    file: path.join(MODULES, 'uplot', 'dist', 'uPlot.iife.min.js'),
    type: JS,
  },
  '/vendor/uPlot.min.css': {
    file: path.join(MODULES, 'uplot', 'dist', 'uPlot.min.css'),
    type: CSS,
  },
};

const PAGE_HEADERS = {
  'content-security-policy':
    "default-src 'self'; script-src 'self'; style-src 'self' 'unsafe-inline'; connect-src 'self'; img-src 'self' data:",
  'x-frame-options': 'DENY',
};

export interface RouteContext {
  guard: Guard;
  source: ClusterSource;
  collector: Collector;
  graph: LifecycleGraph;
  meta: () => ClusterMeta;
  profile: CostProfile;
  resultsDir: string;
  maxBodyBytes: number;
  /** /app.js: the page's script, bundled from dashboard/page/ at start (page-bundle.ts). */
  pageScript: string;
}

/** The request handler: refusals, then POST /api/action or a GET route. */
export function routeHandler(ctx: RouteContext) {
  const indexHtml = fs
    .readFileSync(path.join(PUBLIC, 'index.html'), 'utf8')
    .replace('__DASHBOARD_TOKEN__', ctx.guard.token);
  return async (req: http.IncomingMessage, res: http.ServerResponse): Promise<void> => {
    const r = ctx.guard.refusal(req);
    if (r !== null) {
      const ask = r[0] === 401 ? { 'www-authenticate': 'Basic realm="walsim dashboard"' } : {};
      return send(res, r[0], r[1] + '\n', undefined, ask);
    }
    let p: string;
    try {
      p = new URL(req.url ?? '/', 'http://dashboard').pathname;
    } catch {
      return send(res, 400, 'bad request path\n');
    }
    if (req.method === 'POST' && p === '/api/action') return action(ctx, req, res);
    if (req.method !== 'GET' && req.method !== 'HEAD')
      return send(res, 405, `method ${String(req.method).slice(0, 20)} not allowed\n`, undefined, {
        allow: 'GET, HEAD, POST',
      });
    if (p === '/' || p === '/index.html')
      return send(res, 200, indexHtml, 'text/html; charset=utf-8', PAGE_HEADERS);
    get(ctx, p, res);
  };
}

function get(ctx: RouteContext, p: string, res: http.ServerResponse): void {
  const asset = ASSETS[p];
  if (asset !== undefined) return send(res, 200, fs.readFileSync(asset.file), asset.type);
  if (p === '/app.js') return send(res, 200, ctx.pageScript, JS);
  if (p === '/favicon.ico') return void res.writeHead(204).end();
  if (p === '/api/graph') return sendJson(res, 200, ctx.graph);
  if (p === '/api/nodes')
    return sendJson(res, 200, { meta: ctx.meta(), nodes: ctx.collector.snapshot() });
  if (p === '/api/results')
    return sendJson(res, 200, { dir: ctx.resultsDir, results: listResults(ctx.resultsDir) });
  if (p.startsWith('/api/results/'))
    return sweep(ctx, decodeURIComponent(p.slice('/api/results/'.length)), res);
  send(res, 404, `no such page: ${p.slice(0, 200)}\n`);
}

function sweep(ctx: RouteContext, name: string, res: http.ServerResponse): void {
  let r: ReturnType<typeof readResults>;
  try {
    r = readResults(ctx.resultsDir, name);
  } catch (e) {
    return sendJson(res, 500, { error: `could not read results ${name}: ${(e as Error).message}` });
  }
  if (r === null)
    return sendJson(res, 404, { error: `no sweep results named "${name.slice(0, 100)}"` });
  sendJson(res, 200, r);
}

/** POST /api/action: the token and Origin, a bounded body, validated, then run (actions.ts). */
async function action(
  ctx: RouteContext,
  req: http.IncomingMessage,
  res: http.ServerResponse,
): Promise<void> {
  if (!ctx.guard.originOk(req))
    return sendJson(res, 403, { error: 'cross-origin request refused' });
  if (!ctx.guard.tokenOk(req.headers['x-dashboard-token']))
    return sendJson(res, 403, { error: 'missing or wrong x-dashboard-token (reload the page)' });
  const body = await readBody(req, ctx.maxBodyBytes);
  if (body === null) {
    sendJson(res, 413, { error: `body larger than ${ctx.maxBodyBytes} bytes` });
    req.destroy();
    return;
  }
  let parsed;
  try {
    parsed = parseActionRequest(body, ctx.source.nodeNames());
  } catch (e) {
    if (e instanceof ActionRefused) return sendJson(res, 400, { error: e.message });
    throw e;
  }
  try {
    const r = await runAction(ctx.source.engine, ctx.source.dir, parsed, ctx.profile);
    sendJson(res, 200, { ok: true, ...r });
  } catch (e) {
    const err = e as Error & { code?: string };
    sendJson(res, 409, { ok: false, error: err.message, code: err.code ?? null });
  }
}
