/**
 * synchronous_standby_names: PostgreSQL's grammar (syncrep_scanner.l + syncrep_gram.y) and its
 * check hook (check_synchronous_standby_names), with the same accepted inputs and error texts.
 *
 *   standby_config := standby_list                      -- FIRST 1 (standby_list)
 *                   | NUM '(' standby_list ')'          -- FIRST NUM, the pre-9.6 form
 *                   | FIRST NUM '(' standby_list ')'    -- priority method
 *                   | ANY NUM '(' standby_list ')'      -- quorum method
 *   standby_list   := standby_name (',' standby_name)*
 *   standby_name   := NAME | NUM        NAME: identifier, "quoted" ("" = "), or *
 *
 * The scanner and parser are written out (about 100 lines) instead of generated: the grammar is
 * four rules, and what matters is reproducing flex's longest-match tokens and bison's
 * "syntax error at or near" position exactly, which a generic parser package would not.
 */
import { WalsimError } from '../common/errors.ts';

export type SyncRepMethod = 'priority' | 'quorum';

/** SyncRepConfigData: how many standbys a commit waits for, chosen how, among which names. */
export interface SyncRepConfig {
  method: SyncRepMethod;
  numSync: number;
  /** Member names in list order, case kept (matching is case-insensitive); '*' matches any. */
  members: string[];
}

type TokenKind = 'NAME' | 'NUM' | 'ANY' | 'FIRST' | ',' | '(' | ')' | 'JUNK' | 'EOF';
interface Token {
  kind: TokenKind;
  value: string;
  text: string;
}

const SPACE = /[ \t\n\r\f\v]/;
const isIdentStart = (c: string) => /[A-Za-z_]/.test(c) || c.charCodeAt(0) >= 0x80;
const isIdentCont = (c: string) => isIdentStart(c) || /[0-9$]/.test(c);

class ParseFailure extends Error {}

/** syncrep_scanner.l: tokens on demand, like flex called by bison. */
class Scanner {
  private pos = 0;
  /** syncrep_yyerror keeps only the first error of a parse. */
  error: string | null = null;

  constructor(private readonly input: string) {}

  private fail(message: string, text: string): never {
    this.error ??= text === '' ? `${message} at end of input` : `${message} at or near "${text}"`;
    throw new ParseFailure(this.error);
  }

  syntaxError(tok: Token): never {
    return this.fail('syntax error', tok.text);
  }

  next(): Token {
    const s = this.input;
    while (this.pos < s.length && SPACE.test(s[this.pos]!)) this.pos++;
    if (this.pos >= s.length) return { kind: 'EOF', value: '', text: '' };
    const c = s[this.pos]!;
    if (c === '"') {
      let value = '';
      this.pos++;
      for (;;) {
        if (this.pos >= s.length) this.fail('unterminated quoted identifier', '');
        if (s[this.pos] === '"') {
          if (s[this.pos + 1] === '"') {
            value += '"';
            this.pos += 2;
            continue;
          }
          this.pos++;
          return { kind: 'NAME', value, text: '"' }; // yytext is the closing quote
        }
        value += s[this.pos++];
      }
    }
    if (isIdentStart(c)) {
      const start = this.pos;
      while (this.pos < s.length && isIdentCont(s[this.pos]!)) this.pos++;
      const text = s.slice(start, this.pos);
      // Keyword rules come first in the scanner: on an equal-length match they win.
      const upper = text.toUpperCase();
      if (upper === 'ANY' || upper === 'FIRST') return { kind: upper, value: text, text };
      return { kind: 'NAME', value: text, text };
    }
    if (/[0-9]/.test(c)) {
      const start = this.pos;
      while (this.pos < s.length && /[0-9]/.test(s[this.pos]!)) this.pos++;
      const text = s.slice(start, this.pos);
      return { kind: 'NUM', value: text, text };
    }
    this.pos++;
    if (c === '*') return { kind: 'NAME', value: '*', text: c };
    if (c === ',' || c === '(' || c === ')') return { kind: c, value: c, text: c };
    return { kind: 'JUNK', value: c, text: c };
  }
}

