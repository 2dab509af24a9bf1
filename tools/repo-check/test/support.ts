/** Paths and a copier shared by the repository checks. */
import { cpSync, mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

export const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../../..');

const NOT_COPIED = new Set(['node_modules', 'dist', 'out-tsc', '.nx', '.reports', '.fencer', '.git']);

/** A copy of the workspace's packages and scripts (no installs, no build output), to plant mistakes in. */
export function copyWorkspace(): string {
  const dir = mkdtempSync(path.join(tmpdir(), 'fencer-repo-check-'));
  for (const top of ['apps', 'libs', 'tools', 'package.json']) {
    cpSync(path.join(root, top), path.join(dir, top), {
      recursive: true,
      filter: (src) => !NOT_COPIED.has(path.basename(src)),
    });
  }
  return dir;
}
