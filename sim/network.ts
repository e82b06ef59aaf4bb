/**
 * The simulator's network: in-memory replication connections (common/transport.ts) between named
 * hosts, on the scheduler's time. What it may do is what a WebSocket over TCP may do:
 * - messages on one connection arrive in order, each after the link's one-way delay (drawn per
 *   message, but never overtaking the one before), and bufferedAmount counts bytes not yet handed
 *   over, so the walsender's backpressure is exercised;
 * - loss is only a cut connection: both ends see close 1006 after a detection delay and the
 *   messages still in flight are lost (TCP never drops one message and delivers the next);
 * - a partition between two hosts cuts their connections and refuses new ones until it heals;
 * - a crashed process's connections are cut, and a host with no listener refuses connections.
 */
import type { ConnHandlers, Dialer, MessageConn } from '../common/transport.ts';
import type { SeededRandom } from '../common/random.ts';
import type { Scheduler } from './scheduler.ts';
import { crc32c } from '../wal/crc32c.ts';
import { osError } from './os-error.ts';

export const CLOSE_ABNORMAL = 1006;

export interface LinkProfile {
  /** One-way delay per message: min + an exponential-ish tail up to max, in ms. */
  delayMinMs: number;
  delayMaxMs: number;
  /** Time until a cut is noticed by the endpoints (TCP keepalive / RST), in ms. */
  cutDetectMs: number;
}

export interface NetworkCounters {
  connects: number;
  refused: number;
  messages: number;
  bytes: number;
  cuts: number;
  partitions: number;
}

class Endpoint implements MessageConn {
  handlers: ConnHandlers | null = null;
  peer!: Endpoint;
  open = false;
  closed = false;
  bufferedAmount = 0;
  /** Delivery time of the last message sent from this end (FIFO: the next never arrives earlier). */
  lastArrival = 0;
  /** Generation of in-flight deliveries; a cut bumps it so they are lost. */
  epoch = 0;

  constructor(
    private readonly net: Network,
    readonly host: string,
    /** The process incarnation whose events these are (the scheduler owner). */
    readonly owner: string,
    readonly conn: Connection,
  ) {}

  get isOpen(): boolean {
    return this.open && !this.closed;
  }

  setHandlers(h: ConnHandlers): void {
    if (this.handlers !== null) throw new Error('connection handlers installed twice');
    this.handlers = h;
  }

  send(data: Uint8Array, cb?: (err?: Error) => void): void {
    if (!this.isOpen) {
      cb?.(new Error('WebSocket is not open'));
      return;
    }
    this.net.transmit(this, data, cb);
  }

  close(code: number, reason: string): void {
    if (this.closed) return;
    this.net.closeGracefully(this, code, reason);
  }

  terminate(): void {
    if (this.closed) return;
    this.net.cut(this.conn, 'terminate', this);
  }
}

class Connection {
  readonly client: Endpoint;
  readonly server: Endpoint;
  constructor(
    net: Network,
    readonly from: string,
    fromOwner: string,
    readonly to: string,
    toOwner: string,
  ) {
    this.client = new Endpoint(net, from, fromOwner, this);
    this.server = new Endpoint(net, to, toOwner, this);
    this.client.peer = this.server;
    this.server.peer = this.client;
  }
}

export class Network {
  private readonly listeners = new Map<
    string,
    { owner: string; accept(conn: MessageConn): void }
  >();
  private readonly partitions = new Set<string>();
  private readonly conns = new Set<Connection>();
  readonly counters: NetworkCounters = {
    connects: 0,
    refused: 0,
    messages: 0,
    bytes: 0,
    cuts: 0,
    partitions: 0,
  };

  constructor(
    private readonly sched: Scheduler,
    private readonly rng: SeededRandom,
    public profile: LinkProfile,
  ) {}

  private key(a: string, b: string): string {
    return a < b ? `${a}|${b}` : `${b}|${a}`;
  }

  isPartitioned(a: string, b: string): boolean {
    return this.partitions.has(this.key(a, b));
  }

  private delay(): number {
    const { delayMinMs, delayMaxMs } = this.profile;
    const u = this.rng.float();
    return delayMinMs + Math.floor((delayMaxMs - delayMinMs) * u * u * u);
  }

  /** `host`'s process `owner` accepts replication connections. */
  listen(host: string, owner: string, accept: (conn: MessageConn) => void): void {
    this.listeners.set(host, { owner, accept });
  }

  /** A dialer from `from` (process `owner`) to whatever listens on `to`. */
  dialer(from: string, owner: string, to: () => string): Dialer {
    return () => this.dial(from, owner, to());
  }

