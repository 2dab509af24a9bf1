#!/usr/bin/env node
// Summarises a V8 .cpuprofile (from `node --cpu-prof`): the functions with
// the most self time, and the most inclusive time, as a share of all samples.
//   node tools/bench/cell/profile-top.mjs FILE.cpuprofile [--top N] [--inclusive]
import { readFileSync } from 'node:fs';
import path from 'node:path';

const args = process.argv.slice(2);
const file = args.find((a) => !a.startsWith('--'));
const top = Number(args[args.indexOf('--top') + 1]) || 30;
if (!file) {
  console.error('usage: profile-top.mjs FILE.cpuprofile [--top N] [--inclusive]');
  process.exit(2);
}
const prof = JSON.parse(readFileSync(file, 'utf8'));
const byId = new Map(prof.nodes.map((n) => [n.id, n]));
const parent = new Map();
for (const n of prof.nodes) for (const c of n.children ?? []) parent.set(c, n.id);
const counts = new Map();
for (const s of prof.samples) counts.set(s, (counts.get(s) ?? 0) + 1);
const total = prof.samples.length;
const label = (n) => {
  const f = n.callFrame;
  const where = f.url ? `${path.basename(f.url)}:${f.lineNumber + 1}` : '';
  return `${f.functionName || '(anonymous)'} ${where}`.trim();
};
const self = new Map();
const incl = new Map();
for (const [id, c] of counts) {
  const n = byId.get(id);
  self.set(label(n), (self.get(label(n)) ?? 0) + c);
  const seen = new Set();
  for (let at = id; at !== undefined; at = parent.get(at)) {
    const l = label(byId.get(at));
    if (seen.has(l)) continue;
    seen.add(l);
    incl.set(l, (incl.get(l) ?? 0) + c);
  }
}
const pct = (c) => `${((100 * c) / total).toFixed(1)}%`.padStart(6);
const durS = (prof.endTime - prof.startTime) / 1e6;
const idle = self.get('(idle)') ?? 0;
console.log(`${file}: ${total} samples over ${durS.toFixed(1)} s, ${pct(total - idle)} not idle`);
console.log('\nself time:');
for (const [l, c] of [...self].sort((a, b) => b[1] - a[1]).slice(0, top)) console.log(`${pct(c)}  ${l}`);
// Self time by area: which package or part of the node the sampled frame belongs to.
const area = (n) => {
  const url = n.callFrame.url ?? '';
  const m = /node_modules\/(@[^/]+\/[^/]+|[^/]+)/.exec(url);
  if (m) return m[1];
  const own = /\/(apps|libs)\/([^/]+)\//.exec(url);
  if (own) return `fencer:${own[2]}`;
  if (url.startsWith('node:')) return 'node core';
  if (url === '') return n.callFrame.functionName.startsWith('(') ? n.callFrame.functionName : 'native';
  return 'other';
};
const byArea = new Map();
for (const [id, c] of counts) {
  const a = area(byId.get(id));
  byArea.set(a, (byArea.get(a) ?? 0) + c);
}
console.log('\nself time by area:');
for (const [a, c] of [...byArea].sort((x, y) => y[1] - x[1]).slice(0, 20)) console.log(`${pct(c)}  ${a}`);
if (args.includes('--inclusive')) {
  console.log('\ninclusive time:');
  for (const [l, c] of [...incl].sort((a, b) => b[1] - a[1]).slice(0, top)) console.log(`${pct(c)}  ${l}`);
}
