/**
 * `npm run predict -- --standby URL [--standby URL2 …] [--pgdata DIR …] [--primary URL]
 * [--profile NAME|FILE] [--json] [--verify [--log FILE] [--verify-timeout S]] [--accuracy]
 * [--accuracy-log FILE]`: predict how long a live PostgreSQL 13–18 standby takes to accept writes if promoted
 * now, phase by phase, from its unreplayed WAL (scripts/predict/). Read-only, except `--verify`,
 * which resumes and promotes the standby after saying so.
 */
import * as path from 'node:path';
import { DEFAULT_PROFILE, loadProfile, type CostProfile } from '../cost-model/profile.ts';
import { formatProbe, probeProfile, type ProbeReport } from './predict/probe.ts';
import { parseCli, runCli, UsageError } from './cli/command.ts';
import { onInterrupt } from './cli/interrupt.ts';
import { invocation, usageIndent } from './cli/invocation.ts';
import { redact, redactValue, rememberSecrets } from './postgres/conninfo.ts';
import { WalsimError } from '../common/errors.ts';
import { formatPrediction, formatRanking } from './predict/format.ts';
import { predictStandby, rankStandbys, type Prediction } from './predict/prediction.ts';
import {
  accuracyEntry,
  appendAccuracy,
  checkVerifiable,
  DEFAULT_ACCURACY_LOG,
  formatAccuracy,
  proveLogIsServers,
  readAccuracy,
  verifyPromotion,
  verifyReport,
  type VerifyProgress,
  type VerifyResult,
} from './predict/verify.ts';

const CMD = invocation('predict');
const USAGE = `usage: ${CMD} --standby URL [--standby URL2 ...] [--pgdata DIR ...] [--primary URL]
${usageIndent('predict')}[--profile NAME|FILE] [--json]
${usageIndent('predict')}[--verify [--log FILE] [--verify-timeout SECONDS]]
       ${CMD} --accuracy [--accuracy-log FILE] [--json]
  --standby CONN    a PostgreSQL 13–18 standby: a libpq URI (postgresql://user@host:port/db) or
                    keyword/value conninfo ('host=... port=... user=...'); repeat to rank several
  --pgdata DIR      the standby's data directory (its pg_wal read by walsim's WAL reader, any major
                    13–18; its file sizes);
                    repeat in the order of --standby
  --primary URL     the primary: WAL bytes not received, and pg_walinspect when --pgdata is absent
  --profile         cost profile name or file (default ${DEFAULT_PROFILE}; npm run calibrate writes one for this machine)
  --no-probe        do not probe this machine beside --pgdata (fsync, create/unlink, a descriptor scan;
                    under 1 s) to scale the profile's I/O and memory terms from the calibration machine's
  --verify          then resume replay and promote the (single) standby, and print predicted beside measured
  --log FILE        the standby's server log for --verify (default: pg_current_logfile())
  --verify-timeout  seconds --verify waits for "ready to accept connections" after the promote
                    request before it reports what it sent and the standby's state
                    (default: 120, or 20 times the predicted time when that is longer)
  --accuracy        summarise the --verify runs in --accuracy-log (default ${DEFAULT_ACCURACY_LOG})`;

/** Every output and error of predict goes through the one redaction (scripts/postgres/conninfo.ts). */
const out = (text: string) => console.log(redact(text));
const err = (text: string) => console.error(redact(text));
/** The machine probe's account (set once before pricing): every --json answer carries it. */
let probeReport: ProbeReport | null = null;
const outJson = (value: unknown) =>
  console.log(
    JSON.stringify(
      redactValue(probeReport === null ? value : { ...(value as object), probe: probeReport }),
    ),
  );

/** An error with every secret hidden, of the same kind (runCli prints it in one line). */
function redacted(e: unknown): unknown {
  if (e instanceof UsageError) return new UsageError(redact(e.message));
  if (e instanceof WalsimError) return new WalsimError(e.kind, redact(e.message), e.sqlstate);
  if (e instanceof Error) {
    const r = new Error(redact(e.message));
    r.stack = redact(e.stack ?? r.message);
    return r;
  }
  return new Error(redact(String(e)));
}

