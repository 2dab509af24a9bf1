// Measurements of the lock-fsm suite, on one core: a reference loop that
// says how fast this machine is right now, the acquire/release workload
// built once on a driver instance, apply throughput of one or more builds
// of the library with their trials alternating, and memory per live lock.
import { constants as perfConstants, PerformanceObserver } from 'node:perf_hooks';

export const NS = 'bench';

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
 * machines can be compared, and because a shared virtual machine's speed
 * itself drifts at any load average, it runs again before every trial.
 */
export function calibrate(rounds = 5, iterations = 2_000_000) {
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
export const REFERENCE_NS_BEFORE = 33.6;

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
export function buildWorkload(lib, entryCount) {
  const { encodeCommand } = lib;
  const driver = new lib.LockStateMachine({ autoClaim: true });
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

/** One trial of `lib` on the workload, added to its results `r`. */
async function oneTrial(lib, workload, r, gc) {
  const { setup, entries } = workload;
  const first = setup.length + 1;
  const fsm = freshMachine(lib, setup);
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
  // The rate this trial would have had at the machine speed of the reference run.
  r.scaledRates.push((entries.length / cpu) * (calibrationNs / REFERENCE_NS_BEFORE));
  const pauses = await gc.between(from, to);
  r.gcShares.push(pauses.ms / (to - from));
  r.minorGcs += pauses.minor;
  r.majorGcs += pauses.major;
  r.eventCount = events;
  if (fsm.stateHash() !== workload.driverHash)
    throw new Error('replay diverged from the driver: the benchmark is not measuring the workload it built');
}

/** Rates of `passes` runs of `body()` over n entries: [wall, CPU] medians. */
function passRates(n, passes, body) {
  const wall = [];
  const cpu = [];
  for (let pass = 0; pass < passes; pass++) {
    const prepare = body.prepare?.();
    globalThis.gc();
    const t0 = performance.now();
    const cpu0 = process.cpuUsage();
    body(prepare);
    cpu.push(n / cpuSeconds(cpu0));
    wall.push(n / ((performance.now() - t0) / 1000));
  }
  return [median(wall), median(cpu)];
}

/** The split: decode alone, and apply of pre-decoded commands (median of 3 passes each). */
function split(lib, workload) {
  const { setup, entries } = workload;
  const first = setup.length + 1;
  const commands = new Array(entries.length);
  const [decodeRate, decodeCpuRate] = passRates(entries.length, 3, () => {
    for (let i = 0; i < entries.length; i++) commands[i] = lib.decodeCommand(entries[i]);
  });
  const apply = (fsm) => {
    for (let i = 0; i < commands.length; i++) fsm.apply(first + i, commands[i]);
  };
  apply.prepare = () => freshMachine(lib, setup);
  const [applyRate, applyCpuRate] = passRates(entries.length, 3, apply);
  return { decodeRate, decodeCpuRate, applyRate, applyCpuRate };
}

/**
 * Throughput of each library on the workload. Trials of the libraries
 * alternate (this build, the baseline build, this build, ...), so that a
 * drift of the machine's speed affects both alike.
 */
export async function measureThroughput(workload, libs, trials) {
  const results = libs.map(() => ({ rates: [], cpuRates: [], gcShares: [], calibrations: [], scaledRates: [], minorGcs: 0, majorGcs: 0 }));
  const gc = gcRecorder();
  for (let trial = 0; trial < trials; trial++) for (let l = 0; l < libs.length; l++) await oneTrial(libs[l], workload, results[l], gc);
  gc.stop();
  return libs.map((lib, l) => {
    const r = results[l];
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
      minorGcsPerTrial: r.minorGcs / trials,
      majorGcsPerTrial: r.majorGcs / trials,
      ...split(lib, workload),
      eventCount: r.eventCount,
    };
  });
}

// ------------------------------------------------------------------ memory

export function measureMemory(lib, liveLocks) {
  const { encodeCommand } = lib;
  const perSession = 10_000; // LIMITS.locksPerSessionMax
  const sessionCount = Math.ceil(liveLocks / perSession);
  const fsm = new lib.LockStateMachine({ autoClaim: true });
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
