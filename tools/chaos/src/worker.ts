#!/usr/bin/env node
/**
 * A client process of the chaos run. It runs the workloads together, each in
 * a few concurrent loops: lock (acquire, try-acquire, release and GetLock
 * over about fifty names, shared and exclusive, in several namespaces),
 * fenced counter (read-modify-write at the resource under the lock), watch
 * (streams that end and resume from chosen revisions) and session churn
 * (sessions opened, used, then closed or abandoned to expire). Everything it
 * invokes and learns goes to its history file. The harness pauses this
 * process (SIGSTOP) for longer than its session TTL, and stops it with an
 * IPC message: then it closes its sessions and exits. A directed fault asks
 * it for probe steps over IPC (workload-config.ts ProbeStep).
 */
import http from 'node:http';
import { ErrorCode, SeededRandom, type Random } from '@fencer/base';
import { fromServiceError, lockservice } from '@fencer/protocol';
import type { ServiceError } from '@grpc/grpc-js';
import {
  HistoryWriter,
  type Mode,
  type OpResult,
  type WatchSegment,
  type WatchType,
  monoNowMs,
  needsClockAnchor,
  anchorClock,
  clockUncertaintyMs,
} from './history.js';
import { KeepAliveManager, type LiveSession } from './keepalive.js';
import { WATCH_EVENTS_PER_STREAM_MAX } from './limits.js';
import { type CallResult, Rpc, sleep } from './rpc.js';
import {
  WORKER_CONFIG_ENV,
  type ProbeAnswer,
  type ProbeStep,
  type WorkerConfig,
  counterName,
  isProbeRequest,
  lockName,
  probeName,
} from './workload-config.js';

const cfg = JSON.parse(process.env[WORKER_CONFIG_ENV] ?? 'null') as WorkerConfig;
if (!cfg) {
  process.stderr.write(`chaos worker: ${WORKER_CONFIG_ENV} is not set\n`);
  process.exit(2);
}

const rng: Random = new SeededRandom(cfg.seed);
const hist = new HistoryWriter(cfg.historyFile, cfg.id);
const rpc = new Rpc({ endpoints: cfg.endpoints, hintMap: cfg.hintMap });
const kaRpc = cfg.keepAliveEndpoints ? new Rpc({ endpoints: cfg.keepAliveEndpoints, hintMap: {} }) : rpc;
const ka = new KeepAliveManager(kaRpc, hist, Math.max(200, Math.floor(cfg.ttlMs / 3)), Math.max(800, Math.floor(cfg.ttlMs / 2)));
const agent = new http.Agent({ keepAlive: true, maxSockets: 16 });
let stopping = false;
let requestCounter = 0;

const { AcquireStatus, LockMode, WatchEventType } = lockservice;

/** Codes after which the call certainly changed nothing. Anything else leaves the outcome unknown. */
function definite(code: ErrorCode): boolean {
  return code !== 'INTERNAL' && code !== 'CANCELLED' && code !== 'NOT_FOUND';
}

function modeOf(m: number): Mode {
  return m === LockMode.LOCK_MODE_SHARED ? 'S' : 'X';
}

type Outcome<T> = { kind: 'ok'; value: T } | { kind: 'gone' } | { kind: 'failed'; code: ErrorCode } | { kind: 'unknown' };

/** Records a call's completion; returns what the loop should do with it. */
function complete<Res, T>(
  id: number,
  r: CallResult<Res>,
  session: LiveSession | undefined,
  ok: (v: Res, retried: boolean) => { result: OpResult; value: T },
): Outcome<T> {
  if (r.kind === 'ok') {
    const { result, value } = ok(r.value, r.retried);
    hist.ok(id, result);
    return { kind: 'ok', value };
  }
  if (r.kind === 'fail' && definite(r.code)) {
    hist.fail(id, r.code);
    if (r.code === 'SESSION_NOT_FOUND' && session) {
      session.dead = true;
      ka.markDead(session.id);
      return { kind: 'gone' };
    }
    return { kind: 'failed', code: r.code };
  }
  hist.unknown(id, r.code);
  return { kind: 'unknown' };
}

