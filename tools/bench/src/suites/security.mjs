// The security suite (issue 29, decision 0016): what mutual TLS costs a
// client of the lock service. Two fleets of the same shape run side by
// side in one run, one plaintext and one as `npm start -- --secure` runs
// its links (mutual TLS between processes, TLS from the client to the
// router, certificates from tools/scripts/dev-ca.mjs): a cell of three
// replicas and a router each, the routing file's namespace on the cell.
// Clients reach the router only (as tenants do).
//
// After a warm-up of both, rounds alternate the fleets' order: acquire and
// release cycles by one client (the acquire's p50) and by 64 clients
// (cycles per second). The figures are the medians over the rounds, and
// the secure fleet's against the plaintext one's.
import { closedLoop } from '../load/closed-loop.mjs';
import { cycle } from '../load/lock-cycles.mjs';
import { median } from '../measure.mjs';
import { FencerFleet } from '../systems/fencer-fleet.mjs';
import { common, count, numeric, resolve } from '../options.mjs';
import { commandLine, fmt, machineMeta, markdownTable, textTable, writeDocs, writeJson } from '../report.mjs';
import { stopOnSignal } from '../processes.mjs';

/** Clients of the throughput rounds. */
const MANY_CLIENTS = 64;
/** Session TTL: longer than the whole run. */
const SESSION_TTL_S = 3_600;

/** A change as a signed percentage of its base. */
const pct = (change, base) => (Number.isFinite(change / base) ? `${change >= 0 ? '+' : ''}${((100 * change) / base).toFixed(1)}%` : '—');

export function register(program) {
  const cmd = program
    .command('security')
    .description(
      'the cost of mutual TLS: 1-client acquire p50 and 64-client cycles/s through the router, a --secure fleet against a plaintext one',
    );
  numeric(cmd, '--rounds <n>', 'rounds per fleet (each a 1-client and a 64-client window)', 5, 2, count);
  numeric(cmd, '--seconds <s>', 'length of each measured window', 6, 2);
  numeric(cmd, '--warmup <s>', 'warm-up of each fleet at 64 clients before the rounds', 8, 2);
  common(cmd);
  cmd.action(() => runSecurity(resolve(cmd)));
  return cmd;
}

/** A fleet of one cell of three replicas and one router; `tls` as `npm start -- --secure` runs its links. */
function fleetOf(tls) {
  return new FencerFleet({
    cells: 1,
    replicas: 3,
    routers: 1,
    proxies: 0,
    tls,
    key: tls ? 'secure' : 'plaintext',
    label: tls ? 'secure (mutual TLS, TLS to the router)' : 'plaintext',
  });
}

/** One window of `clients` loops of acquire+release on the fleet's router; the acquire's p50 and cycles/s. */
async function window(fleet, sessions, clients, seconds, tag) {
  const r = await closedLoop(fleet, clients, { warmupS: 0, seconds }, async (i) => {
    const { latencyMs } = await cycle(sessions[i], fleet.lockName(`${tag}-${i}`));
    return latencyMs;
  });
  return { p50: r.p50, rate: r.rate, failed: r.failed };
}

async function measure(fleets, o) {
  const sessions = new Map();
  for (const f of fleets)
    sessions.set(
      f,
      (await f.openManySessions(MANY_CLIENTS, SESSION_TTL_S)).map((id) => f.sessionOf(id)),
    );
  for (const f of fleets) await window(f, sessions.get(f), MANY_CLIENTS, o.warmup, `warm-${f.key}`);
  const rounds = new Map(fleets.map((f) => [f, { one: [], many: [] }]));
  for (let round = 0; round < o.rounds; round++) {
    const order = round % 2 === 0 ? fleets : [...fleets].reverse();
    for (const f of order) {
      rounds.get(f).one.push(await window(f, sessions.get(f), 1, o.seconds, `one-${round}`));
      rounds.get(f).many.push(await window(f, sessions.get(f), MANY_CLIENTS, o.seconds, `many-${round}`));
      console.log(
        `round ${round + 1} ${f.key}: 1 client p50 ${fmt.ms(rounds.get(f).one.at(-1).p50)}, ${MANY_CLIENTS} clients ${fmt.int(rounds.get(f).many.at(-1).rate)}/s`,
      );
    }
  }
  return fleets.map((f) => {
    const r = rounds.get(f);
    return {
      key: f.key,
      label: f.label,
      p50Ms: median(r.one.map((x) => x.p50)),
      ratePerS: median(r.many.map((x) => x.rate)),
      failed: [...r.one, ...r.many].reduce((n, x) => n + x.failed, 0),
    };
  });
}

function report(results, meta, o) {
  const [plain, secure] = results;
  const head = ['fleet', '1-client acquire p50', `${MANY_CLIENTS}-client cycles/s`, 'failed calls'];
  const rows = results.map((r) => [r.label, fmt.ms(r.p50Ms), fmt.int(r.ratePerS), String(r.failed)]);
  const cost = [
    'cost of security',
    `${fmt.ms(secure.p50Ms - plain.p50Ms)} (${pct(secure.p50Ms - plain.p50Ms, plain.p50Ms)})`,
    `${fmt.int(secure.ratePerS - plain.ratePerS)} (${pct(secure.ratePerS - plain.ratePerS, plain.ratePerS)})`,
    '',
  ];
  console.log(`\n${textTable(head, [...rows, cost])}`);
  return [
    '## Security: the cost of mutual TLS',
    '',
    `Run ${meta.date} on ${meta.cpu}, Node ${meta.node}; load average ${meta.loadStart} at the start, ${meta.loadEnd} at the end (1 / 5 / 15 min).`,
    `Reproduce: \`${commandLine()}\`.`,
    '',
    `Two fleets in the same run, each a cell of three replicas and a router; clients reach the router only. The secure one runs its links as \`npm start -- --secure\` does (mutual TLS between processes, TLS from the client). ${o.rounds} rounds of ${o.seconds} s per window, the fleets' order alternating; medians over the rounds.`,
    '',
    markdownTable(head, [...rows, cost]),
  ].join('\n');
}

export async function runSecurity(o) {
  const meta = machineMeta();
  const fleets = [fleetOf(false), fleetOf(true)];
  stopOnSignal(fleets);
  try {
    // One after the other: the TLS mode of @fencer/fleet is the process's while a fleet starts.
    for (const f of fleets) await f.start();
    const results = await measure(fleets, o);
    meta.end();
    const body = report(results, meta, o);
    if (o.json) writeJson(o.json, { meta, options: o, results });
    writeDocs({ name: 'security', body, keepNotes: true, write: o.write });
  } finally {
    for (const f of fleets) await f.stop().catch(() => {});
  }
}
