/**
 * Goal: everything the replica and the simulator import from `@fencer/wal`
 * (the main entry) and `@fencer/wal/testing` is free of `node:` modules, clocks, timers and
 * third-party imports, so the replica stays pure; only `src/node.ts` (the
 * `@fencer/wal/node` entry) touches node:fs. Method: follow the relative
 * imports from src/index.ts and src/testing.ts and run base's purity scanners over each file.
 */
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { findForbiddenTokens, findForeignImports } from '@fencer/base';
import { describe, expect, it } from 'vitest';

const src = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../src');

function reachable(entry: string): string[] {
  const seen = new Set<string>();
  const visit = (file: string): void => {
    if (seen.has(file)) return;
    seen.add(file);
    const text = fs.readFileSync(file, 'utf8');
    for (const m of text.matchAll(/from\s+['"](\.[^'"]+)['"]/g)) visit(path.resolve(path.dirname(file), m[1]!.replace(/\.js$/, '.ts')));
  };
  visit(path.join(src, entry));
  return [...seen];
}

describe('purity of the main entry', () => {
  const files = [...new Set([...reachable('index.ts'), ...reachable('testing.ts')])];

  it('reaches the store, MemDisk and recovery, but not NodeDisk', () => {
    const names = files.map((f) => path.basename(f));
    expect(names).toEqual(
      expect.arrayContaining(['wal-store.ts', 'mem-disk.ts', 'lying-disk.ts', 'recover.ts', 'records.ts', 'crc32c.ts']),
    );
    expect(names).not.toContain('node.ts');
  });

  it.each(files.map((f) => [path.basename(f), f]))('%s uses no node: module, clock, timer or foreign import', (_name, file) => {
    const text = fs.readFileSync(file, 'utf8');
    expect(findForbiddenTokens(text)).toEqual([]);
    expect(findForeignImports(text, ['@fencer/base', '@fencer/raft'])).toEqual([]);
  });

  it('the scanner sees node:fs in node.ts (the check can fail)', () => {
    expect(findForbiddenTokens(fs.readFileSync(path.join(src, 'node.ts'), 'utf8')).length).toBeGreaterThan(0);
  });
});
