/**
 * `npm run dashboard -- [--dir DIR] [--port P]`: the live dashboard of a running cluster
 * (dashboard/README.md). Serves one page on 127.0.0.1 (or `--listen ADDR`, only when the cluster
 * has a password), prints its URL and runs until interrupted. A cluster with a password guards
 * every request with it, on loopback too: the buttons stop and promote servers that psql reaches
 * only with that password, so the page must not be the way around it.
 */
import { isIP } from 'node:net';
import * as path from 'node:path';
import { listNodes, readPgPassword } from '../server/cluster-files.ts';
import { isPgCluster } from '../scripts/postgres/pg-cluster.ts';
import { DEFAULT_PROFILE, loadProfile } from '../cost-model/profile.ts';
import { parseDuration } from '../scripts/exporter/snapshot.ts';
import { MIN_POLL_MS } from './collector.ts';
import { PgSource } from './pg-source.ts';
import { DEFAULT_PREDICT_INTERVAL, PgPredictions } from './predictions.ts';
import { startDashboard } from './server.ts';
import { WalsimSource } from './walsim-source.ts';
import { clusterDirOf, parseCli, runCli, UsageError } from '../scripts/cli/command.ts';

const USAGE = `usage: npm run dashboard -- [--dir .walsim] [--port 0] [--listen 127.0.0.1]
          [--interval 250] [--profile seed-001|FILE] [--results results]
          [--predict-interval ${DEFAULT_PREDICT_INTERVAL}]
  --port       TCP port of the page (default: a free one; the URL is printed)
  --listen     address to bind; anything but loopback needs a cluster started with --password
  --interval   ms between two status requests to one node (at least ${MIN_POLL_MS})
  --profile    cost profile of the modeled PostgreSQL seconds
  --results    folder of sweep results for the Results view
  --predict-interval  --engine postgres: time between two predictions of the standby's time to
               writable (npm run exporter's cycle; each reads its whole unreplayed WAL)
A cluster started with --password: the page and every request (the API, the buttons, the live
socket) ask for that password (HTTP Basic, any user name), on loopback too.
A cluster without one (and every --engine postgres cluster, whose servers trust loopback): every
user of this machine who can reach 127.0.0.1 can open the page, read every node's state and press
its buttons (pause and resume replay, stop the primary immediately, promote a standby); the nodes'
PostgreSQL ports trust those users too.`;

runCli(async () => {
  const { values } = parseCli(
    process.argv.slice(2),
    {
      dir: { type: 'string' },
      port: { type: 'string', default: '0' },
      listen: { type: 'string', default: '127.0.0.1' },
      interval: { type: 'string', default: '250' },
      profile: { type: 'string' },
      results: { type: 'string', default: 'results' },
      'predict-interval': { type: 'string', default: DEFAULT_PREDICT_INTERVAL },
    },
    USAGE,
  );
  const dir = clusterDirOf(values.dir);
  const port = Number(values.port);
  if (!/^\d+$/.test(values.port!) || port > 65535)
    throw new UsageError(`--port must be a TCP port (0: a free one), got "${values.port}"`);
  const pollMs = Number(values.interval);
  if (!/^\d+$/.test(values.interval!) || pollMs < MIN_POLL_MS)
    throw new UsageError(
      `--interval must be an integer of at least ${MIN_POLL_MS} (ms), got "${values.interval}"`,
    );
  if (isIP(values.listen!) === 0)
    throw new UsageError(`--listen must be an IP address, got "${values.listen}"`);
  const predictMs = parseDuration(values['predict-interval']!);
  if (predictMs === null || predictMs < 1000)
    throw new UsageError(
      `--predict-interval must be a duration of at least 1s (e.g. 5s, 1m), got "${values['predict-interval']}"`,
    );
  const profile = loadProfile(values.profile);
  const pg = isPgCluster(dir);
  if (!pg && listNodes(dir).length === 0)
    throw new UsageError(
      `no cluster at ${dir}; start one with "npm run cluster -- start --dir ${values.dir ?? '.walsim'}"`,
    );
  const password = pg ? null : (readPgPassword(dir)?.password ?? null);
  const loopback = values.listen!.startsWith('127.') || values.listen === '::1';
  if (!loopback && password === null)
    throw new UsageError(
      `--listen ${values.listen} opens the dashboard to other hosts: only for a cluster started with --password (its password then guards the page)`,
    );
  const source = pg ? new PgSource(dir) : new WalsimSource(dir);
  const d = await startDashboard({
    source,
    port,
    listen: values.listen!,
    // On loopback too: any local user could otherwise read the page's token and press its buttons.
    password,
    pollMs,
    profile,
    profileName: profile.name,
    resultsDir: path.resolve(values.results!),
    predictions: pg
      ? new PgPredictions(dir, profile, values.profile ?? DEFAULT_PROFILE, predictMs)
      : null,
  });
  console.log(
    `dashboard for ${dir} (${source.engine}): ${d.url}${password === null ? '' : " (asks for the cluster's password)"}`,
  );
  await new Promise<void>((resolve) => {
    const stop = () => resolve();
    process.once('SIGINT', stop);
    process.once('SIGTERM', stop);
  });
  await d.close();
  return 0;
}, USAGE);
