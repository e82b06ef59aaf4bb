/**
 * The dashboard's HTTP server (node:http) and its push socket (ws): serves the page and its
 * assets, the lifecycle graph, the results view's data, the four actions, and pushes every
 * NodeView and inferred lifecycle transition to each page over `/live`.
 *
 * Security (dashboard/README.md, invariants 4–7): binds 127.0.0.1 unless `listen` says otherwise,
 * and then only with the cluster's password (HTTP Basic); a request whose Host is not this
 * server's is refused (DNS rebinding); actions and the socket need the page's token and, from a
 * browser, this server's Origin (no other site can drive them); bodies, headers, frames and
 * connections are bounded.
 *
 * Entry points: `startDashboard`, `DashboardOptions`, `Dashboard`.
 */
import { randomBytes, timingSafeEqual } from 'node:crypto';
import * as fs from 'node:fs';
import * as http from 'node:http';
import * as path from 'node:path';
import type { Duplex } from 'node:stream';
import { WebSocketServer, type WebSocket } from 'ws';
import type { CostProfile } from '../cost-model/profile.ts';
import { ActionRefused, ACTIONS, parseActionRequest, runAction } from './actions.ts';
import { Collector, type ClusterSource } from './collector.ts';
import { lifecycleGraph } from './machine-graph.ts';
import { listResults, readResults } from './results.ts';
import type { ClusterMeta, PushMessage } from './view.ts';

export interface DashboardOptions {
  source: ClusterSource;
  /** 0: a free port. */
  port: number;
  listen: string;
  /** Required when `listen` is not a loopback address. */
  password: string | null;
  pollMs: number;
  profile: CostProfile;
  profileName: string;
  /** The folder of sweep results (`results/`). */
  resultsDir: string;
}

export interface Dashboard {
  url: string;
  port: number;
  token: string;
  collector: Collector;
  close(): Promise<void>;
}

/** Bounds (README "Limits"). */
export const LIMITS = {
  maxHeaderBytes: 8 * 1024,
  maxBodyBytes: 4 * 1024,
  maxFrameBytes: 1024,
  maxConnections: 64,
  maxSockets: 16,
  /** A page that does not read its socket is skipped while this much is unsent. */
  maxBufferedBytes: 1 << 20,
  headersTimeoutMs: 10_000,
  requestTimeoutMs: 30_000,
};

const PUBLIC = path.join(import.meta.dirname, 'public');
const MODULES = path.resolve(import.meta.dirname, '..', 'node_modules');

/** URL path → file and content type. Nothing else is served from disk. */
const ASSETS: Record<string, { file: string; type: string }> = {
  '/app.js': { file: path.join(PUBLIC, 'app.js'), type: 'text/javascript; charset=utf-8' },
  '/style.css': { file: path.join(PUBLIC, 'style.css'), type: 'text/css; charset=utf-8' },
  '/vendor/uPlot.iife.min.js': {
    file: path.join(MODULES, 'uplot', 'dist', 'uPlot.iife.min.js'),
    type: 'text/javascript; charset=utf-8',
  },
  '/vendor/uPlot.min.css': {
    file: path.join(MODULES, 'uplot', 'dist', 'uPlot.min.css'),
    type: 'text/css; charset=utf-8',
  },
};

const isLoopback = (addr: string) =>
  addr === '127.0.0.1' || addr === '::1' || addr === 'localhost' || addr.startsWith('127.');

function safeEqual(a: string, b: string): boolean {
  const x = Buffer.from(a);
  const y = Buffer.from(b);
  return x.length === y.length && timingSafeEqual(x, y);
}

