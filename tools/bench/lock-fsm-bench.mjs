#!/usr/bin/env node
// Benchmark of the lock state machine (libs/lock-fsm), on one core:
//   1. apply throughput: pre-encoded entries of an acquire/release mix through
//      applyEntry (decode + apply + events), the path every replica runs;
//      also decode alone and apply of pre-decoded commands, to see the split;
//   2. memory per live lock with one holder, measured with 1,000,000 live
//      locks (heapUsed after a full GC, before and after).
// Writes the figures into docs/benchmarks.md between
// <!-- lock-fsm:start --> and <!-- lock-fsm:end --> (other sections are left alone).
//
// Usage: node tools/bench/lock-fsm-bench.mjs [--no-build] [--no-write] [--entries N] [--locks N]
// It builds libs/lock-fsm first (npx nx build lock-fsm) and re-runs itself
// under `node --expose-gc` when needed.
import { execFileSync, spawnSync } from 'node:child_process';
import { existsSync, readFileSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');
const args = process.argv.slice(2);
const flag = (name) => args.includes(name);
const option = (name, fallback) => {
  const at = args.indexOf(name);
  return at >= 0 ? Number(args[at + 1]) : fallback;
};

if (typeof globalThis.gc !== 'function') {
  // Memory figures need a full GC on demand.
  const r = spawnSync(process.execPath, ['--expose-gc', fileURLToPath(import.meta.url), ...args], { stdio: 'inherit' });
  process.exit(r.status ?? 1);
}

if (!flag('--no-build')) {
  execFileSync('npx', ['nx', 'build', 'lock-fsm', '--output-style=static'], { cwd: root, stdio: ['ignore', 'ignore', 'inherit'] });
}
const dist = path.join(root, 'libs/lock-fsm/dist/index.js');
if (!existsSync(dist)) throw new Error(`${dist} is missing: run npx nx build lock-fsm`);
const { LockStateMachine, encodeCommand, decodeCommand } = await import(pathToFileURL(dist).href);

const ENTRIES = option('--entries', 1_000_000);
const LIVE_LOCKS = option('--locks', 1_000_000);
const TRIALS = 5;
const NS = 'bench';

function mustOk(result, what) {
  if (!result.outcome.ok) throw new Error(`${what}: ${result.outcome.code} ${result.outcome.message}`);
  return result.outcome;
}

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
        if (!mustOk(apply({ kind: 'Release', sessionId: s, name: n, token: t }, entries), 'release').released) throw new Error('release must succeed');
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

function freshMachine(setup) {
  const fsm = new LockStateMachine({ autoClaim: true });
  for (let i = 0; i < setup.length; i++) fsm.applyEntry(i + 1, setup[i]);
  return fsm;
}

function measureThroughput(workload) {
  const { setup, entries } = workload;
  const first = setup.length + 1;
  const rates = [];
  const cpuRates = [];
  let eventCount = 0;
  let finalHash = '';
  for (let trial = 0; trial < TRIALS; trial++) {
    const fsm = freshMachine(setup);
    globalThis.gc();
    const t0 = process.hrtime.bigint();
    const cpu0 = process.cpuUsage();
    let events = 0;
    for (let i = 0; i < entries.length; i++) events += fsm.applyEntry(first + i, entries[i]).events.length;
    const seconds = Number(process.hrtime.bigint() - t0) / 1e9;
    const cpu = process.cpuUsage(cpu0);
    rates.push(entries.length / seconds);
    cpuRates.push(entries.length / ((cpu.user + cpu.system) / 1e6));
    eventCount = events;
    finalHash = fsm.stateHash();
  }
  if (finalHash !== workload.driverHash) throw new Error('replay diverged from the driver: the benchmark is not measuring the workload it built');

  // The split: decode alone, and apply of pre-decoded commands.
  let t0 = process.hrtime.bigint();
  const commands = new Array(entries.length);
  for (let i = 0; i < entries.length; i++) commands[i] = decodeCommand(entries[i]);
  const decodeRate = entries.length / (Number(process.hrtime.bigint() - t0) / 1e9);
  const fsm = freshMachine(setup);
  globalThis.gc();
  t0 = process.hrtime.bigint();
  for (let i = 0; i < commands.length; i++) fsm.apply(first + i, commands[i]);
  const applyRate = entries.length / (Number(process.hrtime.bigint() - t0) / 1e9);

  rates.sort((a, b) => a - b);
  cpuRates.sort((a, b) => a - b);
  return {
    median: rates[Math.floor(rates.length / 2)],
    best: rates[rates.length - 1],
    cpuMedian: cpuRates[Math.floor(cpuRates.length / 2)],
    cpuBest: cpuRates[cpuRates.length - 1],
    decodeRate,
    applyRate,
    eventCount,
  };
}

// ------------------------------------------------------------------ memory

function measureMemory(liveLocks) {
  const perSession = 10_000; // LIMITS.locksPerSessionMax
  const sessionCount = Math.ceil(liveLocks / perSession);
  const fsm = new LockStateMachine({ autoClaim: true });
  let index = 0;
  for (let s = 0; s < sessionCount; s++) {
    mustOk(fsm.applyEntry(++index, encodeCommand({ kind: 'OpenSession', sessionId: `${NS}:m${s}`, clientId: `holder-${s}`, namespace: NS, ttlMs: 10_000 })), 'open');
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
  const t0 = process.hrtime.bigint();
  const snapshotBytes = fsm.snapshot().length;
  const snapshotSeconds = Number(process.hrtime.bigint() - t0) / 1e9;
  return { bytesPerLock: (after - before) / liveLocks, heapMiB: after / 2 ** 20, sessionCount, snapshotBytes, snapshotSeconds, keepAlive: fsm };
}

// ------------------------------------------------------------- calibration

/**
 * A fixed reference loop (a Map set and get and one small allocation per
 * iteration), so figures from different machines can be compared.
 */
function calibrate() {
  const map = new Map();
  const keys = Array.from({ length: 1000 }, (_, i) => `key-${i}`);
  let best = Infinity;
  let sink = 0;
  for (let round = 0; round < 5; round++) {
    const cpu0 = process.cpuUsage();
    for (let i = 0; i < 2_000_000; i++) {
      const k = keys[i % 1000];
      map.set(k, i);
      const o = { a: map.get(k), b: k };
      sink += o.a & 1;
    }
    const cpu = process.cpuUsage(cpu0);
    best = Math.min(best, ((cpu.user + cpu.system) * 1000) / 2_000_000);
  }
  if (sink < 0) throw new Error('unreachable');
  return best;
}

// -------------------------------------------------------------------- main

const fmt = (n) => Math.round(n).toLocaleString('en-US');
console.log(`lock-fsm benchmark: node ${process.version}, ${os.cpus()[0]?.model ?? 'unknown cpu'}, one core`);
const calibrationNs = calibrate();
const loadAverage = os.loadavg()[0];
console.log(`machine: reference loop ${calibrationNs.toFixed(1)} ns per iteration (CPU time, for comparing machines), load average ${loadAverage.toFixed(1)} on ${os.cpus().length} cores`);
const workload = buildWorkload(ENTRIES);
console.log(`workload: ${fmt(workload.entries.length)} entries, ${(workload.bytes / workload.entries.length).toFixed(1)} bytes per entry on average`);
const tp = measureThroughput(workload);
console.log(`apply throughput (applyEntry: decode + apply + events): median ${fmt(tp.median)} entries/s, best ${fmt(tp.best)} (${TRIALS} trials), ${fmt(tp.eventCount)} events`);
console.log(`  per CPU-second (process CPU time, less sensitive to other load on the machine): median ${fmt(tp.cpuMedian)} entries/s, best ${fmt(tp.cpuBest)}`);
console.log(`  decode alone: ${fmt(tp.decodeRate)} entries/s; apply of decoded commands: ${fmt(tp.applyRate)} entries/s`);
const target = 500_000;
console.log(`  target ${fmt(target)} entries/s: ${tp.median >= target ? 'met' : 'MISSED'}`);
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
    `Measured by \`node tools/bench/lock-fsm-bench.mjs\` on ${new Date().toISOString().slice(0, 10)}: Node ${process.version}, ${os.cpus()[0]?.model ?? 'unknown CPU'}, one core of ${os.cpus().length} shared with other work (load average ${loadAverage.toFixed(1)} when the run began). Machine speed: the benchmark's reference loop (a Map set and get and one small allocation) took ${calibrationNs.toFixed(1)} ns per iteration of CPU time: run the script elsewhere and compare that line to scale the figures below.`,
    '',
    '| measure | result |',
    '| --- | --- |',
    `| apply throughput, acquire/release mix (1,000 sessions; 70% uncontended with 1,000 live locks, 30% queue-and-promote on 64 hot names; pre-encoded entries through \`applyEntry\`: decode, apply, events), wall clock | **${fmt(tp.median)} entries/s** median of ${TRIALS} (best ${fmt(tp.best)}); target 500,000 ${tp.median >= target ? 'met' : '**missed**'} |`,
    `| the same, per second of process CPU time (less sensitive to other load) | ${fmt(tp.cpuMedian)} entries/s median (best ${fmt(tp.cpuBest)}) |`,
    `| of which: decode alone / apply of pre-decoded commands | ${fmt(tp.decodeRate)} / ${fmt(tp.applyRate)} entries/s |`,
    `| entry size in that mix | ${(workload.bytes / ENTRIES).toFixed(1)} bytes on average |`,
    `| memory per live lock with one holder (${fmt(LIVE_LOCKS)} live exclusive locks, ${mem.sessionCount} sessions, heapUsed after GC) | **${mem.bytesPerLock.toFixed(0)} bytes** |`,
    `| snapshot of those ${fmt(LIVE_LOCKS)} locks | ${(mem.snapshotBytes / 2 ** 20).toFixed(1)} MiB, encoded in ${mem.snapshotSeconds.toFixed(2)} s |`,
    '',
    'Memory per lock counts the lock record, its holder, its name string, its entry in the namespace map and in the session\'s held map, and the dedupe records (64 per session).',
    '',
    ...(tp.median >= target
      ? []
      : [
          'Where the time goes (`node --cpu-prof`, and V8\'s sampling heap profiler counting collected objects): about 1.3 KB is allocated per entry, and garbage collection takes 20-27% of the time.',
          'The allocation comes from the decoded command and its strings, the outcome, event and lock-state objects, the new holder, lock and dedupe records, and Map table churn. A one-entry Map that gains and loses its entry reallocates its table each time, and each session\'s held map does exactly that.',
          'Dedupe records live for the session\'s next 64 requests, so with 1,000 sessions they reach the old generation. In a simpler uncontended acquire/release loop, 10 sessions instead of 1,000 ran about 1.7 times faster per CPU-second.',
          'Next steps if one core must reach the target: intrusive per-session lists of holdings and waits instead of per-session Maps; dedupe outcomes in per-session parallel arrays instead of one object per request; fewer objects per applied entry.',
        ]),
    END,
  ].join('\n');
  // Re-read just before writing: another section of this file has another owner.
  const current = existsSync(file) ? readFileSync(file, 'utf8') : '# Benchmarks\n';
  const s = current.indexOf(START);
  const e = current.indexOf(END);
  const next = s >= 0 && e > s ? current.slice(0, s) + section + current.slice(e + END.length) : `${current.replace(/\n*$/, '\n\n')}${section}\n`;
  writeFileSync(file, next);
  console.log(`wrote the "Lock state machine" section of ${path.relative(root, file)}`);
}
