#!/usr/bin/env node
// Cell benchmark (issue 8): a fresh five-replica Fencer cell against etcd
// (five members by default; three with --peers etcd3) and ZooKeeper (three
// servers, --peers zk3), all on 127.0.0.1 with fsync on, driven by the same
// load generator in this one process, scenario by scenario and system after
// system so every ratio comes from back-to-back measurements. Prints a table
// and rewrites the cell section of docs/benchmarks.md (between
// <!-- cell:start --> and <!-- cell:end -->; the hand-written notes between
// <!-- cell-notes:start --> and <!-- cell-notes:end --> are kept).
//
//   node tools/bench/run.mjs [--peers etcd5,etcd3,zk3] [--scenarios uncontended,contended-16,...]
//                            [--seconds N] [--warmup N] [--system-warmup N] [--quick] [--no-write] [--json FILE]
//                            [--cpu-prof DIR] [--keep-data] [--baseline PATH/apps/cell-node/dist/main.js]
//                            [--compare-args "--peer-transport grpc NAME=value ..."] [--compare-label TEXT]
//                            [--rounds N]   (every scenario but failover N times, systems alternating; tables show medians)
//   node tools/bench/run.mjs --render FILE.json   (rewrite the docs section from a saved --json run)
//   node tools/bench/run.mjs --fleet [flags]       (the fleet benchmark instead: router overhead and batched
//                                                   heartbeats, tools/bench/fleet-bench.mjs, given the other flags)
//
// --baseline adds a second five-replica cell started from another build of
// the cell node (e.g. a worktree before a change), measured in the same run.
// --compare-args adds a second five-replica cell from this build, started with
// these extra cell-node flags (e.g. the gRPC peer transport against the TCP one);
// NAME=value words set its environment, and NODE_FLAGS=--a,--b passes flags to
// node itself (e.g. V8 flags that NODE_OPTIONS refuses).
//
// Needs the cell node built (`npx nx run-many -t build`; `npm run bench` does
// it) and, for the peers, Debian's etcd-server and zookeeper packages.
import { spawnSync } from 'node:child_process';
import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { cellNodeBuilt } from '@fencer/fleet';
import { FencerSystem } from './cell/fencer.mjs';
import { EtcdSystem } from './cell/etcd.mjs';
import { SCENARIOS } from './cell/scenarios.mjs';
import { renderMarkdown, renderTerminal } from './cell/report.mjs';
import { sleep } from './cell/common.mjs';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');
const args = process.argv.slice(2);
const flag = (name) => args.includes(name);
const option = (name, fallback) => {
  const at = args.indexOf(name);
  return at >= 0 && args[at + 1] !== undefined ? args[at + 1] : fallback;
};
if (flag('--fleet')) {
  const fleet = spawnSync(
    process.execPath,
    [path.join(path.dirname(fileURLToPath(import.meta.url)), 'fleet-bench.mjs'), ...args.filter((a) => a !== '--fleet')],
    { stdio: 'inherit' },
  );
  process.exit(fleet.status ?? 1);
}
if (flag('--help') || flag('-h')) {
  const lines = readFileSync(fileURLToPath(import.meta.url), 'utf8')
    .split('\n')
    .slice(1);
  console.log(
    lines
      .slice(
        0,
        lines.findIndex((l) => !l.startsWith('//')),
      )
      .map((l) => l.replace(/^\/\/ ?/, ''))
      .join('\n'),
  );
  process.exit(0);
}

// --render FILE.json: rewrite the docs section (and print the table) from a saved run, without running anything.
const renderFrom = option('--render', undefined);
const quick = flag('--quick');
const opts = {
  seconds: Number(option('--seconds', quick ? '3' : '8')),
  warmupS: Number(option('--warmup', quick ? '0.5' : '1')),
  failoverTrials: Number(option('--failover-trials', quick ? '1' : '2')),
  keepaliveSessions: Number(option('--keepalive-sessions', '10000')),
  watchers: Number(option('--watchers', '1000')),
  watchWriteRate: Number(option('--watch-rate', '10')),
  // Per system, before any scenario: uncontended (16 clients, then 1) and contended load, measured
  // nowhere. A fresh Node process runs its hot paths in V8's interpreter and baseline tiers for its
  // first tens of seconds (the first 1-client window measured 52 cycles/s, the fifth 145), which a
  // server that has been up for a day does not; etcd (compiled ahead of time) gets the same load.
  systemWarmupS: Number(option('--system-warmup', quick ? '3' : '15')),
  // Rounds of every scenario but failover (which has its trials), the systems' order alternating
  // between rounds; the tables show each system's median round, and the notes every round.
  rounds: Math.max(1, Math.floor(Number(option('--rounds', '1'))) || 1),
};
const peerKeys = option('--peers', 'etcd5')
  .split(',')
  .map((s) => s.trim())
  .filter(Boolean);
