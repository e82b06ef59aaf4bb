/**
 * Server process entry point: `node --import tsx server/main.ts walsim-server --datadir DIR
 * --cluster-dir DIR`. Opens the node (replaying local WAL), serves the WebSocket port, writes
 * postmaster.pid, and handles pg_ctl's signals: SIGTERM smart, SIGINT fast, SIGQUIT immediate.
 */
import * as fs from 'node:fs';
import * as path from 'node:path';
import { parseArgs } from 'node:util';
import type WebSocket from 'ws';
import { isWalsimError } from '../common/errors.ts';
import { createDataDirLockFile } from './lock-files.ts';
import { InvariantViolation } from '../common/assert.ts';
import {
  isWalsimServer,
  loadNodeConfig,
  pidFilePath,
  readPgPassword,
  readToken,
  SERVER_MARKER,
  writeFileAtomic,
  type NodeConfig,
  type PidFile,
  type StartingPidFile,
} from './cluster-files.ts';
import {
  CONTROL_MAX_PAYLOAD,
  parseControlRequest,
  requestIdOf,
  type ControlReply,
  type ControlRequest,
  type StopMode,
} from './control-protocol.ts';
import { ServerNode } from './node.ts';
import { pollUntil } from './poll.ts';
import type { ServerStatus } from './node-status.ts';
import { systemClock } from '../common/system-clock.ts';
import { nodeDisk } from '../common/node-disk.ts';
import { blockThread, LatencyDisk } from '../common/latency-disk.ts';
import { wsConn, wsReplicationDialer } from './ws-conn.ts';
import type { Upstream } from '../common/transport.ts';
import {
  startWsServer,
  CLOSE_PROTOCOL_VIOLATION,
  CLOSE_SHUTTING_DOWN,
  type WsServerHandle,
} from './ws-server.ts';
import { startPgWireServer, type PgWireHandle } from './pg-wire/index.ts';
import { exitWhenFlushed } from './process-exit.ts';
import { parseSharedBuffers } from '../storage/shared-buffers.ts';

/** Largest frame the walsender side accepts from a standby (ws maxPayload). */
const REPLICATION_MAX_PAYLOAD = 64 * 1024;

const { values, positionals } = parseArgs({
  args: process.argv.slice(2),
  options: { datadir: { type: 'string' }, 'cluster-dir': { type: 'string' } },
  allowPositionals: true,
});
if (positionals[0] !== SERVER_MARKER || !values.datadir || !values['cluster-dir']) {
  console.error(`usage: server/main.ts ${SERVER_MARKER} --datadir DIR --cluster-dir DIR`);
  await exitWhenFlushed(2);
}
// Both are set: exitWhenFlushed never returns.
const dataDir = path.resolve(values.datadir!);
const clusterDir = path.resolve(values['cluster-dir']!);
const log = (message: string) =>
  console.log(`${new Date().toISOString()} [${process.pid}] ${message}`);

let node: ServerNode;
let server: WsServerHandle;
let wire: PgWireHandle | null = null;
let exiting = false;
/** Open control sessions (a smart shutdown waits for them to end). */
const controlSessions = new Set<WebSocket>();
/** Set while a smart shutdown waits for sessions: new sessions are refused; a fast stop cuts it short. */
let smartWait: { release(): void } | null = null;

function removePidFile(): void {
  try {
    const p = pidFilePath(dataDir);
    const v = JSON.parse(fs.readFileSync(p, 'utf8')) as PidFile;
    if (v.pid === process.pid) fs.rmSync(p);
  } catch {
    /* already gone */
  }
}

/**
 * A failure the process cannot continue after: an InvariantViolation anywhere (a programmer error:
 * state may be half-changed, e.g. WAL ahead of storage), an exception inside redo, an fsync
 * failure, any uncaught exception. Like PostgreSQL's FATAL/PANIC in a process the postmaster
 * cannot do without: log it, remove postmaster.pid, exit 1. Nothing more is written, so the data
 * directory stays as a crash leaves it and the next start runs crash recovery.
 */
// fatal() and the immediate stop exit at once, without exitWhenFlushed: the server's stdout and stderr are
// its server.log (pg-ctl.ts), a file, written synchronously, so nothing can be pending; and an
// immediate stop or a PANIC must not wait on anything.
function fatal(e: unknown): never {
  log(`FATAL:  ${e instanceof Error ? (e.stack ?? e.message) : String(e)}`);
  log('LOG:  server process exiting with exit code 1');
  removePidFile();
  process.exit(1);
}

/** pg_ctl stop -m immediate: exit at once, no checkpoint, no more WAL sent; next start is crash recovery. */
function immediateStop(): never {
  log('LOG:  received immediate shutdown request');
  removePidFile();
  process.exit(0);
}

