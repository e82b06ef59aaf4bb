/**
 * The walreceiver: streams WAL from the upstream's walsender over the replication endpoint,
 * writes it verbatim to this node's segment files (write LSN), fsyncs (flush LSN), replies with
 * its positions on every advance, and wakes the startup process. On a dropped connection it
 * reconnects with backoff and restarts streaming at its flush LSN: no gap, no duplicate.
 *
 * Timeline switches (walreceiver.c + WalRcvFetchTimeLineHistoryFiles): when the upstream ends the
 * timeline being streamed (EndOfTimeline: its promotion, or its own upstream's), the walreceiver
 * has everything up to the switch point; it fetches the next timeline's history file, the node
 * switches its WAL to that timeline, and streaming restarts there on the same connection — the
 * walreceiver is not restarted.
 */
import type { Clock, TimerHandle } from '../common/clock.ts';
import type { Dialer, MessageConn } from '../common/transport.ts';
import { InvariantViolation } from '../common/assert.ts';
import { formatLsn, type Lsn, type TimeLineId } from '../wal/lsn.ts';
import { decodeMessage, encodeMessage, type StreamMessage } from '../wal/stream-messages.ts';
import { isInvalidWalRecordError } from '../wal/codec.ts';
import { injectedBugs } from '../common/injected-bugs.ts';
import type { WalWriter } from '../wal/wal-writer.ts';

export type ReceiverState = 'connecting' | 'streaming' | 'disconnected' | 'stopped';

export interface WalReceiverDeps {
  /** Opens a replication connection to the upstream (ws in production, the simulator's network). */
  connect: Dialer;
  /** Timers and timestamps (the node's: Node's in the server process, the simulator's in sim/). */
  clock: Clock;
  applicationName: string;
  wal: WalWriter;
  timeline(): TimeLineId;
  applyLsn(): Lsn;
  onFlushed(): void;
  /**
   * The upstream's timeline continues as `tli` from `switchLsn` (this node's flush LSN): store the
   * history file text and continue this node's WAL on `tli`. Throws if the history does not fit.
   */
  onNewTimeline(tli: TimeLineId, historyText: string, switchLsn: Lsn): void;
  /** Connection state changes (UPSTREAM_CONNECTED / UPSTREAM_LOST / UPSTREAM_RETRY for the lifecycle machine). */
  onStateChange(state: ReceiverState): void;
  log(message: string): void;
}

const BACKOFF_MIN_MS = 100;
const BACKOFF_MAX_MS = 2000;

export class WalReceiver {
  private stateValue: ReceiverState = 'disconnected';
  lastError: string | null = null;
  connects = 0;
  /** XLogData messages and WAL bytes accepted (appended and flushed) since start. */
  receivedMessages = 0;
  receivedBytes = 0;
  /** Start LSN of each START_REPLICATION sent, newest last (at most 32 kept). */
  readonly startLsns: Lsn[] = [];
  /** Failed WAL writes (disk full, unwritable pg_wal), and the last one's message until a write succeeds. */
  writeFailures = 0;
  writeError: string | null = null;
  private ws: MessageConn | null = null;
  private backoffMs = BACKOFF_MIN_MS;
  private timer: TimerHandle | null = null;
  private holdUntil = 0;
  private readonly clock: Clock;
  /** True while fsyncing received WAL: an exception there is a PANIC, not a connection error. */
  private flushing = false;
  /** The planted cascade bug's pending fsync. */
  private deferredFlush: TimerHandle | null = null;
  /** EndOfTimeline received: the timeline whose history was asked for, and where it begins. */
  private pendingTimeline: { tli: TimeLineId; switchLsn: Lsn } | null = null;
  /** Timeline switches followed on a live connection. */
  timelineSwitches = 0;

  constructor(private readonly deps: WalReceiverDeps) {
    this.clock = deps.clock;
  }

  get state(): ReceiverState {
    return this.stateValue;
  }

  private set state(next: ReceiverState) {
    if (next === this.stateValue) return;
    this.stateValue = next;
    this.deps.onStateChange(next);
  }

  start(): void {
    this.connect();
  }

  stop(): void {
    this.state = 'stopped';
    this.timer?.cancel();
    this.timer = null;
    this.ws?.terminate();
    this.ws = null;
  }

  /**
   * Fault injection: break the connection without a close handshake (a cut socket) and stay
   * disconnected for `holdMs` before the usual reconnect.
   */
  cutConnection(holdMs = 0): void {
    this.holdUntil = this.clock.monoMs() + holdMs;
    this.ws?.terminate();
  }

