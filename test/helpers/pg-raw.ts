/**
 * The PostgreSQL protocol as raw bytes, for tests that must send what no driver sends (hostile
 * input, exact extended-protocol sequences) and read every backend message back. The same helpers
 * talk to walsim and to a real PostgreSQL.
 */
import * as net from 'node:net';

export interface BackendMessage {
  type: string;
  body: Buffer;
  /** ErrorResponse fields by code letter (S severity, C SQLSTATE, M message). */
  fields?: Record<string, string>;
}

export interface Exchange {
  messages: BackendMessage[];
  /** The server closed the connection. */
  closed: boolean;
}

/** `oneByteAnswers`: how many SSLRequest/GSSENCRequest answers ('N', no length) come first. */
export function parseBackend(data: Buffer, oneByteAnswers: number): BackendMessage[] {
  const out: BackendMessage[] = [];
  let off = 0;
  for (; off < Math.min(oneByteAnswers, data.length); off++)
    out.push({ type: String.fromCharCode(data[off]!), body: Buffer.alloc(0) });
  while (off + 5 <= data.length) {
    const type = String.fromCharCode(data[off]!);
    const len = data.readInt32BE(off + 1);
    const body = data.subarray(off + 5, off + 1 + len);
    const m: BackendMessage = { type, body };
    if (type === 'E' || type === 'N') {
      m.fields = {};
      let i = 0;
      while (i < body.length && body[i] !== 0) {
        const end = body.indexOf(0, i + 1);
        m.fields[String.fromCharCode(body[i]!)] = body.toString('utf8', i + 1, end);
        i = end + 1;
      }
    }
    out.push(m);
    off += 1 + len;
  }
  return out;
}

/**
 * Send `chunks` to the port (with `gapMs` between them), collect what comes back until the server
 * closes or `until` is satisfied.
 */
export function exchange(
  port: number,
  chunks: Buffer[],
  opts: { until?: (m: BackendMessage[]) => boolean; gapMs?: number; oneByteAnswers?: number } = {},
): Promise<Exchange> {
  return new Promise((resolve, reject) => {
    const socket = net.connect(port, '127.0.0.1');
    let data = Buffer.alloc(0);
    let done = false;
    const finish = (closed: boolean) => {
      if (done) return;
      done = true;
      clearTimeout(timer);
      socket.destroy();
      resolve({ messages: parseBackend(data, opts.oneByteAnswers ?? 0), closed });
    };
    const timer = setTimeout(() => {
      done = true;
      socket.destroy();
      reject(
        new Error(
          `no close and no expected reply within 20 s; got ${JSON.stringify(parseBackend(data, 0).map((m) => m.type))}`,
        ),
      );
    }, 20_000);
    socket.on('data', (d) => {
      data = Buffer.concat([data, d]);
      if (opts.until?.(parseBackend(data, opts.oneByteAnswers ?? 0))) finish(false);
    });
    socket.on('close', () => finish(true));
    socket.on('error', () => {});
    socket.on('connect', async () => {
      for (const c of chunks) {
        if (done || socket.destroyed) return;
        socket.write(c);
        if (opts.gapMs) await new Promise((r) => setTimeout(r, opts.gapMs));
      }
    });
  });
}

export function startupPacket(params: Record<string, string>, version = 3 << 16): Buffer {
  const parts = [Buffer.alloc(8)];
  for (const [k, v] of Object.entries(params)) parts.push(Buffer.from(`${k}\0${v}\0`));
  parts.push(Buffer.from([0]));
  const b = Buffer.concat(parts);
  b.writeInt32BE(b.length, 0);
  b.writeInt32BE(version, 4);
  return b;
}

export function message(type: string, body: Buffer | string = Buffer.alloc(0)): Buffer {
  const b = typeof body === 'string' ? Buffer.from(body) : body;
  const header = Buffer.alloc(5);
  header.write(type, 0);
  header.writeInt32BE(4 + b.length, 1);
  return Buffer.concat([header, b]);
}

export const query = (sql: string) => message('Q', `${sql}\0`);
export const USER = { user: 'postgres', database: 'postgres' };
export const readyFor = (ms: BackendMessage[]) => ms.some((m) => m.type === 'Z');
export const errorOf = (x: Exchange) => x.messages.find((m) => m.type === 'E')?.fields;

/** Parse: statement name, query text, declared parameter type OIDs. */
export function parse(name: string, sql: string, paramTypes: number[] = []): Buffer {
  const types = Buffer.alloc(2 + 4 * paramTypes.length);
  types.writeInt16BE(paramTypes.length, 0);
  paramTypes.forEach((t, i) => types.writeInt32BE(t, 2 + 4 * i));
  return message('P', Buffer.concat([Buffer.from(`${name}\0${sql}\0`), types]));
}

/** Bind: portal, statement, text-format parameters (null = SQL NULL), no result formats. */
export function bind(portal: string, stmt: string, params: Array<string | null> = []): Buffer {
  const parts = [Buffer.from(`${portal}\0${stmt}\0`), Buffer.from([0, 0])];
  const n = Buffer.alloc(2);
  n.writeInt16BE(params.length, 0);
  parts.push(n);
  for (const p of params) {
    const len = Buffer.alloc(4);
    len.writeInt32BE(p === null ? -1 : Buffer.byteLength(p), 0);
    parts.push(len);
    if (p !== null) parts.push(Buffer.from(p));
  }
  parts.push(Buffer.from([0, 0]));
  return message('B', Buffer.concat(parts));
}

/** Execute: portal, row limit (0 = all). */
export function execute(portal: string, maxRows = 0): Buffer {
  const limit = Buffer.alloc(4);
  limit.writeInt32BE(maxRows, 0);
  return message('E', Buffer.concat([Buffer.from(`${portal}\0`), limit]));
}

export const sync = () => message('S');

/** Each reply in order, as `C:INSERT 0 10`, `E:55000 portal "p1" cannot be run`, `Z` …; start-up replies dropped. */
export function replies(x: Exchange): string[] {
  const first = x.messages.findIndex((m) => m.type === 'Z');
  return x.messages.slice(first + 1).map((m) => {
    if (m.type === 'E' || m.type === 'N') return `${m.type}:${m.fields!.C} ${m.fields!.M}`;
    if (m.type === 'C') return `C:${m.body.toString('utf8', 0, m.body.length - 1)}`;
    if (m.type === 'D') return `D:${m.body.toString('utf8', 6)}`;
    return m.type;
  });
}
