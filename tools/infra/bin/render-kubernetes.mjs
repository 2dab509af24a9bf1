#!/usr/bin/env node
// Renders infra/kubernetes from the generator (tools/infra/src/kubernetes) with
// the default parameters, or checks that the committed files are current:
//   node tools/infra/bin/render-kubernetes.mjs            write the files
//   node tools/infra/bin/render-kubernetes.mjs --check    exit 1 if any differs
// Builds tools/infra first when its dist is missing.
import { execFileSync } from 'node:child_process';
import { existsSync, mkdirSync, readFileSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../../..');
const dist = path.join(root, 'tools/infra/dist/index.js');
if (!existsSync(dist)) execFileSync('npx', ['nx', 'run', 'infra:build'], { cwd: root, stdio: 'inherit' });
const { DEFAULT_PARAMS, renderFleet } = await import(dist);

const out = path.join(root, 'infra/kubernetes');
const check = process.argv.includes('--check');
let stale = 0;
mkdirSync(out, { recursive: true });
for (const [file, text] of renderFleet(DEFAULT_PARAMS)) {
  const target = path.join(out, file);
  if (check) {
    if (!existsSync(target) || readFileSync(target, 'utf8') !== text) {
      console.error(`infra/kubernetes/${file} is not what the generator renders: run node tools/infra/bin/render-kubernetes.mjs`);
      stale++;
    }
  } else writeFileSync(target, text);
}
if (!check) console.log(`wrote ${out}`);
process.exit(stale ? 1 : 0);
