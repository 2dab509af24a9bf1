#!/usr/bin/env node
// Benchmark of the leader's deadline tracking (libs/cell LeaderDuties):
// the cost of one `due()` call, which the cell node makes on every 100 ms
// Raft tick, with N live sessions that each heartbeat every TTL/3 (the
// client SDK's pace), over 60 s of virtual time. None expires, so every
// figure is pure bookkeeping. With --before, another build of the library
// (for example one extracted with `git archive <commit> libs/cell` and
// compiled with tsc) is measured in the same run, alternating with this one.
// Prints the figures and writes them into docs/benchmarks.md between
// <!-- duties:start --> and <!-- duties:end -->.
//
// Usage: node tools/bench/duties-bench.mjs [--no-build] [--no-write] [--sessions 10000,100000]
//                                          [--before path/to/other/dist/leader-duties.js [--before-label TEXT]]
import { execFileSync } from 'node:child_process';
import { readFileSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { parseArgs } from 'node:util';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');
const { values: opts } = parseArgs({
  options: {
    'no-build': { type: 'boolean', default: false },
    'no-write': { type: 'boolean', default: false },
    sessions: { type: 'string', default: '10000,100000' },
    before: { type: 'string' },
    'before-label': { type: 'string', default: 'before' },
  },
});
if (!opts['no-build']) execFileSync('npx', ['nx', 'build', 'cell'], { cwd: root, stdio: 'ignore' });

const TTL_MS = 12_000;
const TICK_MS = 100;
const TICKS = 600;
const sizes = opts.sessions.split(',').map(Number);
const builds = [{ label: 'this build', lib: await import(pathToFileURL(path.join(root, 'libs/cell/dist/leader-duties.js')).href) }];
if (opts.before) builds.push({ label: opts['before-label'], lib: await import(pathToFileURL(path.resolve(opts.before)).href) });

/** Mean µs of CPU per due() call over TICKS ticks. */
function measure(LeaderDuties, n) {
  const d = new LeaderDuties();
  const ids = Array.from({ length: n }, (_, i) => `ns:${i}`);
  d.becomeLeader(
    0,
    ids.map((sessionId) => ({ sessionId, ttlMs: TTL_MS })),
    [],
    [],
  );
  const beatsPerTick = Math.ceil(n / (TTL_MS / 3 / TICK_MS));
  let now = 0;
  let next = 0;
  let spent = 0;
  for (let t = 0; t < TICKS; t++) {
    now += TICK_MS;
    for (let k = 0; k < beatsPerTick; k++) d.heartbeat(now, ids[next++ % n]);
    const started = process.cpuUsage();
    const out = d.due(now);
    const used = process.cpuUsage(started);
    spent += used.user + used.system;
    if (out.length > 0) throw new Error(`${out.length} sessions expired: the workload is wrong`);
  }
  return spent / TICKS;
}

const rows = [];
for (const n of sizes) {
  const per = builds.map(() => []);
  // Alternate the builds, three rounds each, and keep the median.
  for (let round = 0; round < 3; round++) builds.forEach((b, i) => per[i].push(measure(b.lib.LeaderDuties, n)));
  const medians = per.map((xs) => xs.sort((a, b) => a - b)[1]);
  rows.push({ n, medians });
  console.log(
    `${n.toLocaleString('en-US')} sessions: ${builds.map((b, i) => `${b.label} ${medians[i].toFixed(0)} µs`).join(', ')} of CPU per due() call`,
  );
}

if (!opts['no-write']) {
  const file = path.join(root, 'docs/benchmarks.md');
  const START = '<!-- duties:start -->';
  const END = '<!-- duties:end -->';
  const head = `| live sessions | ${builds.map((b) => `\`due()\`, ${b.label}`).join(' | ')} | per second of ticks (${builds[0].label}) |`;
  const section = [
    START,
    '## Leader duties: deadline tracking',
    '',
    `Measured by \`node tools/bench/duties-bench.mjs\` on ${new Date().toISOString().slice(0, 10)}: Node ${process.version}, ${os.cpus()[0]?.model ?? 'unknown CPU'}, load average ${os.loadavg()[0].toFixed(1)}. The leader calls \`LeaderDuties.due()\` on every ${TICK_MS} ms tick; every session here heartbeats every TTL/3 (TTL ${TTL_MS / 1000} s) and none expires, over ${TICKS} ticks. CPU time per call, median of three rounds${builds.length > 1 ? ' alternating the builds' : ''}.`,
    '',
    head,
    `| ---: | ${builds.map(() => '---:').join(' | ')} | ---: |`,
    ...rows.map(
      (r) =>
        `| ${r.n.toLocaleString('en-US')} | ${r.medians.map((m) => `${m.toFixed(0)} µs`).join(' | ')} | ${((r.medians[0] * (1000 / TICK_MS)) / 1000).toFixed(1)} ms |`,
    ),
    '',
    'Session deadlines sit in a binary heap (`libs/cell/src/deadline-heap.ts`) that a heartbeat does not touch: a session whose entry surfaces with a later deadline is queued again, so each one is looked at about once per TTL instead of on every tick. Queued waits and lock-delays are still scanned on every tick: there are fewer of them.',
    END,
  ].join('\n');
  const text = readFileSync(file, 'utf8');
  const at = text.indexOf(START);
  const end = text.indexOf(END);
  const next =
    at >= 0 && end > at
      ? text.slice(0, at) + section + text.slice(end + END.length)
      : text.replace('<!-- cell:start -->', `${section}\n\n<!-- cell:start -->`);
  writeFileSync(file, next);
  console.log('wrote the duties section of docs/benchmarks.md');
}
