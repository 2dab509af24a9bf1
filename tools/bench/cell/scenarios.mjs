// The scenarios, written once against the small interface every system
// offers (openSession → lock / tryLock / unlock / read / close, plus
// keepalive streams and prefix watches), so every system meets exactly the
// same load generator: one Node process, N concurrent client loops.
import { CpuWindow, histogram, nowMs, pool, sleep } from './common.mjs';

/**
 * Runs `clients` loops of `op(i, record)` for a warm-up then a measured
 * window. `op` resolves with the latency (ms) to record, or undefined.
 * Ops completing inside the window count.
 */
async function closedLoop(system, clients, { warmupS, seconds }, op) {
  const h = histogram();
  const cpu = new CpuWindow(() => system.pids());
  let phase = 'warmup';
  let ops = 0;
  let errors = 0;
  let lastError;
  const loop = async (i) => {
    while (phase !== 'done') {
      try {
        const lat = await op(i);
        if (phase === 'measure') {
          ops++;
          if (lat !== undefined) h.record(lat);
        }
      } catch (e) {
        errors++;
        lastError = e;
        await sleep(50);
      }
    }
  };
  const loops = Array.from({ length: clients }, (_, i) => loop(i));
  await sleep(warmupS * 1000);
  const failures0 = system.failures;
  phase = 'measure';
  cpu.begin();
  await sleep(seconds * 1000);
  const c = cpu.end();
  phase = 'done';
  const failed = system.failures - failures0;
  await Promise.all(loops);
  if (errors > 0) console.warn(`  ${system.key}: ${errors} operations failed outright (last: ${lastError?.message ?? lastError})`);
  return { ops, rate: ops / c.wallS, p50: h.pMs(50), p99: h.pMs(99), failed: failed + errors, cpu: c };
}

async function openSessions(system, n, ttlS = 300) {
  return pool(n, 64, () => system.openSession(ttlS));
}

async function closeSessions(sessions) {
  await pool(sessions.length, 64, (i) => sessions[i].close());
}

export const SCENARIOS = {};

function scenario(key, title, unit, run) {
  SCENARIOS[key] = { key, title, unit, run };
}

for (const clients of [1, 16, 64, 256]) {
  scenario(
    `uncontended-${clients}`,
    `uncontended acquire+release, distinct names, ${clients} client${clients > 1 ? 's' : ''}`,
    'cycles/s',
    async (system, opts) => {
      const sessions = await openSessions(system, clients);
      try {
        return await closedLoop(system, clients, opts, async (i) => {
          const s = sessions[i];
          const t0 = nowMs();
          const h = await s.lock(system.lockName(`u${clients}/c${i}`));
          const lat = nowMs() - t0;
          await s.unlock(h);
          return lat;
        });
      } finally {
        await closeSessions(sessions);
      }
    },
  );
}

scenario('contended-16', 'contended: 16 clients, one name, FIFO handoffs', 'handoffs/s', async (system, opts) => {
  const sessions = await openSessions(system, 16);
  const name = system.lockName('contended/one');
  try {
    const r = await closedLoop(system, 16, opts, async (i) => {
      const s = sessions[i];
      const t0 = nowMs();
      const h = await s.lock(name);
      const lat = nowMs() - t0;
      await s.unlock(h);
      return lat;
    });
    r.note = 'latency = wait for the grant';
    return r;
  } finally {
    await closeSessions(sessions);
  }
});

scenario('trylock-64', 'try-lock storm: 64 clients on one held name', 'attempts/s', async (system, opts) => {
  const holder = await system.openSession(300);
  const name = system.lockName('storm/held');
  const held = await holder.lock(name);
  const sessions = await openSessions(system, 64);
  let granted = 0;
  try {
    const r = await closedLoop(system, 64, opts, async (i) => {
      const t0 = nowMs();
      const h = await sessions[i].tryLock(name);
      if (h) {
        granted++;
        await sessions[i].unlock(h);
      }
      return nowMs() - t0;
    });
    if (granted > 0) r.note = `${granted} try-locks were GRANTED on a held lock (a bug)`;
    return r;
  } finally {
    await closeSessions(sessions);
    await holder.unlock(held).catch(() => {});
    await holder.close();
  }
});