async function openSession(ns: string): Promise<LiveSession | undefined> {
  const id = hist.invoke({ f: 'open', ns, ttl: cfg.ttlMs });
  const r = await rpc.call<lockservice.OpenSessionRequest, lockservice.OpenSessionResponse>(
    'openSession',
    { clientId: cfg.id, ttlMs: cfg.ttlMs, namespace: ns },
    { attemptMs: 3_000, budgetMs: 12_000 },
  );
  const o = complete(id, r, undefined, (v) => ({ result: { f: 'open', s: v.sessionId, ttl: v.ttlMs }, value: v }));
  if (o.kind !== 'ok') return undefined;
  const session: LiveSession = { id: o.value.sessionId, ns, ttlMs: o.value.ttlMs, dead: false };
  ka.add(session);
  return session;
}

async function closeSession(session: LiveSession): Promise<void> {
  ka.remove(session.id);
  const id = hist.invoke({ f: 'close', s: session.id });
  const r = await rpc.call<lockservice.CloseSessionRequest, lockservice.CloseSessionResponse>(
    'closeSession',
    { sessionId: session.id },
    { attemptMs: 3_000, budgetMs: 12_000 },
  );
  complete(id, r, session, (v) => ({ result: { f: 'close', released: v.released }, value: undefined }));
  session.dead = true;
}

type AcquireOutcome = { kind: 'granted'; token: number } | { kind: 'busy' } | { kind: 'gone' } | { kind: 'unknown' } | { kind: 'failed' };

async function acquire(session: LiveSession, name: string, mode: Mode, waitMs: number): Promise<AcquireOutcome> {
  const req = `${cfg.id}-${++requestCounter}`;
  const id = hist.invoke({ f: 'acquire', s: session.id, name, mode, wait: waitMs, req });
  const until = Date.now() + waitMs + 30_000;
  for (;;) {
    const r = await rpc.call<lockservice.AcquireRequest, lockservice.AcquireResponse>(
      'acquire',
      {
        sessionId: session.id,
        name,
        mode: mode === 'S' ? LockMode.LOCK_MODE_SHARED : LockMode.LOCK_MODE_EXCLUSIVE,
        waitMs,
        requestId: req,
        lockDelayMs: 0,
      },
      { attemptMs: waitMs + 8_000, budgetMs: Math.max(1, until - Date.now()) },
    );
    // QUEUED: the call ended while the request still waits; the same request id resumes the wait.
    if (r.kind === 'ok' && r.value.status === AcquireStatus.ACQUIRE_STATUS_QUEUED && Date.now() < until) continue;
    const o = complete(id, r, session, (v) => {
      const status =
        v.status === AcquireStatus.ACQUIRE_STATUS_GRANTED
          ? 'GRANTED'
          : v.status === AcquireStatus.ACQUIRE_STATUS_TIMED_OUT
            ? 'TIMED_OUT'
            : 'QUEUED';
      return { result: { f: 'acquire', status, token: v.token, rev: v.revision }, value: v };
    });
    if (o.kind === 'ok') {
      if (o.value.status === AcquireStatus.ACQUIRE_STATUS_GRANTED) return { kind: 'granted', token: o.value.token };
      if (o.value.status === AcquireStatus.ACQUIRE_STATUS_TIMED_OUT) return { kind: 'busy' };
      return { kind: 'unknown' }; // still QUEUED after the whole budget: it may be granted later
    }
    return o.kind === 'gone' ? { kind: 'gone' } : o.kind === 'failed' ? { kind: 'failed' } : { kind: 'unknown' };
  }
}

async function release(session: LiveSession, name: string, token: number): Promise<'done' | 'gone' | 'unknown'> {
  const id = hist.invoke({ f: 'release', s: session.id, name, token });
  const r = await rpc.call<lockservice.ReleaseRequest, lockservice.ReleaseResponse>(
    'release',
    { sessionId: session.id, name, token },
    { attemptMs: 3_000, budgetMs: 12_000 },
  );
  const o = complete(id, r, session, (v, ownRetry) => {
    const retried = ownRetry || cfg.frontEndResends === true;
    return { result: { f: 'release', released: v.ok, retried }, value: v.ok || !retried };
  });
  if (o.kind === 'ok') return o.value ? 'done' : 'unknown';
  return o.kind === 'gone' ? 'gone' : o.kind === 'unknown' ? 'unknown' : 'done';
}

