/**
 * pg_ctl for walsim: start a node's server process in the background and wait until it serves;
 * stop it with pg_ctl's signals and wait until it is gone. Used by the cluster CLI and the tests.
 * Only pids from the node's own postmaster.pid that are verified walsim servers are signalled.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import * as fs from 'node:fs';
import * as path from 'node:path';
import { WalsimError } from '../common/errors.ts';
import { FILE_MODE } from '../common/durable-file.ts';
import {
  isWalsimServer,
  nodeDir,
  readAnyPidFile,
  readPidFile,
  SERVER_MARKER,
  type NodeName,
} from './cluster-files.ts';
import type { StopMode } from './control-protocol.ts';
import { splitBrainRefusal } from './fencing.ts';
import { entryArgs, PROJECT_ROOT } from './entry.ts';
import { pollUntil, StopPolling } from './poll.ts';

const SIGNAL_OF: Record<StopMode, NodeJS.Signals> = {
  smart: 'SIGTERM',
  fast: 'SIGINT',
  immediate: 'SIGQUIT',
};

/**
 * Servers this process spawned whose start is not confirmed yet (no postmaster.pid with their
 * pid read back), by data directory: a stop that comes meanwhile (a sweep's Ctrl-C while a
 * cell's nodes start) must still find them, or a server would come up after its cluster was
 * cleaned away and run on with nobody to stop it.
 */
const startsUnderWay = new Map<string, ChildProcess>();

/** The pid of the node's server, starting or serving (it holds postmaster.pid), or null. */
export function runningPid(clusterDir: string, name: NodeName): number | null {
  const dataDir = nodeDir(clusterDir, name);
  const pid = readAnyPidFile(dataDir);
  return pid !== null && isWalsimServer(pid.pid, dataDir) ? pid.pid : null;
}

/**
 * Start one node's server process in the background and wait until it accepts connections.
 * Refuses (WalsimError 'split_brain') to start an old primary after another node was promoted. A
 * server already running on the data directory makes the new one exit (its postmaster.pid lock):
 * the error then quotes its FATAL and HINT lines.
 */
export async function startNode(
  clusterDir: string,
  name: NodeName,
  timeoutMs = 60_000,
): Promise<number> {
  const dataDir = nodeDir(clusterDir, name);
  const refusal = splitBrainRefusal(clusterDir, name);
  if (refusal !== null) throw new WalsimError('split_brain', refusal, '55000');
  // A stale postmaster.pid is the server's business (createDataDirLockFile), as in PostgreSQL.
  const log = fs.openSync(path.join(dataDir, 'server.log'), 'a', FILE_MODE);
  const child = spawn(
    process.execPath,
    [
      ...entryArgs('server/main.ts'),
      SERVER_MARKER,
      '--datadir',
      path.resolve(dataDir),
      '--cluster-dir',
      clusterDir,
    ],
    { cwd: PROJECT_ROOT, detached: true, stdio: ['ignore', log, log] },
  );
  fs.closeSync(log);
  let exited: number | null = null;
  child.once('exit', (code) => (exited = code ?? -1));
  child.unref();
  const logPath = path.join(dataDir, 'server.log');
  let port: number | null = null;
  const key = path.resolve(dataDir);
  startsUnderWay.set(key, child);
  try {
    await waitStarted();
  } finally {
    if (startsUnderWay.get(key) === child) startsUnderWay.delete(key);
  }
  return port!;

  function waitStarted(): Promise<void> {
    return pollUntil(
      async () => {
        const pid = readPidFile(dataDir);
        if (pid !== null && pid.pid === child.pid) return ((port = pid.port), true);
        if (exited === null) return false;
        const tail = fs.readFileSync(logPath, 'utf8').trim().split('\n').slice(-5).join('\n');
        throw new StopPolling(
          new WalsimError(
            'io_error',
            `node "${name}" exited during start (code ${exited}); see ${logPath}:\n${tail}`,
          ),
        );
      },
      `node "${name}" to start`,
      timeoutMs,
      50,
      () =>
        new WalsimError(
          'timeout',
          `node "${name}" did not start within ${timeoutMs / 1000} s; see ${logPath}`,
        ),
    );
  }
}

/** pg_ctl stop: signal, then wait until the process is gone. */
export async function stopNode(
  clusterDir: string,
  name: NodeName,
  mode: StopMode,
  timeoutMs = 60_000,
): Promise<boolean> {
  const dataDir = nodeDir(clusterDir, name);
  let pid = runningPid(clusterDir, name);
  if (pid === null) {
    // Not in postmaster.pid yet: a server this process is starting (see startsUnderWay). Until its
    // handlers are installed a signal takes its default action, and SIGQUIT's dumps core, so an
    // immediate stop kills it outright; it has served nothing yet, so nothing is lost.
    const starting = startsUnderWay.get(path.resolve(dataDir));
    if (starting?.pid === undefined || starting.exitCode !== null || starting.signalCode !== null)
      return false;
    pid = starting.pid;
    starting.kill(mode === 'immediate' ? 'SIGKILL' : SIGNAL_OF[mode]);
  } else {
    process.kill(pid, SIGNAL_OF[mode]);
  }
  // Gone = no longer a walsim server for this data directory. `kill(pid, 0)` alone is not enough:
  // a server whose parent does not reap it (a container's init, a parent blocked in spawnSync)
  // stays a zombie, which kill(0) still finds, while its command line is already empty.
  await pollUntil(
    async () => !isWalsimServer(pid, dataDir),
    `node "${name}" to shut down`,
    timeoutMs,
    20,
    () =>
      new WalsimError(
        'timeout',
        `node "${name}" (pid ${pid}) did not shut down within ${timeoutMs / 1000} s${mode === 'smart' ? '; try --mode fast' : ''}`,
      ),
  );
  return true;
}
