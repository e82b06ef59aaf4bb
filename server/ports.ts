/**
 * Choosing TCP ports for nodes that bind them later (walsim nodes at `cluster start`, real
 * PostgreSQL at `pg_ctl start`).
 *
 * Why not `listen(0)`: the kernel hands out port 0 binds from the same ephemeral range it uses for
 * the local side of outgoing connections. A port chosen that way at init and bound seconds later
 * can meanwhile be taken by any client connection on the machine (seen as EADDRINUSE in the test
 * suite under load). PostgreSQL avoids this with a fixed port (5432) outside that range; walsim
 * picks a random port below the ephemeral range, checks that it binds now, and never hands the
 * same port out twice in one process.
 */
import * as fs from 'node:fs';
import * as net from 'node:net';
import { WalsimError } from '../common/errors.ts';

/** Ports handed out by this process (a port chosen but not yet bound must not be chosen again). */
const handedOut = new Set<number>();

/** The lowest port we use: above the well-known and most registered services. */
const LOW = 20_000;

/** The kernel's ephemeral range (Linux's default when /proc is unreadable). */
export function ephemeralRange(): [number, number] {
  try {
    const [lo, hi] = fs
      .readFileSync('/proc/sys/net/ipv4/ip_local_port_range', 'utf8')
      .trim()
      .split(/\s+/)
      .map(Number);
    if (Number.isInteger(lo) && Number.isInteger(hi) && lo! > 0 && hi! >= lo!) return [lo!, hi!];
  } catch {
    // not Linux, or /proc not mounted
  }
  return [32_768, 60_999];
}

/** Does `port` bind on `host` now? Taken ports answer false; any other failure (EADDRNOTAVAIL: not a local address) is thrown as is. */
export function bindsNow(port: number, host: string): Promise<boolean> {
  return new Promise((resolve, reject) => {
    const srv = net.createServer();
    srv.once('error', (e: NodeJS.ErrnoException) =>
      e.code === 'EADDRINUSE' || e.code === 'EACCES' ? resolve(false) : reject(e),
    );
    srv.listen({ port, host, exclusive: true }, () => srv.close(() => resolve(true)));
  });
}

/**
 * WALSIM_PORT_RANGE=LO-HI confines every port this process and its children choose to [LO, HI].
 * Processes that choose ports at the same time (the test suite's workers) each get their own
 * range: a port one of them checked free but has not bound yet cannot be taken by another, which
 * the bind check alone cannot promise across processes.
 */
export const PORT_RANGE_ENV = 'WALSIM_PORT_RANGE';

/** The range WALSIM_PORT_RANGE names, or null when it is unset. */
export function configuredPortRange(): [number, number] | null {
  const v = process.env[PORT_RANGE_ENV];
  if (v === undefined || v === '') return null;
  const m = /^(\d+)-(\d+)$/.exec(v);
  const lo = m ? Number(m[1]) : NaN;
  const hi = m ? Number(m[2]) : NaN;
  if (!(lo >= 1024 && hi <= 65_535 && lo <= hi))
    throw new WalsimError(
      'invalid_input',
      `${PORT_RANGE_ENV}="${v}": expected LO-HI with 1024 <= LO <= HI <= 65535`,
    );
  return [lo, hi];
}

/**
 * A TCP port on `host` that binds now and was not handed out before: from WALSIM_PORT_RANGE when
 * set (every port of it, from a random start), else outside the kernel's ephemeral range (200
 * random tries).
 */
export async function freePort(host: string): Promise<number> {
  const range = configuredPortRange();
  const { candidates, where } = range !== null ? inRange(range) : outsideEphemeral();
  for (const port of candidates) {
    if (handedOut.has(port)) continue;
    if (await bindsNow(port, host)) {
      handedOut.add(port);
      return port;
    }
  }
  throw new WalsimError('io_error', `no free TCP port found on ${host} ${where}`);
}

interface PortCandidates {
  candidates: Iterable<number>;
  /** Where they were drawn from, for the error when none binds. */
  where: string;
}

/** Every port of [lo, hi], from a random one on, wrapping around. */
function inRange([lo, hi]: [number, number]): PortCandidates {
  function* ports(): Generator<number> {
    const span = hi - lo + 1;
    const start = Math.floor(Math.random() * span);
    for (let i = 0; i < span; i++) yield lo + ((start + i) % span);
  }
  return { candidates: ports(), where: `in ${PORT_RANGE_ENV} ${lo}-${hi}` };
}

/** 200 random ports of [LOW, ephLo) and (ephHi, 65535]; everything above LOW if both are empty. */
function outsideEphemeral(): PortCandidates {
  const [ephLo, ephHi] = ephemeralRange();
  const below = Math.max(0, ephLo - LOW);
  const above = Math.max(0, 65_535 - ephHi);
  const span = below + above;
  function* ports(): Generator<number> {
    for (let attempt = 0; attempt < 200; attempt++) {
      const r = Math.floor(Math.random() * (span > 0 ? span : 65_535 - LOW));
      yield span === 0 ? LOW + r : r < below ? LOW + r : ephHi + 1 + (r - below);
    }
  }
  return {
    candidates: ports(),
    where: `outside the ephemeral range ${ephLo}-${ephHi} after 200 attempts`,
  };
}
