/**
 * The production binding of `Disk` (common/disk.ts): node:fs, with real fsyncs. Bound only at the
 * edges — the server process (server/main.ts), the CLIs and the tests that use real directories;
 * the node core never imports it (test/unit/layering.test.ts), so nothing in it can fall back to
 * the real file system when the simulator runs it.
 */
import * as fs from 'node:fs';
import type { Disk } from './disk.ts';

/** node:fs. */
export const nodeDisk: Disk = {
  open: (p, flags, mode) => fs.openSync(p, flags, mode),
  read: (fd, buf, offset, length, position) => fs.readSync(fd, buf, offset, length, position),
  write: (fd, buf, offset, length, position) => fs.writeSync(fd, buf, offset, length, position),
  fsync: (fd) => fs.fsyncSync(fd),
  close: (fd) => fs.closeSync(fd),
  fsyncDir(p) {
    const fd = fs.openSync(p, 'r');
    try {
      fs.fsyncSync(fd);
    } finally {
      fs.closeSync(fd);
    }
  },
  exists: (p) => fs.existsSync(p),
  mkdirp: (p, mode) =>
    void fs.mkdirSync(p, mode === undefined ? { recursive: true } : { recursive: true, mode }),
  readdir: (p) => fs.readdirSync(p),
  size: (p) => fs.statSync(p).size,
  truncate: (p, length) => fs.truncateSync(p, length),
  rename: (from, to) => fs.renameSync(from, to),
  rmrf: (p) => fs.rmSync(p, { recursive: true, force: true }),
  readFile: (p) => new Uint8Array(fs.readFileSync(p)),
  writeFile: (p, data, mode) =>
    fs.writeFileSync(p, data, mode === undefined ? undefined : { mode }),
  copyTree: (from, to) => fs.cpSync(from, to, { recursive: true }),
  isDirectory: (p) => fs.statSync(p).isDirectory(),
  async openAsync(p, flags, mode) {
    const fh = await fs.promises.open(p, flags, mode);
    return {
      writev: async (chunks) => void (await fh.writev(chunks)),
      writeFile: (data) => fh.writeFile(data),
      sync: () => fh.sync(),
      close: () => fh.close(),
    };
  },
  renameAsync: (from, to) => fs.promises.rename(from, to),
  rmrfAsync: (p) => fs.promises.rm(p, { force: true, recursive: true }),
};
