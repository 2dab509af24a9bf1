#!/usr/bin/env node
// The deterministic simulator's runner.
//
//   node tools/sim/run.mjs --seeds N --seconds S [--from F] [--replicas 3|5] [--machine lock|kv|meta] [--bug NAME] [--jobs J]
//   node tools/sim/run.mjs --seed X --seconds S [--replicas R] [--machine lock|kv] [--bug NAME | --profile NAME] [--planted NAME] [--verbose]
//   node tools/sim/run.mjs --machine moves --seeds N [--seconds S] [--bug importWithoutRevisionRaise|switchBeforeImport|unfencedSteps] [--no-stale-meta-leader] [--jobs J]
//
// Runs seeds F..F+N-1 (default F=1) of the CI sweep (all faults on; five
// replicas, every fifth seed three, unless --replicas is given), or with one
// planted bug (--bug) under that bug's fault profile, or under a bug's fault
// profile with the bug off (--profile, as regressions.json replays). Prints every failing
// seed with the one command that replays it exactly, and the ratio of
// simulated to real time. --seed runs one seed; with --verbose it prints the
// run's event log. --machine kv runs the toy register machine instead of the
// production lock state machine (the default); --machine meta runs the
// control plane's meta group (three members, its own faults and checkers:
// runMetaSimulation; --seconds, --bug ackBeforeFsync and --jobs apply, the
// other options do not); --machine moves runs tenant moves: two lock cells and
// the meta group, a namespace moved back and forth under crashes, pauses and
// partitions (--no-stale-meta-leader: the meta group only crashes)
// (runMovesSimulation; --seconds, --bug with a move bug and --jobs apply);
// --planted puts in a lock-level
// bug (reuseToken, doubleGrant, staleLockRead, heartbeatWithoutConfirmation)
// to watch a lock checker fire.
// Exits 1 if any seed failed (with --bug: if none did).
// Builds the sim library and its dependencies first (tsc --build) unless --no-build.
import { execFileSync } from 'node:child_process';
import { availableParallelism } from 'node:os';
import { dirname, resolve } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { Worker, isMainThread, parentPort, workerData } from 'node:worker_threads';
import { Command, InvalidArgumentError } from 'commander';

const root = resolve(dirname(fileURLToPath(import.meta.url)), '../..');
const distEntry = pathToFileURL(resolve(root, 'libs/sim/dist/index.js')).href;

/** Exits 2 with the reason and the usage line, as every argument error does. */
function usage(message) {
  if (message) console.error(`run.mjs: ${message}`);
  console.error(program.helpInformation());
  process.exit(2);
}

const count = (name) => (v) => {
  const n = Number(v);
  if (!Number.isSafeInteger(n) || n < 0) throw new InvalidArgumentError(`${name} must be a non-negative integer, got ${v}`);
  return n;
};

const program = new Command('run.mjs')
  .description('Runs seeds of the deterministic simulator and prints every failing seed with the command that replays it.')
  .option('--seeds <n>', 'run this many seeds of the CI sweep', count('--seeds'))
  .option('--seed <x>', 'run this one seed', count('--seed'))
  .option('--from <f>', 'first seed of --seeds', count('--from'), 1)
  .option('--seconds <s>', 'simulated seconds per seed', count('--seconds'))
  .option('--replicas <r>', 'replicas per cell (default: five, every fifth seed three)', count('--replicas'))
  .option(
    '--machine <kind>',
    "lock (the default), kv (the toy register), meta (the control plane's meta group) or moves (two cells and the meta group, moving a tenant)",
  )
  .option('--bug <name>', 'plant this Raft-level bug under its fault profile (exits 1 unless a seed catches it)')
  .option('--profile <name>', "a bug's fault profile with the bug off")
  .option('--planted <name>', 'plant this lock-level bug')
  .option('--stale-meta-leader', 'with --machine moves: pauses and partitions hit the meta group too (the default)')
  .option('--no-stale-meta-leader', 'with --machine moves: the meta group only crashes (no pauses or partitions)')
  .option('--jobs <j>', 'worker threads', count('--jobs'), 1)
  .option('--verbose', "with --seed: print the run's event log", false)
  .option('--json', 'print each seed and a JSON summary', false)
  .option('--no-build', 'do not build the sim library first')
  .exitOverride()
  .configureOutput({ writeErr: () => {} });

