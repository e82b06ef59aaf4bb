/**
 * `npm run cluster -- start|stop|status|promote|add-standby|repoint|set|switchover|rejoin` (pg_ctl
 * and a failover tool for a walsim cluster): initialise and start a primary and its standbys in the
 * background, stop them, report their state, change the topology (server/topology.ts). It only ever signals
 * processes it started: pids come from the nodes' postmaster.pid and are checked to be walsim
 * servers for that data directory before any signal is sent.
 */
import { listNodes, nodeDir, readPidFile, RELOADABLE_SETTINGS } from '../server/cluster-files.ts';
import { runningPid, stopNode } from '../server/pg-ctl.ts';
import { divergence, supersededBy, type Divergence } from '../server/fencing.ts';
import { formatLsn } from '../wal/lsn.ts';
import { parseSharedBuffers } from '../storage/shared-buffers.ts';
import { addStandby, rejoin, repoint, switchover } from '../server/topology.ts';
import type { StopMode } from '../server/control-protocol.ts';
import {
  clusterDirOf,
  connectNode,
  parseCli,
  printJson,
  runCli,
  splitCommand,
  UsageError,
} from './cli/command.ts';
import { PG_CLUSTER_USAGE, pgClusterCommand, wantsPgEngine } from './cluster/pg-commands.ts';
import { withModel } from '../cost-model/price.ts';
import { promoteNode } from './cluster/promote.ts';
import { stopDashboardProcess } from './cluster/dashboard-process.ts';
import { loadProfile } from '../cost-model/profile.ts';
import { formatModel } from './engines/walsim-engine.ts';
import { cmdStart, isStandby } from './cluster/start.ts';
import { locked } from './cluster/lock.ts';

const USAGE = `usage: npm run cluster -- <command> [options]
  start   [--shared-buffers 128MB] [--standby-shared-buffers SIZE] [--synchronous-commit remote_write]
          [--standbys N | --standby NAME ...] [--synchronous-standby-names 'FIRST 1 (s1, s2)']
          [--drop-strategy cached-lookup|full-scan|rel-list|recovery-hash|cache-at-create] [--threshold-divisor 32] [--force-optimized]
          [--pg-version 13..18]  replay drops follow that PostgreSQL major's rules (13: always a full scan;
          14+: the cached-size lookup below NBuffers/32; the major's function names in the failover report)
          [--wal-segment-size 16MB] [--checkpoint-timeout 5min] [--max-wal-size 1GB] [--wal-keep-size 0]
          [--listen 127.0.0.1] [--pg-port BASE] [--password PASSWORD]
          [--password-encryption scram-sha-256|md5] [--dir .walsim]
          [--node NAME]  start one node of an existing cluster (an old primary is refused after a failover)
          [--dashboard [--dashboard-port P]]  also start the live dashboard (npm run dashboard) in the background
  stop    [--mode smart|fast|immediate] [--node NAME] [--dir .walsim]   (exit 0 once every node asked for is down,
          also one that was not running; 1 if a stop failed)
  status  [--profile seed-001|FILE] [--json] [--dir .walsim]
  add-standby --name NAME [--from NODE] [--shared-buffers SIZE] [--dir .walsim]   (from a standby: a cascade)
  repoint --node STANDBY --to NODE [--dir .walsim]
  set     [--node primary] SETTING VALUE [--dir .walsim]   (ALTER SYSTEM SET + pg_reload_conf(); ${RELOADABLE_SETTINGS.join(', ')})
  switchover --to STANDBY [--json] [--dir .walsim]
  rejoin  --node OLD --to NEW [--json] [--dir .walsim]
  promote [--node standby] [--no-wait] [--wait-seconds 60] [--profile seed-001|FILE] [--json] [--dir .walsim]
${PG_CLUSTER_USAGE}`;

/** The options of any cluster command that take no value (splitCommand: options before the command). */
const CLUSTER_FLAGS = new Set(['json', 'force-optimized', 'dashboard', 'no-wait', 'help', 'h']);

