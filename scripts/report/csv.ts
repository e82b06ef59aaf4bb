/**
 * RFC 4180 CSV (pure): a header row, then one row per record; fields with a comma, quote or line
 * break are quoted, quotes doubled; null/undefined and non-finite numbers are empty; objects are JSON.
 *
 * Entry points: `toCsv`, `csvField`.
 */
export function csvField(v: unknown): string {
  if (v === null || v === undefined || (typeof v === 'number' && !Number.isFinite(v))) return '';
  const s = typeof v === 'object' ? JSON.stringify(v) : String(v);
  return /[",\r\n]/.test(s) ? `"${s.replaceAll('"', '""')}"` : s;
}

export function toCsv(records: ReadonlyArray<Record<string, unknown>>, columns?: string[]): string {
  const cols = columns ?? [...new Set(records.flatMap((r) => Object.keys(r)))];
  const lines = [
    cols.map(csvField).join(','),
    ...records.map((r) => cols.map((c) => csvField(r[c])).join(',')),
  ];
  return lines.join('\r\n') + '\r\n';
}
