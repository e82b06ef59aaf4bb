/**
 * The SQL parser against PostgreSQL 15's answers to the same text (each expected message was
 * read off a real server, psql -v VERBOSITY=verbose): PostgreSQL statements walsim lacks are 0A000
 * "… is not supported by walsim", not a syntax error; comments, doubled quotes, identifier
 * truncation (bytes, with the NOTICE), integer literals beyond int4, function resolution.
 */
import { describe, expect, it } from 'vitest';
import type { Notice } from '../../protocol/messages.ts';
import { parseStatement } from '../../sql/parser.ts';
import { describeStatement } from '../../sql/functions.ts';

function errorOf(f: () => unknown): { sqlstate: string; message: string; hint?: string } {
  try {
    f();
  } catch (e) {
    const { sqlstate, message, hint } = e as { sqlstate: string; message: string; hint?: string };
    return { sqlstate, message, ...(hint !== undefined ? { hint } : {}) };
  }
  throw new Error('expected an error');
}

const refusal = (sql: string) => errorOf(() => describeStatement(parseStatement(sql)));

describe('parseStatement', () => {
  it('refuses PostgreSQL statements walsim lacks with 0A000 naming them', () => {
    for (const [sql, message] of [
      ['BEGIN', 'BEGIN is not supported by walsim: every statement commits on its own'],
      ['commit', 'COMMIT is not supported by walsim'],
      ['ROLLBACK', 'ROLLBACK is not supported by walsim'],
      [
        'SET synchronous_commit = off',
        'SET is not supported by walsim: it has no session settings',
      ],
      ['COPY t FROM STDIN', 'COPY is not supported by walsim'],
      ['VACUUM FULL', 'VACUUM FULL is not supported by walsim'],
      ['VACUUM (VERBOSE) t', 'VACUUM options are not supported by walsim'],
      ['UPDATE t SET c = 1', 'UPDATE is not supported by walsim'],
      ['CREATE INDEX i ON t (c)', 'CREATE INDEX is not supported by walsim'],
      ['SELECT c FROM t', 'SELECT … FROM t is not supported by walsim'],
      ['SELECT 1 + 1', 'this SELECT is not supported by walsim'],
      ['SELECT count(*) FROM t WHERE $1 > c', 'parameters ($1) are not supported by walsim'],
      ['\\d', '"\\d" is a psql meta-command, not SQL'],
    ] as const) {
      const e = refusal(sql);
      expect(e.sqlstate, sql).toBe('0A000');
      expect(e.message, sql).toContain(message);
    }
    // psql's \d sends a catalog query: the refusal says walsim has no catalogs.
    expect(
      refusal(
        'SELECT n.nspname as "Schema", c.relname as "Name" FROM pg_catalog.pg_class c LEFT JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace',
      ).message,
    ).toMatch(/no system catalogs \(psql's \\d/);
    expect(refusal('FOO bar')).toEqual({
      sqlstate: '42601',
      message: 'syntax error at or near "foo"',
    });
  });

  it('names the column walsim cannot store in CREATE TABLE', () => {
    expect(refusal('CREATE TABLE t2 (c int, d int)')).toEqual({
      sqlstate: '0A000',
      message:
        'column "d" of type int is not supported by walsim: a table has one int column and optionally one text or bytea column (stored NULL)',
    });
    expect(refusal('CREATE TABLE t2 (c bigint)').message).toBe(
      'column "c" of type bigint is not supported by walsim: a table\'s first column is int',
    );
  });

  it('skips nested block comments and reads "a""b" as a"b', () => {
    expect(parseStatement('/* a /* nested */ comment */ VACUUM /* x */ t -- end')).toEqual({
      type: 'vacuum',
      name: 't',
    });
    expect(parseStatement('CREATE TABLE "a""b" (c int)')).toMatchObject({ name: 'a"b' });
    // downcase_identifier folds ASCII letters only (UTF-8): É and Σ stay, T and X fold.
    expect(parseStatement('CREATE TABLE ÉTÉ (c int)')).toMatchObject({ name: 'ÉtÉ' });
    expect(parseStatement('DROP TABLE ΣX, Tab')).toMatchObject({ names: ['Σx', 'tab'] });
    expect(refusal('SELECT 1 /* never closed').message).toBe(
      'unterminated /* comment at or near "/*"',
    );
  });

  it('truncates identifiers to 63 bytes at a character boundary, with the NOTICE', () => {
    const notices: Notice[] = [];
    const long = 'é'.repeat(40); // 80 bytes
    expect(parseStatement(`CREATE TABLE ${long} (c int)`, notices)).toMatchObject({
      name: 'é'.repeat(31), // 62 bytes: a 32nd é would make 64
    });
    expect(notices).toEqual([
      {
        severity: 'NOTICE',
        code: '42622',
        message: `identifier "${long}" will be truncated to "${'é'.repeat(31)}"`,
      },
    ]);
    expect(parseStatement(`DROP TABLE ${'x'.repeat(63)}`)).toMatchObject({
      names: ['x'.repeat(63)],
    });
  });

  it('compares WHERE values beyond int4 as bigint; stores only int4 (integer out of range)', () => {
    expect(parseStatement('SELECT count(*) FROM t WHERE c > 9999999999999')).toEqual({
      type: 'select_count',
      name: 't',
      predicate: { op: '>', value: 2147483648 },
    });
    expect(parseStatement('DELETE FROM t WHERE c < -99999999999999999999999')).toMatchObject({
      predicate: { op: '<', value: -2147483649 },
    });
    expect(refusal('INSERT INTO t VALUES (2147483648)')).toEqual({
      sqlstate: '22003',
      message: 'integer out of range',
    });
  });

  it('answers SELECT n with ?column? as int4, int8 beyond', () => {
    expect(describeStatement(parseStatement('SELECT 1'))).toEqual([
      { name: '?column?', type: 'int4' },
    ]);
    expect(describeStatement(parseStatement('SELECT 99999999999'))).toEqual([
      { name: '?column?', type: 'int8' },
    ]);
  });

  it('resolves functions by argument types as PostgreSQL does (42883 with its HINT)', () => {
    const hint =
      'No function matches the given name and argument types. You might need to add explicit type casts.';
    expect(refusal('SELECT pg_promote(false, 99999999999)')).toEqual({
      sqlstate: '42883',
      message: 'function pg_promote(boolean, bigint) does not exist',
      hint,
    });
    expect(refusal('SELECT pg_is_in_recovery(1)').message).toBe(
      'function pg_is_in_recovery(integer) does not exist',
    );
    expect(refusal("SELECT current_setting('port', 1)").message).toBe(
      'function current_setting(unknown, integer) does not exist',
    );
    expect(describeStatement(parseStatement('SELECT pg_promote(true, 30)'))).toEqual([
      { name: 'pg_promote', type: 'bool' },
    ]);
  });

  it('takes one statement per request and says so', () => {
    expect(refusal('SHOW port; SHOW port').message).toMatch(
      /^walsim runs one statement per request/,
    );
  });

  it('keeps a parsed text: the same frozen statement; afresh with NOTICEs; errors each time', () => {
    const sql = 'SELECT count(*) FROM t WHERE c > 5';
    const a = parseStatement(sql);
    expect(a).toEqual({ type: 'select_count', name: 't', predicate: { op: '>', value: 5 } });
    expect(parseStatement(sql)).toBe(a); // a node parses every statement it runs; texts repeat
    expect(Object.isFrozen(a)).toBe(true);
    if (a.type !== 'select_count') throw new Error('select_count expected');
    expect(Object.isFrozen(a.predicate)).toBe(true);
    const values = parseStatement('INSERT INTO t VALUES (1), (2)');
    if (values.type !== 'insert_values') throw new Error('insert_values expected');
    expect(() => values.values.push(3)).toThrow(TypeError);
    // With a NOTICE list the lexer's notices must reach the caller: parsed afresh each time.
    const long = `SELECT count(*) FROM ${'x'.repeat(70)}`;
    const notices: Notice[] = [];
    expect(parseStatement(long, notices)).not.toBe(parseStatement(long, notices));
    expect(notices).toHaveLength(2);
    // A text that fails to parse fails again (nothing kept).
    expect(errorOf(() => parseStatement('SELEC 1')).sqlstate).toBe('42601');
    expect(errorOf(() => parseStatement('SELEC 1')).sqlstate).toBe('42601');
  });
});
