/**
 * The exporter's parts without servers: the collector's cycle with a stand-in prediction (a
 * failing standby is down with its error counted and no stale prediction, the others unaffected),
 * the metrics rendered from its snapshot, error reasons, labels without passwords, durations,
 * --listen, the web configuration and its credential checks. And a scrape answered, from the last
 * finished cycle, while a cycle reads WAL in the same thread (the reader's turns of the event loop).
 */
import bcrypt from 'bcryptjs';
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { describe, expect, it } from 'vitest';
import { WalsimError } from '../../common/errors.ts';
import { loadProfile } from '../../cost-model/profile.ts';
import {
  Collector,
  ERROR_REASONS,
  errorReason,
  parseDuration,
  standbyLabel,
  type PredictFn,
} from '../../scripts/exporter/collector.ts';
import { exporterRegistry, profileMajor } from '../../scripts/exporter/metrics.ts';
import { startMetricsServer } from '../../scripts/exporter/server.ts';
import { pgWalRecords } from '../../scripts/predict/pg-wal-source.ts';
import { formatLsn } from '../../wal/lsn.ts';
import { segmentFileName } from '../../wal/segment.ts';
import { buildWal } from '../helpers/pg-wal-build.ts';
import {
  isLoopbackHost,
  parseListen,
  parseWebConfig,
  WebAuth,
} from '../../scripts/exporter/web-config.ts';
import type { Prediction } from '../../scripts/predict/prediction.ts';
import { parsePromText, sampleValue } from '../helpers/prom-text.ts';

const profile = loadProfile('seed-001');

/** The fields of a Prediction the exporter reads. */
function fakePrediction(url: string, writableS: number, receive: string): Prediction {
  return {
    standby: url,
    state: { timeline: 1, nBuffers: 16384, receiveLsn: receive, replayLsn: '0/100' },
    paused: true,
    range: { from: '0/100', to: receive, bytes: 4096 },
    primary: null,
    patroniPosition: receive,
    records: { byType: [{ rmgr: 'Transaction', type: 'COMMIT', count: 3 }] },
    drops: { calls: { fullScan: 2, lookup: 1 }, descriptorsScanned: 32768, probes: 4 },
    predicted: {
      writableS,
      phases: { replayS: writableS - 0.01, endOfRecoveryS: 0.006, openForWritesS: 0.004 },
      replay: {
        recordsS: 0,
        genericRecordsS: 0,
        dropsS: writableS - 0.01,
        smgrS: 0,
        controlFileS: 0,
      },
    },
  } as unknown as Prediction;
}