  private connect(): void {
    if (this.state === 'stopped') return;
    if (this.clock.monoMs() < this.holdUntil) {
      // A cut_replication fault holds the connection down, also against a reconnect already scheduled.
      this.scheduleReconnect();
      return;
    }
    this.state = 'connecting';
    const ws = this.deps.connect();
    this.ws = ws;
    ws.setHandlers({
      open: () => {
        this.connects++;
        this.pendingTimeline = null;
        this.startStreaming('started');
      },
      message: (data) => this.onMessage(ws, data),
      close: (code, reason) => {
        if (this.ws === ws) this.ws = null;
        if (this.state === 'stopped') return;
        this.lastError =
          this.writeError ?? `connection closed (${code}${reason.length ? ': ' + reason : ''})`;
        this.state = 'disconnected';
        this.scheduleReconnect();
      },
      error: (err) => {
        this.lastError = err.message;
      },
    });
  }

  /** Where streaming continues: the flush LSN (the written one under the planted cascade bug). */
  private get streamedLsn(): Lsn {
    return injectedBugs.cascadeForwardsUnflushed ? this.deps.wal.writeLsn : this.deps.wal.flushLsn;
  }

  /**
   * Test-only planted bug (common/injected-bugs.ts cascadeForwardsUnflushed): relay what was just
   * written to the cascading walsenders at once and fsync it 50 ms later.
   */
  private flushLater(bytes: number): void {
    this.receivedMessages++;
    this.receivedBytes += bytes;
    this.deps.onFlushed();
    if (this.deferredFlush !== null) return;
    this.deferredFlush = this.clock.setTimeout(() => {
      this.deferredFlush = null;
      this.flushing = true;
      this.deps.wal.flush();
      this.flushing = false;
      this.sendStatus();
      this.deps.onFlushed();
    }, 50);
  }

  /** START_REPLICATION at the flush LSN on this node's timeline, then report positions. */
  private startStreaming(verb: 'started' | 'restarted'): void {
    const startLsn = this.streamedLsn;
    this.startLsns.push(startLsn);
    if (this.startLsns.length > 32) this.startLsns.shift();
    this.send({
      type: 'START_REPLICATION',
      startLsn,
      timeline: this.deps.timeline(),
      applicationName: this.deps.applicationName,
    });
    this.deps.log(
      `LOG:  ${verb} streaming WAL from primary at ${formatLsn(startLsn)} on timeline ${this.deps.timeline()}`,
    );
    // "Send initial reply/feedback messages" (WalReceiverMain): the upstream learns this standby's
    // positions at once, so pg_stat_replication shows them before any WAL flows.
    this.sendStatus();
  }

  private scheduleReconnect(): void {
    if (this.state === 'stopped' || this.timer) return;
    const delay = Math.max(this.backoffMs, this.holdUntil - this.clock.monoMs());
    this.backoffMs = Math.min(this.backoffMs * 2, BACKOFF_MAX_MS);
    this.timer = this.clock.setTimeout(() => {
      this.timer = null;
      this.connect();
    }, delay);
  }

  private send(m: StreamMessage): void {
    if (this.ws?.isOpen === true) this.ws.send(encodeMessage(m));
  }

  /** Standby status update: write, flush and apply positions. */
  sendStatus(replyRequested = false): void {
    const wal = this.deps.wal;
    this.send({
      type: 'StandbyStatusUpdate',
      writeLsn: wal.writeLsn,
      flushLsn: wal.flushLsn,
      applyLsn: this.deps.applyLsn(),
      sendTime: this.clock.now(),
      replyRequested,
    });
  }

  /**
   * One message from the primary. Nothing raised while handling it may end the process, except an
   * fsync failure (PANIC, below): an unexpected exception closes this connection as a protocol
   * violation, is logged, and the walreceiver reconnects as after any lost connection.
   */
  private onMessage(ws: MessageConn, data: Uint8Array): void {
    try {
      this.handleMessage(ws, data);
    } catch (e) {
      if (this.flushing || e instanceof InvariantViolation) throw e; // PANIC / FATAL
      this.deps.log(
        `ERROR:  walreceiver: internal error handling a message: ${(e as Error).stack ?? String(e)}`,
      );
      ws.close(4002, 'internal error handling a message');
    }
  }

  private handleMessage(ws: MessageConn, data: Uint8Array): void {
    if (ws !== this.ws) return;
    let m: StreamMessage;
    try {
      m = decodeMessage(data);
    } catch (e) {
      this.deps.log(`LOG:  invalid message from primary: ${(e as Error).message}`);
      ws.close(4002, 'protocol violation');
      return;
    }
    switch (m.type) {
      case 'XLogData':
        return this.receiveXLogData(ws, m);
      case 'PrimaryKeepalive':
        if (this.state === 'connecting') this.state = 'streaming';
        this.backoffMs = BACKOFF_MIN_MS;
        if (m.replyRequested) this.sendStatus();
        return;
      case 'EndOfTimeline':
        return this.endOfTimeline(ws, m);
      case 'TimelineHistoryReply':
        return this.followTimelineHistory(ws, m);
      case 'Error':
        this.lastError = m.message;
        this.deps.log(`LOG:  primary refused replication: ${m.message}`);
        return;
      default:
        this.deps.log(`LOG:  unexpected ${m.type} message from primary`);
    }
  }

