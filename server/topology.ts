/**
 * Changing a running cluster's shape, the one implementation behind the cluster CLI and the test
 * harness: add a standby from any node (a base backup; from a standby that makes a cascade),
 * repoint a standby to another upstream, rejoin a stopped old primary as a standby of the new one
 * (refused when its WAL diverged), and a switchover (clean stop, promote, old primary back as a
 * standby, siblings repointed). The decisions the simulator runs too — a stopped node's end of
 * WAL, the rejoin verdict, the switchover's steps and the hand-over of synchronous_standby_names —
 * live in server/topology-core.ts (no node:fs, no sockets); this file binds them to the cluster
 * directory and the control endpoint.
 *
 * Entry points: `addStandby`, `repoint`, `rejoinVerdict`, `rejoin`, `switchover`, `waitStreaming`,
 * `walEndOf`.
 */
import * as fs from 'node:fs';
import * as path from 'node:path';
import { WalsimError } from '../common/errors.ts';
import { formatLsn, parseLsn, type Lsn, type TimeLineId } from '../wal/lsn.ts';
import type { RejoinVerdict } from '../wal/timeline-fork.ts';
import {
  rejoinVerdictOf,
  runSwitchover,
  walEndOfDataDir,
  type SwitchoverSteps,
} from './topology-core.ts';
import { ControlClient } from './control-client.ts';
import {
  alterSystem,
  listNodes,
  nodeDir,
  readNodeConfig,
  readPidFile,
  readToken,
  writeNodeConfig,
  type NodeConfig,
  type NodeName,
} from './cluster-files.ts';
import { nodeDisk } from '../common/node-disk.ts';
import { NODE_NAME_RE } from './initdb.ts';
import { freePort } from './ports.ts';
import { STANDBY_SIGNAL } from './startup-replay.ts';
import { runningPid, startNode, stopNode } from './pg-ctl.ts';
import { pollUntil, StopPolling } from './poll.ts';
import { formatConninfo } from './settings.ts';

function hostOf(c: NodeConfig): string {
  return c.listen === '0.0.0.0' ? '127.0.0.1' : c.listen;
}

async function withNode<T>(
  clusterDir: string,
  name: NodeName,
  fn: (c: ControlClient) => Promise<T>,
): Promise<T> {
  const pid = readPidFile(nodeDir(clusterDir, name));
  if (pid === null || runningPid(clusterDir, name) === null)
    throw new WalsimError('not_connected', `node "${name}" is not running`);
  const c = await ControlClient.connect(
    hostOf(readNodeConfig(clusterDir, name)),
    pid.port,
    readToken(clusterDir),
  );
  try {
    return await fn(c);
  } finally {
    c.close();
  }
}

function requireNode(clusterDir: string, name: NodeName): NodeConfig {
  if (!listNodes(clusterDir).includes(name)) {
    throw new WalsimError(
      'invalid_input',
      `no node "${name}" in ${clusterDir} (nodes: ${listNodes(clusterDir).join(', ')})`,
    );
  }
  return readNodeConfig(clusterDir, name);
}

const isStandbyDir = (clusterDir: string, name: NodeName) =>
  fs.existsSync(path.join(nodeDir(clusterDir, name), STANDBY_SIGNAL));

/** Wait until a standby's walreceiver streams (or the node is out of recovery). */
export async function waitStreaming(
  clusterDir: string,
  name: NodeName,
  timeoutMs = 60_000,
): Promise<void> {
  let last = '';
  await pollUntil(
    async () => {
      try {
        const s = await withNode(clusterDir, name, (c) => c.status());
        if (s.role === 'primary') return true;
        last = s.receiverState;
        return s.receiverState === 'streaming';
      } catch (e) {
        last = (e as Error).message;
        return false;
      }
    },
    `standby "${name}" to stream`,
    timeoutMs,
    20,
    () =>
      new WalsimError(
        'timeout',
        `standby "${name}" is not streaming after ${timeoutMs / 1000} s (last state: ${last})`,
      ),
  );
}

/** primary_conninfo naming `to` as upstream, with the standby's application_name. */
function conninfoTo(clusterDir: string, to: NodeName, applicationName: string): string {
  const t = readNodeConfig(clusterDir, to);
  return formatConninfo({ host: hostOf(t), port: t.port, applicationName });
}

