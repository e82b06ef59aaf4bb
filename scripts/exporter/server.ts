/**
 * The exporter's HTTP side: `GET /metrics` in Prometheus's text format (the registry renders the
 * last cycle's results: no PostgreSQL work inside a scrape), `GET /` a short page linking to it.
 * With a web configuration every request needs its credentials (401 and a WWW-Authenticate
 * challenge otherwise).
 *
 * Entry points: `startMetricsServer`.
 */
import * as http from 'node:http';
import type { AddressInfo } from 'node:net';
import type { Registry } from 'prom-client';
import type { WebAuth } from './web-config.ts';

export interface MetricsServer {
  server: http.Server;
  address: AddressInfo;
  close(): Promise<void>;
}

const LANDING = `<html><head><title>walsim exporter</title></head><body>
<h1>walsim exporter</h1><p>Predicted time to writable of PostgreSQL 15 standbys.</p>
<p><a href="metrics">Metrics</a></p></body></html>
`;

async function handle(
  req: http.IncomingMessage,
  res: http.ServerResponse,
  registry: Registry,
  auth: WebAuth | null,
): Promise<void> {
  if (auth !== null && !(await auth.allows(req.headers.authorization))) {
    res.writeHead(401, {
      'WWW-Authenticate': 'Basic realm="walsim exporter"',
      'Content-Type': 'text/plain; charset=utf-8',
    });
    res.end('Unauthorized\n');
    return;
  }
  const url = new URL(req.url ?? '/', 'http://localhost');
  if (req.method !== 'GET' && req.method !== 'HEAD') {
    res.writeHead(405, { Allow: 'GET, HEAD' }).end();
    return;
  }
  if (url.pathname === '/metrics') {
    const body = await registry.metrics();
    res.writeHead(200, { 'Content-Type': registry.contentType });
    res.end(req.method === 'HEAD' ? undefined : body);
  } else if (url.pathname === '/') {
    res.writeHead(200, { 'Content-Type': 'text/html; charset=utf-8' }).end(LANDING);
  } else res.writeHead(404, { 'Content-Type': 'text/plain' }).end('Not Found\n');
}

export function startMetricsServer(
  host: string,
  port: number,
  registry: Registry,
  auth: WebAuth | null,
): Promise<MetricsServer> {
  const server = http.createServer((req, res) => {
    handle(req, res, registry, auth).catch((e: unknown) => {
      if (!res.headersSent) res.writeHead(500, { 'Content-Type': 'text/plain' });
      res.end(`error: ${(e as Error).message}\n`);
    });
  });
  // A scraper that stalls must not hold a socket forever.
  server.requestTimeout = 30_000;
  server.headersTimeout = 10_000;
  return new Promise((resolve, reject) => {
    server.once('error', reject);
    server.listen(port, host, () => {
      server.off('error', reject);
      resolve({
        server,
        address: server.address() as AddressInfo,
        close: () =>
          new Promise<void>((ok) => {
            server.close(() => ok());
            server.closeAllConnections();
          }),
      });
    });
  });
}
