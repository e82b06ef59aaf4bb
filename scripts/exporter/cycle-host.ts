/**
 * The exporter's two threads: this side (the main thread) answers HTTP with the text of the last
 * cycle the cycle thread posted, as it was rendered there; the cycle thread (cycle-thread.ts, a
 * node:worker_threads worker) runs the `Collector`. A cycle thread that throws or exits is not
 * the process's end: every standby is marked down with a `worker` error (no prediction served
 * from the lost thread; the one time this thread renders the cycle's series), the thread is
 * started again after a pause — 1 s, doubling while it keeps failing, at most the interval —
 * and its counters go on from the last snapshot.
 *
 * Entry points: `CycleHost`, `CycleHostOptions`, `cycleThreadEntry`.
 */
import * as fs from 'node:fs';
import { createRequire } from 'node:module';
import * as path from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { Worker } from 'node:worker_threads';
import type { CostProfile } from '../../cost-model/profile.ts';
import { entryArgs, PROJECT_ROOT } from '../../server/entry.ts';
import { redact } from '../postgres/conninfo.ts';
import type { CycleThreadData, CycleThreadMessage } from './cycle-thread.ts';
import { renderCycleMetrics, type ProfileInfo } from './metrics.ts';
import { initialSnapshot, type CycleSnapshot, type Target } from './snapshot.ts';
import { CYCLE_THREAD_MARK } from './thread-mark.ts';

export interface CycleHostOptions {
  targets: Target[];
  primary?: string;
  profile: CostProfile;
  profileRef: string;
  intervalMs: number;
  /** Where the cycle thread's lines go (default: stderr). */
  log?: (line: string) => void;
  /**
   * A module to run as the cycle thread instead of cycle-worker.ts (tests: one whose prediction
   * is a stand-in; it calls cycle-thread.ts's `serveCycles`), and what it is given.
   */
  entry?: string;
  extra?: unknown;
}

/** tsx's ESM API file (its `./esm/api` export's `import` condition), found from the project. */
function tsxEsmApi(): string {
  const pkgFile = createRequire(path.join(PROJECT_ROOT, 'package.json')).resolve(
    'tsx/package.json',
  );
  const pkg = JSON.parse(fs.readFileSync(pkgFile, 'utf8')) as {
    exports: Record<string, { import: { default: string } }>;
  };
  return path.join(path.dirname(pkgFile), pkg.exports['./esm/api']!.import.default);
}

/** How a Worker runs a module: a compiled file as it is, a TypeScript one through tsx's loader. */
function workerSpec(file: string): { filename: string; eval: boolean } {
  if (!file.endsWith('.ts')) return { filename: file, eval: false };
  // Node 20's workers do not take `--import tsx` (its hooks stay with the main thread): the
  // worker registers tsx itself, then imports the module.
  const api = tsxEsmApi();
  const code = `import(${JSON.stringify(pathToFileURL(api).href)}).then((m) => {
  (m.register ?? m.default.register)();
  return import(${JSON.stringify(pathToFileURL(file).href)});
});`;
  return { filename: code, eval: true };
}

/**
 * The cycle thread's module: in the packed package walsim.mjs is one bundle, its own worker (it
 * imports cycle-worker.ts when it finds the mark); otherwise cycle-worker.ts, prebuilt in the
 * test suite's entry bundle or through tsx (server/entry.ts).
 */
export function cycleThreadEntry(): string {
  const self = fileURLToPath(import.meta.url);
  if (self.endsWith('.mjs')) return self;
  return entryArgs('scripts/exporter/cycle-worker.ts').at(-1)!;
}

export class CycleHost {
  private last: CycleSnapshot;
  /** The cycle's series of `last` as exposition text (the cycle thread's, or rendered here). */
  private text: Promise<string>;
  private readonly info: ProfileInfo;
  private worker: Worker | null = null;
  private threadUp = false;
  private restarts = 0;
  private failuresInARow = 0;
  private timer: NodeJS.Timeout | null = null;
  private stopping = false;

  constructor(private readonly opts: CycleHostOptions) {
    // Before the first cycle: every standby down, nothing counted (the collector's own start).
    this.info = { name: opts.profile.name, ref: opts.profileRef, profile: opts.profile };
    this.last = initialSnapshot(opts.targets);
    this.text = renderCycleMetrics(this.last, this.info);
  }

  /** The last finished cycle's snapshot, and the cycle thread's state. */
  snapshot(): CycleSnapshot {
    return { ...this.last, thread: { up: this.threadUp, restarts: this.restarts } };
  }

  /** The last finished cycle's series as exposition text: what a scrape serves of the cycle. */
  cycleText(): Promise<string> {
    return this.text;
  }

  start(): void {
    const { targets, primary, profile, profileRef, intervalMs, extra } = this.opts;
    const data: CycleThreadData = {
      mark: CYCLE_THREAD_MARK,
      targets,
      primary,
      profile,
      profileRef,
      intervalMs,
      carry: this.last,
      generation: this.restarts,
      extra,
    };
    const spec = workerSpec(this.opts.entry ?? cycleThreadEntry());
    const w = new Worker(spec.filename, { eval: spec.eval, workerData: data });
    this.worker = w;
    this.threadUp = true;
    let fault: string | null = null;
    w.on('message', (m: CycleThreadMessage) => this.received(m));
    w.on('error', (e: unknown) => (fault = e instanceof Error ? e.message : String(e)));
    w.on('messageerror', (e) => (fault = `a message could not be read: ${e.message}`));
    w.on('exit', (code) => {
      if (this.worker === w) this.worker = null;
      this.threadUp = false;
      if (!this.stopping) this.failed(fault ?? `it exited with code ${code}`);
    });
  }

  async stop(): Promise<void> {
    this.stopping = true;
    if (this.timer !== null) clearTimeout(this.timer);
    await this.worker?.terminate();
  }

  private received(m: CycleThreadMessage): void {
    if (m.type === 'snapshot') {
      this.last = m.snapshot;
      this.text = Promise.resolve(m.text);
      this.failuresInARow = 0;
    } else (this.opts.log ?? console.error)(m.line);
  }

  /** Every standby down with a `worker` error; the thread started again after a pause. */
  private failed(why: string): void {
    const message = `the exporter's cycle thread failed (${redact(why)}); restarting it`;
    this.last = {
      ...this.last,
      ranking: null,
      standbys: this.last.standbys.map((s) => ({
        ...s,
        up: false,
        prediction: null,
        lastError: { reason: 'worker', message },
        errors: { ...s.errors, worker: s.errors.worker + 1 },
      })),
    };
    this.text = renderCycleMetrics(this.last, this.info);
    (this.opts.log ?? console.error)(`walsim exporter: ${message}`);
    this.failuresInARow += 1;
    const pause = Math.min(this.opts.intervalMs, 1000 * 2 ** (this.failuresInARow - 1));
    this.timer = setTimeout(() => {
      this.timer = null;
      if (this.stopping) return;
      this.restarts += 1;
      this.start();
    }, pause);
  }
}
