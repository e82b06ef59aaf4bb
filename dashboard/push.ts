/**
 * The push socket `/live` (ws): upgrades pass the Guard, the path, the Origin and the page's
 * token, at most `maxSockets` at once; the page may send only "ping" (anything else closes its
 * socket, 4000; frames over `maxFrameBytes` close it, 1009). Every NodeView, removal and inferred
 * transition is broadcast; a page that does not read its socket misses views (each view replaces
 * the last) while more than `maxBufferedBytes` are unsent.
 *
 * Entry points: `PushHub`.
 */
import type * as http from 'node:http';
import type { Duplex } from 'node:stream';
import { WebSocketServer, type WebSocket } from 'ws';
import type { Guard } from './guard.ts';
import { rawReply } from './http-reply.ts';
import type { PushMessage } from './view.ts';

export interface PushLimits {
  maxFrameBytes: number;
  maxSockets: number;
  maxBufferedBytes: number;
}

export class PushHub {
  private readonly wss: WebSocketServer;
  private readonly sockets = new Set<WebSocket>();

  constructor(
    private readonly guard: Guard,
    private readonly limits: PushLimits,
    /** The first message of every socket: the meta, the graph, the nodes. */
    private readonly hello: () => PushMessage,
  ) {
    this.wss = new WebSocketServer({
      noServer: true,
      maxPayload: limits.maxFrameBytes,
      perMessageDeflate: false,
    });
  }

  /** The server's 'upgrade' listener. */
  upgrade = (req: http.IncomingMessage, socket: Duplex, head: Buffer): void => {
    socket.on('error', () => socket.destroy());
    const refused = this.refusal(req);
    if (refused !== null) {
      socket.end(rawReply(refused[0], refused[1]));
      return;
    }
    this.wss.handleUpgrade(req, socket, head, (ws) => this.accept(ws));
  };

  broadcast(m: PushMessage): void {
    for (const ws of this.sockets) this.push(ws, m);
  }

  close(): void {
    for (const ws of this.sockets) ws.terminate();
    this.wss.close();
  }

  private refusal(req: http.IncomingMessage): [number, string] | null {
    const r = this.guard.refusal(req);
    if (r !== null) return r;
    let url: URL;
    try {
      url = new URL(req.url ?? '/', 'http://dashboard');
    } catch {
      return [400, 'bad request path'];
    }
    if (url.pathname !== '/live') return [404, `no socket at ${url.pathname.slice(0, 100)}`];
    if (!this.guard.originOk(req)) return [403, 'cross-origin socket refused'];
    if (!this.guard.tokenOk(url.searchParams.get('token') ?? ''))
      return [403, 'missing or wrong token (reload the page)'];
    if (this.sockets.size >= this.limits.maxSockets)
      return [503, `too many dashboard sockets (at most ${this.limits.maxSockets})`];
    return null;
  }

  private accept(ws: WebSocket): void {
    this.sockets.add(ws);
    ws.on('close', () => this.sockets.delete(ws));
    ws.on('error', () => ws.terminate());
    ws.on('message', (data, isBinary) => {
      // The socket is push-only; the one message a page sends is "ping".
      if (!isBinary && data.toString() === 'ping') ws.send(JSON.stringify({ type: 'pong' }));
      else ws.close(4000, 'the dashboard socket accepts only "ping"');
    });
    this.push(ws, this.hello());
  }

  private push(ws: WebSocket, m: PushMessage): void {
    if (ws.readyState !== ws.OPEN) return;
    // A page that does not keep up misses views; the next one replaces them anyway.
    if (ws.bufferedAmount > this.limits.maxBufferedBytes && m.type === 'node') return;
    ws.send(JSON.stringify(m));
  }
}