function parseArgs(argv) {
  try {
    program.parse(argv, { from: 'user' });
  } catch (err) {
    if (err.code === 'commander.helpDisplayed') process.exit(0);
    usage(err.message.replace(/^error: /, ''));
  }
  const args = { ...program.opts() };
  args.jobs = Math.max(1, args.jobs);
  if ((args.seeds === undefined) === (args.seed === undefined)) usage('give exactly one of --seeds N or --seed X');
  if (args.bug !== undefined && args.profile !== undefined) usage('give at most one of --bug and --profile');
  if (args.machine !== undefined && !['lock', 'kv', 'meta', 'moves'].includes(args.machine))
    usage(`--machine is lock, kv, meta or moves, got ${args.machine}`);
  const ownRun = args.machine === 'meta' || args.machine === 'moves';
  if (args.staleMetaLeader !== undefined && args.machine !== 'moves') usage('--[no-]stale-meta-leader goes with --machine moves');
  if (ownRun && (args.replicas !== undefined || args.profile !== undefined || args.planted !== undefined)) {
    usage(`--machine ${args.machine} takes --seconds, --bug and --jobs; not --replicas, --profile or --planted`);
  }
  return args;
}

function optionsFor(sim, args, seed) {
  const overrides = {};
  if (args.seconds !== undefined) overrides.seconds = args.seconds;
  if (args.replicas !== undefined) overrides.replicas = args.replicas;
  if (args.machine !== undefined) overrides.machine = args.machine;
  if (args.planted !== undefined) overrides.planted = args.planted;
  if (args.bug !== undefined) return sim.bugOptions(args.bug, seed, overrides);
  if (args.profile !== undefined) return { ...sim.bugOptions(args.profile, seed, overrides), bugs: {} };
  return sim.sweepOptions(seed, overrides);
}

/** One seed of the meta group's run, or of the moves run, as the same small record. */
function runMetaSeed(sim, args, seed) {
  const options = {
    seed,
    ...(args.seconds !== undefined ? { runMs: args.seconds * 1000 } : {}),
    ...(args.bug !== undefined ? { bug: args.bug } : {}),
    ...(args.staleMetaLeader === false ? { staleMetaLeader: false } : {}),
  };
  const started = performance.now();
  const moves = args.machine === 'moves';
  const report = moves ? sim.runMovesSimulation(options) : sim.runMetaSimulation(options);
  const fired = [...new Set(report.violations.map((v) => v.checker))];
  return {
    seed,
    ok: fired.length === 0,
    safety: fired.some((c) => c !== 'stalled'),
    fired,
    violations: report.violations.slice(0, 5),
    violationCount: report.violations.length,
    traceHash: report.traceHash,
    simulatedSeconds: report.simulatedSeconds,
    realMs: performance.now() - started,
    events: report.stats.events,
    replay: moves ? sim.movesReplayCommand(options) : sim.metaReplayCommand(options),
    ...(moves ? { stats: report.stats } : {}),
  };
}

/** Runs seeds; returns one small record per seed (workers post these back). */
function runSeeds(sim, args, seeds, log) {
  const out = [];
  for (const seed of seeds) {
    if (args.machine === 'meta' || args.machine === 'moves') {
      out.push(runMetaSeed(sim, args, seed));
      continue;
    }
    const options = optionsFor(sim, args, seed);
    const report = sim.runSimulation(options, log);
    const safety = report.fired.some((c) => sim.SAFETY_CHECKERS.includes(c));
    out.push({
      seed,
      ok: report.ok,
      safety,
      fired: report.fired,
      violations: report.violations.slice(0, 5),
      violationCount: report.violationCount,
      traceHash: report.traceHash,
      simulatedSeconds: report.simulatedSeconds,
      realMs: report.realMs,
      events: report.stats.events,
      replay: sim.replayCommand(options, args.bug, args.profile),
    });
  }
  return out;
}

