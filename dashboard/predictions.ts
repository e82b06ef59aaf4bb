/**
 * The predicted time to writable of a PostgreSQL cluster's standby, for the page: the exporter's
 * own prediction cycle (scripts/exporter/collector.ts — scripts/predict/'s `predictStandby`, the
 * one prediction implementation, on its own interval, never inside a node's poll) over the
 * cluster directory's standby, its pg_wal read from its data directory, run on the exporter's
 * cycle thread (scripts/exporter/cycle-host.ts): the dashboard's event loop, which serves the
 * page and its socket, reads no WAL. The Collector copies the last finished cycle's answer into
 * the standby's NodeView; the page graphs it over time beside the lag.
 *
 * Entry points: `PredictionSource`, `PgPredictions`, `DEFAULT_PREDICT_INTERVAL`.
 */
import type { CostProfile } from '../cost-model/profile.ts';
import { CycleHost } from '../scripts/exporter/cycle-host.ts';
import type { StandbyStatus } from '../scripts/exporter/snapshot.ts';
import { pgDataDir, readPgEngine, type PgNodeName } from '../scripts/postgres/pg-cluster.ts';
import type { PredictionView } from './view.ts';

/** The dashboard's default `--predict-interval`: a cycle reads the standby's whole backlog. */
export const DEFAULT_PREDICT_INTERVAL = '5s';

/** What the Collector asks: the last prediction of a node, null when it has none. */
export interface PredictionSource {
  start(): void;
  stop(): Promise<void>;
  view(node: string): PredictionView | null;
}

/** The `--engine postgres` cluster's standbys (the nodes of scripts/postgres/pg-cluster.ts). */
const STANDBYS: readonly PgNodeName[] = ['standby'];

/** A libpq URL of a node of the cluster (loopback, trusted; never a password). */
function nodeUrl(port: number): string {
  return `postgresql://postgres@127.0.0.1:${port}/postgres?application_name=walsim-dashboard`;
}

export class PgPredictions implements PredictionSource {
  private readonly cycle: CycleHost;

  constructor(
    dir: string,
    private readonly profile: CostProfile,
    profileRef: string,
    intervalMs: number,
  ) {
    const engine = readPgEngine(dir);
    this.cycle = new CycleHost({
      targets: STANDBYS.map((name) => ({
        url: nodeUrl(engine.ports[name]),
        pgdata: pgDataDir(dir, name),
        label: name,
      })),
      primary: nodeUrl(engine.ports.primary),
      profile,
      profileRef,
      intervalMs,
      // A failed prediction is on the page (its error); a failed cycle thread on stderr too.
      log: (line) => {
        if (/cycle thread failed/.test(line)) console.error(line);
      },
    });
  }

  start(): void {
    this.cycle.start();
  }

  stop(): Promise<void> {
    return this.cycle.stop();
  }

  view(node: string): PredictionView | null {
    const snap = this.cycle.snapshot();
    const s = snap.standbys.find((x) => x.target.label === node);
    if (s === undefined || s.predictions === 0) return null;
    return viewOf(s, snap.lastCycleAt ?? Date.now(), this.profile.name);
  }
}

/** A standby's status as the page shows it: the prediction, or why there is none. */
function viewOf(s: StandbyStatus, cycleAt: number, profile: string): PredictionView {
  const p = s.prediction;
  if (p === null)
    return {
      at: cycleAt,
      writableS: null,
      phases: null,
      profile,
      error: s.lastError?.message ?? 'no prediction',
    };
  return {
    at: s.lastGoodAt ?? cycleAt,
    writableS: p.predicted.writableS,
    phases: { ...p.predicted.phases },
    profile,
    error: null,
  };
}
