// The watch-fanout suite: W watchers of one prefix, one writer making G
// grants under it (acquire + release of a new name each: two events per
// grant at every watcher), and the server CPU per delivered event, per
// process, in one run:
// - Fencer, one cell of 5 through a router with watch coalescing off
//   (--no-coalesce-watches: one upstream watch per client watch) and
//   through a second router with it on (one upstream watch per prefix);
//   watchers and the writer on the same router;
// - etcd, 5 members, watchers through `etcd grpc-proxy` (which coalesces
//   watchers of the same range), and watchers spread over the members
//   directly; the writer (v3lock Lock/Unlock) on the leader.
// The CPU window runs from the first grant to the last event delivered
// (or a timeout); CPU per delivered event is each process's CPU over the
// window divided by the events delivered.
import { spawn } from 'node:child_process';
import { closeSync, openSync } from 'node:fs';
import path from 'node:path';
import { lockservice } from '@fencer/protocol';
import { FencerFleet } from '../systems/fencer-fleet.mjs';
import { EtcdSystem, etcdVersion } from '../systems/etcd.mjs';
import { alive, freePortBase, stopOnSignal, waitForPort } from '../processes.mjs';
import { cpuMsOf, histogram, nowMs, pool, sleep } from '../measure.mjs';
import { common, count, numeric, resolve } from '../options.mjs';
import { commandLine, machineMeta, markdownTable, writeDocs, writeJson } from '../report.mjs';

const ETCD_BIN = process.env.ETCD_BIN ?? '/usr/bin/etcd';
/** Watches are opened this many at a time. */
const OPEN_WIDTH = 25;
/** After the last grant, events still owed are awaited this long at most. */
const DRAIN_MS_MAX = 15_000;
const T = lockservice.WatchEventType;

export function register(program) {
  const cmd = program
    .command('watch-fanout')
    .description(
      'server CPU per delivered watch event: W watchers of one prefix, one writer; Fencer through a router with coalescing off and on, etcd through grpc-proxy and direct',
    );
  numeric(cmd, '--watchers <n>', 'watchers of the prefix', 200, 20, count);
  numeric(cmd, '--grants <n>', 'grants (acquire + release of a new name) by the writer', 300, 30, count);
  numeric(cmd, '--rate <n>', 'grants per second at most', 50, 50);
  cmd.option('--no-etcd', 'Fencer only');
  common(cmd);
  cmd.action(() => runWatchFanout(resolve(cmd)));
  return cmd;
}

/** The grant number an event's key names (…/n<k>…), or undefined. */
const grantOf = (key) => {
  const m = /\/n(\d+)(\/|$)/.exec(key);
  return m ? Number(m[1]) : undefined;
};

/** A tally of deliveries shared by one scenario's watchers: events, and latency from the grant's start to its first event. */
function tally() {
  return { events: 0, issued: new Map(), latency: histogram(), seen: new Set() };
}

function note(t, key, watcher) {
  t.events++;
  const k = grantOf(key);
  const at = t.issued.get(k);
  const id = `${watcher}:${k}`;
  if (at === undefined || t.seen.has(id)) return;
  t.seen.add(id);
  t.latency.record(nowMs() - at);
}

/** A Fencer prefix watch through `at`; resolves once the stream is live (its PROGRESS). */
function fencerWatch(fleet, at, prefix, t, i) {
  const s = fleet.raw(at).watch({ name: prefix, prefix: true, sinceRevision: 0 });
  return new Promise((ok, fail) => {
    let live = false;
    s.on('data', (e) => {
      if (e.type === T.WATCH_EVENT_TYPE_PROGRESS && !live) {
        live = true;
        ok({ close: () => s.cancel() });
      } else if (e.type !== T.WATCH_EVENT_TYPE_PROGRESS && e.type !== T.WATCH_EVENT_TYPE_SNAPSHOT) note(t, e.name, i);
    });
    s.on('error', (e) => (live ? undefined : fail(e)));
  });
}

