/**
 * One PostgreSQL-port session: its phases (start-up, authentication, ready, closed), the pump that
 * handles one frame at a time (INV-WIRE-2), the start-up and SCRAM steps, the simple query
 * protocol, the dispatch of extended-protocol messages, cancel and termination, and how errors
 * reach the client (ERROR for a statement, FATAL and close for the session).
 */
import type * as net from 'node:net';
import { randomInt } from 'node:crypto';
import type { BackendError } from 'pg-gateway';
import { fail, InvariantViolation } from '../../common/assert.ts';
import { isWalsimError } from '../../common/errors.ts';
import type { QueryResult } from '../control-protocol.ts';
import { describeStatement, type ResultColumn } from '../../sql/functions.ts';
import { gatewayOptions, GatewayConnection, ScramExchange } from './auth.ts';
import { BackendOutput } from './backend-messages.ts';
import { ExtendedProtocol } from './extended.ts';
import {
  BodyReader,
  code,
  FatalError,
  FrameBuffer,
  MAX_STARTUP_PACKET_LENGTH,
  protocolViolation,
  terminated,
  WRITE_HIGH_WATER,
  type Frame,
} from './framing.ts';
import { parseQueryString } from './simple-query.ts';
import { FIXED_PARAMETERS, readStartupPacket } from './startup.ts';
import type { PgWireOptions } from './options.ts';
import type { ScramVerifier } from './auth.ts';

/** What a session needs of its server (`PgWireServer` in index.ts). */
export interface SessionHost {
  readonly opts: PgWireOptions;
  /** Computed once per server start, like the verifier PostgreSQL keeps in pg_authid. */
  readonly scramVerifier: ScramVerifier | null;
  allocatePid(): number;
  /** A start-up packet arrived: the server-wide checks (FatalError when refused). */
  admit(session: PgWireSession): void;
  forget(session: PgWireSession): void;
  cancel(pid: number, secretKey: number): void;
}

type Phase = 'startup' | 'auth' | 'ready' | 'closed';

export class PgWireSession {
  readonly secretKey = randomInt(1, 0x7fffffff);
  /** This session's "backend pid" in BackendKeyData: distinct per session, as PostgreSQL's are. */
  readonly backendPid: number;
  private readonly conn: GatewayConnection;
  private phase: Phase = 'startup';
  private readonly frames = new FrameBuffer();
  private readonly out: BackendOutput;
  private pumping = false;
  private negotiations = 0;
  private user = '';
  private applicationName = '';
  private clientEncoding = 'UTF8';
  private reportedHotStandby: boolean | null = null;
  /** After an error in the extended protocol, messages are skipped until Sync. */
  private skipTillSync = false;
  private readonly extended: ExtendedProtocol;
  private running: AbortController | null = null;
  private readonly authTimer: NodeJS.Timeout;
  /** SCRAM: the exchange in progress, and the start-up packet pg-gateway gets once it succeeds. */
  private scram: ScramExchange | null = null;
  private scramStartup: Buffer | null = null;
  private scramFirstDone = false;

  constructor(
    private readonly socket: net.Socket,
    private readonly server: SessionHost,
  ) {
    this.backendPid = server.allocatePid();
    this.conn = new GatewayConnection(socket, gatewayOptions(server.opts.password));
    this.out = new BackendOutput(socket, this.conn.writer, () => this.canWrite());
    this.extended = new ExtendedProtocol(this.out, (sql, columns) => this.run(sql, columns));
    // Our frame guard is the socket's only reader; pg-gateway sees whole, checked messages.
    this.conn.removeSocketHandlers(socket);
    this.conn.afterAuthentication = () => this.afterAuthentication();
    socket.setNoDelay(true);
    socket.on('data', (chunk: Buffer) => this.onData(chunk));
    socket.on('error', () => {});
    socket.on('close', () => this.onClose());
    this.authTimer = setTimeout(() => {
      if (this.phase === 'startup' || this.phase === 'auth')
        this.fatal(new FatalError('08006', 'canceling authentication due to timeout'));
    }, server.opts.authTimeoutMs ?? 60_000);
    this.authTimer.unref();
  }

  get open(): boolean {
    return this.phase !== 'closed';
  }