async function cmdStop(argv: string[]): Promise<number> {
  const { values } = parseCli(
    argv,
    {
      dir: { type: 'string' },
      mode: { type: 'string', default: 'fast' },
      node: { type: 'string' },
    },
    USAGE,
  );
  const mode = values.mode as StopMode;
  if (!['smart', 'fast', 'immediate'].includes(mode))
    throw new UsageError(
      `invalid shutdown mode "${values.mode}" (accepted: smart, fast, immediate)`,
    );
  const clusterDir = clusterDirOf(values.dir);
  const nodes = values.node ? [values.node] : listNodes(clusterDir);
  if (nodes.length === 0) throw new UsageError(`no cluster at ${clusterDir}`);
  if (values.node && !listNodes(clusterDir).includes(values.node))
    throw new UsageError(
      `no node "${values.node}" in ${clusterDir} (nodes: ${listNodes(clusterDir).join(', ')})`,
    );
  // Primary first: a fast/smart stop sends its shutdown checkpoint to the standbys before exiting.
  nodes.sort((a, b) => Number(isStandby(clusterDir, a)) - Number(isStandby(clusterDir, b)));
  // Exit 0 when every node asked for is down afterwards, whether this command stopped it or it was
  // not running (said on stdout); a stop that fails (timeout) is an error. (pg_ctl stop of a
  // server that is not running exits 1; a cluster-wide stop is idempotent, like `systemctl stop`.)
  return locked(clusterDir, 'stop', async () => {
    for (const name of nodes) {
      if (await stopNode(clusterDir, name, mode)) console.log(`${name}: stopped (${mode})`);
      else console.log(`${name}: not running`);
    }
    if (!values.node && stopDashboardProcess(clusterDir)) console.log('dashboard: stopped');
    return 0;
  });
}

/** " from port P" for a standby's status line. */
function upstreamOf(st: Record<string, unknown>): string {
  const u = st.upstream as { port: number } | null | undefined;
  return u ? ` from port ${u.port}` : '';
}

/** "; standbys: s1 (sync), s2 (async)" from a node's pg_stat_replication. */
function standbysOf(st: Record<string, unknown>): string {
  const r =
    (st.replication as Array<{ applicationName: string; syncState: string }> | undefined) ?? [];
  return r.length === 0
    ? ''
    : `; standbys: ${r.map((x) => `${x.applicationName} (${x.syncState})`).join(', ')}`;
}

