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

  record(at: number, owner: string, what: string): void {
    const line = `${at} ${owner} ${what}`;
    this.mix(line);
    this.lines?.push(line);
  }

  violation(message: string): void {
    this.violations.push(`t=${this.now()} ms: ${message}`);
    this.record(this.now(), 'sim', `VIOLATION ${message}`);
  }

  hashHex(): string {
    return this.hash.toString(16).padStart(8, '0');
  }
}
