/**
 * `npm run cluster -- start` (pg_ctl start for a walsim cluster, and initdb when there is none):
 * `start`'s options, validated before initdb writes anything; starting every node, primaries first,
 * or one named node; removing a cluster this command created when its first start fails; and
 * `isStandby`, which the other cluster commands share.
 *
 * Entry points: `cmdStart`, `isStandby`.
 */
import { parsePgMajor } from '../postgres/pg-install.ts';
import { isIP } from 'node:net';
import * as fs from 'node:fs';
import * as path from 'node:path';
import { checkSegmentSize, parseSegmentSize } from '../../wal/segment.ts';
import {
  listNodes,
  nodeDir,
  PASSWORD_ENCRYPTIONS,
  readNodeConfig,
  readPidFile,
  type NodeName,
  type PasswordEncryption,
} from '../../server/cluster-files.ts';
import { runningPid, startNode, stopNode } from '../../server/pg-ctl.ts';
import { isWalsimError, WalsimError } from '../../common/errors.ts';
import { STANDBY_SIGNAL } from '../../server/node.ts';
import { waitStreaming } from '../../server/topology.ts';
import { initCluster, type InitOptions } from '../../server/initdb.ts';
import { lockNewCluster } from '../../server/lock-files.ts';
import { locked } from './lock.ts';
import { bindsNow } from '../../server/ports.ts';
import {
  parseCheckpointTimeout,
  parseDropStrategy,
  parseMaxWalSize,
  parseSynchronousCommit,
  parseWalKeepSize,
} from '../../server/settings.ts';
import { parseSharedBuffers } from '../../storage/shared-buffers.ts';
import { clusterDirOf, parseCli, printJson, UsageError } from '../cli/command.ts';
import { startDashboardProcess } from './dashboard-process.ts';

export const isStandby = (clusterDir: string, name: NodeName) =>
  fs.existsSync(path.join(nodeDir(clusterDir, name), STANDBY_SIGNAL));

/** Node names standby1..N of --standbys N, or the --standby names; undefined for the seed's one "standby". */
function standbyNamesOf(
  count: string | undefined,
  names: string[] | undefined,
): string[] | undefined {
  if (count !== undefined && names !== undefined)
    throw new UsageError('give --standbys N or --standby NAME, not both');
  if (names !== undefined) return names;
  if (count === undefined) return undefined;
  const n = Number(count);
  if (!/^\d+$/.test(count) || n < 0 || n > 16)
    throw new UsageError(`--standbys must be an integer from 0 to 16, got "${count}"`);
  return Array.from({ length: n }, (_, i) => `standby${i + 1}`);
}

/** `start` options that only shape a new cluster (initdb's), with their defaults. */
const INIT_OPTION_DEFAULTS = {
  'shared-buffers': '128MB',
  'synchronous-commit': 'remote_write',
  'drop-strategy': 'cached-lookup',
  'threshold-divisor': '32',
  'wal-segment-size': '16MB',
  'checkpoint-timeout': '5min',
  'max-wal-size': '1GB',
  'wal-keep-size': '0',
  listen: '127.0.0.1',
  'password-encryption': 'scram-sha-256',
} as const;

/** `start`'s options (parseArgs). */
const START_OPTIONS = {
  dir: { type: 'string' },
  'shared-buffers': { type: 'string' },
  'standby-shared-buffers': { type: 'string' },
  'synchronous-commit': { type: 'string' },
  'drop-strategy': { type: 'string' },
  'threshold-divisor': { type: 'string' },
  'force-optimized': { type: 'boolean' },
  'pg-version': { type: 'string' },
  'wal-segment-size': { type: 'string' },
  'checkpoint-timeout': { type: 'string' },
  'max-wal-size': { type: 'string' },
  'wal-keep-size': { type: 'string' },
  listen: { type: 'string' },
  'pg-port': { type: 'string' },
  password: { type: 'string' },
  'password-encryption': { type: 'string' },
  standbys: { type: 'string' },
  standby: { type: 'string', multiple: true },
  'synchronous-standby-names': { type: 'string' },
  node: { type: 'string' },
  json: { type: 'boolean', default: false },
  dashboard: { type: 'boolean', default: false },
  'dashboard-port': { type: 'string', default: '0' },
} as const;

