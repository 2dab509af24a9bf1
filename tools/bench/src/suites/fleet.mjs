// The fleet suite: a fresh local fleet (cells of replicas, a router, session
// proxies; 127.0.0.1, fsync on) measured for what its front ends cost:
// router overhead (./fleet-overhead.mjs) and heartbeats through the proxies
// against etcd lease keepalives (./fleet-heartbeats.mjs), side by side in
// one run. With --baseline, a second fleet from another checkout is
// measured in the same run: its paths interleaved with this build's, and
// its heartbeats after this build's.
import { routerOverhead, MANY_CLIENTS } from './fleet-overhead.mjs';
import { etcdKeepAlives, heartbeats } from './fleet-heartbeats.mjs';
import { FencerFleet, PROXY_HEARTBEAT_INTERVAL_MS } from '../systems/fencer-fleet.mjs';
import { otherBuild } from '../systems/builds.mjs';
import { baseline, common, count, listOption, numeric, resolve } from '../options.mjs';
import { commandLine, fmt, machineMeta, markdownTable, writeDocs, writeJson } from '../report.mjs';
import { stopOnSignal } from '../processes.mjs';
import { existsSync } from 'node:fs';

const PARTS = ['overhead', 'heartbeats'];

export function register(program) {
  const cmd = program
    .command('fleet')
    .description('router overhead (direct, router, byte pipe) and heartbeats through the session proxies against etcd leases, one fleet');
  numeric(cmd, '--replicas <n>', 'replicas per cell', 5, 3, count);
  numeric(cmd, '--seconds <n>', 'measured window of each round and of the heartbeats', 8, 2);
  numeric(cmd, '--rounds <n>', 'router-overhead rounds per path, order alternating', 3, 1, count);
  numeric(cmd, '--warmup <n>', 'unmeasured seconds per path before the overhead rounds', 5, 1);
  numeric(cmd, '--sessions <n>', 'sessions (and etcd leases) kept alive', 50_000, 2_000, count);
  numeric(cmd, '--streams <n>', 'KeepAlive streams, spread over the proxies', 64, 8, count);
  numeric(cmd, '--interval-ms <n>', 'each session heartbeats once per this interval', 1000, 1000, count);
  numeric(cmd, '--hb-warmup <n>', 'unmeasured seconds of heartbeats before the window', 5, 1);
  numeric(
    cmd,
    '--proxy-interval-ms <n>',
    "the proxies' HeartbeatBatch interval (the bench's choice, passed to every proxy)",
    PROXY_HEARTBEAT_INTERVAL_MS,
  );
  cmd
    .addOption(listOption('--only <parts>', `what to measure: ${PARTS.join(', ')}`, PARTS))
    .option('--via-follower', 'one more path: calls to a follower, which forwards them to its leader')
    .option('--no-etcd', 'skip the etcd lease keepalives')
    .option('--keep-data', "keep the fleets' data directories")
    .option('--cpu-prof <dir>', "write V8 CPU profiles of this build's session proxies here (summarise them with the profile suite)");
  baseline(cmd, "a second fleet from it, its router and direct paths interleaved with this build's");
  common(cmd);
  cmd.action(() => runFleet(resolve(cmd)));
  return cmd;
}

async function startFleets(o, started) {
  const withHeartbeats = o.only.includes('heartbeats');
  const shape = {
    cells: withHeartbeats ? 2 : 1,
    replicas: o.replicas,
    proxies: withHeartbeats ? 2 : 0,
    proxyIntervalMs: o.proxyIntervalMs,
    keepData: o.keepData,
  };
  const fleets = [new FencerFleet({ ...shape, proxyCpuProfDir: o.cpuProf })];
  if (o.baseline) fleets.push(new FencerFleet({ ...shape, build: otherBuild(o.baseline, o.baselineLabel), key: 'baseline' }));
  for (const f of fleets) {
    process.stdout.write(`starting the fleet of ${f.build.label} … `);
    started.push(f);
    await f.start();
    console.log('up');
  }
  return fleets;
}

