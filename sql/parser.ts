/**
 * Parser for walsim's SQL subset. Both roles parse with it: the primary executes writes, a standby
 * answers reads and refuses writes. Errors are PostgreSQL-style: 42601 for syntax, 0A000 "… is not
 * supported by walsim" for PostgreSQL statements and forms walsim does not have.
 *
 * Grammar (case-insensitive keywords, optional trailing semicolon; the lexer folds unquoted
 * identifiers to lower case, "quoted" identifiers keep their case):
 *   CREATE TABLE name (col int [, col2 text|bytea]) | DROP TABLE [IF EXISTS] name [, ...]
 *   INSERT INTO name SELECT generate_series(a, b) | INSERT INTO name VALUES (n), (n), ...
 *   DELETE FROM name [WHERE col < n | col > n | col = n]
 *   VACUUM [name] | TRUNCATE [TABLE] name [, ...] | CHECKPOINT
 *   SELECT count(*) FROM name [WHERE ...] | SELECT [pg_catalog.]fn([args]) | SELECT n | SHOW setting
 *   SELECT * | col [, ...] FROM [pg_catalog.]pg_stat_replication|pg_stat_wal_receiver [ORDER BY col]
 *   ALTER SYSTEM SET setting { = | TO } { 'value' | word | n | DEFAULT } | ALTER SYSTEM RESET setting
 */
import { BoundedMemo } from '../common/bounded-memo.ts';
import { WalsimError } from '../common/errors.ts';
import type { Notice } from '../protocol/messages.ts';
import { notSupported, syntaxError, tokenize, type Token } from './lexer.ts';

export { splitStatements } from './lexer.ts';

/**
 * Types of the optional second column: variable-length types PostgreSQL can TOAST, so the table
 * gets a TOAST table and index. walsim stores no values in it (inserts fill the int column; the
 * second is NULL), so the TOAST table is created and never written.
 */
export const TOASTABLE_TYPES: readonly string[] = ['text', 'bytea'];

export type { DeletePredicate, Statement } from './ast.ts';
import type { DeletePredicate, Statement } from './ast.ts';

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
const INT_TYPES = ['int', 'integer', 'int4'];

/** A cursor over the tokens of one statement. */
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
    if (!this.isPunct(p)) throw syntaxError(`syntax error ${this.near()} (expected "${p}")`);
    this.i++;
  }

  isPunct(p: string): boolean {
    const t = this.peek();
    return t !== undefined && t.kind === 'punct' && t.text === p;
  }

  /** Consume `p` if it is next. */
  optPunct(p: string): boolean {
    if (!this.isPunct(p)) return false;
    this.i++;
    return true;
  }

  identifier(what: string): string {
    const t = this.peek();
    if (!t || (t.kind !== 'word' && t.kind !== 'ident'))
      throw syntaxError(`syntax error ${this.near()} (expected ${what})`);
    this.i++;
    return t.text;
  }

  /** An integer literal as a JS number (exact up to 2^53; larger ones only compare). */
  integer(): number {
    const t = this.next();
    if (t.kind !== 'number')
      throw syntaxError(`syntax error at or near "${t.text}" (expected an integer)`);
    return Number(t.text);
  }

  /** An integer stored in an int column: beyond int4, PostgreSQL's int84 cast fails. */
  int4(): number {
    const n = this.integer();
    if (n < INT4_MIN || n > INT4_MAX)
      throw new WalsimError('invalid_input', 'integer out of range', '22003');
    return n;
  }

  /** Whether any token of the statement matches `re`. */
  mentions(re: RegExp): boolean {
    return this.tokens.some((t) => re.test(t.text));
  }

  end(): void {
    if (this.isPunct(';')) this.i++;
    if (this.atEnd()) return;
    if (this.tokens.slice(this.i - 1).some((t) => t.kind === 'punct' && t.text === ';'))
      throw syntaxError(
        `walsim runs one statement per request, and this one goes on after ";" ${this.near()} (psql, or the PostgreSQL port's simple query, takes several)`,
      );
    throw syntaxError(`syntax error ${this.near()}`);
  }
}

