#!/usr/bin/env node
// Builds and packs the packages users install (tools/packages/pack.mjs):
//   node tools/packages/bin/pack.mjs [--out DIR]   (default tools/packages/dist)
// prints each package's tarball. Build the workspace first (npx nx build cli client).
import path from 'node:path';
import { parseArgs } from 'node:util';
import { ROOT, packAll } from '../pack.mjs';

const { values } = parseArgs({ options: { out: { type: 'string', default: path.join(ROOT, 'tools/packages/dist') } } });
for (const { name, tarball } of await packAll(path.resolve(values.out))) console.log(`${name}: ${path.relative(process.cwd(), tarball)}`);
