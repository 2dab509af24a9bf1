// Try the local fleet by hand: opens a session, takes a lock, prints the
// fencing token, holds the lock for a while (heartbeating), releases it and
// closes the session. Follows the leader hint when it reaches a follower.
//   node tools/try/try-lock.mjs [NAME] [HOLD_MS] [--endpoints host:port,...]
import { readFileSync, existsSync } from 'node:fs';
import path from 'node:path';
import { randomUUID } from 'node:crypto';
import { credentials, Metadata } from '@grpc/grpc-js';
import { lockservice, fromServiceError } from '@fencer/protocol';

const args = process.argv.slice(2);
const epFlag = args.indexOf('--endpoints');
let endpoints;
if (epFlag >= 0) {
  endpoints = args[epFlag + 1].split(',');
  args.splice(epFlag, 2);
} else {
  const fleet = path.resolve('.fencer/fleet.json');
  if (!existsSync(fleet)) {
    console.error('no --endpoints and no .fencer/fleet.json: start the fleet with `npm start` first');
    process.exit(2);
  }
  endpoints = JSON.parse(readFileSync(fleet, 'utf8')).lockService;
}
const name = args[0] ?? '/ls/demo/hello';
const holdMs = Number(args[1] ?? 1000);
const namespace = name.split('/')[2];

let target = endpoints[0];
const clients = new Map();
const client = (addr) => {
  if (!clients.has(addr)) clients.set(addr, new lockservice.LockServiceClient(addr, credentials.createInsecure()));
  return clients.get(addr);
};

/** Calls a unary method, following leader hints and retrying UNAVAILABLE a few times. */
async function call(method, request) {
  for (let attempt = 0; attempt < 20; attempt++) {
    try {
      return await new Promise((resolve, reject) =>
        client(target)[method](request, new Metadata(), { deadline: Date.now() + 30_000 }, (err, res) =>
          err ? reject(err) : resolve(res),
        ),
      );
    } catch (err) {
      const fe = fromServiceError(err);
      if (fe.code !== 'NOT_LEADER' && fe.code !== 'NO_LEADER' && fe.code !== 'OUTCOME_UNKNOWN') throw fe;
      target = fe.leaderHint ?? endpoints[(endpoints.indexOf(target) + 1) % endpoints.length];
      await new Promise((r) => setTimeout(r, 100 * (attempt + 1)));
    }
  }
  throw new Error(`${method}: no leader after 20 attempts`);
}

const session = await call('openSession', { clientId: `try-lock-${process.pid}`, ttlMs: 10_000, namespace });
console.log(`session ${session.sessionId} (ttl ${session.ttlMs} ms) via ${target}`);
const ka = client(target).keepAlive();
ka.on('error', () => {});
const beat = setInterval(() => ka.write({ sessionId: session.sessionId }), session.ttlMs / 3);

const got = await call('acquire', {
  sessionId: session.sessionId,
  name,
  mode: lockservice.LockMode.LOCK_MODE_EXCLUSIVE,
  waitMs: 10_000,
  requestId: randomUUID(),
  lockDelayMs: 0,
});
const status = lockservice.acquireStatusToJSON(got.status);
console.log(`acquire ${name}: ${status}${got.token ? `, fencing token ${got.token}` : ''}`);
if (got.token) {
  const check = await call('checkToken', { name, token: got.token });
  console.log(`check token ${got.token}: current=${check.current} (read at revision ${check.revision})`);
  console.log(`holding for ${holdMs} ms…`);
  await new Promise((r) => setTimeout(r, holdMs));
  const rel = await call('release', { sessionId: session.sessionId, name, token: got.token });
  console.log(`release: ok=${rel.ok}`);
}
await call('closeSession', { sessionId: session.sessionId });
console.log('session closed');
clearInterval(beat);
ka.end();
for (const c of clients.values()) c.close();