async function main(): Promise<number> {
  // Remember the passwords of every connection string first: whatever fails later is redacted.
  const argv = process.argv.slice(2);
  argv.forEach((a, i) => {
    if (argv[i - 1] === '--standby' || argv[i - 1] === '--primary') rememberSecrets(a);
    const m = /^--(?:standby|primary)=(.*)$/s.exec(a);
    if (m !== null) rememberSecrets(m[1]!);
  });
  try {
    return await run(argv);
  } catch (e) {
    throw redacted(e);
  }
}

const OPTIONS = {
  standby: { type: 'string', multiple: true },
  pgdata: { type: 'string', multiple: true },
  primary: { type: 'string' },
  profile: { type: 'string' },
  json: { type: 'boolean' },
  verify: { type: 'boolean' },
  'no-probe': { type: 'boolean' },
  log: { type: 'string' },
  'verify-timeout': { type: 'string' },
  accuracy: { type: 'boolean' },
  'accuracy-log': { type: 'string' },
} as const;

type PredictValues = ReturnType<typeof parseCli<typeof OPTIONS>>['values'];

/** --verify-timeout SECONDS in ms (undefined: verifyPromotion's default), checked before any server is asked. */
function verifyTimeoutMs(value: string | undefined, verify: boolean): number | undefined {
  if (value === undefined) return undefined;
  if (!verify) throw new UsageError('--verify-timeout is for --verify');
  const s = Number(value);
  if (value.trim() === '' || !Number.isFinite(s) || s <= 0 || s > 86_400)
    throw new UsageError(
      `--verify-timeout must be seconds from 0 to 86400 (not 0), got "${value}"`,
    );
  return s * 1000;
}

/**
 * The profile scaled to this machine by the probe (predict/probe.ts, cost-model/machine-scale.ts),
 * or as loaded, saying why: `--no-probe`, no `--pgdata` to probe beside, no probe stored in the
 * profile, or the probe failed. The account is printed first (with --json: in the answer, and on
 * stderr only when the probe failed) and kept.
 */
function probed(profile: CostProfile, values: PredictValues, pgdata?: string): CostProfile {
  const r = probeProfile(profile, pgdata, values['no-probe'] === true);
  probeReport = r.report;
  // With --json the answer carries the account (`probe`): stderr only for a probe that failed,
  // so a script reading a successful --json answer sees an empty stderr.
  const failed = r.report.here === null && values['no-probe'] !== true && pgdata !== undefined;
  if (!values.json) out(formatProbe(r.report));
  else if (failed) err(formatProbe(r.report));
  return r.profile;
}

async function run(argv: string[]): Promise<number> {
  const { values } = parseCli(argv, OPTIONS, USAGE);
  const accuracyLog = values['accuracy-log'] ?? DEFAULT_ACCURACY_LOG;
  if (values.accuracy) return printAccuracy(accuracyLog, values.json === true);
  const { standbys, pgdata, timeoutMs } = checkOptions(values);
  const profileRef = values.profile ?? DEFAULT_PROFILE;
  const profile = probed(loadProfile(profileRef), values, pgdata[0]); // refused before any server
  const predictions: Prediction[] = [];
  for (const [i, url] of standbys.entries()) {
    predictions.push(
      await predictStandby({
        standby: url,
        pgdata: pgdata[i],
        primary: values.primary,
        profile,
        profileRef,
      }),
    );
  }
  if (values.verify) return verify(predictions[0]!, standbys[0]!, values, accuracyLog, timeoutMs);
  const ranking = predictions.length > 1 ? rankStandbys(predictions) : null;
  if (values.json) outJson({ predictions, ranking });
  else {
    for (const p of predictions) out(formatPrediction(p).join('\n') + '\n');
    if (ranking !== null) out(formatRanking(ranking).join('\n'));
  }
  return 0;
}

