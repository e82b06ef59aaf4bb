/**
 * Client side of the control endpoint, used by the CLIs and the integration tests: connect with
 * the cluster token, send requests, await the matching replies.
 */
import WebSocket from 'ws';
import { WalsimError } from '../common/errors.ts';
import type { ControlReply, QueryResult, StopMode } from './control-protocol.ts';
import type { NodeInspection } from './node.ts';
import type { ServerStatus } from './node-status.ts';

export class ControlClient {
  private nextId = 1; // 0 is the server's greeting
  private readonly pending = new Map<
    number,
    { resolve(v: unknown): void; reject(e: Error): void }
  >();
  private closedReason: string | null = null;

  private constructor(private readonly ws: WebSocket) {
    ws.on('message', (data, isBinary) => {
      if (isBinary) return;
      let reply: ControlReply;
      try {
        reply = JSON.parse(data.toString()) as ControlReply;
      } catch {
        return;
      }
      const id = reply.id;
      if (id === null) return;
      const p = this.pending.get(id);
      if (!p) return;
      this.pending.delete(id);
      if (reply.ok) p.resolve(reply.result);
      else
        p.reject(
          new ControlError(
            reply.error.code,
            reply.error.message,
            reply.error.detail,
            reply.error.severity ?? 'ERROR',
          ),
        );
    });
    ws.on('close', (code, reason) => {
      this.closedReason = `connection closed (${code}${reason.length ? ': ' + reason.toString() : ''})`;
      for (const p of this.pending.values())
        p.reject(new WalsimError('not_connected', this.closedReason));
      this.pending.clear();
    });
  }

  /**
   * Connect and wait for the server's greeting (reply id 0), which it sends only after the token
   * was accepted; a refused token arrives as close code 4001 instead.
   */
  static connect(
    host: string,
    port: number,
    token: string,
    timeoutMs = 10_000,
  ): Promise<ControlClient> {
    return new Promise((resolve, reject) => {
      const ws = new WebSocket(`ws://${host}:${port}/control`, {
        headers: { authorization: `Bearer ${token}` },
        perMessageDeflate: false,
        handshakeTimeout: timeoutMs,
      });
      let settled = false;
      const onGreeting = (data: WebSocket.RawData) => {
        if (settled) return;
        settled = true;
        ws.off('message', onGreeting);
        let hello: ControlReply | null = null;
        try {
          hello = JSON.parse(data.toString()) as ControlReply;
        } catch {
          /* handled below */
        }
        if (hello?.id !== 0 || !hello.ok) {
          ws.terminate();
          reject(new WalsimError('protocol_violation', `unexpected greeting from ${host}:${port}`));
          return;
        }
        resolve(new ControlClient(ws));
      };
      ws.on('message', onGreeting);
      ws.once('close', (code, reason) => {
        if (settled) return;
        settled = true;
        reject(
          new WalsimError(
            code === 4001 ? 'auth_failed' : 'not_connected',
            `server closed the connection (${code}): ${reason.toString()}`,
          ),
        );
      });
      // `on`, not `once`: a second 'error' with no listener would throw in the client's process.
      ws.on('error', (err) => {
        if (settled) return;
        settled = true;
        reject(
          new WalsimError(
            'not_connected',
            `could not connect to server at ${host}:${port}: ${err.message}`,
          ),
        );
      });
    });
  }

  /** The connection has closed (the server stopped or restarted): requests would fail. */
  get closed(): boolean {
    return this.closedReason !== null;
  }

  request(body: Record<string, unknown>): Promise<unknown> {
    if (this.closedReason !== null)
      return Promise.reject(new WalsimError('not_connected', this.closedReason));
    const id = this.nextId++;
    return new Promise((resolve, reject) => {
      this.pending.set(id, { resolve, reject });
      this.ws.send(JSON.stringify({ ...body, id }));
    });
  }

  sql(sql: string): Promise<QueryResult> {
    return this.request({ op: 'sql', sql }) as Promise<QueryResult>;
  }

  status(): Promise<ServerStatus> {
    return this.request({ op: 'status' }) as Promise<ServerStatus>;
  }

  inspect(): Promise<NodeInspection> {
    return this.request({ op: 'inspect' }) as Promise<NodeInspection>;
  }

  stop(mode: StopMode): Promise<unknown> {
    return this.request({ op: 'stop', mode });
  }

  /** Send raw text (tests of malformed input). */
  sendRaw(text: string | Buffer): void {
    this.ws.send(text);
  }

  close(): void {
    this.ws.close(1000);
  }
}

/** An error reply from the server: PostgreSQL SQLSTATE code, message, DETAIL and severity. */
export class ControlError extends Error {
  constructor(
    readonly code: string,
    message: string,
    readonly detail?: string,
    readonly severity: 'ERROR' | 'FATAL' | 'WARNING' = 'ERROR',
  ) {
    super(message);
    this.name = 'ControlError';
  }
}
