#!/usr/bin/env node
// Forwarding experiment (eleventh session): what a call sent to a follower
// costs against one sent straight to the leader. 64 clients run
// acquire+release cycles on a local cell of 5 (tools/fleet test fleet, fsync
// on), alternately straight to the leader and through one follower, which
// forwards every call to the leader (by the leader's lane since the eleventh
// session, by gRPC before). Prints cycles/s and the CPU per call of the
// leader and of that follower (from /proc), two rounds each.
// Needs the build (`npx nx run-many -t build`).
//   node tools/bench/router-hop/forwarding.mjs [seconds per round, default 8]
import { startTestFleet } from '@fencer/fleet/testing';
import { procCpuSeconds } from '../cell/common.mjs';
import { lockClients } from './clients.mjs';
const seconds = Number(process.argv[2] ?? 8);
const { call, close } = lockClients();
const cpuMs = (pid) => (procCpuSeconds(pid) ?? 0) * 1000;
const fleet = await startTestFleet({ cells: 1, replicas: 5, routers: 1, proxies: 0, routes: { bench: 'cell-1' } });
try {
  const router = fleet.routerEndpoints[0];
  const leader = await fleet.leaderOf('cell-1');
  const reps = fleet.plan[0].replicas;
  const lead = reps.find((r) => r.id === leader.nodeId);
  const fol = reps.find((r) => r.id !== leader.nodeId);
  const sids = [];
  for (let k = 0; k < 64; k++)
    sids.push((await call(router, 'openSession', { clientId: 'x', ttlMs: 600000, namespace: 'bench' })).sessionId);
  let m = 0;
  const run = async (addr, secs, tag) => {
    let n = 0;
    const until = performance.now() + secs * 1000;
    await Promise.all(
      sids.map(async (s, k) => {
        while (performance.now() < until) {
          const name = `/ls/bench/${tag}-${k}`;
          const g = await call(addr, 'acquire', { sessionId: s, name, mode: 1, waitMs: 0, requestId: `${tag}${k}-${m++}`, lockDelayMs: 0 });
          await call(addr, 'release', { sessionId: s, name, token: g.token });
          n++;
        }
      }),
    );
    return n;
  };
  await run(lead.grpc, 4, 'wl');
  await run(fol.grpc, 4, 'wf');
  for (let round = 0; round < 2; round++)
    for (const [label, a] of [
      ['leader', lead.grpc],
      ['follower', fol.grpc],
    ]) {
      const c0 = [cpuMs(lead.pid), cpuMs(fol.pid)];
      const n = await run(a, seconds, `${label}${round}`);
      const c1 = [cpuMs(lead.pid), cpuMs(fol.pid)];
      console.log(
        label.padEnd(9),
        `${(n / seconds).toFixed(0)} cycles/s`,
        `leader ${(((c1[0] - c0[0]) * 1000) / (2 * n)).toFixed(0)} us/call`,
        `follower ${(((c1[1] - c0[1]) * 1000) / (2 * n)).toFixed(0)} us/call`,
      );
    }
} finally {
  close();
  await fleet.stop();
}
