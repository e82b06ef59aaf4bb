/**
 * What predict reads of a live PostgreSQL server, read-only: recovery state, receive and replay
 * LSNs, pause state, timeline, shared_buffers, version, the redo point of the last restartpoint,
 * which read-only extensions are installed, logging settings (for --verify). Every failure is one
 * message naming the server and what to do.
 *
 * Entry points: `connectServer`, `readStandbyState`, `readPrimaryLsn`, `checkStandby`,
 * `StandbyState`, `redactUrl`, `serverConfig`, `connectionFailure`.
 */
import {
  recoveryTargetOf,
  type RecoveryTarget,
  type RecoveryTargetSettings,
} from './recovery-target.ts';
import pg from 'pg';
import { WalsimError } from '../../common/errors.ts';
import { parseConninfo, pgClientConfig, redactConninfo } from '../postgres/conninfo.ts';
import { isRuleMajor, PG_RULE_MAJORS } from '../../storage/pg-drop-rules.ts';

export interface StandbyState {
  url: string;
  serverVersion: string;
  versionNum: number;
  inRecovery: boolean;
  /** pg_last_wal_receive_lsn(): null when the walreceiver never received anything. */
  receiveLsn: string | null;
  replayLsn: string | null;
  /** pg_get_wal_replay_pause_state(): 'not paused' | 'pause requested' | 'paused'. */
  pauseState: string | null;
  /** Timeline of the WAL received (pg_stat_wal_receiver) or of the last restartpoint. */
  timeline: number;
  /** pg_stat_wal_receiver.status, null when no walreceiver runs (disconnected). */
  walreceiver: string | null;
  sharedBuffers: string;
  nBuffers: number;
  /** wal_segment_size in bytes (where PreallocXlogFiles's last quarter begins). */
  walSegmentSize: number;
  /** REDO location of the last restartpoint (pg_control_checkpoint()). */
  restartpointRedoLsn: string;
  systemIdentifier: string;
  dataDirectory: string;
  /** The server's port (its postmaster.pid says it too). */
  port: number;
  hasBuffercache: boolean;
  logLinePrefix: string;
  logTimezone: string;
  /** pg_current_logfile(), relative to the data directory unless absolute; null without logging_collector. */
  currentLogfile: string | null;
  /** recovery_target_* (recovery-target.ts): where replay will stop, null when none is set. */
  recoveryTarget: RecoveryTarget | null;
}

/** The recovery target settings; the server parses recovery_target_time (its TimeZone). */
async function readRecoveryTarget(c: pg.Client): Promise<RecoveryTarget | null> {
  const s = await one<RecoveryTargetSettings>(
    c,
    `SELECT current_setting('recovery_target') AS target,
            current_setting('recovery_target_lsn') AS lsn,
            current_setting('recovery_target_xid') AS xid,
            current_setting('recovery_target_time') AS time,
            CASE WHEN current_setting('recovery_target_time') <> '' THEN
              ((extract(epoch FROM current_setting('recovery_target_time')::timestamptz)
                - 946684800) * 1000000)::int8::text END AS "timeUs",
            current_setting('recovery_target_name') AS name,
            current_setting('recovery_target_inclusive') AS inclusive,
            current_setting('recovery_target_action') AS action`,
  );
  return recoveryTargetOf(s);
}

/** A connection string with its secrets hidden (for messages and output). */
export const redactUrl = redactConninfo;

/**
 * The node-postgres config of `--standby`/`--primary` (either libpq form); one line naming the
 * option and what is wrong when it does not parse.
 */
export function serverConfig(
  url: string,
  option: string,
  applicationName: string,
  options?: string,
): pg.ClientConfig {
  try {
    return pgClientConfig(parseConninfo(url, option), {
      application_name: applicationName,
      options,
      connectTimeoutS: 10,
    });
  } catch (e) {
    if (!(e instanceof WalsimError) || e.message.startsWith(option)) throw e;
    throw new WalsimError('invalid_input', `${option} ${redactConninfo(url)}: ${e.message}`);
  }
}

/** A read-only session: default_transaction_read_only, a short statement timeout. */
export async function connectServer(url: string, role: 'standby' | 'primary'): Promise<pg.Client> {
  const config = serverConfig(
    url,
    `--${role}`,
    'walsim-predict',
    '-c default_transaction_read_only=on -c statement_timeout=600000',
  );
  const c = new pg.Client(config);
  c.on('error', () => {});
  try {
    await c.connect();
  } catch (e) {
    await c.end().catch(() => {});
    throw new WalsimError(
      'not_connected',
      `cannot connect to the ${role} ${redactConninfo(url)}: ${connectionFailure(e, config)}`,
    );
  }
  return c;
}

