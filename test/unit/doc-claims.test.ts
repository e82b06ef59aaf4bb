/**
 * The documents' claims about the repository are true: every repository path a README.md (any
 * folder), BENCHMARKS.md, RELIABILITY.md or docs/ names exists, every `npm run` command they show
 * is a script of package.json, every section cited by name in a README, BENCHMARKS.md or
 * RELIABILITY.md is a heading there, every folder README has its Invariants section (or says there
 * it has none), the root README's tour names every top-level folder, and no document or source
 * file names a ticket number in place of what it means (a reader has no tracker). The claims are
 * read from the text by test/helpers/doc-claims.ts; a failure lists each false claim as
 * document:line. The last block proves the checks can fail, on documents written for it in a
 * temporary directory.
 */
import * as fs from 'node:fs';
import * as os from 'node:os';
import * as path from 'node:path';
import { afterAll, describe, expect, it } from 'vitest';
import {
  documents,
  hasInvariantsSection,
  npmRunClaims,
  pathClaims,
  repositoryFiles,
  repositoryFolders,
  hasSection,
  resolves,
  sectionClaims,
  ticketMentions,
  tourFolders,
  type DocFile,
} from '../helpers/doc-claims.ts';

const ROOT = path.resolve(import.meta.dirname, '../..');

interface Checked {
  tickets: string[];
  missingSections: string[];
  missingPaths: string[];
  unknownScripts: string[];
  withoutInvariants: string[];
  notInTour: string[];
}

/** Every check over the tree at `root`; each list holds the false claims, as document:line. */
function checkTree(root: string): Checked {
  const files = repositoryFiles(root);
  const fileSet = new Set(files);
  const folders = repositoryFolders(files);
  const scripts = JSON.parse(fs.readFileSync(path.join(root, 'package.json'), 'utf8')).scripts;
  const docs: DocFile[] = documents(files).map((rel) => ({
    rel,
    text: fs.readFileSync(path.join(root, rel), 'utf8'),
  }));
  const out: Checked = {
    tickets: [],
    missingSections: [],
    missingPaths: [],
    unknownScripts: [],
    withoutInvariants: [],
    notInTour: [],
  };
  const read = (rel: string): string => fs.readFileSync(path.join(root, rel), 'utf8');
  for (const rel of files.filter(
    (f) => /\.(md|ts|js)$/.test(f) && !f.startsWith('test/fixtures/'),
  )) {
    const text = read(rel);
    out.tickets.push(...ticketMentions(rel, text));
    for (const c of sectionClaims(rel, text, fileSet)) {
      if (!fileSet.has(c.cited) || !hasSection(read(c.cited), c.section))
        out.missingSections.push(`${c.doc}:${c.line} ${c.cited} "${c.section}"`);
    }
  }
  for (const doc of docs) {
    for (const c of pathClaims(doc, folders))
      if (!resolves(c, fileSet, root)) out.missingPaths.push(`${c.doc}:${c.line} ${c.path}`);
    for (const c of npmRunClaims(doc))
      if (!Object.hasOwn(scripts, c.script))
        out.unknownScripts.push(`${c.doc}:${c.line} npm run ${c.script}`);
    const folderReadme = doc.rel.endsWith('/README.md');
    if (folderReadme && !hasInvariantsSection(doc.text)) out.withoutInvariants.push(doc.rel);
  }
  const rootReadme = docs.find((d) => d.rel === 'README.md');
  const toured = new Set(rootReadme === undefined ? [] : tourFolders(rootReadme.text));
  for (const f of folders) {
    if (!f.includes('/') && !f.startsWith('.') && !toured.has(f)) out.notInTour.push(f);
  }
  return out;
}

