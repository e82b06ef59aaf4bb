/**
 * `npm run cluster -- start|stop|status|promote` (pg_ctl for a walsim cluster): initialise and start
 * a primary and one standby in the background, stop them, report their state. It only ever signals
 * processes it started: pids come from the nodes' postmaster.pid and are checked to be walsim
 * servers for that data directory before any signal is sent.
 */
import { isIP } from 'node:net';
import { WalsimError } from '../common/errors.ts';
import { checkSegmentSize } from '../wal/segment.ts';
import { listNodes, nodeDir, readNodeConfig, readPidFile, writeNodeConfig, type NodeName } from '../server/cluster-files.ts';
import { runningPid, sleep, startNode, stopNode } from '../server/pg-ctl.ts';
import { initCluster, type InitOptions } from '../server/initdb.ts';
import { parseDropStrategy, parseSynchronousCommit } from '../server/settings.ts';
import { parseSharedBuffers } from '../storage/shared-buffers.ts';
import type { StopMode } from '../server/control-protocol.ts';
import { clusterDirOf, connectNode, parseCli, printJson, runCli, UsageError } from './cli.ts';

const USAGE = `usage: npm run cluster -- <start|stop|status|promote> [options]
  start   [--shared-buffers 128MB] [--standby-shared-buffers SIZE] [--synchronous-commit remote_write]
          [--drop-strategy cached-lookup|full-scan|rel-list|recovery-hash|cache-at-create] [--threshold-divisor 32] [--force-optimized]
          [--wal-segment-size 16MB] [--listen 127.0.0.1] [--pg-port BASE] [--password PASSWORD]
          [--node NAME] [--dir .walsim]
  stop    [--mode smart|fast|immediate] [--node primary|standby] [--dir .walsim]
  status  [--json] [--dir .walsim]
  add-standby --name NAME [--from primary] [--shared-buffers SIZE] [--dir .walsim]
  promote [--node standby] [--no-wait] [--wait-seconds 60] [--json] [--dir .walsim]`;


async function waitStreaming(clusterDir: string, name: NodeName, timeoutMs = 60_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  let last = '';
  while (Date.now() < deadline) {
    try {
      const c = await connectNode(clusterDir, name);
      try {
        const s = await c.status();
        last = String(s.receiverState);
        if (s.receiverState === 'streaming' || s.inRecovery === false) return;
      } finally {
        c.close();
      }
    } catch (e) {
      last = (e as Error).message;
    }
    await sleep(100);
  }
  throw new WalsimError('timeout', `standby "${name}" is not streaming after ${timeoutMs / 1000} s (last state: ${last})`);
}

async function cmdStart(argv: string[]): Promise<number> {
  const { values } = parseCli(argv, {
    dir: { type: 'string' },
    'shared-buffers': { type: 'string', default: '128MB' },
    'standby-shared-buffers': { type: 'string' },
    'synchronous-commit': { type: 'string', default: 'remote_write' },
    'drop-strategy': { type: 'string', default: 'cached-lookup' },
    'threshold-divisor': { type: 'string', default: '32' },
    'force-optimized': { type: 'boolean', default: false },
    'wal-segment-size': { type: 'string', default: '16MB' },
    listen: { type: 'string', default: '127.0.0.1' },
    'pg-port': { type: 'string' },
    password: { type: 'string' },
    json: { type: 'boolean', default: false },
  }, USAGE);
  const clusterDir = clusterDirOf(values.dir);
  const nodes = listNodes(clusterDir);
  const running = nodes.filter((n) => runningPid(clusterDir, n) !== null);
  if (running.length > 0 && running.length === nodes.length) {
    console.log(`cluster at ${clusterDir} is already running (${running.map((n) => `${n} pid ${runningPid(clusterDir, n)}`).join(', ')})`);
    return 1;
  }
  if (nodes.length === 0) {
    const divisor = Number(values['threshold-divisor']);
    if (!Number.isInteger(divisor) || divisor < 1) throw new UsageError(`--threshold-divisor must be a positive integer, got "${values['threshold-divisor']}"`);
    const opts: InitOptions = {
      sharedBuffers: values['shared-buffers']!,
      standbySharedBuffers: values['standby-shared-buffers'] ?? values['shared-buffers']!,
      synchronousCommit: parseSynchronousCommit(values['synchronous-commit']!),
      dropStrategy: parseDropStrategy(values['drop-strategy']!),
      thresholdDivisor: divisor,
      forceOptimized: values['force-optimized']!,
      walSegmentSize: parseSharedBuffers(values['wal-segment-size']!).bytes,
      listen: values.listen!,
      ...(values['pg-port'] !== undefined ? { pgPortBase: parsePort(values['pg-port']) } : {}),
      ...(values.password !== undefined ? { password: parsePassword(values.password) } : {}),
    };
    parseSharedBuffers(opts.sharedBuffers);
    parseSharedBuffers(opts.standbySharedBuffers);
    // Validate everything before initdb writes anything: a refused option leaves no half-made cluster.
    checkSegmentSize(opts.walSegmentSize);
    if (isIP(opts.listen) === 0) throw new UsageError(`--listen must be an IP address (e.g. 127.0.0.1), got "${opts.listen}"`);
    await initCluster(clusterDir, opts);
  }
  const started: Array<{ name: string; port: number; pgPort: number | null }> = [];
  // Primaries first, so standbys find their upstream.
  const order = listNodes(clusterDir).sort((a, b) => Number(readNodeConfig(clusterDir, a).role === 'standby') - Number(readNodeConfig(clusterDir, b).role === 'standby'));
  for (const name of order) {
    if (runningPid(clusterDir, name) !== null) continue;
    const port = await startNode(clusterDir, name);
    started.push({ name, port, pgPort: readPidFile(nodeDir(clusterDir, name))?.pgPort ?? null });
  }
  for (const name of order) if (readNodeConfig(clusterDir, name).role === 'standby') await waitStreaming(clusterDir, name);
  if (values.json) printJson({ dir: clusterDir, started });
  else {
    for (const s of started) console.log(`${s.name}: started, listening on 127.0.0.1:${s.port} (control), PostgreSQL protocol on 127.0.0.1:${s.pgPort}`);
    for (const s of started) console.log(`  psql -h 127.0.0.1 -p ${s.pgPort} -U postgres -X postgres    # ${s.name}`);
  }
  return 0;
}