describe('Collector and metrics', () => {
  const targets = [
    { url: 'postgresql://u:pw@10.0.0.1:5432/db', label: '10.0.0.1:5432' },
    { url: 'postgresql://u:pw@10.0.0.2:5433/db', label: '10.0.0.2:5433' },
    { url: 'postgresql://u:pw@10.0.0.3:5434/db', label: '10.0.0.3:5434' },
  ];
  const down = new Set(['postgresql://u:pw@10.0.0.2:5433/db']);
  const predict: PredictFn = async (input) => {
    if (down.has(input.standby))
      throw new WalsimError('not_connected', 'cannot connect to the standby postgresql://u:pw@x');
    return input.standby.includes('10.0.0.1')
      ? fakePrediction(input.standby, 2.5, '0/2000') // behind, slow
      : fakePrediction(input.standby, 0.5, '0/1000');
  };
  const collector = () =>
    new Collector({
      targets,
      profile,
      profileRef: 'seed-001',
      intervalMs: 1000,
      predict,
    });

  it('a failing standby is down with its reason counted; the others are predicted and ranked', async () => {
    const c = collector();
    await c.runCycle();
    const snap = c.snapshot();
    expect(snap.standbys.map((s) => s.up)).toEqual([true, false, true]);
    expect(snap.standbys[1]!.errors.connect).toBe(1);
    expect(snap.standbys[1]!.lastError!.message).not.toContain(':pw@');
    expect(snap.standbys[1]!.lastError!.message).toContain('u:***@');
    // Patroni picks the furthest ahead (10.0.0.1, receive 0/2000); 10.0.0.3 is writable first.
    expect(snap.ranking).toEqual({ patroniPick: '10.0.0.1:5432', writableFirst: '10.0.0.3:5434' });
    const text = await exporterRegistry(() => c.snapshot(), {
      name: profile.name,
      ref: 'seed-001',
      profile,
    }).metrics();
    const s = parsePromText(text);
    expect(sampleValue(s, 'walsim_standby_up', { standby: '10.0.0.2:5433' })).toBe(0);
    expect(
      sampleValue(s, 'walsim_standby_predicted_writable_seconds', { standby: '10.0.0.1:5432' }),
    ).toBe(2.5);
    expect(
      sampleValue(s, 'walsim_standby_predicted_writable_seconds', { standby: '10.0.0.2:5433' }),
    ).toBeUndefined();
    expect(sampleValue(s, 'walsim_standby_patroni_pick', { standby: '10.0.0.1:5432' })).toBe(1);
    expect(sampleValue(s, 'walsim_standby_writable_first', { standby: '10.0.0.3:5434' })).toBe(1);
    expect(sampleValue(s, 'walsim_standby_writable_first', { standby: '10.0.0.1:5432' })).toBe(0);
    // What the fleet rules rank across exporters: LSNs as byte positions (0/2000 = 8192).
    const sb1 = { standby: '10.0.0.1:5432' };
    expect(sampleValue(s, 'walsim_standby_wal_receive_lsn_bytes', sb1)).toBe(0x2000);
    expect(sampleValue(s, 'walsim_standby_wal_replay_lsn_bytes', sb1)).toBe(0x100);
    expect(sampleValue(s, 'walsim_standby_patroni_position_bytes', sb1)).toBe(0x2000);
    expect(
      sampleValue(s, 'walsim_standby_patroni_position_bytes', { standby: '10.0.0.2:5433' }),
    ).toBeUndefined();
    // No --primary: no leader position from this exporter.
    expect(sampleValue(s, 'walsim_primary_current_wal_lsn_bytes', {})).toBeUndefined();
    // Every reason of every standby starts at 0, so increase() sees the first error.
    for (const reason of ERROR_REASONS)
      expect(
        sampleValue(s, 'walsim_standby_prediction_errors_total', {
          standby: '10.0.0.3:5434',
          reason,
        }),
      ).toBe(0);
    expect(text).not.toContain('pw');
  });

  it('a standby that recovers is up again; one that fails later loses its prediction', async () => {
    const c = collector();
    const reg = exporterRegistry(() => c.snapshot(), {
      name: 'seed-001',
      ref: 'seed-001',
      profile,
    });
    await c.runCycle();
    await reg.metrics();
    down.delete('postgresql://u:pw@10.0.0.2:5433/db');
    down.add('postgresql://u:pw@10.0.0.3:5434/db');
    await c.runCycle();
    const s = parsePromText(await reg.metrics());
    expect(sampleValue(s, 'walsim_standby_up', { standby: '10.0.0.2:5433' })).toBe(1);
    expect(sampleValue(s, 'walsim_standby_up', { standby: '10.0.0.3:5434' })).toBe(0);
    expect(
      sampleValue(s, 'walsim_standby_predicted_writable_seconds', { standby: '10.0.0.3:5434' }),
    ).toBeUndefined();
    // The counter keeps counting across scrapes (1 error of 10.0.0.2, then 1 of 10.0.0.3).
    expect(
      sampleValue(s, 'walsim_standby_prediction_errors_total', {
        standby: '10.0.0.2:5433',
        reason: 'connect',
      }),
    ).toBe(1);
    expect(sampleValue(s, 'walsim_standby_predictions_total', { standby: '10.0.0.2:5433' })).toBe(
      2,
    );
    expect(sampleValue(s, 'walsim_exporter_cycles_total')).toBe(2);
    down.clear();
    down.add('postgresql://u:pw@10.0.0.2:5433/db');
  });

  it('profile _info names the major the profile was fitted on', () => {
    expect(profileMajor(profile)).toBe('14');
    expect(profileMajor(loadProfile('pg15-calibrated-wall'))).toBe('15');
  });
});

