// The fleet-load suite (issue 32): a managed fleet of eight cells of five
// replicas with its control plane, routers and proxies, under a steady
// load (50,000 sessions heartbeating through the proxies and lock cycles
// over 16 tenants on all cells: throughput, p50/p99, CPU and RSS by
// component), then a reconnect storm (every proxy restarted at once: no
// session may expire; peak heartbeat and reopening rates, the leaders' CPU,
// time until heartbeats are steady again).
import { renderMarkdown, summaryRows, componentTable, stormFigures } from './fleet-load-report.mjs';
import { FencerManagedFleet, componentOf } from '../systems/fencer-managed.mjs';
import { openKeepAlives } from '../load/keepalive.mjs';
import { closeTenantClients, openTenantClients } from '../load/tenant-cycles.mjs';
import { cycle } from '../load/lock-cycles.mjs';
import { CpuWindow, histogram, nowMs, procCpuSeconds, procRssBytes, sleep } from '../measure.mjs';
import { common, count, listOption, numeric, resolve } from '../options.mjs';
import { stopOnSignal } from '../processes.mjs';
import { commandLine, machineMeta, writeDocs, writeJson } from '../report.mjs';
import { waitForPort } from '@fencer/fleet';
import os from 'node:os';

const PARTS = ['steady', 'storm'];
/** Sessions live this long: far longer than a proxy's restart, so an expiry means a heartbeat was lost. */
const SESSION_TTL_S = 60;
/** Sessions are opened this many at a time; between chunks, those open get a heartbeat if OPEN_REFRESH_MS passed since their last. */
const OPEN_CHUNK = 4_000;
/** Well inside SESSION_TTL_S: opening 50,000 sessions took 128 s on a lightly loaded run, twice the TTL. */
const OPEN_REFRESH_MS = 20_000;
const STORM_SAMPLE_MS = 100;
const STORM_BIN_MS = 500;
const PROXY_UP_WAIT_MS = 60_000;
/** A loop whose cycle failed waits this long before the next one. */
const FAILED_OP_PAUSE_MS = 50;
/** A run that began at a load average above this (per core) is labelled provisional. */
const QUIET_LOAD_PER_CORE = 0.5;

export function register(program) {
  const cmd = program
    .command('fleet-load')
    .description(
      'eight cells × five replicas with control plane, routers and proxies: heartbeats and locks at once, then every proxy restarted (reconnect storm)',
    );
  numeric(cmd, '--cells <n>', 'cells', 8, 2, count);
  numeric(cmd, '--replicas <n>', 'replicas per cell', 5, 3, count);
  numeric(cmd, '--routers <n>', 'routers', 1, 1, count);
  numeric(cmd, '--proxies <n>', 'session proxies', 2, 2, count);
  numeric(cmd, '--sessions <n>', 'sessions heartbeating through the proxies', 50_000, 2_000, count);
  numeric(cmd, '--interval-ms <n>', 'each session heartbeats once per this interval', 1000, 1000, count);
  numeric(cmd, '--streams <n>', 'KeepAlive streams, spread over the proxies', 64, 8, count);
  numeric(cmd, '--tenants <n>', 'tenants of the lock load, round robin over the cells', 16, 4, count);
  numeric(cmd, '--clients <n>', 'lock clients, spread over the tenants', 64, 16, count);
  numeric(cmd, '--seconds <n>', 'measured window of the steady load', 10, 3);
  numeric(cmd, '--warmup <n>', 'unmeasured seconds of load before the window', 5, 2);
  numeric(cmd, '--storm-seconds <n>', 'how long the storm is watched after the restart', 20, 8);
  cmd.addOption(listOption('--only <parts>', `what to measure: ${PARTS.join(', ')}`, PARTS));
  common(cmd);
  cmd.action(() => runFleetLoad(resolve(cmd)));
  return cmd;
}

/** pid → component, the cells' leaders apart from their followers. */
async function componentsNow(fleet) {
  const leaders = new Set(await fleet.leaderPids());
  return new Map(
    [...fleet.children].map(([id, c]) => [
      c.pid,
      leaders.has(c.pid) ? 'cell leaders' : componentOf(id) === 'cell replicas' ? 'cell followers' : componentOf(id),
    ]),
  );
}

