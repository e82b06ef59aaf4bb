/**
 * Reading the data image (layout and format: data-image.ts's header): `readDataImageRedoLsn`
 * reads only the header and is safe beside a running image writer; `readDataImage` loads the
 * whole image at a start and removes the files its header does not name (an interrupted image's
 * leftovers), so it must not run while the node's image writer may be running.
 */
import * as path from 'node:path';
import { fail } from '../common/assert.ts';
import { readTextFile, type Disk } from '../common/disk.ts';
import type { CatalogSnapshot } from './catalog.ts';
import { HEADER_FILE, type DataImageHeader } from './data-image.ts';
import { ascendingIndex, ImageState, INDEX_STRIDE, imageFile } from './data-image-state.ts';
import type { RelFileNumber } from '../wal/records.ts';
import type { Lsn } from '../wal/lsn.ts';

/** The image's directory (base/, or format 1's base.old) and header: reads only, changes nothing. */
function readImageHeader(dataDir: string, disk: Disk): { base: string; header: DataImageHeader } {
  let base = path.join(dataDir, 'base');
  // Format 1: a crash between the two renames of the directory swap leaves only base.old.
  if (!disk.exists(imageFile(base, HEADER_FILE))) base = path.join(dataDir, 'base.old');
  const headerPath = imageFile(base, HEADER_FILE);
  if (!disk.exists(headerPath))
    fail(`INV-NODE-1: no data image in ${dataDir} (base/image.json missing)`);
  return { base, header: JSON.parse(readTextFile(disk, headerPath)) as DataImageHeader };
}

/**
 * The REDO LSN of the image on disk, without loading it. Safe on the data directory of a running
 * node (an image may be being written): `readDataImage` is for a start only, since it removes
 * every file the current header does not name, which includes the files of an image in progress.
 */
export function readDataImageRedoLsn(dataDir: string, disk: Disk): Lsn {
  return readImageHeader(dataDir, disk).header.redoLsn;
}

/**
 * Read the image of `dataDir` at a start: its header, every relation's bytes, smgr and CLOG bytes,
 * and the state. Removes the files the header does not name (leftovers of an interrupted image), so
 * it must not run while the node's image writer may be running.
 */
export function readDataImage(
  dataDir: string,
  disk: Disk,
): {
  header: DataImageHeader;
  relations: Array<[RelFileNumber, Uint8Array]>;
  smgr: Uint8Array;
  clog: Uint8Array;
  state: ImageState;
} {
  const { base, header } = readImageHeader(dataDir, disk);
  const read = (name: string) => disk.readFile(imageFile(base, name));
  if (header.format !== 2) {
    const rels = header.relations ?? [];
    const state = ImageState.empty();
    state.legacyFiles = [...rels.map(String), 'smgr', 'pg_xact'];
    return {
      header,
      relations: rels.map((rel) => [rel, read(String(rel))]),
      smgr: read('smgr'),
      clog: read('pg_xact'),
      state,
    };
  }
  const index = ascendingIndex(new Float64Array(read(header.index!).slice().buffer));
  const state = new ImageState(
    header.generation!,
    index,
    new Map(),
    new Map(),
    [header.index!, header.smgr!, header.clog!, header.catalogTables!],
    [],
  );
  header.catalog = {
    ...header.catalog,
    tables: JSON.parse(
      readTextFile(disk, imageFile(base, header.catalogTables!)),
    ) as CatalogSnapshot['tables'],
  };
  const packs = new Map<number, Uint8Array>();
  const relations: Array<[RelFileNumber, Uint8Array]> = [];
  for (let i = 0; i < index.length; i += INDEX_STRIDE) {
    const [rel, pack, offset, length] = [index[i]!, index[i + 1]!, index[i + 2]!, index[i + 3]!];
    let bytes = packs.get(pack);
    if (bytes === undefined) {
      bytes = read(`rels.${pack}`);
      packs.set(pack, bytes);
    }
    if (!(offset + length <= bytes.length))
      fail(`INV-IMAGE-2: relation ${rel} lies beyond the end of rels.${pack}`);
    relations.push([rel, bytes.subarray(offset, offset + length)]);
    state.packLive.set(pack, (state.packLive.get(pack) ?? 0) + 1);
  }
  // A pack's total is not recorded: count what lives now (compaction then starts from there).
  for (const [pack, live] of state.packLive) state.packTotal.set(pack, live);
  // Files of an image that crashed before its switch, or not yet removed after it: garbage.
  const keep = new Set([HEADER_FILE, ...state.files, ...[...packs.keys()].map((p) => `rels.${p}`)]);
  for (const name of disk.readdir(base)) if (!keep.has(name)) disk.rmrf(imageFile(base, name));
  return { header, relations, smgr: read(header.smgr!), clog: read(header.clog!), state };
}