  /** Cancel request from another connection: interrupt the running statement, if any. */
  cancel(): void {
    this.running?.abort();
  }

  /** Fast shutdown: PostgreSQL's message for a terminated backend. */
  terminate(): void {
    this.fatal(terminated());
  }

  private onData(chunk: Buffer): void {
    if (this.phase === 'closed') return;
    this.frames.append(chunk);
    // Before authentication a client has nothing to pipeline: a start-up packet and a password.
    if (this.phase !== 'ready' && this.frames.length > 2 * MAX_STARTUP_PACKET_LENGTH) {
      this.fatal(
        protocolViolation(
          `client sent ${this.frames.length} bytes before authentication completed`,
        ),
      );
      return;
    }
    void this.pump();
  }

  private onClose(): void {
    this.phase = 'closed';
    clearTimeout(this.authTimer);
    this.running?.abort();
    this.server.forget(this);
  }

  /** INV-WIRE-2: one message at a time; the socket stays paused while a message is handled. */
  private async pump(): Promise<void> {
    if (this.pumping) return;
    this.pumping = true;
    this.socket.pause();
    try {
      for (;;) {
        const frame = this.frames.next(this.phase === 'startup');
        if (frame === null) break;
        await this.handleFrame(frame);
        if (this.phase === 'closed' || this.socket.writableEnded) break;
        if (this.socket.writableLength > WRITE_HIGH_WATER) {
          await new Promise((r) => {
            this.socket.once('drain', r);
            this.socket.once('close', r);
          });
        }
      }
    } catch (e) {
      if (e instanceof InvariantViolation) this.server.opts.backend.fatal(e);
      if (e instanceof FatalError) this.fatal(e);
      else {
        this.server.opts.backend.log(
          `ERROR:  wire protocol internal error: ${(e as Error).stack ?? String(e)}`,
        );
        this.fatal(new FatalError('XX000', `internal error: ${(e as Error).message}`));
      }
    } finally {
      this.pumping = false;
      if (this.socket.writableEnded) this.phase = 'closed';
      if (this.phase !== 'closed') this.socket.resume();
    }
  }

  private async handleFrame({ type, frame }: Frame): Promise<void> {
    if (type === null) return this.handleStartupPacket(frame);
    if (this.phase === 'auth') {
      if (type === 'X') return this.close();
      if (type !== 'p')
        throw protocolViolation(`expected password response, got message type "${type}"`);
      if (this.scram !== null) return this.scramStep(frame.subarray(5));
      if (frame[frame.length - 1] !== 0)
        throw protocolViolation('invalid password packet: not NUL-terminated');
      await this.conn.handleData(Buffer.from(frame));
      return;
    }
    return this.handleMessage(type, frame.subarray(5));
  }

  private async handleStartupPacket(packet: Buffer): Promise<void> {
    const request = readStartupPacket(packet);
    if (request.kind === 'ssl' || request.kind === 'gssenc') {
      if (++this.negotiations > 2)
        throw protocolViolation('too many encryption negotiation requests');
      if (request.kind === 'ssl')
        await this.conn.handleData(Buffer.from(packet)); // pg-gateway answers 'N'
      else this.write('N'); // walsim has no GSSAPI encryption either
      return;
    }
    if (request.kind === 'cancel') {
      this.server.cancel(request.pid, request.secretKey);
      // Like PostgreSQL: no reply, the connection just closes.
      this.close();
      return;
    }
    const { minor, unrecognized } = request;
    this.user = request.user;
    this.applicationName = request.applicationName;
    this.clientEncoding = request.clientEncoding;
    this.server.admit(this);
    if (minor > 0 || unrecognized.length > 0) {
      // NegotiateProtocolVersion: we speak 3.0 and none of the protocol options.
      const w = this.conn.writer.addInt32(0).addInt32(unrecognized.length);
      for (const k of unrecognized) w.addCString(k);
      this.write(w.flush(code('v')));
    }
    this.phase = 'auth';
    const forGateway = Buffer.from(packet);
    forGateway.writeInt32BE(3 << 16, 4); // pg-gateway accepts exactly 3.0
    const verifier = this.server.scramVerifier;
    if (verifier !== null) {
      // AuthenticationSASL: the mechanisms we offer.
      this.scram = new ScramExchange(verifier);
      this.scramStartup = forGateway;
      this.write(
        this.conn.writer.addInt32(10).addCString('SCRAM-SHA-256').addCString('').flush(code('R')),
      );
      return;
    }
    await this.conn.handleData(forGateway);
  }