/**
 * pg_basebackup from any running node (a primary, or a standby: the new standby then cascades
 * from it), then start the copy as a standby streaming from that node.
 */
export async function addStandby(
  clusterDir: string,
  name: NodeName,
  from: NodeName,
  sharedBuffers?: string,
): Promise<{ port: number; checkpointLsn: string; timeline: TimeLineId }> {
  if (!NODE_NAME_RE.test(name))
    throw new WalsimError('invalid_input', `--name must be a lower-case identifier, got "${name}"`);
  if (listNodes(clusterDir).includes(name))
    throw new WalsimError('invalid_input', `node "${name}" already exists in ${clusterDir}`);
  const source = requireNode(clusterDir, from);
  if (runningPid(clusterDir, from) === null)
    throw new WalsimError('invalid_input', `node "${from}" is not running; start it first`);
  const backup = (await withNode(clusterDir, from, (c) =>
    c.request({ op: 'basebackup', targetDir: nodeDir(clusterDir, name) }),
  )) as { checkpointLsn: string; timeline: TimeLineId };
  // A base backup carries the source's ALTER SYSTEM settings file only if copied; it is not (like
  // pg_basebackup -R writing a fresh primary_conninfo): the new node's settings are written here.
  writeNodeConfig(clusterDir, {
    ...source,
    name,
    role: 'standby',
    port: await freePort(source.listen),
    pgPort: await freePort(source.listen),
    sharedBuffers: sharedBuffers ?? source.sharedBuffers,
    synchronousStandbyNames: '',
    primaryHost: hostOf(source),
    primaryPort: source.port,
    applicationName: name,
  });
  const port = await startNode(clusterDir, name);
  await waitStreaming(clusterDir, name);
  return { port, ...backup };
}

/**
 * Make standby `node` stream from `to`: ALTER SYSTEM SET primary_conninfo + pg_reload_conf() when
 * it runs (the walreceiver restarts at its flush LSN: nothing lost, nothing received twice), or the
 * setting alone when it is stopped.
 */
export async function repoint(
  clusterDir: string,
  node: NodeName,
  to: NodeName,
): Promise<{ running: boolean; conninfo: string }> {
  const cfg = requireNode(clusterDir, node);
  requireNode(clusterDir, to);
  if (node === to)
    throw new WalsimError('invalid_input', `node "${node}" cannot stream from itself`);
  if (!isStandbyDir(clusterDir, node))
    throw new WalsimError(
      'invalid_input',
      `node "${node}" is not a standby (no ${STANDBY_SIGNAL}); only a standby has an upstream`,
    );
  const conninfo = conninfoTo(clusterDir, to, cfg.applicationName);
  if (runningPid(clusterDir, node) !== null) {
    await withNode(clusterDir, node, async (c) => {
      await c.sql(`ALTER SYSTEM SET primary_conninfo = '${conninfo.replace(/'/g, "''")}'`);
      await c.sql('SELECT pg_reload_conf()');
    });
    return { running: true, conninfo };
  }
  alterSystem(nodeDir(clusterDir, node), 'primary_conninfo', conninfo, nodeDisk);
  return { running: false, conninfo };
}

/** A stopped node's end of WAL (where its next record would start) and timeline, read from disk. */
export function walEndOf(
  clusterDir: string,
  name: NodeName,
): { endLsn: Lsn; timeline: TimeLineId } {
  return walEndOfDataDir(nodeDir(clusterDir, name), nodeDisk);
}

export interface RejoinReport {
  verdict: RejoinVerdict;
  oldEndLsn: string;
  oldTimeline: TimeLineId;
  newTimeline: TimeLineId;
}

/** May stopped node `old` follow `to`? Its WAL end against the fork point in `to`'s history. */
export function rejoinVerdict(clusterDir: string, old: NodeName, to: NodeName): RejoinReport {
  requireNode(clusterDir, old);
  requireNode(clusterDir, to);
  if (old === to) throw new WalsimError('invalid_input', `node "${old}" cannot rejoin itself`);
  if (runningPid(clusterDir, old) !== null) {
    throw new WalsimError(
      'invalid_input',
      `node "${old}" is running; stop it first (cluster stop --node ${old})`,
    );
  }
  const r = rejoinVerdictOf(
    { dir: nodeDir(clusterDir, old), disk: nodeDisk },
    { dir: nodeDir(clusterDir, to), disk: nodeDisk },
  );
  return { ...r, oldEndLsn: formatLsn(r.oldEndLsn) };
}

