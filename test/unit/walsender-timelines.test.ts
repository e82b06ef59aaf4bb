/**
 * The walsender's timeline rules (walsender.c StartReplication / XLogSendPhysical), with a fake
 * socket over real segment files: a standby asking for an older timeline gets WAL up to its switch
 * point and then EndOfTimeline; a start point past the switch point, or an unknown timeline, is
 * refused with PostgreSQL's messages; TIMELINE_HISTORY returns the file; a timeline that becomes
 * historic while streamed ends at its switch point; a standby already past it is refused.
 * Method: WAL written with WalWriter on timeline 1, switched to 2; messages decoded from the fake.
 */
import { afterEach, describe, expect, it } from 'vitest';
import type { ConnHandlers, MessageConn } from '../../common/transport.ts';
import { WalWriter } from '../../wal/wal-writer.ts';
import { firstRecordLsn, readTimelineHistory } from '../../wal/segment.ts';
import { decodeMessage, encodeMessage, type StreamMessage } from '../../wal/stream-messages.ts';
import { WalSender } from '../../primary/walsender.ts';
import type { Lsn, TimeLineId } from '../../wal/lsn.ts';
import { removeDir, tempDataDir } from './wal-helpers.ts';
import { nodeDisk } from '../../common/node-disk.ts';
import { systemClock } from '../../common/system-clock.ts';

const SEG = 1024 * 1024;
let dir = '';
afterEach(() => removeDir(dir));

/** A stand-in for ws: records what the walsender sends and how it closes; delivers our messages. */
class FakeSocket implements MessageConn {
  bufferedAmount = 0;
  readonly sent: StreamMessage[] = [];
  closed: { code: number; reason: string } | null = null;
  private handlers: ConnHandlers | null = null;
  get isOpen() {
    return this.closed === null;
  }
  setHandlers(h: ConnHandlers) {
    this.handlers = h;
  }
  send(data: Uint8Array, cb?: () => void) {
    this.sent.push(decodeMessage(data));
    cb?.();
  }
  close(code: number, reason: string) {
    this.closed = { code, reason };
  }
  terminate() {
    this.closed = { code: 1006, reason: '' };
  }
  deliver(m: StreamMessage) {
    this.handlers!.message(encodeMessage(m), true);
  }
}

/** WAL on timeline 1 (a few records), then switched to timeline 2 at `switchLsn`, a few more. */
function makeWal(): { wal: WalWriter; switchLsn: Lsn } {
  dir = tempDataDir('walsim-walsnd-');
  const wal = WalWriter.open(dir, { segmentSize: SEG, timeline: 1, disk: nodeDisk });
  for (let i = 0; i < 5; i++) wal.insert({ kind: 'NOOP' }, 0);
  wal.flush();
  const switchLsn = wal.insertLsn;
  wal.switchTimeline(2, 'no recovery target specified');
  for (let i = 0; i < 3; i++) wal.insert({ kind: 'NOOP' }, 0);
  wal.flush();
  return { wal, switchLsn };
}

function sender(
  wal: WalWriter,
  timeline: () => TimeLineId,
  flushed: () => Lsn = () => wal.flushLsn,
  readTli: () => TimeLineId = timeline,
) {
  const ws = new FakeSocket();
  const s = new WalSender(ws, {
    dataDir: dir,
    clock: systemClock,
    flushedLsn: flushed,
    timeline,
    history: () => readTimelineHistory(dir, timeline(), nodeDisk),
    readOptions: () => ({ timeline: readTli(), segmentSize: SEG, disk: nodeDisk }),
    checkStart: () => null,
    onReply: () => {},
    onClose: () => {},
    log: () => {},
  });
  return { ws, s };
}

const start = (startLsn: Lsn, timeline: TimeLineId): StreamMessage => ({
  type: 'START_REPLICATION',
  startLsn,
  timeline,
  applicationName: 's',
});

describe('walsender timelines', () => {
  it('streams an old timeline up to its switch point, then EndOfTimeline; then the new one on the same connection', () => {
    const { wal, switchLsn } = makeWal();
    const { ws, s } = sender(wal, () => 2);
    ws.deliver(start(firstRecordLsn(SEG), 1));
    const i = ws.sent.findIndex((m) => m.type === 'EndOfTimeline');
    expect(ws.sent[i]).toEqual({ type: 'EndOfTimeline', timeline: 2, switchLsn });
    // Before it: timeline 1's WAL exactly up to the switch point.
    const old = ws.sent.slice(0, i).filter((m) => m.type === 'XLogData') as Array<
      Extract<StreamMessage, { type: 'XLogData' }>
    >;
    expect(old[0]!.walStart).toBe(firstRecordLsn(SEG));
    expect(old.at(-1)!.walStart + old.at(-1)!.data.length).toBe(switchLsn);
    expect(s.state).toBe('startup');
    ws.deliver({ type: 'TIMELINE_HISTORY', timeline: 2 });
    expect(ws.sent.at(-1)).toMatchObject({
      type: 'TimelineHistoryReply',
      timeline: 2,
      fileName: '00000002.history',
    });
    ws.deliver(start(switchLsn, 2));
    const data = ws.sent.filter((m) => m.type === 'XLogData');
    expect(data.at(-1)).toMatchObject({ walEnd: wal.flushLsn });
    expect(s.sentLsn).toBe(wal.flushLsn);
    expect(s.state).toBe('streaming');
    expect(s.timelineEnds).toBe(1);
  });

  it('refuses a start point past the switch point, and a timeline not in the history', () => {
    const { wal, switchLsn } = makeWal();
    const a = sender(wal, () => 2);
    a.ws.deliver(start(switchLsn + 8, 1));
    expect(a.ws.closed?.code).toBe(4004);
    expect((a.ws.sent.at(-1) as { message: string }).message).toBe(
      `requested starting point 0/${(switchLsn + 8).toString(16).toUpperCase()} on timeline 1 is not in this server's history; ` +
        `this server's history forked from timeline 1 at 0/${switchLsn.toString(16).toUpperCase()}`,
    );
    const b = sender(wal, () => 2);
    b.ws.deliver(start(switchLsn, 5));
    expect((b.ws.sent.at(-1) as { message: string }).message).toBe(
      "requested timeline 5 is not in this server's history",
    );
  });

  it('a timeline that becomes historic while streamed ends at its switch point', () => {
    const { wal, switchLsn } = makeWal();
    let tli = 1;
    // Until the switch this node reports timeline 1 and flush = the switch point.
    const { ws, s } = sender(
      wal,
      () => tli,
      () => (tli === 1 ? switchLsn : wal.flushLsn),
    );
    ws.deliver(start(switchLsn, 1));
    expect(s.state).toBe('streaming');
    tli = 2;
    s.pump();
    expect(ws.sent.at(-1)).toEqual({ type: 'EndOfTimeline', timeline: 2, switchLsn });
  });

  it('a standby that already has WAL past the new switch point is refused, not asserted', () => {
    const { wal, switchLsn } = makeWal();
    let tli = 1;
    // Streaming "timeline 1" while its flush LSN is already past the later switch point (what a
    // promotion that ends recovery early leaves behind): bytes read through timeline 2's history.
    const { ws, s } = sender(
      wal,
      () => tli,
      () => wal.flushLsn,
      () => 2,
    );
    ws.deliver(start(switchLsn, 1));
    expect(s.sentLsn).toBeGreaterThan(switchLsn);
    tli = 2;
    s.pump();
    expect(ws.closed?.code).toBe(4004);
    expect((ws.sent.at(-1) as { message: string }).message).toMatch(
      /past where this server's history forked from it at/,
    );
  });
});