  /** A SASLInitialResponse or SASLResponse ('p') of the SCRAM exchange. */
  private async scramStep(body: Buffer): Promise<void> {
    const scram = this.scram!;
    if (!this.scramFirstDone) {
      const serverFirst = scram.first(body);
      this.scramFirstDone = true;
      this.write(this.conn.writer.addInt32(11).add(Buffer.from(serverFirst)).flush(code('R'))); // AuthenticationSASLContinue
      return;
    }
    const serverFinal = scram.final(body);
    if (serverFinal === null)
      throw new FatalError('28P01', `password authentication failed for user "${this.user}"`);
    this.write(this.conn.writer.addInt32(12).add(Buffer.from(serverFinal)).flush(code('R'))); // AuthenticationSASLFinal
    this.scram = null;
    const startup = this.scramStartup!;
    this.scramStartup = null;
    await this.conn.handleData(startup); // pg-gateway (authMode none): AuthenticationOk and the rest
  }

  /** AuthenticationOk was sent: report parameters, the cancel key, and become ready. */
  private afterAuthentication(): void {
    clearTimeout(this.authTimer);
    this.phase = 'ready';
    const params: Array<[string, string]> = [
      ['application_name', this.applicationName],
      ['client_encoding', this.clientEncoding],
      ...FIXED_PARAMETERS.slice(1, 6),
      ['session_authorization', this.user],
      ...FIXED_PARAMETERS.slice(6),
    ];
    for (const [k, v] of params) this.conn.sendParameterStatus(k, v);
    this.write(
      this.conn.writer.addInt32(this.backendPid).addInt32(this.secretKey).flush(code('K')),
    );
    this.readyForQuery();
  }

  /** Whether the client can still be written to (not after a WARNING-and-close, a FATAL). */
  private canWrite(): boolean {
    return this.phase !== 'closed' && !this.socket.writableEnded;
  }

  private write(data: Buffer | string): void {
    this.out.write(data);
  }

  /** ReadyForQuery, after reporting in_hot_standby if it changed (GUC_REPORT, e.g. after promotion). */
  private readyForQuery(): void {
    if (this.phase === 'closed') return;
    const hot = this.server.opts.backend.inRecovery();
    if (hot !== this.reportedHotStandby) {
      this.conn.sendParameterStatus('in_hot_standby', hot ? 'on' : 'off');
      this.reportedHotStandby = hot;
    }
    this.conn.sendReadyForQuery('idle'); // walsim has no transaction blocks: always idle
  }

  private async handleMessage(type: string, body: Buffer): Promise<void> {
    if (this.skipTillSync && type !== 'S' && type !== 'X') return;
    switch (type) {
      case 'Q': {
        const r = new BodyReader(body, 'Query');
        const sql = r.text();
        r.end();
        if (typeof sql === 'string') return this.simpleQuery(sql);
        this.extended.sync(); // the failed Query still ends the implicit transaction
        this.sendStatementError(sql);
        this.readyForQuery();
        return;
      }
      case 'P':
        return this.extendedStep(() => this.extended.parse(body));
      case 'B':
        return this.extendedStep(() => this.extended.bind(body));
      case 'D':
        return this.extendedStep(() => this.extended.describe(body));
      case 'E':
        return this.extendedStep(() => this.extended.execute(body));
      case 'C':
        return this.extendedStep(() => this.extended.close(body));
      case 'S':
        this.skipTillSync = false;
        this.extended.sync();
        this.readyForQuery();
        return;
      case 'H':
        return; // Flush: replies are written as they are made
      case 'X':
        return this.close();
      case 'F':
        this.sendError({
          severity: 'ERROR',
          code: '0A000',
          message: 'walsim does not support the function call protocol',
        });
        this.readyForQuery();
        return;
      case 'd':
      case 'c':
      case 'f':
        return; // copy messages outside COPY are ignored, as PostgreSQL does
      default:
        throw protocolViolation(`invalid frontend message type "${type}" after authentication`);
    }
  }