/**
 * Smart shutdown (pg_ctl -m smart): refuse new sessions and wait until the open ones end, then shut
 * down like fast. A fast (or immediate) request while waiting takes over.
 */
async function waitForSessions(): Promise<void> {
  const open = () => controlSessions.size + (wire?.sessionCount() ?? 0);
  if (open() > 0) log(`LOG:  smart shutdown waits for ${open()} session(s) to end`);
  let released = false;
  smartWait = { release: () => (released = true) };
  // No deadline: smart waits as long as a session stays open (pg_ctl's own -t bounds its wait).
  await pollUntil(async () => released || open() === 0, 'open sessions to end', Infinity, 50);
  smartWait = null;
}

async function cleanStop(mode: 'smart' | 'fast'): Promise<void> {
  if (exiting) {
    if (mode === 'fast' && smartWait !== null) {
      log('LOG:  received fast shutdown request during smart shutdown');
      smartWait.release();
    }
    return;
  }
  exiting = true;
  log(`LOG:  received ${mode} shutdown request`);
  if (mode === 'smart') await waitForSessions();
  try {
    await node.shutdown(mode);
  } catch (e) {
    log(`LOG:  shutdown error: ${(e as Error).stack}`);
  }
  for (const ws of server.sockets())
    ws.close(CLOSE_SHUTTING_DOWN, 'the database system is shutting down');
  await wire?.close();
  await server.close();
  removePidFile();
  log('LOG:  database system is shut down');
  await exitWhenFlushed(0);
}

function stop(mode: StopMode): void {
  if (mode === 'immediate') {
    try {
      node?.send({ type: 'STOP', mode });
    } finally {
      immediateStop();
    }
  }
  void cleanStop(mode);
}

function serveControl(ws: WebSocket): void {
  ws.on('error', () => {});
  if (exiting) {
    ws.close(CLOSE_SHUTTING_DOWN, 'the database system is shutting down');
    return;
  }
  controlSessions.add(ws);
  ws.on('close', () => controlSessions.delete(ws));
  // Greeting (reply id 0): tells the client its token was accepted.
  ws.send(
    JSON.stringify({
      id: 0,
      ok: true,
      result: { server: 'walsim', role: node.inRecovery ? 'standby' : 'primary' },
    } satisfies ControlReply),
  );
  ws.on('message', (data, isBinary) => {
    const text = isBinary ? '' : data.toString();
    const reply = (r: ControlReply) => ws.readyState === ws.OPEN && ws.send(JSON.stringify(r));
    let req;
    if (isBinary) {
      // A binary frame on a JSON text protocol is not a typo but a foreign client: refuse and close.
      const message = 'invalid control request: frames must be JSON text';
      reply({ id: null, ok: false, error: { code: '08P01', message } });
      ws.close(CLOSE_PROTOCOL_VIOLATION, message);
      return;
    }
    try {
      req = parseControlRequest(text);
    } catch (e) {
      reply({
        id: requestIdOf(text),
        ok: false,
        error: { code: '08P01', message: (e as Error).message },
      });
      return;
    }
    const id = req.id;
    runControlRequest(req).then(
      (result) => reply({ id, ok: true, result }),
      (e: unknown) => replyError(ws, reply, id, e),
    );
  });
}

/** One parsed control request against the node; its result is the reply's `result`. */
async function runControlRequest(req: ControlRequest): Promise<unknown> {
  switch (req.op) {
    case 'sql':
      return node.execute(req.sql);
    case 'status':
      return {
        ...node.status(),
        pid: process.pid,
        port: server.port,
        pgPort: wire?.port ?? null,
        dataDir,
      } satisfies ServerStatus;
    case 'inspect':
      return node.inspect();
    case 'basebackup':
      return node.baseBackup(path.resolve(req.targetDir));
    case 'fault':
      return node.injectFault(req.fault, req.holdMs, req.latencyMs);
    case 'stop':
      setImmediate(() => stop(req.mode));
      return { stopping: req.mode };
    case 'promote': {
      const promoted = await node.promote(req.wait, req.waitSeconds);
      return { promoted, failover: node.failoverReport() };
    }
  }
}

/**
 * A control request failed: an InvariantViolation is FATAL (rule 7); a WalsimError is answered
 * with its SQLSTATE, message, DETAIL and severity; anything else is an internal error, logged.
 */
