#!/usr/bin/env node
// Benchmark of the lock state machine (libs/lock-fsm), on one core:
//   1. apply throughput: pre-encoded entries of an acquire/release mix through
//      applyEntry (decode + apply + events), the path every replica runs;
//      also decode alone and apply of pre-decoded commands, to see the split.
//      Each rate is given per second of wall clock and per second of process
//      CPU time; the target is judged on CPU time (see the doc text below).
//      The same throughput is measured again in a child process running V8
//      with --single-threaded-gc, where the process does all its work,
//      garbage collection included, on one thread;
//   2. memory per live lock with one holder, measured with 1,000,000 live
//      locks (heapUsed after a full GC, before and after).
// Writes the figures into docs/benchmarks.md between
// <!-- lock-fsm:start --> and <!-- lock-fsm:end --> (other sections are left alone).
//
// Usage: node tools/bench/lock-fsm-bench.mjs [--no-build] [--no-write] [--entries N] [--locks N] [--trials N]
//                                            [--before path/to/other/dist/index.js [--before-label TEXT]]
// It builds libs/lock-fsm first (npx nx build lock-fsm) and re-runs itself
// under `node --expose-gc` when needed. With --before, the throughput of
// another build of the library (for example an older commit's, extracted
// with `git archive <commit> libs/lock-fsm tsconfig.base.json` and compiled
// with tsc) is measured in the same run, on the same workload, and reported
// next to this one: on a machine whose speed drifts, that is the only fair
// before/after comparison.
import { execFileSync, spawnSync } from 'node:child_process';
import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { constants as perfConstants, PerformanceObserver } from 'node:perf_hooks';
import { fileURLToPath, pathToFileURL } from 'node:url';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');
const self = fileURLToPath(import.meta.url);
const args = process.argv.slice(2);
const flag = (name) => args.includes(name);
const option = (name, fallback) => {
  const at = args.indexOf(name);
  return at >= 0 ? Number(args[at + 1]) : fallback;
};

if (typeof globalThis.gc !== 'function') {
  // Memory figures need a full GC on demand.
  const r = spawnSync(process.execPath, ['--expose-gc', self, ...args], { stdio: 'inherit' });
  process.exit(r.status ?? 1);
}

/** In the child that measures with --single-threaded-gc: throughput only, as one JSON line. */
const CHILD = flag('--child-throughput');

if (!flag('--no-build') && !CHILD) {
  // --skip-sync: another project's stale tsconfig references must not stop this benchmark.
  execFileSync('npx', ['nx', 'build', 'lock-fsm', '--output-style=static', '--skip-sync'], {
    cwd: root,
    stdio: ['ignore', 'ignore', 'inherit'],
  });
}
const distOption = args.indexOf('--dist');
const dist = distOption >= 0 ? path.resolve(args[distOption + 1]) : path.join(root, 'libs/lock-fsm/dist/index.js');
const beforeOption = args.indexOf('--before');
const beforeDist = beforeOption >= 0 ? path.resolve(args[beforeOption + 1]) : undefined;
const beforeLabelOption = args.indexOf('--before-label');
const beforeLabel = beforeLabelOption >= 0 ? args[beforeLabelOption + 1] : 'the --before build';
if (!existsSync(dist)) throw new Error(`${dist} is missing: run npx nx build lock-fsm`);
const lib = await import(pathToFileURL(dist).href);
const { LockStateMachine, encodeCommand } = lib;
if (beforeDist !== undefined && !existsSync(beforeDist)) throw new Error(`${beforeDist} is missing`);
const beforeLib = beforeDist === undefined ? undefined : await import(pathToFileURL(beforeDist).href);

const ENTRIES = option('--entries', 1_000_000);
const LIVE_LOCKS = option('--locks', 1_000_000);
const TRIALS = option('--trials', 7);
const TARGET = 500_000;
const NS = 'bench';

