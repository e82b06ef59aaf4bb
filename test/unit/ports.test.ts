/**
 * Port choice for nodes that bind later: never from the kernel's ephemeral range (where outgoing
 * connections take their local ports, so a port picked by listen(0) can be gone by start time),
 * never the same port twice in one process, and bindable when handed out.
 */
import * as net from 'node:net';
import { describe, expect, it } from 'vitest';
import {
  configuredPortRange,
  ephemeralRange,
  freePort,
  PORT_RANGE_ENV,
} from '../../server/ports.ts';

describe('freePort', () => {
  it('hands out distinct ports outside the ephemeral range that bind on 127.0.0.1', async () => {
    const [lo, hi] = ephemeralRange();
    const ports: number[] = [];
    for (let i = 0; i < 50; i++) ports.push(await freePort('127.0.0.1'));
    expect(new Set(ports).size).toBe(50);
    for (const p of ports) {
      expect(p >= lo && p <= hi).toBe(false);
      expect(p).toBeGreaterThanOrEqual(20_000);
      expect(p).toBeLessThanOrEqual(65_535);
    }
    // The last one really binds.
    await new Promise<void>((resolve, reject) => {
      const srv = net.createServer();
      srv.once('error', reject);
      srv.listen(ports[49], '127.0.0.1', () => srv.close(() => resolve()));
    });
  });

  it('WALSIM_PORT_RANGE confines the choice to its range; a malformed one is refused by name', async () => {
    const saved = process.env[PORT_RANGE_ENV];
    try {
      process.env[PORT_RANGE_ENV] = '24000-24009';
      expect(configuredPortRange()).toEqual([24000, 24009]);
      const ports: number[] = [];
      for (let i = 0; i < 5; i++) ports.push(await freePort('127.0.0.1'));
      expect(new Set(ports).size).toBe(5);
      for (const p of ports) expect(p >= 24000 && p <= 24009).toBe(true);
      for (const bad of ['24000', '9-100', '30000-20000', '1000-70000', 'a-b']) {
        process.env[PORT_RANGE_ENV] = bad;
        expect(() => configuredPortRange()).toThrow(`${PORT_RANGE_ENV}="${bad}"`);
      }
    } finally {
      if (saved === undefined) delete process.env[PORT_RANGE_ENV];
      else process.env[PORT_RANGE_ENV] = saved;
    }
  });
});
