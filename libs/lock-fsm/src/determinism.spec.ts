/**
 * Goal: the lock state machine stays pure (CONTRIBUTING.md, "Purity of the core"):
 * no clock, timer, unseeded randomness or node: module in its sources, and
 * no import beyond @fencer/base and @fencer/contract (itself pure).
 * Method: read every non-spec src/*.ts file and run the shared purity
 * scanners from @fencer/base over it; also check the scanners do fire on a
 * planted violation, so this test can fail.
 */
import { describe, expect, it } from 'vitest';
import { readdirSync, readFileSync } from 'node:fs';
import { join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { findForbiddenTokens, findForeignImports } from '@fencer/base';

const SRC = fileURLToPath(new URL('.', import.meta.url));
const ALLOWED_IMPORTS = ['@fencer/base', '@fencer/contract'];
const sources = readdirSync(SRC)
  .filter((f) => f.endsWith('.ts') && !f.endsWith('.spec.ts'))
  .map((f) => ({ file: f, text: readFileSync(join(SRC, f), 'utf8') }));

describe('purity of libs/lock-fsm', () => {
  it('scans the real sources', () => {
    expect(sources.map((s) => s.file)).toEqual(expect.arrayContaining(['index.ts', 'state-machine.ts', 'commands.ts', 'limits.ts']));
  });

  it.each(sources)('$file reads no clock, starts no timer, draws no unseeded randomness, imports no node: module', ({ text }) => {
    expect(findForbiddenTokens(text)).toEqual([]);
  });

  it.each(sources)('$file imports only @fencer/base, @fencer/contract and relative files', ({ text }) => {
    expect(findForeignImports(text, ALLOWED_IMPORTS)).toEqual([]);
  });

  it('the scanners catch a planted violation', () => {
    const planted = "import { x } from 'node:fs';\nconst t = Date.now();\nimport y from 'lodash';\n";
    expect(findForbiddenTokens(planted).map((h) => h.line)).toEqual([1, 2]);
    expect(findForeignImports(planted, ALLOWED_IMPORTS).map((h) => h.text)).toEqual(['node:fs', 'lodash']);
  });
});