function parsePort(text: string): number {
  const n = Number(text);
  if (!/^\d+$/.test(text) || n < 1 || n > 65534) throw new UsageError(`--pg-port must be a TCP port between 1 and 65534 (the standby takes the next one), got "${text}"`);
  return n;
}

function parsePassword(text: string): string {
  if (text === '' || text.includes('\0')) throw new UsageError('--password must be a non-empty string without NUL bytes');
  return text;
}

async function cmdStop(argv: string[]): Promise<number> {
  const { values } = parseCli(argv, { dir: { type: 'string' }, mode: { type: 'string', default: 'fast' }, node: { type: 'string' } }, USAGE);
  const mode = values.mode as StopMode;
  if (!['smart', 'fast', 'immediate'].includes(mode)) throw new UsageError(`invalid shutdown mode "${values.mode}" (accepted: smart, fast, immediate)`);
  const clusterDir = clusterDirOf(values.dir);
  const nodes = values.node ? [values.node] : listNodes(clusterDir);
  if (nodes.length === 0) throw new UsageError(`no cluster at ${clusterDir}`);
  if (values.node && !listNodes(clusterDir).includes(values.node)) throw new UsageError(`no node "${values.node}" in ${clusterDir} (nodes: ${listNodes(clusterDir).join(', ')})`);
  // Primary first: a fast/smart stop sends its shutdown checkpoint to the standby before exiting.
  nodes.sort((a, b) => Number(readNodeConfig(clusterDir, a).role === 'standby') - Number(readNodeConfig(clusterDir, b).role === 'standby'));
  let stoppedAny = false;
  for (const name of nodes) {
    if (await stopNode(clusterDir, name, mode)) {
      console.log(`${name}: stopped (${mode})`);
      stoppedAny = true;
    } else {
      console.log(`${name}: not running`);
    }
  }
  return stoppedAny ? 0 : 1;
}

async function cmdStatus(argv: string[]): Promise<number> {
  const { values } = parseCli(argv, { dir: { type: 'string' }, json: { type: 'boolean', default: false } }, USAGE);
  const clusterDir = clusterDirOf(values.dir);
  const nodes = listNodes(clusterDir);
  if (nodes.length === 0) throw new UsageError(`no cluster at ${clusterDir}; run "npm run cluster -- start" first`);
  const out: Record<string, unknown> = {};
  for (const name of nodes) {
    const pid = runningPid(clusterDir, name);
    if (pid === null) {
      out[name] = { running: false };
      continue;
    }
    try {
      const c = await connectNode(clusterDir, name);
      try {
        out[name] = { running: true, pid, ...(await c.status()) };
      } finally {
        c.close();
      }
    } catch (e) {
      out[name] = { running: true, pid, error: (e as Error).message };
    }
  }
  if (values.json) printJson({ dir: clusterDir, nodes: out });
  else {
    for (const [name, s] of Object.entries(out)) {
      const st = s as Record<string, unknown>;
      if (!st.running) console.log(`${name}: not running`);
      else console.log(`${name}: running (pid ${st.pid}, port ${st.port}, PostgreSQL protocol port ${st.pgPort}), ${st.inRecovery ? 'in recovery' : 'read-write'}, ` +
        (st.inRecovery ? `receive ${st.receiveLsn} replay ${st.replayLsn} (${st.pauseState}, receiver ${st.receiverState})` : `insert ${st.insertLsn} flush ${st.flushLsn}`));
    }
  }
  return 0;
}

