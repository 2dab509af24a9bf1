// The Fencer side of every load: a raw grpc-js client that behaves like the
// SDK (one target at a time, following leader hints, retrying retryable
// errors with the same request, counted as failed calls), sessions with
// lock / tryLock / unlock / read, the KeepAlive wire for the raw-frame
// generator, HeartbeatBatch (a session proxy's call) and prefix watches.
// FencerCell and FencerFleet extend it with their processes.
import { Metadata, credentials } from '@grpc/grpc-js';
import { FencerError } from '@fencer/base';
import { fromServiceError, internalpb, isRetryable, lockservice } from '@fencer/protocol';
import { readVarint, skipField, varint } from '../grpc-frames.mjs';
import { nowMs, pool, sleep } from '../measure.mjs';

const GRANTED = 1;
const QUEUED = 2;
const ACQUIRED_EVENT = 2;
export const NAMESPACE = 'bench';
/** A retried call gives up after this long. */
const CALL_BUDGET_MS = 30_000;
/** Deadline of one attempt. */
const CALL_TIMEOUT_MS = 10_000;
/** A blocking acquire waits this long at the server; its attempt's deadline is longer. */
const ACQUIRE_WAIT_MS = 60_000;
const ACQUIRE_TIMEOUT_MS = 75_000;
/** Sessions are opened this many at a time by openManySessions. */
const SESSION_OPEN_WIDTH = 128;
/** Request ids, unique in this process: a session may be driven through several clients (paths) at once. */
let requestSeq = 0;

export class FencerClientSystem {
  constructor() {
    this.failures = 0;
    this.channels = new Map();
    /** Where calls go now; `endpoints` are where they may go (set by the subclass on start). */
    this.target = undefined;
    this.endpoints = [];
    /** gRPC channel credentials of this client's channels: plaintext unless a subclass sets TLS (a --secure fleet). */
    this.channelCredentials = undefined;
  }

  raw(address, Client = lockservice.LockServiceClient) {
    const k = `${Client.serviceName ?? Client.name}@${address}`;
    let c = this.channels.get(k);
    if (!c) {
      c = new Client(address, this.channelCredentials ?? credentials.createInsecure(), { 'grpc.per_rpc_retry_buffer_size': 0 });
      this.channels.set(k, c);
    }
    return c;
  }

  once(address, method, req, timeoutMs) {
    return new Promise((resolve, reject) =>
      this.raw(address)[method](req, new Metadata(), { deadline: Date.now() + timeoutMs }, (err, res) =>
        err ? reject(fromServiceError(err)) : resolve(res),
      ),
    );
  }

  /** After a failed call to `target`: the leader it hinted at, else the next endpoint. */
  nextTarget(target, fe) {
    if (fe.leaderHint && fe.leaderHint !== target && this.endpoints.includes(fe.leaderHint)) return fe.leaderHint;
    return this.endpoints[(this.endpoints.indexOf(target) + 1) % this.endpoints.length];
  }

  /** One unary call as the SDK makes it; resolves with the answer and the start of the attempt that succeeded. */
  async call(method, req, { budgetMs = CALL_BUDGET_MS, timeoutMs = CALL_TIMEOUT_MS } = {}) {
    const until = nowMs() + budgetMs;
    for (let attempt = 1; ; attempt++) {
      const target = this.target;
      const startedMs = nowMs();
      try {
        return { res: await this.once(target, method, req, timeoutMs), startedMs };
      } catch (e) {
        const fe = e instanceof FencerError ? e : new FencerError('INTERNAL', String(e));
        this.failures++;
        if (!isRetryable(fe.code) || nowMs() > until) throw fe;
        if (this.target === target) this.target = this.nextTarget(target, fe);
        await sleep(Math.min(100, 10 * attempt));
      }
    }
  }

  async openSession(ttlS) {
    const { res } = await this.call('openSession', { clientId: 'bench', ttlMs: ttlS * 1000, namespace: NAMESPACE });
    return this.sessionOf(res.sessionId);
  }

  /** A session opened elsewhere (through another path to the same cell), driven through this client. */
  sessionOf(sessionId) {
    return new FencerSession(this, sessionId);
  }

  lockName(parts) {
    return `/ls/${NAMESPACE}/${parts}`;
  }