async function cmdStatus(argv: string[]): Promise<number> {
  const { values } = parseCli(
    argv,
    {
      dir: { type: 'string' },
      json: { type: 'boolean', default: false },
      profile: { type: 'string' },
    },
    USAGE,
  );
  const profile = loadProfile(values.profile);
  const clusterDir = clusterDirOf(values.dir);
  const nodes = listNodes(clusterDir);
  if (nodes.length === 0)
    throw new UsageError(`no cluster at ${clusterDir}; run "npm run cluster -- start" first`);
  const out: Record<string, unknown> = {};
  for (const name of nodes) {
    const pid = runningPid(clusterDir, name);
    // An old primary after a failover: the commits only it has (locally committed, not replicated).
    const newer = supersededBy(clusterDir, name);
    const diverged =
      newer === null ? {} : { divergedFrom: divergence(clusterDir, name, newer.node) };
    if (pid === null) {
      out[name] = { running: false, ...diverged };
      continue;
    }
    try {
      const c = await connectNode(clusterDir, name);
      try {
        const st = await c.status();
        // The status's failover report carries counts; the CLI prices them with its profile.
        const failover = st.failover === null ? null : withModel(st.failover, profile);
        out[name] = { running: true, ...st, failover, ...diverged };
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
      const d = st.divergedFrom as Divergence | undefined;
      if (!st.running) console.log(`${name}: not running`);
      else
        console.log(
          `${name}: running (pid ${st.pid}, port ${st.port}, PostgreSQL protocol port ${st.pgPort}), ${st.inRecovery ? 'in recovery' : 'read-write'}, ` +
            (st.inRecovery
              ? `receive ${st.receiveLsn} replay ${st.replayLsn} (${st.pauseState}, receiver ${st.receiverState}${upstreamOf(st)})`
              : `insert ${st.insertLsn} flush ${st.flushLsn}`) +
            `, timeline ${st.timeline}${standbysOf(st)}`,
        );
      if (d !== undefined) {
        console.log(
          `  old primary: "${d.newerNode}" was promoted to timeline ${d.newerTimeline}, forked at ${d.fork?.lsn != null ? formatLsn(d.fork.lsn) : '?'}; ` +
            `${d.divergedBytes} bytes of WAL and ${d.commits.length} commit(s) exist only here (committed locally, not replicated)`,
        );
        for (const c of d.commits) console.log(`    xid ${c.xid} at ${c.lsn} (${c.time})`);
      }
    }
  }
  return 0;
}

/** pg_basebackup from a running node (a standby too: a cascade) + start a new standby streaming from it. */
async function cmdAddStandby(argv: string[]): Promise<number> {
  const { values } = parseCli(
    argv,
    {
      dir: { type: 'string' },
      name: { type: 'string' },
      from: { type: 'string', default: 'primary' },
      'shared-buffers': { type: 'string' },
      json: { type: 'boolean', default: false },
    },
    USAGE,
  );
  const clusterDir = clusterDirOf(values.dir);
  if (values.name === undefined) throw new UsageError(`--name is required\n${USAGE}`);
  if (values['shared-buffers'] !== undefined) parseSharedBuffers(values['shared-buffers']);
  const name = values.name;
  const r = await locked(clusterDir, 'add-standby', () =>
    addStandby(clusterDir, name, values.from!, values['shared-buffers']),
  );
  const pgPort = readPidFile(nodeDir(clusterDir, values.name))?.pgPort ?? null;
  if (values.json)
    printJson({
      name: values.name,
      port: r.port,
      pgPort,
      from: values.from,
      checkpointLsn: r.checkpointLsn,
      timeline: r.timeline,
    });
  else
    console.log(
      `${values.name}: base backup of ${values.from} at ${r.checkpointLsn} (timeline ${r.timeline}), streaming from ${values.from}, listening on 127.0.0.1:${r.port}, PostgreSQL protocol on 127.0.0.1:${pgPort}`,
    );
  return 0;
}

/** A standby streams from another node from now on (ALTER SYSTEM SET primary_conninfo + reload). */
async function cmdRepoint(argv: string[]): Promise<number> {
  const { values } = parseCli(
    argv,
    { dir: { type: 'string' }, node: { type: 'string' }, to: { type: 'string' } },
    USAGE,
  );
  if (values.node === undefined || values.to === undefined)
    throw new UsageError(`--node and --to are required\n${USAGE}`);
  const clusterDir = clusterDirOf(values.dir);
  const [node, to] = [values.node, values.to];
  const r = await locked(clusterDir, 'repoint', () => repoint(clusterDir, node, to));
  console.log(
    `${values.node}: primary_conninfo = '${r.conninfo}'${r.running ? ' (reloaded; the walreceiver restarted at its flush position)' : ' (applies at its next start)'}`,
  );
  return 0;
}

/** ALTER SYSTEM SET name = 'value'; SELECT pg_reload_conf() on one node. */
async function cmdSet(argv: string[]): Promise<number> {
  const { values, positionals } = parseCli(
    argv,
    { dir: { type: 'string' }, node: { type: 'string', default: 'primary' } },
    USAGE,
  );
  if (positionals.length !== 2)
    throw new UsageError(
      `set takes a setting and a value, e.g. set synchronous_standby_names 'ANY 1 (s1, s2)'\n${USAGE}`,
    );
  const [name, value] = positionals as [string, string];
  const c = await connectNode(clusterDirOf(values.dir), values.node!);
  try {
    await c.sql(`ALTER SYSTEM SET ${name} = '${value.replace(/'/g, "''")}'`);
    await c.sql('SELECT pg_reload_conf()');
    console.log(
      `${values.node}: ${name} = '${String((await c.sql(`SHOW ${name}`)).rows[0]![name])}'`,
    );
  } finally {
    c.close();
  }
  return 0;
}

async function cmdSwitchover(argv: string[]): Promise<number> {
  const { values } = parseCli(
    argv,
    { dir: { type: 'string' }, to: { type: 'string' }, json: { type: 'boolean', default: false } },
    USAGE,
  );
  if (values.to === undefined) throw new UsageError(`--to is required\n${USAGE}`);
  const clusterDir = clusterDirOf(values.dir);
  const to = values.to;
  const r = await locked(clusterDir, 'switchover', () => switchover(clusterDir, to));
  if (values.json) printJson(r);
  else {
    console.log(
      `${r.to}: promoted (timeline ${r.newTimeline}, switch point ${r.switchLsn}); synchronous_standby_names = '${r.synchronousStandbyNames}'`,
    );
    console.log(`${r.from}: stopped cleanly, rejoined as a standby of ${r.to}`);
    for (const n of r.repointed) console.log(`${n}: repointed to ${r.to}`);
  }
  return 0;
}

async function cmdRejoin(argv: string[]): Promise<number> {
  const { values } = parseCli(
    argv,
    {
      dir: { type: 'string' },
      node: { type: 'string' },
      to: { type: 'string' },
      json: { type: 'boolean', default: false },
    },
    USAGE,
  );
  if (values.node === undefined || values.to === undefined)
    throw new UsageError(`--node and --to are required\n${USAGE}`);
  const clusterDir = clusterDirOf(values.dir);
  const [node, to] = [values.node, values.to];
  const r = await locked(clusterDir, 'rejoin', () => rejoin(clusterDir, node, to));
  if (values.json)
    printJson({
      node: values.node,
      to: values.to,
      port: r.port,
      oldEndLsn: r.oldEndLsn,
      oldTimeline: r.oldTimeline,
      newTimeline: r.newTimeline,
      forkLsn: r.verdict.fork?.lsn ?? null,
    });
  else
    console.log(
      `${values.node}: its WAL ends at ${r.oldEndLsn} on timeline ${r.oldTimeline}, not past the fork point; streaming from ${values.to} on timeline ${r.newTimeline}`,
    );
  return 0;
}

/** pg_ctl promote: promote a standby and print the failover report. */
async function cmdPromote(argv: string[]): Promise<number> {
  const { values } = parseCli(
    argv,
    {
      dir: { type: 'string' },
      node: { type: 'string', default: 'standby' },
      'no-wait': { type: 'boolean', default: false },
      'wait-seconds': { type: 'string', default: '60' },
      json: { type: 'boolean', default: false },
      profile: { type: 'string' },
    },
    USAGE,
  );
  const clusterDir = clusterDirOf(values.dir);
  // Load the cost profile first, so a bad --profile changes nothing.
  const profile = loadProfile(values.profile);
  const waitSeconds = Number(values['wait-seconds']);
  if (!Number.isInteger(waitSeconds) || waitSeconds <= 0)
    throw new UsageError(
      `--wait-seconds must be a positive integer, got "${values['wait-seconds']}"`,
    );
  const r = await locked(clusterDir, 'promote', () =>
    promoteNode(clusterDir, values.node!, {
      wait: !values['no-wait'],
      waitSeconds,
      profile,
    }),
  );
  if (values.json) printJson(r);
  else if (!r.promoted)
    console.log(`${values.node}: server did not promote within ${waitSeconds} seconds`);
  else {
    console.log(
      `${values.node}: server promoted${r.failover?.failoverMs != null ? ` (failover ${Number(r.failover.failoverMs).toFixed(1)} ms after resume)` : ''}`,
    );
    if (r.failover?.model) console.log(formatModel(r.failover.model));
  }
  return r.promoted ? 0 : 1;
}

runCli(async () => {
  const { cmd, rest } = splitCommand(process.argv.slice(2), CLUSTER_FLAGS);
  if (cmd !== undefined && wantsPgEngine(rest)) return pgClusterCommand(cmd, rest, USAGE);
  switch (cmd) {
    case 'start':
      return cmdStart(rest, USAGE);
    case 'stop':
      return cmdStop(rest);
    case 'status':
      return cmdStatus(rest);
    case 'promote':
      return cmdPromote(rest);
    case 'add-standby':
      return cmdAddStandby(rest);
    case 'repoint':
      return cmdRepoint(rest);
    case 'set':
      return cmdSet(rest);
    case 'switchover':
      return cmdSwitchover(rest);
    case 'rejoin':
      return cmdRejoin(rest);
    default:
      throw new UsageError(
        cmd === undefined ? `missing command\n${USAGE}` : `unknown command "${cmd}"\n${USAGE}`,
      );
  }
}, USAGE);