async function getLock(name: string): Promise<void> {
  const id = hist.invoke({ f: 'get', name });
  const r = await rpc.call<lockservice.GetLockRequest, lockservice.GetLockResponse>(
    'getLock',
    { name },
    { attemptMs: 3_000, budgetMs: 8_000 },
  );
  complete(id, r, undefined, (v) => ({
    result: {
      f: 'get',
      rev: v.revision,
      holders: (v.lock?.holders ?? []).map((h) => [h.sessionId, h.token, modeOf(h.mode)] as const),
      waiters: (v.lock?.waiters ?? []).map((w) => [w.sessionId, modeOf(w.mode), w.requestId] as const),
    },
    value: undefined,
  }));
}

function post(body: unknown): Promise<{ accepted: boolean; value: number }> {
  return new Promise((resolve, reject) => {
    const data = JSON.stringify(body);
    const req = http.request(
      `${cfg.resourceUrl}/op`,
      {
        method: 'POST',
        agent,
        headers: { 'content-type': 'application/json', 'content-length': Buffer.byteLength(data) },
        timeout: 10_000,
      },
      (res) => {
        let text = '';
        res.setEncoding('utf8');
        res.on('data', (c: string) => (text += c));
        res.on('end', () => {
          if (res.statusCode !== 200) return reject(new Error(`resource answered ${res.statusCode}: ${text}`));
          resolve(JSON.parse(text) as { accepted: boolean; value: number });
        });
      },
    );
    req.on('timeout', () => req.destroy(new Error('resource timeout')));
    req.on('error', reject);
    req.end(data);
  });
}

async function resourceRead(name: string, token: number): Promise<{ accepted: boolean; value: number } | undefined> {
  const id = hist.invoke({ f: 'ctr-read', name, token });
  try {
    const r = await post({ op: 'read', name, token });
    hist.ok(id, { f: 'ctr-read', accepted: r.accepted, value: r.value });
    return r;
  } catch (e) {
    hist.unknown(id, (e as Error).message);
    return undefined;
  }
}

async function resourceWrite(name: string, token: number, value: number): Promise<void> {
  const id = hist.invoke({ f: 'ctr-write', name, token, value });
  try {
    const r = await post({ op: 'write', name, token, value });
    hist.ok(id, { f: 'ctr-write', accepted: r.accepted });
  } catch (e) {
    hist.unknown(id, (e as Error).message);
  }
}

function pickKey<K, V>(m: Map<K, V>): [K, V] {
  const i = rng.int(m.size);
  let k = 0;
  for (const e of m) if (k++ === i) return e;
  throw new Error('unreachable: empty map');
}

async function lockLoop(k: number): Promise<void> {
  const ns = cfg.lockNamespaces[k % cfg.lockNamespaces.length]!;
  let session: LiveSession | undefined;
  const held = new Map<string, number>();
  while (!stopping && !hist.full) {
    if (!session || session.dead) {
      held.clear();
      session = await openSession(ns);
      if (!session) {
        await sleep(200);
        continue;
      }
    }
    const x = rng.float();
    if (held.size > 0 && (x < 0.4 || held.size >= 3)) {
      const [name, token] = pickKey(held);
      held.delete(name);
      const r = await release(session, name, token);
      if (r === 'unknown') {
        await closeSession(session);
        session = undefined;
      }
    } else if (x < 0.65) {
      await getLock(lockName(ns, rng.int(cfg.namesPerNamespace)));
    } else {
      const name = lockName(ns, rng.int(cfg.namesPerNamespace));
      if (held.has(name)) continue;
      const mode: Mode = rng.chance(0.4) ? 'S' : 'X';
      const waitMs = rng.chance(0.4) ? 0 : rng.range(100, 2_000);
      const r = await acquire(session, name, mode, waitMs);
      if (r.kind === 'granted') held.set(name, r.token);
      else if (r.kind === 'unknown') {
        // It may hold or await the lock without knowing: end the session so nothing lingers.
        await closeSession(session);
        session = undefined;
      }
    }
    await sleep(rng.range(0, 25));
  }
  if (session && !session.dead) await closeSession(session);
}

async function counterLoop(): Promise<void> {
  const ns = cfg.counterNamespace;
  let session: LiveSession | undefined;
  while (!stopping && !hist.full) {
    if (!session || session.dead) {
      session = await openSession(ns);
      if (!session) {
        await sleep(200);
        continue;
      }
    }
    const name = counterName(ns, rng.int(cfg.counterNames));
    const g = await acquire(session, name, 'X', rng.range(500, 3_000));
    if (g.kind === 'unknown') {
      await closeSession(session);
      session = undefined;
      continue;
    }
    if (g.kind !== 'granted') continue;
    const read = await resourceRead(name, g.token);
    if (read?.accepted) {
      // The work under the lock: a pause here is what fencing exists for.
      await sleep(rng.range(cfg.counterWorkMs[0], cfg.counterWorkMs[1]));
      await resourceWrite(name, g.token, read.value + 1);
    }
    if (session.dead) continue;
    const r = await release(session, name, g.token);
    if (r === 'unknown') {
      await closeSession(session);
      session = undefined;
    }
    await sleep(rng.range(0, 30));
  }
  if (session && !session.dead) await closeSession(session);
}

