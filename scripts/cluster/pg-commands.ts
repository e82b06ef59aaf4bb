/**
 * `npm run cluster -- start|stop|status --engine postgres`: the cluster CLI for a real PostgreSQL
 * primary + synchronous standby (pg-cluster.ts). The walsim cluster CLI hands over to this when
 * `--engine postgres` is given or the directory holds a PostgreSQL cluster.
 *
 * Entry points: `pgClusterCommand`, `wantsPgEngine`.
 */
import * as fs from 'node:fs';
import { parsePgMajor } from '../postgres/pg-install.ts';
import { parseCli, printJson, clusterDirOf, UsageError } from '../cli/command.ts';
import {
  initPgCluster,
  isPgCluster,
  pgConnectionString,
  pgCtl,
  pgNodeRunning,
  stopPgNode,
  readPgEngine,
} from '../postgres/pg-cluster.ts';

export const PG_CLUSTER_USAGE = `  --engine postgres: a real PostgreSQL primary + synchronous standby (seed 001's settings)
  start   --engine postgres [--pg-version 13..18] [--pg-bin DIR] [--shared-buffers 128MB] [--standby-shared-buffers SIZE] [--dir .walsim]
  stop    [--mode smart|fast|immediate] [--node primary|standby] [--dir .walsim]
  status  [--json] [--dir .walsim]`;

/** Does this cluster command address a PostgreSQL cluster? */
export function wantsPgEngine(argv: string[]): boolean {
  const i = argv.indexOf('--engine');
  if (i >= 0 && argv[i + 1] === 'postgres') return true;
  if (argv.includes('--engine=postgres')) return true;
  const d = argv.indexOf('--dir');
  const dir = clusterDirOf(
    d >= 0 ? argv[d + 1] : argv.find((a) => a.startsWith('--dir='))?.slice(6),
  );
  return isPgCluster(dir);
}

/** The PostgreSQL cluster commands' options (parseArgs). */
const PG_CLUSTER_OPTIONS = {
  dir: { type: 'string' },
  engine: { type: 'string' },
  'pg-bin': { type: 'string' },
  'pg-version': { type: 'string' },
  'shared-buffers': { type: 'string', default: '128MB' },
  'standby-shared-buffers': { type: 'string' },
  mode: { type: 'string', default: 'fast' },
  node: { type: 'string' },
  json: { type: 'boolean', default: false },
} as const;

type PgClusterValues = ReturnType<typeof parseCli<typeof PG_CLUSTER_OPTIONS>>['values'];

export async function pgClusterCommand(
  cmd: string,
  argv: string[],
  usage: string,
): Promise<number> {
  const { values } = parseCli(argv, PG_CLUSTER_OPTIONS, usage);
  if (values.engine !== undefined && values.engine !== 'postgres')
    throw new UsageError(
      `this directory holds a PostgreSQL cluster; --engine ${values.engine} does not apply`,
    );
  const dir = clusterDirOf(values.dir);
  switch (cmd) {
    case 'start':
      return pgStart(dir, values);
    case 'stop':
      return pgStop(dir, values);
    case 'status':
      return pgStatus(dir, values.json);
    default:
      throw new UsageError(
        `"${cmd}" is not available with --engine postgres (start, stop, status; promotion is the resume step)`,
      );
  }
}

/** `start --engine postgres`: start the nodes of the cluster, or create it (initdb, base backup). */
async function pgStart(dir: string, values: PgClusterValues): Promise<number> {
  if (isPgCluster(dir)) {
    const major = readPgEngine(dir).major;
    if (values['pg-version'] !== undefined && parsePgMajor(values['pg-version']) !== major)
      throw new UsageError(
        `${dir} holds a PostgreSQL ${major} cluster, not --pg-version ${values['pg-version']}`,
      );
    for (const n of ['primary', 'standby'] as const)
      if (!(await pgNodeRunning(dir, n))) await pgCtl(dir, n, 'start');
  } else {
    if (fs.existsSync(dir) && fs.readdirSync(dir).length > 0)
      throw new UsageError(`${dir} is not empty; choose a fresh --dir for a PostgreSQL cluster`);
    await initPgCluster(dir, {
      sharedBuffers: values['standby-shared-buffers'] ?? values['shared-buffers'],
      primarySharedBuffers: values['shared-buffers'],
      pgBin: values['pg-bin'],
      pgVersion: values['pg-version'],
    });
  }
  const e = readPgEngine(dir);
  if (values.json) printJson({ dir, engine: 'postgres', version: e.version, ports: e.ports });
  else
    for (const n of ['primary', 'standby'] as const)
      console.log(
        `${n}: started (${e.version.replace(/^postgres /, '')}), listening on 127.0.0.1:${e.ports[n]}  (psql "${pgConnectionString(dir, n)}")`,
      );
  return 0;
}

/** `stop [--mode] [--node]` (pg_ctl stop -m mode); exit 1 when nothing was running. */
async function pgStop(dir: string, values: PgClusterValues): Promise<number> {
  const mode = values.mode as 'smart' | 'fast' | 'immediate';
  if (!['smart', 'fast', 'immediate'].includes(mode))
    throw new UsageError(
      `invalid shutdown mode "${values.mode}" (accepted: smart, fast, immediate)`,
    );
  const nodes = values.node ? [values.node] : ['primary', 'standby'];
  let stopped = false;
  for (const n of nodes) {
    if (n !== 'primary' && n !== 'standby')
      throw new UsageError(`no node "${n}" (nodes: primary, standby)`);
    if (await stopPgNode(dir, n, mode)) {
      console.log(`${n}: stopped (${mode})`);
      stopped = true;
    } else console.log(`${n}: not running`);
  }
  return stopped ? 0 : 1;
}

/** `status [--json]`: each node running or not, its port and shared_buffers. */
async function pgStatus(dir: string, json: boolean): Promise<number> {
  const e = readPgEngine(dir);
  const nodes: Record<string, unknown> = {};
  for (const n of ['primary', 'standby'] as const)
    nodes[n] = {
      running: await pgNodeRunning(dir, n),
      port: e.ports[n],
      sharedBuffers: e.sharedBuffers[n],
    };
  if (json) printJson({ dir, engine: 'postgres', version: e.version, nodes });
  else
    for (const [n, s] of Object.entries(nodes))
      console.log(
        `${n}: ${(s as { running: boolean }).running ? 'running' : 'not running'} (port ${e.ports[n as 'primary']})`,
      );
  return 0;
}
