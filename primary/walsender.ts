/**
 * The walsender: serves one standby on the replication endpoint. After START_REPLICATION it sends
 * WAL this node has already flushed, read from its segment files, as XLogData messages of whole
 * records; it bounds what is queued on the socket (backpressure), sends keepalives, and takes the
 * standby's status updates (write/flush/apply), which release synchronous commits.
 *
 * Timelines (walsender.c StartReplication / XLogSendPhysical): a standby may ask for an older
 * timeline of this node's history; it is then sent WAL only up to that timeline's switch point,
 * followed by EndOfTimeline naming the next timeline, and may ask for the history file
 * (TIMELINE_HISTORY) and START_REPLICATION again on the same connection. The same happens when the
 * timeline being streamed becomes historic while streaming: a cascading standby whose upstream
 * was promoted, or this node itself being promoted.
 */
import type { Clock, TimerHandle } from '../common/clock.ts';
import { WalsimError, isWalsimError } from '../common/errors.ts';
import type { MessageConn } from '../common/transport.ts';
import { formatLsn, type Lsn, type TimeLineId } from '../wal/lsn.ts';
import { maxAlign } from '../wal/codec.ts';
import { decodeMessage, encodeMessage, type StreamMessage } from '../wal/stream-messages.ts';
import { readWalBytes, wholeRecordsLength, type WalReadOptions } from '../wal/wal-reader.ts';
import {
  readTimelineHistory,
  readTimelineHistoryFile,
  timelineHistoryFileName,
  type TimelineHistoryEntry,
} from '../wal/segment.ts';
import { fail, InvariantViolation } from '../common/assert.ts';
import { isoTimestamp } from '../common/iso-time.ts';
import { CLOSE_PROTOCOL_VIOLATION, CLOSE_REPLICATION_REFUSED } from '../protocol/messages.ts';

export type WalSenderState = 'startup' | 'catchup' | 'streaming' | 'stopping';

/** Most WAL bytes in one XLogData message, and most bytes queued on the socket before waiting. */
const MAX_SEND_BYTES = 1 << 20;
const MAX_QUEUED_BYTES = 4 << 20;
const KEEPALIVE_MS = 1000;

/**
 * A WebSocket close reason is at most 123 bytes of UTF-8 (RFC 6455) and ws throws on a longer one;
 * messages can quote what a client sent (its application_name), so cut by bytes, not characters.
 * The log line has the whole message.
 */
export function closeReason(message: string): string {
  let out = '';
  let bytes = 0;
  for (const ch of message) {
    const n = Buffer.byteLength(ch);
    if (bytes + n > 120) break;
    out += ch;
    bytes += n;
  }
  return out;
}

export interface WalSenderDeps {
  dataDir: string;
  /** Timers and timestamps (the node's: Node's in the server process, the simulator's in sim/). */
  clock: Clock;
  flushedLsn(): Lsn;
  /** This node's current timeline (its WAL insert timeline, or the one its recovery follows). */
  timeline(): TimeLineId;
  /** The history of the current timeline, oldest first, ending with it. */
  history(): readonly TimelineHistoryEntry[];
  readOptions(): WalReadOptions;
  /** Refuse a start position or timeline: return the error message, or null to accept. */
  checkStart(
    startLsn: Lsn,
    timeline: TimeLineId,
    applicationName: string,
    sender: WalSender,
  ): string | null;
  onReply(sender: WalSender): void;
  onClose(sender: WalSender): void;
  log(message: string): void;
}

export class WalSender {
  state: WalSenderState = 'startup';
  applicationName = '';
  sentLsn: Lsn = 0;
  writeLsn: Lsn = 0;
  flushLsn: Lsn = 0;
  applyLsn: Lsn = 0;
  /**
   * The standby's send time of its last status update (pg_stat_replication.reply_time), as sent:
   * formatted only when read, since a standby replies to every WAL message it writes.
   */
  private replySendTime: number | null = null;
  /** Index in the node's walsender array (ties between equal sync priorities go to the lower). */
  slot = -1;
  /** sync_standby_priority, set at START_REPLICATION and at each configuration reload. */
  priority = 0;
  /** Started while this node was in recovery (a cascading walsender: never synchronous). */
  cascading = false;
  /** The timeline being streamed, and where it ends if it is not this node's current one. */
  private streamTli: TimeLineId = 0;
  private historicEnd: { upto: Lsn; nextTli: TimeLineId } | null = null;
  /** EndOfTimeline messages sent (timeline switches served on this connection). */
  timelineEnds = 0;
  private pumping = false;
  private readonly keepalive: TimerHandle;
  private readonly clock: Clock;

