/**
 * The lexer of walsim's SQL subset, after PostgreSQL's scan.l: whitespace, `--` and nested
 * `/* … *\/` comments, words (unquoted identifiers and keywords, ASCII letters folded to lower
 * case as downcase_identifier does), "quoted" identifiers (`""` is one quote), 'strings' (`''` is
 * one quote), integer literals and the punctuation the grammar uses. Identifiers longer than
 * NAMEDATALEN-1 bytes are truncated at a character boundary with PostgreSQL's NOTICE
 * (scansup.c truncate_identifier).
 *
 * `splitStatements` cuts a query string at the semicolons this lexer would see at top level.
 */
import { WalsimError } from '../common/errors.ts';
import type { Notice } from '../protocol/messages.ts';

export type Token = {
  kind: 'word' | 'ident' | 'number' | 'string' | 'punct';
  text: string;
  pos: number;
};

/** NAMEDATALEN: identifiers keep at most 63 bytes. */
const NAMEDATALEN = 64;

export function syntaxError(message: string): WalsimError {
  return new WalsimError('syntax_error', message, '42601');
}

export function notSupported(message: string): WalsimError {
  return new WalsimError('invalid_input', message, '0A000');
}

/** The index just past the comment starting at `i` (`/*`): comments nest, as in PostgreSQL. */
function endOfBlockComment(sql: string, i: number): number {
  let depth = 0;
  for (let j = i; j < sql.length - 1; j++) {
    if (sql[j] === '/' && sql[j + 1] === '*') {
      depth++;
      j++;
    } else if (sql[j] === '*' && sql[j + 1] === '/') {
      depth--;
      j++;
      if (depth === 0) return j + 1;
    }
  }
  throw syntaxError('unterminated /* comment at or near "/*"');
}

/** The end of the quoted text starting at `i` (quote `q`); a doubled quote is part of the text. */
function endOfQuoted(sql: string, i: number, q: string): number {
  let j = i + 1;
  for (;;) {
    const k = sql.indexOf(q, j);
    if (k < 0) return -1;
    if (sql[k + 1] !== q) return k + 1;
    j = k + 2;
  }
}

/** truncate_identifier: at most NAMEDATALEN-1 bytes, cut at a character boundary, with a NOTICE. */
function truncateIdentifier(text: string, notices: Notice[] | undefined): string {
  if (Buffer.byteLength(text) < NAMEDATALEN) return text;
  let bytes = 0;
  let end = 0;
  for (const ch of text) {
    const n = Buffer.byteLength(ch);
    if (bytes + n > NAMEDATALEN - 1) break;
    bytes += n;
    end += ch.length;
  }
  const cut = text.slice(0, end);
  notices?.push({
    severity: 'NOTICE',
    code: '42622',
    message: `identifier "${text}" will be truncated to "${cut}"`,
  });
  return cut;
}

const PUNCTUATION = '(),;*<>=.+-/~!@#%^&|`?:[]';
const WORD_START = /[A-Za-z_\u0080-\uffff]/;
const WORD_PART = /[A-Za-z0-9_$\u0080-\uffff]/;
const NON_ASCII = /[^\x00-\x7f]/;

