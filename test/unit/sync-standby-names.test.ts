/**
 * synchronous_standby_names is parsed with PostgreSQL's grammar and refused with its errors.
 * Method: the accepted forms and their configurations; each refused input with the exact
 * SQLSTATE, message and DETAIL that PostgreSQL 15's ALTER SYSTEM SET gives (checked against a
 * real server).
 */
import { describe, expect, it } from 'vitest';
import {
  formatSyncRepConfig,
  parseSynchronousStandbyNames,
} from '../../primary/sync-standby-names.ts';
import { WalsimError } from '../../common/errors.ts';

function refusal(text: string): { sqlstate: string; message: string; detail: string | undefined } {
  try {
    parseSynchronousStandbyNames(text);
  } catch (e) {
    expect(e).toBeInstanceOf(WalsimError);
    const w = e as WalsimError;
    return { sqlstate: w.sqlstate, message: w.message, detail: w.detail };
  }
  throw new Error(`"${text}" was accepted`);
}

describe('synchronous_standby_names: accepted forms', () => {
  it("'' turns synchronous replication off", () => {
    expect(parseSynchronousStandbyNames('')).toBeNull();
  });

  it('a plain list is FIRST 1 over the list, names kept as written', () => {
    expect(parseSynchronousStandbyNames('s1,s2')).toEqual({
      method: 'priority',
      numSync: 1,
      members: ['s1', 's2'],
    });
    expect(parseSynchronousStandbyNames('  S1 ,\ts2\n')).toEqual({
      method: 'priority',
      numSync: 1,
      members: ['S1', 's2'],
    });
    expect(parseSynchronousStandbyNames('*')).toEqual({
      method: 'priority',
      numSync: 1,
      members: ['*'],
    });
    expect(parseSynchronousStandbyNames('a, *')).toEqual({
      method: 'priority',
      numSync: 1,
      members: ['a', '*'],
    });
  });

  it('FIRST n (…), n (…) and ANY n (…); keywords in any case; no space needed before (', () => {
    expect(parseSynchronousStandbyNames('FIRST 2(s1,s2,s3)')).toEqual({
      method: 'priority',
      numSync: 2,
      members: ['s1', 's2', 's3'],
    });
    expect(parseSynchronousStandbyNames('first 1 (a)')).toEqual({
      method: 'priority',
      numSync: 1,
      members: ['a'],
    });
    expect(parseSynchronousStandbyNames('2 (a,b)')).toEqual({
      method: 'priority',
      numSync: 2,
      members: ['a', 'b'],
    });
    expect(parseSynchronousStandbyNames('ANY 2(s1,s2)')).toEqual({
      method: 'quorum',
      numSync: 2,
      members: ['s1', 's2'],
    });
    expect(parseSynchronousStandbyNames('aNy 3 (a, b, c, d)')).toEqual({
      method: 'quorum',
      numSync: 3,
      members: ['a', 'b', 'c', 'd'],
    });
  });

  it('numbers and quoted identifiers are names; "" inside quotes is one quote; keywords need quotes', () => {
    expect(parseSynchronousStandbyNames('1')).toEqual({
      method: 'priority',
      numSync: 1,
      members: ['1'],
    });
    expect(parseSynchronousStandbyNames('3, 4')).toEqual({
      method: 'priority',
      numSync: 1,
      members: ['3', '4'],
    });
    expect(parseSynchronousStandbyNames('a, "b""c"')).toEqual({
      method: 'priority',
      numSync: 1,
      members: ['a', 'b"c'],
    });
    expect(parseSynchronousStandbyNames('ANY 1 ("first", "any", "x y")')!.members).toEqual([
      'first',
      'any',
      'x y',
    ]);
    expect(parseSynchronousStandbyNames(' "" ')!.members).toEqual(['']);
    expect(parseSynchronousStandbyNames('FIRST1, anyone, a$b, _x, é')!.members).toEqual([
      'FIRST1',
      'anyone',
      'a$b',
      '_x',
      'é',
    ]);
  });

  it('a count beyond int is what atoi makes of it', () => {
    expect(parseSynchronousStandbyNames('FIRST 99999999999 (a)')!.numSync).toBe(1215752191);
  });

  it('formats the configuration back in canonical form', () => {
    expect(formatSyncRepConfig(parseSynchronousStandbyNames('s1, s2')!)).toBe('FIRST 1 (s1, s2)');
    expect(formatSyncRepConfig(parseSynchronousStandbyNames('ANY 2 (*, "x y", "any")')!)).toBe(
      'ANY 2 (*, "x y", "any")',
    );
  });
});

describe("synchronous_standby_names: refused with PostgreSQL 15's errors", () => {
  const syntax = (text: string, detail: string) => {
    expect(refusal(text)).toEqual({
      sqlstate: '42601',
      message: `invalid value for parameter "synchronous_standby_names": "${text}"`,
      detail,
    });
  };

  it('syntax errors name the token where parsing failed, or the end of input', () => {
    syntax('FIRST 2', 'syntax error at end of input');
    syntax('a b', 'syntax error at or near "b"');
    syntax('(a)', 'syntax error at or near "("');
    syntax('a,', 'syntax error at end of input');
    syntax(',', 'syntax error at or near ","');
    syntax('first', 'syntax error at end of input');
    syntax('any', 'syntax error at end of input');
    syntax('FIRST 1 (a) x', 'syntax error at or near "x"');
    syntax('a-b', 'syntax error at or near "-"');
    syntax('ANY 2 (a, b', 'syntax error at end of input');
    syntax('ANY -1 (a)', 'syntax error at or near "-"');
    syntax('$a', 'syntax error at or near "$"');
    syntax('ANY 1 (a) , b', 'syntax error at or near ","');
    syntax("ANY 1 ('a')", 'syntax error at or near "\'"');
    syntax('FIRST 1 ()', 'syntax error at or near ")"');
    syntax('FIRST1(a)', 'syntax error at or near "("');
    syntax('first 1(any)', 'syntax error at or near "any"');
    syntax('   ', 'syntax error at end of input');
    syntax('1, 2 (a)', 'syntax error at or near "("');
  });

  it('an unterminated quoted identifier is reported by the scanner', () => {
    syntax('"unterm', 'unterminated quoted identifier at end of input');
    syntax('a, "un', 'unterminated quoted identifier at end of input');
    // A syntax error before the quote is reached wins (only the first error is kept).
    syntax('a b "c', 'syntax error at or near "b"');
  });

  it('a count below one is 22023 with its own message', () => {
    for (const [text, n] of [
      ['FIRST 0 (a)', 0],
      ['ANY 0 (a)', 0],
      ['0 (a)', 0],
      ['FIRST 99999999999999999999 (a)', -1],
    ] as const) {
      expect(refusal(text)).toEqual({
        sqlstate: '22023',
        message: `number of synchronous standbys (${n}) must be greater than zero`,
        detail: undefined,
      });
    }
  });
});