/**
 * `start [--node NAME]`: create the cluster if there is none (initdb), then start every node that is
 * not running, or the one node named.
 */
export async function cmdStart(argv: string[], usage: string): Promise<number> {
  const { values } = parseCli(argv, START_OPTIONS, usage);
  const clusterDir = clusterDirOf(values.dir);
  const nodes = listNodes(clusterDir);
  const dashboardPort = Number(values['dashboard-port']);
  if (!/^\d+$/.test(values['dashboard-port']) || dashboardPort > 65535)
    throw new UsageError(`--dashboard-port must be a TCP port, got "${values['dashboard-port']}"`);
  // Everything but --dir, --node and --json shapes a new cluster; on an existing one it would be
  // ignored, so it is refused, naming each (`start --pg-port` used to do nothing).
  const initOnly = Object.keys(values).filter(
    (k) =>
      !['dir', 'node', 'json', 'dashboard', 'dashboard-port'].includes(k) &&
      values[k as keyof typeof values] !== undefined,
  );
  if (nodes.length > 0 && initOnly.length > 0)
    throw new UsageError(
      `the cluster at ${clusterDir} exists; ${initOnly.map((k) => `--${k}`).join(', ')} only apply when a cluster is created and would be ignored ` +
        `(remove them; change a reloadable setting with "npm run cluster -- set"; or pass a new --dir)`,
    );
  if (values.node !== undefined) return startOneNode(clusterDir, nodes, values.node, values.json);
  let created = false;
  if (nodes.length === 0) {
    const opts = await initOptionsOf(values);
    await initCluster(clusterDir, opts, (building) => lockNewCluster(building, 'start'));
    created = true;
  }
  return locked(clusterDir, 'start', async () => {
    try {
      return await startAll(clusterDir, values.json, values.dashboard ? dashboardPort : null);
    } catch (e) {
      if (!created) throw e;
      // The first start of a cluster this command just created failed (a busy port, …): remove
      // it, so the next attempt starts from nothing instead of failing the same way forever.
      for (const n of listNodes(clusterDir))
        await stopNode(clusterDir, n, 'immediate').catch(() => false);
      fs.rmSync(clusterDir, { recursive: true, force: true });
      throw new WalsimError(
        isWalsimError(e) ? e.kind : 'io_error',
        `${(e as Error).message}\nthe cluster at ${clusterDir} created by this command was removed again; nothing was left behind`,
      );
    }
  });
}

/** `start --node NAME`: one node of an existing cluster (pg_ctl start -D that node). */
async function startOneNode(
  clusterDir: string,
  nodes: NodeName[],
  node: NodeName,
  json: boolean,
): Promise<number> {
  if (nodes.length === 0)
    throw new UsageError(
      `no cluster at ${clusterDir}; create it with "npm run cluster -- start" (without --node) first`,
    );
  if (!nodes.includes(node))
    throw new UsageError(`no node "${node}" in ${clusterDir} (nodes: ${nodes.join(', ')})`);
  return locked(clusterDir, 'start', async () => {
    if (runningPid(clusterDir, node) !== null) {
      console.log(`${node}: already running (pid ${runningPid(clusterDir, node)})`);
      return 1;
    }
    const port = await startNode(clusterDir, node);
    if (isStandby(clusterDir, node)) await waitStreaming(clusterDir, node);
    const pgPort = readPidFile(nodeDir(clusterDir, node))?.pgPort ?? null;
    const host = listenAddressOf(clusterDir, node);
    if (json) printJson({ dir: clusterDir, started: [{ name: node, port, pgPort }] });
    else
      console.log(
        `${node}: started, listening on ${host}:${port} (control), PostgreSQL protocol on ${host}:${pgPort}`,
      );
    return 0;
  });
}

