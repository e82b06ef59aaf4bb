/**
 * The walsender knows a standby's write/flush/apply positions only from its replies: the start
 * position of START_REPLICATION is what the standby flushed, not what it replayed, so taking it
 * for the apply position released remote_apply commits a paused standby had not replayed (found
 * by the simulator). Method: drive a WalSender over a fake connection and read its positions.
 */
import { describe, expect, it } from 'vitest';
import type { ConnHandlers, MessageConn } from '../../common/transport.ts';
import { decodeMessage, encodeMessage } from '../../wal/stream-messages.ts';
import { WalSender } from '../../primary/walsender.ts';
import { Scheduler } from '../../sim/scheduler.ts';
import { nodeDisk } from '../../common/node-disk.ts';

function fakeConn(): { conn: MessageConn; deliver(bytes: Uint8Array): void; sent: Uint8Array[] } {
  let h: ConnHandlers | null = null;
  const sent: Uint8Array[] = [];
  return {
    sent,
    deliver: (bytes) => h!.message(bytes, true),
    conn: {
      isOpen: true,
      bufferedAmount: 0,
      setHandlers: (x) => void (h = x),
      send: (d) => void sent.push(d),
      close: () => {},
      terminate: () => {},
    },
  };
}

describe('walsender positions', () => {
  it("does not take START_REPLICATION's position for the standby's apply position", () => {
    const { conn, deliver, sent } = fakeConn();
    const startLsn = 0x10df8;
    const replies: Array<[number, number, number]> = [];
    const s = new WalSender(conn, {
      dataDir: '/nonexistent',
      clock: new Scheduler().clockFor('p'),
      flushedLsn: () => startLsn,
      timeline: () => 1,
      history: () => [{ tli: 1, beginLsn: 0, endLsn: null }],
      readOptions: () => ({ timeline: 1, segmentSize: 64 * 1024, disk: nodeDisk }),
      checkStart: () => null,
      onReply: (x) => replies.push([x.writeLsn, x.flushLsn, x.applyLsn]),
      onClose: () => {},
      log: () => {},
    });
    deliver(
      encodeMessage({
        type: 'START_REPLICATION',
        startLsn,
        timeline: 1,
        applicationName: 'walreceiver',
      }),
    );
    expect(s.state).toBe('streaming');
    expect([s.writeLsn, s.flushLsn, s.applyLsn]).toEqual([startLsn, startLsn, 0]);
    // The standby's first reply: flushed to the start LSN, replayed less (paused).
    deliver(
      encodeMessage({
        type: 'StandbyStatusUpdate',
        writeLsn: startLsn,
        flushLsn: startLsn,
        applyLsn: 0x10dc8,
        sendTime: 0,
        replyRequested: false,
      }),
    );
    expect(replies).toEqual([[startLsn, startLsn, 0x10dc8]]);
    expect(sent.map((b) => decodeMessage(b).type)).not.toContain('Error');
  });
});
