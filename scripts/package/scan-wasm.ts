/**
 * Rebuilds pg-wal/scan-wasm-bytes.ts from pg-wal/scan.wat with wabt (a devDependency), so the
 * WebAssembly the reader runs is always the text beside it: `npx tsx
 * scripts/package/scan-wasm.ts` after editing the .wat; test/unit/pg-wal-scan-wasm.test.ts
 * fails while the two differ. The bytes ship as base64 inside a .ts module, so the bundled
 * `walsim` (one file) carries them without a file to find at run time.
 *
 * Entry points: `compileScanWat`, `scanWasmModuleText` (and running the file writes it).
 */
import * as fs from 'node:fs';
import * as path from 'node:path';
import { fileURLToPath } from 'node:url';
import wabtInit from 'wabt';

const ROOT = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');
export const SCAN_WAT = path.join(ROOT, 'pg-wal/scan.wat');
export const SCAN_BYTES_TS = path.join(ROOT, 'pg-wal/scan-wasm-bytes.ts');

/** The .wat compiled as wat2wasm does by default (no names section: the same bytes each time). */
export async function compileScanWat(watText: string): Promise<Uint8Array> {
  const wabt = await wabtInit();
  // threads: the memory is shared with the CRC worker thread (validate takes the features too,
  // which wabt's typings leave out).
  const threads = { threads: true };
  const mod = wabt.parseWat('scan.wat', watText, threads);
  try {
    (mod as unknown as { validate(features: typeof threads): void }).validate(threads);
    return mod.toBinary({ write_debug_names: false }).buffer;
  } finally {
    mod.destroy();
  }
}

/** The text of scan-wasm-bytes.ts for these bytes. */
export function scanWasmModuleText(bytes: Uint8Array): string {
  const b64 = Buffer.from(bytes).toString('base64');
  const lines = b64.match(/.{1,96}/g) ?? [];
  return [
    '/**',
    ' * GENERATED from scan.wat by scripts/package/scan-wasm.ts: do not edit; edit the .wat and',
    ' * run that file. test/unit/pg-wal-scan-wasm.test.ts checks that these bytes are the .wat.',
    ' *',
    ' * Entry point: `SCAN_WASM_BASE64`.',
    ' */',
    'export const SCAN_WASM_BASE64 =',
    ...lines.map((l, i) => `  '${l}'${i === lines.length - 1 ? ';' : ' +'}`),
    '',
  ].join('\n');
}

if (
  process.argv[1] !== undefined &&
  path.resolve(process.argv[1]) === fileURLToPath(import.meta.url)
) {
  const bytes = await compileScanWat(fs.readFileSync(SCAN_WAT, 'utf8'));
  fs.writeFileSync(SCAN_BYTES_TS, scanWasmModuleText(bytes));
  console.log(`${path.relative(ROOT, SCAN_BYTES_TS)}: ${bytes.length} bytes of WebAssembly`);
}
