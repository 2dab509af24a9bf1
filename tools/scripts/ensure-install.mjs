#!/usr/bin/env node
// Installs dependencies when they are missing or stale, so that `npm start`
// and `npm test` work on a fresh clone with nothing run before them. Stale
// means: package-lock.json or any workspace package.json changed since the
// last successful install (a stamp in node_modules records their hash).
import { createHash } from 'node:crypto';
import { existsSync, readFileSync, readdirSync, writeFileSync } from 'node:fs';
import { execFileSync } from 'node:child_process';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');
const stampFile = path.join(root, 'node_modules', '.fencer-install-stamp');

function manifestHash() {
  const hash = createHash('sha256');
  const files = ['package.json', 'package-lock.json'];
  for (const group of ['libs', 'apps', 'tools']) {
    const dir = path.join(root, group);
    if (!existsSync(dir)) continue;
    for (const name of readdirSync(dir).sort()) {
      const pkg = path.join(group, name, 'package.json');
      if (existsSync(path.join(root, pkg))) files.push(pkg);
    }
  }
  for (const f of files) hash.update(f).update('\0').update(readFileSync(path.join(root, f))).update('\0');
  return hash.digest('hex');
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
