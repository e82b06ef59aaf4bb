/**
 * The exporter's HTTP side: `GET /metrics` in Prometheus's text format (the page serves the last
 * cycle's text as the cycle thread rendered it, after the live process series: no PostgreSQL
 * work and no cycle work inside a scrape), `GET /` a short page linking to it. Each answer of
 * /metrics says how long this thread took to build it (`Server-Timing: render;dur=<ms>`), so a
 * slow scrape can be told apart from a slow build. With a web configuration every request needs
 * its credentials (401 and a WWW-Authenticate challenge otherwise).
 *
 * Entry points: `startMetricsServer`.
 */
import * as http from 'node:http';
import type { AddressInfo } from 'node:net';
import type { MetricsPage } from './metrics.ts';
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
  page: MetricsPage,
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
    const t0 = performance.now();
    const body = await page.render();
    res.writeHead(200, {
      'Content-Type': page.contentType,
      'Server-Timing': `render;dur=${(performance.now() - t0).toFixed(3)}`,
    });
    res.end(req.method === 'HEAD' ? undefined : body);
  } else if (url.pathname === '/') {
    res.writeHead(200, { 'Content-Type': 'text/html; charset=utf-8' }).end(LANDING);
  } else res.writeHead(404, { 'Content-Type': 'text/plain' }).end('Not Found\n');
}

export function startMetricsServer(
  host: string,
  port: number,
  page: MetricsPage,
  auth: WebAuth | null,
): Promise<MetricsServer> {
  const server = http.createServer((req, res) => {
    handle(req, res, page, auth).catch((e: unknown) => {
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
