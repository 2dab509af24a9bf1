#!/usr/bin/env node
// Checks the nx project graph: no dependency cycles, and libs/base (the
// foundations) depends on no other project.
import { execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');
const dir = mkdtempSync(path.join(tmpdir(), 'fencer-graph-'));
const file = path.join(dir, 'graph.json');
execFileSync(path.join(root, 'node_modules/.bin/nx'), ['graph', `--file=${file}`], { cwd: root, stdio: 'ignore' });
const { graph } = JSON.parse(readFileSync(file, 'utf8'));
rmSync(dir, { recursive: true, force: true });

const internal = new Set(Object.keys(graph.nodes));
const edges = Object.fromEntries(
  Object.entries(graph.dependencies).map(([p, deps]) => [p, deps.map((d) => d.target).filter((t) => internal.has(t))]),
);
const problems = [];
if ((edges.base ?? []).length > 0) problems.push(`libs/base depends on ${edges.base.join(', ')}; it must depend on nothing`);

// Depth-first search for a back edge.
const state = new Map();
const stack = [];
function visit(p) {
  state.set(p, 'open');
  stack.push(p);
  for (const q of edges[p] ?? []) {
    if (state.get(q) === 'open') problems.push(`cycle: ${[...stack.slice(stack.indexOf(q)), q].join(' → ')}`);
    else if (!state.has(q)) visit(q);
  }
  stack.pop();
  state.set(p, 'done');
}
for (const p of internal) if (!state.has(p)) visit(p);

if (problems.length > 0) {
  console.error(problems.join('\n'));
  process.exit(1);
}
console.log(`project graph: ${internal.size} projects, no cycles, base depends on nothing`);
