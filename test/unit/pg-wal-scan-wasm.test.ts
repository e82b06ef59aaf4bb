/**
 * The WebAssembly the pg-wal/ reader runs is its source: pg-wal/scan-wasm-bytes.ts equals
 * pg-wal/scan.wat compiled by the pinned wabt (scripts/package/scan-wasm.ts), so the bytes can
 * always be rebuilt and reviewed as text. And its CRC-32C is PostgreSQL's: the published check
 * value ("123456789" → 0xE3069283) and RFC 3720's vectors; equal to the TypeScript one
 * (wal/crc32c.ts, checked bit by bit in wal-crc32c.test.ts) from random states at every length
 * 0–1,100 and at random lengths up to 100,000, each at all 32 alignments (every step of the
 * slice-by-16 loop and of the one step for the 0–15 bytes left); a record's xl_crc accepted
 * exactly when right, a single flipped bit anywhere in the record refused.
 */
import * as fs from 'node:fs';
import { describe, expect, it } from 'vitest';
import { SCAN_WASM_BASE64 } from '../../pg-wal/scan-wasm-bytes.ts';
import { ScanMemory } from '../../pg-wal/scan-wasm.ts';
import { recordCrcOk } from '../../pg-wal/record.ts';
import {
  compileScanWat,
  scanWasmModuleText,
  SCAN_BYTES_TS,
  SCAN_WAT,
} from '../../scripts/package/scan-wasm.ts';
import { crc32c, crc32cFinish, crc32cUpdate, CRC32C_INIT } from '../../wal/crc32c.ts';

/** Fills `b` with pseudo-random bytes (a fixed seed: the same bytes every run). */
function randomFill(b: Buffer, seed: number): void {
  for (let i = 0; i < b.length; i++) {
    seed = (Math.imul(seed, 1103515245) + 12345) >>> 0;
    b[i] = seed >>> 24;
  }
}

/** Lengths 0–1,100, then `extra` pseudo-random ones up to `max`. */
function lengths(extra: number, max: number): number[] {
  const out = Array.from({ length: 1101 }, (_, i) => i);
  let seed = 99;
  for (let k = 0; k < extra; k++) {
    seed = (Math.imul(seed, 1103515245) + 12345) >>> 0;
    out.push(seed % (max + 1));
  }
  return out;
}

describe('scan.wat', () => {
  it('scan-wasm-bytes.ts is scan.wat compiled, byte for byte', async () => {
    const bytes = await compileScanWat(fs.readFileSync(SCAN_WAT, 'utf8'));
    expect(Buffer.from(SCAN_WASM_BASE64, 'base64').equals(Buffer.from(bytes))).toBe(true);
    expect(fs.readFileSync(SCAN_BYTES_TS, 'utf8')).toBe(scanWasmModuleText(bytes));
  });

  it("the WebAssembly COMP_CRC32C is PostgreSQL's: published vectors, every length and alignment", () => {
    const mem = new ScanMemory(128 * 1024);
    const win = mem.windows[0];
    const crc = (bytes: ArrayLike<number>) => {
      win.set(bytes, 5);
      return crc32cFinish(mem.crc32cUpdate(CRC32C_INIT, win, 5, 5 + bytes.length));
    };
    expect(crc(Buffer.from('123456789'))).toBe(0xe3069283);
    expect(crc([])).toBe(0);
    expect(crc(new Uint8Array(32))).toBe(0x8a9136aa);
    expect(crc(new Uint8Array(32).fill(0xff))).toBe(0x62a8ab43);
    expect(crc(Uint8Array.from({ length: 32 }, (_, i) => i))).toBe(0x46dd794e);
    expect(crc(Uint8Array.from({ length: 32 }, (_, i) => 31 - i))).toBe(0x113fdb5c);
    randomFill(win, 7);
    const copy = Buffer.from(win); // outside the memory: the TypeScript CRC
    const wrong: string[] = [];
    let state = 0x12345678;
    for (const len of lengths(150, 100_000))
      for (let a = 0; a < 32; a++) {
        state = (Math.imul(state, 1103515245) + 12345) >>> 0;
        const got = mem.crc32cUpdate(state, win, a, a + len);
        const want = crc32cUpdate(state, copy, a, a + len);
        if (got !== want) wrong.push(`length ${len} at ${a} from ${state}: ${got} != ${want}`);
      }
    expect(wrong).toEqual([]);
  });

  it('a record of any length at any alignment: right xl_crc accepted, any one flipped bit refused', () => {
    const mem = new ScanMemory(128 * 1024);
    const win = mem.windows[0];
    randomFill(win, 11);
    const wrong: string[] = [];
    let seed = 5;
    for (const len of lengths(100, 100_000).filter((l) => l >= 24 && (l < 400 || l % 3 === 0)))
      for (let a = 0; a < 32; a++) {
        let c = crc32cUpdate(CRC32C_INIT, win, a + 24, a + len);
        c = crc32cFinish(crc32cUpdate(c, win, a, a + 20));
        win.writeUInt32LE(c, a + 20);
        if (!mem.recordCrcOk(win, a, len)) wrong.push(`length ${len} at ${a} refused`);
        seed = (Math.imul(seed, 1103515245) + 12345) >>> 0;
        const bit = seed % (len * 8);
        const p = a + (bit >> 3);
        win[p] = win[p]! ^ (1 << (bit & 7));
        if (mem.recordCrcOk(win, a, len)) wrong.push(`length ${len} at ${a}, bit ${bit} flipped`);
        win[p] = win[p]! ^ (1 << (bit & 7));
      }
    expect(wrong).toEqual([]);
  });

  it("the WebAssembly CRC-32C of a record is PostgreSQL's, at every length and alignment", () => {
    const mem = new ScanMemory(64 * 1024);
    const win = mem.windows[0];
    expect(crc32c(Buffer.from('123456789'))).toBe(0xe3069283);
    let seed = 12345;
    for (let i = 0; i < win.length; i++) {
      seed = (seed * 1103515245 + 12345) >>> 0;
      win[i] = seed >>> 24;
    }
    const copy = Buffer.from(win); // outside the memory: the TypeScript CRC
    for (let len = 24; len <= 300; len++)
      for (const off of [0, 1, 3, 8, 13]) {
        // A record whose xl_crc is right, then one whose xl_crc is off by one bit.
        let c = crc32cUpdate(CRC32C_INIT, copy, off + 24, off + len);
        c = crc32cFinish(crc32cUpdate(c, copy, off, off + 20));
        for (const b of [win, copy]) b.writeUInt32LE(c, off + 20);
        expect([mem.recordCrcOk(win, off, len), recordCrcOk(copy, off, len)]).toEqual([true, true]);
        for (const b of [win, copy]) b.writeUInt32LE((c ^ 1) >>> 0, off + 20);
        expect([mem.recordCrcOk(win, off, len), recordCrcOk(copy, off, len)]).toEqual([
          false,
          false,
        ]);
      }
  });
});