  private dial(from: string, owner: string, to: string): MessageConn {
    const target = this.listeners.get(to);
    const conn = new Connection(this, from, owner, to, target?.owner ?? `${to}#none`);
    this.conns.add(conn);
    const d = this.delay();
    this.sched.at(d, owner, `net connect ${from}->${to}`, () => {
      const listener = this.listeners.get(to);
      // Cut before it was established (a partition or a process exit while the SYN was in
      // flight): it never opens. An open connection outside `conns` would escape later cuts.
      const cutMeanwhile = !this.conns.has(conn);
      if (
        cutMeanwhile ||
        listener === undefined ||
        listener.owner !== conn.server.owner ||
        this.isPartitioned(from, to) ||
        this.sched.isDead(listener.owner)
      ) {
        this.counters.refused++;
        this.finish(
          conn.client,
          CLOSE_ABNORMAL,
          '',
          osError(`connect ECONNREFUSED ${to}`, 'ECONNREFUSED'),
        );
        conn.server.closed = true;
        this.conns.delete(conn);
        return;
      }
      this.counters.connects++;
      conn.client.open = conn.server.open = true;
      listener.accept(conn.server);
      conn.client.handlers?.open?.();
    });
    return conn.client;
  }

  /** Hand a message to the network: it arrives after the link delay, in order. */
  transmit(from: Endpoint, data: Uint8Array, cb?: (err?: Error) => void): void {
    const to = from.peer;
    const bytes = data.slice();
    from.bufferedAmount += bytes.length;
    this.counters.messages++;
    this.counters.bytes += bytes.length;
    const arrival = Math.max(this.sched.now + this.delay(), from.lastArrival);
    from.lastArrival = arrival;
    const epoch = from.epoch;
    // The label carries the bytes' CRC-32C: the trace (and its hash) says "same bytes", not just "same sizes".
    const label = `net deliver ${from.host}->${to.host} ${bytes.length}B crc ${crc32c(bytes).toString(16).padStart(8, '0')}`;
    this.sched.at(arrival - this.sched.now, to.owner, label, () => {
      if (epoch !== from.epoch || to.closed) return;
      from.bufferedAmount -= bytes.length;
      to.handlers?.message(bytes, true);
      // The sender learns the bytes left its queue (ws's send callback) on its own side.
      if (cb !== undefined) this.sched.at(0, from.owner, 'net sent', () => cb());
    });
  }

  /** Close handshake: both ends see the code after in-flight messages arrive. */
  closeGracefully(from: Endpoint, code: number, reason: string): void {
    const to = from.peer;
    from.open = false;
    const arrival = Math.max(this.sched.now + this.delay(), from.lastArrival);
    const epoch = from.epoch;
    this.sched.at(
      arrival - this.sched.now,
      to.owner,
      `net close ${from.host}->${to.host} ${code}`,
      () => {
        if (epoch !== from.epoch) return;
        this.finish(to, code, reason);
        this.finish(from, code, reason);
        this.conns.delete(from.conn);
      },
    );
  }

  private finish(e: Endpoint, code: number, reason: string, err?: Error): void {
    if (e.closed) return;
    e.closed = true;
    e.open = false;
    e.epoch++;
    e.bufferedAmount = 0;
    const h = e.handlers;
    this.sched.at(0, e.owner, `net closed ${e.host} ${code}`, () => {
      if (err !== undefined) h?.error?.(err);
      h?.close(code, reason);
    });
  }

  /**
   * Cut a connection: messages in flight are lost; the side that terminated sees the close at
   * once, the other after the detection delay (both see 1006).
   */
  cut(conn: Connection, why: string, by: Endpoint | null = null): void {
    if (!this.conns.delete(conn)) {
      if (by !== null) this.finish(by, CLOSE_ABNORMAL, '');
      return;
    }
    this.counters.cuts++;
    conn.client.epoch++;
    conn.server.epoch++;
    for (const e of [conn.client, conn.server]) {
      e.open = false;
      if (e === by) this.finish(e, CLOSE_ABNORMAL, '');
      else {
        this.sched.at(this.profile.cutDetectMs, e.owner, `net cut ${why}`, () =>
          this.finish(e, CLOSE_ABNORMAL, ''),
        );
      }
    }
  }

  /** Cut every open connection between two hosts (or of one host when `b` is null). */
  cutBetween(a: string, b: string | null, why: string): number {
    let n = 0;
    for (const c of [...this.conns]) {
      if (
        (c.from === a && (b === null || c.to === b)) ||
        (c.to === a && (b === null || c.from === b))
      ) {
        this.cut(c, why);
        n++;
      }
    }
    return n;
  }

  partition(a: string, b: string): void {
    this.partitions.add(this.key(a, b));
    this.counters.partitions++;
    this.cutBetween(a, b, 'partition');
  }

  heal(a: string, b: string): void {
    this.partitions.delete(this.key(a, b));
  }

  healAll(): void {
    this.partitions.clear();
  }

  /** A host's process died: its listener goes, its connections are cut (the kernel resets them). */
  hostDown(host: string): void {
    this.listeners.delete(host);
    this.cutBetween(host, null, 'process exit');
  }

  openConnections(): number {
    return this.conns.size;
  }
}
