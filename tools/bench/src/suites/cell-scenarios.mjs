// The cell suite's scenarios: each a title, the unit of its rate, and a
// run(system, opts) over the load generators of ../load, so every system
// meets exactly the same load.
import { closedLoop } from '../load/closed-loop.mjs';
import { failover } from '../load/failover.mjs';
import { openKeepAlives } from '../load/keepalive.mjs';
import { contended, reads, tryLockStorm, uncontended } from '../load/lock-cycles.mjs';
import { watchFanout } from '../load/watch.mjs';
import { CpuWindow, nowMs, sleep } from '../measure.mjs';

/** KeepAlive streams and heartbeats in flight per stream (closed loop). */
const KEEPALIVE_STREAMS = 16;
const KEEPALIVE_WINDOW = 64;
/** The heartbeat-batch load: proxies × batches in flight per proxy, sessions per batch. */
const BATCH_PROXIES = 4;
const BATCHES_IN_FLIGHT_PER_PROXY = 2;
const BATCH_SESSIONS = 500;
/** The keepalive scenarios' sessions live this long: the whole run. */
const KEEPALIVE_TTL_S = 3600;

export const SCENARIOS = {};

function scenario(key, title, unit, run) {
  SCENARIOS[key] = { key, title, unit, run };
}

for (const clients of [1, 16, 64, 256]) {
  const title = `uncontended acquire+release, distinct names, ${clients} client${clients > 1 ? 's' : ''}`;
  scenario(`uncontended-${clients}`, title, 'cycles/s', (system, opts) => uncontended(system, clients, opts));
}
scenario('contended-16', 'contended: 16 clients, one name, FIFO handoffs', 'handoffs/s', (system, opts) => contended(system, 16, opts));
scenario('trylock-64', 'try-lock storm: 64 clients on one held name', 'attempts/s', (system, opts) => tryLockStorm(system, 64, opts));
scenario('reads-64', 'linearizable reads: 64 clients (Fencer CheckToken, etcd Range serializable=false)', 'reads/s', (system, opts) =>
  reads(system, 64, opts),
);
scenario('keepalive-10000', 'session/lease keepalives, 10,000 sessions', 'keepalives/s', keepAlives);
scenario(
  'keepalive-batched-10000',
  'session keepalives through session-proxy batches (HeartbeatBatch), 10,000 sessions',
  'keepalives/s',
  heartbeatBatches,
);
scenario('watch-1000', 'watch fan-out: 1,000 watchers on one prefix, delivery latency', 'deliveries/s', (system, opts) =>
  watchFanout(system, { watchers: opts.watchers, ratePerS: opts.watchRate, seconds: opts.seconds }),
);
scenario('failover-16', 'leader failover under load (kill -9 of the leader, 16 clients)', 'ms unavailable', (system, opts) =>
  failover(system, { clients: 16, trials: opts.failoverTrials }),
);

/** The keepalive scenarios' sessions, opened and timed. */
async function openForKeepAlives(system, opts) {
  const t0 = nowMs();
  const ids = await system.openManySessions(opts.keepaliveSessions, KEEPALIVE_TTL_S);
  await system.leader();
  return { ids, openS: (nowMs() - t0) / 1000 };
}

const leaderShare = (c) =>
  c.leaderS === undefined
    ? ''
    : `; servers' CPU: leader ${(c.leaderS / c.wallS).toFixed(2)}, the rest ${((c.serverS - c.leaderS) / c.wallS).toFixed(2)} cores`;

/** Per-session KeepAlive messages, closed loop, on the raw-frame generator. */
async function keepAlives(system, opts) {
  const { ids, openS } = await openForKeepAlives(system, opts);
  const spread = opts.keepaliveTo === 'spread';
  const targets = system.keepAliveTargets(spread);
  const load = openKeepAlives({ targets, wire: system.keepAliveWire(), ids, streams: KEEPALIVE_STREAMS });
  const cpu = new CpuWindow(
    () => system.pids(),
    () => system.leaderPid?.(),
  );
  try {
    load.startWindow(KEEPALIVE_WINDOW);
    await sleep(opts.warmupS * 1000);
    const acked0 = load.acked;
    load.measuring = true;
    cpu.begin();
    await sleep(opts.seconds * 1000);
    const c = cpu.end();
    load.measuring = false;
    load.stopWindow();
    const acks = load.acked - acked0;
    const where = targets.length > 1 ? `spread over ${targets.length} endpoints` : 'all to one endpoint';
    return {
      ops: acks,
      rate: acks / c.wallS,
      p50: load.latency.pMs(50),
      p99: load.latency.pMs(99),
      failed: load.errors,
      cpu: c,
      note: `${ids.length.toLocaleString('en-US')} sessions opened in ${openS.toFixed(1)} s; ${KEEPALIVE_STREAMS} streams × ${KEEPALIVE_WINDOW} in flight, ${where}${load.expired ? `; ${load.expired} expired` : ''}${load.lastError ? `; last stream error: ${load.lastError.message}` : ''}${leaderShare(c)}`,
    };
  } finally {
    await load.close();
  }
}

/** HeartbeatBatch calls to the leader, as session proxies send them; latency per batch. */
async function heartbeatBatches(system, opts) {
  const { ids, openS } = await openForKeepAlives(system, opts);
  let next = 0;
  const batch = () => Array.from({ length: BATCH_SESSIONS }, () => ids[next++ % ids.length]);
  const r = await closedLoop(
    system,
    BATCH_PROXIES * BATCHES_IN_FLIGHT_PER_PROXY,
    opts,
    async () => {
      const t = nowMs();
      const answered = await system.heartbeatBatch(batch());
      return { latencyMs: nowMs() - t, answered };
    },
    (res) => res.answered,
  );
  return {
    ...r,
    note: `${ids.length.toLocaleString('en-US')} sessions opened in ${openS.toFixed(1)} s; ${BATCH_PROXIES} proxies × ${BATCHES_IN_FLIGHT_PER_PROXY} batches of ${BATCH_SESSIONS} in flight; latency is per batch`,
  };
}