function mustOk(result, what) {
  if (!result.outcome.ok) throw new Error(`${what}: ${result.outcome.code} ${result.outcome.message}`);
  return result.outcome;
}

const cpuSeconds = (since) => {
  const cpu = process.cpuUsage(since);
  return (cpu.user + cpu.system) / 1e6;
};
const median = (xs) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];
const best = (xs) => Math.max(...xs);

// ------------------------------------------------------------- calibration

/**
 * A fixed reference loop (a Map set and get and one small allocation per
 * iteration), in ns of CPU time per iteration: so figures from different
 * machines can be compared, and because this shared virtual machine's speed
 * itself drifts (the loop has taken from 31 to 59 ns here, at any load
 * average), it runs again before every trial.
 */
function calibrate(rounds = 5, iterations = 2_000_000) {
  const map = new Map();
  const keys = Array.from({ length: 1000 }, (_, i) => `key-${i}`);
  let fastest = Infinity;
  let sink = 0;
  for (let round = 0; round < rounds; round++) {
    const cpu0 = process.cpuUsage();
    for (let i = 0; i < iterations; i++) {
      const k = keys[i % 1000];
      map.set(k, i);
      const o = { a: map.get(k), b: k };
      sink += o.a & 1;
    }
    fastest = Math.min(fastest, (cpuSeconds(cpu0) * 1e9) / iterations);
  }
  if (sink < 0) throw new Error('unreachable');
  return fastest;
}

/** Reference loop speed of the "before" measurement (2026-11-30), for scaling rates to it. */
const REFERENCE_NS_BEFORE = 33.6;

// ---------------------------------------------------------------- workload

/**
 * An acquire/release mix, built by running it once on a driver instance so
 * that every Release carries the token its Acquire (or promotion) got:
 * - 70% uncontended: a session acquires a fresh name (exclusive, or shared
 *   one time in four) and releases it a while later (1,000 locks live);
 * - 30% contended: on a hot set of 64 names, a second session queues behind
 *   the holder and is promoted by the holder's release.
 * Returns the entries (Uint8Array views into one buffer) and the opening entries.
 */
function buildWorkload(entryCount) {
  const driver = new LockStateMachine({ autoClaim: true });
  const setup = [];
  const entries = [];
  let index = 0;
  let counter = 0;
  const sessions = [];
  const apply = (command, into) => {
    const data = encodeCommand(command);
    into.push(data);
    return driver.applyEntry(++index, data);
  };
  for (let i = 0; i < 1000; i++) {
    const sessionId = `${NS}:s${i}`;
    mustOk(apply({ kind: 'OpenSession', sessionId, clientId: `worker-${i}`, namespace: NS, ttlMs: 10_000 }, setup), 'open');
    sessions.push(sessionId);
  }
  const acquire = (sessionId, name, mode) =>
    apply({ kind: 'Acquire', sessionId, name, mode, requestId: `r${++counter}`, waitMs: 30_000, lockDelayMs: 0, tryLock: false }, entries);
  const outstanding = []; // [sessionId, name, token] in acquire order
  const hot = new Map(); // name -> { holder, token, waiter }
  while (entries.length < entryCount) {
    const roll = counter % 10;
    if (roll < 7) {
      const sessionId = sessions[counter % sessions.length];
      const name = `/ls/${NS}/jobs/${counter}`;
      const r = acquire(sessionId, name, counter % 4 === 0 ? 'SHARED' : 'EXCLUSIVE');
      if (r.outcome.status !== 'GRANTED') throw new Error('uncontended acquire must be granted');
      outstanding.push([sessionId, name, r.outcome.token]);
      if (outstanding.length > 1000) {
        const [s, n, t] = outstanding.shift();
        if (!mustOk(apply({ kind: 'Release', sessionId: s, name: n, token: t }, entries), 'release').released)
          throw new Error('release must succeed');
      }
    } else {
      const name = `/ls/${NS}/hot/${counter % 64}`;
      const state = hot.get(name);
      if (state === undefined) {
        const holder = sessions[(counter * 7) % sessions.length];
        const r = acquire(holder, name, 'EXCLUSIVE');
        hot.set(name, { holder, token: r.outcome.token, waiter: undefined });
      } else if (state.waiter === undefined) {
        let waiter = sessions[(counter * 13) % sessions.length];
        if (waiter === state.holder) waiter = sessions[(counter * 13 + 1) % sessions.length];
        const r = acquire(waiter, name, 'EXCLUSIVE');
        if (r.outcome.status !== 'QUEUED') throw new Error('contended acquire must queue');
        state.waiter = waiter;
      } else {
        const r = apply({ kind: 'Release', sessionId: state.holder, name, token: state.token }, entries);
        const promoted = r.events.find((e) => e.type === 'ACQUIRED');
        if (promoted === undefined || promoted.sessionId !== state.waiter) throw new Error('release must promote the waiter');
        hot.set(name, { holder: state.waiter, token: promoted.token, waiter: undefined });
      }
      counter++;
    }
  }
  // One buffer, one view per entry: like entries handed over by a log.
  const total = entries.reduce((n, e) => n + e.length, 0);
  const buffer = new Uint8Array(total);
  const views = [];
  let at = 0;
  for (const e of entries) {
    buffer.set(e, at);
    views.push(buffer.subarray(at, at + e.length));
    at += e.length;
  }
  return { setup, entries: views, bytes: total, driverHash: driver.stateHash() };
}