const scenarioSpec = option('--scenarios', 'all');
const allKeys = Object.keys(SCENARIOS);
const scenarioKeys =
  scenarioSpec === 'all'
    ? allKeys
    : allKeys.filter((k) => scenarioSpec.split(',').some((s) => k === s.trim() || k.startsWith(`${s.trim()}-`)));
if (scenarioKeys.length === 0) {
  console.error(`no scenario matches "${scenarioSpec}"; known: ${allKeys.join(', ')}`);
  process.exit(2);
}
for (const p of peerKeys) {
  if (!/^(etcd[35]|zk3)$/.test(p)) {
    console.error(`unknown peer "${p}": use etcd5, etcd3, zk3`);
    process.exit(2);
  }
}
if (!cellNodeBuilt()) {
  console.error('apps/cell-node/dist/main.js is missing: run `npx nx run-many -t build` first (npm run bench does)');
  process.exit(2);
}

if (renderFrom) {
  const saved = JSON.parse(readFileSync(renderFrom, 'utf8'));
  const savedSystems = saved.meta.systems.map((s) => ({ key: s.key, label: s.label }));
  console.log(renderTerminal.table(saved.meta, savedSystems, saved.results));
  if (!flag('--no-write')) writeDocs(saved.meta, savedSystems, saved.results);
  process.exit(0);
}

const systems = [new FencerSystem({ cpuProfDir: option('--cpu-prof', undefined), keepData: flag('--keep-data') })];
const compareArgs = option('--compare-args', undefined);
if (compareArgs) {
  // NAME=value words set environment variables of the compared cell's processes; the rest are flags.
  const words = compareArgs.split(/\s+/).filter(Boolean);
  const env = Object.fromEntries(
    words.filter((w) => /^[A-Z_][A-Z0-9_]*=/.test(w)).map((w) => [w.slice(0, w.indexOf('=')), w.slice(w.indexOf('=') + 1)]),
  );
  const extraArgs = words.filter((w) => !/^[A-Z_][A-Z0-9_]*=/.test(w));
  systems.push(
    new FencerSystem({
      extraArgs,
      env,
      key: 'fencer-compare',
      label: option('--compare-label', `Fencer, ${compareArgs}`),
      portBase: 13_000,
      keepData: flag('--keep-data'),
    }),
  );
}
const baselineMain = option('--baseline', undefined);
if (baselineMain) {
  if (!existsSync(baselineMain)) {
    console.error(`--baseline ${baselineMain}: no such file (give a cell-node dist/main.js built from another tree)`);
    process.exit(2);
  }
  systems.push(
    new FencerSystem({ main: baselineMain, key: 'fencer-baseline', label: 'Fencer, baseline build', keepData: flag('--keep-data') }),
  );
}
for (const p of peerKeys) {
  if (p.startsWith('etcd')) systems.push(new EtcdSystem(Number(p.slice(4)), { keepData: flag('--keep-data') }));
  else {
    const { ZkSystem } = await import('./cell/zk.mjs');
    systems.push(new ZkSystem(3, { keepData: flag('--keep-data') }));
  }
}

const started = [];
let stopping = false;
async function stopEverything() {
  if (stopping) return;
  stopping = true;
  await Promise.all(started.map((s) => s.stop().catch((e) => console.error(`stopping ${s.key}: ${e.message}`))));
}
for (const sig of ['SIGINT', 'SIGTERM']) {
  process.on(sig, () => {
    console.error(`\n${sig}: stopping everything this run started`);
    stopEverything().finally(() => process.exit(130));
  });
}

const loadavg = () =>
  os
    .loadavg()
    .map((x) => x.toFixed(2))
    .join(' / ');
