// A tenant with many sessions, held locks and queued waiters, built and kept
// alive over raw gRPC (one channel to a router, one KeepAlive stream to a
// session proxy) for the move tests and the moves bench suite: a thousand
// SDK clients would be a thousand channels and timers on a shared machine.
// Calls behave like the SDK's: a retryable error (a frozen namespace, a
// cell without a leader, a router re-routing) is retried with the same
// request, so an Acquire retried with its request_id resumes its wait.
import { credentials, Metadata } from '@grpc/grpc-js';
import { fromServiceError, isRetryable, lockservice } from '@fencer/protocol';

const GRANTED = 1;
const QUEUED = 2;
/** Deadline of one unary attempt. */
const CALL_TIMEOUT_MS = 10_000;
/** A retried call gives up after this long. */
const CALL_BUDGET_MS = 60_000;
/** A queued waiter's wait at the server: longer than any test around it. */
const WAITER_WAIT_MS = 600_000;
/** Calls in flight at once while building the tenant. */
const BUILD_WIDTH = 64;
/** Pause after a failed attempt before the next. */
const RETRY_PAUSE_MS = 50;

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

async function inPool(count, width, fn) {
  const out = new Array(count);
  let next = 0;
  const worker = async () => {
    while (next < count) {
      const i = next++;
      out[i] = await fn(i);
    }
  };
  await Promise.all(Array.from({ length: Math.min(width, count) }, worker));
  return out;
}

export class TenantLoad {
  /**
   * @param {{ router: string, proxy: string, namespace: string, ttlMs?: number, heartbeatEveryMs?: number }} opts
   */
  constructor(opts) {
    this.namespace = opts.namespace;
    this.ttlMs = opts.ttlMs ?? 10_000;
    this.heartbeatEveryMs = opts.heartbeatEveryMs ?? Math.floor(this.ttlMs / 4);
    this.client = new lockservice.LockServiceClient(opts.router, credentials.createInsecure());
    this.proxyClient = new lockservice.LockServiceClient(opts.proxy, credentials.createInsecure());
    /** Session ids, in the order they were opened. */
    this.sessions = [];
    /** name -> { sessionId, token } of every grant acknowledged by buildHeld. */
    this.held = new Map();
    /** Waiters queued by queueWaiters: { name, sessionId, requestId, outcome: Promise<{token}> }. */
    this.waiters = [];
    /** Sessions a KeepAlive answer called expired, with when. */
    this.expired = [];
    /**
     * KeepAlive answers with no TTL and not expired, with when: a move's
     * source extends no lease while the namespace is frozen there (the
     * target gives each imported session a full TTL), so these come during
     * a move and promise nothing either way.
     */
    this.unextended = [];
    /** session id -> wall ms of its last KeepAlive answer with TTL left. */
    this.lastAnswerMs = new Map();
    /** Retryable failures seen, by code (what the move cost the callers). */
    this.retries = new Map();
    this.closed = false;
    this.requestSeq = 0;
  }

  name(...parts) {
    return `/ls/${this.namespace}/${parts.join('/')}`;
  }

  once(method, req, timeoutMs) {
    return new Promise((resolve, reject) =>
      this.client[method](req, new Metadata(), { deadline: Date.now() + timeoutMs }, (err, res) =>
        err ? reject(fromServiceError(err)) : resolve(res),
      ),
    );
  }

  /** One unary call through the router, retried on retryable errors within the budget. */
  async call(method, req, { timeoutMs = CALL_TIMEOUT_MS, budgetMs = CALL_BUDGET_MS } = {}) {
    const until = Date.now() + budgetMs;
    for (;;) {
      try {
        return await this.once(method, req, timeoutMs);
      } catch (e) {
        // A tenant created a moment ago may not be in the router's routing table yet: its first sessions retry that too.
        const routingLag = method === 'openSession' && e.code === 'NAMESPACE_NOT_FOUND';
        if (this.closed || !(isRetryable(e.code) || routingLag) || Date.now() > until) {
          e.message = `${method}${req.name ? ` ${req.name}` : ''}${req.sessionId ? ` (session ${req.sessionId})` : ''}: ${e.message}`;
          throw e;
        }
        this.retries.set(e.code, (this.retries.get(e.code) ?? 0) + 1);
        await sleep(RETRY_PAUSE_MS);
      }
    }
  }

  /**
   * Opens `count` sessions in the namespace. Each joins `sessions` (and the
   * KeepAlive stream, when started) as soon as it is open: opening a
   * thousand on a loaded machine can take longer than a TTL.
   */
  async openSessions(count) {
    return inPool(count, BUILD_WIDTH, async (i) => {
      const res = await this.call('openSession', { clientId: `tenant-load-${i}`, ttlMs: this.ttlMs, namespace: this.namespace });
      this.sessions.push(res.sessionId);
      return res.sessionId;
    });
  }