function freshMachine(lib, setup) {
  const fsm = new lib.LockStateMachine({ autoClaim: true });
  for (let i = 0; i < setup.length; i++) fsm.applyEntry(i + 1, setup[i]);
  return fsm;
}

/** Main-thread GC pauses reported by Node between `start()` and `stop()`: for the share of time spent in GC. */
function gcRecorder() {
  const pauses = [];
  const observer = new PerformanceObserver((list) => {
    for (const e of list.getEntries()) pauses.push(e);
  });
  observer.observe({ entryTypes: ['gc'] });
  return {
    /** Pauses that began in [from, to) (performance.now() times); Node delivers them on a later turn, so wait a little first. */
    async between(from, to) {
      await new Promise((resolve) => setTimeout(resolve, 50));
      const inside = pauses.filter((e) => e.startTime >= from && e.startTime < to);
      const kindOf = (e) => e.detail?.kind ?? e.kind;
      return {
        ms: inside.reduce((sum, e) => sum + e.duration, 0),
        minor: inside.filter((e) => kindOf(e) === perfConstants.NODE_PERFORMANCE_GC_MINOR).length,
        major: inside.filter((e) => kindOf(e) === perfConstants.NODE_PERFORMANCE_GC_MAJOR).length,
      };
    },
    stop() {
      observer.disconnect();
    },
  };
}

/**
 * Throughput of each library on the workload. Trials of the libraries
 * alternate (this build, the --before build, this build, ...), so that a
 * drift of the machine's speed affects both alike.
 */
