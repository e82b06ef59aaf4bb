/**
 * The replication transport, injected: one ordered, message-framed, bidirectional connection (what
 * a WebSocket gives). Production binds it to `ws` (server/ws-conn.ts); the simulator to its
 * in-memory network (sim/network.ts), which keeps messages ordered per connection, as WebSocket
 * does, and models loss only as a cut connection.
 */

/** Events of one connection. `open` fires once on the dialing side when the connection is up. */
export interface ConnHandlers {
  open?(): void;
  message(data: Uint8Array, isBinary: boolean): void;
  /** Fires once, after a close handshake, a cut (1006) or a terminate(). */
  close(code: number, reason: string): void;
  error?(err: Error): void;
}

export interface MessageConn {
  /** True between open and close: send() delivers only then. */
  readonly isOpen: boolean;
  /** Bytes queued for sending and not yet handed to the network (backpressure). */
  readonly bufferedAmount: number;
  /** Install the handlers (once, before any event is delivered). */
  setHandlers(h: ConnHandlers): void;
  /** Queue one binary message; `cb` runs once it has been handed to the network (or failed). */
  send(data: Uint8Array, cb?: (err?: Error) => void): void;
  /** Close with a handshake: the peer sees `code` and `reason`. */
  close(code: number, reason: string): void;
  /** Drop the connection without a handshake (the peer sees 1006). */
  terminate(): void;
}

/** Opens a connection to the upstream's replication endpoint (the walreceiver's side). */
export type Dialer = () => MessageConn;

/** primary_conninfo as the walreceiver needs it. */
export interface Upstream {
  host: string;
  port: number;
  applicationName: string;
}

/**
 * The dialer towards an upstream: production binds ws to host:port with the cluster's token
 * (server/ws-conn.ts, bound in server/main.ts), the simulator its in-memory network.
 */
export type UpstreamDialer = (upstream: Upstream) => Dialer;
