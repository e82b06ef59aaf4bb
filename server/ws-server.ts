/**
 * The node's one WebSocket port: `/replication` (walsender side) and `/control` (CLI commands).
 * Both require the cluster token; authentication happens in the HTTP upgrade handler, and a
 * refused client gets a WebSocket close with code 4001 and a reason that says why. Every accepted
 * socket has an 'error' listener from its first moment, so no frame can end the process.
 */
import * as http from 'node:http';
import { timingSafeEqual } from 'node:crypto';
import type { AddressInfo } from 'node:net';
import { WebSocketServer, type WebSocket } from 'ws';

import { CLOSE_AUTH_FAILED } from '../protocol/messages.ts';
export {
  CLOSE_AUTH_FAILED,
  CLOSE_PROTOCOL_VIOLATION,
  CLOSE_SHUTTING_DOWN,
  CLOSE_REPLICATION_REFUSED,
} from '../protocol/messages.ts';

export type Endpoint = 'replication' | 'control';

export interface WsServerOptions {
  host: string;
  port: number;
  token: string;
  maxPayload: Record<Endpoint, number>;
  onConnection(endpoint: Endpoint, ws: WebSocket, req: http.IncomingMessage): void;
}

export interface WsServerHandle {
  port: number;
  close(): Promise<void>;
  /** Every open socket, for fast/immediate shutdown. */
  sockets(): WebSocket[];
}

function tokenMatches(expected: string, given: string | null): boolean {
  if (given === null) return false;
  const a = Buffer.from(expected);
  const b = Buffer.from(given);
  return a.length === b.length && timingSafeEqual(a, b);
}

/** The token from `Authorization: Bearer <token>` (preferred) or `?token=`. */
function tokenOf(req: http.IncomingMessage, url: URL): string | null {
  const auth = req.headers.authorization;
  if (auth?.startsWith('Bearer ')) return auth.slice('Bearer '.length).trim();
  return url.searchParams.get('token');
}

export async function startWsServer(opts: WsServerOptions): Promise<WsServerHandle> {
  const server = http.createServer((_req, res) => {
    res.writeHead(426, { 'content-type': 'text/plain' });
    res.end('walsim speaks WebSocket on /replication and /control\n');
  });
  const wssByEndpoint: Record<Endpoint, WebSocketServer> = {
    replication: new WebSocketServer({
      noServer: true,
      maxPayload: opts.maxPayload.replication,
      perMessageDeflate: false,
    }),
    control: new WebSocketServer({
      noServer: true,
      maxPayload: opts.maxPayload.control,
      perMessageDeflate: false,
    }),
  };
  server.on('upgrade', (req, socket, head) => {
    socket.on('error', () => socket.destroy());
    const url = new URL(req.url ?? '/', 'http://localhost');
    const endpoint = url.pathname.replace(/^\//, '') as Endpoint;
    const wss = wssByEndpoint[endpoint];
    if (wss === undefined) {
      socket.end(
        'HTTP/1.1 404 Not Found\r\nConnection: close\r\n\r\nunknown endpoint; use /replication or /control\n',
      );
      return;
    }
    const given = tokenOf(req, url);
    wss.handleUpgrade(req, socket, head, (ws) => {
      // Before anything else: ws reports a malformed or oversized frame as an 'error' event, and
      // an EventEmitter with no listener throws it (an uncaught exception would end the process).
      // ws closes the connection itself (1002/1009) after emitting it. This covers the refused
      // clients below, whose frames are still parsed while their close handshake runs, and the
      // window before the endpoint's own handlers are installed.
      ws.on('error', () => {});
      if (!tokenMatches(opts.token, given)) {
        ws.close(
          CLOSE_AUTH_FAILED,
          given === null
            ? 'authentication failed: no token given'
            : 'authentication failed: wrong token',
        );
        return;
      }
      opts.onConnection(endpoint, ws, req);
    });
  });
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(opts.port, opts.host, () => resolve());
  });
  const port = (server.address() as AddressInfo).port;
  return {
    port,
    sockets: () => [...wssByEndpoint.replication.clients, ...wssByEndpoint.control.clients],
    close: () =>
      new Promise<void>((resolve) => {
        for (const wss of Object.values(wssByEndpoint)) {
          for (const ws of wss.clients) ws.terminate();
          wss.close();
        }
        server.close(() => resolve());
        server.closeAllConnections();
      }),
  };
}
