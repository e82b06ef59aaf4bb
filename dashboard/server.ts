/**
 * The dashboard's server: assembles the Guard (guard.ts), the HTTP routes (routes.ts) on a
 * bounded node:http server, the push socket (push.ts) and the Collector, and listens.
 *
 * Security (dashboard/README.md, invariants 4–7): binds 127.0.0.1 unless `listen` says otherwise,
 * and then only with the cluster's password; with a password every request needs it (HTTP
 * Basic), on loopback too; a request whose Host is not this
 * server's is refused (DNS rebinding); actions and the socket need the page's token and, from a
 * browser, this server's Origin (no other site can drive them); bodies, headers, frames and
 * connections are bounded.
 *
 * Entry points: `startDashboard`, `DashboardOptions`, `Dashboard`, `LIMITS`.
 */
import { randomBytes } from 'node:crypto';
import * as http from 'node:http';
import type { Duplex } from 'node:stream';
import type { CostProfile } from '../cost-model/profile.ts';
import { ACTIONS } from './actions.ts';
import { Collector, type ClusterSource } from './collector.ts';
import { Guard } from './guard.ts';
import { rawReply, send } from './http-reply.ts';
import { lifecycleGraph } from './machine-graph.ts';
import { bundlePage } from './page-bundle.ts';
import type { PredictionSource } from './predictions.ts';
import { PushHub } from './push.ts';
import { routeHandler } from './routes.ts';
import type { ClusterMeta } from './view.ts';

export interface DashboardOptions {
  source: ClusterSource;
  /** 0: a free port. */
  port: number;
  listen: string;
  /** The cluster's password, asked of every request (HTTP Basic); required off loopback. */
  password: string | null;
  pollMs: number;
  profile: CostProfile;
  profileName: string;
  /** The folder of sweep results (`results/`). */
  resultsDir: string;
  /** A PostgreSQL cluster's predicted time to writable per standby (predictions.ts), if any. */
  predictions?: PredictionSource | null;
}

export interface Dashboard {
  url: string;
  port: number;
  token: string;
  collector: Collector;
  close(): Promise<void>;
}

/** Bounds (README "Invariants" 7). */
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

export async function startDashboard(o: DashboardOptions): Promise<Dashboard> {
  const guard = new Guard(o.listen, o.password, randomBytes(24).toString('hex'));
  const graph = await lifecycleGraph();
  const pageScript = await bundlePage();
  const collector = new Collector(o.source, o.pollMs, o.profile, o.predictions ?? null);
  const meta = (): ClusterMeta => ({
    dir: o.source.dir,
    engine: o.source.engine,
    pollMs: o.pollMs,
    profile: o.profileName,
    actions: [...ACTIONS],
  });
  const handle = routeHandler({
    ...o,
    guard,
    collector,
    graph,
    meta,
    maxBodyBytes: LIMITS.maxBodyBytes,
    pageScript,
  });
  const server = boundedServer(handle);
  const hub = new PushHub(guard, LIMITS, () => ({
    type: 'hello',
    meta: meta(),
    graph,
    nodes: collector.snapshot(),
  }));
  server.on('upgrade', hub.upgrade);
  collector.on({
    view: (node) => hub.broadcast({ type: 'node', node }),
    removed: (name) => hub.broadcast({ type: 'removed', name }),
    transitions: (node, at, fired) => hub.broadcast({ type: 'transitions', node, at, fired }),
  });
  guard.port = await listen(server, o.port, o.listen);
  collector.start();
  o.predictions?.start();
  return {
    url: pageUrl(o.listen, guard.port),
    port: guard.port,
    token: guard.token,
    collector,
    close: async () => {
      hub.close();
      await collector.close();
      await new Promise<void>((r) => {
        server.close(() => r());
        server.closeAllConnections();
      });
    },
  };
}

type Handler = (req: http.IncomingMessage, res: http.ServerResponse) => Promise<void>;

/** node:http with LIMITS; a handler's error is answered 500 (or its response cut), never thrown. */
function boundedServer(handle: Handler): http.Server {
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
    // Malformed requests and oversized headers never reach the handler: answer, then close.
    const status = err.code === 'HPE_HEADER_OVERFLOW' ? 431 : 400;
    if ((socket as { writable?: boolean }).writable) socket.end(rawReply(status));
    else socket.destroy();
  });
  return server;
}

/** Listen on host:port (0: a free one); resolves with the port. */
function listen(server: http.Server, port: number, host: string): Promise<number> {
  return new Promise((resolve, reject) => {
    server.once('error', reject);
    server.listen({ port, host }, () => {
      server.off('error', reject);
      resolve((server.address() as { port: number }).port);
    });
  });
}

function pageUrl(listenAddr: string, port: number): string {
  const host = listenAddr === '0.0.0.0' ? '127.0.0.1' : listenAddr;
  return `http://${host.includes(':') ? `[${host}]` : host}:${port}/`;
}
