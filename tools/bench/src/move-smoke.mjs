// Moves a tenant between the cells of a running local fleet while clients
// work through its routers and proxies, and checks what a client must see:
// every grant's token above the last one at the resource, no session
// expired, the watcher's revisions strictly increasing with no resync.
//   node tools/bench/src/move-smoke.mjs [--fleet .fencer/fleet.json] [--namespace NS] [--workers 8] [--seconds 6]
import { readFileSync } from 'node:fs';
import { Command } from 'commander';
import { FencerClient } from '@fencer/client';

const opts = new Command('move-smoke')
  .option('--fleet <file>', 'the fleet.json of the running fleet', '.fencer/fleet.json')
  .option('--namespace <ns>', 'the tenant to create and move', `smoke${process.pid}`)
  .option('--workers <n>', 'clients acquiring and releasing', (v) => Number(v), 8)
  .option('--seconds <n>', 'how long the workers run around the move', (v) => Number(v), 6)
  .parse()
  .opts();

const fleet = JSON.parse(readFileSync(opts.fleet, 'utf8'));
const cp = fleet.controlPlane.urls[0];
const ns = opts.namespace;
const http = async (method, path, body) => {
  const res = await fetch(`${cp}${path}`, {
    method,
    headers: body ? { 'content-type': 'application/json' } : {},
    ...(body ? { body: JSON.stringify(body) } : {}),
  });
  const text = await res.text();
  return { status: res.status, body: text ? JSON.parse(text) : undefined };
};

const created = await http('POST', '/v1/tenants', { namespace: ns });
if (created.status !== 201) throw new Error(`tenant: ${created.status} ${JSON.stringify(created.body)}`);
const fromCell = created.body.cell;
const toCell = fleet.cells.map((c) => c.id).find((id) => id !== fromCell);
console.log(`tenant ${ns} on ${fromCell}; moving to ${toCell}`);

const newClient = (i) =>
  new FencerClient({ endpoints: fleet.lockService, proxies: fleet.proxies.map((p) => p.grpc), clientId: `smoke-${i}` });
const expired = [];
const clients = Array.from({ length: opts.workers }, (_, i) => newClient(i));
for (const c of clients) c.on('expired', (s) => expired.push(s.id));

// The fenced resource: remembers the highest token it accepted per name.
const resource = new Map();
const violations = [];
const accept = (name, token) => {
  const last = resource.get(name) ?? 0;
  if (token <= last) violations.push(`${name}: token ${token} after ${last}`);
  resource.set(name, Math.max(last, token));
};

// A watcher through the router.
const watcher = newClient('watch');
const seenRevisions = [];
const watchProblems = [];
const watchAbort = new AbortController();
const watching = (async () => {
  for await (const ev of watcher.watch(`/ls/${ns}/`, { signal: watchAbort.signal })) {
    if (ev.type === 'resync') watchProblems.push(`resync at ${ev.revision}`);
    if (ev.type === 'snapshot' || ev.type === 'progress') continue;
    const last = seenRevisions.at(-1) ?? 0;
    if (ev.revision < last) watchProblems.push(`revision ${ev.revision} after ${last}`);
    seenRevisions.push(ev.revision);
  }
})().catch((e) => watchAbort.signal.aborted || watchProblems.push(`watch ended: ${e.message}`));

let stop = false;
let grants = 0;
const work = clients.map(async (c, i) => {
  while (!stop) {
    const name = `/ls/${ns}/job-${i % 4}`;
    const h = await c.acquire(name, { waitMs: 20_000 });
    accept(name, h.token);
    grants++;
    await h.release();
  }
});

await new Promise((r) => setTimeout(r, 1_000));
const started = await http('POST', '/v1/moves', { namespace: ns, toCell });
if (started.status !== 202) throw new Error(`move: ${started.status} ${JSON.stringify(started.body)}`);
let move = started.body;
const t0 = Date.now();
while (move.state !== 'done' && move.state !== 'failed' && Date.now() - t0 < 60_000) {
  await new Promise((r) => setTimeout(r, 50));
  move = (await http('GET', `/v1/moves/${move.id}`)).body;
}
console.log(`move ${move.id}: ${JSON.stringify(move)}`);
await new Promise((r) => setTimeout(r, Math.max(0, opts.seconds * 1000 - (Date.now() - t0))));
stop = true;
await Promise.all(work);
watchAbort.abort();
await watching;
const routing = (await http('GET', '/v1/routing')).body.routes.find((r) => r.namespace === ns);
const problems = [...violations, ...watchProblems, ...expired.map((s) => `session ${s} expired`)];
if (move.state !== 'done') problems.push(`move ended ${move.state}: ${move.error ?? ''}`);
if (routing?.cell !== toCell) problems.push(`route points at ${routing?.cell}`);
console.log(`grants ${grants}, watch events ${seenRevisions.length}, unavailableMs ${move.unavailableMs}`);
await Promise.all([...clients, watcher].map((c) => c.close()));
if (problems.length > 0) {
  console.error(`PROBLEMS:\n${problems.join('\n')}`);
  process.exit(1);
}
console.log('OK');
