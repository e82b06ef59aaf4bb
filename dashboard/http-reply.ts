/**
 * Answers of the dashboard's HTTP server: every response carries its length, `nosniff` and
 * `no-store`; request bodies are read up to a bound.
 *
 * Entry points: `send`, `sendJson`, `readBody`, `rawReply`.
 */
import * as http from 'node:http';

export function send(
  res: http.ServerResponse,
  status: number,
  body: string | Buffer,
  type = 'text/plain; charset=utf-8',
  extra: http.OutgoingHttpHeaders = {},
): void {
  res.writeHead(status, {
    'content-type': type,
    'content-length': Buffer.byteLength(body),
    'x-content-type-options': 'nosniff',
    'cache-control': 'no-store',
    ...extra,
  });
  res.end(body);
}

export const sendJson = (res: http.ServerResponse, status: number, v: unknown) =>
  send(res, status, JSON.stringify(v), 'application/json; charset=utf-8');

/** The request's body, or null once it passes `limit` bytes (nothing more is read). */
export async function readBody(req: http.IncomingMessage, limit: number): Promise<string | null> {
  const chunks: Buffer[] = [];
  let size = 0;
  for await (const c of req as AsyncIterable<Buffer>) {
    size += c.length;
    if (size > limit) return null;
    chunks.push(c);
  }
  return Buffer.concat(chunks).toString('utf8');
}

/** A whole HTTP/1.1 answer for a socket no ServerResponse owns (client errors, upgrades). */
export function rawReply(status: number, message = ''): string {
  return (
    `HTTP/1.1 ${status} ${http.STATUS_CODES[status]}\r\nconnection: close\r\n` +
    `content-type: text/plain\r\ncontent-length: ${Buffer.byteLength(message)}\r\n\r\n${message}`
  );
}