  /** XLogData: append, write, report, flush, report (XLogWalRcvWrite, XLogWalRcvFlush); a batch not starting where streaming is, or not decoding, is refused and the connection dropped. */
  private receiveXLogData(ws: MessageConn, m: Extract<StreamMessage, { type: 'XLogData' }>): void {
    const wal = this.deps.wal;
    if (m.walStart !== this.streamedLsn) {
      this.deps.log(
        `LOG:  XLogData starts at ${formatLsn(m.walStart)}, expected ${formatLsn(this.streamedLsn)}; reconnecting`,
      );
      ws.close(4002, 'unexpected WAL start position');
      return;
    }
    try {
      wal.appendRaw(m.data, m.walStart);
    } catch (e) {
      const what = isInvalidWalRecordError(e) ? e.message : (e as Error).message;
      this.deps.log(`LOG:  refused WAL from primary: ${what}`);
      ws.close(4002, 'invalid WAL received');
      return;
    }
    try {
      wal.write();
    } catch (e) {
      // Disk full or pg_wal unwritable (XLogWalRcvWrite). Nothing of this batch was reported or
      // flushed: forget it (cut the segment back to the flush LSN), drop the connection, and
      // stream it again after the backoff. Nothing after the flush LSN is ever replayed.
      this.writeFailures++;
      this.writeError = `could not write to WAL segment at ${formatLsn(m.walStart)}: ${(e as Error).message}`;
      this.deps.log(
        `LOG:  ${this.writeError}; will retry streaming from ${formatLsn(wal.flushLsn)}`,
      );
      wal.truncate(wal.flushLsn, wal.lastFlushedRecordLsn);
      this.lastError = this.writeError;
      ws.terminate();
      return;
    }
    this.state = 'streaming';
    this.backoffMs = BACKOFF_MIN_MS;
    this.sendStatus();
    if (injectedBugs.cascadeForwardsUnflushed) {
      this.flushLater(m.data.length);
      return;
    }
    // An fsync failure is not retried: it propagates and stops the server (PANIC), since the
    // page cache may have dropped the data.
    this.flushing = true;
    wal.flush();
    this.flushing = false;
    this.receivedMessages++;
    this.receivedBytes += m.data.length;
    this.writeError = null;
    this.sendStatus();
    this.deps.onFlushed();
  }

  /** EndOfTimeline: the upstream's timeline ended at the switch point; ask for the next one's history. */
  private endOfTimeline(
    ws: MessageConn,
    m: Extract<StreamMessage, { type: 'EndOfTimeline' }>,
  ): void {
    // "replication terminated by primary server": everything up to the switch point is here.
    const flushed = this.deps.wal.flushLsn;
    this.deps.log(
      `LOG:  end of WAL reached on timeline ${this.deps.timeline()} at ${formatLsn(m.switchLsn)}`,
    );
    if (m.switchLsn !== flushed || m.timeline <= this.deps.timeline()) {
      this.deps.log(
        `LOG:  upstream ended timeline ${this.deps.timeline()} at ${formatLsn(m.switchLsn)} (next ${m.timeline}) but this node has flushed up to ${formatLsn(flushed)}; reconnecting`,
      );
      ws.close(4002, 'unexpected end of timeline');
      return;
    }
    this.pendingTimeline = { tli: m.timeline, switchLsn: m.switchLsn };
    this.send({ type: 'TIMELINE_HISTORY', timeline: m.timeline });
  }

  /** TIMELINE_HISTORY's reply: store it, follow the new timeline, stream on from the switch point. */
  private followTimelineHistory(
    ws: MessageConn,
    m: Extract<StreamMessage, { type: 'TimelineHistoryReply' }>,
  ): void {
    const p = this.pendingTimeline;
    if (p === null || m.timeline !== p.tli) {
      this.deps.log(`LOG:  unexpected history file of timeline ${m.timeline} from primary`);
      ws.close(4002, 'unexpected timeline history');
      return;
    }
    this.pendingTimeline = null;
    try {
      this.deps.onNewTimeline(m.timeline, m.content, p.switchLsn);
    } catch (e) {
      this.lastError = (e as Error).message;
      this.deps.log(`LOG:  could not follow timeline ${m.timeline}: ${(e as Error).message}`);
      ws.close(4002, 'could not follow the new timeline');
      return;
    }
    this.timelineSwitches++;
    this.deps.log(`LOG:  new target timeline is ${m.timeline}`);
    this.startStreaming('restarted');
  }
}