/** atoi() as glibc does it: strtol (clamped to the long range), then truncated to a 32-bit int. */
function atoi(digits: string): number {
  const LONG_MAX = (1n << 63n) - 1n;
  let v = BigInt(digits);
  if (v > LONG_MAX) v = LONG_MAX;
  return Number(BigInt.asIntN(32, v));
}

/** Parse a standby_list; `first` is its first token. Returns the names and the token after the list. */
function parseList(sc: Scanner, first: Token): { names: string[]; after: Token } {
  const names: string[] = [];
  let tok = first;
  for (;;) {
    if (tok.kind !== 'NAME' && tok.kind !== 'NUM') sc.syntaxError(tok);
    names.push(tok.value);
    tok = sc.next();
    if (tok.kind !== ',') return { names, after: tok };
    tok = sc.next();
  }
}

function parseConfig(sc: Scanner): { method: SyncRepMethod; num: string; names: string[] } {
  const t = sc.next();
  const parenthesised = (method: SyncRepMethod, num: string) => {
    const open = sc.next();
    if (open.kind !== '(') sc.syntaxError(open);
    const { names, after } = parseList(sc, sc.next());
    if (after.kind !== ')') sc.syntaxError(after);
    const end = sc.next();
    if (end.kind !== 'EOF') sc.syntaxError(end);
    return { method, num, names };
  };
  if (t.kind === 'ANY' || t.kind === 'FIRST') {
    const num = sc.next();
    if (num.kind !== 'NUM') sc.syntaxError(num);
    return parenthesised(t.kind === 'ANY' ? 'quorum' : 'priority', num.value);
  }
  if (t.kind === 'NUM') {
    const t2 = sc.next();
    if (t2.kind === '(') {
      const { names, after } = parseList(sc, sc.next());
      if (after.kind !== ')') sc.syntaxError(after);
      const end = sc.next();
      if (end.kind !== 'EOF') sc.syntaxError(end);
      return { method: 'priority', num: t.value, names };
    }
    // The number was a standby name: continue the list after it.
    const names = [t.value];
    let tok = t2;
    while (tok.kind === ',') {
      const more = parseList(sc, sc.next());
      names.push(...more.names);
      tok = more.after;
    }
    if (tok.kind !== 'EOF') sc.syntaxError(tok);
    return { method: 'priority', num: '1', names };
  }
  const { names, after } = parseList(sc, t);
  if (after.kind !== 'EOF') sc.syntaxError(after);
  return { method: 'priority', num: '1', names };
}

/**
 * check_synchronous_standby_names + the parse: null for '' (synchronous replication off),
 * otherwise the configuration. Errors are PostgreSQL's: 42601 `invalid value for parameter
 * "synchronous_standby_names": "…"` with the scanner's detail, or 22023 for a count below one.
 */
export function parseSynchronousStandbyNames(text: string): SyncRepConfig | null {
  if (text === '') return null;
  const sc = new Scanner(text);
  let parsed: { method: SyncRepMethod; num: string; names: string[] };
  try {
    parsed = parseConfig(sc);
  } catch (e) {
    if (!(e instanceof ParseFailure)) throw e;
    throw new WalsimError(
      'syntax_error',
      `invalid value for parameter "synchronous_standby_names": "${text}"`,
      '42601',
      sc.error ?? 'synchronous_standby_names parser failed',
    );
  }
  const numSync = atoi(parsed.num);
  if (numSync <= 0) {
    throw new WalsimError(
      'invalid_input',
      `number of synchronous standbys (${numSync}) must be greater than zero`,
      '22023',
    );
  }
  return { method: parsed.method, numSync, members: parsed.names };
}

/** The configuration written back in canonical form (for logs and status). */
export function formatSyncRepConfig(c: SyncRepConfig): string {
  const quote = (n: string) =>
    n === '*' ||
    (/^[A-Za-z_\x80-\uffff][A-Za-z_0-9$\x80-\uffff]*$/.test(n) && !/^(any|first)$/i.test(n))
      ? n
      : `"${n.replace(/"/g, '""')}"`;
  return `${c.method === 'priority' ? 'FIRST' : 'ANY'} ${c.numSync} (${c.members.map(quote).join(', ')})`;
}
