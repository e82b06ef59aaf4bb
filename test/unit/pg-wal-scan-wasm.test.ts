/**
 * The WebAssembly the pg-wal/ reader runs is its source: pg-wal/scan-wasm-bytes.ts equals
 * pg-wal/scan.wat compiled by the pinned wabt (scripts/package/scan-wasm.ts), so the bytes can
 * always be rebuilt and reviewed as text. And its CRC-32C is PostgreSQL's: equal to the
 * TypeScript one (wal/crc32c.ts) on every length 0–300 and on unaligned starts, and to the
 * published check value of CRC-32C ("123456789" → 0xE3069283).
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

describe('scan.wat', () => {
  it('scan-wasm-bytes.ts is scan.wat compiled, byte for byte', async () => {
    const bytes = await compileScanWat(fs.readFileSync(SCAN_WAT, 'utf8'));
    expect(Buffer.from(SCAN_WASM_BASE64, 'base64').equals(Buffer.from(bytes))).toBe(true);
    expect(fs.readFileSync(SCAN_BYTES_TS, 'utf8')).toBe(scanWasmModuleText(bytes));
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
