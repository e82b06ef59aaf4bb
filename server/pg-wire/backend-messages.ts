/**
 * The backend messages walsim encodes itself (pg-gateway encodes ErrorResponse, ParameterStatus
 * and ReadyForQuery): RowDescription with PostgreSQL's type OIDs, DataRow in text format,
 * CommandComplete, NoticeResponse and the one-byte replies of the extended protocol, written with
 * pg-gateway's pg-protocol `Writer` to the session's socket while the session is open.
 */
import type { PostgresConnection } from 'pg-gateway';
import type { Notice, QueryResult, SqlValue } from '../control-protocol.ts';
import type { PgTypeName, ResultColumn } from '../../sql/functions.ts';
import { code } from './framing.ts';

/** pg_type OIDs and lengths of walsim's result types. */
const PG_TYPES: Record<PgTypeName, { oid: number; len: number }> = {
  bool: { oid: 16, len: 1 },
  int8: { oid: 20, len: 8 },
  int4: { oid: 23, len: 4 },
  text: { oid: 25, len: -1 },
  void: { oid: 2278, len: 4 },
  pg_lsn: { oid: 3220, len: 8 },
  json: { oid: 114, len: -1 },
};

/** A value's text form: booleans t/f as PostgreSQL's boolout, NULL as null. */
function textOf(v: SqlValue): string | null {
  if (v === null) return null;
  if (typeof v === 'boolean') return v ? 't' : 'f';
  return String(v);
}

type Writer = PostgresConnection['writer'];

/** Writes backend messages to one session's socket; nothing once `isOpen()` turns false. */
export class BackendOutput {
  constructor(
    private readonly socket: { write(data: Buffer | string): unknown },
    readonly writer: Writer,
    private readonly isOpen: () => boolean,
  ) {}

  write(data: Buffer | string): void {
    if (this.isOpen()) this.socket.write(data);
  }

  /** A message with no body: ParseComplete '1', BindComplete '2', CloseComplete '3', NoData 'n',
   * EmptyQueryResponse 'I', PortalSuspended 's'. */
  empty(type: '1' | '2' | '3' | 'n' | 'I' | 's'): void {
    this.write(this.writer.flush(code(type)));
  }

  parameterDescription(typeOids: readonly number[]): void {
    const w = this.writer.addInt16(typeOids.length);
    for (const t of typeOids) w.addInt32(t);
    this.write(w.flush(code('t')));
  }

  rowDescription(columns: readonly ResultColumn[]): void {
    const w = this.writer.addInt16(columns.length);
    for (const c of columns) {
      const t = PG_TYPES[c.type];
      w.addCString(c.name)
        .addInt32(0)
        .addInt16(0)
        .addInt32(t.oid)
        .addInt16(t.len)
        .addInt32(-1)
        .addInt16(0);
    }
    this.write(w.flush(code('T')));
  }

  /** DataRow for rows [from, from + count) of `result`, in the described columns' order. */
  rows(columns: readonly ResultColumn[], result: QueryResult, from: number, count: number): void {
    for (let i = from; i < from + count; i++) {
      const row = result.rows[i]!;
      const w = this.writer.addInt16(columns.length);
      for (const c of columns) {
        const text = textOf(row[c.name] ?? null);
        if (text === null) w.addInt32(-1);
        else {
          const bytes = Buffer.from(text, 'utf8');
          w.addInt32(bytes.length).add(bytes);
        }
      }
      this.write(w.flush(code('D')));
    }
  }

  commandComplete(tag: string): void {
    this.write(this.writer.addCString(tag).flush(code('C')));
  }

  /** NoticeResponse per notice: a WARNING the statement raised, a NOTICE of the parser. */
  notices(notices: readonly Notice[] | undefined): void {
    for (const n of notices ?? []) {
      const w = this.writer;
      w.addString('S')
        .addCString(n.severity)
        .addString('V')
        .addCString(n.severity)
        .addString('C')
        .addCString(n.code)
        .addString('M')
        .addCString(n.message);
      if (n.detail !== undefined) w.addString('D').addCString(n.detail);
      this.write(w.addCString('').flush(code('N')));
    }
  }
}