  constructor(
    readonly conn: MessageConn,
    private readonly deps: WalSenderDeps,
  ) {
    this.clock = deps.clock;
    conn.setHandlers({
      message: (data, isBinary) => this.onMessage(data, isBinary),
      close: () => {
        this.keepalive.cancel();
        this.deps.onClose(this);
      },
      error: (e) =>
        this.deps.log(
          `LOG:  walsender for "${this.applicationName || '?'}": connection error: ${e.message}`,
        ),
    });
    this.keepalive = this.clock.setInterval(
      () => {
        if (this.state !== 'startup')
          this.send({
            type: 'PrimaryKeepalive',
            walEnd: this.deps.flushedLsn(),
            sendTime: this.clock.now(),
            replyRequested: false,
          });
      },
      KEEPALIVE_MS,
      true,
    );
  }

  /** pg_stat_replication.reply_time: the send time of the standby's last status update. */
  get replyTime(): string | null {
    return this.replySendTime === null ? null : isoTimestamp(this.replySendTime);
  }

  private send(m: StreamMessage, cb?: (err?: Error) => void): void {
    if (this.conn.isOpen) this.conn.send(encodeMessage(m), cb);
  }

  private refuse(code: number, message: string): void {
    this.deps.log(`LOG:  walsender for "${this.applicationName || '?'}": ${message}`);
    this.send({
      type: 'Error',
      code: code === CLOSE_PROTOCOL_VIOLATION ? '08P01' : '55000',
      message,
    });
    this.conn.close(code, closeReason(message));
  }

  /**
   * One message from the standby. Nothing its content provokes may end the process: an unexpected
   * exception closes this connection as a protocol violation and is logged. An InvariantViolation
   * is a walsim bug with shared state possibly half-changed: it propagates (FATAL).
   */
  private onMessage(data: Uint8Array, isBinary: boolean): void {
    try {
      this.handleMessage(data, isBinary);
    } catch (e) {
      if (e instanceof InvariantViolation) throw e;
      this.deps.log(
        `ERROR:  walsender for "${this.applicationName || '?'}": internal error handling a message: ${(e as Error).stack ?? String(e)}`,
      );
      this.refuse(
        CLOSE_PROTOCOL_VIOLATION,
        `internal error handling the message: ${(e as Error).message}`,
      );
    }
  }

  private handleMessage(data: Uint8Array, isBinary: boolean): void {
    let m: StreamMessage;
    try {
      if (!isBinary)
        throw new WalsimError(
          'protocol_violation',
          'replication messages must be binary msgpack frames',
        );
      m = decodeMessage(data);
    } catch (e) {
      this.refuse(CLOSE_PROTOCOL_VIOLATION, (e as Error).message);
      return;
    }
    switch (m.type) {
      case 'START_REPLICATION':
        return this.startReplication(m);
      case 'TIMELINE_HISTORY':
        return this.sendTimelineHistory(m);
      case 'StandbyStatusUpdate':
        return this.standbyStatusUpdate(m);
      default:
        return this.refuse(
          CLOSE_PROTOCOL_VIOLATION,
          `unexpected ${m.type} message on the replication connection`,
        );
    }
  }

  /** START_REPLICATION: the timeline checks, the node's checks, then catch-up from the start point. */
  private startReplication(m: Extract<StreamMessage, { type: 'START_REPLICATION' }>): void {
    if (this.state !== 'startup')
      return this.refuse(
        CLOSE_PROTOCOL_VIOLATION,
        'START_REPLICATION sent twice on one connection',
      );
    this.applicationName = m.applicationName;
    const problem =
      this.checkTimeline(m.startLsn, m.timeline) ??
      this.deps.checkStart(m.startLsn, m.timeline, m.applicationName, this);
    if (problem !== null) return this.refuse(CLOSE_REPLICATION_REFUSED, problem);
    if (this.historicEnd !== null && m.startLsn === this.historicEnd.upto) {
      // Nothing of the old timeline left to send: end it at once (walsender.c sends the
      // next timeline's result set without streaming).
      this.sentLsn = m.startLsn;
      this.endTimeline();
      return;
    }
    // The standby has written and flushed up to where it asks to start; what it has replayed
    // is unknown until its first reply (PostgreSQL: InvalidXLogRecPtr), so apply starts at 0 and
    // a reconnecting standby releases no remote_apply commit it has not replayed.
    this.sentLsn = this.writeLsn = this.flushLsn = m.startLsn;
    this.applyLsn = 0;
    this.state = 'catchup';
    this.deps.log(
      `LOG:  walsender: "${m.applicationName}" starts streaming at ${formatLsn(m.startLsn)}`,
    );
    // PostgreSQL answers START_REPLICATION with CopyBothResponse, and the walreceiver is
    // streaming from then on, WAL or not. walsim's stand-in is a keepalive at once: without it a
    // caught-up standby stayed "connecting" until the first periodic keepalive (up to 1 s).
    this.send({
      type: 'PrimaryKeepalive',
      walEnd: this.deps.flushedLsn(),
      sendTime: this.clock.now(),
      replyRequested: false,
    });
    this.pump();
  }