/** PostgreSQL statements walsim does not have, by first keyword, with what to do instead. */
const UNSUPPORTED: Record<string, string> = {
  begin: 'every statement commits on its own (no transaction blocks)',
  start: 'every statement commits on its own (no transaction blocks)',
  commit: 'every statement commits on its own (no transaction blocks)',
  end: 'every statement commits on its own (no transaction blocks)',
  rollback: 'every statement commits on its own (no transaction blocks)',
  abort: 'every statement commits on its own (no transaction blocks)',
  savepoint: 'every statement commits on its own (no transaction blocks)',
  release: 'every statement commits on its own (no transaction blocks)',
  set: 'it has no session settings (ALTER SYSTEM SET changes the reloadable ones)',
  reset: 'it has no session settings (ALTER SYSTEM RESET changes the reloadable ones)',
  copy: 'load rows with INSERT … SELECT generate_series(a, b) or INSERT … VALUES',
  update: 'it has INSERT, DELETE, TRUNCATE and VACUUM',
  merge: 'it has INSERT, DELETE, TRUNCATE and VACUUM',
};
const OTHER_COMMANDS = [
  'analyze',
  'call',
  'close',
  'cluster',
  'comment',
  'deallocate',
  'declare',
  'discard',
  'do',
  'execute',
  'explain',
  'fetch',
  'grant',
  'import',
  'listen',
  'load',
  'lock',
  'move',
  'notify',
  'prepare',
  'reassign',
  'refresh',
  'reindex',
  'revoke',
  'security',
  'table',
  'unlisten',
  'values',
  'with',
];

function unsupportedCommand(head: string): WalsimError {
  const command = head.toUpperCase();
  const why = UNSUPPORTED[head];
  if (why !== undefined) return notSupported(`${command} is not supported by walsim: ${why}`);
  return notSupported(`${command} is not supported by walsim`);
}

/** The statement parsers by first keyword (already consumed). */
const COMMANDS: Record<string, (p: Parser) => Statement> = {
  create: parseCreate,
  drop: parseDrop,
  insert: parseInsert,
  delete: (p) => {
    p.word('from');
    const name = p.identifier('a table name');
    return { type: 'delete', name, predicate: parseWhere(p) };
  },
  vacuum: parseVacuum,
  truncate: (p) => {
    if (p.isWord('table')) p.word('table');
    const names = [p.identifier('a table name')];
    while (p.optPunct(',')) names.push(p.identifier('a table name'));
    return { type: 'truncate', names };
  },
  checkpoint: () => ({ type: 'checkpoint' }),
  show: (p) => ({ type: 'show', name: p.identifier('a setting name') }),
  select: parseSelect,
  alter: parseAlterSystem,
};

/**
 * Statements parsed without a caller's NOTICE list, by text: parsing is pure (rule 5), so the same
 * text is the same statement. A node parses every statement it runs, and the same texts come back
 * (the simulator's ledger asks the same count(*) at every check; CHECKPOINT; replay resumes):
 * their lexing was a few percent of a simulation's time. Entries are frozen (a consumer that
 * changed a shared statement would throw); a statement that fails to parse is not kept and fails
 * again. Bounded: cleared when full (a bound on memory, not a tuning).
 */
const parsed = new BoundedMemo<string, Statement>(4096);

function frozen(stmt: Statement): Statement {
  for (const v of Object.values(stmt)) if (typeof v === 'object' && v !== null) Object.freeze(v);
  return Object.freeze(stmt);
}

/**
 * Parse one statement. NOTICEs the lexer raises (an identifier truncated to 63 bytes) are
 * appended to `notices`; without `notices` the statement may be a shared, frozen one.
 */
export function parseStatement(sql: string, notices?: Notice[]): Statement {
  if (typeof sql !== 'string') throw new WalsimError('invalid_input', 'statement must be a string');
  if (notices !== undefined) return parseFresh(sql, notices);
  return parsed.get(sql, parseShared);
}

/** A statement to share: parsed without a NOTICE list, frozen. */
function parseShared(sql: string): Statement {
  return frozen(parseFresh(sql, undefined));
}

