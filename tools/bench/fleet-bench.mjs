#!/usr/bin/env node
// Fleet benchmark (issue 19), every figure side by side in one run on a fresh
// local fleet (@fencer/fleet: 2 cells, 1 router, 2 proxies, 127.0.0.1, fsync on):
//
// - Router overhead: acquire+release cycles straight to the cell leader,
//   through the router, and through a byte pipe process (the floor under any
//   router), after a warm-up of every path (a fresh Node process runs its hot
//   paths unoptimised for its first thousands of calls). One client takes the
//   three paths in turn, cycle by cycle, so they share the machine's moments:
//   p50/p99 per path, and the median of paired differences. Then per-path
//   rounds, order alternating: cycles/s with 64 clients, and CPU per call of
//   the router and the leader at 1 and at 64 clients.
// - Heartbeats: N sessions (half per cell) heartbeat through the 2 proxies,
//   each once per --interval-ms, spread evenly over it, on S KeepAlive
//   streams (many sessions per stream, as the contract allows). After a
//   warm-up, a measured window, then the answers still owed are awaited, so
//   every heartbeat sent in the window is answered before the CPU counters
//   are read: CPU per heartbeat is exact even when the machine cannot keep
//   up. Figures: heartbeats/s offered and acknowledged, HeartbeatBatch
//   calls/s at the leaders (from the proxies' metrics) against their bound
//   (proxies × cells per proxy interval), p50/p99 acknowledgement latency,
//   log entries written meanwhile (the leaders' commit indexes before and
//   after: heartbeats are never logged), and CPU of every process, in ms/s
//   and µs per heartbeat (proxies, leaders, followers, router, bench client).
// - etcd (unless --no-etcd, or etcd-server is not installed): the same
//   number of leases kept alive by the same load generator at the same rate
//   on the same number of LeaseKeepAlive streams, to the leader of a
//   5-member etcd (tools/bench/cell/etcd.mjs).
//
// The load generator writes the gRPC frames itself over node:http2 (each
// session's request is encoded once; one write per stream per 10 ms carries
// every heartbeat due), so the bench client costs a few µs per heartbeat and
// is not what bounds the rate.
//
// Prints the figures and, unless --no-write, writes docs/benchmarks.md
// between <!-- fleet:start --> and <!-- fleet:end -->.
//
//   node tools/bench/fleet-bench.mjs [--replicas 5] [--seconds 8] [--sessions 50000] [--streams 64]
//                                    [--interval-ms 1000] [--proxy-interval-ms MS] [--rounds 3]
//                                    [--warmup 5] [--hb-warmup 5] [--no-etcd] [--quick] [--no-write]
//   npm run bench -- --fleet [the same flags]
// --quick: 3 replicas, 2 s windows, 2,000 sessions, 8 streams, 1 round, 1 s warm-ups (a smoke run).
import { fork } from 'node:child_process';
import { readFileSync, writeFileSync, existsSync } from 'node:fs';
import http2 from 'node:http2';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { credentials } from '@grpc/grpc-js';
import { lockservice } from '@fencer/protocol';
import { limits } from '@fencer/cell-router';
import { startTestFleet } from '@fencer/fleet/testing';
import { pool, sleep } from './cell/common.mjs';

const here = path.dirname(fileURLToPath(import.meta.url));
const root = path.resolve(here, '../..');
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
  proxyIntervalMs: option('--proxy-interval-ms', undefined) === undefined ? undefined : Number(option('--proxy-interval-ms')),
  rounds: Number(option('--rounds', quick ? '1' : '3')),
  warmupS: Number(option('--warmup', quick ? '1' : '5')),
  hbWarmupS: Number(option('--hb-warmup', quick ? '1' : '5')),
  etcd: !flag('--no-etcd') && existsSync(process.env.ETCD_BIN ?? '/usr/bin/etcd'),
};
const DRAIN_MS_MAX = 60_000;
const loadAtStart = os.loadavg()[0];

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
const selfCpuMs = () => {
  const u = process.cpuUsage();
  return (u.user + u.system) / 1000;
};

// ---------------------------------------------------------------- router overhead