scenario(
  'reads-64',
  'linearizable reads: 64 clients (Fencer CheckToken, etcd Range serializable=false)',
  'reads/s',
  async (system, opts) => {
    const holder = await system.openSession(300);
    const held = await holder.lock(system.lockName('reads/held'));
    const sessions = await openSessions(system, 64);
    try {
      return await closedLoop(system, 64, opts, async (i) => {
        const t0 = nowMs();
        await sessions[i].read(held);
        return nowMs() - t0;
      });
    } finally {
      await closeSessions(sessions);
      await holder.unlock(held).catch(() => {});
      await holder.close();
    }
  },
);

/** The keepalive scenarios' start: their sessions (timed), a latency histogram and a CPU window. */
async function openForKeepalives(system, opts) {
  const sessionsN = opts.keepaliveSessions ?? 10_000;
  const t0 = nowMs();
  const ids = await system.openManySessions(sessionsN, 3600);
  return { sessionsN, ids, openS: (nowMs() - t0) / 1000, h: histogram(), cpu: new CpuWindow(() => system.pids()) };
}

scenario('keepalive-10000', 'session/lease keepalives, 10,000 sessions', 'keepalives/s', async (system, opts) => {
  const streamsN = 16;
  const windowPerStream = 64;
  const { sessionsN, ids, openS, h, cpu } = await openForKeepalives(system, opts);
  let phase = 'warmup';
  let acks = 0;
  let next = 0;
  let streamErrors = 0;
  const streams = [];
  for (let k = 0; k < streamsN; k++) {
    const sent = [];
    let stream;
    const send = () => {
      if (phase === 'done') return;
      sent.push(nowMs());
      stream.send(ids[next++ % ids.length]);
    };
    stream = system.keepAliveStream(
      () => {
        const at = sent.shift();
        if (phase === 'measure') {
          acks++;
          if (at !== undefined) h.record(nowMs() - at);
        }
        send();
      },
      () => streamErrors++,
    );
    streams.push(stream);
    for (let w = 0; w < windowPerStream; w++) send();
  }
  await sleep(opts.warmupS * 1000);
  const failures0 = system.failures;
  phase = 'measure';
  cpu.begin();
  await sleep(opts.seconds * 1000);
  const c = cpu.end();
  phase = 'done';
  for (const s of streams) s.close();
  await sleep(200);
  return {
    ops: acks,
    rate: acks / c.wallS,
    p50: h.pMs(50),
    p99: h.pMs(99),
    failed: system.failures - failures0 + streamErrors,
    cpu: c,
    note: `${sessionsN.toLocaleString('en-US')} sessions opened in ${openS.toFixed(1)} s; ${streamsN} streams × ${windowPerStream} in flight`,
  };
});

scenario(
  'keepalive-batched-10000',
  'session keepalives through session-proxy batches (HeartbeatBatch), 10,000 sessions',
  'keepalives/s',
  async (system, opts) => {
    const proxies = 4;
    const batchSessions = 500;
    const inFlightPerProxy = 2;
    const { sessionsN, ids, openS, h, cpu } = await openForKeepalives(system, opts);
    let phase = 'warmup';
    let acks = 0;
    let next = 0;
    let errors = 0;
    const loop = async () => {
      while (phase !== 'done') {
        const batch = [];
        for (let i = 0; i < batchSessions; i++) batch.push(ids[next++ % ids.length]);
        const t = nowMs();
        try {
          const n = await system.heartbeatBatch(batch);
          if (phase === 'measure') {
            acks += n;
            h.record(nowMs() - t);
          }
        } catch {
          errors++;
          await sleep(20);
        }
      }
    };
    const loops = Array.from({ length: proxies * inFlightPerProxy }, loop);
    await sleep(opts.warmupS * 1000);
    phase = 'measure';
    cpu.begin();
    await sleep(opts.seconds * 1000);
    const c = cpu.end();
    phase = 'done';
    await Promise.all(loops);
    return {
      ops: acks,
      rate: acks / c.wallS,
      p50: h.pMs(50),
      p99: h.pMs(99),
      failed: errors,
      cpu: c,
      note: `${sessionsN.toLocaleString('en-US')} sessions opened in ${openS.toFixed(1)} s; ${proxies} proxies × ${inFlightPerProxy} batches of ${batchSessions} in flight; latency is per batch`,
    };
  },
);