async function measureThroughput(workload, libs) {
  const { setup, entries } = workload;
  const first = setup.length + 1;
  const results = libs.map(() => ({
    rates: [],
    cpuRates: [],
    gcShares: [],
    calibrations: [],
    scaledRates: [],
    minorGcs: 0,
    majorGcs: 0,
    eventCount: 0,
  }));
  const gc = gcRecorder();
  for (let trial = 0; trial < TRIALS; trial++) {
    for (let l = 0; l < libs.length; l++) {
      const r = results[l];
      const fsm = freshMachine(libs[l], setup);
      const calibrationNs = calibrate(3, 500_000);
      r.calibrations.push(calibrationNs);
      globalThis.gc();
      const from = performance.now();
      const cpu0 = process.cpuUsage();
      let events = 0;
      for (let i = 0; i < entries.length; i++) events += fsm.applyEntry(first + i, entries[i]).events.length;
      const cpu = cpuSeconds(cpu0);
      const to = performance.now();
      r.rates.push(entries.length / ((to - from) / 1000));
      r.cpuRates.push(entries.length / cpu);
      // The rate this trial would have had at the machine speed of the "before" run.
      r.scaledRates.push((entries.length / cpu) * (calibrationNs / REFERENCE_NS_BEFORE));
      const pauses = await gc.between(from, to);
      r.gcShares.push(pauses.ms / (to - from));
      r.minorGcs += pauses.minor;
      r.majorGcs += pauses.major;
      r.eventCount = events;
      if (fsm.stateHash() !== workload.driverHash)
        throw new Error('replay diverged from the driver: the benchmark is not measuring the workload it built');
    }
  }
  gc.stop();

  return libs.map((lib, l) => {
    const r = results[l];
    // The split: decode alone, and apply of pre-decoded commands (median of 3 passes each).
    const decodeRates = [];
    const decodeCpuRates = [];
    const applyRates = [];
    const applyCpuRates = [];
    let commands = [];
    for (let pass = 0; pass < 3; pass++) {
      commands = new Array(entries.length);
      globalThis.gc();
      const t0 = performance.now();
      const cpu0 = process.cpuUsage();
      for (let i = 0; i < entries.length; i++) commands[i] = lib.decodeCommand(entries[i]);
      decodeCpuRates.push(entries.length / cpuSeconds(cpu0));
      decodeRates.push(entries.length / ((performance.now() - t0) / 1000));
    }
    for (let pass = 0; pass < 3; pass++) {
      const fsm = freshMachine(lib, setup);
      globalThis.gc();
      const t0 = performance.now();
      const cpu0 = process.cpuUsage();
      for (let i = 0; i < commands.length; i++) fsm.apply(first + i, commands[i]);
      applyCpuRates.push(entries.length / cpuSeconds(cpu0));
      applyRates.push(entries.length / ((performance.now() - t0) / 1000));
    }
    const decodeRate = median(decodeRates);
    const decodeCpuRate = median(decodeCpuRates);
    const applyRate = median(applyRates);
    const applyCpuRate = median(applyCpuRates);
    return {
      median: median(r.rates),
      best: best(r.rates),
      cpuMedian: median(r.cpuRates),
      cpuBest: best(r.cpuRates),
      cpuAll: r.cpuRates,
      calibrationMedian: median(r.calibrations),
      calibrationMin: Math.min(...r.calibrations),
      calibrationMax: Math.max(...r.calibrations),
      scaledMedian: median(r.scaledRates),
      gcShare: median(r.gcShares),
      minorGcsPerTrial: r.minorGcs / TRIALS,
      majorGcsPerTrial: r.majorGcs / TRIALS,
      decodeRate,
      decodeCpuRate,
      applyRate,
      applyCpuRate,
      eventCount: r.eventCount,
    };
  });
}

// ------------------------------------------------------------------ memory

function measureMemory(liveLocks) {
  const perSession = 10_000; // LIMITS.locksPerSessionMax
  const sessionCount = Math.ceil(liveLocks / perSession);
  const fsm = new LockStateMachine({ autoClaim: true });
  let index = 0;
  for (let s = 0; s < sessionCount; s++) {
    mustOk(
      fsm.applyEntry(
        ++index,
        encodeCommand({ kind: 'OpenSession', sessionId: `${NS}:m${s}`, clientId: `holder-${s}`, namespace: NS, ttlMs: 10_000 }),
      ),
      'open',
    );
  }
  globalThis.gc();
  globalThis.gc();
  const before = process.memoryUsage().heapUsed;
  for (let i = 0; i < liveLocks; i++) {
    const s = Math.floor(i / perSession);
    const data = encodeCommand({
      kind: 'Acquire',
      sessionId: `${NS}:m${s}`,
      name: `/ls/${NS}/jobs/${i}`,
      mode: 'EXCLUSIVE',
      requestId: `r${i}`,
      waitMs: 30_000,
      lockDelayMs: 0,
      tryLock: false,
    });
    const r = fsm.applyEntry(++index, data);
    if (r.outcome.status !== 'GRANTED') throw new Error('memory workload acquire must be granted');
  }
  globalThis.gc();
  globalThis.gc();
  const after = process.memoryUsage().heapUsed;
  const info = fsm.namespaceInfo(NS);
  if (info.locks !== liveLocks) throw new Error(`expected ${liveLocks} live locks, found ${info.locks}`);
  // Snapshot size of this state, for the record.
  const t0 = performance.now();
  const snapshotBytes = fsm.snapshot().length;
  const snapshotSeconds = (performance.now() - t0) / 1000;
  return {
    bytesPerLock: (after - before) / liveLocks,
    heapMiB: after / 2 ** 20,
    sessionCount,
    snapshotBytes,
    snapshotSeconds,
    keepAlive: fsm,
  };
}

