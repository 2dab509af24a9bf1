#!/usr/bin/env node
// KeepAlive streams spread over every member of a local five-replica cell
// (issue 19): a follower relays its streams' heartbeats to the leader, so
// this measures the relay, where keepalive-10000 in scenarios.mjs sends
// every stream to the leader. Each system (this tree's build and, with
// --baseline, another build) is started alone, warmed up with the same load,
// measured and stopped; with --rounds N the order alternates between rounds.
// Prints keepalives/s, server CPU (leader and followers), ack latency.
//
//   node tools/bench/cell/keepalive-spread.mjs [--baseline PATH/apps/cell-node/dist/main.js]
//        [--seconds 8] [--warmup 5] [--rounds 1] [--streams 20] [--window 64] [--sessions 10000]
//        [--to all|leader] [--json FILE] [--keep-data]
//
// Needs the cell node built (`npx nx run cell-node:build`). Everything runs
// on 127.0.0.1; the load is bounded by --seconds and the streams' windows.
import { writeFileSync } from 'node:fs';
import os from 'node:os';
import { cellNodeBuilt } from '@fencer/fleet';
import { FencerSystem } from './fencer.mjs';
import { histogram, nowMs, procCpuSeconds, sleep } from './common.mjs';

const args = process.argv.slice(2);
const option = (name, fallback) => {
  const at = args.indexOf(name);
  return at >= 0 && args[at + 1] !== undefined ? args[at + 1] : fallback;
};
const opts = {
  seconds: Number(option('--seconds', '8')),
  warmupS: Number(option('--warmup', '5')),
  rounds: Math.max(1, Number(option('--rounds', '1'))),
  streams: Number(option('--streams', '20')),
  window: Number(option('--window', '64')),
  sessions: Number(option('--sessions', '10000')),
  // 'leader': every stream to the leader instead (the same load without the relay, for comparison).
  to: option('--to', 'all'),
};
const baseline = option('--baseline', undefined);
if (!cellNodeBuilt()) {
  console.error('apps/cell-node/dist/main.js is missing: run `npx nx run cell-node:build` first');
  process.exit(2);
}

const keepData = args.includes('--keep-data');
const makers = [() => new FencerSystem({ key: 'this-build', label: 'this build', portBase: 11_000, keepData })];
if (baseline) makers.push(() => new FencerSystem({ key: 'baseline', label: 'baseline build', main: baseline, portBase: 12_000, keepData }));

let running;
for (const sig of ['SIGINT', 'SIGTERM']) {
  process.on(sig, () => {
    (running?.stop() ?? Promise.resolve()).finally(() => process.exit(130));
  });
}

/** CPU seconds of each server process over a window, by replica id. */
function cpuByReplica(system) {
  const read = () => new Map([...system.children].map(([id, child]) => [id, procCpuSeconds(child.pid) ?? 0]));
  const start = read();
  return () => new Map([...read()].map(([id, s]) => [id, s - (start.get(id) ?? s)]));
}

async function measure(system) {
  const t0 = nowMs();
  const ids = await system.openManySessions(opts.sessions, 3600);
  const openS = (nowMs() - t0) / 1000;
  const leaderId = (await system.leader()).id;
  const h = histogram();
  let phase = 'warmup';
  let acks = 0;
  let next = 0;
  let streamErrors = 0;
  let lastError;
  const streams = [];
  for (let k = 0; k < opts.streams; k++) {
    const address = opts.to === 'leader' ? system.target : system.endpoints[k % system.endpoints.length];
    const s = system.raw(address).keepAlive();
    const sent = [];
    const send = () => {
      if (phase === 'done') return;
      sent.push(nowMs());
      s.write({ sessionId: ids[next++ % ids.length] });
    };
    s.on('data', () => {
      const at = sent.shift();
      if (phase === 'measure') {
        acks++;
        if (at !== undefined) h.record(nowMs() - at);
      }
      send();
    });
    s.on('error', (e) => {
      streamErrors++;
      lastError = e;
    });
    streams.push(s);
    for (let w = 0; w < opts.window; w++) send();
  }
  await sleep(opts.warmupS * 1000);
  phase = 'measure';
  const cpu = cpuByReplica(system);
  const wall0 = nowMs();
  await sleep(opts.seconds * 1000);
  const used = cpu();
  const wallS = (nowMs() - wall0) / 1000;
  phase = 'done';
  for (const s of streams) s.end();
  await sleep(200);
  const leaderS = used.get(leaderId) ?? 0;
  const serverS = [...used.values()].reduce((a, b) => a + b, 0);
  return {
    rate: acks / wallS,
    acks,
    p50: h.pMs(50),
    p99: h.pMs(99),
    serverCpuPct: (100 * serverS) / wallS,
    leaderCpuPct: (100 * leaderS) / wallS,
    followersCpuPct: (100 * (serverS - leaderS)) / wallS,
    cpuMsPer1000: acks > 0 ? (1e6 * serverS) / acks : undefined,
    streamErrors,
    lastError: lastError?.message,
    openS,
  };
}

const loadavg = () =>
  os
    .loadavg()
    .map((x) => x.toFixed(2))
    .join(' / ');
const fmt = (x, d = 0) => (x === undefined ? '—' : x.toLocaleString('en-US', { maximumFractionDigits: d, minimumFractionDigits: d }));
console.log(
  `${opts.streams} KeepAlive streams × ${opts.window} in flight, ${opts.to === 'leader' ? 'every stream to the leader' : 'stream k on replica k mod 5'}, ${opts.sessions.toLocaleString('en-US')} sessions; ` +
    `warm-up ${opts.warmupS} s, measured ${opts.seconds} s; load average ${loadavg()}`,
);
const results = [];
for (let round = 0; round < opts.rounds; round++) {
  const order = round % 2 === 0 ? makers : [...makers].reverse();
  for (const make of order) {
    const system = make();
    running = system;
    try {
      await system.start();
      const r = await measure(system);
      results.push({ system: system.key, round, ...r });
      console.log(
        `${system.label.padEnd(15)} ${fmt(r.rate).padStart(8)} keepalives/s  server CPU ${fmt(r.serverCpuPct)}% ` +
          `(leader ${fmt(r.leaderCpuPct)}%, followers ${fmt(r.followersCpuPct)}%), ${fmt(r.cpuMsPer1000, 1)} CPU-ms per 1,000  ` +
          `p50 ${fmt(r.p50, 1)} ms  p99 ${fmt(r.p99, 1)} ms  stream errors ${r.streamErrors}${r.lastError ? ` (${r.lastError})` : ''}; ` +
          `load average ${loadavg()}`,
      );
    } finally {
      await system.stop();
      running = undefined;
    }
  }
}
const jsonOut = option('--json', undefined);
if (jsonOut) writeFileSync(jsonOut, `${JSON.stringify({ opts, baseline, cpus: os.cpus().length, results }, null, 2)}\n`);
process.exit(0);
