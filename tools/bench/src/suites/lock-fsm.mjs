// The lock-fsm suite, on one core: apply throughput of pre-encoded entries
// of an acquire/release mix through applyEntry (decode + apply + events),
// the path every replica runs, with decode alone and apply of pre-decoded
// commands for the split; each rate per second of wall clock and per second
// of process CPU time (the target is judged on CPU time: the doc text says
// why). The same throughput again in a child process running V8 with
// --single-threaded-gc; then memory per live lock with one holder. With
// --baseline, another checkout's build is measured in the same process, its
// trials alternating with this build's. Needs `node --expose-gc`: the suite
// runs itself again under it.
import { spawnSync } from 'node:child_process';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { Option } from 'commander';
import { buildMeasurePlan, renderLockFsm } from './lock-fsm-report.mjs';
import { buildWorkload, calibrate, measureMemory, measureThroughput } from './lock-fsm-measure.mjs';
import { buildProject, otherBuild, thisBuild } from '../systems/builds.mjs';
import { baseline, common, count, numeric, resolve } from '../options.mjs';
import { commandLine, machineMeta, writeDocs, writeJson } from '../report.mjs';

const RUN_MJS = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../../run.mjs');

export function register(program) {
  const cmd = program.command('lock-fsm').description('@fencer/lock-fsm: apply throughput per CPU-second and memory per live lock');
  numeric(cmd, '--entries <n>', 'entries of the workload, per trial', 1_000_000, 100_000, count);
  numeric(cmd, '--locks <n>', 'live locks of the memory measurement', 1_000_000, 100_000, count);
  numeric(cmd, '--trials <n>', 'throughput trials per build; figures are medians', 7, 2, count);
  cmd.option('--no-build', 'measure libs/lock-fsm as built (skip `nx build lock-fsm`)');
  cmd.addOption(new Option('--child-throughput', 'measure throughput only, print it as JSON (the suite runs itself so)').hideHelp());
  cmd.addOption(new Option('--lib <specifier>', 'the library to measure in a child').hideHelp());
  baseline(cmd, "its libs/lock-fsm's throughput, trials alternating with this build's");
  common(cmd);
  cmd.action(() => runLockFsm(resolve(cmd)));
  return cmd;
}

/** Runs the entry again in a child `node --expose-gc FLAGS run.mjs ARGS`; its stdout when `capture`. */
function again(nodeFlags, args, capture) {
  const child = spawnSync(process.execPath, ['--expose-gc', ...nodeFlags, RUN_MJS, ...args], {
    encoding: 'utf8',
    stdio: ['ignore', capture ? 'pipe' : 'inherit', 'inherit'],
    maxBuffer: 1 << 20,
  });
  if (child.status !== 0) throw new Error(`lock-fsm child (${nodeFlags.join(' ')} ${args.join(' ')}) failed with status ${child.status}`);
  return child.stdout;
}

/** Throughput of `lib` (an import specifier) in a child with other V8 flags. */
function childThroughput(nodeFlags, lib, o) {
  const args = ['lock-fsm', '--child-throughput', '--no-build', '--lib', lib, '--entries', String(o.entries), '--trials', String(o.trials)];
  return JSON.parse(again(nodeFlags, args, true).trim().split('\n').pop());
}

export async function runLockFsm(o) {
  if (typeof globalThis.gc !== 'function') {
    // Memory figures need a full GC on demand.
    again([], process.argv.slice(2), false);
    return;
  }
  if (o.childThroughput) {
    const lib = await import(o.lib);
    const [tp] = await measureThroughput(buildWorkload(lib, o.entries), [lib], o.trials);
    process.stdout.write(`${JSON.stringify(tp)}\n`);
    return;
  }
  if (o.build) buildProject('lock-fsm');
  const here = thisBuild().lib('lock-fsm');
  const lib = await import(here);
  const other = o.baseline ? otherBuild(o.baseline, o.baselineLabel) : undefined;
  const beforeLib = other ? await import(other.lib('lock-fsm')) : undefined;
  const meta = Object.assign(machineMeta(), { command: commandLine() });
  const m = buildMeasurePlan(o, other?.label);
  m.calibrationNs = calibrate();
  const workload = buildWorkload(lib, o.entries);
  m.entryBytes = workload.bytes / workload.entries.length;
  [m.tp, m.before] = await measureThroughput(workload, beforeLib ? [lib, beforeLib] : [lib], o.trials);
  m.single = childThroughput(['--single-threaded-gc'], here, o);
  workload.entries.length = 0;
  m.mem = measureMemory(lib, o.locks);
  delete m.mem.keepAlive;
  meta.end();
  const { body, row } = renderLockFsm(meta, m);
  console.log(body);
  if (o.json) writeJson(o.json, { meta, result: m });
  writeDocs({ name: 'lock-fsm', body, rows: row, keepNotes: true, write: o.write });
}