/** The options that must agree with each other, refused before any server is asked. */
function checkOptions(values: PredictValues): {
  standbys: string[];
  pgdata: string[];
  timeoutMs: number | undefined;
} {
  const standbys = values.standby ?? [];
  if (standbys.length === 0) throw new UsageError(`--standby URL is required\n${USAGE}`);
  const pgdata = values.pgdata ?? [];
  if (pgdata.length > standbys.length)
    throw new UsageError(
      `${pgdata.length} --pgdata for ${standbys.length} --standby: give at most one per standby, in the same order`,
    );
  if (values.verify && standbys.length !== 1)
    throw new UsageError('--verify promotes one standby: pass exactly one --standby');
  if (values.log !== undefined && !values.verify) throw new UsageError('--log is for --verify');
  const timeoutMs = verifyTimeoutMs(values['verify-timeout'], values.verify === true);
  return { standbys, pgdata, timeoutMs };
}

/** --verify: prove the log is the server's, resume + promote, report predicted beside measured. */
async function verify(
  p: Prediction,
  standby: string,
  values: PredictValues,
  accuracyLog: string,
  timeoutMs: number | undefined,
): Promise<number> {
  const logFile = checkVerifiable(p, values.log);
  await proveLogIsServers(standby, p, logFile); // before anything is sent
  const say = values.json ? err : out;
  if (!values.json) say(formatPrediction(p).join('\n') + '\n');
  const progress: VerifyProgress = { sent: [] };
  // Ctrl-C/SIGTERM from here on (before the line below): report what was sent, exit 130.
  onInterrupt(async () =>
    err(`error: interrupted during --verify: ${await verifyReport(standby, progress)}`),
  );
  say(
    `verify: ${p.paused ? 'resuming replay on and ' : ''}promoting ${p.standby} now — it leaves recovery and becomes a primary on a new timeline`,
  );
  let v: VerifyResult;
  try {
    v = await verifyPromotion(standby, p, logFile, progress, timeoutMs);
  } catch (e) {
    if (e instanceof WalsimError && e.kind === 'timeout') throw e; // it carries the report
    throw new WalsimError(
      'io_error',
      `--verify failed: ${(e as Error).message}; ${await verifyReport(standby, progress)}`,
    );
  }
  const entry = accuracyEntry(p, v);
  appendAccuracy(accuracyLog, entry);
  if (values.json) {
    outJson({ prediction: p, verify: v, accuracy: entry, accuracyLog: path.resolve(accuracyLog) });
    return 0;
  }
  printVerified(p, v, logFile, accuracyLog);
  return 0;
}

/** --accuracy: the --verify runs logged so far, summarised. */
function printAccuracy(accuracyLog: string, json: boolean): number {
  const es = readAccuracy(accuracyLog);
  if (json) outJson({ accuracyLog: path.resolve(accuracyLog), entries: es });
  else out(formatAccuracy(es).join('\n'));
  return 0;
}

/** --verify without --json: predicted beside measured, phase by phase, with the error. */
function printVerified(p: Prediction, v: VerifyResult, logFile: string, accuracyLog: string): void {
  const f = (x: number | null) => (x === null ? '    n/a' : x.toFixed(3).padStart(7));
  const e = (a: number, b: number | null) =>
    b === null || b === 0 ? '' : `  ${(((a - b) / b) * 100).toFixed(1)}%`;
  const q = p.predicted;
  const m = v.measured;
  out(
    [
      `                   predicted  measured  error   (measured: clock_timestamp() at resume → ${path.basename(logFile)})`,
      `replay             ${f(q.phases.replayS)}   ${f(m.replayS)}${e(q.phases.replayS, m.replayS)}`,
      `end of recovery    ${f(q.phases.endOfRecoveryS)}   ${f(m.endOfRecoveryS)}${e(q.phases.endOfRecoveryS, m.endOfRecoveryS)}`,
      `open for writes    ${f(q.phases.openForWritesS)}   ${f(m.openForWritesS)}${e(q.phases.openForWritesS, m.openForWritesS)}`,
      `time to writable   ${f(q.writableS)}   ${f(m.writableS)}${e(q.writableS, m.writableS)}`,
      v.stall
        ? 'STALL: the promote request waited for wal_retrieve_retry_interval; this run measures that wait, not the replay'
        : '',
      `promoted: timeline ${v.newTimeline ?? '?'} at ${v.readyAt}; logged to ${accuracyLog} (${CMD} --accuracy)`,
    ]
      .filter((l) => l !== '')
      .join('\n'),
  );
}

runCli(main, USAGE);
