/**
 * Authentication: SCRAM-SHA-256 done here (RFC 5802/7677 with node:crypto; pg-gateway 0.2.4 has no
 * SASL), md5 through pg-gateway's `PostgresConnection`, which walsim subclasses only to send
 * PostgreSQL's post-authentication sequence instead of its own.
 */
import { createHash, createHmac, pbkdf2Sync, randomBytes, timingSafeEqual } from 'node:crypto';
import { hashMd5Password, PostgresConnection, type PostgresConnectionOptions } from 'pg-gateway';
import type { PgPassword } from '../cluster-files.ts';
import { PG_SERVER_VERSION } from '../settings.ts';
import { BodyReader, FatalError, protocolViolation } from './framing.ts';

/**
 * A SCRAM-SHA-256 verifier (RFC 5802/7677), computed once per server start like the one PostgreSQL
 * stores in pg_authid: salt, iterations, StoredKey, ServerKey.
 */
export interface ScramVerifier {
  salt: Buffer;
  iterations: number;
  storedKey: Buffer;
  serverKey: Buffer;
}

const hmac = (key: Buffer, text: string) => createHmac('sha256', key).update(text).digest();

export function scramVerifier(
  password: string,
  salt = randomBytes(16),
  iterations = 4096,
): ScramVerifier {
  // walsim passes the password through as is (PostgreSQL applies SASLprep, a no-op for ASCII).
  const salted = pbkdf2Sync(password, salt, iterations, 32, 'sha256');
  return {
    salt,
    iterations,
    storedKey: createHash('sha256').update(hmac(salted, 'Client Key')).digest(),
    serverKey: hmac(salted, 'Server Key'),
  };
}

/** One SCRAM-SHA-256 exchange (auth-scram.c): client-first → server-first → client-final → server-final. */
export class ScramExchange {
  private clientFirstBare = '';
  private serverFirst = '';
  private nonce = '';
  private gs2Header = '';
  constructor(private readonly verifier: ScramVerifier) {}

  /** SASLInitialResponse: mechanism, then client-first-message. Returns server-first-message. */
  first(body: Buffer): string {
    const r = new BodyReader(body, 'SASLInitialResponse');
    const mechanism = r.cstring();
    if (mechanism !== 'SCRAM-SHA-256') {
      throw new FatalError(
        '28000',
        `client selected an invalid SASL authentication mechanism "${mechanism}" (walsim offers SCRAM-SHA-256 only)`,
      );
    }
    const len = r.int32();
    if (len < 0)
      throw protocolViolation('malformed SCRAM message: the client-first-message is missing');
    const message = r.bytes(len).toString('utf8');
    r.end();
    // gs2-header: "n,," (no channel binding) or "y,," (client could but server does not); "p=" needs TLS.
    const m = /^([ny]),(?:a=[^,]*)?,(n=[^,]*,r=([^,]+)(?:,.*)?)$/.exec(message);
    if (m === null) {
      if (message.startsWith('p='))
        throw new FatalError(
          '28000',
          'channel binding is not supported: walsim has no TLS (connect with channel_binding=disable)',
        );
      throw protocolViolation(
        `malformed SCRAM message: unexpected client-first-message "${message}"`,
      );
    }
    this.gs2Header = message.slice(0, message.length - m[2]!.length);
    this.clientFirstBare = m[2]!;
    this.nonce = m[3]! + randomBytes(18).toString('base64');
    this.serverFirst = `r=${this.nonce},s=${this.verifier.salt.toString('base64')},i=${this.verifier.iterations}`;
    return this.serverFirst;
  }

  /** SASLResponse: client-final-message. Returns server-final-message, or null for a wrong password. */
  final(body: Buffer): string | null {
    const message = body.toString('utf8');
    const m = /^c=([^,]*),r=([^,]*)(?:,.*)?,p=([A-Za-z0-9+/=]+)$/.exec(message);
    if (m === null)
      throw protocolViolation('malformed SCRAM message: unexpected client-final-message');
    if (Buffer.from(m[1]!, 'base64').toString('utf8') !== this.gs2Header)
      throw protocolViolation('malformed SCRAM message: unexpected channel-binding data');
    if (m[2] !== this.nonce)
      throw protocolViolation('malformed SCRAM message: the nonce does not match');
    const withoutProof = message.slice(0, message.lastIndexOf(',p='));
    const authMessage = `${this.clientFirstBare},${this.serverFirst},${withoutProof}`;
    const proof = Buffer.from(m[3]!, 'base64');
    const signature = hmac(this.verifier.storedKey, authMessage);
    if (proof.length !== signature.length) return null;
    const clientKey = Buffer.alloc(proof.length);
    for (let i = 0; i < proof.length; i++) clientKey[i] = proof[i]! ^ signature[i]!;
    if (!timingSafeEqual(createHash('sha256').update(clientKey).digest(), this.verifier.storedKey))
      return null;
    return `v=${hmac(this.verifier.serverKey, authMessage).toString('base64')}`;
  }
}

/** pg-gateway's connection with PostgreSQL's post-authentication sequence instead of its own. */
export class GatewayConnection extends PostgresConnection {
  afterAuthentication: () => void = () => {};
  override async completeAuthentication(): Promise<void> {
    this.isAuthenticated = true;
    this.sendAuthenticationOk();
    this.afterAuthentication(); // ParameterStatus..., BackendKeyData, ReadyForQuery
  }
}

/**
 * pg-gateway's options for a session: md5 checked against the password (timing-safe), or "none"
 * when SCRAM (done before pg-gateway sees the start-up packet) or trust applies.
 */
export function gatewayOptions(password: PgPassword | null): PostgresConnectionOptions {
  return {
    serverVersion: PG_SERVER_VERSION,
    // SCRAM is done here (pg-gateway 0.2.4 has no SASL): pg-gateway sees the start-up packet only
    // once the exchange succeeded, and then completes authentication without a password.
    authMode: password?.passwordEncryption === 'md5' ? 'md5Password' : 'none',
    validateCredentials: async (cred) => {
      if (cred.authMode !== 'md5Password' || password === null) return false;
      if (password.passwordEncryption !== 'md5') return false;
      const expected = Buffer.from(await hashMd5Password(cred.user, password.password, cred.salt));
      const given = Buffer.from(cred.hash);
      return expected.length === given.length && timingSafeEqual(expected, given);
    },
  };
}
