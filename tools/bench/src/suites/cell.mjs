// The cell suite: Fencer against etcd and
// ZooKeeper, every system fresh on 127.0.0.1 with fsync on, driven by the
// same load generators in this one process, scenario by scenario and
// system after system, so every ratio comes from back-to-back
// measurements. Prints a table and rewrites the cell section of
// docs/benchmarks.md and its summary rows.
import { readFileSync } from 'node:fs';
import { SCENARIOS } from './cell-scenarios.mjs';
import { renderMarkdown, renderTerminal, summaryRows } from './cell-report.mjs';
import { makeSystems, SYSTEM_NAMES } from '../systems/index.mjs';
import { baseline, common, count, listOption, numeric, resolve } from '../options.mjs';
import { commandLine, machineMeta, writeDocs, writeJson } from '../report.mjs';
import { sleep } from '../measure.mjs';
import { stopOnSignal } from '../processes.mjs';

/** The unmeasured load every system gets first, split evenly over these scenarios. */
const WARM_KEYS = ['uncontended-16', 'uncontended-1', 'contended-16'];
/** Pause between two measurements, so one system's tail does not land in the next window. */
const BETWEEN_MS = 500;

export function register(program) {
  const cmd = program
    .command('cell')
    .description('Fencer against etcd and ZooKeeper, scenario by scenario, back to back')
    .addOption(
      listOption('--systems <list>', `systems to compare, the first is "Fencer" in every ratio: ${Object.keys(SYSTEM_NAMES).join(', ')}`, [
        'fencer',
        'etcd5',
      ]),
    )
    .addOption(listOption('--scenarios <list>', `scenarios (a prefix names a family): all, ${Object.keys(SCENARIOS).join(', ')}`, ['all']));
  numeric(cmd, '--seconds <n>', 'measured window of each scenario', 8, 3);
  numeric(cmd, '--warmup <n>', 'unmeasured seconds before each window', 1, 0.5);
  numeric(cmd, '--system-warmup <n>', "each system's unmeasured load before any scenario, s (a fresh Node process runs cold)", 15, 3);
  numeric(cmd, '--rounds <n>', 'rounds of every scenario but failover, systems alternating; tables show median rounds', 1, 1, count);
  numeric(cmd, '--failover-trials <n>', 'kills of the leader in the failover scenario', 2, 1, count);
  numeric(cmd, '--keepalive-sessions <n>', 'sessions (leases) of the keepalive scenarios', 10_000, 10_000, count);
  numeric(cmd, '--watchers <n>', 'watchers of the watch scenario', 1000, 1000, count);
  numeric(cmd, '--watch-rate <n>', 'grants per second under the watched prefix', 10, 10);
  numeric(cmd, '--proxy-interval-ms <n>', "the fleet's proxies' HeartbeatBatch interval", 250, 250, count);
  cmd
    .option('--keepalive-to <where>', 'KeepAlive streams to the leader, or spread over every member (followers relay)', 'leader')
    .option(
      '--compare-args <words>',
      'a second cell of this build with these cell-node flags; NAME=value words set its environment (NODE_FLAGS=--a,--b: node flags)',
    )
    .option('--compare-label <text>', 'what to call the compared cell')
    .option('--cpu-prof <dir>', "write V8 CPU profiles of this build's replicas here (summarise them with the profile suite)")
    .option('--keep-data', "keep the systems' data directories")
    .option('--render <file>', 'print and write the report of a saved --json run, running nothing');
  baseline(cmd, 'a second Fencer cell (or fleet) from it');
  common(cmd);
  cmd.action(() => runCell(resolve(cmd)));
  return cmd;
}

export function selectScenarios(spec) {
  const all = Object.keys(SCENARIOS);
  if (spec.includes('all')) return all;
  const keys = all.filter((k) => spec.some((s) => k === s || k.startsWith(`${s}-`)));
  if (keys.length === 0) throw new Error(`no scenario matches "${spec.join(',')}"; known: ${all.join(', ')}`);
  return keys;
}

async function startAll(systems, started) {
  for (const s of systems) {
    process.stdout.write(`starting ${s.label} … `);
    const t = Date.now();
    started.push(s);
    await s.start();
    console.log(`up in ${((Date.now() - t) / 1000).toFixed(1)} s`);
  }
}

async function warmUp(systems, o) {
  if (o.systemWarmup <= 0) return;
  for (const s of systems) {
    process.stdout.write(`warming up ${s.label} (${o.systemWarmup} s of ${WARM_KEYS.join(', ')}; not measured) … `);
    for (const k of WARM_KEYS) {
      await SCENARIOS[k]
        .run(s, { ...o, warmupS: 0, seconds: o.systemWarmup / WARM_KEYS.length })
        .catch((e) => console.warn(`warm-up ${k}: ${e?.message ?? e}`));
    }
    console.log('done');
  }
}

/** One scenario on every system, `rounds` times, the systems' order alternating. */
async function runScenario(key, systems, o, results) {
  const sc = SCENARIOS[key];
  console.log(`\n${sc.title}`);
  const rounds = key.startsWith('failover') ? 1 : o.rounds;
  for (let round = 0; round < rounds; round++) {
    for (const s of round % 2 === 0 ? systems : [...systems].reverse()) {
      if (s.supports?.(key) === false) {
        const skipped = s.supportNote?.(key) ?? 'not applicable';
        if (round === 0) results.push({ scenario: key, system: s.key, skipped });
        if (round === 0) console.log(`  ${s.label.padEnd(22)} — ${skipped}`);
        continue;
      }
      const r = await sc.run(s, o).catch((e) => ({ error: e?.stack ?? String(e) }));
      results.push({ scenario: key, system: s.key, round, ...r });
      console.log(`  ${rounds > 1 ? `round ${round + 1}: ` : ''}${renderTerminal.row(s, sc, r)}`);
      await sleep(BETWEEN_MS);
    }
  }
}

function report(meta, systems, results, o) {
  console.log(`\n${renderTerminal.table(meta, systems, results)}`);
  if (meta.totalS !== undefined)
    console.log(`whole run: ${meta.totalS.toFixed(0)} s; load average at start ${meta.loadStart}, at end ${meta.loadEnd}`);
  if (o.json) writeJson(o.json, { meta, results });
  const body = renderMarkdown(meta, systems, results);
  writeDocs({ name: 'cell', body, rows: summaryRows(meta, systems, results), keepNotes: true, write: o.write });
}

export async function runCell(o) {
  if (o.render) {
    const saved = JSON.parse(readFileSync(o.render, 'utf8'));
    return report(saved.meta, saved.meta.systems, saved.results, o);
  }
  const opts = { ...o, warmupS: o.warmup };
  const scenarioKeys = selectScenarios(o.scenarios);
  const systems = await makeSystems(o.systems, o);
  const started = [];
  const stopAll = stopOnSignal(started);
  const meta = Object.assign(machineMeta(), { command: commandLine(), opts, scenarioKeys, systems: [] });
  const results = [];
  try {
    await startAll(systems, started);
    meta.systems = systems.map((s) => ({ key: s.key, label: s.label, version: s.version, settings: s.settings }));
    await warmUp(systems, opts);
    for (const key of scenarioKeys) await runScenario(key, systems, opts, results);
  } finally {
    meta.end();
    await stopAll();
  }
  report(meta, systems, results, o);
}