function parseFresh(sql: string, notices: Notice[] | undefined): Statement {
  const p = new Parser(tokenize(sql, notices));
  if (p.atEnd()) throw syntaxError('empty statement');
  const head = p.next();
  if (head.kind !== 'word') throw syntaxError(`syntax error at or near "${head.text}"`);
  const parse = COMMANDS[head.text];
  if (parse === undefined) {
    if (head.text in UNSUPPORTED || OTHER_COMMANDS.includes(head.text))
      throw unsupportedCommand(head.text);
    throw syntaxError(`syntax error at or near "${head.text}"`);
  }
  const stmt = parse(p);
  p.end();
  return stmt;
}

/** CREATE TABLE name (col int [, col2 text|bytea]) */
function parseCreate(p: Parser): Statement {
  if (!p.isWord('table')) {
    const what = p.peek()?.text.toUpperCase() ?? '';
    throw notSupported(
      `CREATE ${what} is not supported by walsim: it has CREATE TABLE name (col int [, col2 text|bytea])`,
    );
  }
  p.word('table');
  const name = p.identifier('a table name');
  p.punct('(');
  const column = p.identifier('a column name');
  const type = p.identifier('a column type');
  if (!INT_TYPES.includes(type))
    throw notSupported(
      `column "${column}" of type ${type} is not supported by walsim: a table's first column is int`,
    );
  let toastColumn: string | null = null;
  if (p.optPunct(',')) {
    toastColumn = p.identifier('a column name');
    const type2 = p.identifier('a column type');
    if (!TOASTABLE_TYPES.includes(type2)) {
      throw notSupported(
        `column "${toastColumn}" of type ${type2} is not supported by walsim: a table has one int column and optionally one ${TOASTABLE_TYPES.join(' or ')} column (stored NULL)`,
      );
    }
    if (toastColumn === column)
      throw new WalsimError(
        'invalid_input',
        `column "${column}" specified more than once`,
        '42701',
      );
  }
  if (p.isPunct(','))
    throw notSupported(
      `a third column is not supported by walsim: a table has one int column and optionally one ${TOASTABLE_TYPES.join(' or ')} column`,
    );
  p.punct(')');
  return { type: 'create_table', name, column, toastColumn };
}

/** DROP TABLE [IF EXISTS] name [, ...]: every table in one transaction, as PostgreSQL does. */
function parseDrop(p: Parser): Statement {
  if (!p.isWord('table')) {
    const what = p.peek()?.text.toUpperCase() ?? '';
    throw notSupported(
      `DROP ${what} is not supported by walsim: it has DROP TABLE [IF EXISTS] name [, ...]`,
    );
  }
  p.word('table');
  let ifExists = false;
  if (p.isWord('if')) {
    p.word('if');
    p.word('exists');
    ifExists = true;
  }
  const names = [p.identifier('a table name')];
  while (p.optPunct(',')) names.push(p.identifier('a table name'));
  return { type: 'drop_table', names, ifExists };
}

/** INSERT INTO name SELECT generate_series(a, b) | INSERT INTO name VALUES (n), ... */
function parseInsert(p: Parser): Statement {
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
    return { type: 'insert_series', name, from, to };
  }
  if (p.isPunct('('))
    throw notSupported(
      'a column list is not supported by walsim: INSERT INTO name VALUES (n), … fills the int column',
    );
  p.word('values');
  const values: number[] = [];
  do {
    p.punct('(');
    values.push(p.int4());
    p.punct(')');
  } while (p.optPunct(','));
  return { type: 'insert_values', name, values };
}

/** VACUUM [name]: lazy vacuum, no options. */
function parseVacuum(p: Parser): Statement {
  const t = p.peek();
  if (t?.kind === 'punct' && t.text === '(') {
    throw notSupported('VACUUM options are not supported by walsim: it runs VACUUM [name]');
  }
  if (t?.kind === 'word' && ['full', 'freeze', 'verbose', 'analyze'].includes(t.text))
    throw notSupported(
      `VACUUM ${t.text.toUpperCase()} is not supported by walsim: it runs VACUUM [name] (lazy vacuum)`,
    );
  const name = p.atEnd() || p.isPunct(';') ? null : p.identifier('a table name');
  return { type: 'vacuum', name };
}