describe('a scrape while a cycle reads WAL', () => {
  it('is answered from the last finished cycle before the read ends', async () => {
    // 4 MB of WAL in one 16 MB segment: one file read, then records parsed without I/O, so only
    // the reader's own turns of the event loop let a scrape in before the read ends.
    const noops = Array.from({ length: 150_000 }, () => ({
      rmid: 0,
      info: 0x20,
      main: new Uint8Array(0),
    }));
    const wal = buildWal(noops, { major: 15, segmentSize: 16 << 20, startSegno: 1 });
    const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'walsim-scrape-'));
    for (const [segno, bytes] of wal.segments)
      fs.writeFileSync(path.join(dir, segmentFileName(1, segno, wal.segmentSize)), bytes);
    const from = formatLsn(wal.records[0]!.lsn);
    const to = formatLsn(wal.end);
    let cycle = 0;
    let read = 0;
    let answered: { atRecord: number; body: string } | null = null;
    let scrape: Promise<void> | null = null;
    const url = 'postgresql://u@10.0.0.9:5432/db';
    const c = new Collector({
      targets: [{ url, label: '10.0.0.9:5432' }],
      profile,
      profileRef: 'seed-001',
      intervalMs: 1000,
      predict: async () => {
        if (++cycle === 1) return fakePrediction(url, 1.5, '0/1000');
        await pgWalRecords(
          dir,
          [{ tli: 1, beginLsn: 0, endLsn: null }],
          from,
          to,
          () => {
            // The scrape is sent once the read is under way; its answer is noted when it comes.
            if (++read === 1000)
              scrape = fetch(`http://127.0.0.1:${srv.address.port}/metrics`).then(async (r) => {
                answered = { atRecord: read, body: await r.text() };
              });
          },
          15,
        );
        return fakePrediction(url, 9.5, '0/2000');
      },
    });
    const srv = await startMetricsServer(
      '127.0.0.1',
      0,
      exporterRegistry(() => c.snapshot(), {
        name: 'seed-001',
        ref: 'seed-001',
        profile,
      }),
      null,
    );
    try {
      await c.runCycle();
      await c.runCycle();
      await scrape;
      expect(read).toBe(noops.length);
      const a = answered as { atRecord: number; body: string } | null;
      expect(a).not.toBeNull();
      // Answered while the second cycle was still reading, with the first cycle's prediction.
      expect(a!.atRecord).toBeLessThan(noops.length);
      const m = parsePromText(a!.body);
      expect(sampleValue(m, 'walsim_exporter_cycles_total', {})).toBe(1);
      expect(
        sampleValue(m, 'walsim_standby_predicted_writable_seconds', { standby: '10.0.0.9:5432' }),
      ).toBe(1.5);
    } finally {
      await srv.close();
      fs.rmSync(dir, { recursive: true, force: true });
    }
  });
});