/** One acquire+release cycle of a session on a lock against `address`; its latency in ms. */
async function cycle(address, sessionId, name, requestId) {
  const t0 = performance.now();
  const g = await call(address, 'acquire', { sessionId, name, mode: 1, waitMs: 0, requestId, lockDelayMs: 0 });
  await call(address, 'release', { sessionId, name, token: g.token });
  return performance.now() - t0;
}

/** Acquire+release cycles by `clients` loops for `seconds` against `address`; cycle latencies in ms. */
async function cycles(address, sessionIds, clients, seconds, tag) {
  const lat = [];
  const until = performance.now() + seconds * 1000;
  let n = 0;
  await Promise.all(
    Array.from({ length: clients }, async (_, i) => {
      const name = `/ls/bench/${tag}-${i}`;
      while (performance.now() < until) lat.push(await cycle(address, sessionIds[i], name, `${tag}-${i}-${n++}`));
    }),
  );
  return { lat, perS: lat.length / seconds };
}

/**
 * One client, the paths taken in turn cycle by cycle (the order reversed
 * every pass) for `seconds`: every path sees the same moments of this noisy
 * machine, and each cycle is paired with the direct cycle of its own pass.
 * Latencies per path, in ms, in pass order.
 */
async function interleaved(paths, sessionId, seconds) {
  const labels = Object.keys(paths);
  const lat = Object.fromEntries(labels.map((l) => [l, []]));
  const until = performance.now() + seconds * 1000;
  for (let pass = 0; performance.now() < until; pass++) {
    for (const l of pass % 2 === 0 ? labels : [...labels].reverse())
      lat[l].push(await cycle(paths[l], sessionId, `/ls/bench/one-${l}`, `one-${l}-${pass}`));
  }
  return lat;
}

/**
 * Three paths to cell-1's leader: direct; through the router; and through
 * ./router-hop/pipe.mjs, a process that pipes the bytes without reading
 * them (the floor under any router: what one more process on the path costs
 * here, in wakeups alone). Latency at 1 client from the paths interleaved
 * cycle by cycle; per-path rounds (order alternating) give cycles/s at 64
 * clients and the CPU of the router and the leader per call, from /proc.
 */
async function routerOverhead(fleet, sessions) {
  const leader = await fleet.leaderOf('cell-1');
  const replica = fleet.plan[0].replicas.find((r) => r.id === leader.nodeId);
  const pipe = fork(path.join(here, 'router-hop/pipe.mjs'), [replica.grpc], { stdio: ['ignore', 'ignore', 'inherit', 'ipc'] });
  try {
    const paths = { direct: replica.grpc, router: fleet.routerEndpoints[0], pipe: await new Promise((r) => pipe.once('message', r)) };
    const labels = Object.keys(paths);
    for (const label of labels) {
      await cycles(paths[label], sessions, 64, opts.warmupS, `warm-many-${label}`);
      await cycles(paths[label], sessions, 1, opts.warmupS / 2, `warm-one-${label}`);
    }
    const blank = () => Object.fromEntries(labels.map((l) => [l, []]));
    const out = { one: blank(), many: blank() };
    const cpu = { one: blank(), many: blank() };
    const measured = async (kind, label, clients, round) => {
      const pids = [fleet.routers[0].pid, replica.pid];
      const c0 = pids.map(cpuMs);
      const r = await cycles(paths[label], sessions, clients, opts.seconds, `${kind}-${label}-${round}`);
      const c1 = pids.map(cpuMs);
      out[kind][label].push(r);
      // µs per call (a cycle is two calls): the router's, the leader's.
      cpu[kind][label].push(c1.map((c, i) => ((c - c0[i]) * 1000) / (2 * r.lat.length)));
    };
    const one = await interleaved(paths, sessions[0], opts.rounds * opts.seconds * labels.length);
    for (let round = 0; round < opts.rounds; round++) {
      const order = round % 2 === 0 ? labels : [...labels].reverse();
      for (const label of order) await measured('one', label, 1, round);
      for (const label of order) await measured('many', label, 64, round);
    }
    const med = (rs, f) => quantile(rs.map(f), 0.5);
    const per = (f) => Object.fromEntries(labels.map((l) => [l, f(l)]));
    const paired = (a, b) =>
      quantile(
        one[a].map((x, i) => x - one[b][i]),
        0.5,
      );
    return {
      cycles: one.direct.length,
      p50: per((l) => quantile(one[l], 0.5)),
      p99: per((l) => quantile(one[l], 0.99)),
      paired: { router: paired('router', 'direct'), pipe: paired('pipe', 'direct'), routerOverPipe: paired('router', 'pipe') },
      rate64: per((l) => med(out.many[l], (r) => r.perS)),
      routerUs: { one: med(cpu.one.router, (c) => c[0]), many: med(cpu.many.router, (c) => c[0]) },
      leaderUs: per((l) => ({ one: med(cpu.one[l], (c) => c[1]), many: med(cpu.many[l], (c) => c[1]) })),
    };
  } finally {
    pipe.kill('SIGTERM');
  }
}