/** The tokens of `sql`; NOTICEs (identifier truncation) are appended to `notices`. */
export function tokenize(sql: string, notices?: Notice[]): Token[] {
  const tokens: Token[] = [];
  let i = 0;
  while (i < sql.length) {
    const c = sql[i]!;
    const next = sql[i + 1] ?? '';
    if (/\s/.test(c)) i++;
    else if (c === '-' && next === '-') {
      while (i < sql.length && sql[i] !== '\n') i++;
    } else if (c === '/' && next === '*') i = endOfBlockComment(sql, i);
    else if (WORD_START.test(c)) {
      let j = i + 1;
      while (j < sql.length && WORD_PART.test(sql[j]!)) j++;
      // downcase_identifier folds ASCII only (toLowerCase would fold any letter): for an ASCII
      // word, which nearly every one is, the two are the same and toLowerCase is cheap.
      const raw = sql.slice(i, j);
      const text = NON_ASCII.test(raw)
        ? raw.replace(/[A-Z]/g, (x) => x.toLowerCase())
        : raw.toLowerCase();
      tokens.push({ kind: 'word', text: truncateIdentifier(text, notices), pos: i });
      i = j;
    } else if (c === '"' || c === "'") i = quoted(sql, i, tokens, notices);
    else if (/[0-9]/.test(c) || (c === '-' && /[0-9]/.test(next))) i = numberToken(sql, i, tokens);
    else if (c === '$' && /[0-9]/.test(next)) {
      const n = /^\$[0-9]+/.exec(sql.slice(i))![0];
      throw notSupported(
        `parameters (${n}) are not supported by walsim: its statements take none (Bind must supply 0); write the value into the statement`,
      );
    } else if (c === '\\') {
      const cmd = /^\\[A-Za-z+]*/.exec(sql.slice(i))![0];
      throw notSupported(
        `"${cmd}" is a psql meta-command, not SQL; walsim has no system catalogs, so psql's catalog commands (\\d, \\l, \\dt) do not work either`,
      );
    } else if (PUNCTUATION.includes(c)) {
      // The grammar's own punctuation, and PostgreSQL's operator characters (the parser refuses
      // them where walsim's grammar has none, naming the statement form).
      tokens.push({ kind: 'punct', text: c, pos: i });
      i++;
    } else throw syntaxError(`syntax error at or near "${c}"`);
  }
  return tokens;
}

/** A "quoted identifier" or 'string' at `i`; returns the index after it. */
function quoted(sql: string, i: number, tokens: Token[], notices: Notice[] | undefined): number {
  const q = sql[i]!;
  const end = endOfQuoted(sql, i, q);
  const what = q === '"' ? 'quoted identifier' : 'quoted string';
  if (end < 0) throw syntaxError(`unterminated ${what} at or near "${sql.slice(i)}"`);
  const text = sql.slice(i + 1, end - 1).replaceAll(q + q, q);
  if (q === "'") tokens.push({ kind: 'string', text, pos: i });
  else {
    if (text === '') throw syntaxError('zero-length delimited identifier at or near """"');
    tokens.push({ kind: 'ident', text: truncateIdentifier(text, notices), pos: i });
  }
  return end;
}

/** An integer literal (optionally negative) at `i`; returns the index after it. */
function numberToken(sql: string, i: number, tokens: Token[]): number {
  let j = i + 1;
  while (j < sql.length && /[0-9]/.test(sql[j]!)) j++;
  if (sql[j] === '.' || sql[j] === 'e' || sql[j] === 'E')
    throw notSupported(
      `non-integer literals are not supported by walsim, at or near "${sql.slice(i, j + 2)}"`,
    );
  tokens.push({ kind: 'number', text: sql.slice(i, j), pos: i });
  return j;
}

/**
 * Split a query string into its statements at semicolons outside quotes and comments; statements
 * that are empty or hold only whitespace and comments are dropped (PostgreSQL ignores them). An
 * unterminated quote or comment is left in the last piece, where the lexer reports it.
 */
export function splitStatements(sql: string): string[] {
  const out: string[] = [];
  let start = 0;
  let i = 0;
  let content = false; // the piece has a character outside comments and whitespace
  const push = (end: number) => {
    if (content) out.push(sql.slice(start, end));
    content = false;
  };
  while (i < sql.length) {
    const c = sql[i]!;
    if (c === "'" || c === '"') {
      const end = endOfQuoted(sql, i, c);
      i = end < 0 ? sql.length : end;
      content = true;
    } else if (c === '-' && sql[i + 1] === '-') {
      const j = sql.indexOf('\n', i);
      i = j < 0 ? sql.length : j + 1;
    } else if (c === '/' && sql[i + 1] === '*') {
      try {
        i = endOfBlockComment(sql, i);
      } catch {
        i = sql.length;
        content = true;
      }
    } else if (c === ';') {
      push(i);
      start = ++i;
    } else {
      if (!/\s/.test(c)) content = true;
      i++;
    }
  }
  push(sql.length);
  return out;
}
