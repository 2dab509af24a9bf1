/**
 * Goal: the contract stays pure, so every layer can hold it, down to the
 * state machine every replica applies: no clock, timer, unseeded randomness
 * or node: module, no Buffer or TextEncoder, and no import beyond
 * @fencer/base.
 * Method: read every non-spec source under src/ (the generated enums too)
 * and run the shared purity scanners from @fencer/base over it, plus the
 * contract's own tokens; check that the scanners fire on a planted
 * violation, so this test can fail.
 */
import { describe, expect, it } from 'vitest';
import { readdirSync, readFileSync } from 'node:fs';
import { join, relative } from 'node:path';
import { fileURLToPath } from 'node:url';
import { findForbiddenTokens, findForeignImports } from '@fencer/base';

const SRC = fileURLToPath(new URL('.', import.meta.url));
const ALLOWED_IMPORTS = ['@fencer/base'];
/** Node's and the DOM's byte helpers: the pure libs compile without either type library. */
const FORBIDDEN_HERE = [/\bBuffer\b/, /\bTextEncoder\b/, /\bTextDecoder\b/];

function sourcesUnder(dir: string): { file: string; text: string }[] {
  return readdirSync(dir, { withFileTypes: true }).flatMap((d) => {
    const full = join(dir, d.name);
    if (d.isDirectory()) return sourcesUnder(full);
    if (!d.name.endsWith('.ts') || d.name.endsWith('.spec.ts')) return [];
    return [{ file: relative(SRC, full), text: readFileSync(full, 'utf8') }];
  });
}

function contractHits(text: string): number[] {
  return text
    .split('\n')
    .map((line, i) => ({ code: line.replace(/\/\/.*$/, '').replace(/\/\*.*?\*\//g, ''), line: i + 1 }))
    .filter(({ code }) => !code.trimStart().startsWith('*') && FORBIDDEN_HERE.some((re) => re.test(code)))
    .map(({ line }) => line);
}

const sources = sourcesUnder(SRC);

describe('purity of libs/contract', () => {
  it('scans the real sources', () => {
    expect(sources.map((s) => s.file)).toEqual(
      expect.arrayContaining(['index.ts', 'names.ts', 'ids.ts', 'limits.ts', 'gen/wire-enums.ts']),
    );
  });

  it.each(sources)('$file reads no clock, starts no timer, draws no unseeded randomness, imports no node: module', ({ text }) => {
    expect(findForbiddenTokens(text)).toEqual([]);
    expect(contractHits(text)).toEqual([]);
  });

  it.each(sources)('$file imports only @fencer/base and relative files', ({ text }) => {
    expect(findForeignImports(text, ALLOWED_IMPORTS)).toEqual([]);
  });

  it('the scanners catch a planted violation', () => {
    const planted = "import { x } from 'node:fs';\nconst t = Date.now();\nimport y from 'lodash';\nconst n = Buffer.byteLength(s);\n";
    expect(findForbiddenTokens(planted).map((h) => h.line)).toEqual([1, 2]);
    expect(findForeignImports(planted, ALLOWED_IMPORTS).map((h) => h.text)).toEqual(['node:fs', 'lodash']);
    expect(contractHits(planted)).toEqual([4]);
  });
});