/** Why a connection failed, and what to check for that cause (not one catch-all line). */
export function connectionFailure(e: unknown, config: pg.ClientConfig): string {
  const err = e as Error & { code?: string; hostname?: string };
  const msg = (err.message || err.code || 'connection failed').replace(/\s+/g, ' ');
  const at = `${config.host ?? 'localhost'}:${config.port ?? 5432}`;
  switch (err.code) {
    case '28P01':
      return `${msg} — check the password (password in the connection string, PGPASSWORD or ~/.pgpass)`;
    case '28000':
      return `${msg} — the server's pg_hba.conf refuses this user, database or address`;
    case '3D000':
      return `${msg} — check dbname`;
    case 'ECONNREFUSED':
      return `${msg} — nothing accepts connections at ${at}: check the host and port, and that the server runs`;
    case 'ENOTFOUND':
    case 'EAI_AGAIN':
      return `host "${err.hostname ?? config.host}" not found (${err.code}) — check the host name`;
    case 'EHOSTUNREACH':
    case 'ENETUNREACH':
      return `${msg} — ${at} cannot be reached from here: check the host`;
  }
  if (/does not support SSL/i.test(msg))
    return `${msg} — the server has no SSL: use sslmode=disable or prefer`;
  if (/certificate|self[- ]signed|altname/i.test(msg))
    return `${msg} — the server's certificate was not accepted: check sslrootcert and sslmode`;
  if (/timeout/i.test(msg))
    return `${msg} — no answer from ${at} within connect_timeout: check the host, port and any firewall`;
  return msg;
}

async function one<T>(c: pg.Client, sql: string): Promise<T> {
  const r = await privileged(c.query(sql));
  return r.rows[0] as T;
}

/**
 * A query refused for lack of privileges (SQLSTATE 42501) as one message naming the role that is
 * enough: pg_monitor (pg_read_all_settings for data_directory, pg_read_all_stats for
 * pg_stat_wal_receiver, the pg_control_* functions).
 */
async function privileged<T>(q: Promise<T>): Promise<T> {
  try {
    return await q;
  } catch (e) {
    if ((e as { code?: string }).code === '42501' || /must be superuser/.test((e as Error).message))
      throw new WalsimError(
        'invalid_input',
        `${(e as Error).message}: the role in the URL needs pg_monitor (GRANT pg_monitor TO it; nothing is written)`,
      );
    throw e;
  }
}

/**
 * The replay pause state: `pg_get_wal_replay_pause_state()` from 14; 13 has only
 * `pg_is_wal_replay_paused()` (true once a pause is requested; its redo loop checks it before
 * every record, so nothing more is replayed: 'paused').
 */
function pauseStateExpr(major: number): string {
  return major >= 14
    ? 'pg_get_wal_replay_pause_state()'
    : "CASE WHEN pg_is_wal_replay_paused() THEN 'paused' ELSE 'not paused' END";
}