// ---------------------------------------------------------------- raw gRPC streams

const varint = (n) => {
  let v = BigInt(n);
  const out = [];
  while (v >= 0x80n) {
    out.push(Number(v & 0x7fn) | 0x80);
    v >>= 7n;
  }
  out.push(Number(v));
  return Buffer.from(out);
};
/** One gRPC message frame (uncompressed, length-prefixed) around protobuf bytes. */
const grpcFrame = (msg) =>
  Buffer.concat([Buffer.from([0, msg.length >>> 24, (msg.length >>> 16) & 255, (msg.length >>> 8) & 255, msg.length & 255]), msg]);
/** Reads the varint at `at`: [value (number, exact below 2^53), next offset]. */
function readVarint(b, at) {
  let v = 0;
  let mul = 1;
  for (;;) {
    const x = b[at++];
    v += (x & 0x7f) * mul;
    if (x < 0x80) return [v, at];
    mul *= 128;
  }
}
/** Skips the field with this tag at `at`; the offset after it. */
function skipField(b, tag, at) {
  switch (tag & 7) {
    case 0:
      return readVarint(b, at)[1];
    case 2: {
      const [len, from] = readVarint(b, at);
      return from + len;
    }
    case 1:
      return at + 8;
    case 5:
      return at + 4;
    default:
      throw new Error(`unexpected wire type in tag ${tag}`);
  }
}

/**
 * `count` bidi gRPC streams of one method on one HTTP/2 connection, written
 * as raw frames. `onMessage(buf, start, end)` gets each answer's protobuf
 * bytes; `onEnd(err)` a stream's end (err: its grpc-status and message when not OK).
 */
function rawStreams(address, methodPath, count, onMessage, onEnd) {
  const session = http2.connect(`http://${address}`, { settings: { initialWindowSize: 16 * 1024 * 1024 } });
  session.on('error', (e) => onEnd(e));
  session.on('connect', () => session.setLocalWindowSize(64 * 1024 * 1024));
  const streams = Array.from({ length: count }, () => {
    const req = session.request({ ':method': 'POST', ':path': methodPath, 'content-type': 'application/grpc', te: 'trailers' });
    let rest = Buffer.alloc(0);
    req.on('data', (chunk) => {
      const b = rest.length ? Buffer.concat([rest, chunk]) : chunk;
      let at = 0;
      while (b.length - at >= 5) {
        const len = b.readUInt32BE(at + 1);
        if (b.length - at - 5 < len) break;
        onMessage(b, at + 5, at + 5 + len);
        at += 5 + len;
      }
      rest = at === b.length ? Buffer.alloc(0) : b.subarray(at);
    });
    const ended = (headers) => {
      const st = headers?.['grpc-status'];
      onEnd(
        st !== undefined && st !== '0' ? new Error(`grpc-status ${st}: ${decodeURIComponent(headers['grpc-message'] ?? '')}`) : undefined,
      );
    };
    req.on('trailers', ended);
    req.on('response', (h) => h['grpc-status'] !== undefined && ended(h)); // a trailers-only answer
    req.on('error', (e) => onEnd(e));
    return req;
  });
  return {
    write: (k, buf) => streams[k].write(buf),
    close: async () => {
      for (const s of streams) s.end();
      // The server ends each stream after the client's half-close; a server that does not is cut after a moment.
      const cut = setTimeout(() => session.destroy(), 5_000);
      await new Promise((resolve) => session.close(resolve));
      clearTimeout(cut);
    },
  };
}