  /** TIMELINE_HISTORY: the history file of the timeline asked for, or a refusal naming it. */
  private sendTimelineHistory(m: Extract<StreamMessage, { type: 'TIMELINE_HISTORY' }>): void {
    const content = readTimelineHistoryFile(
      this.deps.dataDir,
      m.timeline,
      this.deps.readOptions().disk,
    );
    const fileName = timelineHistoryFileName(m.timeline);
    if (content === null)
      return this.refuse(
        CLOSE_REPLICATION_REFUSED,
        `could not open file "pg_wal/${fileName}": No such file or directory`,
      );
    this.send({ type: 'TimelineHistoryReply', timeline: m.timeline, fileName, content });
  }

  /** The standby's write/flush/apply positions: refused when they go backwards or past what was sent. */
  private standbyStatusUpdate(m: Extract<StreamMessage, { type: 'StandbyStatusUpdate' }>): void {
    // Between timelines (after EndOfTimeline) the standby may still report what it has.
    if (this.state === 'startup' && this.timelineEnds === 0)
      return this.refuse(CLOSE_PROTOCOL_VIOLATION, 'status update before START_REPLICATION');
    if (m.writeLsn < this.writeLsn || m.flushLsn < this.flushLsn || m.applyLsn < this.applyLsn) {
      return this.refuse(
        CLOSE_PROTOCOL_VIOLATION,
        `status update went backwards (write ${formatLsn(m.writeLsn)}, flush ${formatLsn(m.flushLsn)}, apply ${formatLsn(m.applyLsn)})`,
      );
    }
    // A standby replays only WAL it has flushed, and flushes only what it wrote, which it
    // received from us: apply <= flush <= write <= sent. A claim beyond that would release
    // synchronous commits that no standby holds.
    if (m.writeLsn > this.sentLsn || m.flushLsn > m.writeLsn || m.applyLsn > m.flushLsn) {
      return this.refuse(
        CLOSE_PROTOCOL_VIOLATION,
        `status update claims WAL beyond what was sent (${formatLsn(this.sentLsn)}): ` +
          `write ${formatLsn(m.writeLsn)}, flush ${formatLsn(m.flushLsn)}, apply ${formatLsn(m.applyLsn)} must satisfy apply <= flush <= write <= sent`,
      );
    }
    this.writeLsn = m.writeLsn;
    this.flushLsn = m.flushLsn;
    this.applyLsn = m.applyLsn;
    this.replySendTime = m.sendTime;
    this.deps.onReply(this);
    if (m.replyRequested)
      this.send({
        type: 'PrimaryKeepalive',
        walEnd: this.deps.flushedLsn(),
        sendTime: this.clock.now(),
        replyRequested: false,
      });
  }

  /**
   * StartReplication's timeline checks: the requested timeline must be this node's current one or
   * in its history, and the start point must lie on it (not past its switch point). Sets what is
   * to be streamed. Returns the refusal, or null.
   */
  private checkTimeline(startLsn: Lsn, tli: TimeLineId): string | null {
    const current = this.deps.timeline();
    this.streamTli = tli;
    this.historicEnd = null;
    if (tli === current) return null;
    const end = switchPointOf(tli, this.deps.history());
    if (end === null) return `requested timeline ${tli} is not in this server's history`;
    if (startLsn > end.upto) {
      return (
        `requested starting point ${formatLsn(startLsn)} on timeline ${tli} is not in this server's history; ` +
        `this server's history forked from timeline ${tli} at ${formatLsn(end.upto)}`
      );
    }
    this.historicEnd = end;
    return null;
  }

  /** How far WAL may be sent: the flush LSN on the current timeline, the switch point on an old one. */
  private sendLimit(): Lsn {
    if (this.historicEnd === null && this.streamTli !== this.deps.timeline()) {
      // The timeline being streamed became historic (promotion here, or a timeline switch of the
      // upstream this cascading standby follows): stream it up to its switch point only.
      const end = switchPointOf(this.streamTli, this.deps.history());
      if (end === null)
        fail(
          `INV-WALSND-2: streamed timeline ${this.streamTli} is not in the history of timeline ${this.deps.timeline()}`,
        );
      this.historicEnd = end;
    }
    return this.historicEnd?.upto ?? this.deps.flushedLsn();
  }

  /** The history file last read for the WAL reads, by timeline (history files never change). */
  private readHistory: { tli: TimeLineId; entries: readonly TimelineHistoryEntry[] } | null = null;