/**
 * Bring stopped node `old` (typically the primary before a failover) back as a standby of `to`,
 * if its WAL does not extend past the fork point: standby.signal, primary_conninfo, start, stream.
 * It then receives the rest of the old timeline up to the switch point and follows the new one.
 */
export async function rejoin(
  clusterDir: string,
  old: NodeName,
  to: NodeName,
): Promise<RejoinReport & { port: number }> {
  const report = rejoinVerdict(clusterDir, old, to);
  if (!report.verdict.ok) {
    throw new WalsimError(
      'invalid_input',
      `cannot rejoin "${old}" as a standby of "${to}": ${report.verdict.message}`,
    );
  }
  const dir = nodeDir(clusterDir, old);
  const cfg = readNodeConfig(clusterDir, old);
  fs.writeFileSync(path.join(dir, STANDBY_SIGNAL), '');
  alterSystem(dir, 'primary_conninfo', conninfoTo(clusterDir, to, cfg.applicationName), nodeDisk);
  const base = JSON.parse(
    fs.readFileSync(path.join(dir, 'walsim.conf.json'), 'utf8'),
  ) as NodeConfig;
  writeNodeConfig(clusterDir, { ...base, role: 'standby' });
  const port = await startNode(clusterDir, old);
  await waitStreaming(clusterDir, old);
  return { ...report, port };
}

export { handOverNames } from './topology-core.ts';

export interface SwitchoverReport {
  from: NodeName;
  to: NodeName;
  /** The old primary's end of WAL (after its shutdown checkpoint) = the new timeline's switch point. */
  switchLsn: string;
  newTimeline: TimeLineId;
  repointed: NodeName[];
  synchronousStandbyNames: string;
}

/**
 * Switchover to standby `to` (which must stream from the primary): fast stop of the primary (its
 * walsenders deliver the shutdown checkpoint and wait for the flush), wait until `to` has received
 * everything, carry synchronous_standby_names over, promote `to`, rejoin the old primary as its
 * standby on the new timeline, and repoint the old primary's other standbys to `to`.
 */
export async function switchover(
  clusterDir: string,
  to: NodeName,
  timeoutMs = 60_000,
): Promise<SwitchoverReport> {
  const toCfg = requireNode(clusterDir, to);
  const running = listNodes(clusterDir).filter((n) => runningPid(clusterDir, n) !== null);
  const from = await theOnePrimary(clusterDir, running);
  if (from === to) throw new WalsimError('invalid_input', `node "${to}" is already the primary`);
  const fromCfg = readNodeConfig(clusterDir, from);
  await requireStreamingTarget(clusterDir, from, fromCfg, to, toCfg);
  const siblings = running.filter(
    (n) => n !== from && n !== to && readNodeConfig(clusterDir, n).primaryPort === fromCfg.port,
  );

  const out = await runSwitchover(
    {
      from,
      to,
      fromNames: fromCfg.synchronousStandbyNames,
      fromApplicationName: fromCfg.applicationName,
      toApplicationName: toCfg.applicationName,
      siblings,
    },
    switchoverSteps(clusterDir, from, timeoutMs),
  );
  return {
    from,
    to,
    switchLsn: formatLsn(out.switchLsn),
    newTimeline: out.newTimeline,
    repointed: siblings,
    synchronousStandbyNames: out.synchronousStandbyNames,
  };
}

/** The one running primary among `running`; none or several is refused (with recovery hints). */
async function theOnePrimary(clusterDir: string, running: NodeName[]): Promise<NodeName> {
  const primaries: NodeName[] = [];
  for (const n of running)
    if ((await withNode(clusterDir, n, (c) => c.status())).inRecovery === false) primaries.push(n);
  if (primaries.length !== 1)
    throw new WalsimError(
      'invalid_input',
      `switchover needs exactly one running primary, found ${primaries.length} (${primaries.join(', ') || 'none'})` +
        (primaries.length === 0
          ? `; if a switchover was interrupted, "npm run cluster -- status" shows where it stopped: ` +
            `the old primary stopped cleanly and nothing promoted → start it again ("cluster start --node OLD"); ` +
            `the target promoted → bring the old primary back with "cluster rejoin --node OLD --to TARGET" ` +
            `and repoint the other standbys ("cluster repoint --node S --to TARGET")`
          : ''),
    );
  return primaries[0]!;
}

