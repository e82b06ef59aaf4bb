/**
 * What a `ServerNode` is opened with: its data directory, settings, log and FATAL exit, and the
 * bindings of everything nondeterministic (`NodeEnv`), which the node never defaults.
 *
 * Entry points: `NodeOptions`, `NodeEnv`.
 */
import type { Clock } from '../common/clock.ts';
import type { Disk } from '../common/disk.ts';
import type { UpstreamDialer } from '../common/transport.ts';
import type { NodeConfig } from './node-config.ts';

export interface NodeOptions {
  dataDir: string;
  config: NodeConfig;
  /**
   * NBuffers: shared_buffers as parsed once where the settings were read (server/main.ts at the
   * process's start, the simulator's cluster from its scenario); `ServerNode.open` sizes the pool
   * with it. PGC_POSTMASTER, as in PostgreSQL: a reload never changes it.
   */
  nBuffers: number;
  token: string;
  log(message: string): void;
  /**
   * A failure the node cannot continue after (an exception inside redo in the startup process):
   * log FATAL and end the process with a non-zero exit; the next start is crash recovery.
   */
  fatal(error: unknown): void;
  /** Clock, disk and the dialer to the upstream: always given, the node has no defaults. */
  env: NodeEnv;
}

/**
 * Everything nondeterministic the node core uses, injected: clock and timers, the file system, and
 * the dialer to the upstream. Production (server/main.ts) binds Node's clock, node:fs (behind the
 * slow_disk layer) and ws; the simulator (sim/) its scheduler, in-memory disk and in-memory network.
 */
export interface NodeEnv {
  clock: Clock;
  disk: Disk;
  /** Replication connections to the upstream primary_conninfo names. */
  dialer: UpstreamDialer;
}