/** pg_basebackup from a running node + start a new standby streaming from it. */
async function cmdAddStandby(argv: string[]): Promise<number> {
  const { values } = parseCli(argv, {
    dir: { type: 'string' }, name: { type: 'string' }, from: { type: 'string', default: 'primary' },
    'shared-buffers': { type: 'string' }, json: { type: 'boolean', default: false },
  }, USAGE);
  const clusterDir = clusterDirOf(values.dir);
  const name = values.name;
  if (!name || !/^[a-z][a-z0-9_]{0,30}$/.test(name)) throw new UsageError(`--name must be a lower-case identifier, got "${name ?? ''}"`);
  if (listNodes(clusterDir).includes(name)) throw new UsageError(`node "${name}" already exists in ${clusterDir}`);
  const source = readNodeConfig(clusterDir, values.from!);
  const sourcePid = runningPid(clusterDir, values.from!);
  if (sourcePid === null) throw new UsageError(`node "${values.from}" is not running; start it first`);
  const c = await connectNode(clusterDir, values.from!);
  let backup: { checkpointLsn: string; timeline: number };
  try {
    backup = (await c.request({ op: 'basebackup', targetDir: nodeDir(clusterDir, name) })) as typeof backup;
  } finally {
    c.close();
  }
  const port = (await import('../server/initdb.ts')).freePort;
  writeNodeConfig(clusterDir, {
    ...source, name, role: 'standby', port: await port(source.listen), pgPort: await port(source.listen), sharedBuffers: values['shared-buffers'] ?? source.sharedBuffers,
    synchronousStandbyNames: '', primaryHost: source.listen === '0.0.0.0' ? '127.0.0.1' : source.listen,
    primaryPort: readPidFile(nodeDir(clusterDir, values.from!))!.port, applicationName: name,
  });
  const listenPort = await startNode(clusterDir, name);
  await waitStreaming(clusterDir, name);
  if (values.json) printJson({ name, port: listenPort, pgPort: readPidFile(nodeDir(clusterDir, name))?.pgPort ?? null, from: values.from, ...backup });
  else console.log(`${name}: base backup of ${values.from} at ${backup.checkpointLsn} (timeline ${backup.timeline}), streaming, listening on 127.0.0.1:${listenPort}, PostgreSQL protocol on 127.0.0.1:${readPidFile(nodeDir(clusterDir, name))?.pgPort}`);
  return 0;
}

/** pg_ctl promote: promote a standby and print the failover report. */
async function cmdPromote(argv: string[]): Promise<number> {
  const { values } = parseCli(argv, {
    dir: { type: 'string' }, node: { type: 'string', default: 'standby' }, 'no-wait': { type: 'boolean', default: false },
    'wait-seconds': { type: 'string', default: '60' }, json: { type: 'boolean', default: false },
  }, USAGE);
  const clusterDir = clusterDirOf(values.dir);
  const waitSeconds = Number(values['wait-seconds']);
  if (!Number.isInteger(waitSeconds) || waitSeconds <= 0) throw new UsageError(`--wait-seconds must be a positive integer, got "${values['wait-seconds']}"`);
  const c = await connectNode(clusterDir, values.node!);
  try {
    const r = (await c.request({ op: 'promote', wait: !values['no-wait'], waitSeconds })) as { promoted: boolean; failover: Record<string, unknown> | null };
    if (values.json) printJson(r);
    else if (!r.promoted) console.log(`${values.node}: server did not promote within ${waitSeconds} seconds`);
    else console.log(`${values.node}: server promoted${r.failover?.failoverMs != null ? ` (failover ${Number(r.failover.failoverMs).toFixed(1)} ms after resume)` : ''}`);
    return r.promoted ? 0 : 1;
  } finally {
    c.close();
  }
}

runCli(async () => {
  const [cmd, ...rest] = process.argv.slice(2);
  switch (cmd) {
    case 'start': return cmdStart(rest);
    case 'stop': return cmdStop(rest);
    case 'status': return cmdStatus(rest);
    case 'promote': return cmdPromote(rest);
    case 'add-standby': return cmdAddStandby(rest);
    default:
      throw new UsageError(cmd === undefined ? `missing command\n${USAGE}` : `unknown command "${cmd}"\n${USAGE}`);
  }
});