/**
 * An open-loop keepalive load: every session once per interval, spread
 * evenly over it, on `streamsN` streams. `frames[i]` is session i's request
 * frame; `ack(i, ttl0)` is called by the protocol's parser for each answer.
 */
function keepAliveLoad(frames, streamsN, write) {
  const n = frames.length;
  const perS = n / (opts.intervalMs / 1000);
  const sentAt = new Float64Array(n);
  // Latencies of the measured window and its drain, in ms (room for 2 × the window's heartbeats; more are not recorded).
  const lat = new Float64Array(Math.ceil(perS * opts.seconds * 2) + 1024);
  let latN = 0;
  const state = { sent: 0, acked: 0, expired: 0, errors: 0, measuring: false };
  state.ack = (i, expired) => {
    state.acked++;
    if (expired) state.expired++;
    if (state.measuring && latN < lat.length) lat[latN++] = performance.now() - sentAt[i];
  };
  /** Quantile q of the latencies recorded, in ms. */
  state.latencyMs = (q) => {
    if (latN === 0) return undefined;
    const s = lat.subarray(0, latN).sort();
    return s[Math.min(latN - 1, Math.floor(q * latN))];
  };
  /** Sends at the offered rate for `seconds`; resolves with the count sent. */
  state.run = async (seconds) => {
    const t0 = performance.now();
    const from = state.sent;
    const perStream = Array.from({ length: streamsN }, () => []);
    for (let last = false; !last;) {
      const elapsedMs = performance.now() - t0;
      // The last pass sends whatever the whole window owes, so the offered rate is the one asked for.
      last = elapsedMs >= seconds * 1000;
      const due = from + Math.floor((last ? seconds : elapsedMs / 1000) * perS);
      const now = performance.now();
      for (; state.sent < due; state.sent++) {
        const i = state.sent % n;
        sentAt[i] = now;
        perStream[state.sent % streamsN].push(frames[i]);
      }
      for (let k = 0; k < streamsN; k++) {
        if (perStream[k].length === 0) continue;
        write(k, Buffer.concat(perStream[k]));
        perStream[k].length = 0;
      }
      if (!last) await sleep(10);
    }
    return state.sent - from;
  };
  /** Waits until every heartbeat sent was answered (or DRAIN_MS_MAX passed); the ms waited. */
  state.drain = async () => {
    const t0 = performance.now();
    while (state.acked < state.sent && performance.now() - t0 < DRAIN_MS_MAX && state.errors === 0) await sleep(10);
    return performance.now() - t0;
  };
  return state;
}

/**
 * Warm-up, then the measured window and the wait for its answers; `snap()`
 * reads every counter the caller wants before and after. CPU per heartbeat
 * is CPU over window+drain divided by the heartbeats the window sent.
 */
async function measure(load, pids, snap) {
  await load.run(opts.hbWarmupS);
  await load.drain();
  const before = await snap();
  const cpu0 = pids.map(([, pid]) => (pid === process.pid ? selfCpuMs() : cpuMs(pid)));
  const acked0 = load.acked;
  load.measuring = true;
  const t0 = performance.now();
  const sent = await load.run(opts.seconds);
  const windowS = (performance.now() - t0) / 1000;
  const ackedInWindow = load.acked - acked0;
  const drainMs = await load.drain();
  load.measuring = false;
  const spanS = (performance.now() - t0) / 1000;
  const cpu1 = pids.map(([, pid]) => (pid === process.pid ? selfCpuMs() : cpuMs(pid)));
  const after = await snap();
  const answered = load.acked - acked0;
  return {
    offeredPerS: sent / windowS,
    ackedPerS: ackedInWindow / windowS,
    answeredPerS: answered / spanS,
    sent,
    answered,
    drainMs,
    spanS,
    p50: load.latencyMs(0.5),
    p99: load.latencyMs(0.99),
    expired: load.expired,
    errors: load.errors,
    before,
    after,
    cpu: pids.map(([id], i) => ({
      id,
      msPerS: (cpu1[i] - cpu0[i]) / spanS,
      usPerHeartbeat: ((cpu1[i] - cpu0[i]) * 1000) / Math.max(1, answered),
    })),
  };
}