// -------------------------------------------------------------------- main

if (CHILD) {
  const [tp] = await measureThroughput(buildWorkload(ENTRIES), [lib]);
  process.stdout.write(`${JSON.stringify(tp)}\n`);
  process.exit(0);
}

const fmt = (n) => Math.round(n).toLocaleString('en-US');
const pct = (x) => `${(100 * x).toFixed(0)}%`;
console.log(`lock-fsm benchmark: node ${process.version}, ${os.cpus()[0]?.model ?? 'unknown cpu'}, one core`);
const calibrationNs = calibrate();
const loadAverage = os.loadavg()[0];
console.log(
  `machine: reference loop ${calibrationNs.toFixed(1)} ns per iteration (CPU time, for comparing machines), load average ${loadAverage.toFixed(1)} on ${os.cpus().length} cores`,
);
const workload = buildWorkload(ENTRIES);
const entryBytes = workload.bytes / workload.entries.length;
console.log(`workload: ${fmt(workload.entries.length)} entries, ${entryBytes.toFixed(1)} bytes per entry on average`);
const [tp, before] = await measureThroughput(workload, beforeLib === undefined ? [lib] : [lib, beforeLib]);
const met = tp.cpuMedian >= TARGET;
console.log(`apply throughput (applyEntry: decode + apply + events), ${TRIALS} trials, ${fmt(tp.eventCount)} events per trial:`);
console.log(
  `  per CPU-second (process CPU time, all threads): median ${fmt(tp.cpuMedian)} entries/s, best ${fmt(tp.cpuBest)} (all: ${tp.cpuAll.map(fmt).join(', ')})`,
);
console.log(`  wall clock: median ${fmt(tp.median)} entries/s, best ${fmt(tp.best)}`);
console.log(
  `  machine speed before each trial: reference loop ${tp.calibrationMin.toFixed(1)}-${tp.calibrationMax.toFixed(1)} ns; scaled to the ${REFERENCE_NS_BEFORE} ns of the "before" run: median ${fmt(tp.scaledMedian)} entries/s per CPU-second`,
);
console.log(
  `  GC: ${pct(tp.gcShare)} of wall time in main-thread pauses (median), ${tp.minorGcsPerTrial.toFixed(0)} scavenges and ${tp.majorGcsPerTrial.toFixed(1)} mark-compacts per trial`,
);
console.log(
  `  decode alone: ${fmt(tp.decodeCpuRate)} entries/s per CPU-second (${fmt(tp.decodeRate)} wall); apply of decoded commands: ${fmt(tp.applyCpuRate)} (${fmt(tp.applyRate)} wall)`,
);
console.log(`  target ${fmt(TARGET)} entries/s per CPU-second (median): ${met ? 'met' : 'MISSED'}`);

