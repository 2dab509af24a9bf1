/**
 * Goal: the cell library stays pure, so the simulator's seed decides
 * everything it does, and the node and the simulator run the same code.
 * Method: scan every non-spec source file for clocks, timers, unseeded
 * randomness and node: imports, and for imports outside the pure libs.
 * Also plant a forbidden token in a copy to show the scan can fail.
 */
import { readFileSync, readdirSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
import { describe, expect, it } from 'vitest';
import { findForbiddenTokens, findForeignImports } from '@fencer/base';

const srcDir = dirname(fileURLToPath(import.meta.url));
const sources = readdirSync(srcDir)
  .filter((f) => f.endsWith('.ts') && !f.endsWith('.spec.ts'))
  .map((f) => ({ file: f, text: readFileSync(join(srcDir, f), 'utf8') }));
const allowed = ['@fencer/base', '@fencer/raft', '@fencer/wal', '@fencer/replica', '@fencer/group', '@fencer/lock-fsm', '@fencer/contract'];

describe('libs/cell purity', () => {
  it('has sources to scan', () => {
    expect(sources.map((s) => s.file)).toEqual(
      expect.arrayContaining(['lock-cell.ts', 'held-acquire.ts', 'apply-stream.ts', 'leader-duties.ts']),
    );
  });

  it.each(sources.map((s) => [s.file, s.text] as const))('%s uses no clock, timer, unseeded randomness or node: module', (_file, text) => {
    expect(findForbiddenTokens(text)).toEqual([]);
  });

  it.each(sources.map((s) => [s.file, s.text] as const))('%s imports only the pure libs', (_file, text) => {
    expect(findForeignImports(text, allowed)).toEqual([]);
  });

  it('notices a planted timer and a deep import', () => {
    const planted = `${sources[0]?.text ?? ''}\nsetTimeout(() => {}, 1);\nimport { x } from '@fencer/wal/node';\n`;
    expect(findForbiddenTokens(planted)).toHaveLength(1);
    expect(findForeignImports(planted, allowed).map((h) => h.text)).toEqual(['@fencer/wal/node']);
  });
});