// ---------------------------------------------------------------- heartbeats through the proxies

async function metricSum(url, re) {
  const text = await (await fetch(url)).text();
  let sum = 0;
  for (const m of text.matchAll(re)) sum += Number(m[1]);
  return sum;
}

async function openSessions(router, n, namespaces) {
  return pool(n, 256, async (i) => {
    const s = await call(router, 'openSession', { clientId: 'hb', ttlMs: 600_000, namespace: namespaces[i % namespaces.length] });
    return s.sessionId;
  });
}

async function heartbeats(fleet) {
  const t0 = performance.now();
  const ids = await openSessions(fleet.routerEndpoints[0], opts.sessions, ['hb-a', 'hb-b']);
  const openS = (performance.now() - t0) / 1000;
  const index = new Map(ids.map((id, i) => [id, i]));
  // KeepAliveRequest { session_id = 1 }
  const frames = ids.map((id) => grpcFrame(Buffer.concat([Buffer.from([0x0a]), varint(Buffer.byteLength(id)), Buffer.from(id)])));
  const proxiesN = fleet.proxyEndpoints.length;
  let load;
  // KeepAliveResponse { session_id = 1; ttl_ms_remaining = 2; expired = 3 }
  const onMessage = (b, at, end) => {
    let id;
    let expired = false;
    while (at < end) {
      const tag = b[at++];
      if (tag === 0x0a) {
        const [len, from] = readVarint(b, at);
        id = b.toString('latin1', from, from + len);
        at = from + len;
      } else if (tag === 0x18) {
        expired = b[at++] !== 0;
      } else at = skipField(b, tag, at);
    }
    const i = index.get(id);
    if (i !== undefined) load.ack(i, expired);
  };
  const onEnd = (e) => {
    if (e) {
      load.errors++;
      console.error(`a KeepAlive stream ended: ${e.message}`);
    }
  };
  const conns = fleet.proxyEndpoints.map((p, j) =>
    rawStreams(p, '/lockservice.v1.LockService/KeepAlive', Math.ceil((opts.streams - j) / proxiesN), onMessage, onEnd),
  );
  // Stream k is stream floor(k / proxies) of proxy k mod proxies: sessions spread evenly over both.
  load = keepAliveLoad(frames, opts.streams, (k, buf) => conns[k % proxiesN].write(Math.floor(k / proxiesN), buf));
  const leaders = await Promise.all(fleet.plan.map((c) => fleet.leaderOf(c.id)));
  const leaderIds = new Set(leaders.map((l) => l.nodeId));
  const pids = [
    ...[...fleet.children].map(([id, c]) => [
      fleet.plan.some((cell) => cell.replicas.some((r) => r.id === id)) ? `${id} (${leaderIds.has(id) ? 'leader' : 'follower'})` : id,
      c.pid,
    ]),
    ['bench client', process.pid],
  ];
  const snap = async () => ({
    commit: (await Promise.all(fleet.plan.map((c) => fleet.leaderOf(c.id)))).map((l) => l.commitIndex),
    batches: await Promise.all(fleet.proxies.map((p) => metricSum(p.metrics, /^fencer_proxy_batches_total\{[^}]*outcome="ok"\} (\d+)/gm))),
  });
  try {
    const m = await measure(load, pids, snap);
    const sum = (xs) => xs.reduce((a, b) => a + b, 0);
    return {
      ...m,
      openS,
      batchesPerS: (sum(m.after.batches) - sum(m.before.batches)) / m.spanS,
      logEntries: m.after.commit.map((c, i) => c - m.before.commit[i]),
    };
  } finally {
    await Promise.all(conns.map((c) => c.close()));
  }
}

// ---------------------------------------------------------------- etcd leases, the same load