/** Lock loops over the tenants until stop(); counts and latencies only while measuring. */
function lockLoops(list) {
  const h = histogram();
  const state = { ops: 0, failed: 0, measuring: false, done: false, latency: h };
  const loop = async ({ session, name }) => {
    while (!state.done) {
      try {
        const r = await cycle(session, name);
        if (!state.measuring) continue;
        state.ops++;
        h.record(r.latencyMs);
      } catch {
        state.failed++;
        await sleep(FAILED_OP_PAUSE_MS);
      }
    }
  };
  const loops = list.map(loop);
  state.stop = async () => {
    state.done = true;
    await Promise.all(loops);
  };
  return state;
}

async function steady(fleet, hb, o, opened) {
  const lockList = await openTenantClients(fleet, o.clients, fleet.tenants.lock, 'steady');
  const locks = lockLoops(lockList);
  const hbRun = hb.runRate(o.warmup + o.seconds, o.intervalMs);
  try {
    await sleep(o.warmup * 1000);
    const comps = await componentsNow(fleet);
    const cpu = new CpuWindow(() => fleet.pids());
    const acked0 = hb.acked;
    const sent0 = hb.sent;
    cpu.begin();
    hb.measuring = true;
    locks.measuring = true;
    await sleep(o.seconds * 1000);
    const c = cpu.end();
    locks.measuring = false;
    hb.measuring = false;
    const rss = Object.fromEntries(fleet.pids().map((pid) => [pid, procRssBytes(pid)]));
    const hbFig = {
      ackedPerS: (hb.acked - acked0) / c.wallS,
      offeredPerS: (hb.sent - sent0) / c.wallS,
      p50: hb.latency.pMs(50),
      p99: hb.latency.pMs(99),
      errors: hb.errors,
      expired: hb.expired,
    };
    const lock = { rate: locks.ops / c.wallS, p50: locks.latency.pMs(50), p99: locks.latency.pMs(99), failed: locks.failed };
    return {
      ...opened,
      hb: hbFig,
      lock,
      components: componentTable(c.perPid, rss, comps, c.wallS),
      machineCores: c.machineS / c.wallS,
      cores: os.cpus().length,
      lockTenants: fleet.tenants.lock,
      heartbeatTenants: fleet.tenants.heartbeat,
    };
  } finally {
    await hbRun;
    await locks.stop();
    await closeTenantClients(lockList);
  }
}

/** Samples the heartbeats acknowledged and the leaders' CPU every STORM_SAMPLE_MS until stop(). */
function sampler(t0, leaderPids, ackedFn) {
  const samples = [];
  const take = () =>
    samples.push({ t: nowMs() - t0, acked: ackedFn(), leaderCpuS: leaderPids.reduce((a, pid) => a + (procCpuSeconds(pid) ?? 0), 0) });
  take();
  const timer = setInterval(take, STORM_SAMPLE_MS);
  return {
    samples,
    stop: () => {
      clearInterval(timer);
      take();
    },
  };
}

async function storm(fleet, ids, hbBefore, o) {
  const leaderPids = await fleet.leaderPids();
  let load;
  const t0 = nowMs();
  const s = sampler(t0, leaderPids, () => load?.acked ?? 0);
  try {
    await hbBefore.close();
    await Promise.all(fleet.proxies.map((p) => fleet.fleet.kill(p.id, 'SIGTERM')));
    fleet.proxies.forEach((p) => fleet.fleet.restart(p.id));
    await Promise.all(fleet.proxies.map((p) => waitForPort(p.grpc, PROXY_UP_WAIT_MS)));
    const upMs = nowMs() - t0;
    load = openKeepAlives({ targets: fleet.keepAliveTargets(), wire: fleet.keepAliveWire(), ids, streams: o.streams });
    // Every session's heartbeat at once (one pace step), as clients that reconnect send what they owe; then the interval.
    await load.runRate(0.01, 10);
    await load.runRate(o.stormSeconds - upMs / 1000, o.intervalMs);
    s.stop();
    await load.drain();
    const offeredPerS = ids.length / (o.intervalMs / 1000);
    return {
      upMs,
      sampleMs: STORM_SAMPLE_MS,
      binMs: STORM_BIN_MS,
      offeredPerS,
      expired: load.expired,
      errors: load.errors,
      figures: stormFigures(s.samples, { sessions: ids.length, offeredPerS, binMs: STORM_BIN_MS }),
    };
  } finally {
    s.stop();
    await load?.close();
  }
}

