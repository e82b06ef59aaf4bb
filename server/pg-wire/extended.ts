/**
 * The extended query protocol's objects and messages (postgres.c exec_parse_message,
 * exec_bind_message, exec_describe_*_message, exec_execute_message; portalmem.c, pquery.c):
 * prepared statements and portals by name, Parse, Bind, Describe, Execute, Close, and what Sync and
 * a simple Query drop. A statement runs through `run` (the session's: cancel, INV-WIRE-1); errors
 * are thrown (the session reports them and skips to Sync).
 */
import { WalsimError } from '../../common/errors.ts';
import type { Notice, QueryResult } from '../control-protocol.ts';
import { describeStatement, type ResultColumn } from '../../sql/functions.ts';
import { parseStatement, splitStatements, type Statement } from '../../sql/parser.ts';
import type { BackendOutput } from './backend-messages.ts';
import { BodyReader, MAX_NAMED_OBJECTS } from './framing.ts';

export interface Prepared {
  sql: string;
  /** null: an empty query string (Execute answers EmptyQueryResponse). */
  stmt: Statement | null;
  columns: ResultColumn[];
  /** Declared parameter type OIDs: Bind supplies one value each (walsim's statements use none). */
  paramTypes: number[];
}

/**
 * A bound statement (portalmem.c). A statement without result rows runs to completion at its first
 * Execute and is then done (PORTAL_MULTI_QUERY → PORTAL_DONE: "cannot be run" again); one with
 * rows runs once and each Execute fetches on from `sent` (PORTAL_ONE_SELECT / PORTAL_UTIL_SELECT).
 */
export interface Portal {
  prepared: Prepared;
  result: QueryResult | null;
  sent: number;
  done: boolean;
}

/** One session's prepared statements and portals. */
export class ExtendedProtocol {
  private readonly prepared = new Map<string, Prepared>();
  private readonly portals = new Map<string, Portal>();

  constructor(
    private readonly out: BackendOutput,
    private readonly run: (sql: string, columns: ResultColumn[]) => Promise<QueryResult>,
  ) {}

  /** Sync: the implicit transaction ends, and its portals with it. */
  sync(): void {
    this.portals.clear();
  }

  /**
   * A simple Query: exec_simple_query drops the unnamed statement; the Query ends the (implicit)
   * transaction the extended messages before it ran in, and every portal with it.
   */
  simpleQuery(): void {
    this.prepared.delete('');
    this.portals.clear();
  }

  parse(body: Buffer): void {
    const r = new BodyReader(body, 'Parse');
    const name = r.cstring();
    const sql = r.text();
    const nParams = r.int16();
    const paramTypes: number[] = [];
    for (let i = 0; i < nParams; i++) paramTypes.push(r.int32());
    r.end();
    if (typeof sql !== 'string') throw sql;
    // walsim's statements reference no parameter ($n is refused by the lexer): a declared type
    // stands (Bind must supply a value for it), an unspecified one cannot be inferred.
    const unknown = paramTypes.indexOf(0);
    if (unknown >= 0)
      throw new WalsimError(
        'invalid_input',
        `could not determine data type of parameter $${unknown + 1}`,
        '42P18',
      );
    if (name !== '' && this.prepared.has(name))
      throw new WalsimError(
        'invalid_input',
        `prepared statement "${name}" already exists`,
        '42P05',
      );
    if (name !== '' && this.prepared.size >= MAX_NAMED_OBJECTS) {
      throw new WalsimError(
        'invalid_input',
        `too many prepared statements (walsim allows ${MAX_NAMED_OBJECTS} per session)`,
        '53400',
      );
    }
    const pieces = splitStatements(sql);
    if (pieces.length > 1)
      throw new WalsimError(
        'syntax_error',
        'cannot insert multiple commands into a prepared statement',
        '42601',
      );
    const notices: Notice[] = [];
    try {
      const stmt = pieces.length === 0 ? null : parseStatement(pieces[0]!, notices);
      const columns = stmt === null ? [] : describeStatement(stmt);
      this.prepared.set(name, { sql, stmt, columns, paramTypes });
    } finally {
      this.out.notices(notices);
    }
    this.out.empty('1'); // ParseComplete
  }