/** An etcd range watch on the prefix through `address`; resolves once created. */
function etcdWatch(etcd, address, prefix, t, i) {
  const s = etcd.client('Watch', address).watch();
  return new Promise((ok, fail) => {
    let live = false;
    s.on('data', (r) => {
      if (r.created && !live) {
        live = true;
        ok({ close: () => s.cancel() });
      }
      for (const e of r.events) note(t, e.kv.key.toString(), i);
    });
    s.on('error', (e) => (live ? undefined : fail(e)));
    const end = Buffer.from(prefix);
    end[end.length - 1]++;
    s.write({ create_request: { key: Buffer.from(prefix), range_end: end } });
  });
}

/**
 * One scenario: open the watchers, then G grants at the rate, then wait
 * for every event owed; CPU of each named process over grants + drain.
 */
async function scenario({ label, procs, openWatch, writer, prefix, o }) {
  const t = tally();
  const watches = await pool(o.watchers, OPEN_WIDTH, (i) => openWatch(t, i));
  await sleep(1_000); // let the starts settle (coalesced watches join their group at their first PROGRESS)
  const expected = o.grants * 2 * o.watchers;
  const cpu0 = procs.map(([, pid]) => cpuMsOf(pid));
  const t0 = nowMs();
  const events0 = t.events;
  try {
    for (let k = 1; k <= o.grants; k++) {
      const tick = nowMs();
      t.issued.set(k, tick);
      await writer.unlock(await writer.lock(`${prefix}n${k}`));
      const rest = 1000 / o.rate - (nowMs() - tick);
      if (rest > 0) await sleep(rest);
    }
    for (const until = nowMs() + DRAIN_MS_MAX; t.events - events0 < expected && nowMs() < until;) await sleep(20);
    const spanS = (nowMs() - t0) / 1000;
    const cpu1 = procs.map(([, pid]) => cpuMsOf(pid));
    const delivered = t.events - events0;
    const per = (ms) => (ms * 1000) / Math.max(1, delivered);
    return {
      label,
      delivered,
      expected,
      spanS,
      p50: t.latency.pMs(50),
      p99: t.latency.pMs(99),
      procs: procs.map(([name], i) => ({ name, cpuMs: cpu1[i] - cpu0[i], usPerEvent: per(cpu1[i] - cpu0[i]) })),
    };
  } finally {
    for (const w of watches) w.close();
  }
}

/** Fencer: one cell of 5, router-1 without coalescing, router-2 with it; each scenario's watchers and writer on its router. */
async function fencerRuns(o) {
  const fleet = new FencerFleet({
    cells: 1,
    replicas: 5,
    routers: 2,
    proxies: 0,
    routerArgs: [['--no-coalesce-watches'], []],
    label: 'Fencer, cell of 5 via a router',
  });
  const stopAll = stopOnSignal([fleet]);
  await fleet.start();
  try {
    const out = [];
    for (const [i, label] of [
      [0, 'Fencer via router, coalescing off'],
      [1, 'Fencer via router, coalescing on'],
    ]) {
      const leader = await fleet.leader();
      const at = fleet.endpoints[i];
      fleet.target = at;
      const writer = await fleet.openSession(300);
      const prefix = fleet.lockName(`watched-${i}/`);
      const procs = [
        [`router (${fleet.routers[i].id})`, fleet.pid(fleet.routers[i].id)],
        [`cell leader (${leader.id})`, leader.pid],
        ...fleet.plan[0].replicas.filter((r) => r.id !== leader.id).map((r) => [r.id, fleet.pid(r.id)]),
      ];
      const r = await scenario({
        label,
        procs,
        openWatch: (t, w) => fencerWatch(fleet, at, prefix, t, w),
        writer,
        prefix,
        o,
      }).finally(() => writer.close());
      out.push(r);
    }
    return { runs: out, version: fleet.version };
  } finally {
    await stopAll();
  }
}

/** `etcd grpc-proxy start` in front of the members, on a free port. */
async function startGrpcProxy(etcd) {
  const port = (await freePortBase(16_000, 10)) + 1;
  const log = openSync(path.join(etcd.dataDir, 'grpc-proxy.log'), 'a');
  const child = spawn(ETCD_BIN, ['grpc-proxy', 'start', `--endpoints=${etcd.endpoints.join(',')}`, `--listen-addr=127.0.0.1:${port}`], {
    stdio: ['ignore', log, log],
  });
  closeSync(log);
  etcd.children.set('grpc-proxy', child);
  await waitForPort(port, 30_000);
  return { address: `127.0.0.1:${port}`, pid: child.pid };
}

