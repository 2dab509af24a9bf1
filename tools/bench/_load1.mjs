// 1-client acquire+release loop against the leader; prints per-process CPU.
import { readFileSync } from 'node:fs';
import { randomUUID } from 'node:crypto';
import { execSync } from 'node:child_process';
import { credentials, Metadata } from '@grpc/grpc-js';
import { lockservice } from '@fencer/protocol';
const leader = process.argv[2] ?? '127.0.0.1:7004';
const seconds = Number(process.argv[3] ?? 5);
const conc = Number(process.argv[4] ?? 1);
const c = new lockservice.LockServiceClient(leader, credentials.createInsecure());
const call = (m, r) => new Promise((res, rej) => c[m](r, new Metadata(), (e, v) => (e ? rej(e) : res(v))));
const pids = execSync('pgrep -f ^/usr/.*cell-node/dist/main.js').toString().trim().split('\n');
const cpu = () => pids.map((p) => { const f = readFileSync(`/proc/${p}/stat`, 'utf8').split(') ')[1].split(' '); return Number(f[11]) + Number(f[12]); });
const s = await call('openSession', { clientId: 'load1', ttlMs: 60000, namespace: 'bench' });
let n = 0; const end = Date.now() + seconds * 1000;
const c0 = cpu(); const l0 = process.cpuUsage();
await Promise.all(Array.from({ length: conc }, async (_, k) => {
  while (Date.now() < end) {
    const name = `/ls/bench/k${k}-${n}`;
    const g = await call('acquire', { sessionId: s.sessionId, name, mode: lockservice.LockMode.LOCK_MODE_EXCLUSIVE, waitMs: 1000, requestId: randomUUID(), lockDelayMs: 0 });
    await call('release', { sessionId: s.sessionId, name, token: g.token, requestId: randomUUID() });
    n++;
  }
}));
const c1 = cpu(); const l = process.cpuUsage(l0);
console.log(`${n} cycles in ${seconds}s = ${(n / seconds).toFixed(0)}/s`);
console.log('server cpu ms per cycle:', pids.map((p, i) => `${p}:${(((c1[i] - c0[i]) * 10) / n).toFixed(2)}`).join(' '), 'loadgen', ((l.user + l.system) / 1000 / n).toFixed(2));
process.exit(0);