export async function runFleet(o) {
  const unknown = o.only.filter((p) => !PARTS.includes(p));
  if (unknown.length) throw new Error(`--only ${unknown.join(',')}: use ${PARTS.join(', ')}`);
  const meta = Object.assign(machineMeta(), { command: commandLine(), opts: o });
  const started = [];
  const stopAll = stopOnSignal(started);
  const result = {};
  try {
    const fleets = await startFleets(o, started);
    meta.fleets = fleets.map((f) => ({ key: f.key, label: f.build.label, version: f.version, settings: f.settings }));
    if (o.only.includes('overhead')) result.overhead = await routerOverhead(fleets, o);
    if (o.only.includes('heartbeats')) result.heartbeats = [];
    for (const f of o.only.includes('heartbeats') ? fleets : [])
      result.heartbeats.push({ fleet: f.build.label, ...(await heartbeats(f, o)) });
  } finally {
    await stopAll();
  }
  if (o.only.includes('heartbeats') && o.etcd && existsSync(process.env.ETCD_BIN ?? '/usr/bin/etcd'))
    result.etcd = await etcdKeepAlives(o).catch((e) => ({ error: e.message }));
  meta.end();
  const body = renderMarkdown(meta, result, o);
  console.log(body);
  if (o.json) writeJson(o.json, { meta, result });
  // The docs' fleet section holds a whole run: a run of some parts, or one with a baseline fleet beside
  // this one (a different shape), prints its figures and leaves the section as it is.
  const whole = PARTS.every((p) => o.only.includes(p)) && o.baseline === undefined;
  if (o.write && !whole) console.log('docs/benchmarks.md left as it is: only a whole run without --baseline rewrites the fleet section');
  writeDocs({ name: 'fleet', body, rows: summaryRows(result, meta.command), keepNotes: true, write: o.write && whole });
}

const ms2 = (x) => (x === undefined || !Number.isFinite(x) ? '—' : `${x.toFixed(2)} ms`);
const signedMs = (x) => (x === undefined || !Number.isFinite(x) ? '' : `${x >= 0 ? '+' : ''}${x.toFixed(2)} ms`);
const us = (x) => (x === undefined || !Number.isFinite(x) ? '—' : `${Math.round(x)}`);

function overheadTable(ov) {
  const byLabel = Object.fromEntries(ov.perPath.map((p) => [p.label, p]));
  const rows = ov.perPath.map((p) => {
    const ref = byLabel[p.reference];
    return [
      p.label,
      ms2(p.p50),
      ms2(p.p99),
      p.pairedMs === undefined ? '' : `${signedMs(p.pairedMs)} against ${p.reference}`,
      `${fmt.int(p.rate64)}${p.label === p.reference ? '' : ` (${fmt.ratio(p.rate64, ref.rate64)})`}`,
      `${us(p.viaUs.one)} / ${us(p.viaUs.many)} µs`,
      `${us(p.leaderUs.one)} / ${us(p.leaderUs.many)} µs`,
    ];
  });
  const head = [
    'path',
    'p50, 1 client',
    'p99, 1 client',
    'paired median difference',
    `cycles/s, ${MANY_CLIENTS} clients`,
    'CPU per call of the process between, 1 / 64 clients',
    "cell-1 leader's CPU per call, 1 / 64 clients",
  ];
  return markdownTable(head, rows, ['l', 'r', 'r', 'l', 'r', 'r', 'r']);
}

function overheadSection(ov, o) {
  const cycles = ov.perPath[0]?.cycles ?? 0;
  return [
    '### Router overhead',
    '',
    `Acquire+release cycles on cell-1's leader. One client took the paths in turn, cycle by cycle (${fmt.int(cycles)} cycles per path, after ${o.warmup} s of warm-up per path): p50 and p99 of a cycle, and the median of each cycle's difference from the reference path's cycle of the same pass. ${MANY_CLIENTS} clients: ${o.rounds} round(s) of ${o.seconds} s per path, order alternating, medians. CPU per call (a cycle is two calls) from /proc: of the process between client and leader (router, pipe or follower), and of the leader.`,
    '',
    overheadTable(ov),
    '',
    `Router over the byte pipe, paired: ${signedMs(ov.routerOverPipeMs)}.${ov.routerVsBaselineMs === undefined ? '' : ` This build's router against the baseline's, paired: ${signedMs(ov.routerVsBaselineMs)}.`}`,
    '',
  ];
}

function keepAliveFigures(m, o) {
  return `offered ${fmt.int(m.offeredPerS)}/s, acknowledged ${fmt.int(m.ackedPerS)}/s during the ${o.seconds} s window and ${fmt.int(m.answeredPerS)}/s over the window and its drain (${fmt.int(m.answered)} of ${fmt.int(m.sent)} answered ${(m.drainMs / 1000).toFixed(1)} s after it${m.expired ? `, ${fmt.int(m.expired)} expired` : ''}${m.errors ? `, ${m.errors} stream errors (${m.lastError})` : ''}), ack latency p50 ${ms2(m.p50)} p99 ${ms2(m.p99)}`;
}

