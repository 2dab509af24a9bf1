// What keeping a session alive costs the servers, per message, for every
// system at the same pace: Fencer's KeepAlive through the session proxies
// and etcd's LeaseKeepAlive (both from the raw-frame generator, open loop:
// every session once per interval, the answers owed awaited before the CPU
// counters are read), and ZooKeeper's session pings (idle sessions; the
// client library pings a third of the session timeout after its last
// traffic, and the servers' own `srvr` counters count what they received).
import { openKeepAlives } from './keepalive.mjs';
import { CpuWindow, nowMs, pool, sleep } from '../measure.mjs';

/** TTL of the sessions and leases kept alive: longer than the whole phase. */
const SESSION_TTL_S = 600;
/** ZooKeeper's smallest session timeout with tickTime 2000 ms (2 ticks): its client pings every third of it. */
export const ZK_SESSION_TIMEOUT_MS = 4000;
/** So every system is asked for the same pace: a message per session per this many ms. */
export const UPKEEP_INTERVAL_MS = Math.floor(ZK_SESSION_TIMEOUT_MS / 3);
/** ZooKeeper sessions are connected this many at a time. */
const ZK_CONNECT_WIDTH = 64;

/** Server CPU per message, in ms, and the share of the window: the pure part of every row. */
export function perMessage(cpu, messages) {
  return {
    cpuMsPerOp: messages > 0 ? (cpu.serverS * 1000) / messages : undefined,
    loadgenMsPerOp: messages > 0 ? (cpu.loadgenS * 1000) / messages : undefined,
  };
}

/**
 * KeepAlive messages at the upkeep pace on `streams` streams to `targets`
 * for the sessions `ids`; CPU over the window and the drain of its answers.
 */
async function keepAliveWindow(system, { ids, targets, streams, warmupS, seconds }) {
  const load = openKeepAlives({ targets, wire: system.keepAliveWire(), ids, streams });
  const cpu = new CpuWindow(() => system.pids());
  try {
    await load.runRate(warmupS, UPKEEP_INTERVAL_MS);
    await load.drain();
    const acked0 = load.acked;
    load.measuring = true;
    cpu.begin();
    const sent = await load.runRate(seconds, UPKEEP_INTERVAL_MS);
    await load.drain();
    const c = cpu.end();
    const answered = load.acked - acked0;
    return {
      ops: answered,
      rate: answered / c.wallS,
      offeredPerS: sent / seconds,
      p50: load.latency.pMs(50),
      p99: load.latency.pMs(99),
      failed: load.errors,
      expired: load.expired,
      cpu: c,
      ...perMessage(c, answered),
      note: `${ids.length.toLocaleString('en-US')} sessions, each every ${UPKEEP_INTERVAL_MS} ms on ${streams} streams to ${targets.length} endpoint${targets.length > 1 ? 's' : ''}${load.expired ? `; ${load.expired} expired` : ''}${load.lastError ? `; last stream error: ${load.lastError.message}` : ''}`,
    };
  } finally {
    await load.close();
  }
}

/** Fencer: sessions in `namespaces` opened through the routers, KeepAlive streams to the proxies. */
export async function fencerUpkeep(fleet, o) {
  const ids = await fleet.openManySessions(o.sessions, SESSION_TTL_S, fleet.tenants.heartbeat);
  return keepAliveWindow(fleet, { ...o, ids, targets: fleet.keepAliveTargets() });
}

/** etcd: leases granted at the leader, LeaseKeepAlive streams to it (as clientv3 does). */
export async function etcdUpkeep(etcd, o) {
  const ids = await etcd.openManySessions(o.sessions, SESSION_TTL_S);
  await etcd.leader();
  return keepAliveWindow(etcd, { ...o, ids, targets: etcd.keepAliveTargets(false) });
}

/** ZooKeeper: idle sessions pinging on their own connections; pings counted by the servers. */
export async function zkUpkeep(zk, o) {
  const conns = await pool(o.sessions, ZK_CONNECT_WIDTH, () => zk.newConn({ sessionTimeoutMs: ZK_SESSION_TIMEOUT_MS }));
  const cpu = new CpuWindow(() => zk.pids());
  try {
    await sleep(Math.max(o.warmupS * 1000, ZK_SESSION_TIMEOUT_MS));
    const received0 = await zk.packetsReceived();
    cpu.begin();
    const t0 = nowMs();
    await sleep(o.seconds * 1000);
    const c = cpu.end();
    const pings = (await zk.packetsReceived()) - received0;
    return {
      ops: pings,
      rate: pings / ((nowMs() - t0) / 1000),
      offeredPerS: o.sessions / (UPKEEP_INTERVAL_MS / 1000),
      failed: 0,
      cpu: c,
      ...perMessage(c, pings),
      note: `${o.sessions.toLocaleString('en-US')} idle sessions (session timeout ${ZK_SESSION_TIMEOUT_MS} ms: the client pings after ${UPKEEP_INTERVAL_MS} ms without traffic), each on its own connection to a server of the client's choosing; pings counted by the servers' srvr Received counters`,
    };
  } finally {
    for (const c of conns) {
      c.close();
      zk.conns.delete(c);
    }
  }
}