/**
 * `--pg-version N` for walsim nodes: follow PostgreSQL N's replay drop rules (storage/
 * pg-drop-rules.ts), which decide the drop path and threshold, so the options that would set them
 * too are refused beside it, as is forcing a lookup path 13 does not have.
 */
function pgVersionOption(values: Record<string, string | boolean | string[] | undefined>) {
  if (values['pg-version'] === undefined) return {};
  let major: number;
  try {
    major = parsePgMajor(values['pg-version'] as string);
  } catch (e) {
    throw new UsageError(`--pg-version: ${(e as Error).message}`); // a bad option: exit 2
  }
  for (const k of ['drop-strategy', 'threshold-divisor'])
    if (values[k] !== undefined)
      throw new UsageError(
        `--${k} is decided by --pg-version ${major} (that major's replay drop rules): give one or the other`,
      );
  if (major === 13 && values['force-optimized'] === true)
    throw new UsageError(
      '--force-optimized: PostgreSQL 13 has no lookup path to force (--pg-version 13 always scans)',
    );
  return { pgVersion: major };
}

/** The InitOptions of `start`'s flags (defaults filled in), validated before initdb writes anything. */
async function initOptionsOf(values: Record<string, string | boolean | string[] | undefined>) {
  const v = (k: keyof typeof INIT_OPTION_DEFAULTS) =>
    (values[k] as string | undefined) ?? INIT_OPTION_DEFAULTS[k];
  const divisor = Number(v('threshold-divisor'));
  if (!Number.isInteger(divisor) || divisor < 1)
    throw new UsageError(
      `--threshold-divisor must be a positive integer, got "${v('threshold-divisor')}"`,
    );
  const opts: InitOptions = {
    sharedBuffers: v('shared-buffers'),
    standbySharedBuffers:
      (values['standby-shared-buffers'] as string | undefined) ?? v('shared-buffers'),
    synchronousCommit: parseSynchronousCommit(v('synchronous-commit')),
    dropStrategy: parseDropStrategy(v('drop-strategy')),
    thresholdDivisor: divisor,
    forceOptimized: values['force-optimized'] === true,
    ...pgVersionOption(values),
    walSegmentSize: parseSegmentSize(v('wal-segment-size')),
    listen: v('listen'),
    ...(values['pg-port'] !== undefined
      ? { pgPortBase: parsePort(values['pg-port'] as string) }
      : {}),
    ...(values.password !== undefined
      ? {
          password: parsePassword(values.password as string),
          passwordEncryption: parsePasswordEncryption(v('password-encryption')),
        }
      : {}),
    ...(values['synchronous-standby-names'] !== undefined
      ? { synchronousStandbyNames: values['synchronous-standby-names'] as string }
      : {}),
    wal: {
      checkpointTimeoutS: parseCheckpointTimeout(v('checkpoint-timeout')),
      maxWalSizeMb: parseMaxWalSize(v('max-wal-size')),
      walKeepSizeMb: parseWalKeepSize(v('wal-keep-size')),
    },
  };
  const standbys = standbyNamesOf(
    values.standbys as string | undefined,
    values.standby as string[] | undefined,
  );
  if (standbys !== undefined) opts.standbys = standbys;
  parseSharedBuffers(opts.sharedBuffers);
  parseSharedBuffers(opts.standbySharedBuffers);
  // Validate everything before initdb writes anything: a refused option leaves no half-made cluster.
  checkSegmentSize(opts.walSegmentSize);
  if (opts.wal!.maxWalSizeMb! * 1024 * 1024 < 2 * opts.walSegmentSize) {
    throw new UsageError(
      `"max_wal_size" must be at least twice "wal_segment_size" (${v('max-wal-size')} < 2 × ${v('wal-segment-size')})`,
    );
  }
  if (isIP(opts.listen) === 0)
    throw new UsageError(`--listen must be an IP address (e.g. 127.0.0.1), got "${opts.listen}"`);
  if (opts.pgPortBase !== undefined) {
    // The PostgreSQL ports are fixed by --pg-port: a taken one would only fail at the first start.
    const count = 1 + (opts.standbys?.length ?? 1);
    for (let i = 0; i < count; i++) {
      const port = opts.pgPortBase + i;
      if (port > 65_535 || !(await bindsNow(port, opts.listen)))
        throw new UsageError(
          `--pg-port ${opts.pgPortBase}: port ${port} on ${opts.listen} is ${port > 65_535 ? 'out of range' : 'in use'} ` +
            `(the primary takes ${opts.pgPortBase}, each standby the next port); pick another base`,
        );
    }
  }
  return opts;
}

