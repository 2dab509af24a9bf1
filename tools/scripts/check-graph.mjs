#!/usr/bin/env node
// Checks the package graph's rules (tools/scripts/graph-rules.mjs,
// docs/decisions/0018-package-layers.md) on this workspace: apps import only
// libs, libs import no app, libs/base depends on nothing, imports go through
// public entry points, no cycles. Prints each broken rule with the package
// and file that break it, and exits 1; `npm test` runs it.
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { graphProblems, graphSummary } from './graph-rules.mjs';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');
const problems = graphProblems(root);
if (problems.length > 0) {
  console.error(`package graph: ${problems.length} broken rule${problems.length === 1 ? '' : 's'}`);
  for (const p of problems) console.error(`- ${p}`);
  process.exit(1);
}
console.log(`package graph: ${graphSummary(root)}; apps import only libs, libs no app, base nothing; public entries only; no cycles`);
