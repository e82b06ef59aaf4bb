/**
 * The run's trace (sim/README rule 5): every event, log line and step as `time owner label`,
 * folded into one 32-bit hash (always) and kept as lines (with `trace: true`), plus the
 * violations found so far, each also recorded in the trace.
 */
import { fmix32 } from '../common/hash.ts';

export class Trace {
  private hash = 0x811c9dc5;
  readonly lines: string[] | null;
  readonly violations: string[] = [];

  constructor(
    keepLines: boolean,
    private readonly now: () => number,
  ) {
    this.lines = keepLines ? [] : null;
  }

  private mix(text: string): void {
    let h = this.hash;
    for (let i = 0; i < text.length; i++) h = fmix32(h ^ text.charCodeAt(i)) ^ (h >>> 7);
    this.hash = h >>> 0;
  }

  private mixSpace(): void {
    const h = this.hash;
    this.hash = (fmix32(h ^ 32) ^ (h >>> 7)) >>> 0;
  }

  /**
   * The line `at owner what`, folded piece by piece: the hash folds characters in order, so this
   * is the hash of the joined line without building it (it is built only when lines are kept).
   */
  record(at: number, owner: string, what: string): void {
    this.mix(String(at));
    this.mixSpace();
    this.mix(owner);
    this.mixSpace();
    this.mix(what);
    this.lines?.push(`${at} ${owner} ${what}`);
  }

  violation(message: string): void {
    this.violations.push(`t=${this.now()} ms: ${message}`);
    this.record(this.now(), 'sim', `VIOLATION ${message}`);
  }

  hashHex(): string {
    return this.hash.toString(16).padStart(8, '0');
  }
}
