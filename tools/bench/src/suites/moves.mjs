// The moves suite: how long a tenant move keeps its tenant from writing
// (issue 27's targets: 300 ms at the median, under 1 s at worst), and at
// what tenant size a move passes 1 s. A throwaway fleet (tools/fleet's
// startTestFleet: two cells run --managed, one control plane whose move
// worker drives them, a router and a proxy following its routing table)
// holds the test tenant (by default 1,000 sessions, 5,000 held locks, 200
// queued waiters, built over raw gRPC and kept alive through the proxy)
// while SDK workers acquire and release through the router; the tenant is
// moved back and forth --moves times and each move's `unavailableMs` (from
// the journal: freeze to the first write the target served) is read from
// GET /v1/moves/{id}. Then tenants of --sizes times that size are each
// moved --size-moves times: the first whose median passes 1 s is the size
// reported. Each move's export size comes from the source leader's
// NamespaceStatus.
import { FencerClient } from '@fencer/client';
import { adminClient } from '@fencer/fleet';
import { startTestFleet, TenantLoad } from '@fencer/fleet/testing';
import { median } from '../measure.mjs';
import { common, count, listOption, numeric, resolve } from '../options.mjs';
import { stopOnSignal } from '../processes.mjs';
import { commandLine, fmt, machineMeta, markdownTable, writeDocs, writeJson } from '../report.mjs';

const TARGET_MEDIAN_MS = 300;
const TARGET_WORST_MS = 1_000;
/** A move that has not ended after this long is reported as stuck. */
const MOVE_TIMEOUT_MS = 180_000;
const WORKERS = 4;
const MB = 1e6;

export function register(program) {
  const cmd = program
    .command('moves')
    .description(
      'tenant moves: unavailableMs median and worst over N moves of the test tenant, and the tenant size at which a move passes 1 s',
    );
  numeric(cmd, '--moves <n>', 'moves of the test tenant (back and forth)', 10, 3, count);
  numeric(cmd, '--sessions <n>', 'sessions of the test tenant', 1_000, 1_000, count);
  numeric(cmd, '--locks-per-session <n>', 'held locks per session', 5, 5, count);
  numeric(cmd, '--waiters <n>', 'queued waiters (20 queues)', 200, 200, count);
  numeric(cmd, '--replicas <n>', 'replicas per cell', 3, 3, count);
  numeric(cmd, '--size-moves <n>', 'moves of each larger tenant', 2, 1, count);
  cmd.addOption(listOption('--sizes <list>', 'larger tenants, as multiples of the test tenant (ascending); empty: skip', ['2', '4', '8']));
  common(cmd);
  cmd.action(() => runMoves(resolve(cmd)));
  return cmd;
}

async function http(url, method, path, body) {
  const res = await fetch(new URL(path, url), {
    method,
    headers: body ? { 'content-type': 'application/json' } : {},
    ...(body ? { body: JSON.stringify(body) } : {}),
    signal: AbortSignal.timeout(10_000),
  });
  const text = await res.text();
  return { status: res.status, body: text ? JSON.parse(text) : undefined };
}

/** What NamespaceStatus on the cell's leader says an export weighs now. */
async function exportBytes(fleet, cellId, namespace) {
  const leader = await fleet.leaderOf(cellId, 60_000);
  const replica = fleet.plan.find((c) => c.id === cellId).replicas.find((r) => r.id === leader.nodeId);
  const client = adminClient(replica.admin);
  try {
    return await new Promise((res, rej) =>
      client.namespaceStatus({ namespace, exportSize: true }, { deadline: Date.now() + 30_000 }, (e, r) =>
        e ? rej(e) : res(Number(r.exportBytes)),
      ),
    );
  } finally {
    client.close();
  }
}

/** Moves of one tenant whose median passes 1 s (or none ended done: rolled back after 30 s frozen). */
const passes = (moves) => moves.length === 0 || median(moves.map((m) => m.unavailableMs)) > TARGET_WORST_MS;

const STATES = ['queued', 'freezing', 'copying', 'switching', 'cleaning'];