export async function readStandbyState(c: pg.Client, url: string): Promise<StandbyState> {
  const v = await one<{ server_version: string; num: string }>(
    c,
    "SELECT current_setting('server_version') AS server_version, current_setting('server_version_num') AS num",
  );
  const versionNum = Number(v.num);
  const base = { url: redactUrl(url), serverVersion: v.server_version, versionNum };
  const major = Math.floor(versionNum / 10000);
  if (!isRuleMajor(major)) {
    throw new WalsimError(
      'invalid_input',
      `${base.url} runs PostgreSQL ${v.server_version}; predict reads PostgreSQL ${PG_RULE_MAJORS.join(', ')} (their WAL record formats and drop rules) — point --standby at a standby of one of them`,
    );
  }
  const s = await one<Record<string, string | boolean | null>>(
    c,
    `SELECT pg_is_in_recovery() AS in_recovery,
            pg_last_wal_receive_lsn()::text AS receive_lsn,
            pg_last_wal_replay_lsn()::text AS replay_lsn,
            CASE WHEN pg_is_in_recovery() THEN ${pauseStateExpr(major)} END AS pause_state,
            (SELECT setting FROM pg_settings WHERE name = 'shared_buffers') AS nbuffers,
            current_setting('shared_buffers') AS shared_buffers,
            (SELECT setting FROM pg_settings WHERE name = 'wal_segment_size') AS wal_segment_size,
            (SELECT redo_lsn::text FROM pg_control_checkpoint()) AS redo_lsn,
            (SELECT timeline_id::text FROM pg_control_checkpoint()) AS cp_tli,
            (SELECT system_identifier::text FROM pg_control_system()) AS sysid,
            current_setting('data_directory') AS data_directory,
            current_setting('port') AS port,
            current_setting('log_line_prefix') AS log_line_prefix,
            current_setting('log_timezone') AS log_timezone,
            has_function_privilege('pg_current_logfile()', 'EXECUTE') AS logfile_allowed,
            EXISTS (SELECT 1 FROM pg_extension WHERE extname = 'pg_buffercache') AS buffercache`,
  );
  // pg_current_logfile() is not granted to pg_monitor in 15 (only --verify needs it): the
  // executor checks a function's privilege even in a CASE branch not taken, hence two queries.
  const logfile =
    s.logfile_allowed === true
      ? (await one<{ f: string | null }>(c, 'SELECT pg_current_logfile() AS f')).f
      : null;
  const wr = await privileged(c.query('SELECT status, received_tli FROM pg_stat_wal_receiver'));
  const w = wr.rows[0] as { status: string; received_tli: number | null } | undefined;
  return {
    ...base,
    inRecovery: s.in_recovery === true,
    receiveLsn: (s.receive_lsn as string | null) ?? null,
    replayLsn: (s.replay_lsn as string | null) ?? null,
    pauseState: (s.pause_state as string | null) ?? null,
    timeline: Number(w?.received_tli ?? s.cp_tli),
    walreceiver: w?.status ?? null,
    sharedBuffers: String(s.shared_buffers),
    nBuffers: Number(s.nbuffers),
    walSegmentSize: Number(s.wal_segment_size),
    restartpointRedoLsn: String(s.redo_lsn),
    systemIdentifier: String(s.sysid),
    dataDirectory: String(s.data_directory),
    port: Number(s.port),
    hasBuffercache: s.buffercache === true,
    logLinePrefix: String(s.log_line_prefix),
    logTimezone: String(s.log_timezone),
    currentLogfile: logfile,
    recoveryTarget: await readRecoveryTarget(c),
  };
}

/** Refuse a server predict cannot answer for, naming what is wrong and what to do. */
export function checkStandby(st: StandbyState): void {
  if (!st.inRecovery)
    throw new WalsimError(
      'invalid_input',
      `${st.url} is not in recovery (pg_is_in_recovery() = false): it is a primary or was already promoted — pass a standby with --standby (the primary goes in --primary)`,
    );
  // A NULL receive LSN alone is a standby that replayed its pg_wal without streaming (one paused
  // at a recovery target it reached there): predictWith decides whether that range is bounded.
  if (st.replayLsn === null)
    throw new WalsimError(
      'invalid_input',
      `${st.url} has replayed no WAL yet (pg_last_wal_replay_lsn() is NULL): predict needs a standby that has started replay`,
    );
  if (!Number.isSafeInteger(st.nBuffers) || st.nBuffers <= 0)
    throw new WalsimError(
      'invalid_input',
      `${st.url}: shared_buffers "${st.sharedBuffers}" gives no NBuffers`,
    );
  // A power of two from 1 MB to 1 GB (initdb --wal-segsize): where a segment's last quarter begins.
  const seg = st.walSegmentSize;
  if (!Number.isSafeInteger(seg) || seg < 1 << 20 || seg > 1 << 30 || (seg & (seg - 1)) !== 0)
    throw new WalsimError(
      'invalid_input',
      `${st.url}: wal_segment_size ${seg} bytes is not a power of two from 1 MB to 1 GB`,
    );
}

/** The primary's current WAL position (pg_current_wal_lsn()), after checking it is one. */
export async function readPrimaryLsn(
  c: pg.Client,
  url: string,
  standbyMajor: number,
): Promise<string> {
  const r = await one<{ rec: boolean; lsn: string | null; num: string }>(
    c,
    "SELECT pg_is_in_recovery() AS rec, CASE WHEN NOT pg_is_in_recovery() THEN pg_current_wal_lsn()::text END AS lsn, current_setting('server_version_num') AS num",
  );
  if (r.rec)
    throw new WalsimError(
      'invalid_input',
      `--primary ${redactUrl(url)} is in recovery: it is a standby, not the primary — pass the primary's URL`,
    );
  if (Math.floor(Number(r.num) / 10000) !== standbyMajor)
    throw new WalsimError(
      'invalid_input',
      `--primary ${redactUrl(url)} runs server_version_num ${r.num}, the standby PostgreSQL ${standbyMajor}: a standby streams from a primary of its own major — pass its primary`,
    );
  return r.lsn!;
}