function cpuLine(m, noun, cores) {
  const all = m.cpu.reduce((a, c) => a + c.msPerS, 0);
  const per = m.cpu.reduce((a, c) => a + c.usPerHeartbeat, 0);
  // The servers alone, without the load generator: what the heartbeat target (issue 33: at most 10 µs) counts.
  const servers = m.cpu.filter((c) => c.id !== 'bench client').reduce((a, c) => a + c.usPerHeartbeat, 0);
  return `${m.cpu.map((c) => `${c.id} ${c.msPerS.toFixed(0)} (${c.usPerHeartbeat.toFixed(1)})`).join(', ')}; all ${all.toFixed(0)} ms/s of the machine's ${cores * 1000} (${per.toFixed(1)} µs per ${noun}; the servers without the bench client ${servers.toFixed(1)} µs)`;
}

function heartbeatSection(result, o, cores) {
  const lines = ['### Heartbeats through the session proxies', ''];
  for (const hb of result.heartbeats) {
    lines.push(
      `${hb.fleet}: ${fmt.int(o.sessions)} sessions (opened in ${hb.openS.toFixed(1)} s) on ${o.streams} streams to the proxies, each every ${o.intervalMs} ms: ${keepAliveFigures(hb, o)}; ${hb.batchesPerS.toFixed(1)} HeartbeatBatch calls/s at the leaders (bound: proxies × cells per ${o.proxyIntervalMs} ms = ${hb.batchBoundPerS}/s); log entries written meanwhile ${hb.logEntries.join(' + ')}.`,
      '',
      `CPU per process (ms/s, and µs per heartbeat: the process's CPU over every heartbeat answered): ${cpuLine(hb, 'heartbeat', cores)}.`,
      '',
    );
  }
  const etcd = result.etcd;
  if (etcd?.error) lines.push(`etcd lease keepalives not measured: ${etcd.error}.`, '');
  else if (etcd)
    lines.push(
      `etcd lease KeepAlive, the same load (${fmt.int(o.sessions)} leases granted in ${etcd.openS.toFixed(1)} s, ${o.streams} streams to the leader of 5 members, ${etcd.version}): ${keepAliveFigures(etcd, o)}.`,
      '',
      `CPU per process, etcd: ${cpuLine(etcd, 'keepalive', cores)}.`,
      '',
    );
  return lines;
}

export function renderMarkdown(meta, result, o) {
  return [
    '## Fleet: router overhead and batched heartbeats',
    '',
    `Measured by \`${meta.command}\` on ${meta.date.slice(0, 10)}: Node ${meta.node}, ${meta.cpu}, load average ${meta.loadStart} at the start and ${meta.loadEnd} at the end.`,
    '',
    ...meta.fleets.map((f) => `- **${f.label}** (${f.version}): ${f.settings}.`),
    '',
    ...(result.overhead ? overheadSection(result.overhead, o) : []),
    ...(result.heartbeats ? heartbeatSection(result, o, meta.cores) : []),
  ].join('\n');
}

/** The summary's rows: this build's router against direct, and its heartbeats against etcd's. */
export function summaryRows(result, command) {
  const rows = [];
  const ov = result.overhead?.perPath;
  const at = (label) => ov?.find((p) => p.label === label);
  if (at('router')) {
    const [d, r] = [at('direct'), at('router')];
    rows.push(
      {
        id: 'fleet-router-1',
        figure: 'Fleet: 1 client, acquire+release p50, direct / through the router (paired difference)',
        value: `${ms2(d.p50)} / ${ms2(r.p50)} (${signedMs(r.pairedMs)})`,
        command,
      },
      {
        id: 'fleet-router-64',
        figure: `Fleet: ${MANY_CLIENTS} clients, cycles/s through the router / direct`,
        value: `${fmt.int(r.rate64)} / ${fmt.int(d.rate64)} (${fmt.ratio(r.rate64, d.rate64)})`,
        command,
      },
    );
  }
  const hb = result.heartbeats?.[0];
  if (hb) {
    const value = `${fmt.int(hb.ackedPerS)} acknowledged of ${fmt.int(hb.offeredPerS)} offered; ${hb.logEntries.reduce((a, b) => a + b, 0)} log entries`;
    rows.push({ id: 'fleet-heartbeats', figure: 'Fleet: heartbeats/s through 2 proxies (each session every interval)', value, command });
  }
  if (hb && result.etcd && !result.etcd.error) {
    const per = (m) => m.cpu.reduce((a, c) => a + c.usPerHeartbeat, 0).toFixed(1);
    rows.push({
      id: 'fleet-heartbeat-cpu',
      figure: 'Fleet: CPU per heartbeat, whole fleet / etcd per lease keepalive, same load',
      value: `${per(hb)} / ${per(result.etcd)} µs`,
      command,
    });
  }
  return rows;
}