/** Refuse a target that is not a running standby streaming from the primary `from`. */
async function requireStreamingTarget(
  clusterDir: string,
  from: NodeName,
  fromCfg: NodeConfig,
  to: NodeName,
  toCfg: NodeConfig,
): Promise<void> {
  const toStatus = await withNode(clusterDir, to, (c) => c.status()).catch(() => null);
  if (toStatus === null || toStatus.role !== 'standby')
    throw new WalsimError('invalid_input', `switchover target "${to}" must be a running standby`);
  // A standby that just rejoined may be between timelines (EndOfTimeline, then streaming again on
  // the new one): give it a moment to stream before refusing.
  const streaming =
    toCfg.primaryPort === fromCfg.port &&
    (await waitStreaming(clusterDir, to, 10_000).then(
      () => true,
      () => false,
    ));
  if (!streaming) {
    throw new WalsimError(
      'invalid_input',
      `switchover target "${to}" must be streaming from the primary "${from}" (repoint it first)`,
    );
  }
}

/** runSwitchover's steps bound to the cluster directory and the nodes' control endpoints. */
function switchoverSteps(
  clusterDir: string,
  from: NodeName,
  timeoutMs: number,
): SwitchoverSteps<NodeName> {
  return {
    stopFast: async (n) => {
      await stopNode(clusterDir, n, 'fast');
    },
    walEnd: (n) => walEndOf(clusterDir, n).endLsn,
    waitReceived: (n, endLsn) => waitReceived(clusterDir, n, endLsn, from, timeoutMs),
    setSynchronousStandbyNames: (n, names) =>
      withNode(clusterDir, n, async (c) => {
        await c.sql(`ALTER SYSTEM SET synchronous_standby_names = '${names.replace(/'/g, "''")}'`);
        await c.sql('SELECT pg_reload_conf()');
      }),
    promote: (n) => promoteAndRecord(clusterDir, n),
    rejoin: async (old, n) => (await rejoin(clusterDir, old, n)).newTimeline,
    repoint: async (n, up) => {
      await repoint(clusterDir, n, up);
    },
  };
}

/** Wait until standby `n` has received up to `endLsn`, the stopped primary `from`'s end of WAL. */
async function waitReceived(
  clusterDir: string,
  n: NodeName,
  endLsn: Lsn,
  from: NodeName,
  timeoutMs: number,
): Promise<void> {
  let received = '?';
  await pollUntil(
    async () => {
      // A target that stops answering ends the switchover at once, as does one out of recovery.
      const s = await withNode(clusterDir, n, (c) => c.status()).catch((e: Error) => {
        throw new StopPolling(e);
      });
      if (s.role !== 'standby')
        throw new StopPolling(
          new WalsimError(
            'invalid_input',
            `switchover: "${n}" left recovery before the switchover promoted it`,
          ),
        );
      received = s.receiveLsn;
      return parseLsn(s.receiveLsn) >= endLsn;
    },
    `"${n}" to receive everything`,
    timeoutMs,
    50,
    () =>
      new WalsimError(
        'timeout',
        `switchover: "${n}" received up to ${received} of ${formatLsn(endLsn)}; "${from}" is stopped, nothing was promoted ` +
          `(start it again with "npm run cluster -- start --node ${from}")`,
      ),
  );
}

/** Promote `n` (waiting up to 60 s) and record it as a primary in its node config. */
async function promoteAndRecord(clusterDir: string, n: NodeName): Promise<void> {
  await withNode(clusterDir, n, async (c) => {
    const r = (await c.request({ op: 'promote', wait: true, waitSeconds: 60 })) as {
      promoted: boolean;
    };
    if (!r.promoted)
      throw new WalsimError('timeout', `switchover: "${n}" did not promote within 60 seconds`);
  });
  const base = JSON.parse(
    fs.readFileSync(path.join(nodeDir(clusterDir, n), 'walsim.conf.json'), 'utf8'),
  ) as NodeConfig;
  writeNodeConfig(clusterDir, { ...base, role: 'primary' });
}