/**
 * Opens o.sessions sessions over the heartbeat tenants, a chunk at a time,
 * sending each one already open a heartbeat whenever OPEN_REFRESH_MS passed
 * since the last round: as real clients do from the moment they open, so no
 * session lapses while the rest are still opening.
 */
async function openKeptAlive(fleet, o) {
  const ids = [];
  let refreshedAt = nowMs();
  while (ids.length < o.sessions) {
    ids.push(...(await fleet.openManySessions(Math.min(OPEN_CHUNK, o.sessions - ids.length), SESSION_TTL_S, fleet.tenants.heartbeat)));
    if (nowMs() - refreshedAt < OPEN_REFRESH_MS || ids.length === o.sessions) continue;
    refreshedAt = nowMs();
    const round = openKeepAlives({ targets: fleet.keepAliveTargets(), wire: fleet.keepAliveWire(), ids: [...ids], streams: o.streams });
    try {
      await round.runRate(0.01, 10);
      await round.drain();
      if (round.expired > 0) throw new Error(`${round.expired} sessions expired while the others were opened`);
    } finally {
      await round.close();
    }
  }
  return ids;
}

export async function runFleetLoad(o) {
  const unknown = o.only.filter((p) => !PARTS.includes(p));
  if (unknown.length) throw new Error(`--only ${unknown.join(',')}: use ${PARTS.join(', ')}`);
  const meta = Object.assign(machineMeta(), { command: commandLine(), opts: o });
  meta.provisional = Number(meta.loadStart.split(' / ')[0]) > QUIET_LOAD_PER_CORE * meta.cores;
  const fleet = new FencerManagedFleet({
    cells: o.cells,
    replicas: o.replicas,
    routers: o.routers,
    proxies: o.proxies,
    lockTenants: o.tenants,
    label: `Fencer fleet, ${o.cells} cells of ${o.replicas}`,
  });
  const stopAll = stopOnSignal([fleet]);
  const result = { errors: [] };
  try {
    process.stdout.write(`starting ${fleet.label} … `);
    const t = nowMs();
    await fleet.start();
    console.log(`up in ${((nowMs() - t) / 1000).toFixed(1)} s`);
    meta.fleet = { label: fleet.label, version: fleet.version, settings: fleet.settings, cells: o.cells, replicas: o.replicas };
    const t1 = nowMs();
    const ids = await openKeptAlive(fleet, o);
    const opened = { openS: (nowMs() - t1) / 1000 };
    const hb = openKeepAlives({ targets: fleet.keepAliveTargets(), wire: fleet.keepAliveWire(), ids, streams: o.streams });
    if (o.only.includes('steady'))
      result.steady = await steady(fleet, hb, o, opened).catch((e) => void result.errors.push(`steady: ${e.stack ?? e}`));
    else await hb.runRate(o.warmup, o.intervalMs);
    console.log('steady done');
    if (o.only.includes('storm'))
      result.storm = await storm(fleet, ids, hb, o).catch((e) => void result.errors.push(`storm: ${e.stack ?? e}`));
    else await hb.close();
  } finally {
    meta.end();
    await stopAll();
  }
  const body = renderMarkdown(meta, result, o);
  console.log(body);
  if (o.json) writeJson(o.json, { meta, result });
  const whole = PARTS.every((p) => o.only.includes(p)) && result.errors.length === 0;
  if (o.write && !whole) console.log('docs/benchmarks.md left as it is: only a whole run without failures rewrites the fleet-load section');
  writeDocs({ name: 'fleet-load', body, rows: summaryRows(meta, result, o), keepNotes: true, write: o.write && whole });
}
