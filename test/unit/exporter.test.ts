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
import {
  cycleRenders,
  liveRegistry,
  metricsPage,
  profileMajor,
  renderCycleMetrics,
} from '../../scripts/exporter/metrics.ts';
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
import { parsePromText, sampleValue } from '../helpers/prom-text.ts';
import { fakePrediction, type CycleStubExtra } from '../helpers/exporter-cycle-stub.ts';
import { CycleHost } from '../../scripts/exporter/cycle-host.ts';
import { CYCLE_THREAD_NICE } from '../../scripts/exporter/cycle-thread.ts';
import { pollUntil } from '../../server/poll.ts';
import { closureOf, readImportGraph } from '../helpers/import-graph.ts';

const profile = loadProfile('seed-001');
const info = { name: profile.name, ref: 'seed-001', profile };

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
    const text = await renderCycleMetrics(c.snapshot(), info);
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
    await c.runCycle();
    await renderCycleMetrics(c.snapshot(), info);
    down.delete('postgresql://u:pw@10.0.0.2:5433/db');
    down.add('postgresql://u:pw@10.0.0.3:5434/db');
    await c.runCycle();
    const s = parsePromText(await renderCycleMetrics(c.snapshot(), info));
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
    const { dir, from, to, records } = builtWalDir();
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
      // In-process (as the dashboard runs the collector): the cycle's series rendered per scrape.
      metricsPage(
        liveRegistry(() => c.snapshot()),
        () => renderCycleMetrics(c.snapshot(), info),
      ),
      null,
    );
    try {
      await c.runCycle();
      await c.runCycle();
      await scrape;
      expect(read).toBe(records);
      const a = answered as { atRecord: number; body: string } | null;
      expect(a).not.toBeNull();
      // Answered while the second cycle was still reading, with the first cycle's prediction.
      expect(a!.atRecord).toBeLessThan(records);
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

/** 150,000 no-op records of built WAL in one 16 MB segment of a fresh directory, and its range. */
function builtWalDir(): { dir: string; from: string; to: string; records: number } {
  const noops = Array.from({ length: 150_000 }, () => ({
    rmid: 0,
    info: 0x20,
    main: new Uint8Array(0),
  }));
  const wal = buildWal(noops, { major: 15, segmentSize: 16 << 20, startSegno: 1 });
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'walsim-scrape-'));
  for (const [segno, bytes] of wal.segments)
    fs.writeFileSync(path.join(dir, segmentFileName(1, segno, wal.segmentSize)), bytes);
  return {
    dir,
    from: formatLsn(wal.records[0]!.lsn),
    to: formatLsn(wal.end),
    records: noops.length,
  };
}

const STUB = path.join(import.meta.dirname, '..', 'helpers', 'exporter-cycle-stub.ts');
const stubTarget = { url: 'postgresql://u@10.0.0.9:5432/db', label: '10.0.0.9:5432' };

/** A CycleHost running the stand-in cycle thread, its metrics served on a loopback port. */
async function stubExporter(extra: CycleStubExtra, log: string[], intervalMs = 200) {
  const host = new CycleHost({
    targets: [stubTarget],
    profile,
    profileRef: 'seed-001',
    intervalMs,
    entry: STUB,
    extra,
    log: (l) => log.push(l),
  });
  const page = metricsPage(
    liveRegistry(() => host.snapshot()),
    () => host.cycleText(),
  );
  const srv = await startMetricsServer('127.0.0.1', 0, page, null);
  const get = () => fetch(`http://127.0.0.1:${srv.address.port}/metrics`);
  const scrape = async () => parsePromText(await (await get()).text());
  host.start();
  return { host, get, scrape, close: () => Promise.all([host.stop(), srv.close()]) };
}

describe('the thread answering HTTP', () => {
  it("loads none of the cycle's modules: its heap holds what a scrape serves", () => {
    const root = path.resolve(import.meta.dirname, '../..');
    const graph = readImportGraph(root);
    const reach = closureOf(graph, ['scripts/exporter.ts']);
    const CYCLE =
      /^(scripts\/predict\/|pg-wal\/|scripts\/exporter\/(collector|incremental|windows|cycle-thread|cycle-worker)\.ts$)/;
    const cycleModules = [...reach].filter(([f]) => CYCLE.test(f)).map(([, c]) => c.join(' -> '));
    expect(cycleModules).toEqual([]);
    const driver = [...reach.keys()].filter((f) =>
      graph.get(f)!.imports.some((e) => !e.typeOnly && e.spec === 'pg'),
    );
    expect(driver).toEqual([]);
    // What it does load: the HTTP side, the host of the cycle thread, the shared shapes.
    for (const f of ['cycle-host', 'metrics', 'server', 'snapshot'])
      expect(reach.has(`scripts/exporter/${f}.ts`)).toBe(true);
  });
});