async function churnLoop(): Promise<void> {
  while (!stopping && !hist.full) {
    const ns = rng.pick(cfg.lockNamespaces);
    const session = await openSession(ns);
    if (!session) {
      await sleep(200);
      continue;
    }
    const n = rng.range(0, 2);
    let unknown = false;
    // Distinct names: re-acquiring a held lock answers the old grant (or INVALID_MODE), which is not what churn is for.
    const names = rng.shuffle(Array.from({ length: cfg.namesPerNamespace }, (_, i) => i)).slice(0, n);
    for (const i of names) {
      if (session.dead) break;
      const r = await acquire(session, lockName(ns, i), rng.chance(0.5) ? 'S' : 'X', rng.chance(0.5) ? 0 : rng.range(50, 500));
      if (r.kind === 'unknown') unknown = true;
    }
    await sleep(rng.range(50, 400));
    if (!session.dead) {
      if (!unknown && rng.chance(cfg.abandonRate)) {
        ka.remove(session.id);
        hist.abandoned(session.id);
      } else {
        await closeSession(session);
      }
    }
    await sleep(rng.range(100, 600));
  }
}

const WATCH_TYPES: Record<number, WatchType> = {
  [WatchEventType.WATCH_EVENT_TYPE_SNAPSHOT]: 'SNAPSHOT',
  [WatchEventType.WATCH_EVENT_TYPE_ACQUIRED]: 'ACQUIRED',
  [WatchEventType.WATCH_EVENT_TYPE_RELEASED]: 'RELEASED',
  [WatchEventType.WATCH_EVENT_TYPE_EXPIRED]: 'EXPIRED',
  [WatchEventType.WATCH_EVENT_TYPE_QUEUED]: 'QUEUED',
  [WatchEventType.WATCH_EVENT_TYPE_CANCELED]: 'CANCELED',
  [WatchEventType.WATCH_EVENT_TYPE_PROGRESS]: 'PROGRESS',
};

function watchOnce(endpoint: number, prefix: string, since: number, durationMs: number): Promise<WatchSegment> {
  return new Promise((resolve) => {
    const tStart = monoNowMs() - clockUncertaintyMs();
    const events: Array<[number, WatchType, string, string, number]> = [];
    let end = 'cancelled';
    let finished = false;
    const stream = rpc.client(endpoint).watch({ name: prefix, prefix: true, sinceRevision: since });
    const finish = (): void => {
      if (finished) return;
      finished = true;
      clearTimeout(timer);
      resolve({ prefix, endpoint, since, tStart, tEnd: monoNowMs() + clockUncertaintyMs(), events, end });
    };
    const timer = setTimeout(() => {
      stream.cancel();
      finish();
    }, durationMs);
    stream.on('data', (e: lockservice.WatchEvent) => {
      if (finished) return;
      const type = WATCH_TYPES[e.type] ?? 'PROGRESS';
      if (type === 'SNAPSHOT') {
        // The lock's state at the stream's start: holders and waiters, as one comparable string.
        const h = (e.lock?.holders ?? []).map((x) => `${x.sessionId}@${x.token}/${modeOf(x.mode)}`).join(',');
        const w = (e.lock?.waiters ?? []).map((x) => `${x.sessionId}/${modeOf(x.mode)}/${x.requestId}`).join(',');
        events.push([e.revision, type, e.name, `${h}|${w}`, 0]);
      } else {
        events.push([e.revision, type, e.name, e.sessionId, e.token]);
      }
      if (events.length >= WATCH_EVENTS_PER_STREAM_MAX) {
        end = 'overflow';
        stream.cancel();
        finish();
      }
    });
    stream.on('error', (err: ServiceError) => {
      if (!finished) end = fromServiceError(err).code;
      finish();
    });
    stream.on('end', () => {
      if (!finished) end = 'ended';
      finish();
    });
  });
}

