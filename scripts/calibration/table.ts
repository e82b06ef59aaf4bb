/**
 * `npm run calibrate`'s human report (scripts/calibrate.ts): per cell the runs, PostgreSQL's
 * median, CPU pressure, the fitted seconds, the residual and the left-out prediction; then the
 * fitted groups and the leave-one-out count.
 *
 * Entry points: `printCalibration`.
 */
import { cellKey, median } from '../experiment/sweep-runner.ts';
import type { RunRecord } from '../report/records.ts';
import type { fitCalibration } from './design.ts';
import { markdownTable } from '../report/tables.ts';

const pct = (x: number) =>
  Number.isFinite(x) ? `${x >= 0 ? '+' : ''}${(x * 100).toFixed(1)}%` : 'n/a';
const sec = (x: number) => (Number.isFinite(x) ? x.toFixed(3) : 'n/a');

/** The human report: per cell measured, fitted, residual and left-out prediction; the groups. */
export function printCalibration(
  report: ReturnType<typeof fitCalibration>,
  records: RunRecord[],
  warmupRuns: number,
  within: number,
): void {
  console.log('');
  const runsOf = (c: (typeof report.cells)[number]) =>
    records.filter((r) => cellKey(r) === cellKey(c.cell));
  const warmupS = (c: (typeof report.cells)[number]) =>
    median(
      runsOf(c)
        .filter((r) => r.warmup === true)
        .map((r) => r.failoverMs),
    ) / 1000;
  const pressure = (c: (typeof report.cells)[number]) =>
    median(
      runsOf(c)
        .filter((r) => r.warmup !== true && r.cpuPressure !== undefined)
        .map((r) => r.cpuPressure!),
    );
  console.log(
    markdownTable(
      [
        'cell',
        'runs',
        ...(warmupRuns ? ['warm-up s'] : []),
        'PostgreSQL s',
        'CPU pressure',
        'fitted s',
        'residual',
        'left out: predicted s',
        'error',
      ],
      report.cells.map((c) => [
        c.label,
        `${c.runs}${c.stalls ? ` (${c.stalls} stalled)` : ''}`,
        ...(warmupRuns ? [sec(warmupS(c))] : []),
        sec(c.measuredS),
        Number.isFinite(pressure(c)) ? `${Math.round(pressure(c) * 100)}%` : 'n/a',
        sec(c.fittedS),
        pct(c.residualPct),
        sec(c.leaveOneOutS),
        pct(c.leaveOneOutPct),
      ]),
    ),
  );
  console.log('');
  console.log(
    `fitted per event: ${Object.entries(report.groupSeconds)
      .map(([g, s]) => `${g} ${s.toExponential(3)} s`)
      .join(', ')}`,
  );
  console.log(
    `leave-one-out: ${within} of ${report.cells.length} cells predicted within ±25% when left out of the fit`,
  );
}
