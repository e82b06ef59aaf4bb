/**
 * Parser for walsim's SQL subset. Both roles parse with it: the primary executes writes, a standby
 * answers reads and refuses writes. Errors are PostgreSQL-style (SQLSTATE 42601 for syntax).
 *
 * Grammar (case-insensitive keywords, optional trailing semicolon, unquoted identifiers fold to
 * lower case, "quoted" identifiers keep their case):
 *   CREATE TABLE name (col int [, col2 text|bytea]) | DROP TABLE [IF EXISTS] name
 *   INSERT INTO name SELECT generate_series(a, b) | INSERT INTO name VALUES (n), (n), ...
 *   DELETE FROM name [WHERE col < n | col > n | col = n]
 *   VACUUM [name] | TRUNCATE [TABLE] name [, ...] | CHECKPOINT
 *   SELECT count(*) FROM name [WHERE ...] | SELECT [pg_catalog.]fn([args]) | SHOW setting
 *   SELECT * | col [, ...] FROM [pg_catalog.]pg_stat_replication|pg_stat_wal_receiver [ORDER BY col]
 *   ALTER SYSTEM SET setting { = | TO } { 'value' | word | n | DEFAULT } | ALTER SYSTEM RESET setting
 *
 * `splitStatements` cuts a simple-protocol query string into statements at top-level semicolons
 * (as PostgreSQL's raw parser does for a Query message holding several statements).
 */
import { WalsimError } from '../common/errors.ts';

/**
 * Types of the optional second column: variable-length types PostgreSQL can TOAST, so the table
 * gets a TOAST table and index. walsim stores no values in it (inserts fill the int column; the
 * second is NULL), so the TOAST table is created and never written.
 */
export const TOASTABLE_TYPES: readonly string[] = ['text', 'bytea'];

export type { DeletePredicate, Statement } from '../protocol/sql-ast.ts';
import type { DeletePredicate, Statement } from '../protocol/sql-ast.ts';

/** Statements that write and so are refused on a node in recovery, with their command tag. */
export function writeCommandName(stmt: Statement): string | null {
  switch (stmt.type) {
    case 'create_table':
      return 'CREATE TABLE';
    case 'drop_table':
      return 'DROP TABLE';
    case 'insert_series':
    case 'insert_values':
      return 'INSERT';
    case 'delete':
      return 'DELETE';
    case 'vacuum':
      return 'VACUUM';
    case 'truncate':
      return 'TRUNCATE TABLE';
    default:
      return null;
  }
}

const INT4_MIN = -2147483648;
const INT4_MAX = 2147483647;
const NAMEDATALEN = 64;

type Token = { kind: 'word' | 'ident' | 'number' | 'string' | 'punct'; text: string; pos: number };

function syntaxError(message: string): WalsimError {
  return new WalsimError('syntax_error', message, '42601');
}

function tokenize(sql: string): Token[] {
  const tokens: Token[] = [];
  let i = 0;
  while (i < sql.length) {
    const c = sql[i]!;
    if (/\s/.test(c)) {
      i++;
      continue;
    }
    if (c === '-' && sql[i + 1] === '-') {
      while (i < sql.length && sql[i] !== '\n') i++;
      continue;
    }
    if (/[A-Za-z_]/.test(c)) {
      let j = i + 1;
      while (j < sql.length && /[A-Za-z0-9_$]/.test(sql[j]!)) j++;
      tokens.push({ kind: 'word', text: sql.slice(i, j).toLowerCase(), pos: i });
      i = j;
      continue;
    }
    if (c === '"') {
      const j = sql.indexOf('"', i + 1);
      if (j < 0) throw syntaxError(`unterminated quoted identifier at or near "${sql.slice(i)}"`);
      if (j === i + 1) throw syntaxError('zero-length delimited identifier at or near """"');
      tokens.push({ kind: 'ident', text: sql.slice(i + 1, j), pos: i });
      i = j + 1;
      continue;
    }
    if (c === "'") {
      // Standard strings: '' inside is one quote.
      let j = i + 1;
      let text = '';
      for (;;) {
        const k = sql.indexOf("'", j);
        if (k < 0) throw syntaxError(`unterminated quoted string at or near "${sql.slice(i)}"`);
        text += sql.slice(j, k);
        if (sql[k + 1] === "'") {
          text += "'";
          j = k + 2;
          continue;
        }
        j = k + 1;
        break;
      }
      tokens.push({ kind: 'string', text, pos: i });
      i = j;
      continue;
    }
    if (/[0-9]/.test(c) || (c === '-' && /[0-9]/.test(sql[i + 1] ?? ''))) {
      let j = i + 1;
      while (j < sql.length && /[0-9]/.test(sql[j]!)) j++;
      if (sql[j] === '.')
        throw syntaxError(
          `walsim supports integer literals only, at or near "${sql.slice(i, j + 2)}"`,
        );
      tokens.push({ kind: 'number', text: sql.slice(i, j), pos: i });
      i = j;
      continue;
    }
    if ('(),;*<>=.'.includes(c)) {
      tokens.push({ kind: 'punct', text: c, pos: i });
      i++;
      continue;
    }
    throw syntaxError(`syntax error at or near "${c}"`);
  }
  return tokens;
}