/** The steps a move takes while its namespace is frozen, in order (the control plane's fencer_cp_move_step_seconds labels). */
const FROZEN_STEPS = ['freeze-source', 'journal copying', 'copy', 'journal switching', 'unfreeze-target'];

/**
 * From one scrape of the control plane: seconds moves spent so far in each
 * state (fencer_cp_move_state_seconds) and in each frozen-window step that
 * succeeded (fencer_cp_move_step_seconds).
 */
async function moveSeconds(fleet) {
  const text = await (await fetch(fleet.controlPlanes[0].metrics, { signal: AbortSignal.timeout(10_000) })).text();
  const states = Object.fromEntries(STATES.map((st) => [st, 0]));
  for (const m of text.matchAll(/^fencer_cp_move_state_seconds_sum\{state="(\w+)"\} ([\d.e+-]+)$/gm)) states[m[1]] = Number(m[2]);
  const steps = Object.fromEntries(FROZEN_STEPS.map((st) => [st, 0]));
  for (const m of text.matchAll(/^fencer_cp_move_step_seconds_sum\{step="([\w -]+)",outcome="ok"\} ([\d.e+-]+)$/gm))
    if (m[1] in steps) steps[m[1]] = Number(m[2]);
  return { states, steps };
}

/** The ms spent in each of `keys` between two moveSeconds() figures. */
const msBetween = (keys, before, after) => Object.fromEntries(keys.map((k) => [k, Math.round((after[k] - before[k]) * 1000)]));

/** POST /v1/moves and poll to the end; the done move, or an error naming how it ended. */
async function moveOnce(fleet, namespace, toCell) {
  const url = fleet.controlPlaneUrls[0];
  const started = await http(url, 'POST', '/v1/moves', { namespace, toCell });
  if (started.status !== 202) throw new Error(`POST /v1/moves: ${started.status} ${JSON.stringify(started.body)}`);
  const deadline = Date.now() + MOVE_TIMEOUT_MS;
  for (;;) {
    const m = (await http(url, 'GET', `/v1/moves/${started.body.id}`)).body;
    if (m.state === 'done' || m.state === 'failed') return m;
    if (Date.now() > deadline) throw new Error(`move ${m.id} still ${m.state} after ${MOVE_TIMEOUT_MS} ms`);
    await new Promise((r) => setTimeout(r, 50));
  }
}

async function buildTenant(fleet, namespace, o, scale, ttlMs) {
  const created = await http(fleet.controlPlaneUrls[0], 'POST', '/v1/tenants', { namespace, cell: 'cell-1' });
  if (created.status !== 201) throw new Error(`POST /v1/tenants: ${created.status} ${JSON.stringify(created.body)}`);
  const load = new TenantLoad({ router: fleet.routerEndpoints[0], proxy: fleet.proxyEndpoints[0], namespace, ttlMs });
  load.startKeepAlive();
  await load.openSessions(o.sessions * scale);
  await load.holdLocks(o.locksPerSession);
  await load.queueWaiters(o.waiters, 20);
  return load;
}

/** SDK clients acquiring and releasing through the router and proxy until stopped; counts grants. */
function startWorkers(fleet, namespace) {
  let stop = false;
  let grants = 0;
  const clients = Array.from(
    { length: WORKERS },
    (_, i) =>
      new FencerClient({ endpoints: fleet.routerEndpoints, proxies: fleet.proxyEndpoints, clientId: `bench-${i}`, retryBudgetMs: 60_000 }),
  );
  const errors = [];
  const running = clients.map(async (c, i) => {
    while (!stop) {
      try {
        const h = await c.acquire(`/ls/${namespace}/work/r${i % 2}`, { waitMs: 30_000 });
        grants++;
        await h.release();
      } catch (e) {
        // A failed call is a finding of the run, reported with the figures; the worker goes on.
        errors.push(`${new Date().toISOString()} worker ${i}: ${e.message}`);
        console.error(errors.at(-1));
      }
    }
  });
  return {
    grants: () => grants,
    errors,
    stop: async () => {
      stop = true;
      await Promise.all(running);
      await Promise.all(clients.map((c) => c.close()));
    },
  };
}