scenario('watch-1000', 'watch fan-out: 1,000 watchers on one prefix, delivery latency', 'deliveries/s', async (system, opts) => {
  const watchersN = opts.watchers ?? 1000;
  const ratePerS = opts.watchWriteRate ?? 10;
  const prefix = system.lockName('watched/');
  const issued = new Map();
  const h = histogram();
  let delivered = 0;
  let measuring = false;
  let k = 0;
  // key: the name or key the event is about; null when the system only says "something changed" (ZooKeeper): the latest grant.
  const onEvent = (key) => {
    const m = key === null ? [null, String(k)] : /\/n(\d+)(\/|$)/.exec(key.slice(prefix.length - 1));
    if (!m) return;
    const at = issued.get(Number(m[1]));
    if (at === undefined || !measuring) return;
    delivered++;
    h.record(nowMs() - at);
  };
  const watches = await pool(watchersN, 50, (i) => system.watch(i, prefix, onEvent));
  const writer = await system.openSession(300);
  const cpu = new CpuWindow(() => system.pids());
  const failures0 = system.failures;
  try {
    measuring = true;
    cpu.begin();
    const until = nowMs() + opts.seconds * 1000;
    while (nowMs() < until) {
      const tick = nowMs();
      k++;
      issued.set(k, nowMs());
      const held = await writer.lock(`${prefix}n${k}`);
      await writer.unlock(held);
      const rest = 1000 / ratePerS - (nowMs() - tick);
      if (rest > 0) await sleep(rest);
    }
    await sleep(1000); // stragglers
    const c = cpu.end();
    measuring = false;
    const expected = k * watchersN;
    return {
      ops: delivered,
      rate: delivered / c.wallS,
      p50: h.pMs(50),
      p99: h.pMs(99),
      failed: system.failures - failures0,
      cpu: c,
      note: `${k} grants at ${ratePerS}/s × ${watchersN} watchers: ${delivered.toLocaleString('en-US')} of ${expected.toLocaleString('en-US')} delivered; latency from the writer's acquire call to each watcher`,
    };
  } finally {
    for (const w of watches) w.close();
    await writer.close();
  }
});

scenario('failover-16', 'leader failover under load (kill -9 of the leader, 16 clients)', 'ms unavailable', async (system, opts) => {
  const clients = 16;
  const trials = opts.failoverTrials ?? 2;
  const sessions = await openSessions(system, clients);
  const results = [];
  const cpu = new CpuWindow(() => system.pids());
  let running = true;
  let okBeforeKill = 0;
  let killedAt = Infinity;
  let firstOkAfterKill = Infinity;
  const loop = async (i) => {
    let n = 0;
    while (running) {
      try {
        const h = await sessions[i].lock(system.lockName(`failover/c${i}/n${n++ % 4}`));
        const end = nowMs();
        if (h.startedMs >= killedAt && end < firstOkAfterKill) firstOkAfterKill = end;
        if (killedAt === Infinity) okBeforeKill++;
        await sessions[i].unlock(h);
      } catch {
        await sleep(20);
      }
    }
  };
  try {
    cpu.begin();
    const loops = Array.from({ length: clients }, (_, i) => loop(i));
    for (let t = 0; t < trials; t++) {
      await sleep(3000);
      const failures0 = system.failures;
      okBeforeKill = 0;
      const calm0 = nowMs();
      await sleep(1000);
      const rateBefore = okBeforeKill / ((nowMs() - calm0) / 1000);
      firstOkAfterKill = Infinity;
      const { killedAtMs, id } = await system.killLeader();
      killedAt = killedAtMs;
      const until = killedAtMs + 30_000;
      while (firstOkAfterKill === Infinity && nowMs() < until) await sleep(20);
      await sleep(2000);
      results.push({ unavailableMs: firstOkAfterKill - killedAtMs, failed: system.failures - failures0, killed: id, rateBefore });
      killedAt = Infinity;
      await system.restartKilled();
    }
    running = false;
    await Promise.all(loops);
  } finally {
    running = false;
    await closeSessions(sessions);
  }
  const c = cpu.end();
  const worst = Math.max(...results.map((r) => r.unavailableMs));
  return {
    ops: results.length,
    rate: undefined,
    unavailableMs: worst,
    trials: results,
    p50: undefined,
    p99: undefined,
    failed: results.reduce((a, r) => a + r.failed, 0),
    cpu: c,
    note: `unavailable ${results.map((r) => `${Math.round(r.unavailableMs)} ms`).join(', ')} (kill → first acquire sent after the kill succeeds); ~${Math.round(results[0]?.rateBefore ?? 0)} cycles/s before the kill`,
  };
});