/** The address a node listens on, as a client reaches it (0.0.0.0 is printed as such). */
function listenAddressOf(clusterDir: string, name: NodeName): string {
  return readNodeConfig(clusterDir, name).listen;
}

/** Start every node that is not running (primaries first); print what started. */
async function startAll(
  clusterDir: string,
  json: boolean,
  dashboardPort: number | null,
): Promise<number> {
  const nodes = listNodes(clusterDir);
  const running = nodes.filter((n) => runningPid(clusterDir, n) !== null);
  if (running.length > 0 && running.length === nodes.length) {
    console.log(
      `cluster at ${clusterDir} is already running (${running.map((n) => `${n} pid ${runningPid(clusterDir, n)}`).join(', ')})`,
    );
    return 1;
  }
  const started: Array<{ name: string; port: number; pgPort: number | null; host: string }> = [];
  // Primaries first, so standbys find their upstream.
  const order = [
    ...nodes.filter((n) => !isStandby(clusterDir, n)),
    ...nodes.filter((n) => isStandby(clusterDir, n)),
  ];
  // An old primary superseded by a promotion is refused (split brain); the other nodes still start.
  const refused: string[] = [];
  for (const name of order) {
    if (runningPid(clusterDir, name) !== null) continue;
    let port: number;
    try {
      port = await startNode(clusterDir, name);
    } catch (e) {
      if (!isWalsimError(e) || e.kind !== 'split_brain') throw e;
      refused.push(e.message);
      continue;
    }
    started.push({
      name,
      port,
      pgPort: readPidFile(nodeDir(clusterDir, name))?.pgPort ?? null,
      host: listenAddressOf(clusterDir, name),
    });
  }
  for (const name of order) if (isStandby(clusterDir, name)) await waitStreaming(clusterDir, name);
  const dashboard =
    dashboardPort !== null ? await startDashboardProcess(clusterDir, dashboardPort) : undefined;
  if (json)
    printJson({
      dir: clusterDir,
      started: started.map(({ name, port, pgPort }) => ({ name, port, pgPort })),
      ...(dashboard ? { dashboard } : {}),
    });
  else {
    if (dashboard) console.log(`dashboard: ${dashboard}`);
    for (const s of started)
      console.log(
        `${s.name}: started, listening on ${s.host}:${s.port} (control), PostgreSQL protocol on ${s.host}:${s.pgPort}`,
      );
    for (const s of started)
      console.log(
        `  psql -h ${s.host === '0.0.0.0' ? '127.0.0.1' : s.host} -p ${s.pgPort} -U postgres -X postgres    # ${s.name}`,
      );
  }
  if (refused.length > 0) throw new WalsimError('split_brain', refused.join('\n'));
  return 0;
}

function parsePort(text: string): number {
  const n = Number(text);
  if (!/^\d+$/.test(text) || n < 1 || n > 65534)
    throw new UsageError(
      `--pg-port must be a TCP port between 1 and 65534 (the standby takes the next one), got "${text}"`,
    );
  return n;
}

function parsePasswordEncryption(text: string): PasswordEncryption {
  if ((PASSWORD_ENCRYPTIONS as readonly string[]).includes(text)) return text as PasswordEncryption;
  throw new UsageError(
    `--password-encryption must be one of ${PASSWORD_ENCRYPTIONS.join(', ')}, got "${text}"`,
  );
}

function parsePassword(text: string): string {
  if (text === '' || text.includes('\0'))
    throw new UsageError('--password must be a non-empty string without NUL bytes');
  return text;
}