if (!isMainThread) {
  const sim = await import(distEntry);
  const { args, seeds } = workerData;
  for (const seed of seeds) parentPort.postMessage(runSeeds(sim, args, [seed])[0]);
} else {
  const args = parseArgs(process.argv.slice(2));
  if (args.build) {
    // tsc --build follows the project references: base, raft, wal, replica, then sim (what `nx build sim` runs).
    execFileSync('npx', ['tsc', '--build', 'libs/sim/tsconfig.lib.json'], { cwd: root, stdio: ['ignore', 'inherit', 'inherit'] });
  }
  const sim = await import(distEntry);
  const bugNames = args.machine === 'meta' ? sim.META_BUGS : args.machine === 'moves' ? sim.MOVE_BUGS : sim.BUGS;
  for (const name of [args.bug, args.profile]) {
    if (name !== undefined && !bugNames.includes(name)) usage(`unknown bug ${name}; one of ${bugNames.join(', ')}`);
  }
  if (args.planted !== undefined && !sim.PLANTED_BUGS.includes(args.planted))
    usage(`unknown planted bug ${args.planted}; one of ${sim.PLANTED_BUGS.join(', ')}`);
  if (args.planted !== undefined && args.machine === 'kv') usage('--planted bugs are lock-level: not with --machine kv');
  const seeds = args.seed !== undefined ? [args.seed] : Array.from({ length: args.seeds }, (_, i) => args.from + i);
  const jobs = Math.min(args.jobs, seeds.length, availableParallelism());
  const started = performance.now();
  const cpuStarted = process.cpuUsage();
  const results = [];
  const progressEvery = seeds.length >= 100 ? Math.ceil(seeds.length / 20) : 0;
  const onResult = (r) => {
    results.push(r);
    if (progressEvery > 0 && results.length % progressEvery === 0) {
      const failedSoFar = results.filter((x) => !x.ok).length;
      const wall = (performance.now() - started) / 1000;
      console.error(`… ${results.length}/${seeds.length} seeds, ${failedSoFar} failed, ${wall.toFixed(0)} s`);
    }
    if (!r.ok) {
      const first = r.violations[0];
      console.log(
        `FAIL seed ${r.seed}: ${r.fired.join(', ')}${first ? ` — ${first.detail.split(' | ')[0]} (at ${(first.timeUs / 1e6).toFixed(3)} s)` : ''}`,
      );
      console.log(`  replay: ${r.replay}`);
    } else if (args.seed !== undefined || args.json) {
      console.log(
        `ok seed ${r.seed}: trace ${r.traceHash}, ${r.events} events, ${r.simulatedSeconds} s simulated in ${(r.realMs / 1000).toFixed(2)} s` +
          (r.stats ? ` (${JSON.stringify(r.stats)})` : ''),
      );
    }
  };
  if (jobs <= 1) {
    const log = args.verbose && args.seed !== undefined ? (line) => console.log(line) : undefined;
    for (const seed of seeds) onResult(runSeeds(sim, args, [seed], log)[0]);
  } else {
    // Seeds dealt round-robin so each worker gets a similar mix.
    const shares = Array.from({ length: jobs }, () => []);
    seeds.forEach((s, i) => shares[i % jobs].push(s));
    await Promise.all(
      shares.map(
        (share) =>
          new Promise((resolvePromise, reject) => {
            const w = new Worker(fileURLToPath(import.meta.url), { workerData: { args, seeds: share } });
            w.on('message', onResult);
            w.on('error', reject);
            w.on('exit', (code) => (code === 0 ? resolvePromise() : reject(new Error(`worker exited with ${code}`))));
          }),
      ),
    );
  }
  const wallS = (performance.now() - started) / 1000;
  // CPU time of the whole process (all workers): the ratio that does not depend on how busy the machine is.
  const cpu = process.cpuUsage(cpuStarted);
  const processCpuS = (cpu.user + cpu.system) / 1e6;
  const simS = results.reduce((s, r) => s + r.simulatedSeconds, 0);
  const cpuS = results.reduce((s, r) => s + r.realMs, 0) / 1000;
  const failed = results.filter((r) => !r.ok);
  const caught = results.filter((r) => r.safety);
  const events = results.reduce((s, r) => s + r.events, 0);
  console.log(
    `${results.length} seeds, ${failed.length} failed${args.bug ? `, ${caught.length} caught by a safety checker` : ''}; ` +
      `${simS.toFixed(0)} s simulated in ${wallS.toFixed(1)} s wall (${jobs} job${jobs > 1 ? 's' : ''}): ` +
      `${(simS / cpuS).toFixed(0)}x real time per core, ${(simS / wallS).toFixed(0)}x overall, ` +
      `${(simS / processCpuS).toFixed(0)}x per CPU second; ${(events / cpuS / 1000).toFixed(0)}k events/s`,
  );
  if (args.json) console.log(JSON.stringify({ seeds: results.length, failed: failed.map((r) => r.seed), simS, wallS, cpuS, processCpuS }));
  process.exit(args.bug !== undefined ? (caught.length > 0 ? 0 : 1) : failed.length > 0 ? 1 : 0);
}
