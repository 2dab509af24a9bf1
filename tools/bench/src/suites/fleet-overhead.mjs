// The fleet suite's router overhead: acquire+release cycles on cell-1's
// leader by several paths, after a warm-up of every path (a fresh Node
// process runs its hot paths unoptimised for its first thousands of calls):
//
// - direct: straight to the leader;
// - router: through the fleet's router (the lane towards the node);
// - pipe: through ../byte-pipe.mjs, a process that pipes the bytes without
//   reading them, the floor under any router;
// - follower (--via-follower): to a follower, which forwards to the leader;
// - and, with a baseline fleet, its direct and router paths.
//
// One client takes the paths in turn, cycle by cycle (the order reversed
// every pass), so every path sees the same moments of this noisy machine,
// and each cycle is paired with the cycle of the reference path in its own
// pass: p50/p99 per path and medians of paired differences. Then per-path
// rounds, order alternating: cycles/s at 64 clients, and the CPU per call
// of the process in the middle and of the leader, at 1 and at 64 clients.
import { fork } from 'node:child_process';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { closedLoop } from '../load/closed-loop.mjs';
import { cycle } from '../load/lock-cycles.mjs';
import { FencerClientSystem } from '../systems/fencer-client.mjs';
import { cpuMsOf, median, nowMs, quantile } from '../measure.mjs';

const here = path.dirname(fileURLToPath(import.meta.url));
/** Clients of the throughput rounds; sessions are opened for this many. */
export const MANY_CLIENTS = 64;
/** TTL of the overhead phase's sessions: every path's rounds together outlast 120 s. */
const SESSION_TTL_S = 600;

/** A client bound to one address: calls go there and nowhere else. */
function pathClient(address) {
  const c = new FencerClientSystem();
  c.key = address;
  c.endpoints = [address];
  c.target = address;
  c.pids = () => [];
  return c;
}

/** The paths to one fleet's cell-1 leader: label prefix, addresses and the pid of the process in the middle. */
async function fleetPaths(fleet, prefix, { pipeAddress, pipePid, viaFollower }) {
  const lead = await fleet.leader();
  const replicas = fleet.plan[0].replicas;
  const leader = replicas.find((r) => r.id === lead.id);
  const router = fleet.routers[0];
  const paths = [
    { label: `${prefix}direct`, address: leader.grpc, viaPid: undefined, leaderPid: lead.pid, reference: `${prefix}direct` },
    { label: `${prefix}router`, address: router.grpc, viaPid: fleet.pid(router.id), leaderPid: lead.pid, reference: `${prefix}direct` },
  ];
  if (pipeAddress) paths.push({ label: 'pipe', address: pipeAddress, viaPid: pipePid, leaderPid: lead.pid, reference: 'direct' });
  if (viaFollower) {
    const f = replicas.find((r) => r.id !== lead.id);
    paths.push({ label: `${prefix}follower`, address: f.grpc, viaPid: fleet.pid(f.id), leaderPid: lead.pid, reference: `${prefix}direct` });
  }
  const ids = await fleet.openManySessions(MANY_CLIENTS, SESSION_TTL_S);
  for (const p of paths) {
    p.client = pathClient(p.address);
    p.sessions = ids.map((id) => p.client.sessionOf(id));
  }
  return { paths, close: () => Promise.all(ids.map((sessionId) => fleet.call('closeSession', { sessionId }).catch(() => {}))) };
}

/** Cycles by `clients` loops for `seconds` on one path; rate and CPU µs per call of its middle process and leader. */
async function rounds(p, clients, seconds, tag) {
  const c0 = [p.viaPid, p.leaderPid].map((pid) => (pid ? cpuMsOf(pid) : 0));
  const r = await closedLoop(p.client, clients, { warmupS: 0, seconds }, async (i) => {
    const { cycleMs } = await cycle(p.sessions[i], `/ls/bench/${tag}-${p.label.replace(/\W/g, '')}-${i}`);
    return cycleMs;
  });
  const calls = 2 * Math.max(1, r.ops);
  const [via, leader] = [p.viaPid, p.leaderPid].map((pid, k) => (pid ? ((cpuMsOf(pid) - c0[k]) * 1000) / calls : undefined));
  return { perS: r.rate, viaUs: via, leaderUs: leader };
}