  /** Opens n sessions (in `namespaces`, round robin) with a TTL of ttlS; resolves with their ids. */
  openManySessions(n, ttlS, namespaces = [NAMESPACE]) {
    return pool(n, SESSION_OPEN_WIDTH, async (i) => {
      const req = { clientId: 'bench-ka', ttlMs: ttlS * 1000, namespace: namespaces[i % namespaces.length] };
      return (await this.call('openSession', req)).res.sessionId;
    });
  }

  /** KeepAliveRequest { session_id = 1 } out; KeepAliveResponse { session_id = 1; ttl_ms_remaining = 2; expired = 3 } back. */
  keepAliveWire() {
    return {
      path: '/lockservice.v1.LockService/KeepAlive',
      encode: (id) => Buffer.concat([Buffer.from([0x0a]), varint(Buffer.byteLength(id)), Buffer.from(id)]),
      keyOf: (id) => id,
      decode: (b, at, end) => {
        let key;
        let expired = false;
        while (at < end) {
          const tag = b[at++];
          if (tag === 0x0a) {
            const [len, from] = readVarint(b, at);
            key = b.toString('latin1', from, from + len);
            at = from + len;
          } else if (tag === 0x18) expired = b[at++] !== 0;
          else at = skipField(b, tag, at);
        }
        return { key, expired };
      },
    };
  }

  /** One HeartbeatBatch to the leader, as a session proxy sends it; resolves with the sessions answered. */
  heartbeatBatch(ids) {
    const c = this.raw(this.target, internalpb.CellInternalClient);
    return new Promise((resolve, reject) =>
      c.heartbeatBatch(
        { sessionIds: ids, proxyId: 'bench-proxy', tokens: [], tokenIndex: [] },
        new Metadata(),
        { deadline: Date.now() + CALL_TIMEOUT_MS },
        (err, res) => (err ? reject(err) : resolve(res.sessions.length)),
      ),
    );
  }

  /** A prefix watch on watchEndpoints()[i mod n]: onEvent(name) per ACQUIRED event; resolves once the stream is live. */
  watch(i, prefix, onEvent) {
    const at = this.watchEndpoints();
    const s = this.raw(at[i % at.length]).watch({ name: prefix, prefix: true, sinceRevision: 0 });
    let live = false;
    return new Promise((resolve, reject) => {
      s.on('data', (e) => {
        if (e.type === ACQUIRED_EVENT) onEvent(e.name);
        if (!live) {
          live = true;
          resolve({ close: () => s.cancel() });
        }
      });
      s.on('error', (e) => {
        if (!live) reject(e);
      });
    });
  }

  closeChannels() {
    for (const c of this.channels.values()) c.close();
    this.channels.clear();
  }
}

class FencerSession {
  constructor(system, sessionId) {
    this.system = system;
    this.sessionId = sessionId;
  }

  requestId() {
    return `b${++requestSeq}`;
  }

  /** Blocking acquire; resolves with a handle and the start of the attempt that succeeded. */
  async lock(name) {
    const req = { sessionId: this.sessionId, name, mode: 1, waitMs: ACQUIRE_WAIT_MS, requestId: this.requestId(), lockDelayMs: 0 };
    for (;;) {
      const { res, startedMs } = await this.system.call('acquire', req, { timeoutMs: ACQUIRE_TIMEOUT_MS });
      if (res.status === GRANTED) return { name, token: res.token, startedMs };
      if (res.status !== QUEUED) throw new Error(`acquire of ${name} ended ${res.status}`);
      // QUEUED: the held-open call ended early; the same request id resumes the wait.
    }
  }

  /** Try-lock: a handle when granted, null when someone else holds it. */
  async tryLock(name) {
    const req = { sessionId: this.sessionId, name, mode: 1, waitMs: 0, requestId: this.requestId(), lockDelayMs: 0 };
    const { res } = await this.system.call('acquire', req);
    return res.status === GRANTED ? { name, token: res.token } : null;
  }

  async unlock(handle) {
    const { res } = await this.system.call('release', { sessionId: this.sessionId, name: handle.name, token: handle.token });
    if (!res.ok) throw new Error(`release of ${handle.name} token ${handle.token} was not current`);
  }

  /** Linearizable read of a lock's current token (CheckToken). */
  async read(handle) {
    const { res } = await this.system.call('checkToken', { name: handle.name, token: handle.token });
    if (!res.current) throw new Error(`token ${handle.token} of ${handle.name} is not current`);
  }

  async close() {
    await this.system.call('closeSession', { sessionId: this.sessionId }).catch(() => {});
  }
}
