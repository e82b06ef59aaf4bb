/**
 * splitStatements cuts a simple-protocol query string at top-level semicolons only. Method: strings
 * with semicolons inside quotes, identifiers and comments, and empty statements.
 */
import { describe, expect, it } from 'vitest';
import { parseStatement, splitStatements } from '../../sql/parser.ts';

describe('splitStatements', () => {
  it('splits at top-level semicolons and drops empty statements', () => {
    expect(splitStatements('SELECT count(*) FROM t; SHOW port;')).toEqual([
      'SELECT count(*) FROM t',
      ' SHOW port',
    ]);
    expect(splitStatements(';; ;\n-- only a comment\n')).toEqual([]);
    expect(splitStatements('')).toEqual([]);
  });

  it('keeps semicolons inside quotes and comments', () => {
    expect(splitStatements('SELECT current_setting(\'a;b\'); SELECT count(*) FROM "x;y"')).toEqual([
      "SELECT current_setting('a;b')",
      ' SELECT count(*) FROM "x;y"',
    ]);
    expect(splitStatements('VACUUM -- not here; nor here\n; CHECKPOINT')).toEqual([
      'VACUUM -- not here; nor here\n',
      ' CHECKPOINT',
    ]);
  });

  it('leaves an unterminated quote to the parser, which names it', () => {
    const pieces = splitStatements("SHOW port; SELECT current_setting('x;");
    expect(pieces).toEqual(['SHOW port', " SELECT current_setting('x;"]);
    expect(() => parseStatement(pieces[1]!)).toThrow(/unterminated quoted string/);
  });

  it('accepts pg_catalog-qualified functions', () => {
    expect(parseStatement('SELECT pg_catalog.pg_is_in_recovery()')).toEqual({
      type: 'select_function',
      fn: 'pg_is_in_recovery',
      args: [],
    });
  });
});
