// The efficiency suite (issue 32): Fencer as a managed fleet, clients
// through its router, beside ZooKeeper (3 servers) and etcd (5 members) in
// the same run. Per system: acquire+release cycles at 1, 16 and 64 clients
// (throughput, p50/p99, server CPU per cycle summed over every server
// process) and the CPU per message that keeps a session alive (KeepAlive
// through the proxies, session ping, lease keepalive) at one pace. Writes
// its section of docs/benchmarks.md, its summary rows, and the charts at
// the top of that file (docs/charts/*.svg).
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { chartsBlock, charts, componentsPerOp, cpuMsPerOp, renderMarkdown, summaryRows } from './efficiency-report.mjs';
import { FencerManagedFleet } from '../systems/fencer-managed.mjs';
import { EtcdSystem } from '../systems/etcd.mjs';
import { uncontended } from '../load/lock-cycles.mjs';
import { etcdUpkeep, fencerUpkeep, UPKEEP_INTERVAL_MS, zkUpkeep } from '../load/session-upkeep.mjs';
import { byComponent, sleep } from '../measure.mjs';
import { common, count, listOption, numeric, resolve } from '../options.mjs';
import { stopOnSignal } from '../processes.mjs';
import { DOC, commandLine, machineMeta, writeDocs, writeJson } from '../report.mjs';
import { writeCharts } from '../charts.mjs';

/** Pause between two measurements, so one system's tail does not land in the next window. */
const BETWEEN_MS = 500;
/** A run that began at a load average above this (per core) is labelled provisional. */
const QUIET_LOAD_PER_CORE = 0.5;
const SYSTEMS = ['fencer', 'zk3', 'etcd5'];

export function register(program) {
  const cmd = program
    .command('efficiency')
    .description(
      'Fencer through its router (fleet with proxy and control plane) beside ZooKeeper-3 and etcd-5: cycles, latency, server CPU per cycle and per KeepAlive; draws docs/charts',
    );
  cmd.addOption(listOption('--systems <list>', `systems, Fencer first: ${SYSTEMS.join(', ')}`, SYSTEMS));
  cmd.addOption(listOption('--clients <list>', 'client counts of the lock cycles', ['1', '16', '64']));
  numeric(cmd, '--replicas <n>', "replicas of Fencer's cell", 3, 3, count);
  numeric(cmd, '--seconds <n>', 'measured window of each row', 8, 2);
  numeric(cmd, '--warmup <n>', 'unmeasured seconds before each window', 1, 0.5);
  numeric(cmd, '--system-warmup <n>', "each system's unmeasured load before any row, s (a fresh Node process runs cold)", 15, 2);
  numeric(cmd, '--rounds <n>', 'rounds of every row, systems alternating; tables show median rounds', 1, 1, count);
  numeric(cmd, '--sessions <n>', 'sessions kept alive in the upkeep row', 5000, 300, count);
  numeric(cmd, '--streams <n>', 'KeepAlive streams of the upkeep row (Fencer, etcd)', 16, 4, count);
  cmd.option('--charts-dir <dir>', 'where the charts go', path.join(path.dirname(DOC), 'charts'));
  cmd.option('--render <file>', 'print and write the report of a saved --json run, running nothing');
  common(cmd);
  cmd.action(() => runEfficiency(resolve(cmd)));
  return cmd;
}

async function makeSystems(o) {
  const out = [];
  for (const name of o.systems) {
    if (name === 'fencer')
      out.push(new FencerManagedFleet({ replicas: o.replicas, label: `Fencer, 1 cell of ${o.replicas} replicas through its router` }));
    else if (name === 'etcd5') out.push(new EtcdSystem(5));
    else if (name === 'zk3') {
      const { ZkSystem } = await import('../systems/zk.mjs');
      out.push(new ZkSystem(3));
    } else throw new Error(`unknown system ${name}: use ${SYSTEMS.join(', ')}`);
  }
  return out;
}

/** One lock-cycle row: the closed loop's figures and the server CPU per cycle, by component where the system says. */
async function cyclesRow(system, clients, o) {
  const r = await uncontended(system, clients, { warmupS: o.warmup, seconds: o.seconds });
  const components = system.components ? componentsPerOp(byComponent(r.cpu.perPid, system.components()), r.ops) : undefined;
  return { ...r, cpuMsPerOp: cpuMsPerOp(r.cpu, r.ops), components };
}