describe('error reasons, labels, durations, --listen', () => {
  it('maps predict and driver errors to a small set of reasons', () => {
    const inv = (m: string) => new WalsimError('invalid_input', m);
    expect(errorReason(new WalsimError('not_connected', 'cannot connect to the standby x'))).toBe(
      'connect',
    );
    expect(errorReason(new Error('Connection terminated unexpectedly'))).toBe('connect');
    expect(errorReason(inv('permission denied for function pg_x: the role needs pg_monitor'))).toBe(
      'privileges',
    );
    expect(errorReason(inv('x is not in recovery (pg_is_in_recovery() = false)'))).toBe(
      'not_in_recovery',
    );
    expect(
      errorReason(inv('x runs PostgreSQL 12.1; predict reads PostgreSQL 13, 14, 15, 16, 17, 18')),
    ).toBe('version');
    expect(
      errorReason(inv('--pgdata /x holds a PostgreSQL 16 cluster, the standby runs 15: pass …')),
    ).toBe('version');
    expect(errorReason(inv('the WAL range 0/1 → 0/2 is not complete in /d/pg_wal (…)'))).toBe(
      'wal_missing',
    );
    expect(errorReason(inv('--pgdata /x belongs to another cluster'))).toBe('pgdata');
    expect(errorReason(inv('no way to read the WAL range 0/1 → 0/2 of x'))).toBe('no_wal_source');
    expect(errorReason(new Error('canceling statement due to statement timeout'))).toBe('timeout');
    expect(errorReason(new Error('something new'))).toBe('other');
  });

  it('labels a standby host:port, never with its user or password', () => {
    expect(standbyLabel('postgresql://u:secret@db1.example:6543/postgres')).toBe(
      'db1.example:6543',
    );
    expect(standbyLabel('postgres://u@10.1.2.3/postgres')).toBe('10.1.2.3:5432');
    expect(standbyLabel('postgresql://u:secret@[::1]:5433/x')).toBe('[::1]:5433');
    expect(standbyLabel('host=db2.example port=6000 user=u password=secret dbname=x')).toBe(
      'db2.example:6000',
    );
    expect(standbyLabel("host=db3 password='sec ret'")).toBe('db3:5432');
    expect(standbyLabel('postgresql://u:secret@')).toBe('localhost:5432');
  });

  it('parses durations and listen addresses; only loopback is loopback', () => {
    expect(parseDuration('15s')).toBe(15_000);
    expect(parseDuration('500ms')).toBe(500);
    expect(parseDuration('2m')).toBe(120_000);
    expect(parseDuration('3')).toBe(3000);
    expect(parseDuration('0s')).toBeNull();
    expect(parseDuration('soon')).toBeNull();
    expect(parseListen('127.0.0.1:9187')).toEqual({ host: '127.0.0.1', port: 9187 });
    expect(parseListen('[::1]:9187')).toEqual({ host: '::1', port: 9187 });
    expect(parseListen(':9187')).toEqual({ host: '0.0.0.0', port: 9187 });
    expect(() => parseListen('9187')).toThrow(/is not HOST:PORT/);
    expect(() => parseListen('h:99999')).toThrow(/is not HOST:PORT/);
    expect(isLoopbackHost('127.0.0.1')).toBe(true);
    expect(isLoopbackHost('::1')).toBe(true);
    expect(isLoopbackHost('localhost')).toBe(true);
    expect(isLoopbackHost('0.0.0.0')).toBe(false);
    expect(isLoopbackHost('10.0.0.1')).toBe(false);
    expect(isLoopbackHost('127.example.com')).toBe(false);
  });
});

describe('web configuration', () => {
  const pwHash = bcrypt.hashSync('s3cret', 4);
  const tokenHash = bcrypt.hashSync('tok', 4);

  it('refuses what would guard nothing or cannot be honoured, naming the key', () => {
    expect(() => parseWebConfig('', 'w.yml')).toThrow(/w.yml: expected a mapping/);
    expect(() => parseWebConfig('basic_auth_users: {}\n', 'w.yml')).toThrow(/no credentials/);
    expect(() => parseWebConfig('basic_auth_users:\n  prom: plain\n', 'w.yml')).toThrow(
      /basic_auth_users.prom is not a bcrypt hash/,
    );
    expect(() => parseWebConfig(`tls_server_config:\n  cert_file: x\n`, 'w.yml')).toThrow(
      /tls_server_config is not supported/,
    );
    expect(() => parseWebConfig(`basic_auth_user:\n  p: "${pwHash}"\n`, 'w.yml')).toThrow(
      /unknown key "basic_auth_user"/,
    );
    expect(() => parseWebConfig('a: [', 'w.yml')).toThrow(/not YAML/);
  });

  it('accepts the right basic credentials or bearer token only', async () => {
    const auth = new WebAuth(
      parseWebConfig(
        `basic_auth_users:\n  prom: "${pwHash}"\nbearer_tokens: ["${tokenHash}"]\n`,
        'w',
      ),
    );
    const basic = (u: string, p: string) => `Basic ${Buffer.from(`${u}:${p}`).toString('base64')}`;
    expect(await auth.allows(undefined)).toBe(false);
    expect(await auth.allows(basic('prom', 's3cret'))).toBe(true);
    expect(await auth.allows(basic('prom', 's3cret'))).toBe(true); // remembered
    expect(await auth.allows(basic('prom', 'wrong'))).toBe(false);
    expect(await auth.allows(basic('other', 's3cret'))).toBe(false);
    expect(await auth.allows('Bearer tok')).toBe(true);
    expect(await auth.allows('Bearer tok2')).toBe(false);
    expect(await auth.allows('Digest x')).toBe(false);
  });
});
