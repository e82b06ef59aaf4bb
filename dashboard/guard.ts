/**
 * Who may use the dashboard (dashboard/README.md, INV-DASH-4 to 6): the Host check against DNS
 * rebinding on loopback, the cluster's password (HTTP Basic) on every request whenever the cluster
 * has one (required off loopback), the page's token and this server's Origin for actions and the
 * socket. Comparisons of secrets are constant-time.
 *
 * Entry points: `Guard`, `isLoopback`.
 */
import { timingSafeEqual } from 'node:crypto';
import type * as http from 'node:http';

export const isLoopback = (addr: string) =>
  addr === '127.0.0.1' || addr === '::1' || addr === 'localhost' || addr.startsWith('127.');

function safeEqual(a: string, b: string): boolean {
  const x = Buffer.from(a);
  const y = Buffer.from(b);
  return x.length === y.length && timingSafeEqual(x, y);
}

/** A refused request: the HTTP status and the message (401 also asks for the password). */
export type Refusal = [status: number, message: string];

export class Guard {
  /** Set once the server listens (a free port is known only then). */
  port = 0;

  constructor(
    private readonly listen: string,
    private readonly password: string | null,
    readonly token: string,
  ) {
    if (!isLoopback(listen) && password === null)
      throw new Error(
        `--listen ${listen} opens the dashboard to other hosts: it needs the cluster's password (start the cluster with --password, and give the dashboard --password)`,
      );
  }

  /** Why this request may not proceed at all, or null. */
  refusal(req: http.IncomingMessage): Refusal | null {
    const host = req.headers.host ?? '';
    if (isLoopback(this.listen) && !this.allowedHosts().has(host))
      return [
        421,
        `unknown Host "${host.slice(0, 100)}": this dashboard answers to 127.0.0.1:${this.port}`,
      ];
    if (this.password !== null && !this.passwordGiven(req)) return [401, 'password required'];
    return null;
  }

  /** A browser's cross-site request carries another Origin; tools send none. */
  originOk(req: http.IncomingMessage): boolean {
    const origin = req.headers.origin;
    return origin === undefined || origin === `http://${req.headers.host}`;
  }

  tokenOk(given: unknown): boolean {
    return typeof given === 'string' && safeEqual(given, this.token);
  }

  private allowedHosts(): Set<string> {
    const p = this.port;
    return new Set([`127.0.0.1:${p}`, `localhost:${p}`, `[::1]:${p}`, `${this.listen}:${p}`]);
  }

  /** HTTP Basic with any user name and the cluster's password. */
  private passwordGiven(req: http.IncomingMessage): boolean {
    const m = /^Basic ([A-Za-z0-9+/=]{1,1000})$/.exec(req.headers.authorization ?? '');
    if (!m) return false;
    const given = Buffer.from(m[1]!, 'base64').toString('utf8');
    return given.includes(':') && safeEqual(given.slice(given.indexOf(':') + 1), this.password!);
  }
}