/** etcd, 5 members: watchers through grpc-proxy, then spread over the members; the writer on the leader. */
async function etcdRuns(o) {
  const etcd = new EtcdSystem(5);
  const stopAll = stopOnSignal([etcd]);
  await etcd.start();
  try {
    const proxy = await startGrpcProxy(etcd);
    const out = [];
    for (const [i, label] of [
      [0, 'etcd-5 via grpc-proxy'],
      [1, 'etcd-5 direct (watchers spread over members)'],
    ]) {
      const leader = await etcd.leader();
      const writer = await etcd.openSession(300);
      const prefix = etcd.lockName(`watched-${i}/`);
      const members = [...etcd.children].filter(([name, c]) => name !== 'grpc-proxy' && alive(c));
      const procs = [
        ...(i === 0 ? [['grpc-proxy', proxy.pid]] : []),
        [`leader (${leader.id})`, leader.pid],
        ...members.filter(([name]) => name !== leader.id).map(([name, c]) => [`${name}`, c.pid]),
      ];
      const address = (w) => (i === 0 ? proxy.address : etcd.endpoints[w % etcd.endpoints.length]);
      out.push(
        await scenario({
          label,
          procs,
          openWatch: (t, w) => etcdWatch(etcd, address(w), prefix, t, w),
          writer,
          prefix,
          o,
        }),
      );
    }
    return { runs: out, version: etcdVersion() };
  } finally {
    await stopAll();
  }
}

const us = (x) => (x === undefined ? '–' : x.toFixed(1));

/** A scenario's row: front end (router or proxy), leader, every server process. */
function row(r) {
  const front = r.procs.find((p) => /^router|^grpc-proxy/.test(p.name));
  const leader = r.procs.find((p) => /leader/.test(p.name));
  const all = r.procs.reduce((s, p) => s + p.usPerEvent, 0);
  return [
    r.label,
    `${r.delivered.toLocaleString('en-US')} / ${r.expected.toLocaleString('en-US')}`,
    us(front?.usPerEvent),
    us(leader?.usPerEvent),
    us(all),
    `${r.p50.toFixed(1)} / ${r.p99.toFixed(1)}`,
  ];
}

const HEAD = ['system', 'events delivered', 'front end µs/event', 'leader µs/event', 'servers µs/event', 'p50 / p99 ms'];

async function runWatchFanout(o) {
  const meta = machineMeta();
  const fencer = await fencerRuns(o);
  const etcd = o.etcd ? await etcdRuns(o) : undefined;
  meta.end();
  const runs = [...fencer.runs, ...(etcd?.runs ?? [])];
  const rows = runs.map(row);
  console.log(markdownTable(HEAD, rows));
  for (const r of runs) console.log(r.label, r.procs.map((p) => `${p.name} ${p.cpuMs.toFixed(0)} ms`).join(', '));
  const body = [
    '## Watch fan-out: coalescing in the router, beside etcd',
    '',
    `${o.watchers} watchers of one prefix, one writer making ${o.grants} grants (acquire + release of a new name: two events per grant at every watcher) at up to ${o.rate}/s. CPU from /proc over the grants and the wait for the last event, divided by the events delivered. "servers" sums every server process of the scenario: for Fencer the router and the five replicas (the followers do no watch work, only the writes), for etcd the five members and the proxy. The Fencer writer goes through the same router as its watchers; etcd's writer calls the leader. Latency: from the grant's Acquire/Lock call to each watcher's first event of it.`,
    '',
    markdownTable(HEAD, rows),
    '',
    `Run ${meta.date.slice(0, 16).replace('T', ' ')} UTC on ${meta.cpu}, load average ${meta.loadStart} at the start and ${meta.loadEnd} at the end (provisional while the machine is shared). ${fencer.version}; ${etcd?.version ?? 'etcd not run'}. Reproduce: \`${commandLine()}\`.`,
  ].join('\n');
  writeDocs({ name: 'watch-fanout', body, keepNotes: true, write: o.write });
  if (o.json) writeJson(o.json, { meta, runs });
}