class Parser {
  private i = 0;
  constructor(private readonly tokens: Token[]) {}

  peek(): Token | undefined {
    return this.tokens[this.i];
  }
  atEnd(): boolean {
    return this.i >= this.tokens.length;
  }

  near(): string {
    const t = this.peek();
    return t ? `at or near "${t.text}"` : 'at end of input';
  }

  next(): Token {
    const t = this.tokens[this.i];
    if (!t) throw syntaxError('syntax error at end of input');
    this.i++;
    return t;
  }

  isWord(w: string): boolean {
    const t = this.peek();
    return t !== undefined && t.kind === 'word' && t.text === w;
  }

  word(w: string): void {
    if (!this.isWord(w))
      throw syntaxError(`syntax error ${this.near()} (expected ${w.toUpperCase()})`);
    this.i++;
  }

  punct(p: string): void {
    const t = this.peek();
    if (!t || t.kind !== 'punct' || t.text !== p)
      throw syntaxError(`syntax error ${this.near()} (expected "${p}")`);
    this.i++;
  }

  isPunct(p: string): boolean {
    const t = this.peek();
    return t !== undefined && t.kind === 'punct' && t.text === p;
  }

  identifier(what: string): string {
    const t = this.peek();
    if (!t || (t.kind !== 'word' && t.kind !== 'ident'))
      throw syntaxError(`syntax error ${this.near()} (expected ${what})`);
    this.i++;
    if (t.text.length >= NAMEDATALEN) {
      throw new WalsimError(
        'invalid_input',
        `identifier "${t.text}" is longer than ${NAMEDATALEN - 1} characters`,
        '42622',
      );
    }
    return t.text;
  }

  int4(): number {
    const t = this.next();
    if (t.kind !== 'number')
      throw syntaxError(`syntax error at or near "${t.text}" (expected an integer)`);
    const n = Number(t.text);
    if (!Number.isInteger(n) || n < INT4_MIN || n > INT4_MAX) {
      throw new WalsimError(
        'invalid_input',
        `value "${t.text}" is out of range for type integer`,
        '22003',
      );
    }
    return n;
  }

  end(): void {
    if (this.isPunct(';')) this.i++;
    if (!this.atEnd()) throw syntaxError(`syntax error ${this.near()}`);
  }
}

export function parseStatement(sql: string): Statement {
  if (typeof sql !== 'string') throw new WalsimError('invalid_input', 'statement must be a string');
  const p = new Parser(tokenize(sql));
  if (p.atEnd()) throw syntaxError('empty statement');
  const head = p.next();
  if (head.kind !== 'word') throw syntaxError(`syntax error at or near "${head.text}"`);
  let stmt: Statement;
  switch (head.text) {
    case 'create': {
      p.word('table');
      const name = p.identifier('a table name');
      p.punct('(');
      const column = p.identifier('a column name');
      const type = p.identifier('a column type');
      if (type !== 'int' && type !== 'integer' && type !== 'int4') {
        throw new WalsimError(
          'invalid_input',
          `walsim tables have one int column; type "${type}" is not supported`,
          '0A000',
        );
      }
      let toastColumn: string | null = null;
      if (p.isPunct(',')) {
        p.punct(',');
        toastColumn = p.identifier('a column name');
        const type2 = p.identifier('a column type');
        if (!TOASTABLE_TYPES.includes(type2)) {
          throw new WalsimError(
            'invalid_input',
            `walsim tables have an int column and optionally one TOAST-able column (${TOASTABLE_TYPES.join(', ')}); type "${type2}" is not supported`,
            '0A000',
          );
        }
        if (toastColumn === column)
          throw new WalsimError(
            'invalid_input',
            `column "${column}" specified more than once`,
            '42701',
          );
      }
      p.punct(')');
      stmt = { type: 'create_table', name, column, toastColumn };
      break;
    }
    case 'drop': {
      p.word('table');
      let ifExists = false;
      if (p.isWord('if')) {
        p.word('if');
        p.word('exists');
        ifExists = true;
      }
      stmt = { type: 'drop_table', name: p.identifier('a table name'), ifExists };
      break;
    }
    case 'insert': {
      p.word('into');
      const name = p.identifier('a table name');
      if (p.isWord('select')) {
        p.word('select');
        p.word('generate_series');
        p.punct('(');
        const from = p.int4();
        p.punct(',');
        const to = p.int4();
        p.punct(')');
        stmt = { type: 'insert_series', name, from, to };
      } else {
        p.word('values');
        const values: number[] = [];
        do {
          p.punct('(');
          values.push(p.int4());
          p.punct(')');
        } while (p.isPunct(',') && (p.next(), true));
        stmt = { type: 'insert_values', name, values };
      }
      break;
    }
    case 'delete': {
      p.word('from');
      const name = p.identifier('a table name');
      stmt = { type: 'delete', name, predicate: parseWhere(p) };
      break;
    }
    case 'vacuum': {
      const name = p.atEnd() || p.isPunct(';') ? null : p.identifier('a table name');
      stmt = { type: 'vacuum', name };
      break;
    }
    case 'truncate': {
      if (p.isWord('table')) p.word('table');
      const names = [p.identifier('a table name')];
      while (p.isPunct(',')) {
        p.next();
        names.push(p.identifier('a table name'));
      }
      stmt = { type: 'truncate', names };
      break;
    }
    case 'checkpoint':
      stmt = { type: 'checkpoint' };
      break;
    case 'show':
      stmt = { type: 'show', name: p.identifier('a setting name') };
      break;
    case 'select':
      stmt = parseSelect(p);
      break;
    case 'alter': {
      p.word('system');
      if (p.isWord('reset')) {
        p.word('reset');
        stmt = { type: 'alter_system', name: p.identifier('a setting name'), value: null };
        break;
      }
      p.word('set');
      const name = p.identifier('a setting name');
      if (p.isWord('to')) p.word('to');
      else p.punct('=');
      const v = p.next();
      if (v.kind === 'word' && v.text === 'default')
        stmt = { type: 'alter_system', name, value: null };
      else if (
        v.kind === 'string' ||
        v.kind === 'number' ||
        v.kind === 'word' ||
        v.kind === 'ident'
      )
        stmt = { type: 'alter_system', name, value: v.text };
      else throw syntaxError(`syntax error at or near "${v.text}"`);
      break;
    }
    default:
      throw syntaxError(`syntax error at or near "${head.text}"`);
  }
  p.end();
  return stmt;
}

