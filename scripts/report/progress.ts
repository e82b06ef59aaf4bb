/**
 * The sweeps' progress bar on stderr (plain periodic lines when stderr is not a terminal), with an
 * ETA weighted by each run's estimated cost; used by `npm run sweep` and `npm run calibrate`.
 *
 * Entry points: `progressBar`, `fmtDuration`.
 */
import cliProgress from 'cli-progress';
import type { SweepProgress } from './records.ts';

export function fmtDuration(s: number): string {
  if (!Number.isFinite(s)) return '?';
  const t = Math.max(0, Math.round(s));
  return t >= 3600
    ? `${Math.floor(t / 3600)}h${String(Math.floor((t % 3600) / 60)).padStart(2, '0')}m`
    : t >= 60
      ? `${Math.floor(t / 60)}m${String(t % 60).padStart(2, '0')}s`
      : `${t}s`;
}

/** A progress bar on stderr (plain periodic lines when stderr is not a terminal); ETA weighted by cost. */
export function progressBar(total: number, quiet: boolean) {
  const t0 = Date.now();
  const bar = new cliProgress.SingleBar(
    {
      stream: process.stderr,
      format: '{bar} {value}/{total} runs | {elapsed} elapsed | ETA {eta2} | {cell}',
      barsize: 24,
      hideCursor: true,
      noTTYOutput: true,
      notTTYSchedule: 10_000,
      clearOnComplete: false,
    },
    cliProgress.Presets.shades_classic,
  );
  let last: SweepProgress | null = null;
  const payload = () => {
    const elapsed = (Date.now() - t0) / 1000;
    const eta =
      last && last.weightDone > 0
        ? (elapsed * (last.weightTotal - last.weightDone)) / last.weightDone
        : NaN;
    return {
      elapsed: fmtDuration(elapsed),
      eta2: last?.current === 'done' ? '0s' : fmtDuration(eta),
      cell: last?.current ?? '',
    };
  };
  if (!quiet) bar.start(total, 0, payload());
  const timer = setInterval(() => !quiet && bar.update(payload()), 1000);
  return {
    update(p: SweepProgress) {
      last = p;
      if (!quiet) bar.update(p.done, payload());
    },
    stop() {
      clearInterval(timer);
      if (!quiet) bar.stop();
    },
  };
}
