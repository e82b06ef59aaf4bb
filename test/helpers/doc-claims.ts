/**
 * What the documents claim about the repository, read from their text: the repository paths they
 * name, the `npm run` commands they show, and whether a folder README has its Invariants section.
 * test/unit/doc-claims.test.ts checks each claim against the tree and package.json.
 *
 * A path is a token that ends in a source or document extension (`scripts/sweep.ts`,
 * `storage/README.md`, `drop.ts`), backticked or not, or a backticked folder (`storage/`), or a
 * Markdown link's target. It resolves when it exists relative to the repository root or to the
 * document's folder; a name with a folder part also when a repository file ends with it
 * (`unit/wal-lsn.test.ts`), a bare file name when a repository file has that name. An absolute
 * path to such a file is outside the repository and never resolves.
 */
import { execFileSync } from 'node:child_process';
import * as fs from 'node:fs';
import * as path from 'node:path';

/** Extensions of the files a document may name as part of the repository. */
const REPO_EXT = 'ts|js|mjs|cjs|md|json|sh|html|css|wat|wasm|golden';
const PATH_TOKEN = new RegExp(
  String.raw`(?<![\w./<>:@$-])(/?(?:[\w.-]+/)*[\w-][\w.-]*\.(?:${REPO_EXT}))(?![\w/-])`,
  'g',
);
const FILE_NAME = new RegExp(String.raw`^[\w-][\w.-]*\.(?:${REPO_EXT})$`);
const BACKTICKED_FOLDER = /`((?:[\w-]+\/)+)`/g;
const MD_LINK = /\]\(([^)\s]+)\)/g;
const NPM_RUN = /\bnpm run ([\w:-]+)/g;

/**
 * Names the documents use that are not repository files: what walsim and its commands write at run
 * time, a user's own file in an example, and a library's name.
 */
export const NOT_REPOSITORY_FILES = new Set([
  'results.json', // a sweep's, bench's or predict-bench's records, under results/<time>/
  'results.csv',
  'tables.md',
  'accuracy.md',
  'experiment.json', // a step-by-step experiment's state, in its directory
  'image.json', // a data image's header, in a node's data directory
  'walsim.conf.json', // a node's configuration, in its data directory
  'native/pg-symlinks.json', // written into the PostgreSQL binary cache at install
  'my-machine.json', // the README's example of a calibrated profile's name
  'Chart.js', // a charting library
]);

export interface DocFile {
  /** Repository-relative path with forward slashes. */
  rel: string;
  text: string;
}

export interface PathClaim {
  doc: string;
  line: number;
  path: string;
}

/**
 * The repository's files: git's list when `root` is a checkout (a scratch file beside the tree is
 * not the repository's), else every file but node_modules, results and hidden folders (an export).
 */
export function repositoryFiles(root: string): string[] {
  if (fs.existsSync(path.join(root, '.git'))) {
    const listed = execFileSync('git', ['ls-files', '-z'], { cwd: root, encoding: 'utf8' });
    return listed
      .split('\0')
      .filter((f) => f !== '' && fs.existsSync(path.join(root, f)))
      .sort();
  }
  const out: string[] = [];
  const walk = (dir: string): void => {
    for (const e of fs.readdirSync(path.join(root, dir), { withFileTypes: true })) {
      if (e.name.startsWith('.') || e.name === 'node_modules' || e.name === 'results') continue;
      const rel = dir === '' ? e.name : `${dir}/${e.name}`;
      if (e.isDirectory()) walk(rel);
      else out.push(rel);
    }
  };
  walk('');
  return out.sort();
}

/** The documents whose claims are checked: each README.md, BENCHMARKS.md, RELIABILITY.md, docs/. */
export function documents(files: readonly string[]): string[] {
  return files.filter(
    (f) =>
      path.posix.basename(f) === 'README.md' ||
      f === 'BENCHMARKS.md' ||
      f === 'RELIABILITY.md' ||
      (f.startsWith('docs/') && f.endsWith('.md')),
  );
}

/** Every folder of the repository, from its files. */
export function repositoryFolders(files: readonly string[]): Set<string> {
  const out = new Set<string>();
  for (const f of files) {
    for (let d = path.posix.dirname(f); d !== '.'; d = path.posix.dirname(d)) out.add(d);
  }
  return out;
}

/** URLs hold names that are not repository paths. */
function withoutUrls(line: string): string {
  return line.replace(/\bhttps?:\/\/\S+/g, ' ');
}