describe('the cycle thread', () => {
  const sb = { standby: stubTarget.label };

  it('renders the cycle: a scrape serves the text it posted as it is, this thread renders none of it', async () => {
    const flags = new Int32Array(new SharedArrayBuffer(20));
    const log: string[] = [];
    // One cycle (the next is a minute away): every scrape below sees the same posted text.
    const x = await stubExporter(
      { mode: 'plain', shared: flags.buffer as SharedArrayBuffer },
      log,
      60_000,
    );
    try {
      const rendersAtStart = cycleRenders();
      await pollUntil(async () => x.host.snapshot().cycles === 1, 'the first cycle', 60_000, 10);
      const posted = await x.host.cycleText();
      expect(sampleValue(parsePromText(posted), 'walsim_standby_up', sb)).toBe(1);
      expect(sampleValue(parsePromText(posted), 'walsim_exporter_cycles_total', {})).toBe(1);
      for (let i = 0; i < 10; i++) {
        const r = await x.get();
        expect(r.headers.get('server-timing')).toMatch(/^render;dur=\d+\.\d{3}$/);
        const body = await r.text();
        // The live series first (this thread's process and event loop), then the posted text.
        expect(body.endsWith(posted)).toBe(true);
        expect(body.slice(0, -posted.length)).toMatch(/^# HELP process_cpu_user_seconds_total/);
        expect(body.slice(0, -posted.length)).not.toContain('walsim_standby_up');
      }
      // Not once per scrape, not on the snapshot's arrival: the cycle thread rendered it.
      expect(cycleRenders()).toBe(rendersAtStart);
      expect(log).toEqual([]);
    } finally {
      await x.close();
    }
  });

  it('is not the thread that answers: a scrape is answered while the cycle thread is blocked mid-read', async () => {
    const wal = builtWalDir();
    const niceBefore = os.getPriority();
    const flags = new Int32Array(new SharedArrayBuffer(20));
    const log: string[] = [];
    const x = await stubExporter(
      { mode: 'block', shared: flags.buffer as SharedArrayBuffer, walDir: wal.dir, ...wal },
      log,
    );
    try {
      // This thread's event loop turns while the cycle thread reads, then while it is blocked
      // (Atomics.wait at its 1000th record: no turn of its own loop until released below).
      let turns = 0;
      await pollUntil(
        async () => {
          turns += 1;
          return Atomics.load(flags, 1) === 1 && x.host.snapshot().cycles === 1;
        },
        'the cycle thread to be mid-read in its second cycle',
        60_000,
        5,
      );
      const turnsAtBlock = turns;
      const m = await x.scrape();
      await pollUntil(async () => ++turns > turnsAtBlock + 3, 'turns of this loop', 5_000, 1);
      // Still blocked: the answer came from this thread, with the first cycle's snapshot.
      expect(Atomics.load(flags, 2)).toBe(0);
      expect(sampleValue(m, 'walsim_exporter_cycles_total', {})).toBe(1);
      expect(sampleValue(m, 'walsim_standby_predicted_writable_seconds', sb)).toBe(1.5);
      expect(sampleValue(m, 'walsim_exporter_cycle_thread_up', {})).toBe(1);
      Atomics.store(flags, 0, 1);
      Atomics.notify(flags, 0);
      await pollUntil(
        async () => x.host.snapshot().cycles >= 2,
        'the second cycle to finish',
        60_000,
        10,
      );
      expect(Atomics.load(flags, 2)).toBe(1000);
      expect(Atomics.load(flags, 3)).toBe(wal.records);
      // On Linux the cycle thread runs at nice 10 at least, this thread as it was.
      if (fs.existsSync('/proc/thread-self')) {
        expect(Atomics.load(flags, 4) - 100).toBe(Math.max(CYCLE_THREAD_NICE, os.getPriority()));
        expect(os.getPriority()).toBe(niceBefore);
      }
      expect(log).toEqual([]);
    } finally {
      await x.close();
      fs.rmSync(wal.dir, { recursive: true, force: true });
    }
  });

  it('that throws does not end the process: the standby is down with a worker error, scrapes answer, the thread restarts and counts on', async () => {
    const flags = new Int32Array(new SharedArrayBuffer(20));
    const log: string[] = [];
    const x = await stubExporter({ mode: 'throw', shared: flags.buffer as SharedArrayBuffer }, log);
    const rendersAtStart = cycleRenders();
    try {
      await pollUntil(
        async () => x.host.snapshot().standbys[0]!.errors.worker === 1,
        'the cycle thread to fail',
        60_000,
        10,
      );
      // The standbys marked down here: the one time this thread renders the cycle's series.
      expect(cycleRenders()).toBe(rendersAtStart + 1);
      // The restarted thread waits for flag 0 before its first prediction: this state holds.
      const down = await x.scrape();
      expect(sampleValue(down, 'walsim_standby_up', sb)).toBe(0);
      expect(sampleValue(down, 'walsim_standby_predicted_writable_seconds', sb)).toBeUndefined();
      expect(
        sampleValue(down, 'walsim_standby_prediction_errors_total', { ...sb, reason: 'worker' }),
      ).toBe(1);
      expect(sampleValue(down, 'walsim_exporter_cycles_total', {})).toBe(1);
      expect(log.join('\n')).toMatch(/cycle thread failed \(stand-in fault of the cycle thread\)/);
      await pollUntil(
        async () => x.host.snapshot().thread!.restarts === 1,
        'the cycle thread to be started again',
        60_000,
        10,
      );
      Atomics.store(flags, 0, 1);
      Atomics.notify(flags, 0);
      await pollUntil(
        async () => x.host.snapshot().standbys[0]!.up,
        'the restarted thread to predict',
        60_000,
        10,
      );
      const up = await x.scrape();
      expect(sampleValue(up, 'walsim_standby_up', sb)).toBe(1);
      expect(sampleValue(up, 'walsim_standby_predicted_writable_seconds', sb)).toBe(1.5);
      expect(sampleValue(up, 'walsim_exporter_cycle_thread_restarts_total', {})).toBe(1);
      expect(sampleValue(up, 'walsim_exporter_cycle_thread_up', {})).toBe(1);
      // Counted on from the first thread's: 1 cycle before the fault, then the restarted ones.
      expect(sampleValue(up, 'walsim_exporter_cycles_total', {})).toBeGreaterThanOrEqual(2);
      expect(
        sampleValue(up, 'walsim_standby_prediction_errors_total', { ...sb, reason: 'worker' }),
      ).toBe(1);
    } finally {
      await x.close();
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