  /** The node's WAL read options with the timeline's history, read from its file once per timeline. */
  private readOptionsWithHistory(): WalReadOptions {
    const opts = this.deps.readOptions();
    if (opts.history !== undefined) return opts;
    if (this.readHistory?.tli !== opts.timeline)
      this.readHistory = {
        tli: opts.timeline,
        entries: readTimelineHistory(this.deps.dataDir, opts.timeline, opts.disk),
      };
    // Object.assign, not a spread: Node 20's V8 builds `{ ...o, k }` on a slow path (~1 µs).
    return Object.assign({}, opts, { history: this.readHistory.entries });
  }

  /** The old timeline is sent in full: EndOfTimeline; the standby may then ask for the next one. */
  private endTimeline(): void {
    const end = this.historicEnd!;
    this.send({ type: 'EndOfTimeline', timeline: end.nextTli, switchLsn: end.upto });
    this.timelineEnds++;
    this.deps.log(
      `LOG:  walsender: "${this.applicationName}" reached the end of timeline ${this.streamTli} at ${formatLsn(end.upto)}; next timeline ${end.nextTli}`,
    );
    this.state = 'startup';
    this.historicEnd = null;
  }

  /** Send flushed WAL not yet sent, within the socket's queue limit. Called whenever flush advances. */
  pump(): void {
    if (this.pumping || this.state === 'startup' || !this.conn.isOpen) return;
    this.pumping = true;
    try {
      this.pumpLocked();
    } catch (e) {
      // XLogRead failed: the segment was removed by a checkpoint (the standby fell behind
      // wal_keep_size while disconnected) or is unreadable. PostgreSQL's walsender ends with
      // that ERROR ("requested WAL segment … has already been removed"); so does this connection.
      if (!isWalsimError(e)) throw e;
      this.refuse(CLOSE_REPLICATION_REFUSED, e.message);
    } finally {
      this.pumping = false;
    }
  }

  private pumpLocked(): void {
    const flushed = this.sendLimit();
    if (this.historicEnd !== null && this.sentLsn > flushed) {
      // Sent before the timeline became historic, past where it now ends: possible only when a
      // promotion here ended recovery before the end of received WAL (an invalid record). The
      // standby holds WAL that is in no timeline of this server; PostgreSQL's walsender refuses it
      // at its next start the same way. It needs a new base backup.
      this.refuse(
        CLOSE_REPLICATION_REFUSED,
        `standby "${this.applicationName}" has received WAL up to ${formatLsn(this.sentLsn)} on timeline ${this.streamTli}, ` +
          `past where this server's history forked from it at ${formatLsn(flushed)}`,
      );
      return;
    }
    // INV-WALSND-1: never past the flush LSN, nor past the end of a historic timeline.
    if (this.sentLsn > flushed)
      fail(
        `INV-WALSND-1: sent ${formatLsn(this.sentLsn)} past ${formatLsn(flushed)} on timeline ${this.streamTli}`,
      );
    const readOptions = this.readOptionsWithHistory();
    while (this.sentLsn < flushed && this.conn.bufferedAmount < MAX_QUEUED_BYTES) {
      const end = Math.min(flushed, this.sentLsn + MAX_SEND_BYTES);
      let bytes = readWalBytes(this.deps.dataDir, this.sentLsn, end, readOptions);
      let n = wholeRecordsLength(bytes);
      if (n === 0) {
        // One record larger than MAX_SEND_BYTES: send it whole.
        const totLen = new DataView(bytes.buffer, bytes.byteOffset).getUint32(0, true);
        bytes = readWalBytes(
          this.deps.dataDir,
          this.sentLsn,
          Math.min(flushed, this.sentLsn + maxAlign(totLen)),
          readOptions,
        );
        n = wholeRecordsLength(bytes);
        if (n === 0) break;
      }
      const data = bytes.subarray(0, n);
      const walStart = this.sentLsn;
      this.sentLsn += n;
      // ws queues synchronously; fill up to the queue limit, then continue from the send callback.
      this.send(
        { type: 'XLogData', walStart, walEnd: this.sentLsn, sendTime: this.clock.now(), data },
        () => this.pump(),
      );
    }
    if (this.sentLsn >= flushed && this.state === 'catchup') this.state = 'streaming';
    // Messages on one connection arrive in order: EndOfTimeline follows the last XLogData.
    if (this.historicEnd !== null && this.sentLsn === this.historicEnd.upto) this.endTimeline();
  }
}

/** tliSwitchPoint: where timeline `tli` ends in `history`, and the timeline that follows; null if absent or current. */
export function switchPointOf(
  tli: TimeLineId,
  history: readonly TimelineHistoryEntry[],
): { upto: Lsn; nextTli: TimeLineId } | null {
  const i = history.findIndex((h) => h.tli === tli);
  if (i < 0 || history[i]!.endLsn === null) return null;
  return { upto: history[i]!.endLsn!, nextTli: history[i + 1]!.tli };
}
