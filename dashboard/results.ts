/**
 * The results view's data: finished sweep directories (`<results>/<timestamp>/results.json`,
 * scripts/report/write-results.ts) listed and read. A name is accepted only if it is one entry
 * of the results folder (no separators, no `..`), so no request reads outside it.
 *
 * Entry points: `listResults`, `readResults`.
 */
import * as fs from 'node:fs';
import * as path from 'node:path';
import { marked } from 'marked';
import type { CellSummary } from '../scripts/report/records.ts';
import type { SweepCellView } from './wire.ts';

/** The compiler checks that a sweep's cells have every field the page's charts read. */
type Fits<A extends B, B> = A;
export type SweepCell = Fits<CellSummary, SweepCellView>;

export interface ResultsEntry {
  name: string;
  kind: string | null;
  startedAt: string | null;
  cells: number;
}

const NAME = /^[A-Za-z0-9._-]{1,200}$/;

export function listResults(base: string): ResultsEntry[] {
  if (!fs.existsSync(base)) return [];
  const out: ResultsEntry[] = [];
  for (const d of fs.readdirSync(base, { withFileTypes: true })) {
    if (!d.isDirectory() || !NAME.test(d.name)) continue;
    const file = path.join(base, d.name, 'results.json');
    if (!fs.existsSync(file)) continue;
    try {
      const j = JSON.parse(fs.readFileSync(file, 'utf8')) as {
        kind?: string;
        startedAt?: string;
        cells?: unknown[];
      };
      out.push({
        name: d.name,
        kind: j.kind ?? null,
        startedAt: j.startedAt ?? null,
        cells: j.cells?.length ?? 0,
      });
    } catch {
      out.push({ name: d.name, kind: null, startedAt: null, cells: 0 });
    }
  }
  return out.sort((a, b) => b.name.localeCompare(a.name));
}

/** results.json of one sweep plus its tables.md as HTML; null when there is no such sweep. */
export function readResults(
  base: string,
  name: string,
): { results: unknown; tablesHtml: string | null } | null {
  if (!NAME.test(name) || name === '.' || name === '..') return null;
  const dir = path.join(base, name);
  const file = path.join(dir, 'results.json');
  if (!fs.existsSync(file)) return null;
  const results = JSON.parse(fs.readFileSync(file, 'utf8')) as unknown;
  const md = path.join(dir, 'tables.md');
  const tablesHtml = fs.existsSync(md)
    ? (marked.parse(fs.readFileSync(md, 'utf8'), { async: false }) as string)
    : null;
  return { results, tablesHtml };
}