async function etcdKeepAlives() {
  const { EtcdSystem, etcdVersion } = await import('./cell/etcd.mjs');
  const etcd = new EtcdSystem(5);
  await etcd.start();
  try {
    const t0 = performance.now();
    const leases = await etcd.openManySessions(opts.sessions, 600);
    const openS = (performance.now() - t0) / 1000;
    // LeaseKeepAliveRequest { int64 ID = 1 }; answers are matched by the ID's varint bytes.
    const idBytes = leases.map((id) => varint(id));
    const index = new Map(idBytes.map((b, i) => [b.toString('latin1'), i]));
    const frames = idBytes.map((b) => grpcFrame(Buffer.concat([Buffer.from([0x08]), b])));
    let load;
    // LeaseKeepAliveResponse { header = 1; int64 ID = 2; int64 TTL = 3 } (TTL 0: the lease is gone)
    const onMessage = (b, at, end) => {
      let key;
      let ttl = 0;
      while (at < end) {
        const tag = b[at++];
        if (tag === 0x10) {
          const next = readVarint(b, at)[1];
          key = b.toString('latin1', at, next);
          at = next;
        } else if (tag === 0x18) [ttl, at] = readVarint(b, at);
        else at = skipField(b, tag, at);
      }
      const i = index.get(key);
      if (i !== undefined) load.ack(i, ttl === 0);
    };
    const onEnd = (e) => {
      if (e) {
        load.errors++;
        console.error(`a LeaseKeepAlive stream ended: ${e.message}`);
      }
    };
    const leader = await etcd.leader();
    const conn = rawStreams(etcd.leaderEndpoint, '/etcdserverpb.Lease/LeaseKeepAlive', opts.streams, onMessage, onEnd);
    load = keepAliveLoad(frames, opts.streams, (k, buf) => conn.write(k, buf));
    const pids = [
      ...[...etcd.children].map(([name, c]) => [`${name}${name === leader.id ? ' (leader)' : ''}`, c.pid]),
      ['bench client', process.pid],
    ];
    try {
      const m = await measure(load, pids, async () => ({}));
      return { ...m, openS, version: etcdVersion() };
    } finally {
      await conn.close();
    }
  } finally {
    await etcd.stop();
  }
}

// ---------------------------------------------------------------- run

const fleet = await startTestFleet({
  cells: 2,
  replicas: opts.replicas,
  routers: 1,
  proxies: 2,
  routes: { bench: 'cell-1', 'hb-a': 'cell-1', 'hb-b': 'cell-2' },
  ...(opts.proxyIntervalMs !== undefined ? { heartbeatIntervalMs: opts.proxyIntervalMs } : {}),
});
let result;
try {
  const router = fleet.routerEndpoints[0];
  const sessions = [];
  for (let i = 0; i < 64; i++)
    sessions.push((await call(router, 'openSession', { clientId: 'bench', ttlMs: 600_000, namespace: 'bench' })).sessionId);
  const overhead = await routerOverhead(fleet, sessions);
  // Closed now, so that no expiry is logged while the heartbeats are measured.
  await Promise.all(sessions.map((sessionId) => call(router, 'closeSession', { sessionId })));
  const hb = await heartbeats(fleet);
  result = { overhead, hb };
} finally {
  for (const s of stubs.values()) s.close();
  await fleet.stop();
}
if (opts.etcd) {
  try {
    result.etcd = await etcdKeepAlives();
  } catch (e) {
    console.error(`etcd keepalives not measured: ${e.message}`);
  }
}

const { overhead: o, hb, etcd } = result;
const f1 = (x) => (x === undefined || Number.isNaN(x) ? 'n/a' : x.toFixed(2));
const n0 = (x) => Math.round(x).toLocaleString('en-US');
const proxyIntervalMs = opts.proxyIntervalMs ?? limits.HEARTBEAT_INTERVAL_MS_DEFAULT;
const batchBoundPerS = (2 * 2 * 1000) / proxyIntervalMs;
const cpuLine = (m, noun) =>
  m.cpu.map((c) => `${c.id} ${c.msPerS.toFixed(0)} (${c.usPerHeartbeat.toFixed(1)})`).join(', ') +
  `; all ${m.cpu.reduce((a, c) => a + c.msPerS, 0).toFixed(0)} ms/s of the machine's ${os.cpus().length * 1000} (${m.cpu.reduce((a, c) => a + c.usPerHeartbeat, 0).toFixed(1)} µs per ${noun})`;