function replyError(
  ws: WebSocket,
  reply: (r: ControlReply) => void,
  id: ControlReply['id'],
  e: unknown,
): void {
  if (e instanceof InvariantViolation) fatal(e);
  if (isWalsimError(e)) {
    const severity = (e as { severity?: 'WARNING' }).severity;
    reply({
      id,
      ok: false,
      error: {
        code: e.sqlstate,
        message: e.message,
        ...(e.detail ? { detail: e.detail } : {}),
        ...(severity ? { severity } : {}),
      },
    });
    // A synchronous-replication wait ended by fast shutdown: PostgreSQL warns, then ends the session.
    if (severity === 'WARNING' && e.kind === 'shutting_down')
      ws.close(CLOSE_SHUTTING_DOWN, 'terminating connection due to administrator command');
  } else {
    log(`ERROR:  internal error: ${(e as Error).stack}`);
    reply({
      id,
      ok: false,
      error: {
        code: (e as { code?: string }).code ?? 'XX000',
        message: (e as Error).message,
      },
    });
  }
}

async function main(): Promise<void> {
  // PostmasterMain's umask(PG_MODE_MASK_OWNER): whatever the server creates is its user's alone.
  process.umask(0o077);
  // CreateDataDirLockFile: before anything reads or writes the data directory. A live server
  // holding it makes this one exit (FATAL lock file exists), having touched nothing.
  const starting: StartingPidFile = {
    pid: process.pid,
    startedAt: new Date().toISOString(),
    marker: SERVER_MARKER,
    status: 'starting',
  };
  createDataDirLockFile(dataDir, JSON.stringify(starting) + '\n', isWalsimServer);
  const config: NodeConfig = loadNodeConfig(dataDir, nodeDisk);
  const token = readToken(clusterDir);
  process.on('SIGQUIT', immediateStop);
  process.on('SIGINT', () => stop('fast'));
  process.on('SIGTERM', () => stop('smart'));
  process.on('uncaughtException', fatal);
  process.on('unhandledRejection', fatal);
  // The production bindings: Node's clock and timers, node:fs behind the slow_disk fault's latency
  // layer (a pass-through until the fault is injected), ws for replication (the walreceiver dials
  // its upstream's /replication endpoint with the cluster's token). The node has no defaults.
  const env = {
    clock: systemClock,
    disk: new LatencyDisk(nodeDisk, systemClock, blockThread),
    dialer: ({ host, port }: Upstream) => wsReplicationDialer(host, port, token),
  };
  const { nBuffers } = parseSharedBuffers(config.sharedBuffers); // once, as at a postmaster's start
  node = ServerNode.open({ dataDir, config, nBuffers, token, log, fatal, env });
  server = await startWsServer({
    host: config.listen,
    port: config.port,
    token,
    // A standby sends only START_REPLICATION and status updates (well under 1 kB); WAL flows the
    // other way, so the walsender side refuses any larger frame (close 1009) before decoding it.
    maxPayload: { replication: REPLICATION_MAX_PAYLOAD, control: CONTROL_MAX_PAYLOAD },
    onConnection: (endpoint, ws) => {
      if (endpoint === 'control') serveControl(ws);
      else node.acceptReplication(wsConn(ws));
    },
  });
  // The PostgreSQL wire protocol: the same statements through the same ServerNode.execute.
  wire = await startPgWireServer({
    host: config.listen,
    port: config.pgPort ?? 0,
    password: readPgPassword(clusterDir),
    backend: {
      execute: (sql, signal, session) => node.execute(sql, signal, session),
      inRecovery: () => node.inRecovery,
      shuttingDown: () => exiting,
      log,
      fatal,
    },
  });
  node.config.pgPort = wire.port; // SHOW port
  await node.startRole();
  const pid: PidFile = {
    pid: process.pid,
    port: server.port,
    pgPort: wire.port,
    role: node.inRecovery ? 'standby' : 'primary',
    startedAt: starting.startedAt,
    marker: SERVER_MARKER,
    status: 'ready',
  };
  writeFileAtomic(pidFilePath(dataDir), JSON.stringify(pid) + '\n', nodeDisk);
  log(
    `LOG:  ${pid.role} listening on ${config.listen}:${server.port} (control) and ${config.listen}:${wire.port} (PostgreSQL protocol), shared_buffers=${config.sharedBuffers} (${node.nBuffers} buffers)`,
  );
}

main().catch((e: unknown) => {
  const err = e as NodeJS.ErrnoException & { address?: string; port?: number };
  if (err?.code === 'EADDRINUSE') {
    // StreamServerPort's words; a port taken by another program needs no stack trace.
    log(
      `LOG:  could not bind IPv4 address "${err.address}" port ${err.port}: Address already in use\n` +
        `HINT:  Is another server already running on port ${err.port}? If not, wait a few seconds and retry.`,
    );
    log('FATAL:  could not create any TCP/IP sockets');
  }
  // An expected refusal (another server holds the data directory) needs no stack either.
  else log(`FATAL:  ${isWalsimError(e) ? e.message : ((e as Error).stack ?? String(e))}`);
  removePidFile();
  void exitWhenFlushed(1);
});