describe('the documents tell the truth about the repository', () => {
  const checked = checkTree(ROOT);

  it('every repository path a README, BENCHMARKS.md, RELIABILITY.md or docs/ names exists', () => {
    expect(checked.missingPaths).toEqual([]);
  });

  it('no document, comment or test names a ticket number instead of saying what it means', () => {
    expect(checked.tickets).toEqual([]);
  });

  it('every section cited by name in a README, BENCHMARKS.md or RELIABILITY.md is there', () => {
    expect(checked.missingSections).toEqual([]);
  });

  it('every `npm run` command they show is a script of package.json', () => {
    expect(checked.unknownScripts).toEqual([]);
  });

  it('every folder README has an Invariants section, or says there that it has none', () => {
    expect(checked.withoutInvariants).toEqual([]);
  });

  it("the root README's tour of the folders names every top-level folder", () => {
    expect(checked.notInTour).toEqual([]);
  });

  it('reads claims from the real documents (the checks are not vacuous)', () => {
    const files = repositoryFiles(ROOT);
    const docs = documents(files);
    expect(docs).toContain('BENCHMARKS.md');
    expect(docs).toContain('storage/README.md');
    const storage: DocFile = {
      rel: 'storage/README.md',
      text: fs.readFileSync(path.join(ROOT, 'storage/README.md'), 'utf8'),
    };
    expect(pathClaims(storage, repositoryFolders(files)).length).toBeGreaterThan(20);
    expect(npmRunClaims(storage).length).toBeGreaterThan(0);
  });
});

describe('the checks can fail', () => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), 'walsim-doc-claims-'));
  afterAll(() => fs.rmSync(dir, { recursive: true, force: true }));
  const write = (rel: string, text: string): void => {
    fs.mkdirSync(path.dirname(path.join(dir, rel)), { recursive: true });
    fs.writeFileSync(path.join(dir, rel), text);
  };
  // A section cited by name, built here so that this file's own text cites none.
  const cite = (doc: string, section: string): string => `${doc} "${section}"`;
  write('package.json', JSON.stringify({ scripts: { bench: 'tsx scripts/bench.ts' } }));
  write('scripts/bench.ts', '');
  write('scripts/experiment/steps.ts', '');
  write('extra/x.ts', '');
  write(
    'README.md',
    [
      '## Tour of the folders',
      '| `scripts/` | the CLIs |',
      '| `docs/` | history |',
      '',
      '`npm run bench` (scripts/bench.ts); `npm run benhc`; see [the record](docs/old.md).',
      `See ${cite('scripts/README.md', 'Layout')}; ${cite('scripts/README.md', 'Rooms')}.`,
    ].join('\n'),
  );
  write(
    'scripts/README.md',
    [
      '# scripts/',
      '## Layout',
      '`experiment/steps.ts`, `bench.ts`, rel.sh/test.sh, results.json, `base/`.',
      'The engine is in postgres-engine.ts; the guide is /home/me/notes.md; `experiment/` `nope/`.',
    ].join('\n'),
  );
  write('docs/history/2026.md', 'Measured with `scripts/old-bench.ts` (../../README.md).');
  const ticket = ['issue', '12'].join(' '); // spelled apart, so this file passes its own check
  write('extra/y.ts', `// Fixed in ${ticket}; the issue tracker is elsewhere.\n`);
  write('extra/z.md', `- *A bug* (${['item', '3'].join(' ')}): fixed; item 4 of the list stays.\n`);

  it('reports each false claim and nothing true', () => {
    const c = checkTree(dir);
    expect(c.missingPaths).toEqual([
      'README.md:5 docs/old.md',
      'docs/history/2026.md:1 scripts/old-bench.ts',
      'scripts/README.md:3 rel.sh',
      'scripts/README.md:3 test.sh',
      'scripts/README.md:4 postgres-engine.ts',
      'scripts/README.md:4 /home/me/notes.md',
    ]);
    expect(c.unknownScripts).toEqual(['README.md:5 npm run benhc']);
    expect(c.missingSections).toEqual([`README.md:6 ${cite('scripts/README.md', 'Rooms')}`]);
    expect(c.withoutInvariants).toEqual(['scripts/README.md']);
    expect(c.notInTour).toEqual(['extra']);
    expect(c.tickets).toEqual([
      `extra/y.ts:1 ${ticket}`,
      `extra/z.md:1 (${['item', '3'].join(' ')})`,
    ]);
  });

  it('accepts an Invariants section that says there are none', () => {
    expect(hasInvariantsSection('# x/\n\n## Invariants\n\nNone of its own.\n')).toBe(true);
    expect(hasInvariantsSection('# x/\n\nThe invariants are elsewhere.\n')).toBe(false);
  });
});
