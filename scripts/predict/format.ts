/**
 * The prediction as a person reads it: per phase, the record types and drops behind the replay
 * phase, what dominates, the profile's held-out band, WAL behind the primary; the ranking table
 * for several standbys. Pure.
 *
 * Entry points: `formatPrediction`, `formatRanking`.
 */
import { markdownTable } from '../report/tables.ts';
import type { Prediction, rankStandbys } from './prediction.ts';

const fmtInt = (n: number) => n.toLocaleString('en-US');
const s3 = (s: number) => `${s.toFixed(3)} s`;
const pct = (p: number) => `${p >= 0 ? '+' : ''}${p.toFixed(1)}%`;

export function bytesText(n: number): string {
  if (n < 1024) return `${n} B`;
  if (n < 1024 * 1024) return `${(n / 1024).toFixed(1)} kB`;
  if (n < 1024 ** 3) return `${(n / 1024 / 1024).toFixed(1)} MB`;
  return `${(n / 1024 ** 3).toFixed(2)} GB`;
}

/** The phases after replay: ending recovery, then opening for writes. */
function promotionLines(p: Prediction): string[] {
  const q = p.predicted;
  const preallocated = (p.counts.openForWrites.walSegmentPreallocs ?? 0) > 0;
  return [
    `  end of recovery   ${s3(q.phases.endOfRecoveryS)}  (history file, new segment, END_OF_RECOVERY record + flush)`,
    `  open for writes   ${s3(q.phases.openForWritesS)}  (${preallocated ? 'next WAL segment preallocated: the end of WAL lies in the last quarter of its segment; ' : ''}pg_control to in production)`,
  ];
}

export function formatPrediction(p: Prediction): string[] {
  const st = p.state;
  const q = p.predicted;
  const out: string[] = [];
  out.push(
    `standby ${p.standby}: PostgreSQL ${st.serverVersion}, timeline ${st.timeline}, shared_buffers ${st.sharedBuffers} (NBuffers ${fmtInt(st.nBuffers)}), replay ${st.pauseState}, walreceiver ${st.walreceiver ?? 'not running'}`,
  );
  out.push(
    `unreplayed WAL: ${p.range.from} → ${p.range.to} (${bytesText(p.range.bytes)}, ${fmtInt(p.records.total)} records) read with ${p.source.detail}`,
  );
  if (p.primary !== null)
    out.push(
      'currentLsn' in p.primary
        ? `WAL not received from the primary: ${bytesText(p.primary.walNotReceivedBytes)} (primary at ${p.primary.currentLsn}, received ${st.receiveLsn})`
        : `primary ${p.primary.url} not reachable (${p.primary.error}): WAL not received unknown`,
    );
  if (p.note !== '') out.push(`note: ${p.note}`);
  out.push('');
  out.push(
    `predicted time to writable: ${s3(q.writableS)}  (profile ${p.profile.name}, file ${p.profile.file})`,
  );
  out.push(`  replay            ${s3(q.phases.replayS)}`);
  const top = q.byRmgr.slice(0, 6);
  for (const r of top)
    out.push(`    ${r.rmgr.padEnd(12)} ${fmtInt(r.records).padStart(9)} records  ${s3(r.seconds)}`);
  const types = p.records.byType
    .slice(0, 5)
    .map((t) => `${t.rmgr}/${t.type} ${fmtInt(t.count)}${t.kind === null ? ' (generic)' : ''}`);
  if (types.length > 0) out.push(`    top record types: ${types.join(', ')}`);
  if (p.records.generic > 0)
    out.push(
      `    ${fmtInt(p.records.generic)} records of types without their own constant, priced at the profile's generic per-record cost`,
    );
  const d = p.drops;
  out.push(
    `    buffer drops    ${s3(q.replay.dropsS)}: ${fmtInt(d.calls.fullScan)} full scan (${fmtInt(d.descriptorsScanned)} descriptors scanned), ${fmtInt(d.calls.lookup)} lookup (${fmtInt(d.probes)} probes), ${fmtInt(d.invalidated)} buffers invalidated`,
  );
  out.push(
    `    pg_control      ${s3(q.replay.controlFileS)}: ${fmtInt(p.counts.replay.controlFileUpdates)} minRecoveryPoint updates`,
  );
  out.push(`    file operations ${s3(q.replay.smgrS)}`);
  out.push(...promotionLines(p), p.dominates);
  const b = p.profile.band;
  if (p.profile.note !== null) out.push(`profile ${p.profile.name}: ${p.profile.note}`);
  if (p.profile.majorNote !== null) out.push(`warning: ${p.profile.majorNote}`);
  out.push(
    b === null
      ? `profile ${p.profile.name}: no held-out error recorded in it (a profile from npm run calibrate carries one)`
      : `profile ${p.profile.name}: held-out error on ${b.cells} calibration cells ${pct(b.minErrorPct)} … ${pct(b.maxErrorPct)}, median |error| ${b.medianAbsErrorPct.toFixed(1)}%, ${b.within25Pct}/${b.cells} within ±25%`,
  );
  const byPath = new Map<string, number>();
  for (const x of d.list)
    byPath.set(`${x.path}: ${x.why}`, (byPath.get(`${x.path}: ${x.why}`) ?? 0) + 1);
  if (byPath.size > 0) {
    out.push('drop calls:');
    const lines = [...byPath.entries()].sort((a, b2) => b2[1] - a[1]);
    for (const [k, n] of lines.slice(0, 8)) out.push(`  ${fmtInt(n)} × ${k}`);
    if (lines.length > 8) out.push(`  … ${lines.length - 8} more kinds (--json lists every call)`);
  }
  for (const r of p.rules.drop.summary) out.push(`rule: ${r}`);
  out.push(`rule: ${p.rules.sizeCached}`);
  out.push(`rule: ${p.rules.invalidations}`);
  for (const a of p.assumptions) out.push(`assumed: ${a}`);
  return out;
}

export function formatRanking(r: ReturnType<typeof rankStandbys>): string[] {
  const rows = r.rows.map((x, i) => [
    String(i + 1),
    x.standby,
    x.writableS.toFixed(3),
    bytesText(x.walNotReceivedBytes),
    bytesText(x.replayBacklogBytes),
    x.paused ? 'yes' : 'no',
    x.patroniEligible
      ? `yes (${bytesText(x.patroniLagBytes)})`
      : `no (${bytesText(x.patroniLagBytes)})`,
  ]);
  return [
    markdownTable(
      [
        '#',
        'standby',
        'writable in s',
        'WAL not received',
        'to replay',
        'paused',
        'Patroni lag ≤ 1MB',
      ],
      rows,
      ['r', 'l', 'r', 'r', 'r', 'l', 'l'],
    ),
    `leader position ${r.leaderPosition} (${r.leaderFrom}); Patroni's lag = leader − max(received, replayed)`,
    `Patroni's defaults (maximum_lag_on_failover = 1MB, furthest ahead) would promote: ${
      r.patroniTie !== null
        ? `tie between ${r.patroniTie.join(' and ')} (equal positions: Patroni's members race for the leader key)`
        : (r.patroniPick ?? 'none (every standby lags more than 1 MB)')
    }`,
    `writable first: ${r.writableFirst}${r.patroniPick !== null && r.patroniPick !== r.writableFirst ? '  (not the one Patroni would pick)' : ''}`,
  ];
}