async function upkeepRow(system, o) {
  const opts = { sessions: o.sessions, streams: o.streams, seconds: o.seconds, warmupS: Math.max(o.warmup, 2) };
  if (system.key.startsWith('zk')) return zkUpkeep(system, opts);
  if (system.key.startsWith('etcd')) return etcdUpkeep(system, opts);
  const r = await fencerUpkeep(system, opts);
  return { ...r, components: componentsPerOp(byComponent(r.cpu.perPid, system.components()), r.ops) };
}

function show(system, scenario, r) {
  const what = r.error
    ? `ERROR ${r.error.split('\n')[0]}`
    : `${Math.round(r.rate)}/s p50 ${r.p50?.toFixed(2) ?? '—'} ms p99 ${r.p99?.toFixed(2) ?? '—'} ms, server CPU ${r.cpuMsPerOp?.toFixed(3) ?? '—'} ms per op`;
  console.log(`  ${scenario.padEnd(10)} ${system.label.padEnd(48)} ${what}${r.note ? `  [${r.note}]` : ''}`);
}

async function measureAll(systems, o, results) {
  for (const s of systems) {
    process.stdout.write(`warming up ${s.label} (${o.systemWarmup} s at 16 clients) … `);
    await uncontended(s, 16, { warmupS: 0, seconds: o.systemWarmup }).catch((e) => console.warn(`warm-up: ${e.message}`));
    console.log('done');
  }
  const rows = [...o.clients.map((n) => [`cycles-${n}`, (s) => cyclesRow(s, Number(n), o)]), ['upkeep', (s) => upkeepRow(s, o)]];
  for (const [scenario, run] of rows) {
    for (let round = 0; round < o.rounds; round++) {
      for (const s of round % 2 === 0 ? systems : [...systems].reverse()) {
        const r = await run(s).catch((e) => ({ error: e?.stack ?? String(e) }));
        results.push({ scenario, system: s.key, round, ...r });
        show(s, scenario, r);
        await sleep(BETWEEN_MS);
      }
    }
  }
}

function report(meta, results, o) {
  const body = renderMarkdown(meta, results);
  console.log(`\n${body}`);
  if (o.json) writeJson(o.json, { meta, results });
  const whole = SYSTEMS.every((s) => meta.systems.some((m) => m.key === s));
  if (o.write && !whole) console.log('docs/benchmarks.md left as it is: only a run of all three systems rewrites the efficiency section');
  if (!o.write || !whole) return;
  const list = charts(meta, results);
  writeCharts(o.chartsDir, list);
  writeDocs({ name: 'charts', body: chartsBlock(meta, results, list) });
  writeDocs({ name: 'efficiency', body, rows: summaryRows(meta, results), keepNotes: true });
}

export async function runEfficiency(o) {
  if (o.render) {
    const saved = JSON.parse(readFileSync(o.render, 'utf8'));
    return report(saved.meta, saved.results, o);
  }
  const clients = o.clients.map(Number);
  if (clients.some((n) => !Number.isInteger(n) || n < 1)) throw new Error(`--clients ${o.clients.join(',')}: whole numbers of at least 1`);
  const systems = await makeSystems(o);
  const started = [];
  const stopAll = stopOnSignal(started);
  const meta = Object.assign(machineMeta(), { command: commandLine(), opts: o, clients, upkeepIntervalMs: UPKEEP_INTERVAL_MS });
  meta.provisional = Number(meta.loadStart.split(' / ')[0]) > QUIET_LOAD_PER_CORE * meta.cores;
  const results = [];
  try {
    for (const s of systems) {
      process.stdout.write(`starting ${s.label} … `);
      const t = Date.now();
      started.push(s);
      await s.start();
      console.log(`up in ${((Date.now() - t) / 1000).toFixed(1)} s`);
    }
    meta.systems = systems.map((s) => ({ key: s.key, label: s.label, version: s.version, settings: s.settings }));
    await measureAll(systems, { ...o, clients }, results);
  } finally {
    meta.end();
    await stopAll();
  }
  report(meta, results, o);
}
