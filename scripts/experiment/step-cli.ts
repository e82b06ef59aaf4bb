/**
 * The shared main of `npm run rel` and `npm run multi`: parse `<step> [options]`, run the step
 * (steps.ts), print its lines, or with `--json` one JSON object as the last line of stdout
 * (`{"error": {...}}` on failure).
 */
import { isWalsimError } from '../../common/errors.ts';
import { ControlError } from '../../server/control-client.ts';
import { clusterDirOf, parseCli, printJson, runCli, UsageError } from '../cli/command.ts';
import { loadProfile } from '../../cost-model/profile.ts';
import { REL_SIZE_FORMS } from './rel-size.ts';
import type { Workload } from '../engines/engine.ts';
import pg from 'pg';
import { runStep, StepOrderError, STEPS, openEngine, type StepName } from './steps.ts';
import { isPgCluster } from '../postgres/pg-cluster.ts';

function usage(workload: Workload): string {
  const what =
    workload === 'rel'
      ? 'one relation (seed 001 rel.sh)'
      : 'many one-block relations (seed 001 test.sh)';
  return `usage: npm run ${workload} -- <step> [--dir .walsim] [--engine walsim|postgres] [--json]${workload === 'rel' ? ' [--size NB/512]' : ' [--tables 1000] [--toast]'}
  ${what}; run against the cluster of "npm run cluster -- start" (--engine postgres: of
  "npm run cluster -- start --engine postgres", a real PostgreSQL primary + standby).
  steps, in order: create, insert, ${workload === 'rel' ? 'delete' : '[delete]'}, pause, vacuum|truncate, stop, resume; count any time after create
    create    create the table${workload === 'rel' ? '' : 's (--tables N, default 1000; --toast: with a text column, so a TOAST table)'} on the primary
    insert    ${workload === 'rel' ? 'fill it with --size pages (default NB/512): ' + REL_SIZE_FORMS : 'one full 8kB page (226 rows) into each table'}
    delete    DELETE every row (the VACUUM test)
    pause     wait until the standby replayed everything, then pg_wal_replay_pause()
    vacuum    VACUUM each table in its own transaction (truncates the empty pages)
    truncate  TRUNCATE each table in its own transaction
    stop      immediate stop of the primary (pg_ctl stop -m immediate)
    resume    pg_wal_replay_resume() and promote the standby; print both timestamps, the failover time and
              the modeled PostgreSQL seconds (--profile NAME|FILE, default seed-001)
    count     row counts on the standby`;
}

/** The step CLIs' options (parseArgs). */
const STEP_OPTIONS = {
  dir: { type: 'string' },
  json: { type: 'boolean', default: false },
  size: { type: 'string' },
  tables: { type: 'string' },
  'wait-seconds': { type: 'string' },
  engine: { type: 'string' },
  toast: { type: 'boolean', default: false },
  profile: { type: 'string' },
} as const;

type StepValues = ReturnType<typeof parseCli<typeof STEP_OPTIONS>>['values'];

/** The step named on the command line, and the options that apply to it (refused elsewhere). */
function stepOf(workload: Workload, positionals: string[], values: StepValues, USAGE: string) {
  if (positionals.length !== 1)
    throw new UsageError(
      `${positionals.length === 0 ? 'missing step' : 'expected one step'}\n${USAGE}`,
    );
  const step = positionals[0] as StepName;
  if (!(STEPS as readonly string[]).includes(step))
    throw new UsageError(`unknown step "${positionals[0]}" (steps: ${STEPS.join(', ')})\n${USAGE}`);
  if (values.size !== undefined && (workload !== 'rel' || step !== 'insert'))
    throw new UsageError(`--size applies to "npm run rel -- insert" only`);
  if (values.tables !== undefined && (workload !== 'multi' || step !== 'create'))
    throw new UsageError(`--tables applies to "npm run multi -- create" only`);
  const tables = values.tables === undefined ? undefined : Number(values.tables);
  if (tables !== undefined && (!Number.isSafeInteger(tables) || tables < 1))
    throw new UsageError(`--tables must be a positive integer, got "${values.tables}"`);
  const waitSeconds =
    values['wait-seconds'] === undefined ? undefined : Number(values['wait-seconds']);
  if (waitSeconds !== undefined && (!Number.isSafeInteger(waitSeconds) || waitSeconds < 1))
    throw new UsageError(`--wait-seconds must be a positive integer`);
  return { step, tables, waitSeconds };
}

/** The cluster directory, checked against --engine: the directory says which engine it holds. */
function clusterDirFor(values: StepValues): string {
  const clusterDir = clusterDirOf(values.dir);
  if (values.engine !== undefined && values.engine !== 'walsim' && values.engine !== 'postgres')
    throw new UsageError(`unknown engine "${values.engine}" (walsim or postgres)`);
  const pgDir = isPgCluster(clusterDir);
  if (values.engine === 'postgres' && !pgDir) {
    throw new StepOrderError(
      `no PostgreSQL cluster at ${clusterDir}; run "npm run cluster -- start --engine postgres --dir ${clusterDir}" first`,
      'cluster start',
    );
  }
  if (values.engine === 'walsim' && pgDir)
    throw new UsageError(
      `${clusterDir} holds a PostgreSQL cluster (--engine postgres), not a walsim one`,
    );
  return clusterDir;
}

/** --json's failure: one JSON object naming the kind of error; the exit code. */
function printJsonError(e: unknown): number {
  // A server's ERROR: walsim's control endpoint (ControlError) or either engine's PostgreSQL port (pg's DatabaseError).
  const server = e instanceof ControlError || e instanceof pg.DatabaseError;
  const kind =
    e instanceof StepOrderError
      ? 'order'
      : e instanceof UsageError
        ? 'usage'
        : server
          ? 'server'
          : isWalsimError(e)
            ? e.kind
            : 'internal';
  const message = (e as Error).message;
  console.error(`error: ${message}`);
  printJson({
    error: {
      kind,
      message,
      ...(e instanceof StepOrderError ? { runFirst: e.runFirst } : {}),
      ...(server ? { code: (e as { code?: string }).code } : {}),
    },
  });
  return e instanceof UsageError ? 2 : 1;
}

export function stepMain(workload: Workload): void {
  const USAGE = usage(workload);
  let json = false;
  runCli(async () => {
    const argv = process.argv.slice(2);
    json = argv.includes('--json');
    try {
      const { values, positionals } = parseCli(argv, STEP_OPTIONS, USAGE);
      const { step, tables, waitSeconds } = stepOf(workload, positionals, values, USAGE);
      const clusterDir = clusterDirFor(values);
      if (values.toast && (workload !== 'multi' || step !== 'create'))
        throw new UsageError('--toast applies to "npm run multi -- create" only');
      if (values.profile !== undefined && step !== 'resume')
        throw new UsageError(`--profile applies to "npm run ${workload} -- resume" only`);
      // Load the profile before promoting, so a bad --profile changes nothing.
      const profile = loadProfile(values.profile);
      const result = await runStep(step, {
        clusterDir,
        engine: openEngine(clusterDir),
        workload,
        size: values.size,
        tables,
        waitSeconds,
        toast: values.toast,
        profile,
      });
      const { lines, ...rest } = result;
      if (json) printJson(rest);
      else for (const l of lines) console.log(l);
      return 0;
    } catch (e) {
      if (json) return printJsonError(e);
      if (!(e instanceof StepOrderError)) throw e;
      console.error(`error: ${e.message}`);
      return 1;
    }
  }, USAGE);
}