  /** An extended-protocol step: an error is reported once and later messages skipped until Sync. */
  private async extendedStep(step: () => Promise<void> | void): Promise<void> {
    try {
      await step();
    } catch (e) {
      if (e instanceof FatalError) throw e;
      this.sendStatementError(e);
      this.skipTillSync = true;
    }
  }

  private async simpleQuery(sql: string): Promise<void> {
    this.extended.simpleQuery();
    const parsed = parseQueryString(sql);
    this.out.notices(parsed.notices);
    if (parsed.error !== null) {
      this.sendStatementError(parsed.error);
      this.readyForQuery();
      return;
    }
    const { pieces, stmts } = parsed;
    if (stmts.length === 0) this.out.empty('I'); // EmptyQueryResponse
    for (let i = 0; i < stmts.length; i++) {
      try {
        const columns = describeStatement(stmts[i]!);
        const result = await this.run(pieces[i]!, columns);
        if (columns.length > 0) this.out.rowDescription(columns);
        this.out.rows(columns, result, 0, result.rows.length);
        this.out.notices(result.notices);
        this.out.commandComplete(result.command);
      } catch (e) {
        this.sendStatementError(e);
        break;
      }
      if (this.phase === 'closed') return;
    }
    this.readyForQuery();
  }

  private async run(sql: string, columns: ResultColumn[]): Promise<QueryResult> {
    const ac = new AbortController();
    this.running = ac;
    try {
      const result = await this.server.opts.backend.execute(sql, ac.signal, {
        clientEncoding: this.clientEncoding,
        applicationName: this.applicationName,
      });
      if (!(
        result.columns.length === columns.length &&
        result.columns.every((c, i) => c === columns[i]!.name)
      ))
        fail(
          `INV-WIRE-1: result columns ${JSON.stringify(result.columns)} differ from the described ${JSON.stringify(columns.map((c) => c.name))}`,
        );
      return result;
    } catch (e) {
      // The node began its shutdown (a fast stop, or a smart one once the sessions it waited
      // for ended): PostgreSQL has terminated every backend by then, so an established session
      // gets FATAL 57P01; 57P03 is the answer to a connection attempt.
      if (isWalsimError(e) && e.sqlstate === '57P03') throw terminated();
      throw e;
    } finally {
      this.running = null;
    }
  }

  private sendError(e: BackendError): void {
    if (this.phase !== 'closed' && !this.socket.writableEnded) this.conn.sendError(e);
  }

  /**
   * An error a statement raised: WalsimErrors carry their SQLSTATE (and DETAIL); an
   * InvariantViolation ends the process; anything else is an internal error of this statement.
   */
  private sendStatementError(e: unknown): void {
    if (e instanceof InvariantViolation) this.server.opts.backend.fatal(e);
    if (e instanceof FatalError) return this.fatal(e);
    if (isWalsimError(e)) {
      if ((e as { severity?: string }).severity === 'WARNING') {
        // A fast shutdown ended a synchronous-replication wait: PostgreSQL warns and drops the
        // connection without a command tag (the commit may or may not have reached the standby).
        this.out.notices([
          {
            severity: 'WARNING',
            code: e.sqlstate,
            message: e.message,
            ...(e.detail !== undefined ? { detail: e.detail } : {}),
          },
        ]);
        this.close();
        return;
      }
      this.sendError({
        severity: 'ERROR',
        code: e.sqlstate,
        message: e.message,
        ...(e.detail !== undefined ? { detail: e.detail } : {}),
        ...(e.hint !== undefined ? { hint: e.hint } : {}),
      });
      return;
    }
    this.server.opts.backend.log(`ERROR:  internal error: ${(e as Error).stack ?? String(e)}`);
    this.sendError({ severity: 'ERROR', code: 'XX000', message: (e as Error).message });
  }

  fatal(e: FatalError): void {
    if (this.phase === 'closed') return;
    this.sendError({ severity: 'FATAL', code: e.sqlstate, message: e.message });
    this.close();
  }

  private close(): void {
    if (this.phase === 'closed') return;
    this.phase = 'closed';
    this.frames.clear();
    this.socket.end();
    // A client that never reads must not keep the socket (and us) around.
    setTimeout(() => this.socket.destroy(), 5000).unref();
  }
}
