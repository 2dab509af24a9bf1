#!/usr/bin/env node
// Checks that a change left the simulator's runs event-for-event the same.
//
//   node tools/sim/compare-traces.mjs BASELINE_DIR [--out DIR] [--only a,b] [--jobs J] [--no-run] [--build]
//
// BASELINE_DIR holds the output of tools/sim/run.mjs recorded before the
// change, one file per run, named for the run (the table below):
//   lock.txt, meta.txt, kv.txt, lock60.txt, meta60.txt, bug-<NAME>.txt
// For each baseline file present, this reruns the same command (with
// --no-build: build the sim first, or pass --build) into DIR (default
// /tmp/sim-compare) and compares, seed by seed, the lines that a seed's run
// decides: "ok seed N: trace HASH, E events" and, for a seed that failed,
// its "FAIL seed N: ..." line and its replay command. Wall-clock figures are
// ignored. --no-run compares files already in DIR. Exits 1 on any
// difference, naming the run and the seed; 0 when every run matches.
import { spawnSync } from 'node:child_process';
import { existsSync, mkdirSync, readFileSync, readdirSync, writeFileSync } from 'node:fs';
import { basename, dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';
import { Command, InvalidArgumentError } from 'commander';

const root = resolve(dirname(fileURLToPath(import.meta.url)), '../..');

/** The run.mjs arguments each baseline file was recorded with. */
function argsFor(name, jobs) {
  const common = ['--json', '--no-build', '--jobs', String(jobs)];
  const fixed = {
    lock: ['--seeds', '60'],
    meta: ['--seeds', '60', '--machine', 'meta'],
    kv: ['--seeds', '30', '--machine', 'kv'],
    lock60: ['--seeds', '60', '--seconds', '60'],
    meta60: ['--seeds', '60', '--seconds', '60', '--machine', 'meta'],
  };
  if (fixed[name]) return [...fixed[name], ...common];
  const bug = /^bug-(.+)$/.exec(name);
  if (bug) return ['--seeds', '10', '--bug', bug[1], ...common];
  return undefined;
}

function parseArgs(argv) {
  const program = new Command('compare-traces')
    .description("Reruns each simulator run a baseline directory holds and compares every seed's trace with it.")
    .argument('<baseline-dir>', 'the output of tools/sim/run.mjs recorded before the change, one file per run')
    .option('--out <dir>', "where this run's outputs go", '/tmp/sim-compare')
    .option('--only <runs>', 'compare only these runs (comma-separated file names without .txt)', (v) => new Set(v.split(',')))
    .option(
      '--jobs <j>',
      'worker threads per run',
      (v) => {
        const n = Number(v);
        if (!Number.isSafeInteger(n) || n < 1) throw new InvalidArgumentError('--jobs is a positive integer');
        return n;
      },
      2,
    )
    .option('--no-run', 'compare the files already in --out')
    .option('--build', 'build the sim library first', false)
    .showHelpAfterError();
  program.parse(argv, { from: 'user' });
  return { ...program.opts(), baseline: program.args[0] };
}

/** Seed → the lines its run decides, from one run.mjs output. */
function seedLines(text) {
  const bySeed = new Map();
  const lines = text.split('\n');
  const add = (seed, line) => bySeed.set(seed, [...(bySeed.get(seed) ?? []), line]);
  for (let i = 0; i < lines.length; i++) {
    const ok = /^ok seed (\d+): (trace [0-9a-f]+, \d+ events)/.exec(lines[i]);
    if (ok) add(Number(ok[1]), `ok ${ok[2]}`);
    const fail = /^FAIL seed (\d+): (.*)$/.exec(lines[i]);
    if (fail) {
      add(Number(fail[1]), `FAIL ${fail[2]}`);
      const replay = /^\s+replay: (.*)$/.exec(lines[i + 1] ?? '');
      if (replay) add(Number(fail[1]), `replay ${replay[1]}`);
    }
  }
  return bySeed;
}

/** Differences between two outputs of one run, as readable lines (none: identical). */
function compare(name, before, after) {
  const a = seedLines(before);
  const b = seedLines(after);
  const problems = [];
  if (a.size === 0) problems.push(`${name}: the baseline has no seed lines`);
  for (const seed of new Set([...a.keys(), ...b.keys()])) {
    const x = (a.get(seed) ?? ['(missing)']).join(' | ');
    const y = (b.get(seed) ?? ['(missing)']).join(' | ');
    if (x !== y) problems.push(`${name} seed ${seed}:\n  before: ${x}\n  after:  ${y}`);
  }
  return { problems, seeds: a.size };
}

const args = parseArgs(process.argv.slice(2));
const names = readdirSync(args.baseline)
  .filter((f) => f.endsWith('.txt'))
  .map((f) => basename(f, '.txt'))
  .filter((n) => argsFor(n, 1) !== undefined && (args.only === undefined || args.only.has(n)))
  .sort();
if (names.length === 0) {
  console.error(`compare-traces: no baseline runs in ${args.baseline}`);
  process.exit(2);
}
mkdirSync(args.out, { recursive: true });
if (args.build) spawnSync('npx', ['nx', 'build', 'sim'], { cwd: root, stdio: 'inherit' });

let failed = 0;
for (const name of names) {
  const outFile = join(args.out, `${name}.txt`);
  if (args.run) {
    const r = spawnSync(process.execPath, [join(root, 'tools/sim/run.mjs'), ...argsFor(name, args.jobs)], {
      cwd: root,
      encoding: 'utf8',
      maxBuffer: 64 * 1024 * 1024,
    });
    writeFileSync(outFile, r.stdout);
  }
  if (!existsSync(outFile)) {
    console.log(`${name}: no output in ${args.out}`);
    failed++;
    continue;
  }
  const { problems, seeds } = compare(name, readFileSync(join(args.baseline, `${name}.txt`), 'utf8'), readFileSync(outFile, 'utf8'));
  if (problems.length === 0) console.log(`${name}: ${seeds} seeds identical`);
  else {
    failed++;
    console.log(problems.join('\n'));
  }
}
console.log(failed === 0 ? `all ${names.length} runs identical` : `${failed} of ${names.length} runs differ`);
process.exit(failed === 0 ? 0 : 1);
