/**
 * libpq connection strings (scripts/postgres/conninfo.ts): both forms parsed by libpq's rules, the
 * node-postgres config made from them, and the one redaction every predict output goes through.
 */
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { expect, it } from 'vitest';
import {
  parseConninfo,
  pgClientConfig,
  redact,
  redactConninfo,
  redactValue,
  rememberSecrets,
} from '../../scripts/postgres/conninfo.ts';
import { appendAccuracy, type AccuracyEntry } from '../../scripts/predict/verify.ts';

it('parses URIs as libpq: userinfo, percent-encoding, hosts, IPv6, query keywords', () => {
  expect(
    parseConninfo('postgresql://us%65r:p%40ss@db.example:6432/my%20db?sslmode=require&password=q')
      .params,
  ).toEqual({
    user: 'user',
    password: 'q', // a query keyword wins over the userinfo (libpq stores both in order)
    host: 'db.example',
    port: '6432',
    dbname: 'my db',
    sslmode: 'require',
  });
  expect(parseConninfo('postgresql://:pw@h').params).toEqual({ password: 'pw', host: 'h' });
  expect(parseConninfo('postgres://[::1]:5433').params).toEqual({ host: '::1', port: '5433' });
  expect(parseConninfo('postgresql://').params).toEqual({});
  expect(parseConninfo('postgresql://h/?ssl=true').params).toEqual({
    host: 'h',
    sslmode: 'require',
  });
  // libpq ends the userinfo at the first '@' before any '/'.
  expect(parseConninfo('postgresql://u:a@b@h/d').params).toMatchObject({
    user: 'u',
    password: 'a',
    host: 'b@h',
  });
  expect(() => parseConninfo('postgresql://u:%zz@h')).toThrow(/invalid percent-encoded token/);
  expect(() => parseConninfo('postgresql://h?nosuch=1')).toThrow(
    /invalid connection option "nosuch"/,
  );
  expect(() => parseConninfo('postgresql://h?password')).toThrow(/missing key\/value separator/);
});

it('parses keyword/value as libpq: quotes, backslashes, spaces around =', () => {
  expect(
    parseConninfo(
      "host=127.0.0.1 port = 5433 user=postgres password='a b\\'c' dbname=x\\ y application_name=''",
    ).params,
  ).toEqual({
    host: '127.0.0.1',
    port: '5433',
    user: 'postgres',
    password: "a b'c",
    dbname: 'x y',
    application_name: '',
  });
  expect(() => parseConninfo("host=h password='open")).toThrow(/unterminated quoted string/);
  expect(() => parseConninfo('justaword')).toThrow(/missing "=" after "justaword"/);
  expect(() => parseConninfo('host=h nosuch=1')).toThrow(/invalid connection option "nosuch"/);
  // The error never shows the password.
  expect(() => parseConninfo("host=h password='Hidden99' bogus")).toThrow(/password=\*\*\*/);
  try {
    parseConninfo("host=h password='Hidden99' bogus");
  } catch (e) {
    expect((e as Error).message).not.toContain('Hidden99');
  }
});

it('makes a node-postgres config: sslmode as libpq means it, one host, connect_timeout', () => {
  const base = { application_name: 'app', connectTimeoutS: 10 };
  const c = pgClientConfig(parseConninfo('host=h port=5433 user=u dbname=d sslmode=require'), base);
  expect(c).toMatchObject({ host: 'h', port: 5433, user: 'u', database: 'd' });
  expect(c.ssl).toEqual({ rejectUnauthorized: false });
  expect(pgClientConfig(parseConninfo('host=h'), base).ssl).toBe(false); // prefer: plain
  expect(
    pgClientConfig(parseConninfo('host=h connect_timeout=1'), base).connectionTimeoutMillis,
  ).toBe(2000);
  expect(() => pgClientConfig(parseConninfo('host=a,b'), base)).toThrow(/several hosts/);
  expect(() => pgClientConfig(parseConninfo('host=h port=x'), base)).toThrow(/invalid port number/);
  expect(() => pgClientConfig(parseConninfo('host=h sslmode=maybe'), base)).toThrow(
    /invalid sslmode value/,
  );
});

it('redacts every form structurally', () => {
  const r = (s: string) => redactConninfo(s);
  expect(r('to postgresql://u:pw@h:1/d now')).toBe('to postgresql://u:***@h:1/d now');
  expect(r('postgresql://:pw@h')).toBe('postgresql://:***@h');
  expect(r('postgresql://u:p@ss@h/d?x=1')).toBe('postgresql://u:***@h/d?x=1');
  expect(r('postgresql://u:a/b@h/d')).toBe('postgresql://u:***@h/d');
  expect(r('postgres://u@h/d?sslmode=disable&password=q1&pass%77ord=q2')).toBe(
    'postgres://u@h/d?sslmode=disable&password=***&pass%77ord=***',
  );
  expect(r("host=h password='a b' port=1 sslpassword=x\\ y user=u")).toBe(
    'host=h password=*** port=1 sslpassword=*** user=u',
  );
  expect(r('password authentication failed for user "u"')).toBe(
    'password authentication failed for user "u"',
  );
});

it('redacts remembered passwords wherever they appear, raw, encoded or JSON-escaped', () => {
  rememberSecrets('postgresql://u:Tail@Pw"9@h/d');
  rememberSecrets("host=h password='Spaced pw'");
  expect(redact('host "Pw"9@h" not found')).not.toMatch(/Pw"9/);
  expect(redact('said Spaced%20pw and Spaced pw')).toBe('said *** and ***');
  const v = redactValue({ a: ['x Tail@Pw"9 y'], b: 1, c: { d: 'Spaced pw' } });
  expect(JSON.stringify(v)).not.toMatch(/Tail|Spaced/);
  expect(v.b).toBe(1);
});

it('writes the accuracy log redacted and mode 0600', () => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'walsim-acc-'));
  try {
    const file = path.join(dir, 'sub', 'acc.jsonl');
    appendAccuracy(file, {
      at: 'now',
      standby: 'postgresql://u@h/d?password=LogPw77',
    } as unknown as AccuracyEntry);
    expect(fs.statSync(file).mode & 0o777).toBe(0o600);
    expect(fs.readFileSync(file, 'utf8')).not.toContain('LogPw77');
  } finally {
    fs.rmSync(dir, { recursive: true, force: true });
  }
});
