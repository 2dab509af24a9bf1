#!/usr/bin/env node
// Fleet benchmark (issue 19), two measurements side by side in one run on a
// fresh local fleet (@fencer/fleet: 2 cells, 1 router, 2 proxies, 127.0.0.1,
// fsync on):
//
// - Router overhead: acquire+release cycles of one client, then of 64
//   clients, straight to the cell leader and through the router, rounds
//   alternating; p50/p99 of a cycle at 1 client, cycles/s at 64.
// - Heartbeats: N sessions (half per cell) heartbeat through the 2 proxies on
//   S KeepAlive streams at an offered rate; heartbeats/s acknowledged,
//   HeartbeatBatch calls/s arriving at the leaders (from the proxies'
//   metrics), p50/p99 acknowledgement latency, log entries written meanwhile
//   (commit index before and after: heartbeats are never logged), and CPU
//   per heartbeat of every process.
//
// Prints the figures and, unless --no-write, writes docs/benchmarks.md
// between <!-- fleet:start --> and <!-- fleet:end -->.
//
//   node tools/bench/fleet-bench.mjs [--replicas 5] [--seconds 8] [--sessions 50000] [--streams 64]
//                                    [--interval-ms 1000] [--rounds 3] [--quick] [--no-write]
// --quick: 3 replicas, 2 s, 2,000 sessions, 1 round (a smoke run).
import { readFileSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { credentials } from '@grpc/grpc-js';
import { lockservice } from '@fencer/protocol';
import { startTestFleet } from '@fencer/fleet/testing';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../..');
const args = process.argv.slice(2);
const flag = (n) => args.includes(n);
const option = (n, d) => (args.indexOf(n) >= 0 ? args[args.indexOf(n) + 1] : d);
const quick = flag('--quick');
const opts = {
  replicas: Number(option('--replicas', quick ? '3' : '5')),
  seconds: Number(option('--seconds', quick ? '2' : '8')),
  sessions: Number(option('--sessions', quick ? '2000' : '50000')),
  streams: Number(option('--streams', quick ? '8' : '64')),
  intervalMs: Number(option('--interval-ms', '1000')),
  rounds: Number(option('--rounds', quick ? '1' : '3')),
};

const stubs = new Map();
const stub = (address) => {
  if (!stubs.has(address))
    stubs.set(address, new lockservice.LockServiceClient(address, credentials.createInsecure(), { 'grpc.per_rpc_retry_buffer_size': 0 }));
  return stubs.get(address);
};
const call = (address, method, req) =>
  new Promise((resolve, reject) => stub(address)[method](req, { deadline: Date.now() + 30_000 }, (e, r) => (e ? reject(e) : resolve(r))));
const quantile = (xs, q) => {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.min(s.length - 1, Math.floor(q * s.length))] ?? NaN;
};
const cpuMs = (pid) => {
  try {
    const f = readFileSync(`/proc/${pid}/stat`, 'utf8').split(') ')[1].split(' ');
    return ((Number(f[11]) + Number(f[12])) * 1000) / 100;
  } catch {
    return 0;
  }
};

/** Acquire+release cycles by `clients` loops for `seconds` against `address`; cycle latencies in ms. */
async function cycles(address, sessionIds, clients, seconds, tag) {
  const lat = [];
  const until = performance.now() + seconds * 1000;
  let n = 0;
  await Promise.all(
    Array.from({ length: clients }, async (_, i) => {
      const sessionId = sessionIds[i];
      const name = `/ls/bench/${tag}-${i}`;
      while (performance.now() < until) {
        const t0 = performance.now();
        const g = await call(address, 'acquire', { sessionId, name, mode: 1, waitMs: 0, requestId: `${tag}-${i}-${n++}`, lockDelayMs: 0 });
        await call(address, 'release', { sessionId, name, token: g.token });
        lat.push(performance.now() - t0);
      }
    }),
  );
  return { lat, perS: lat.length / seconds };
}