/** Throughput measured in a child process: with other V8 flags, or of another build. */
function childThroughput(nodeFlags, distPath) {
  const child = spawnSync(
    process.execPath,
    [
      '--expose-gc',
      ...nodeFlags,
      self,
      '--child-throughput',
      '--no-build',
      '--dist',
      distPath,
      '--entries',
      String(ENTRIES),
      '--trials',
      String(TRIALS),
    ],
    { encoding: 'utf8', stdio: ['ignore', 'pipe', 'inherit'], maxBuffer: 1 << 20 },
  );
  if (child.status !== 0) throw new Error(`throughput child (${nodeFlags.join(' ')} ${distPath}) failed with status ${child.status}`);
  return JSON.parse(child.stdout.trim().split('\n').pop());
}

// The same throughput with every thread of V8's work on the main thread.
const single = childThroughput(['--single-threaded-gc'], dist);
console.log(
  `  with --single-threaded-gc: median ${fmt(single.cpuMedian)} entries/s per CPU-second, best ${fmt(single.cpuBest)}; wall median ${fmt(single.median)}; scaled median ${fmt(single.scaledMedian)}`,
);

if (before !== undefined) {
  console.log(
    `  before (${beforeLabel}), trials alternating with this build's: median ${fmt(before.cpuMedian)} entries/s per CPU-second (reference loop ${before.calibrationMedian.toFixed(1)} ns), wall median ${fmt(before.median)}; decode ${fmt(before.decodeCpuRate)}, apply ${fmt(before.applyCpuRate)}`,
  );
}

workload.entries.length = 0;
const mem = measureMemory(LIVE_LOCKS);
console.log(
  `memory: ${mem.bytesPerLock.toFixed(0)} bytes per live lock with one holder (${fmt(LIVE_LOCKS)} locks, ${mem.sessionCount} sessions; heap ${mem.heapMiB.toFixed(0)} MiB)`,
);
console.log(`  snapshot of that state: ${(mem.snapshotBytes / 2 ** 20).toFixed(1)} MiB in ${mem.snapshotSeconds.toFixed(2)} s`);