/** `moves` moves of one tenant, back and forth; each one's unavailableMs, export bytes and carried counts. */
async function moveBackAndForth(fleet, namespace, moves, log, failed) {
  const out = [];
  let from = 'cell-1';
  for (let i = 0; i < moves; i++) {
    const to = from === 'cell-1' ? 'cell-2' : 'cell-1';
    const bytes = await exportBytes(fleet, from, namespace);
    const before = await moveSeconds(fleet);
    const m = await moveOnce(fleet, namespace, to);
    log(`  move ${m.id} ${m.state} at ${new Date().toISOString()}${m.error ? `: ${m.error}` : ''}`);
    if (m.state === 'failed') {
      // Rolled back: the tenant is still on `from`; a finding of the run, not a figure.
      failed.push(m.error);
      continue;
    }
    const after = await moveSeconds(fleet);
    const inState = msBetween(STATES, before.states, after.states);
    const inStep = msBetween(FROZEN_STEPS, before.steps, after.steps);
    out.push({ unavailableMs: m.unavailableMs, exportBytes: bytes, sessions: m.sessions, locks: m.locks, inState, inStep });
    const states = STATES.map((st) => `${st} ${inState[st]}`).join(', ');
    const inSteps = FROZEN_STEPS.reduce((sum, st) => sum + inStep[st], 0);
    const steps = `${FROZEN_STEPS.map((st) => `${st} ${inStep[st]}`).join(', ')} (the rest of unavailableMs: ${m.unavailableMs - inSteps})`;
    log(
      `  ${namespace} ${from} → ${to}: unavailableMs ${m.unavailableMs}, export ${fmt.fixed(bytes / MB, 2)} MB; ms in ${states}; frozen steps ${steps}`,
    );
    from = to;
  }
  return out;
}

async function measure(fleet, o) {
  const log = (s) => console.log(s);
  log(`test tenant: ${o.sessions} sessions, ${o.sessions * o.locksPerSession} held locks, ${o.waiters} waiters`);
  // TTLs of 30 s and more: on a loaded shared machine the KeepAlive of thousands of sessions from one process must not be what fails.
  const load = await buildTenant(fleet, 'movebench', o, 1, 30_000);
  const workers = startWorkers(fleet, 'movebench');
  let main;
  const failedMoves = [];
  try {
    main = await moveBackAndForth(fleet, 'movebench', o.moves, log, failedMoves);
  } finally {
    await workers.stop();
    await load.close();
  }
  const result = { main, failedMoves, grants: workers.grants(), workerErrors: workers.errors, expired: load.expired.length, sizes: [] };
  for (const s of o.sizes.map(Number)) {
    const ns = `movebench-x${s}`;
    log(`tenant ×${s}: ${o.sessions * s} sessions, ${o.sessions * s * o.locksPerSession} held locks`);
    const big = await buildTenant(fleet, ns, o, s, 60_000);
    let moves;
    try {
      moves = await moveBackAndForth(fleet, ns, o.sizeMoves, log, failedMoves);
    } finally {
      await big.close();
    }
    result.sizes.push({
      scale: s,
      sessions: o.sessions * s,
      locks: o.sessions * s * o.locksPerSession,
      moves,
      expired: big.expired.length,
    });
    // The size that passes 1 s is found (a move that only failed stayed frozen 30 s): larger ones only take longer to build.
    if (passes(moves)) break;
  }
  return result;
}

