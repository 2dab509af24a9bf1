// The client-direct suite: the client library's two modes against one
// fleet in one run (decision 0015). "router": every call through the
// router (the default). "direct": the client learns each namespace's
// serving replica through the router and calls the cell leader directly.
// Each mode runs 1 client (latency: p50 and p99 of an acquire + release
// cycle) and N clients (throughput), each client a FencerClient of its own
// cycling an uncontended lock of its own, after a warm-up. Server CPU per
// cycle sums every fleet process from /proc. The modes alternate in rounds
// (router, direct, router, direct, ...) so that a change of the machine's
// load falls on both.
import { FencerClient } from '@fencer/client';
import { FencerFleet } from '../systems/fencer-fleet.mjs';
import { NAMESPACE } from '../systems/fencer-client.mjs';
import { stopOnSignal } from '../processes.mjs';
import { cpuMsOf, histogram, median, nowMs } from '../measure.mjs';
import { common, count, numeric, resolve } from '../options.mjs';
import { commandLine, machineMeta, markdownTable, writeDocs, writeJson } from '../report.mjs';

const MODES = ['router', 'direct'];

export function register(program) {
  const cmd = program
    .command('client-direct')
    .description('the client library through the router against direct mode (cell leaders called directly), one fleet, one run');
  numeric(cmd, '--clients <n>', 'clients of the throughput scenario', 64, 16, count);
  numeric(cmd, '--seconds <n>', 'measured seconds per scenario and round', 8, 3);
  numeric(cmd, '--warmup <n>', 'warm-up seconds per scenario and round', 3, 1);
  numeric(cmd, '--rounds <n>', 'rounds of both modes', 2, 1, count);
  common(cmd);
  cmd.action(() => runClientDirect(resolve(cmd)));
  return cmd;
}

/** N clients cycling acquire + release of their own lock until `untilMs`; latencies into `h` while `measuring()`. */
async function cycle(clients, untilMs, h, measuring, tag) {
  let done = 0;
  await Promise.all(
    clients.map(async (c, i) => {
      const name = `/ls/${NAMESPACE}/direct-${tag}-${i}`;
      while (nowMs() < untilMs) {
        const t0 = nowMs();
        const handle = await c.acquire(name, { waitMs: 5_000 });
        await handle.release();
        if (measuring()) {
          h.record(nowMs() - t0);
          done++;
        }
      }
    }),
  );
  return done;
}

/** One scenario of one mode: warm-up, then a measured window; cycles/s, latency and server CPU per cycle. */
async function scenario(fleet, mode, n, o, tag) {
  const clients = Array.from({ length: n }, () => new FencerClient({ endpoints: fleet.endpoints, direct: mode === 'direct' }));
  try {
    await cycle(clients, nowMs() + o.warmup * 1000, histogram(), () => false, tag);
    const h = histogram();
    const pids = fleet.pids();
    const cpu0 = pids.map(cpuMsOf);
    const t0 = nowMs();
    const cycles = await cycle(clients, t0 + o.seconds * 1000, h, () => true, tag);
    const spanS = (nowMs() - t0) / 1000;
    const cpuMs = pids.map(cpuMsOf).reduce((s, v, i) => s + v - cpu0[i], 0);
    const direct = clients.reduce((s, c) => s + (c.directCalls?.direct ?? 0), 0);
    const fallbacks = clients.reduce((s, c) => s + (c.directCalls?.fallbacks ?? 0), 0);
    return {
      mode,
      clients: n,
      perS: cycles / spanS,
      p50: h.pMs(50),
      p99: h.pMs(99),
      cpuMsPerCycle: cpuMs / Math.max(1, cycles),
      direct,
      fallbacks,
    };
  } finally {
    await Promise.all(clients.map((c) => c.close()));
  }
}

const med = (rs, k) => median(rs.map((r) => r[k]));

async function runClientDirect(o) {
  const meta = machineMeta();
  const fleet = new FencerFleet({ cells: 1, replicas: 5, routers: 1, proxies: 0, label: 'Fencer, cell of 5, one router' });
  const stopAll = stopOnSignal([fleet]);
  await fleet.start();
  const results = [];
  try {
    for (let round = 0; round < o.rounds; round++) {
      for (const mode of MODES) {
        results.push(await scenario(fleet, mode, 1, o, `${round}-${mode}-1`));
        results.push(await scenario(fleet, mode, o.clients, o, `${round}-${mode}-n`));
        console.log(results.slice(-2));
      }
    }
  } finally {
    await stopAll();
  }
  meta.end();
  const of = (mode, n) => results.filter((r) => r.mode === mode && r.clients === n);
  const rows = MODES.map((mode) => {
    const one = of(mode, 1);
    const many = of(mode, o.clients);
    return [
      mode === 'router' ? 'through the router (default)' : 'direct to the cell leader',
      `${med(one, 'p50').toFixed(2)} / ${med(one, 'p99').toFixed(2)}`,
      med(many, 'perS').toFixed(0),
      med(many, 'cpuMsPerCycle').toFixed(2),
      mode === 'direct' ? `${many.reduce((s, r) => s + r.fallbacks, 0)}` : '–',
    ];
  });
  const head = ['client mode', '1 client: cycle p50 / p99 ms', `${o.clients} clients: cycles/s`, 'server CPU ms per cycle', 'fallbacks'];
  console.log(markdownTable(head, rows));
  const body = [
    '## Client direct mode against the router',
    '',
    `One cell of 5 replicas, one router, the client library (\`FencerClient\`) through the router and in direct mode (\`direct: true\`, decision 0015), each client cycling acquire + release of an uncontended lock of its own. ${o.rounds} round(s) alternating the modes, ${o.warmup} s warm-up and ${o.seconds} s measured per scenario; medians over the rounds. Server CPU sums every fleet process (the router and the five replicas).`,
    '',
    markdownTable(head, rows),
    '',
    `Run ${meta.date.slice(0, 16).replace('T', ' ')} UTC on ${meta.cpu}, load average ${meta.loadStart} at the start and ${meta.loadEnd} at the end (provisional while the machine is shared). ${fleet.version}. Reproduce: \`${commandLine()}\`.`,
  ].join('\n');
  writeDocs({ name: 'client-direct', body, keepNotes: true, write: o.write });
  if (o.json) writeJson(o.json, { meta, results });
}