if (!flag('--no-write')) {
  const file = path.join(root, 'docs/benchmarks.md');
  const START = '<!-- lock-fsm:start -->';
  const END = '<!-- lock-fsm:end -->';
  const section = [
    START,
    '## Lock state machine',
    '',
    `Measured by \`node tools/bench/lock-fsm-bench.mjs\` on ${new Date().toISOString().slice(0, 10)}: Node ${process.version}, ${os.cpus()[0]?.model ?? 'unknown CPU'}, ${os.cpus().length} cores shared with other work (load average ${loadAverage.toFixed(1)} when the run began). Machine speed: the benchmark's reference loop (a Map set and get and one small allocation) took ${calibrationNs.toFixed(1)} ns per iteration of CPU time: run the script elsewhere and compare that line to scale the figures below.`,
    '',
    'Workload: 1,000 sessions; 70% uncontended acquires and releases with 1,000 locks live, 30% queue-and-promote on 64 hot names; pre-encoded entries fed through `applyEntry` (decode, apply, events), as a replica applies committed entries.',
    '',
    '| measure | result |',
    '| --- | --- |',
    `| apply throughput per second of process CPU time (the figure the target is judged on) | **${fmt(tp.cpuMedian)} entries/s** median of ${TRIALS} trials of ${fmt(ENTRIES)} entries (best ${fmt(tp.cpuBest)}); target ${fmt(TARGET)} ${met ? '**met**' : '**missed**'} |`,
    `| the same, scaled to the machine speed of the "before" run (reference loop ${REFERENCE_NS_BEFORE} ns; ${tp.calibrationMin.toFixed(1)}-${tp.calibrationMax.toFixed(1)} ns before this run's trials) | ${fmt(tp.scaledMedian)} entries/s median |`,
    `| the same, wall clock | ${fmt(tp.median)} entries/s median (best ${fmt(tp.best)}) |`,
    `| the same, V8 run with \`--single-threaded-gc\` (all work, GC included, on one thread), per CPU-second | ${fmt(single.cpuMedian)} entries/s median (best ${fmt(single.cpuBest)}; scaled ${fmt(single.scaledMedian)}) |`,
    `| of which: decode alone / apply of pre-decoded commands, per CPU-second | ${fmt(tp.decodeCpuRate)} / ${fmt(tp.applyCpuRate)} entries/s |`,
    `| garbage collection during the trials | ${pct(tp.gcShare)} of wall time in main-thread pauses; ${tp.minorGcsPerTrial.toFixed(0)} scavenges and ${tp.majorGcsPerTrial.toFixed(1)} mark-compacts per trial |`,
    `| entry size in that mix | ${entryBytes.toFixed(1)} bytes on average |`,
    `| memory per live lock with one holder (${fmt(LIVE_LOCKS)} live exclusive locks, ${mem.sessionCount} sessions, heapUsed after GC) | **${mem.bytesPerLock.toFixed(0)} bytes** |`,
    `| snapshot of those ${fmt(LIVE_LOCKS)} locks | ${(mem.snapshotBytes / 2 ** 20).toFixed(1)} MiB, encoded in ${mem.snapshotSeconds.toFixed(2)} s |`,
    '',
    'Why CPU time: the issue asks for throughput on one core. This machine has two cores shared with other work, so wall-clock rates mostly measure how often the benchmark was descheduled (they varied by 3x between runs of the same code). Process CPU time counts only the time the process ran, on every thread, so V8\'s parallel garbage-collection helpers are charged too. It is not immune either: the virtual machine\'s speed drifts by itself (the reference loop took 31 to 63 ns within hours, at any load average), which is why the loop runs before every trial and the scaled row puts this run at the speed of the "before" measurement. On this machine the margin over the target depends on its speed at the time, so the scaled row and a same-run before/after ratio are the steadier measures. The `--single-threaded-gc` row shows the process doing everything on one thread.',
    '',
    "Memory per lock counts the lock record, its holder and holders array, its name string, its entry in the namespace map and in the session's list of locks, and the dedupe records (64 per session).",
    '',
    ...(before !== undefined
      ? [
          '### Before and after, this run',
          '',
          `"Before" is ${beforeLabel}, measured in the same process on the same workload, its trials alternating with this build's so that both saw the same machine.`,
          '',
          '| | before | after |',
          '| --- | --- | --- |',
          `| apply throughput per CPU-second, median | ${fmt(before.cpuMedian)} entries/s | **${fmt(tp.cpuMedian)} entries/s** (${(tp.cpuMedian / before.cpuMedian).toFixed(2)}x) |`,
          `| the same, wall clock | ${fmt(before.median)} entries/s | ${fmt(tp.median)} entries/s |`,
          `| decode alone / apply of decoded commands, per CPU-second | ${fmt(before.decodeCpuRate)} / ${fmt(before.applyCpuRate)} entries/s | ${fmt(tp.decodeCpuRate)} / ${fmt(tp.applyCpuRate)} entries/s |`,
          `| garbage collection: main-thread pauses, scavenges per trial | ${pct(before.gcShare)} of wall time, ${before.minorGcsPerTrial.toFixed(0)} | ${pct(tp.gcShare)}, ${tp.minorGcsPerTrial.toFixed(0)} |`,
          '',
        ]
      : [
          'No "before" build was measured in this run; give `--before path/to/other/dist/index.js` for a same-run comparison. The history of the apply-path work, with the figures measured at the time, is in the commit messages of `libs/lock-fsm`.',
          '',
        ]),
    END,
  ].join('\n');
  // Re-read just before writing: another section of this file has another owner.
  const current = existsSync(file) ? readFileSync(file, 'utf8') : '# Benchmarks\n';
  const s = current.indexOf(START);
  const e = current.indexOf(END);
  const next =
    s >= 0 && e > s ? current.slice(0, s) + section + current.slice(e + END.length) : `${current.replace(/\n*$/, '\n\n')}${section}\n`;
  writeFileSync(file, next);
  console.log(`wrote the "Lock state machine" section of ${path.relative(root, file)}`);
}