  bind(body: Buffer): void {
    const r = new BodyReader(body, 'Bind');
    const portalName = r.cstring();
    const stmtName = r.cstring();
    const nFormats = r.int16();
    for (let i = 0; i < nFormats; i++) r.int16();
    const nParams = r.int16();
    for (let i = 0; i < nParams; i++) {
      const len = r.int32();
      if (len > 0) r.bytes(len);
    }
    const nResultFormats = r.int16();
    const resultFormats: number[] = [];
    for (let i = 0; i < nResultFormats; i++) resultFormats.push(r.int16());
    r.end();
    const prepared = this.preparedStatement(stmtName);
    if (nParams !== prepared.paramTypes.length) {
      throw new WalsimError(
        'protocol_violation',
        `bind message supplies ${nParams} parameters, but prepared statement "${stmtName}" requires ${prepared.paramTypes.length}`,
        '08P01',
      );
    }
    if (resultFormats.some((f) => f !== 0))
      throw new WalsimError(
        'invalid_input',
        'walsim sends results in text format only (format code 0)',
        '0A000',
      );
    // CreatePortal: a named portal must be new; the unnamed one is replaced silently.
    if (portalName !== '' && this.portals.has(portalName))
      throw new WalsimError('invalid_input', `cursor "${portalName}" already exists`, '42P03');
    if (portalName !== '' && this.portals.size >= MAX_NAMED_OBJECTS) {
      throw new WalsimError(
        'invalid_input',
        `too many portals (walsim allows ${MAX_NAMED_OBJECTS} per session)`,
        '53400',
      );
    }
    this.portals.set(portalName, { prepared, result: null, sent: 0, done: false });
    this.out.empty('2'); // BindComplete
  }

  /** FetchPreparedStatement, or the unnamed statement (exec_bind_message's own message for it). */
  private preparedStatement(name: string): Prepared {
    const p = this.prepared.get(name);
    if (p !== undefined) return p;
    const what = name === '' ? 'unnamed prepared statement' : `prepared statement "${name}"`;
    throw new WalsimError('invalid_input', `${what} does not exist`, '26000');
  }

  describe(body: Buffer): void {
    const r = new BodyReader(body, 'Describe');
    const kind = r.byte();
    const name = r.cstring();
    r.end();
    let columns: ResultColumn[];
    if (kind === 'S') {
      const p = this.preparedStatement(name);
      this.out.parameterDescription(p.paramTypes);
      columns = p.columns;
    } else if (kind === 'P') {
      const p = this.portals.get(name);
      if (p === undefined)
        throw new WalsimError('invalid_input', `portal "${name}" does not exist`, '34000');
      columns = p.prepared.columns;
    } else {
      // postgres.c: an ERROR (08P01), not FATAL; the subtype printed as its byte value.
      throw new WalsimError(
        'protocol_violation',
        `invalid DESCRIBE message subtype ${kind.charCodeAt(0)}`,
        '08P01',
      );
    }
    if (columns.length > 0) this.out.rowDescription(columns);
    else this.out.empty('n'); // NoData
  }

  async execute(body: Buffer): Promise<void> {
    const r = new BodyReader(body, 'Execute');
    const name = r.cstring();
    const maxRows = r.int32();
    r.end();
    const portal = this.portals.get(name);
    if (portal === undefined)
      throw new WalsimError('invalid_input', `portal "${name}" does not exist`, '34000');
    const { prepared } = portal;
    if (prepared.stmt === null) {
      this.out.empty('I'); // EmptyQueryResponse
      return;
    }
    if (portal.done)
      throw new WalsimError('invalid_input', `portal "${name}" cannot be run`, '55000');
    if (portal.result === null) {
      portal.result = await this.run(prepared.sql, prepared.columns);
      this.out.notices(portal.result.notices); // raised while it ran, before any row
    }
    const result = portal.result;
    if (prepared.columns.length === 0) {
      portal.done = true;
      this.out.commandComplete(result.command);
      return;
    }
    const left = result.rows.length - portal.sent;
    const n = maxRows > 0 ? Math.min(maxRows, left) : left;
    this.out.rows(prepared.columns, result, portal.sent, n);
    portal.sent += n;
    // PortalRunSelect: a fetch that filled its row limit suspends, even if no row is left; the
    // tag counts this fetch's rows (SHOW's has no count).
    if (maxRows > 0 && n === maxRows)
      this.out.empty('s'); // PortalSuspended
    else
      this.out.commandComplete(
        result.command.startsWith('SELECT ') ? `SELECT ${n}` : result.command,
      );
  }

  close(body: Buffer): void {
    const r = new BodyReader(body, 'Close');
    const kind = r.byte();
    const name = r.cstring();
    r.end();
    if (kind === 'S') this.prepared.delete(name);
    else if (kind === 'P') this.portals.delete(name);
    else
      throw new WalsimError(
        'protocol_violation',
        `invalid CLOSE message subtype ${kind.charCodeAt(0)}`,
        '08P01',
      );
    this.out.empty('3'); // CloseComplete
  }
}
