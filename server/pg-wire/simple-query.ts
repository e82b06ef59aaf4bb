/**
 * The simple query protocol's parse step (exec_simple_query): a Query's string is split into its
 * statements and all of them are parsed before any runs, so a syntax error anywhere runs nothing;
 * several statements form one implicit transaction block, in which VACUUM is refused.
 */
import { WalsimError } from '../../common/errors.ts';
import type { Notice } from '../control-protocol.ts';
import { parseStatement, splitStatements, type Statement } from '../../sql/parser.ts';

export interface ParsedQuery {
  pieces: string[];
  stmts: Statement[];
  /** The parser's NOTICEs (identifier truncation): sent before any result, even on an error. */
  notices: Notice[];
  /** What refuses the whole string (sent as the Query's only ERROR), or null. */
  error: unknown;
}

export function parseQueryString(sql: string): ParsedQuery {
  const notices: Notice[] = [];
  try {
    const pieces = splitStatements(sql);
    const stmts = pieces.map((p) => parseStatement(p, notices));
    if (stmts.length > 1 && stmts.some((s) => s.type === 'vacuum'))
      throw new WalsimError(
        'invalid_input',
        'VACUUM cannot run inside a transaction block',
        '25001',
      );
    return { pieces, stmts, notices, error: null };
  } catch (e) {
    return { pieces: [], stmts: [], notices, error: e };
  }
}
