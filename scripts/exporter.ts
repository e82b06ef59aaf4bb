/**
 * `npm run exporter -- --standby URL --pgdata DIR [--standby URL2 --pgdata DIR2 …] [--primary URL]
 * [--profile P] [--listen 127.0.0.1:9187] [--interval 15s] [--web-config FILE]`:
 * a Prometheus exporter of `npm run predict`'s answer — each standby's predicted time to writable
 * and what it is made of — recomputed on the exporter's own cycle and served on /metrics
 * (scripts/exporter/). Read-only on every server; loopback unless a web configuration guards it.
 */
import { DEFAULT_PROFILE, loadProfile } from '../cost-model/profile.ts';
import { WalsimError } from '../common/errors.ts';
import { parseCli, runCli, UsageError } from './cli/command.ts';
import { invocation, usageIndent } from './cli/invocation.ts';
import { CycleHost } from './exporter/cycle-host.ts';
import { liveRegistry, metricsPage } from './exporter/metrics.ts';
import { parseDuration, standbyLabel, type Target } from './exporter/snapshot.ts';
import { startMetricsServer, type MetricsServer } from './exporter/server.ts';
import { isLoopbackHost, loadWebConfig, parseListen, WebAuth } from './exporter/web-config.ts';
import { rememberSecrets } from './postgres/conninfo.ts';

const DEFAULT_LISTEN = '127.0.0.1:9187';
const DEFAULT_INTERVAL = '15s';

const CMD = invocation('exporter');
const PAD = usageIndent('exporter');
const USAGE = `usage: ${CMD} --standby URL --pgdata DIR [--standby URL2 --pgdata DIR2 ...]
${PAD}[--primary URL] [--profile NAME|FILE] [--listen HOST:PORT]
${PAD}[--interval 15s] [--web-config FILE]
  --standby URL     a PostgreSQL 13–18 standby (libpq URL); repeat for several (label: its host:port)
  --pgdata DIR      its data directory (walsim's WAL reader reads its pg_wal); one per --standby, in order;
                    without it the primary's pg_walinspect is read (needs --primary)
  --primary URL     the primary: WAL not received, and pg_walinspect when --pgdata is absent
  --profile         cost profile name or file (default ${DEFAULT_PROFILE})
  --listen          address of /metrics (default ${DEFAULT_LISTEN}); any non-loopback address
                    needs --web-config
  --interval        time between prediction cycles (default ${DEFAULT_INTERVAL}; 500ms, 30s, 2m)
  --web-config FILE YAML: basic_auth_users {user: bcrypt hash} and/or bearer_tokens [bcrypt hash]
Privileges: a role with pg_monitor (GRANT pg_monitor TO exporter_role) on each server; every
session is default_transaction_read_only. The OS user must be able to read each --pgdata's pg_wal.`;

function targetsOf(standbys: string[], pgdata: string[]): Target[] {
  if (standbys.length === 0) throw new UsageError(`--standby URL is required\n${USAGE}`);
  if (pgdata.length > standbys.length)
    throw new UsageError(
      `${pgdata.length} --pgdata for ${standbys.length} --standby: give at most one per standby, in the same order`,
    );
  const targets = standbys.map((url, i) => ({ url, pgdata: pgdata[i], label: standbyLabel(url) }));
  const seen = new Set<string>();
  for (const t of targets) {
    if (seen.has(t.label))
      throw new UsageError(`--standby ${t.label} is given twice (the standby label is host:port)`);
    seen.add(t.label);
  }
  return targets;
}

/** Run the cycle until SIGINT or SIGTERM, then stop serving. */
async function serveUntilSignal(cycles: CycleHost, server: MetricsServer): Promise<void> {
  cycles.start();
  await new Promise<void>((resolve) => {
    // A cycle can take minutes (a start over reads from the restartpoint's redo through the whole
    // backlog): its thread is terminated, not waited for; nothing of it needs finishing.
    const stop = () => void Promise.all([cycles.stop(), server.close()]).then(() => resolve());
    process.once('SIGINT', stop);
    process.once('SIGTERM', stop);
  });
}

async function main(): Promise<number> {
  const { values } = parseCli(
    process.argv.slice(2),
    {
      standby: { type: 'string', multiple: true },
      pgdata: { type: 'string', multiple: true },
      primary: { type: 'string' },
      profile: { type: 'string' },
      listen: { type: 'string' },
      interval: { type: 'string' },
      'web-config': { type: 'string' },
    },
    USAGE,
  );
  // Every password given is hidden wherever it would appear (log lines, error messages).
  for (const url of [...(values.standby ?? []), ...(values.primary ? [values.primary] : [])])
    rememberSecrets(url);
  const targets = targetsOf(values.standby ?? [], values.pgdata ?? []);
  const intervalText = values.interval ?? DEFAULT_INTERVAL;
  const intervalMs = parseDuration(intervalText);
  if (intervalMs === null)
    throw new UsageError(`--interval "${intervalText}" is not a duration (500ms, 15s, 2m)`);
  const { host, port } = parseListen(values.listen ?? DEFAULT_LISTEN);
  const webConfigFile = values['web-config'];
  if (!isLoopbackHost(host) && webConfigFile === undefined)
    throw new WalsimError(
      'invalid_input',
      `--listen ${host}:${port} lets other hosts read the exporter: pass --web-config FILE with basic_auth_users or bearer_tokens (bcrypt hashes), or listen on 127.0.0.1`,
    );
  const auth = webConfigFile === undefined ? null : new WebAuth(loadWebConfig(webConfigFile));
  const profileRef = values.profile ?? DEFAULT_PROFILE;
  const profile = loadProfile(profileRef);
  // The cycle runs on its own thread; this one answers HTTP from its last snapshot.
  const cycles = new CycleHost({
    targets,
    primary: values.primary,
    profile,
    profileRef,
    intervalMs,
  });
  // A scrape collects the live series here and serves the cycle thread's last text as it is.
  const page = metricsPage(
    liveRegistry(() => cycles.snapshot()),
    () => cycles.cycleText(),
  );
  const server = await startMetricsServer(host, port, page, auth);
  const a = server.address;
  const shown = a.family === 'IPv6' ? `[${a.address}]:${a.port}` : `${a.address}:${a.port}`;
  console.log(
    `walsim exporter: serving http://${shown}/metrics; predicting ${targets.map((t) => t.label).join(', ')} every ${intervalText} with profile ${profile.name}${auth ? '; credentials required' : ''}`,
  );
  await serveUntilSignal(cycles, server);
  return 0;
}

runCli(main, USAGE);