export async function startDashboard(o: DashboardOptions): Promise<Dashboard> {
  if (!isLoopback(o.listen) && o.password === null)
    throw new Error(
      `--listen ${o.listen} opens the dashboard to other hosts: it needs the cluster's password (start the cluster with --password, and give the dashboard --password)`,
    );
  const token = randomBytes(24).toString('hex');
  const graph = await lifecycleGraph();
  const collector = new Collector(o.source, o.pollMs, o.profile);
  const meta = (): ClusterMeta => ({
    dir: o.source.dir,
    engine: o.source.engine,
    pollMs: o.pollMs,
    profile: o.profileName,
    actions: [...ACTIONS],
  });
  const indexHtml = fs
    .readFileSync(path.join(PUBLIC, 'index.html'), 'utf8')
    .replace('__DASHBOARD_TOKEN__', token);

  let port = o.port;
  const allowedHosts = () =>
    new Set([`127.0.0.1:${port}`, `localhost:${port}`, `[::1]:${port}`, `${o.listen}:${port}`]);

  /** Why this request may not proceed (status and message), or null. */
  const refusal = (req: http.IncomingMessage): [number, string] | null => {
    const host = req.headers.host ?? '';
    if (isLoopback(o.listen) && !allowedHosts().has(host))
      return [
        421,
        `unknown Host "${host.slice(0, 100)}": this dashboard answers to 127.0.0.1:${port}`,
      ];
    if (o.password !== null) {
      const auth = req.headers.authorization ?? '';
      const m = /^Basic ([A-Za-z0-9+/=]{1,1000})$/.exec(auth);
      const given = m ? Buffer.from(m[1]!, 'base64').toString('utf8') : '';
      const pw = given.slice(given.indexOf(':') + 1);
      if (!m || !given.includes(':') || !safeEqual(pw, o.password))
        return [401, 'password required'];
    }
    return null;
  };
  /** A browser's cross-site request carries another Origin; tools send none. */
  const originOk = (req: http.IncomingMessage) => {
    const origin = req.headers.origin;
    return origin === undefined || origin === `http://${req.headers.host}`;
  };

  const send = (
    res: http.ServerResponse,
    status: number,
    body: string | Buffer,
    type = 'text/plain; charset=utf-8',
    extra: http.OutgoingHttpHeaders = {},
  ) => {
    res.writeHead(status, {
      'content-type': type,
      'content-length': Buffer.byteLength(body),
      'x-content-type-options': 'nosniff',
      'cache-control': 'no-store',
      ...extra,
    });
    res.end(body);
  };
  const json = (res: http.ServerResponse, status: number, v: unknown) =>
    send(res, status, JSON.stringify(v), 'application/json; charset=utf-8');

  const handle = async (req: http.IncomingMessage, res: http.ServerResponse): Promise<void> => {
    const r = refusal(req);
    if (r !== null) {
      send(
        res,
        r[0],
        r[1] + '\n',
        'text/plain; charset=utf-8',
        r[0] === 401 ? { 'www-authenticate': 'Basic realm="walsim dashboard"' } : {},
      );
      return;
    }
    let url: URL;
    try {
      url = new URL(req.url ?? '/', 'http://dashboard');
    } catch {
      send(res, 400, 'bad request path\n');
      return;
    }
    const p = url.pathname;
    if (req.method === 'POST' && p === '/api/action') return action(req, res);
    if (req.method !== 'GET' && req.method !== 'HEAD') {
      send(res, 405, `method ${String(req.method).slice(0, 20)} not allowed\n`, undefined, {
        allow: 'GET, HEAD, POST',
      });
      return;
    }
    if (p === '/' || p === '/index.html') {
      send(res, 200, indexHtml, 'text/html; charset=utf-8', {
        'content-security-policy':
          "default-src 'self'; script-src 'self'; style-src 'self' 'unsafe-inline'; connect-src 'self'; img-src 'self' data:",
        'x-frame-options': 'DENY',
      });
      return;
    }
    const asset = ASSETS[p];
    if (asset !== undefined) {
      send(res, 200, fs.readFileSync(asset.file), asset.type);
      return;
    }
    if (p === '/favicon.ico') {
      res.writeHead(204).end();
      return;
    }
    if (p === '/api/graph') return json(res, 200, graph);
    if (p === '/api/nodes') return json(res, 200, { meta: meta(), nodes: collector.snapshot() });
    if (p === '/api/results')
      return json(res, 200, { dir: o.resultsDir, results: listResults(o.resultsDir) });
    if (p.startsWith('/api/results/')) {
      const name = decodeURIComponent(p.slice('/api/results/'.length));
      let r: ReturnType<typeof readResults>;
      try {
        r = readResults(o.resultsDir, name);
      } catch (e) {
        return json(res, 500, { error: `could not read results ${name}: ${(e as Error).message}` });
      }
      if (r === null)
        return json(res, 404, { error: `no sweep results named "${name.slice(0, 100)}"` });
      return json(res, 200, r);
    }
    send(res, 404, `no such page: ${p.slice(0, 200)}\n`);
  };

  const action = async (req: http.IncomingMessage, res: http.ServerResponse) => {
    if (!originOk(req)) return json(res, 403, { error: 'cross-origin request refused' });
    const t = req.headers['x-dashboard-token'];
    if (typeof t !== 'string' || !safeEqual(t, token))
      return json(res, 403, { error: 'missing or wrong x-dashboard-token (reload the page)' });
    const chunks: Buffer[] = [];
    let size = 0;
    let tooLarge = false;
    for await (const c of req as AsyncIterable<Buffer>) {
      size += c.length;
      if (size > LIMITS.maxBodyBytes) {
        tooLarge = true;
        break;
      }
      chunks.push(c);
    }
    if (tooLarge) {
      json(res, 413, { error: `body larger than ${LIMITS.maxBodyBytes} bytes` });
      req.destroy();
      return;
    }
    let parsed;
    try {
      parsed = parseActionRequest(Buffer.concat(chunks).toString('utf8'), o.source.nodeNames());
    } catch (e) {
      if (e instanceof ActionRefused) return json(res, 400, { error: e.message });
      throw e;
    }
    try {
      const r = await runAction(o.source.engine, o.source.dir, parsed, o.profile);
      json(res, 200, { ok: true, ...r });
    } catch (e) {
      const err = e as Error & { code?: string };
      json(res, 409, { ok: false, error: err.message, code: err.code ?? null });
    }
  };

  const server = http.createServer(
    {
      maxHeaderSize: LIMITS.maxHeaderBytes,
      headersTimeout: LIMITS.headersTimeoutMs,
      requestTimeout: LIMITS.requestTimeoutMs,
    },
    (req, res) => {
      handle(req, res).catch((e: unknown) => {
        if (!res.headersSent) send(res, 500, `internal error: ${(e as Error).message}\n`);
        else res.destroy();
      });
    },
  );
  server.maxConnections = LIMITS.maxConnections;
  server.on('clientError', (err: NodeJS.ErrnoException, socket: Duplex) => {
    // Malformed requests and oversized headers never reach `handle`: answer, then close.
    const status = err.code === 'HPE_HEADER_OVERFLOW' ? 431 : 400;
    if ((socket as { writable?: boolean }).writable)
      socket.end(
        `HTTP/1.1 ${status} ${http.STATUS_CODES[status]}\r\nconnection: close\r\ncontent-length: 0\r\n\r\n`,
      );
    else socket.destroy();
  });

  const wss = new WebSocketServer({
    noServer: true,
    maxPayload: LIMITS.maxFrameBytes,
    perMessageDeflate: false,
  });
  const sockets = new Set<WebSocket>();
  const refuseUpgrade = (socket: Duplex, status: number, message: string) => {
    socket.end(
      `HTTP/1.1 ${status} ${http.STATUS_CODES[status]}\r\nconnection: close\r\ncontent-type: text/plain\r\ncontent-length: ${Buffer.byteLength(message)}\r\n\r\n${message}`,
    );
  };
  server.on('upgrade', (req, socket, head) => {
    socket.on('error', () => socket.destroy());
    const r = refusal(req);
    if (r !== null) return refuseUpgrade(socket, r[0], r[1]);
    let url: URL;
    try {
      url = new URL(req.url ?? '/', 'http://dashboard');
    } catch {
      return refuseUpgrade(socket, 400, 'bad request path');
    }
    if (url.pathname !== '/live')
      return refuseUpgrade(socket, 404, `no socket at ${url.pathname.slice(0, 100)}`);
    if (!originOk(req)) return refuseUpgrade(socket, 403, 'cross-origin socket refused');
    const t = url.searchParams.get('token') ?? '';
    if (!safeEqual(t, token))
      return refuseUpgrade(socket, 403, 'missing or wrong token (reload the page)');
    if (sockets.size >= LIMITS.maxSockets)
      return refuseUpgrade(
        socket,
        503,
        `too many dashboard sockets (at most ${LIMITS.maxSockets})`,
      );
    wss.handleUpgrade(req, socket, head, (ws) => {
      sockets.add(ws);
      ws.on('close', () => sockets.delete(ws));
      ws.on('error', () => ws.terminate());
      ws.on('message', (data, isBinary) => {
        // The socket is push-only; the one message a page sends is "ping".
        if (!isBinary && data.toString() === 'ping') {
          ws.send(JSON.stringify({ type: 'pong' }));
          return;
        }
        ws.close(4000, 'the dashboard socket accepts only "ping"');
      });
      push(ws, { type: 'hello', meta: meta(), graph, nodes: collector.snapshot() });
    });
  });

  const push = (ws: WebSocket, m: PushMessage) => {
    if (ws.readyState !== ws.OPEN) return;
    // A page that does not keep up misses views; the next one replaces them anyway.
    if (ws.bufferedAmount > LIMITS.maxBufferedBytes && m.type === 'node') return;
    ws.send(JSON.stringify(m));
  };
  const broadcast = (m: PushMessage) => {
    for (const ws of sockets) push(ws, m);
  };
  collector.on({
    view: (node) => broadcast({ type: 'node', node }),
    removed: (name) => broadcast({ type: 'removed', name }),
    transitions: (node, at, fired) => broadcast({ type: 'transitions', node, at, fired }),
  });

  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen({ port: o.port, host: o.listen }, () => {
      server.off('error', reject);
      resolve();
    });
  });
  port = (server.address() as { port: number }).port;
  collector.start();
  const shownHost = o.listen === '0.0.0.0' ? '127.0.0.1' : o.listen;
  return {
    url: `http://${shownHost.includes(':') ? `[${shownHost}]` : shownHost}:${port}/`,
    port,
    token,
    collector,
    close: async () => {
      for (const ws of sockets) ws.terminate();
      wss.close();
      await collector.close();
      await new Promise<void>((r) => {
        server.close(() => r());
        server.closeAllConnections();
      });
    },
  };
}