  /** Heartbeats every session on one KeepAlive stream to the proxy, reopened when it breaks, until close(). */
  startKeepAlive() {
    const loop = async () => {
      while (!this.closed) {
        const stream = this.proxyClient.keepAlive();
        stream.on('data', (res) => {
          if (res.expired) this.expired.push({ sessionId: res.sessionId, atMs: Date.now() });
          else if (Number(res.ttlMsRemaining) === 0) this.unextended.push({ sessionId: res.sessionId, atMs: Date.now() });
          else this.lastAnswerMs.set(res.sessionId, Date.now());
        });
        const ended = new Promise((resolve) => {
          stream.on('error', resolve);
          stream.on('end', resolve);
        });
        while (!this.closed) {
          for (const id of [...this.sessions]) stream.write({ sessionId: id });
          const broke = await Promise.race([ended.then(() => true), sleep(this.heartbeatEveryMs).then(() => false)]);
          if (broke) break;
        }
        stream.end();
        stream.cancel();
        if (!this.closed) await sleep(RETRY_PAUSE_MS);
      }
    };
    this.keepAliveDone = loop();
  }

  /** Session i holds `perSession` locks held/s<i>/l<j>, each by a try-lock; records every acknowledged grant. */
  async holdLocks(perSession) {
    await inPool(this.sessions.length * perSession, BUILD_WIDTH, async (k) => {
      const i = Math.floor(k / perSession);
      const name = this.name('held', `s${i}`, `l${k % perSession}`);
      const sessionId = this.sessions[i];
      const req = { sessionId, name, mode: 1, waitMs: 0, requestId: `h${k}`, lockDelayMs: 0 };
      const res = await this.call('acquire', req);
      if (res.status !== GRANTED) throw new Error(`try-lock of ${name} answered status ${res.status}`);
      this.held.set(name, { sessionId, token: Number(res.token) });
    });
  }

  /**
   * `count` waiters queued behind the first lock of sessions 0..queues-1:
   * waiter w waits for held/s<w mod queues>/l0 from session queues + w, so
   * each queue has count/queues waiters from distinct sessions. Each waits
   * in a held Acquire resumed with its request_id whenever the call ends
   * early; resolves once every waiter is in its queue (per ListLocks).
   */
  async queueWaiters(count, queues) {
    if (this.sessions.length < queues + count) throw new Error(`${count} waiters on ${queues} queues need ${queues + count} sessions`);
    for (let w = 0; w < count; w++) {
      const name = this.name('held', `s${w % queues}`, 'l0');
      const sessionId = this.sessions[queues + w];
      const requestId = `w${w}`;
      const outcome = this.waitFor({ sessionId, name, mode: 1, waitMs: WAITER_WAIT_MS, requestId, lockDelayMs: 0 });
      outcome.catch(() => undefined);
      this.waiters.push({ name, sessionId, requestId, outcome });
    }
    const deadline = Date.now() + CALL_BUDGET_MS;
    for (;;) {
      const state = await this.listLocks(this.name('held') + '/');
      const queued = [...state.values()].reduce((n, l) => n + l.waiters.length, 0);
      if (queued === count) return state;
      if (Date.now() > deadline) throw new Error(`only ${queued} of ${count} waiters queued`);
      await sleep(100);
    }
  }

  /** A blocking Acquire, resumed with the same request_id after QUEUED or a retryable error, until granted. */
  async waitFor(req) {
    for (;;) {
      const res = await this.call('acquire', req, { timeoutMs: WAITER_WAIT_MS + CALL_TIMEOUT_MS, budgetMs: WAITER_WAIT_MS });
      if (res.status === GRANTED) return { token: Number(res.token) };
      if (res.status !== QUEUED) throw new Error(`acquire of ${req.name} answered status ${res.status}`);
    }
  }

  async release(name, sessionId, token) {
    const res = await this.call('release', { sessionId, name, token });
    return res.ok;
  }

  /** Every lock under `prefix`: name -> { holders: [{sessionId, token}], waiters: [requestId] }, read page by page. */
  async listLocks(prefix) {
    const out = new Map();
    let pageToken = '';
    do {
      const res = await this.call('listLocks', { prefix, limit: 1000, pageToken });
      for (const l of res.locks) {
        out.set(l.name, {
          holders: l.holders.map((h) => ({ sessionId: h.sessionId, token: Number(h.token) })),
          waiters: l.waiters.map((w) => w.requestId),
        });
      }
      pageToken = res.nextPageToken;
    } while (pageToken !== '');
    return out;
  }

  /** Resolves once every session got a KeepAlive answer with TTL left after `sinceMs`, or rejects after timeoutMs. */
  async allHeartbeatsAnsweredSince(sinceMs, timeoutMs = 60_000) {
    const deadline = Date.now() + timeoutMs;
    for (;;) {
      const behind = this.sessions.filter((id) => (this.lastAnswerMs.get(id) ?? 0) <= sinceMs);
      if (behind.length === 0) return;
      if (Date.now() > deadline) throw new Error(`${behind.length} sessions got no heartbeat answer since the move (first: ${behind[0]})`);
      await sleep(100);
    }
  }

  async close() {
    this.closed = true;
    await this.keepAliveDone;
    this.client.close();
    this.proxyClient.close();
  }
}
