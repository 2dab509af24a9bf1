#!/usr/bin/env node
// The `fencer` command as npm links it: this file exists in a fresh clone, so
// `npm ci` can link the bin before anything is built; it runs the compiled CLI.
import { existsSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';

const compiled = path.join(path.dirname(fileURLToPath(import.meta.url)), '..', 'dist', 'main.js');
if (!existsSync(compiled)) {
  console.error('fencer: the CLI is not built yet; run `npm start` (or `npm run build`) in the repository first.');
  process.exit(78);
}
await import(pathToFileURL(compiled).href);