/** The repository paths a document names, one claim per occurrence; `folders` are the tree's. */
export function pathClaims(doc: DocFile, folders: ReadonlySet<string>): PathClaim[] {
  const claims: PathClaim[] = [];
  const docDir = path.posix.dirname(doc.rel);
  doc.text.split('\n').forEach((raw, i) => {
    const add = (p: string): void => {
      claims.push({ doc: doc.rel, line: i + 1, path: p });
    };
    const line = withoutUrls(raw);
    for (const target of groups(line, MD_LINK)) {
      if (!/^[a-z]+:|^#/.test(target)) add(target.split('#')[0] ?? target);
    }
    const noLinks = line.replace(MD_LINK, ']');
    for (const token of groups(noLinks, PATH_TOKEN)) {
      // "rel.sh/test.sh" is two names, not a folder "rel.sh".
      const parts = token.split('/');
      if (parts.length > 1 && FILE_NAME.test(parts[0] ?? '')) parts.forEach(add);
      else add(token);
    }
    for (const folder of groups(noLinks, BACKTICKED_FOLDER)) {
      // `base/` in a data directory is not ours: a folder is a claim when it starts at a folder
      // of the repository's root or of the document's.
      const first = folder.split('/')[0] ?? '';
      if (folders.has(first) || folders.has(`${docDir}/${first}`)) add(folder);
    }
  });
  return claims;
}

/** The first capture group of every match of `re` (a global pattern) in `text`. */
function groups(text: string, re: RegExp): string[] {
  return [...text.matchAll(re)].map((m) => m[1] ?? '').filter((g) => g !== '');
}

/** Does `claim` name something in the repository? `files` are repository-relative. */
export function resolves(claim: PathClaim, files: ReadonlySet<string>, root: string): boolean {
  const p = claim.path;
  if (p.startsWith('/')) return false;
  if (NOT_REPOSITORY_FILES.has(p)) return true;
  const docDir = path.posix.dirname(claim.doc);
  const candidates = [p, path.posix.normalize(path.posix.join(docDir, p))];
  if (candidates.some((c) => !c.startsWith('..') && fs.existsSync(path.join(root, c)))) return true;
  const name = p.replace(/\/$/, '');
  for (const f of files) {
    if (p.includes('/') ? f.endsWith(`/${name}`) || f.includes(`/${name}/`) : f.endsWith(`/${p}`))
      return true;
  }
  return false;
}

/** The `npm run` commands a document shows. */
export function npmRunClaims(doc: DocFile): { doc: string; line: number; script: string }[] {
  const out: { doc: string; line: number; script: string }[] = [];
  doc.text.split('\n').forEach((line, i) => {
    for (const script of groups(line, NPM_RUN)) out.push({ doc: doc.rel, line: i + 1, script });
  });
  return out;
}

/** A folder README states its invariants, or that it has none, under an "Invariants" heading. */
export function hasInvariantsSection(text: string): boolean {
  return /^#{2,4} Invariants\b/m.test(text);
}

/** The top-level folders the root README's "Tour of the folders" table names. */
export function tourFolders(readme: string): string[] {
  const start = readme.search(/^#{2,3} Tour of the folders/m);
  if (start < 0) return [];
  const section = readme.slice(start).split(/\n#{1,3} /)[0] ?? '';
  return groups(section, /^\| `([\w-]+)\/` \|/gm);
}

/** A ticket number (issue or a bracketed item, then a number) in place of what it means. */
const TICKET = /\bissues? #?\d+\b|\(items? \d+(?:, \d+)*\)/gi;

/** Every ticket number in `text`, as line: match. */
export function ticketMentions(rel: string, text: string): string[] {
  const out: string[] = [];
  text.split('\n').forEach((line, i) => {
    for (const m of line.matchAll(TICKET)) out.push(`${rel}:${i + 1} ${m[0]}`);
  });
  return out;
}

export interface SectionClaim {
  doc: string;
  line: number;
  /** The cited document, repository-relative. */
  cited: string;
  section: string;
}

const SECTION_CITE = /((?:[\w-]+\/)*(?:BENCHMARKS|RELIABILITY|README)\.md)[,:]? \(?"([^"]+)"/g;

/**
 * The sections a text cites by name (`BENCHMARKS.md ("Machine")`, `storage/README.md "Drop
 * strategies"`), relative to the citing file's folder when it is there, else to the root.
 */
export function sectionClaims(
  rel: string,
  text: string,
  files: ReadonlySet<string>,
): SectionClaim[] {
  const out: SectionClaim[] = [];
  const dir = path.posix.dirname(rel);
  text.split('\n').forEach((line, i) => {
    for (const m of line.matchAll(SECTION_CITE)) {
      const named = m[1] ?? '';
      const local = path.posix.join(dir, named);
      const cited = files.has(local) ? local : named;
      out.push({ doc: rel, line: i + 1, cited, section: m[2] ?? '' });
    }
  });
  return out;
}

/** Does `markdown` have a heading that contains `section` (case, backticks and quotes aside)? */
export function hasSection(markdown: string, section: string): boolean {
  const norm = (s: string): string => s.replace(/[`"“”]/g, '').toLowerCase();
  const wanted = norm(section);
  return markdown.split('\n').some((l) => /^#{1,6} /.test(l) && norm(l).includes(wanted));
}
