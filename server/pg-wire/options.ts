/** The PostgreSQL port's interface to the process shell: what it needs, how it is started. */
import type { PgPassword } from '../cluster-files.ts';
import type { QueryResult } from '../control-protocol.ts';
import type { SessionSettings } from '../sql-read.ts';

/** What a wire session needs from its node. */
export interface PgWireBackend {
  /**
   * Run one statement (ServerNode.execute); `signal` fires on a cancel request; `session` is what
   * the session chose at start-up (SHOW client_encoding reports it).
   */
  execute(sql: string, signal: AbortSignal, session: SessionSettings): Promise<QueryResult>;
  inRecovery(): boolean;
  /** True once a shutdown began: new connections get FATAL 57P03. */
  shuttingDown(): boolean;
  log(message: string): void;
  /** A programmer error (InvariantViolation): the process ends, as for the control endpoint. */
  fatal(e: unknown): never;
}

export interface PgWireOptions {
  host: string;
  port: number;
  /** The password every client must give and how (SCRAM-SHA-256 or md5); null = trust, loopback only. */
  password: PgPassword | null;
  backend: PgWireBackend;
  /** max_connections (PostgreSQL's default 100). */
  maxConnections?: number;
  /** authentication_timeout: a client that has not finished start-up by then is cut off. */
  authTimeoutMs?: number;
}

export interface PgWireHandle {
  port: number;
  /** Open sessions (authenticated or authenticating); a smart shutdown waits for them. */
  sessionCount(): number;
  /** Fast shutdown: end every session with FATAL 57P01, stop listening. */
  close(): Promise<void>;
}
