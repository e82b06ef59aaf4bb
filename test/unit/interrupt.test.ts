/**
 * INV-SCRIPTS-3's race: Ctrl-C stops a server mid-start, the run rejects with that server's exit
 * while the clean-up is still stopping the rest. The CLI must finish the clean-up and exit 130,
 * not print the run's error and exit 1 (the fresh-clone CI once saw exactly that).
 */
import { spawn } from 'node:child_process';
import * as path from 'node:path';
import { expect, it } from 'vitest';

it('a run that fails because of its own Ctrl-C clean-up exits 130 after the clean-up', async () => {
  const child = spawn(
    process.execPath,
    ['--import', 'tsx', path.resolve(import.meta.dirname, '../fixtures/interrupt-race.ts')],
    { stdio: ['ignore', 'pipe', 'pipe'] },
  );
  let stdout = '';
  let stderr = '';
  child.stderr.on('data', (d) => (stderr += d));
  const ready = new Promise<void>((resolve) =>
    child.stdout.on('data', (d) => {
      stdout += d;
      if (stdout.includes('ready')) resolve();
    }),
  );
  const exited = new Promise<number | null>((resolve) => child.on('close', resolve));
  await ready;
  child.kill('SIGINT');
  expect(await exited, stderr).toBe(130);
  expect(stdout).toContain('cleaned up');
  expect(stderr).not.toContain('exited during start');
}, 30_000);