/** ALTER SYSTEM SET setting { = | TO } value | ALTER SYSTEM RESET setting */
function parseAlterSystem(p: Parser): Statement {
  if (!p.isWord('system')) {
    const what = p.peek()?.text.toUpperCase() ?? '';
    throw notSupported(`ALTER ${what} is not supported by walsim: it has ALTER SYSTEM SET / RESET`);
  }
  p.word('system');
  if (p.isWord('reset')) {
    p.word('reset');
    return { type: 'alter_system', name: p.identifier('a setting name'), value: null };
  }
  p.word('set');
  const name = p.identifier('a setting name');
  if (p.isWord('to')) p.word('to');
  else p.punct('=');
  const v = p.next();
  if (v.kind === 'word' && v.text === 'default') return { type: 'alter_system', name, value: null };
  if (v.kind === 'punct') throw syntaxError(`syntax error at or near "${v.text}"`);
  return { type: 'alter_system', name, value: v.text };
}

/** [WHERE col < n | col > n | col = n]; n any integer (beyond int4 it compares as bigint). */
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
  // The column is int4: every value beyond its range compares as the nearest one outside it, so
  // the comparison is exact and the value stays a small finite number (it is logged in WAL).
  const n = p.integer();
  const value = Math.min(Math.max(n, INT4_MIN - 1), INT4_MAX + 1);
  return { op: op.text as '<' | '>' | '=', value };
}

/** SELECT * | col [, col ...] FROM view [ORDER BY col] */
function parseSelectView(p: Parser, first: string | '*'): Statement {
  let columns: string[] | '*' = '*';
  if (first !== '*') {
    columns = [first];
    while (p.optPunct(',')) columns.push(p.identifier('a column name'));
  }
  p.word('from');
  let view = p.identifier('a relation name');
  if (view === 'pg_catalog' && p.optPunct('.')) view = p.identifier('a relation name');
  let orderBy: string | null = null;
  if (p.isWord('order')) {
    p.word('order');
    p.word('by');
    orderBy = p.identifier('a column name');
  }
  return { type: 'select_view', view, columns, orderBy };
}

/** Catalogs psql's backslash commands and other tools query: walsim has none of them. */
const CATALOGS = /^pg_(class|namespace|attribute|type|database|roles|authid|proc|index|tables)$/;

/**
 * SELECT in its supported forms; a syntax error inside a SELECT is a form walsim does not have
 * (0A000 naming the forms it has), since PostgreSQL's SELECT grammar is far larger than walsim's.
 */
function parseSelect(p: Parser): Statement {
  try {
    const stmt = parseSelectForm(p);
    p.end();
    return stmt;
  } catch (e) {
    if (!(e instanceof WalsimError) || !e.message.startsWith('syntax error')) throw e;
    const catalogs = p.mentions(CATALOGS)
      ? "; walsim has no system catalogs (psql's \\d and other catalog queries do not work)"
      : '';
    throw notSupported(
      `this SELECT is not supported by walsim: it answers SELECT count(*) FROM table [WHERE col <|>|= n], SELECT n, SELECT function(args) and SELECT … FROM pg_stat_replication | pg_stat_wal_receiver [ORDER BY col]${catalogs}`,
    );
  }
}

function parseSelectForm(p: Parser): Statement {
  if (p.optPunct('*')) return parseSelectView(p, '*');
  const first = p.peek();
  if (first?.kind === 'number') {
    p.next();
    return { type: 'select_literal', value: first.text };
  }
  let fn = p.identifier('a function name, a column or count(*)');
  // Clients qualify built-ins (libpq: SELECT pg_catalog.pg_is_in_recovery()).
  if (fn === 'pg_catalog' && p.optPunct('.')) fn = p.identifier('a function name');
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
    } while (p.optPunct(','));
  }
  p.punct(')');
  return { type: 'select_function', fn, args };
}