const meta = {
  date: new Date().toISOString(),
  cpu: `${os.cpus().length} × ${os.cpus()[0]?.model ?? 'unknown CPU'}`,
  memGiB: (os.totalmem() / 2 ** 30).toFixed(1),
  kernel: `${os.type()} ${os.release()}`,
  node: process.version,
  loadStart: loadavg(),
  opts,
  scenarioKeys,
  systems: [],
};
const t0 = Date.now();
const results = [];
try {
  for (const s of systems) {
    process.stdout.write(`starting ${s.label} … `);
    const t = Date.now();
    started.push(s);
    await s.start();
    console.log(`up in ${((Date.now() - t) / 1000).toFixed(1)} s`);
    meta.systems.push({ key: s.key, label: s.label, version: s.version, settings: s.settings });
  }
  if (opts.systemWarmupS > 0) {
    const warmKeys = ['uncontended-16', 'uncontended-1', 'contended-16'];
    for (const s of systems) {
      process.stdout.write(`warming up ${s.label} (${opts.systemWarmupS} s of ${warmKeys.join(', ')}; not measured) … `);
      for (const k of warmKeys) {
        await SCENARIOS[k]
          .run(s, { ...opts, warmupS: 0, seconds: opts.systemWarmupS / warmKeys.length })
          .catch((e) => console.warn(`warm-up ${k}: ${e?.message ?? e}`));
      }
      console.log('done');
    }
  }
  for (const key of scenarioKeys) {
    const sc = SCENARIOS[key];
    console.log(`\n${sc.title}`);
    const rounds = key.startsWith('failover') ? 1 : opts.rounds;
    for (let round = 0; round < rounds; round++) {
      for (const s of round % 2 === 0 ? systems : [...systems].reverse()) {
        if (sc.skip?.(s)) continue;
        if (typeof s.supports === 'function' && !s.supports(key)) {
          if (round === 0) {
            results.push({ scenario: key, system: s.key, skipped: s.supportNote?.(key) ?? 'not applicable' });
            console.log(`  ${s.label.padEnd(22)} — ${s.supportNote?.(key) ?? 'not applicable'}`);
          }
          continue;
        }
        const r = await sc.run(s, opts).catch((e) => ({ error: e?.stack ?? String(e) }));
        results.push({ scenario: key, system: s.key, round, ...r });
        console.log(`  ${rounds > 1 ? `round ${round + 1}: ` : ''}${renderTerminal.row(s, sc, r)}`);
        await sleep(500);
      }
    }
  }
} finally {
  meta.loadEnd = loadavg();
  meta.totalS = (Date.now() - t0) / 1000;
  await stopEverything();
}

console.log(`\n${renderTerminal.table(meta, systems, results)}`);
console.log(`whole run: ${meta.totalS.toFixed(0)} s; load average at start ${meta.loadStart}, at end ${meta.loadEnd}`);

const jsonOut = option('--json', undefined);
if (jsonOut) writeFileSync(jsonOut, `${JSON.stringify({ meta, results }, null, 2)}\n`);

if (!flag('--no-write')) writeDocs(meta, systems, results);
process.exit(0);

function writeDocs(meta, systems, results) {
  const doc = path.join(root, 'docs/benchmarks.md');
  const text = existsSync(doc) ? readFileSync(doc, 'utf8') : '# Benchmarks\n';
  const start = '<!-- cell:start -->';
  const end = '<!-- cell:end -->';
  const notesStart = '<!-- cell-notes:start -->';
  const notesEnd = '<!-- cell-notes:end -->';
  const old = text.includes(start) && text.includes(end) ? text.slice(text.indexOf(start), text.indexOf(end) + end.length) : '';
  const notes = old.includes(notesStart)
    ? old.slice(old.indexOf(notesStart), old.indexOf(notesEnd) + notesEnd.length)
    : `${notesStart}\n${notesEnd}`;
  const section = `${start}\n${renderMarkdown(meta, systems, results)}\n${notes}\n${end}`;
  // Re-read just before writing: other sections of this file belong to others and may have changed.
  const now = existsSync(doc) ? readFileSync(doc, 'utf8') : text;
  const next =
    now.includes(start) && now.includes(end)
      ? now.slice(0, now.indexOf(start)) + section + now.slice(now.indexOf(end) + end.length)
      : `${now.trimEnd()}\n\n${section}\n`;
  writeFileSync(doc, next);
  console.log(`wrote the cell section of ${path.relative(process.cwd(), doc)}`);
}