/** One client, the paths in turn cycle by cycle for `seconds`; cycle latencies per path, in pass order. */
async function interleaved(paths, seconds) {
  const lat = Object.fromEntries(paths.map((p) => [p.label, []]));
  const until = nowMs() + seconds * 1000;
  for (let pass = 0; nowMs() < until; pass++) {
    for (const p of pass % 2 === 0 ? paths : [...paths].reverse()) {
      const { cycleMs } = await cycle(p.sessions[0], `/ls/bench/one-${p.label.replace(/\W/g, '')}`);
      lat[p.label].push(cycleMs);
    }
  }
  return lat;
}

/** Median of the paired differences a − b, cycle by cycle of the same passes. */
const pairedMs = (lat, a, b) => median(lat[a].map((x, i) => x - lat[b][i]).filter(Number.isFinite));

/** Per-path figures: the interleaved latencies, and the median round of each kind. */
function summarise(paths, lat, one, many) {
  return paths.map((p) => ({
    label: p.label,
    reference: p.reference,
    cycles: lat[p.label].length,
    p50: quantile(lat[p.label], 0.5),
    p99: quantile(lat[p.label], 0.99),
    pairedMs: p.reference === p.label ? undefined : pairedMs(lat, p.label, p.reference),
    rate64: median(many[p.label].map((r) => r.perS)),
    viaUs: { one: median(one[p.label].map((r) => r.viaUs ?? NaN)), many: median(many[p.label].map((r) => r.viaUs ?? NaN)) },
    leaderUs: { one: median(one[p.label].map((r) => r.leaderUs)), many: median(many[p.label].map((r) => r.leaderUs)) },
  }));
}

/**
 * Router overhead on `fleets` (this build's first; a baseline's after):
 * per path, latency at 1 client, rate at 64, CPU per call; and paired
 * differences of router against direct, pipe and the baseline's router.
 */
export async function routerOverhead(fleets, o) {
  const first = await fleets[0].leader();
  const leaderGrpc = fleets[0].plan[0].replicas.find((r) => r.id === first.id).grpc;
  const pipe = fork(path.join(here, '../byte-pipe.mjs'), [leaderGrpc], { stdio: ['ignore', 'ignore', 'inherit', 'ipc'] });
  const opened = [];
  try {
    const pipeAddress = await new Promise((resolve) => pipe.once('message', resolve));
    for (const [k, fleet] of fleets.entries()) {
      const prefix = k === 0 ? '' : 'baseline ';
      opened.push(
        await fleetPaths(fleet, prefix, { pipeAddress: k === 0 ? pipeAddress : undefined, pipePid: pipe.pid, viaFollower: o.viaFollower }),
      );
    }
    const paths = opened.flatMap((x) => x.paths);
    for (const p of paths) {
      await rounds(p, MANY_CLIENTS, o.warmup, 'warm-many');
      await rounds(p, 1, o.warmup / 2, 'warm-one');
    }
    const lat = await interleaved(paths, o.rounds * o.seconds * paths.length);
    const one = Object.fromEntries(paths.map((p) => [p.label, []]));
    const many = Object.fromEntries(paths.map((p) => [p.label, []]));
    for (let round = 0; round < o.rounds; round++) {
      const order = round % 2 === 0 ? paths : [...paths].reverse();
      for (const p of order) one[p.label].push(await rounds(p, 1, o.seconds, `one-${round}`));
      for (const p of order) many[p.label].push(await rounds(p, MANY_CLIENTS, o.seconds, `many-${round}`));
    }
    const perPath = summarise(paths, lat, one, many);
    const routerVsBaseline = fleets.length > 1 ? pairedMs(lat, 'router', 'baseline router') : undefined;
    return { perPath, routerOverPipeMs: pairedMs(lat, 'router', 'pipe'), routerVsBaselineMs: routerVsBaseline };
  } finally {
    for (const x of opened) {
      for (const p of x.paths) p.client.closeChannels();
      await x.close();
    }
    pipe.kill('SIGTERM');
  }
}
