/**
 * Relation sizes of seed 001's experiments: `NB/k` (NBuffers / k pages, the seed's notation),
 * a page count, or a byte size such as `200MB`. Pure; NBuffers comes from the standby's
 * shared_buffers (the node whose drops are measured).
 *
 * Entry points: `parseRelSize`, `rowsForPages`, `REL_SIZE_FORMS`, `MAX_REL_PAGES`.
 */
import { WalsimError } from '../../common/errors.ts';
import { BLCKSZ } from '../../storage/shared-buffers.ts';
import { TUPLES_PER_PAGE } from '../../wal/records.ts';

/** The largest value of the table's int4 column: generate_series(1, rows) must stay below it. */
export const INT4_MAX = 2147483647;
/** The most pages a relation of the experiments can have: its rows are numbered in an int. */
export const MAX_REL_PAGES = Math.floor(INT4_MAX / TUPLES_PER_PAGE);

export const REL_SIZE_FORMS =
  'accepted forms: NB/<k> (NBuffers/k pages, e.g. NB/512, NB/32, NB/8), a page count (e.g. 4096), ' +
  'or a size with a unit B, kB, MB, GB, TB (e.g. 200MB; rounded up to whole 8kB pages)';

export interface RelSize {
  /** The text as given, normalised (`NB/32`, `4096`, `200MB`). */
  spec: string;
  pages: number;
  rows: number;
  /** k of NB/k, when given in that form. */
  divisor: number | null;
}

const UNIT_BYTES: Record<string, number> = {
  B: 1,
  kB: 1024,
  MB: 1024 ** 2,
  GB: 1024 ** 3,
  TB: 1024 ** 4,
};

/** Rows of `INSERT … generate_series(1, rows)` that fill exactly `pages` heap pages. */
export function rowsForPages(pages: number): number {
  return pages * TUPLES_PER_PAGE;
}

function refuse(text: string, why: string): WalsimError {
  return new WalsimError(
    'invalid_input',
    `invalid relation size "${text}": ${why}; ${REL_SIZE_FORMS}`,
  );
}

export function parseRelSize(text: string, nBuffers: number): RelSize {
  const t = text.trim();
  let pages: number;
  let divisor: number | null = null;
  let spec: string;
  let m: RegExpMatchArray | null;
  if ((m = /^NB\s*\/\s*(\d+)$/i.exec(t))) {
    divisor = Number(m[1]);
    if (!Number.isSafeInteger(divisor) || divisor < 1)
      throw refuse(text, 'the divisor must be a positive integer');
    pages = Math.floor(nBuffers / divisor);
    spec = `NB/${divisor}`;
    if (pages < 1)
      throw refuse(text, `NBuffers/${divisor} = ${nBuffers}/${divisor} is less than one page`);
  } else if ((m = /^(\d+)$/.exec(t))) {
    pages = Number(m[1]);
    spec = String(pages);
  } else if ((m = /^(\d+(?:\.\d+)?)\s*(B|kB|MB|GB|TB)$/.exec(t))) {
    const bytes = Number(m[1]) * UNIT_BYTES[m[2]!]!;
    pages = Math.ceil(bytes / BLCKSZ);
    spec = `${m[1]}${m[2]}`;
  } else {
    throw refuse(text, 'not a size');
  }
  if (!Number.isSafeInteger(pages) || pages < 1)
    throw refuse(text, 'the relation needs at least one page');
  const rows = rowsForPages(pages);
  if (rows > INT4_MAX) {
    throw refuse(
      text,
      `${pages} pages need ${rows} rows, beyond the int column's maximum ${INT4_MAX} (at most ${Math.floor(INT4_MAX / TUPLES_PER_PAGE)} pages)`,
    );
  }
  return { spec, pages, rows, divisor };
}
