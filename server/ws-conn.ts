/**
 * The production binding of the replication transport (common/transport.ts) to `ws`: a server-side
 * socket accepted on /replication, and the walreceiver's dialer to an upstream.
 */
import WebSocket from 'ws';
import type { ConnHandlers, Dialer, MessageConn } from '../common/transport.ts';

/** Wrap an open or connecting WebSocket. */
export function wsConn(ws: WebSocket): MessageConn {
  ws.binaryType = 'nodebuffer';
  let installed = false;
  return {
    get isOpen() {
      return ws.readyState === WebSocket.OPEN;
    },
    get bufferedAmount() {
      return ws.bufferedAmount;
    },
    setHandlers(h: ConnHandlers) {
      if (installed) throw new Error('connection handlers installed twice');
      installed = true;
      if (h.open) ws.on('open', () => h.open!());
      ws.on('message', (data: Buffer, isBinary: boolean) => h.message(data, isBinary));
      ws.on('close', (code: number, reason: Buffer) => h.close(code, reason.toString()));
      ws.on('error', (e: Error) => h.error?.(e));
    },
    send(data, cb) {
      ws.send(data, cb);
    },
    close(code, reason) {
      ws.close(code, reason);
    },
    terminate() {
      ws.terminate();
    },
  };
}

/** Dial `ws://host:port/replication` with the cluster token. */
export function wsReplicationDialer(host: string, port: number, token: string): Dialer {
  return () =>
    wsConn(
      new WebSocket(`ws://${host}:${port}/replication`, {
        headers: { authorization: `Bearer ${token}` },
        perMessageDeflate: false,
        maxPayload: 256 * 1024 * 1024,
      }),
    );
}
