// The profile suite: summarises V8 .cpuprofile files (from `node
// --cpu-prof`, e.g. the cell suite's --cpu-prof DIR): the functions with
// the most self time, self time by area (package or part of the node), and
// optionally the most inclusive time, as shares of all samples.
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { count } from '../options.mjs';

export function register(program) {
  return program
    .command('profile')
    .description('summarise V8 CPU profiles (.cpuprofile): top functions by self time, self time by area')
    .argument('<files...>', '.cpuprofile files')
    .option('--top <n>', 'functions listed', count, 30)
    .option('--inclusive', 'also list the most inclusive time')
    .action((files, o) => {
      for (const file of files) summarise(file, o);
    });
}

/** A sampled frame's label: function name and file:line. */
function label(n) {
  const f = n.callFrame;
  const where = f.url ? `${path.basename(f.url)}:${f.lineNumber + 1}` : '';
  return `${f.functionName || '(anonymous)'} ${where}`.trim();
}

/** Which package or part of the node a sampled frame belongs to. */
function area(n) {
  const url = n.callFrame.url ?? '';
  const m = /node_modules\/(@[^/]+\/[^/]+|[^/]+)/.exec(url);
  if (m) return m[1];
  const own = /\/(apps|libs)\/([^/]+)\//.exec(url);
  if (own) return `fencer:${own[2]}`;
  if (url.startsWith('node:')) return 'node core';
  if (url === '') return n.callFrame.functionName.startsWith('(') ? n.callFrame.functionName : 'native';
  return 'other';
}

const add = (map, k, c) => map.set(k, (map.get(k) ?? 0) + c);
const top = (map, n) => [...map].sort((a, b) => b[1] - a[1]).slice(0, n);

/** Self time by label and by area, inclusive time by label: sample counts. */
function tally(prof) {
  const byId = new Map(prof.nodes.map((n) => [n.id, n]));
  const parent = new Map();
  for (const n of prof.nodes) for (const c of n.children ?? []) parent.set(c, n.id);
  const counts = new Map();
  for (const s of prof.samples) add(counts, s, 1);
  const self = new Map();
  const incl = new Map();
  const byArea = new Map();
  for (const [id, c] of counts) {
    add(self, label(byId.get(id)), c);
    add(byArea, area(byId.get(id)), c);
    const seen = new Set();
    for (let at = id; at !== undefined; at = parent.get(at)) {
      const l = label(byId.get(at));
      if (!seen.has(l)) add(incl, l, c);
      seen.add(l);
    }
  }
  return { self, incl, byArea };
}

function summarise(file, o) {
  const prof = JSON.parse(readFileSync(file, 'utf8'));
  const total = prof.samples.length;
  const { self, incl, byArea } = tally(prof);
  const pct = (c) => `${((100 * c) / total).toFixed(1)}%`.padStart(6);
  const idle = self.get('(idle)') ?? 0;
  console.log(`${file}: ${total} samples over ${((prof.endTime - prof.startTime) / 1e6).toFixed(1)} s, ${pct(total - idle)} not idle`);
  console.log('\nself time:');
  for (const [l, c] of top(self, o.top)) console.log(`${pct(c)}  ${l}`);
  console.log('\nself time by area:');
  for (const [a, c] of top(byArea, 20)) console.log(`${pct(c)}  ${a}`);
  if (!o.inclusive) return;
  console.log('\ninclusive time:');
  for (const [l, c] of top(incl, o.top)) console.log(`${pct(c)}  ${l}`);
}