function render(meta, r, o) {
  const u = r.main.map((m) => m.unavailableMs);
  const worst = Math.max(...u);
  const rows = [
    [
      `test tenant (${fmt.int(o.sessions)} sessions, ${fmt.int(o.sessions * o.locksPerSession)} locks, ${o.waiters} waiters), ${r.main.length} moves`,
      fmt.fixed((r.main[0]?.exportBytes ?? NaN) / MB, 2),
      `${fmt.ms(median(u))} (target ${TARGET_MEDIAN_MS} ms)`,
      `${fmt.ms(worst)} (target < ${TARGET_WORST_MS} ms)`,
      u.join(' / '),
    ],
    ...r.sizes.map((s) => {
      const su = s.moves.map((m) => m.unavailableMs);
      if (su.length === 0) return [`×${s.scale}: ${fmt.int(s.sessions)} sessions, ${fmt.int(s.locks)} locks`, '—', 'failed', 'failed', ''];
      return [
        `×${s.scale}: ${fmt.int(s.sessions)} sessions, ${fmt.int(s.locks)} locks`,
        fmt.fixed(s.moves[0].exportBytes / MB, 2),
        fmt.ms(median(su)),
        fmt.ms(Math.max(...su)),
        su.join(' / '),
      ];
    }),
  ];
  const passed = r.sizes.find((s) => passes(s.moves));
  const passedText = passes(r.main)
    ? `The test tenant's own moves pass 1 s at the median in this run, so the tenant size at which a move passes 1 s is not measured by it (the larger tenants' rows are for comparison).`
    : passed
      ? `A move passes 1 s (median) at ${fmt.int(passed.sessions)} sessions and ${fmt.int(passed.locks)} locks${passed.moves.length ? ` (export ${fmt.fixed(passed.moves[0].exportBytes / MB, 1)} MB)` : ' (its moves failed)'}.`
      : `No tenant measured here passed 1 s at the median (largest: ${r.sizes.length ? `${fmt.int(r.sizes.at(-1).sessions)} sessions` : 'none measured'}).`;
  return [
    '## Tenant moves',
    '',
    `Measured by \`${meta.command}\` on ${meta.date.slice(0, 10)}: Node ${meta.node}, ${meta.cpu}, load ${meta.loadStart} → ${meta.loadEnd}. A test fleet of 2 cells × ${o.replicas} replicas (--managed), 1 control plane, 1 router, 1 proxy; ${WORKERS} SDK workers acquired and released through the router during the test tenant's moves (${fmt.int(r.grants)} grants, ${r.workerErrors.length} failed calls${r.workerErrors.length ? `, first: ${r.workerErrors[0]}` : ''}; sessions expired: ${r.expired}). \`unavailableMs\` is the move's own figure (GET /v1/moves/{id}): from the freeze to the first write the target served.`,
    '',
    markdownTable(['tenant', 'export MB', 'median unavailableMs', 'worst', 'each move'], rows),
    '',
    `Where the test tenant's moves spent their time (median ms per state, from the control plane's \`fencer_cp_move_state_seconds\`): ${STATES.map((st) => `${st} ${fmt.int(median(r.main.map((m) => m.inState[st])))}`).join(', ')}. The namespace is frozen from the start of \`freezing\` until the target unfreezes during \`switching\`; \`unavailableMs\` adds the time to the target's first write. The steps inside that window (median ms, \`fencer_cp_move_step_seconds\`): ${FROZEN_STEPS.map((st) => `${st} ${fmt.int(median(r.main.map((m) => m.inStep[st])))}`).join(', ')}.`,
    '',
    passedText,
    '',
  ].join('\n');
}

export async function runMoves(o) {
  const meta = Object.assign(machineMeta(), { command: commandLine() });
  const fleet = await startTestFleet({ cells: 2, replicas: o.replicas, routers: 1, proxies: 1, controlPlanes: 1 });
  const stopAll = stopOnSignal([{ key: 'fleet', stop: () => fleet.stop() }]);
  let r;
  try {
    r = await measure(fleet, o);
  } finally {
    await stopAll();
  }
  meta.end();
  const body = render(meta, r, o);
  console.log(body);
  if (o.json) writeJson(o.json, { meta, opts: o, result: r });
  const u = r.main.map((m) => m.unavailableMs);
  const rows = [
    {
      id: 'moves-unavailable',
      figure: `Tenant move (${fmt.int(o.sessions)} sessions, ${fmt.int(o.sessions * o.locksPerSession)} locks, ${o.waiters} waiters): unavailableMs median / worst`,
      value: `${fmt.int(median(u))} / ${fmt.int(Math.max(...u))} ms (targets 300 / 1,000)`,
      command: meta.command,
    },
  ];
  writeDocs({ name: 'moves', body, rows, keepNotes: true, write: o.write });
}