async function watchLoop(): Promise<void> {
  const state = new Map<string, { last: number; seen: number[] }>();
  const prefixes = [...cfg.lockNamespaces, cfg.counterNamespace].map((ns) => `/ls/${ns}/`);
  while (!stopping && !hist.full) {
    const prefix = rng.pick(prefixes);
    let st = state.get(prefix);
    if (!st) {
      st = { last: 0, seen: [] };
      state.set(prefix, st);
    }
    const x = rng.float();
    let since: number;
    if (st.last === 0 || x < 0.15) since = 0;
    else if (x < 0.5) since = st.last;
    else if (x < 0.75 && st.seen.length > 0) since = rng.pick(st.seen);
    else if (x < 0.97) since = Math.max(1, st.last - rng.range(1, 300));
    else since = 1; // the whole retained history, or COMPACTED
    const seg = await watchOnce(rng.int(rpc.endpointCount), prefix, since, rng.range(1_000, 8_000));
    hist.watch(seg);
    for (const [rev] of seg.events) {
      st.last = Math.max(st.last, rev);
      if (st.seen.length < 1_000) st.seen.push(rev);
      else st.seen[rng.int(st.seen.length)] = rev;
    }
    await sleep(rng.range(0, 300));
  }
}

/** The probe's own session and names (never touched by the loops); steps run one after another on `probeChain`. */
let probeSession: LiveSession | undefined;
let probeNames = 0;
let probeChain: Promise<void> = Promise.resolve();

async function probeStep(step: ProbeStep): Promise<string> {
  if (stopping) return 'the worker is stopping';
  const ns = cfg.lockNamespaces[0]!;
  if (step === 'open') {
    probeSession = await openSession(ns);
    return probeSession ? `opened ${probeSession.id}` : 'OpenSession failed';
  }
  if (!probeSession || probeSession.dead) return 'no live probe session';
  const name = probeName(ns, cfg.id, ++probeNames);
  const r = await acquire(probeSession, name, 'X', 0);
  if (r.kind !== 'granted') return `acquire ${name}: ${r.kind}`;
  await getLock(name);
  return `acquire ${name}: granted with token ${r.token}, then read back`;
}

function onProbe(step: ProbeStep, id: number): void {
  probeChain = probeChain.then(async () => {
    const outcome = await probeStep(step).catch((e: unknown) => `failed: ${(e as Error)?.message ?? String(e)}`);
    const answer: ProbeAnswer = { probeDone: id, outcome };
    process.send?.(answer);
  });
}

async function main(): Promise<void> {
  ka.start();
  const loops: Promise<void>[] = [];
  for (let k = 0; k < cfg.lockLoops; k++) loops.push(lockLoop(k + rng.int(cfg.lockNamespaces.length)));
  for (let k = 0; k < cfg.counterLoops; k++) loops.push(counterLoop());
  for (let k = 0; k < cfg.churnLoops; k++) loops.push(churnLoop());
  for (let k = 0; k < cfg.watchLoops; k++) loops.push(watchLoop());
  await Promise.all(loops);
  await probeChain;
  if (probeSession && !probeSession.dead) await closeSession(probeSession);
  ka.stop();
  rpc.close();
  if (kaRpc !== rpc) kaRpc.close();
  agent.destroy();
  await hist.close();
  process.send?.({ stopped: true });
  process.exit(0);
}

process.on('message', (m: unknown) => {
  if (m === 'stop') stopping = true;
  else if (isProbeRequest(m)) onProbe(m.probe, m.id);
});
// The harness went away: stop rather than run on unsupervised.
process.on('disconnect', () => {
  stopping = true;
  setTimeout(() => process.exit(1), 20_000).unref();
});
// Under a skewed clock the history waits for the harness's real time to map its own onto.
const anchored = needsClockAnchor()
  ? anchorClock(
      () =>
        new Promise<number>((resolve) => {
          const onMessage = (m: unknown): void => {
            if (typeof m === 'object' && m !== null && typeof (m as { clockAnchorMs?: unknown }).clockAnchorMs === 'number') {
              process.off('message', onMessage);
              resolve((m as { clockAnchorMs: number }).clockAnchorMs);
            }
          };
          process.on('message', onMessage);
          process.send?.({ clockAnchorPlease: true });
        }),
    )
  : Promise.resolve();
anchored.then(main).catch((e: unknown) => {
  process.stderr.write(`chaos worker ${cfg.id}: ${(e as Error)?.stack ?? String(e)}\n`);
  process.exit(1);
});
