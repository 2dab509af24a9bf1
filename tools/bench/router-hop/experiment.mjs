#!/usr/bin/env node
// Router-hop experiment (issue 19's router overhead, ninth session): what
// one extra hop costs, three ways, in one run against a local cell of 3
// (tools/fleet test fleet, fsync on): straight to the leader; through the
// cell router (grpc-js towards the client; since the tenth session the lane,
// TCP frames, towards the node); through a raw HTTP/2 relay that pipes the
// gRPC bytes without decoding them (./relay.mjs, not the product).
// Prints, per path: acquire+release cycles/s with 64 clients, the relaying
// process's CPU per call (from /proc), and the 1-client p50 of a cycle.
// Needs the build (`npx nx run-many -t build`).
//   node tools/bench/router-hop/experiment.mjs [--seconds 5]
import { fork } from 'node:child_process';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { startTestFleet } from '@fencer/fleet/testing';
import { procCpuSeconds } from '../cell/common.mjs';
import { lockClients } from './clients.mjs';

const here = path.dirname(fileURLToPath(import.meta.url));
const args = process.argv.slice(2);
const seconds = Number(args.indexOf('--seconds') >= 0 ? args[args.indexOf('--seconds') + 1] : '5');
const cpuMs = (pid) => (procCpuSeconds(pid) ?? 0) * 1000;
const { call, close } = lockClients();
const quantile = (xs, p) => [...xs].sort((a, b) => a - b)[Math.floor(p * xs.length)];

const fleet = await startTestFleet({ cells: 1, replicas: 3, routers: 1, proxies: 0, routes: { bench: 'cell-1' } });
let relay;
try {
  const router = fleet.routerEndpoints[0];
  const leader = await fleet.leaderOf('cell-1');
  const direct = fleet.plan[0].replicas.find((r) => r.id === leader.nodeId).grpc;
  relay = fork(path.join(here, 'relay.mjs'), [direct], { stdio: ['ignore', 'ignore', 'inherit', 'ipc'] });
  const relayAddress = await new Promise((r) => relay.once('message', r));
  const sessions = [];
  for (let i = 0; i < 64; i++)
    sessions.push((await call(router, 'openSession', { clientId: 'hop', ttlMs: 120_000, namespace: 'bench' })).sessionId);
  const cycles = async (address, clients, secs, tag) => {
    const lat = [];
    const until = performance.now() + secs * 1000;
    let n = 0;
    await Promise.all(
      Array.from({ length: clients }, async (_, i) => {
        while (performance.now() < until) {
          const t0 = performance.now();
          const name = `/ls/bench/${tag}-${i}`;
          const g = await call(address, 'acquire', {
            sessionId: sessions[i],
            name,
            mode: 1,
            waitMs: 0,
            requestId: `${tag}-${i}-${n++}`,
            lockDelayMs: 0,
          });
          await call(address, 'release', { sessionId: sessions[i], name, token: g.token });
          lat.push(performance.now() - t0);
        }
      }),
    );
    return lat;
  };
  const paths = [
    ['direct', direct, undefined],
    ['router', router, fleet.routers[0].pid],
    ['raw HTTP/2 relay', relayAddress, relay.pid],
  ];
  for (const [, a] of paths) {
    await cycles(a, 64, 3, 'warm64');
    await cycles(a, 1, 1, 'warm1');
  }
  for (const [name, a, pid] of paths) {
    const c0 = pid ? cpuMs(pid) : 0;
    const many = await cycles(a, 64, seconds, `m-${name.length}`);
    const c1 = pid ? cpuMs(pid) : 0;
    const one = await cycles(a, 1, seconds, `o-${name.length}`);
    const usPerCall = pid ? `${Math.round(((c1 - c0) * 1000) / (many.length * 2))} us CPU per relayed call` : 'no relay';
    console.log(
      `${name.padEnd(18)} 64 clients ${(many.length / seconds).toFixed(0)} cycles/s; ${usPerCall}; 1 client p50 ${quantile(one, 0.5).toFixed(2)} ms`,
    );
  }
  console.log(`load average ${os.loadavg()[0].toFixed(1)}`);
} finally {
  relay?.kill('SIGTERM');
  close();
  await fleet.stop();
}
