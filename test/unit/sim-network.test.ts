/**
 * The simulator's network (sim/network.ts): ordered delivery per connection, loss only as a cut,
 * and a connection cut while it was being established never opens (seed 2146 found one that did:
 * it escaped every later cut, so a dead primary's in-flight WAL still reached the standby).
 * Method: two hosts on a scheduler, events observed per side.
 */
import { describe, expect, it } from 'vitest';
import { Network } from '../../sim/network.ts';
import { Scheduler } from '../../sim/scheduler.ts';
import { SeededRandom } from '../../common/random.ts';
import type { MessageConn } from '../../common/transport.ts';

function pair(link = { delayMinMs: 1, delayMaxMs: 30, cutDetectMs: 100 }) {
  const sched = new Scheduler();
  const net = new Network(sched, new SeededRandom(9), link);
  const accepted: MessageConn[] = [];
  const got: string[] = [];
  net.listen('A', 'A#1', (conn) => {
    accepted.push(conn);
    conn.setHandlers({
      message: (d) => got.push(`A got ${d[0]}`),
      close: (code) => got.push(`A closed ${code}`),
    });
  });
  const dial = net.dialer('B', 'B#1', () => 'A');
  return { sched, net, accepted, got, dial };
}

describe('sim Network', () => {
  it('delivers in order on one connection', async () => {
    const { sched, got, dial } = pair();
    const c = dial();
    c.setHandlers({
      open: () => {
        for (let i = 0; i < 10; i++) c.send(new Uint8Array([i]));
      },
      message: () => {},
      close: () => {},
    });
    await sched.runFor(1000);
    expect(got).toEqual(Array.from({ length: 10 }, (_, i) => `A got ${i}`));
  });

  it('a connection cut before it is established never opens, and the dialer sees it fail', async () => {
    const { sched, net, accepted, dial } = pair();
    const events: string[] = [];
    const c = dial();
    c.setHandlers({
      open: () => events.push('open'),
      message: () => {},
      error: (e) => events.push(e.message),
      close: (code) => events.push(`closed ${code}`),
    });
    expect(net.cutBetween('A', 'B', 'cut')).toBe(1);
    await sched.runFor(1000);
    expect(accepted).toEqual([]);
    expect(events).toEqual(['connect ECONNREFUSED A', 'closed 1006']);
    expect(net.openConnections()).toBe(0);
  });

  it('a cut loses the messages in flight, and a dead host sends nothing more', async () => {
    const { sched, net, got, dial } = pair({ delayMinMs: 50, delayMaxMs: 50, cutDetectMs: 100 });
    const c = dial();
    c.setHandlers({ message: () => {}, close: () => {} });
    await sched.runFor(60); // connected
    c.send(new Uint8Array([1]));
    await sched.runFor(10);
    net.hostDown('B');
    await sched.runFor(1000);
    expect(got).toEqual(['A closed 1006']);
  });
});
