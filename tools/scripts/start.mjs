#!/usr/bin/env node
// `npm start`: builds, then runs the local fleet. The fleet launcher arrives
// with the cell node (apps/cell-node); until then this says so and exits 0.
import { existsSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');
if (!existsSync(path.join(root, 'tools/fleet/launch.mjs'))) {
  console.log('Fencer: the local fleet launcher (tools/fleet) is not built yet; nothing to start. Run `npm test` to check the libraries.');
  process.exit(0);
}
await import(path.join(root, 'tools/fleet/launch.mjs'));
