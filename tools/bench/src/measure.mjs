// What every suite measures with: latency histograms, quantiles of plain
// arrays, CPU of processes from /proc, of this process and of the whole
// machine, and small async helpers.
import { readFileSync } from 'node:fs';
import * as hdr from 'hdr-histogram-js';

export const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));
export const nowMs = () => performance.now();

/** Linux USER_HZ on every kernel this runs on (getconf CLK_TCK): /proc counts CPU in these ticks. */
const CLK_TCK = 100;
/** CPU of the processes in a window is polled this often, so a process killed mid-window keeps what it used. */
const CPU_POLL_MS = 250;

/** A latency histogram in microseconds (1 µs .. 120 s, 3 significant digits); recorded and read in ms. */
export function histogram() {
  const h = hdr.build({
    lowestDiscernibleValue: 1,
    highestTrackableValue: 120_000_000,
    numberOfSignificantValueDigits: 3,
    useWebAssembly: false,
    bitBucketSize: 64,
  });
  return {
    record(ms) {
      h.recordValue(Math.max(1, Math.round(ms * 1000)));
    },
    get count() {
      return h.totalCount;
    },
    /** Percentile p (0..100) in ms; undefined when empty. */
    pMs(p) {
      return h.totalCount === 0 ? undefined : h.getValueAtPercentile(p) / 1000;
    },
  };
}

/** Quantile q (0..1) of a list of numbers (NaN when empty); sorts a copy. */
export function quantile(xs, q) {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.min(s.length - 1, Math.floor(q * s.length))] ?? NaN;
}

export const median = (xs) => quantile(xs, 0.5);

/** utime+stime of one process in seconds, or undefined once it has exited. */
export function procCpuSeconds(pid) {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    // fields[0] is field 3 (state): utime is field 14, stime field 15.
    return (Number(fields[11]) + Number(fields[12])) / CLK_TCK;
  } catch {
    return undefined;
  }
}

/** Resident set size of one process in bytes (VmRSS from /proc/PID/status), or undefined once it has exited. */
export function procRssBytes(pid) {
  try {
    const m = /^VmRSS:\s+(\d+) kB/m.exec(readFileSync(`/proc/${pid}/status`, 'utf8'));
    return m ? Number(m[1]) * 1024 : undefined;
  } catch {
    return undefined;
  }
}

/**
 * Sums per-process figures by component: `perPid` (pid → number) grouped by
 * `componentOf` (pid → name; pids it does not know are "other"), with the
 * count of processes in each. Components keep the order they first appear in.
 */
export function byComponent(perPid, componentOf) {
  const out = new Map();
  for (const [pid, value] of Object.entries(perPid)) {
    const name = componentOf.get(Number(pid)) ?? 'other';
    const c = out.get(name) ?? { component: name, processes: 0, total: 0 };
    c.processes++;
    c.total += value ?? 0;
    out.set(name, c);
  }
  return [...out.values()];
}

/** CPU ms of a process by pid (this process included), 0 once it has exited. */
export function cpuMsOf(pid) {
  if (pid === process.pid) {
    const u = process.cpuUsage();
    return (u.user + u.system) / 1000;
  }
  return (procCpuSeconds(pid) ?? 0) * 1000;
}

/** Busy and total jiffies of the whole machine (all CPUs) from /proc/stat. */
function machineJiffies() {
  const line = readFileSync('/proc/stat', 'utf8').split('\n')[0];
  const v = line.trim().split(/\s+/).slice(1).map(Number);
  const idle = v[3] + (v[4] ?? 0);
  return { busy: v.reduce((a, b) => a + b, 0) - idle };
}

/**
 * CPU accounting for one measurement window: the servers' processes (by
 * PID, polled), the leader among them when `leaderPid` names it, this
 * process (the load generator) and the machine as a whole. Results in CPU
 * seconds over `wallS`.
 */
export class CpuWindow {
  constructor(pidsFn, leaderPidFn = () => undefined) {
    this.pidsFn = pidsFn;
    this.leaderPidFn = leaderPidFn;
    this.last = new Map();
    this.start = new Map();
  }

  poll() {
    for (const pid of this.pidsFn()) {
      const s = procCpuSeconds(pid);
      if (s !== undefined) this.last.set(pid, s);
    }
  }

  begin() {
    this.last.clear();
    this.poll();
    this.start = new Map(this.last);
    this.leaderPid = this.leaderPidFn();
    this.t0 = nowMs();
    this.self0 = process.cpuUsage();
    this.m0 = machineJiffies();
    this.timer = setInterval(() => this.poll(), CPU_POLL_MS);
  }

  end() {
    clearInterval(this.timer);
    this.poll();
    const wallS = (nowMs() - this.t0) / 1000;
    const used = (pid) => (this.last.get(pid) ?? 0) - (this.start.get(pid) ?? this.last.get(pid) ?? 0);
    let serverS = 0;
    for (const pid of this.last.keys()) serverS += used(pid);
    const self = process.cpuUsage(this.self0);
    const loadgenS = (self.user + self.system) / 1e6;
    const machineS = (machineJiffies().busy - this.m0.busy) / CLK_TCK;
    return {
      wallS,
      serverS,
      perPid: Object.fromEntries([...this.last.keys()].map((pid) => [pid, used(pid)])),
      leaderS: this.leaderPid === undefined ? undefined : used(this.leaderPid),
      loadgenS,
      otherS: Math.max(0, machineS - serverS - loadgenS),
      machineS,
    };
  }
}

/** Runs `fn(i)` for i in [0, n) with at most `width` in flight; resolves with the results in order. */
export async function pool(n, width, fn) {
  let next = 0;
  const results = new Array(n);
  const worker = async () => {
    while (next < n) {
      const i = next++;
      results[i] = await fn(i);
    }
  };
  await Promise.all(Array.from({ length: Math.min(width, n) }, worker));
  return results;
}