/** [WHERE col < n | col > n | col = n] */
function parseWhere(p: Parser): DeletePredicate {
  if (!p.isWord('where')) return { op: 'all' };
  p.word('where');
  p.identifier('a column name');
  const op = p.next();
  if (op.kind !== 'punct' || !['<', '>', '='].includes(op.text)) {
    throw syntaxError(
      `syntax error at or near "${op.text}" (walsim supports col < n, col > n, col = n)`,
    );
  }
  return { op: op.text as '<' | '>' | '=', value: p.int4() };
}

/** SELECT * | col [, col ...] FROM view [ORDER BY col] */
function parseSelectView(p: Parser, first: string | '*'): Statement {
  let columns: string[] | '*' = '*';
  if (first !== '*') {
    columns = [first];
    while (p.isPunct(',')) {
      p.next();
      columns.push(p.identifier('a column name'));
    }
  }
  p.word('from');
  let view = p.identifier('a relation name');
  if (view === 'pg_catalog' && p.isPunct('.')) {
    p.next();
    view = p.identifier('a relation name');
  }
  let orderBy: string | null = null;
  if (p.isWord('order')) {
    p.word('order');
    p.word('by');
    orderBy = p.identifier('a column name');
  }
  return { type: 'select_view', view, columns, orderBy };
}

function parseSelect(p: Parser): Statement {
  if (p.isPunct('*')) {
    p.next();
    return parseSelectView(p, '*');
  }
  let fn = p.identifier('a function name, a column or count(*)');
  if (fn === 'pg_catalog' && p.isPunct('.')) {
    // Clients qualify built-ins (libpq: SELECT pg_catalog.pg_is_in_recovery()).
    p.next();
    fn = p.identifier('a function name');
  }
  if (!p.isPunct('(')) return parseSelectView(p, fn);
  p.punct('(');
  if (fn === 'count') {
    p.punct('*');
    p.punct(')');
    p.word('from');
    const name = p.identifier('a table name');
    return { type: 'select_count', name, predicate: parseWhere(p) };
  }
  const args: Array<number | boolean | string> = [];
  if (!p.isPunct(')')) {
    do {
      const t = p.next();
      if (t.kind === 'number') args.push(Number(t.text));
      else if (t.kind === 'string') args.push(t.text);
      else if (t.kind === 'word' && (t.text === 'true' || t.text === 'false'))
        args.push(t.text === 'true');
      else throw syntaxError(`syntax error at or near "${t.text}"`);
    } while (p.isPunct(',') && (p.next(), true));
  }
  p.punct(')');
  return { type: 'select_function', fn, args };
}

/**
 * Split a query string into its statements at semicolons outside quotes and comments; statements
 * that are empty or hold only whitespace and comments are dropped (PostgreSQL ignores them). An
 * unterminated quote is left in the last piece, where the parser reports it.
 */
export function splitStatements(sql: string): string[] {
  const out: string[] = [];
  let start = 0;
  let i = 0;
  const push = (end: number) => {
    const piece = sql.slice(start, end);
    if (piece.replace(/--[^\n]*/g, '').trim() !== '') out.push(piece);
  };
  while (i < sql.length) {
    const c = sql[i]!;
    if (c === "'" || c === '"') {
      const j = sql.indexOf(c, i + 1);
      i = j < 0 ? sql.length : j + 1;
    } else if (c === '-' && sql[i + 1] === '-') {
      const j = sql.indexOf('\n', i);
      i = j < 0 ? sql.length : j + 1;
    } else if (c === ';') {
      push(i);
      start = ++i;
    } else {
      i++;
    }
  }
  push(sql.length);
  return out;
}