const keepAliveFigures = (m) =>
  `offered ${n0(m.offeredPerS)}/s, acknowledged ${n0(m.ackedPerS)}/s during the ${opts.seconds} s window and ${n0(m.answeredPerS)}/s over the window and its drain (all ${n0(m.answered)} of ${n0(m.sent)} answered ${(m.drainMs / 1000).toFixed(1)} s after it${m.expired ? `, ${n0(m.expired)} expired` : ''}${m.errors ? `, ${m.errors} stream errors` : ''}), ack latency p50 ${f1(m.p50)} ms p99 ${f1(m.p99)} ms`;
const lines = [
  `Router overhead, 1 client (${n0(o.cycles)} acquire+release cycles per path after ${opts.warmupS} s of warm-up per path, the three paths taken in turn cycle by cycle): p50 direct ${f1(o.p50.direct)} ms, through the router ${f1(o.p50.router)} ms (+${f1(o.p50.router - o.p50.direct)} ms, ${(o.p50.router / o.p50.direct).toFixed(2)}x), through a byte pipe ${f1(o.p50.pipe)} ms (+${f1(o.p50.pipe - o.p50.direct)} ms: the floor, what any one more process on the path costs here); p99 ${f1(o.p99.direct)} / ${f1(o.p99.router)} / ${f1(o.p99.pipe)} ms. Median of the paired differences (each cycle against the direct cycle of its own pass): router +${f1(o.paired.router)} ms, pipe +${f1(o.paired.pipe)} ms, router over pipe +${f1(o.paired.routerOverPipe)} ms.`,
  `Router overhead, 64 clients (${opts.rounds} round(s) of ${opts.seconds} s per path, order alternating, medians): ${o.rate64.direct.toFixed(0)} cycles/s direct, ${o.rate64.router.toFixed(0)} through the router (${(o.rate64.router / o.rate64.direct).toFixed(2)}x), ${o.rate64.pipe.toFixed(0)} through the pipe (${(o.rate64.pipe / o.rate64.direct).toFixed(2)}x).`,
  `CPU per call (µs, 1 client / 64 clients): router ${o.routerUs.one.toFixed(0)} / ${o.routerUs.many.toFixed(0)}; cell-1's leader ${o.leaderUs.direct.one.toFixed(0)} / ${o.leaderUs.direct.many.toFixed(0)} for direct calls (gRPC), ${o.leaderUs.router.one.toFixed(0)} / ${o.leaderUs.router.many.toFixed(0)} for routed ones (the lane).`,
  `Heartbeats: ${opts.sessions.toLocaleString('en-US')} sessions (opened in ${hb.openS.toFixed(1)} s) on ${opts.streams} streams to 2 proxies, each every ${opts.intervalMs} ms: ${keepAliveFigures(hb)}; ${hb.batchesPerS.toFixed(1)} HeartbeatBatch calls/s at the leaders (bound: 2 proxies × 2 cells per ${proxyIntervalMs} ms = ${batchBoundPerS}/s); log entries written meanwhile ${hb.logEntries.join(' + ')}.`,
  `CPU per process, heartbeats (ms/s, and µs per heartbeat: the process's CPU over every heartbeat answered): ${cpuLine(hb, 'heartbeat')}.`,
  ...(etcd
    ? [
        `etcd lease KeepAlive, the same load (${opts.sessions.toLocaleString('en-US')} leases granted in ${etcd.openS.toFixed(1)} s, ${opts.streams} streams to the leader of 5 members, ${etcd.version}): ${keepAliveFigures(etcd)}.`,
        `CPU per process, etcd (ms/s, and µs per keepalive: the process's CPU over every keepalive answered): ${cpuLine(etcd, 'keepalive')}.`,
      ]
    : []),
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
    `Measured by \`node tools/bench/fleet-bench.mjs${args.length ? ` ${args.join(' ')}` : ''}\` on ${new Date().toISOString().slice(0, 10)}: Node ${process.version}, ${os.cpus().length} × ${os.cpus()[0]?.model ?? 'unknown CPU'}, load average ${loadAtStart.toFixed(1)} at the start and ${os.loadavg()[0].toFixed(1)} at the end; 2 cells × ${opts.replicas} replicas, 1 router, 2 proxies on 127.0.0.1, fsync on.`,
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
