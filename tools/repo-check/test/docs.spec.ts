/**
 * Goal: the repository explains itself. The README's layout table lists
 * every folder under apps/, libs/ and tools/; no source or doc cites a
 * document outside the repository (the founding team's design notes live
 * beside the clone, not in it); every docs/ path the code cites and every
 * file the docs name exists; the decision records are numbered, indexed and
 * complete.
 * Method: read the files and compare; each failure names the file and line.
 */
import { existsSync, readFileSync, readdirSync, statSync } from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { root } from './support.js';

const SKIPPED = new Set(['node_modules', 'dist', 'out-tsc', '.nx']);
const SOURCE = /\.(ts|mts|mjs|js|proto)$/;

function files(dir: string, pattern: RegExp, found: string[] = []): string[] {
  for (const entry of readdirSync(dir)) {
    if (SKIPPED.has(entry)) continue;
    const full = path.join(dir, entry);
    if (statSync(full).isDirectory()) files(full, pattern, found);
    else if (pattern.test(entry)) found.push(full);
  }
  return found;
}

function folders(top: string): string[] {
  return readdirSync(path.join(root, top))
    .filter((e) => statSync(path.join(root, top, e)).isDirectory() && !SKIPPED.has(e))
    .map((e) => `${top}/${e}`);
}

/** Lines of `file` matching `pattern`, as "file:line: text". */
function hits(file: string, pattern: RegExp): string[] {
  return readFileSync(file, 'utf8')
    .split('\n')
    .flatMap((line, i) => (pattern.test(line) ? [`${path.relative(root, file)}:${i + 1}: ${line.trim()}`] : []));
}

const codeAndDocs = (): string[] => [
  ...['apps', 'libs', 'tools', 'proto'].flatMap((top) => files(path.join(root, top), SOURCE)),
  ...files(path.join(root, 'docs'), /\.md$/),
  ...['README.md', 'CONTRIBUTING.md'].map((f) => path.join(root, f)).filter(existsSync),
];

describe('the README', () => {
  it('lists every folder of apps/, libs/ and tools/ in its layout table', () => {
    const readme = readFileSync(path.join(root, 'README.md'), 'utf8');
    const layout = readme.slice(readme.indexOf('## Layout'));
    const listed = new Set([...layout.matchAll(/^\|\s*`([^`]+?)\/?`/gm)].map((m) => m[1]!.replace(/\/$/, '')));
    const missing = ['apps', 'libs', 'tools'].flatMap(folders).filter((f) => !listed.has(f));
    expect(missing, 'add a row for each to the README\'s "## Layout" table').toEqual([]);
  });
});

describe('docs cite the repository only', () => {
  it('no source or doc cites the design notes beside the clone', () => {
    const outside = /ARCHITECTURE(\s+decision|\s*"|\.md)|shared\/design|\.\.\/shared\/|CONVENTIONS\.md|TOOLING\.md/;
    const found = codeAndDocs()
      .filter((f) => !f.includes(`${path.sep}gen${path.sep}`) && !f.endsWith('docs.spec.ts'))
      .flatMap((f) => hits(f, outside));
    expect(found, 'cite docs/ (docs/decisions/, docs/architecture.md) instead').toEqual([]);
  });

  it('every docs/ path the code and docs cite exists', () => {
    const cited = /\bdocs\/[A-Za-z0-9_./-]+\.md/g;
    const missing = codeAndDocs().flatMap((f) =>
      readFileSync(f, 'utf8')
        .split('\n')
        .flatMap((line, i) =>
          [...line.matchAll(cited)]
            .map((m) => m[0])
            .filter((p) => !existsSync(path.join(root, p)))
            .map((p) => `${path.relative(root, f)}:${i + 1}: ${p}`),
        ),
    );
    expect(missing).toEqual([]);
  });

  it('every file path the docs name in backticks exists (the history log aside)', () => {
    const docs = [...files(path.join(root, 'docs'), /\.md$/), ...['README.md', 'CONTRIBUTING.md'].map((f) => path.join(root, f))].filter(
      (f) => existsSync(f) && !f.endsWith('benchmarks-log.md'),
    );
    const missing = docs.flatMap((f) =>
      [...readFileSync(f, 'utf8').matchAll(/`((?:apps|libs|tools)\/[A-Za-z0-9_./-]+)`/g)]
        .map((m) => m[1]!)
        .filter((p) => !existsSync(path.join(root, p)))
        .map((p) => `${path.relative(root, f)}: ${p}`),
    );
    expect(missing, 'a doc names a file that moved or went').toEqual([]);
  });

  it('relative links in docs resolve', () => {
    const mds = [...files(path.join(root, 'docs'), /\.md$/), path.join(root, 'README.md')];
    const broken = mds.flatMap((f) =>
      [...readFileSync(f, 'utf8').matchAll(/\]\(([^)#\s]+)(#[^)]*)?\)/g)]
        .map((m) => m[1]!)
        .filter((link) => !/^[a-z]+:/.test(link) && !existsSync(path.resolve(path.dirname(f), link)))
        .map((link) => `${path.relative(root, f)}: ${link}`),
    );
    expect(broken).toEqual([]);
  });
});

describe('decision records', () => {
  const dir = path.join(root, 'docs/decisions');
  const records = readdirSync(dir).filter((f) => /^\d{4}-.*\.md$/.test(f));

  it('are numbered from 0001 without gaps, each indexed in the README of the folder', () => {
    const numbers = records.map((f) => Number(f.slice(0, 4))).sort((a, b) => a - b);
    expect(numbers).toEqual(numbers.map((_, i) => i + 1));
    const index = readFileSync(path.join(dir, 'README.md'), 'utf8');
    expect(records.filter((f) => !index.includes(`(${f})`))).toEqual([]);
  });

  it('each has a status, a context, a decision and its consequences', () => {
    const incomplete = records.filter((f) => {
      const text = readFileSync(path.join(dir, f), 'utf8');
      return !/^Status: /m.test(text) || !['## Context', '## Decision', '## Consequences'].every((h) => text.includes(h));
    });
    expect(incomplete).toEqual([]);
  });
});
