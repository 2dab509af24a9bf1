#!/usr/bin/env node
// Installs dependencies when they are missing or stale, so that `npm start`
// and `npm test` work on a fresh clone with nothing run before them. Stale
// means: package-lock.json changed since the
// last successful install (a stamp in node_modules records its hash).
import { createHash } from 'node:crypto';
import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import { execFileSync } from 'node:child_process';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');
const stampFile = path.join(root, 'node_modules', '.fencer-install-stamp');

// package-lock.json records every dependency of every workspace, so it alone
// says whether node_modules is current (npm ci refuses a lock file that is
// out of step with the package.json files, which makes that loud too).
function manifestHash() {
  return createHash('sha256')
    .update(readFileSync(path.join(root, 'package-lock.json')))
    .digest('hex');
}

const want = manifestHash();
if (process.argv.includes('--stamp')) {
  // After a hand-run `npm install`: record that node_modules matches the manifests.
  writeFileSync(stampFile, `${want}\n`);
  process.exit(0);
}
const have = existsSync(stampFile) ? readFileSync(stampFile, 'utf8').trim() : '';
if (have !== want) {
  console.log(have ? 'dependencies changed: running npm ci' : 'dependencies not installed: running npm ci');
  const npm = process.platform === 'win32' ? 'npm.cmd' : 'npm';
  execFileSync(npm, ['ci', '--no-audit', '--no-fund'], { cwd: root, stdio: 'inherit' });
  writeFileSync(stampFile, `${want}\n`);
}