async function routerOverhead(fleet, sessions) {
  const leader = await fleet.leaderOf('cell-1');
  const direct = fleet.plan[0].replicas.find((r) => r.id === leader.nodeId).grpc;
  const router = fleet.routerEndpoints[0];
  const out = { one: { direct: [], router: [] }, many: { direct: [], router: [] } };
  for (let round = 0; round < opts.rounds; round++) {
    const order =
      round % 2 === 0
        ? [
            ['direct', direct],
            ['router', router],
          ]
        : [
            ['router', router],
            ['direct', direct],
          ];
    for (const [label, address] of order) out.one[label].push(await cycles(address, sessions, 1, opts.seconds, `one-${label}-${round}`));
    for (const [label, address] of order) out.many[label].push(await cycles(address, sessions, 64, opts.seconds, `many-${label}-${round}`));
  }
  const med = (rs, f) => quantile(rs.map(f), 0.5);
  return {
    p50: { direct: med(out.one.direct, (r) => quantile(r.lat, 0.5)), router: med(out.one.router, (r) => quantile(r.lat, 0.5)) },
    p99: { direct: med(out.one.direct, (r) => quantile(r.lat, 0.99)), router: med(out.one.router, (r) => quantile(r.lat, 0.99)) },
    rate64: { direct: med(out.many.direct, (r) => r.perS), router: med(out.many.router, (r) => r.perS) },
  };
}

async function metricSum(url, re) {
  const text = await (await fetch(url)).text();
  let sum = 0;
  for (const m of text.matchAll(re)) sum += Number(m[1]);
  return sum;
}

async function heartbeats(fleet) {
  const router = fleet.routerEndpoints[0];
  // Sessions: half in a namespace of each cell, opened through the router.
  const ids = [];
  for (let i = 0; i < opts.sessions; i += 200) {
    const batch = await Promise.all(
      Array.from({ length: Math.min(200, opts.sessions - i) }, (_, j) =>
        call(router, 'openSession', { clientId: 'hb', ttlMs: 60_000, namespace: (i + j) % 2 === 0 ? 'hb-a' : 'hb-b' }),
      ),
    );
    ids.push(...batch.map((s) => s.sessionId));
  }
  const leaders = await Promise.all(fleet.plan.map((c) => fleet.leaderOf(c.id)));
  const commitBefore = leaders.map((l) => l.commitIndex);
  const streams = Array.from({ length: opts.streams }, (_, i) => stub(fleet.proxyEndpoints[i % fleet.proxyEndpoints.length]).keepAlive());
  const sentAt = new Map();
  const lat = [];
  let acked = 0;
  for (const s of streams) {
    s.on('data', (a) => {
      const t = sentAt.get(a.sessionId);
      if (t !== undefined) lat.push(performance.now() - t);
      acked++;
    });
    s.on('error', () => {});
  }
  const batchesBefore = await Promise.all(
    fleet.proxies.map((p) => metricSum(p.metrics, /^fencer_proxy_batches_total\{[^}]*outcome="ok"\} (\d+)/gm)),
  );
  const pids = [...fleet.children].map(([id, c]) => [id, c.pid]);
  const cpuBefore = pids.map(([, pid]) => cpuMs(pid));
  const t0 = performance.now();
  const ackedAt0 = acked;
  const until = t0 + opts.seconds * 1000;
  // Each session heartbeats once per interval, spread evenly over it.
  const perTickSessions = Math.ceil(ids.length / (opts.intervalMs / 10));
  let next = 0;
  while (performance.now() < until) {
    for (let k = 0; k < perTickSessions; k++) {
      const id = ids[next % ids.length];
      sentAt.set(id, performance.now());
      streams[next % streams.length].write({ sessionId: id });
      next++;
    }
    await new Promise((r) => setTimeout(r, 10));
  }
  const elapsedS = (performance.now() - t0) / 1000;
  const ackedN = acked - ackedAt0;
  const cpuAfter = pids.map(([, pid]) => cpuMs(pid));
  const batchesAfter = await Promise.all(
    fleet.proxies.map((p) => metricSum(p.metrics, /^fencer_proxy_batches_total\{[^}]*outcome="ok"\} (\d+)/gm)),
  );
  const leadersAfter = await Promise.all(fleet.plan.map((c) => fleet.leaderOf(c.id)));
  for (const s of streams) s.end();
  const cpu = pids.map(([id], i) => ({
    id,
    msPerS: (cpuAfter[i] - cpuBefore[i]) / elapsedS,
    usPerHeartbeat: ((cpuAfter[i] - cpuBefore[i]) * 1000) / Math.max(1, ackedN),
  }));
  return {
    offeredPerS: next / elapsedS,
    ackedPerS: ackedN / elapsedS,
    batchesPerS: batchesAfter.reduce((a, b) => a + b, 0) / elapsedS - batchesBefore.reduce((a, b) => a + b, 0) / elapsedS,
    p50: quantile(lat, 0.5),
    p99: quantile(lat, 0.99),
    logEntries: leadersAfter.map((l, i) => l.commitIndex - commitBefore[i]),
    cpu,
  };
}

