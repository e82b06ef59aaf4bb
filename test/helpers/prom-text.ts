/**
 * Prometheus text exposition format, read back in tests: one sample per line, `name{labels} value`
 * (HELP/TYPE comments skipped), and a lookup by name and label subset.
 */

export interface PromSample {
  name: string;
  labels: Record<string, string>;
  value: number;
}

/** Every sample of an exposition; a line that is not one throws with the line. */
export function parsePromText(text: string): PromSample[] {
  const out: PromSample[] = [];
  for (const line of text.split('\n')) {
    if (line.trim() === '' || line.startsWith('#')) continue;
    const m = /^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})?\s+(\S+)(?:\s+\d+)?$/.exec(line);
    if (m === null) throw new Error(`not a sample line: ${line}`);
    const labels: Record<string, string> = {};
    for (const l of (m[2] ?? '').matchAll(/([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"/g))
      labels[l[1]!] = l[2]!.replace(/\\n/g, '\n').replace(/\\(.)/g, '$1');
    const v = m[3]!;
    out.push({
      name: m[1]!,
      labels,
      value: v === '+Inf' ? Infinity : v === '-Inf' ? -Infinity : Number(v),
    });
  }
  return out;
}

/** The samples named `name` whose labels include `labels`. */
export function samples(
  all: PromSample[],
  name: string,
  labels: Record<string, string> = {},
): PromSample[] {
  return all.filter(
    (s) => s.name === name && Object.entries(labels).every(([k, v]) => s.labels[k] === v),
  );
}

/** The one sample named `name` with `labels` (undefined when absent; throws when several). */
export function sampleValue(
  all: PromSample[],
  name: string,
  labels: Record<string, string> = {},
): number | undefined {
  const s = samples(all, name, labels);
  if (s.length > 1) throw new Error(`${s.length} samples of ${name} ${JSON.stringify(labels)}`);
  return s[0]?.value;
}
