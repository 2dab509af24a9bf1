// The fleet suite's heartbeats: N sessions (half per cell) heartbeat
// through the session proxies, each once per interval, spread evenly over
// it, on S KeepAlive streams (many sessions per stream, as the contract
// allows), from the raw-frame generator (../load/keepalive.mjs). After a
// warm-up, a measured window, then the answers still owed are awaited, so
// every heartbeat sent in the window is answered before the CPU counters
// are read: CPU per heartbeat is exact even when the machine cannot keep
// up. Also counted: HeartbeatBatch calls/s at the leaders (from the
// proxies' metrics) and the log entries written meanwhile (the leaders'
// commit indexes: heartbeats are never logged). etcd gets the same load as
// lease keepalives to the leader of five members.
import { openKeepAlives } from '../load/keepalive.mjs';
import { EtcdSystem, etcdVersion } from '../systems/etcd.mjs';
import { HEARTBEAT_NAMESPACES } from '../systems/fencer-fleet.mjs';
import { stopOnSignal } from '../processes.mjs';
import { cpuMsOf, nowMs } from '../measure.mjs';

/** TTL of the heartbeat load's sessions and leases: the whole phase. */
const SESSION_TTL_S = 600;

/**
 * Warm-up, then the measured window and the wait for its answers; `snap()`
 * reads the caller's counters before and after. CPU per heartbeat is CPU
 * over window+drain divided by the heartbeats answered.
 */
async function measure(load, pids, snap, o) {
  await load.runRate(o.hbWarmup, o.intervalMs);
  await load.drain();
  const before = await snap();
  const cpu0 = pids.map(([, pid]) => cpuMsOf(pid));
  const acked0 = load.acked;
  load.measuring = true;
  const t0 = nowMs();
  const sent = await load.runRate(o.seconds, o.intervalMs);
  const windowS = (nowMs() - t0) / 1000;
  const ackedInWindow = load.acked - acked0;
  const drainMs = await load.drain();
  load.measuring = false;
  const spanS = (nowMs() - t0) / 1000;
  const cpu1 = pids.map(([, pid]) => cpuMsOf(pid));
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
    p50: load.latency.pMs(50),
    p99: load.latency.pMs(99),
    expired: load.expired,
    errors: load.errors,
    lastError: load.lastError?.message,
    before,
    after,
    cpu: pids.map(([id], i) => ({
      id,
      msPerS: (cpu1[i] - cpu0[i]) / spanS,
      usPerHeartbeat: ((cpu1[i] - cpu0[i]) * 1000) / Math.max(1, answered),
    })),
  };
}

async function metricSum(url, re) {
  const text = await (await fetch(url)).text();
  let sum = 0;
  for (const m of text.matchAll(re)) sum += Number(m[1]);
  return sum;
}

const BATCHES_OK = /^fencer_proxy_batches_total\{[^}]*outcome="ok"\} (\d+)/gm;

/** Every process of a fleet by name (replicas marked leader or follower), and the bench client. */
async function fleetProcesses(fleet) {
  const leaders = new Set((await Promise.all(fleet.plan.map((c) => fleet.leaderOf(c.id)))).map((l) => l.leaderId));
  const replicaIds = new Set(fleet.plan.flatMap((c) => c.replicas.map((r) => r.id)));
  const named = [...fleet.children].map(([id, c]) => [
    replicaIds.has(id) ? `${id} (${leaders.has(id) ? 'leader' : 'follower'})` : id,
    c.pid,
  ]);
  return [...named, ['bench client', process.pid]];
}

/** Heartbeats through one fleet's proxies. */
export async function heartbeats(fleet, o) {
  const t0 = nowMs();
  const ids = await fleet.openManySessions(o.sessions, SESSION_TTL_S, HEARTBEAT_NAMESPACES);
  const openS = (nowMs() - t0) / 1000;
  const load = openKeepAlives({ targets: fleet.keepAliveTargets(), wire: fleet.keepAliveWire(), ids, streams: o.streams });
  const snap = async () => ({
    commit: (await Promise.all(fleet.plan.map((c) => fleet.leaderOf(c.id)))).map((l) => l.commitIndex),
    batches: await Promise.all(fleet.proxies.map((p) => metricSum(p.metrics, BATCHES_OK))),
  });
  try {
    const m = await measure(load, await fleetProcesses(fleet), snap, o);
    const sum = (xs) => xs.reduce((a, b) => a + b, 0);
    return {
      ...m,
      openS,
      batchesPerS: (sum(m.after.batches) - sum(m.before.batches)) / m.spanS,
      batchBoundPerS: (fleet.proxiesN * fleet.cellsN * 1000) / fleet.proxyIntervalMs,
      logEntries: m.after.commit.map((c, i) => c - m.before.commit[i]),
    };
  } finally {
    await load.close();
  }
}

/** The same load as etcd lease keepalives, to the leader of five members. */
export async function etcdKeepAlives(o) {
  const etcd = new EtcdSystem(5);
  const stopAll = stopOnSignal([etcd]);
  await etcd.start();
  try {
    const t0 = nowMs();
    const leases = await etcd.openManySessions(o.sessions, SESSION_TTL_S);
    const openS = (nowMs() - t0) / 1000;
    const leader = await etcd.leader();
    const load = openKeepAlives({ targets: etcd.keepAliveTargets(false), wire: etcd.keepAliveWire(), ids: leases, streams: o.streams });
    const pids = [
      ...[...etcd.children].map(([name, c]) => [`${name}${name === leader.id ? ' (leader)' : ''}`, c.pid]),
      ['bench client', process.pid],
    ];
    try {
      return { ...(await measure(load, pids, async () => ({}), o)), openS, version: etcdVersion() };
    } finally {
      await load.close();
    }
  } finally {
    await stopAll();
  }
}
