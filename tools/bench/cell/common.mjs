// Shared pieces of the cell benchmark: latency histograms, CPU accounting
// from /proc, small async helpers, and process start/stop by PID.
import { readFileSync } from 'node:fs';
import net from 'node:net';
import * as hdr from 'hdr-histogram-js';

export const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));
export const nowMs = () => performance.now();

/** A latency histogram in microseconds (1 µs .. 120 s, 3 significant digits). */
export function histogram() {
  const h = hdr.build({
    lowestDiscernibleValue: 1,
    highestTrackableValue: 120_000_000,
    numberOfSignificantValueDigits: 3,
    useWebAssembly: false,
    bitBucketSize: 64,
  });
  return {
    /** Records one latency given in milliseconds. */
    record(ms) {
      h.recordValue(Math.max(1, Math.round(ms * 1000)));
    },
    get count() {
      return h.totalCount;
    },
    /** Percentile in milliseconds (undefined when empty). */
    pMs(p) {
      return h.totalCount === 0 ? undefined : h.getValueAtPercentile(p) / 1000;
    },
    reset() {
      h.reset();
    },
  };
}

const CLK_TCK = 100; // Linux USER_HZ on every kernel this runs on (getconf CLK_TCK).

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

/** Busy and total jiffies of the whole machine (all CPUs) from /proc/stat. */
export function machineJiffies() {
  const line = readFileSync('/proc/stat', 'utf8').split('\n')[0];
  const v = line.trim().split(/\s+/).slice(1).map(Number);
  const idle = v[3] + (v[4] ?? 0);
  const total = v.reduce((a, b) => a + b, 0);
  return { busy: total - idle, total };
}

/**
 * CPU accounting for one measurement window: the servers' processes (by PID,
 * polled so a process killed mid-window keeps what it used), this process
 * (process.cpuUsage) and the machine as a whole (/proc/stat).
 */
export class CpuWindow {
  constructor(pidsFn) {
    this.pidsFn = pidsFn;
    this.last = new Map();
    this.start = new Map();
    this.timer = undefined;
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
    this.t0 = nowMs();
    this.self0 = process.cpuUsage();
    this.m0 = machineJiffies();
    this.timer = setInterval(() => this.poll(), 250);
  }

  end() {
    clearInterval(this.timer);
    this.poll();
    const wallS = (nowMs() - this.t0) / 1000;
    let server = 0;
    for (const [pid, s] of this.last) server += s - (this.start.get(pid) ?? s);
    const self = process.cpuUsage(this.self0);
    const loadgen = (self.user + self.system) / 1e6;
    const m1 = machineJiffies();
    const machine = (m1.busy - this.m0.busy) / CLK_TCK;
    return { wallS, serverS: server, loadgenS: loadgen, otherS: Math.max(0, machine - server - loadgen), machineS: machine };
  }
}

/** Resolves when something accepts TCP connections on host:port, or rejects after timeoutMs. */
export async function waitForPort(port, timeoutMs, host = '127.0.0.1') {
  const until = Date.now() + timeoutMs;
  for (;;) {
    const ok = await new Promise((resolve) => {
      const s = net.connect({ host, port }, () => {
        s.destroy();
        resolve(true);
      });
      s.on('error', () => resolve(false));
    });
    if (ok) return;
    if (Date.now() > until) throw new Error(`nothing listens on ${host}:${port} after ${timeoutMs} ms`);
    await sleep(100);
  }
}

/** True when nothing listens on 127.0.0.1:port (a quick bind test). */
export function portFree(port) {
  return new Promise((resolve) => {
    const srv = net.createServer();
    srv.once('error', () => resolve(false));
    srv.listen(port, '127.0.0.1', () => srv.close(() => resolve(true)));
  });
}

/** Linux's ephemeral ports (ip_local_port_range) start here: outgoing connections take ports from 32768 up. */
const EPHEMERAL_PORTS_FROM = 32_768;

/**
 * Picks a base so that base+0 .. base+span-1 are all free, from `preferred`
 * up to the ephemeral range: a server restarted there (the failover
 * scenario) could find its port taken by some process's outgoing connection.
 */
export async function freePortBase(preferred, span) {
  for (let base = preferred; base + span <= EPHEMERAL_PORTS_FROM; base += span + 7) {
    let free = true;
    for (let p = base; p < base + span && free; p++) free = await portFree(p);
    if (free) return base;
  }
  throw new Error(`no free port range of ${span} near ${preferred}`);
}

/** Stops children that this run started: SIGTERM, then SIGKILL after graceMs (by their own PID). */
export async function stopChildren(children, graceMs = 5000) {
  await Promise.all(
    children.map(
      (child) =>
        new Promise((resolve) => {
          if (!child || child.exitCode !== null || child.signalCode !== null) return resolve();
          const timer = setTimeout(() => child.kill('SIGKILL'), graceMs);
          child.once('exit', () => {
            clearTimeout(timer);
            resolve();
          });
          child.kill('SIGTERM');
        }),
    ),
  );
}

export function alive(child) {
  return child !== undefined && child.exitCode === null && child.signalCode === null;
}

/** Kills one child with SIGKILL and resolves once it is gone. */
export function killHard(child) {
  return new Promise((resolve) => {
    if (!alive(child)) return resolve();
    child.once('exit', () => resolve());
    child.kill('SIGKILL');
  });
}

/** Runs `fn(i)` for i in [0, n) with at most `width` in flight. */
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

/**
 * kill -9 of `system`'s current leader (any system with leader() → { id } and
 * children by id); remembers it for restartKilled(). Returns the time of the kill.
 */
export async function killLeaderOf(system) {
  const { id } = await system.leader();
  const t = nowMs();
  await killHard(system.children.get(id));
  system.killed = id;
  return { killedAtMs: t, id };
}
