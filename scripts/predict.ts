/**
 * `npm run predict -- --standby URL [--standby URL2 …] [--pgdata DIR …] [--primary URL]
 * [--profile NAME|FILE] [--json] [--verify [--log FILE]] [--accuracy] [--accuracy-log FILE]
 * [--pg-bin DIR]`: predict how long a live PostgreSQL 15 standby takes to accept writes if promoted
 * now, phase by phase, from its unreplayed WAL (scripts/predict/). Read-only, except `--verify`,
 * which resumes and promotes the standby after saying so.
 */
import * as path from 'node:path';
import { DEFAULT_PROFILE, loadProfile } from '../cost-model/profile.ts';
import { parseCli, runCli, UsageError } from './cli/command.ts';
import { findPgBin } from './postgres/pg-bin.ts';
import { formatPrediction, formatRanking } from './predict/format.ts';
import { predictStandby, rankStandbys, type Prediction } from './predict/prediction.ts';
import {
  accuracyEntry,
  appendAccuracy,
  checkVerifiable,
  DEFAULT_ACCURACY_LOG,
  formatAccuracy,
  readAccuracy,
  verifyPromotion,
  type VerifyResult,
} from './predict/verify.ts';

const USAGE = `usage: npm run predict -- --standby URL [--standby URL2 ...] [--pgdata DIR ...] [--primary URL]
                          [--profile NAME|FILE] [--json] [--verify [--log FILE]] [--pg-bin DIR]
       npm run predict -- --accuracy [--accuracy-log FILE] [--json]
  --standby URL     a PostgreSQL 15 standby (libpq URL); repeat to rank several
  --pgdata DIR      the standby's data directory (read its pg_wal with pg_waldump, its file sizes);
                    repeat in the order of --standby
  --primary URL     the primary: WAL bytes not received, and pg_walinspect when --pgdata is absent
  --profile         cost profile name or file (default ${DEFAULT_PROFILE}; npm run calibrate writes one for this machine)
  --verify          then resume replay and promote the (single) standby, and print predicted beside measured
  --log FILE        the standby's server log for --verify (default: pg_current_logfile())
  --accuracy        summarise the --verify runs in --accuracy-log (default ${DEFAULT_ACCURACY_LOG})`;

async function main(): Promise<number> {
  const { values } = parseCli(
    process.argv.slice(2),
    {
      standby: { type: 'string', multiple: true },
      pgdata: { type: 'string', multiple: true },
      primary: { type: 'string' },
      profile: { type: 'string' },
      json: { type: 'boolean' },
      verify: { type: 'boolean' },
      log: { type: 'string' },
      accuracy: { type: 'boolean' },
      'accuracy-log': { type: 'string' },
      'pg-bin': { type: 'string' },
    },
    USAGE,
  );
  const accuracyLog = values['accuracy-log'] ?? DEFAULT_ACCURACY_LOG;
  if (values.accuracy) return printAccuracy(accuracyLog, values.json === true);
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
  const profileRef = values.profile ?? DEFAULT_PROFILE;
  const profile = loadProfile(profileRef); // a bad profile is refused before any server is asked
  let pgWaldump = '';
  if (pgdata.length > 0) pgWaldump = findPgBin(values['pg-bin']).path('pg_waldump');
  const predictions: Prediction[] = [];
  for (const [i, url] of standbys.entries()) {
    predictions.push(
      await predictStandby({
        standby: url,
        pgdata: pgdata[i],
        primary: values.primary,
        profile,
        profileRef,
        pgWaldump,
      }),
    );
  }
  const ranking = predictions.length > 1 ? rankStandbys(predictions) : null;
  if (!values.verify) {
    if (values.json) console.log(JSON.stringify({ predictions, ranking }));
    else {
      for (const p of predictions) console.log(formatPrediction(p).join('\n') + '\n');
      if (ranking !== null) console.log(formatRanking(ranking).join('\n'));
    }
    return 0;
  }
  const p = predictions[0]!;
  const logFile = checkVerifiable(p, values.log);
  const say = values.json ? console.error : console.log;
  if (!values.json) say(formatPrediction(p).join('\n') + '\n');
  say(
    `verify: ${p.paused ? 'resuming replay on and ' : ''}promoting ${p.standby} now — it leaves recovery and becomes a primary on a new timeline`,
  );
  const v = await verifyPromotion(standbys[0]!, p, logFile);
  const entry = accuracyEntry(p, v);
  appendAccuracy(accuracyLog, entry);
  if (values.json) {
    console.log(
      JSON.stringify({
        prediction: p,
        verify: v,
        accuracy: entry,
        accuracyLog: path.resolve(accuracyLog),
      }),
    );
    return 0;
  }
  printVerified(p, v, logFile, accuracyLog);
  return 0;
}

/** --accuracy: the --verify runs logged so far, summarised. */
function printAccuracy(accuracyLog: string, json: boolean): number {
  const es = readAccuracy(accuracyLog);
  if (json) console.log(JSON.stringify({ accuracyLog: path.resolve(accuracyLog), entries: es }));
  else console.log(formatAccuracy(es).join('\n'));
  return 0;
}

/** --verify without --json: predicted beside measured, phase by phase, with the error. */
function printVerified(p: Prediction, v: VerifyResult, logFile: string, accuracyLog: string): void {
  const f = (x: number | null) => (x === null ? '    n/a' : x.toFixed(3).padStart(7));
  const e = (a: number, b: number | null) =>
    b === null || b === 0 ? '' : `  ${(((a - b) / b) * 100).toFixed(1)}%`;
  const q = p.predicted;
  const m = v.measured;
  console.log(
    [
      `                   predicted  measured  error   (measured: clock_timestamp() at resume → ${path.basename(logFile)})`,
      `replay             ${f(q.phases.replayS)}   ${f(m.replayS)}${e(q.phases.replayS, m.replayS)}`,
      `end of recovery    ${f(q.phases.endOfRecoveryS)}   ${f(m.endOfRecoveryS)}${e(q.phases.endOfRecoveryS, m.endOfRecoveryS)}`,
      `open for writes    ${f(q.phases.openForWritesS)}   ${f(m.openForWritesS)}${e(q.phases.openForWritesS, m.openForWritesS)}`,
      `time to writable   ${f(q.writableS)}   ${f(m.writableS)}${e(q.writableS, m.writableS)}`,
      v.stall
        ? 'STALL: the promote request waited for wal_retrieve_retry_interval; this run measures that wait, not the replay'
        : '',
      `promoted: timeline ${v.newTimeline ?? '?'} at ${v.readyAt}; logged to ${accuracyLog} (npm run predict -- --accuracy)`,
    ]
      .filter((l) => l !== '')
      .join('\n'),
  );
}

runCli(main, USAGE);
