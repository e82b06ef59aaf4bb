import { describe, expect, it } from 'vitest';
import { WalsimError } from '../../common/errors.ts';
import { pollUntil, StopPolling } from '../../server/poll.ts';

describe('pollUntil (server/poll.ts)', () => {
  it('calls the check until it says yes; a thrown error counts as "not yet"', async () => {
    let calls = 0;
    await pollUntil(
      async () => {
        calls++;
        if (calls === 1) throw new Error('not up yet');
        return calls === 3;
      },
      'three calls',
      5_000,
      1,
    );
    expect(calls).toBe(3);
  });

  it('names what it waited for and the last error at the deadline', async () => {
    await expect(
      pollUntil(
        async () => {
          throw new Error('connection refused');
        },
        'the node',
        30,
        5,
      ),
    ).rejects.toThrow(
      /timed out after 30 ms waiting for the node \(last error: connection refused\)/,
    );
  });

  it("throws the caller's own timeout error", async () => {
    const e = await pollUntil(
      async () => false,
      'x',
      20,
      5,
      (last) => new WalsimError('timeout', `gave up (last: ${last})`),
    ).catch((err: unknown) => err);
    expect(e).toBeInstanceOf(WalsimError);
    expect((e as WalsimError).message).toBe('gave up (last: null)');
  });

  it('StopPolling ends the wait at once, and passes a wrapped error through unchanged', async () => {
    let calls = 0;
    const plain = await pollUntil(
      async () => {
        calls++;
        throw new StopPolling('replay stopped');
      },
      'x',
      5_000,
    ).catch((err: unknown) => err);
    expect(plain).toBeInstanceOf(StopPolling);
    expect(calls).toBe(1);
    const inner = new WalsimError('invalid_input', 'left recovery');
    const wrapped = await pollUntil(
      async () => {
        throw new StopPolling(inner);
      },
      'x',
      5_000,
    ).catch((err: unknown) => err);
    expect(wrapped).toBe(inner);
  });
});
