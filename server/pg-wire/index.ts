/**
 * The PostgreSQL wire protocol (3.0) on every node, so psql, libpq and node-postgres connect to
 * walsim as to a PostgreSQL 15 server. Entry point: `startPgWireServer`; the server keeps the
 * sessions, admits them (57P03 during shutdown, 53300 past max_connections), hands out their
 * BackendKeyData and routes cancel requests. The folder's README says who does what.
 */
import * as net from 'node:net';
import type { PgWireHandle, PgWireOptions } from './options.ts';
import { scramVerifier, type ScramVerifier } from './auth.ts';
import { FatalError } from './framing.ts';
import { PgWireSession, type SessionHost } from './session.ts';
import { isLoopback } from './startup.ts';

export { MAX_STARTUP_PACKET_LENGTH, QUERY_MESSAGE_LIMIT, SMALL_MESSAGE_LIMIT } from './framing.ts';
export { scramVerifier, type ScramVerifier } from './auth.ts';
export type { PgWireBackend, PgWireHandle, PgWireOptions } from './options.ts';

export class PgWireServer implements SessionHost {
  private readonly sessions = new Set<PgWireSession>();
  private readonly admitted = new Set<PgWireSession>();
  /** Computed once, like the verifier PostgreSQL keeps in pg_authid. */
  readonly scramVerifier: ScramVerifier | null;
  constructor(readonly opts: PgWireOptions) {
    this.scramVerifier =
      opts.password?.passwordEncryption === 'scram-sha-256'
        ? scramVerifier(opts.password.password)
        : null;
  }

  accept(socket: net.Socket): void {
    const session = new PgWireSession(socket, this);
    this.sessions.add(session);
    if (this.opts.password === null && !isLoopback(socket.remoteAddress)) {
      session.fatal(
        new FatalError(
          '28000',
          `no pg_hba.conf entry for host "${socket.remoteAddress}": walsim trusts loopback clients only; start the cluster with --password to accept others`,
        ),
      );
    }
  }

  /** A start-up packet arrived: the server-wide checks PostgreSQL's postmaster makes. */
  admit(session: PgWireSession): void {
    if (this.opts.backend.shuttingDown())
      throw new FatalError('57P03', 'the database system is shutting down');
    if (this.admitted.size >= (this.opts.maxConnections ?? 100))
      throw new FatalError('53300', 'sorry, too many clients already');
    this.admitted.add(session);
  }

  forget(session: PgWireSession): void {
    this.sessions.delete(session);
    this.admitted.delete(session);
  }

  /**
   * A backend pid for a new session: walsim's sessions share one process, so each gets its own
   * number (from the server's pid on, skipping the ones in use) to tell them apart, as libpq's
   * PQbackendPID and cancel requests expect.
   */
  allocatePid(): number {
    const inUse = new Set([...this.sessions].map((s) => s.backendPid));
    do this.lastPid = this.lastPid >= 0x7fffffff ? 1 : this.lastPid + 1;
    while (inUse.has(this.lastPid));
    return this.lastPid;
  }
  private lastPid = process.pid;

  cancel(pid: number, secretKey: number): void {
    for (const s of this.admitted)
      if (s.backendPid === pid && s.secretKey === secretKey) s.cancel();
  }

  count(): number {
    return this.admitted.size;
  }

  terminateAll(): void {
    for (const s of this.sessions) s.terminate();
  }
}

/** Listen for PostgreSQL clients on host:port (port 0: any free port). */
export async function startPgWireServer(opts: PgWireOptions): Promise<PgWireHandle> {
  const wire = new PgWireServer(opts);
  const server = net.createServer((socket) => wire.accept(socket));
  server.on('error', (e) =>
    opts.backend.log(`LOG:  PostgreSQL protocol listener error: ${e.message}`),
  );
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(opts.port, opts.host, () => {
      server.off('error', reject);
      resolve();
    });
  });
  const port = (server.address() as net.AddressInfo).port;
  return {
    port,
    sessionCount: () => wire.count(),
    close: async () => {
      // Stop listening and end every session; the sockets finish flushing on their own.
      server.close();
      wire.terminateAll();
    },
  };
}