const fleet = await startTestFleet({
  cells: 2,
  replicas: opts.replicas,
  routers: 1,
  proxies: 2,
  routes: { bench: 'cell-1', 'hb-a': 'cell-1', 'hb-b': 'cell-2' },
});
let result;
try {
  const sessions = [];
  for (let i = 0; i < 64; i++)
    sessions.push(
      (await call(fleet.routerEndpoints[0], 'openSession', { clientId: 'bench', ttlMs: 120_000, namespace: 'bench' })).sessionId,
    );
  const overhead = await routerOverhead(fleet, sessions);
  const hb = await heartbeats(fleet);
  result = { overhead, hb };
} finally {
  for (const s of stubs.values()) s.close();
  await fleet.stop();
}

const { overhead: o, hb } = result;
const f1 = (x) => x.toFixed(2);
const lines = [
  `Router overhead (${opts.rounds} round(s) of ${opts.seconds} s, medians): 1 client acquire+release p50 direct ${f1(o.p50.direct)} ms, through the router ${f1(o.p50.router)} ms (+${f1(o.p50.router - o.p50.direct)} ms, ${(o.p50.router / o.p50.direct).toFixed(2)}x); p99 ${f1(o.p99.direct)} / ${f1(o.p99.router)} ms. 64 clients: ${o.rate64.direct.toFixed(0)} cycles/s direct, ${o.rate64.router.toFixed(0)} through the router (${(o.rate64.router / o.rate64.direct).toFixed(2)}x).`,
  `Heartbeats: ${opts.sessions.toLocaleString('en-US')} sessions on ${opts.streams} streams to 2 proxies, each every ${opts.intervalMs} ms: offered ${hb.offeredPerS.toFixed(0)}/s, acknowledged ${hb.ackedPerS.toFixed(0)}/s, ${hb.batchesPerS.toFixed(1)} HeartbeatBatch calls/s at the leaders, ack latency p50 ${f1(hb.p50)} ms p99 ${f1(hb.p99)} ms, log entries written meanwhile ${hb.logEntries.join(' + ')}.`,
  `CPU per process (ms/s, µs per acknowledged heartbeat): ${hb.cpu.map((c) => `${c.id} ${c.msPerS.toFixed(0)} (${c.usPerHeartbeat.toFixed(1)})`).join(', ')}.`,
];
console.log(lines.join('\n\n'));

if (!flag('--no-write')) {
  const file = path.join(root, 'docs/benchmarks.md');
  const START = '<!-- fleet:start -->';
  const END = '<!-- fleet:end -->';
  const section = [
    START,
    '## Fleet: router overhead and batched heartbeats',
    '',
    `Measured by \`node tools/bench/fleet-bench.mjs${args.length ? ` ${args.join(' ')}` : ''}\` on ${new Date().toISOString().slice(0, 10)}: Node ${process.version}, ${os.cpus().length} × ${os.cpus()[0]?.model ?? 'unknown CPU'}, load average ${os.loadavg()[0].toFixed(1)}; 2 cells × ${opts.replicas} replicas, 1 router, 2 proxies on 127.0.0.1, fsync on.`,
    '',
    ...lines.flatMap((l) => [l, '']),
    END,
  ].join('\n');
  const text = readFileSync(file, 'utf8');
  const at = text.indexOf(START);
  const end = text.indexOf(END);
  writeFileSync(
    file,
    at >= 0 && end > at ? text.slice(0, at) + section + text.slice(end + END.length) : `${text.trimEnd()}\n\n${section}\n`,
  );
  console.log('wrote the fleet section of docs/benchmarks.md');
}
