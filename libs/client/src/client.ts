/**
 * FencerClient: the SDK's entry point. It talks to a list of endpoints (a
 * cell's nodes today, the router later), opens one session per namespace on
 * first use, keeps all of them alive on one KeepAlive stream, and hands out
 * lock handles whose AbortSignal fires the moment the lock may be lost.
 *
 *   const client = new FencerClient({ endpoints: ['127.0.0.1:7001'] });
 *   await client.withLock('/ls/payments/invoice-42', async (lock) => {
 *     await db.query(fencedUpdate({ table: 'invoices', id: 42, token: lock.token, set: { paid: true } }));
 *   });
 */
import { EventEmitter } from 'node:events';
import { hostname } from 'node:os';
import { randomBytes } from 'node:crypto';
import { assert, FencerError, SeededRandom, type Random } from '@fencer/base';
import { type ChannelCredentials, Metadata } from '@grpc/grpc-js';
import { checkNamespace, parseLockName, parseLockPrefix } from '@fencer/contract';
import { lockservice } from '@fencer/protocol';
import { lockFromPb, holderFromPb, modeToPb } from './convert.js';
import { EndpointPool } from './endpoints.js';
import { LockTimeoutError } from './errors.js';
import { KeepAlive, type KeepAliveObserver } from './keepalive.js';
import { CLIENT_DEFAULTS, CLIENT_LIMITS, DRIFT_PPM_MIN } from './limits.js';
import { LockHandle } from './lock-handle.js';
import { callWithRetry, type CallContext, type RetryPolicy } from './retry.js';
import { DirectRoutes } from './direct-routes.js';
import { systemScheduler, type Scheduler } from './scheduler.js';
import { Session } from './session.js';
import type { LockInfo, LockMode, LockPage, LockReadResult, TokenCheck, WatchEventInfo } from './types.js';
import { watchEvents, type WatchOptions } from './watch.js';

const { AcquireStatus } = lockservice;

// Input the contract refuses fails before any call, with the contract's code and message.

/** The namespace of a lock name ("/ls/<namespace>/<rest>"), or INVALID_NAME. */
function namespaceOfName(name: string): string {
  const parsed = parseLockName(name);
  if (!parsed.ok) throw new FencerError(parsed.code, parsed.message);
  return parsed.namespace;
}

/** A prefix must lie inside one namespace ("/ls/<namespace>/..."), or INVALID_NAME. */
function checkPrefix(prefix: string): void {
  const parsed = parseLockPrefix(prefix);
  if (!parsed.ok) throw new FencerError(parsed.code, parsed.message);
}

function checkNamespaceName(namespace: string): void {
  const problem = checkNamespace(namespace);
  if (problem) throw new FencerError(problem.code, problem.message);
}

export interface FencerClientOptions {
  /** host:port of each node (or router) to call. */
  readonly endpoints: readonly string[];
  /**
   * host:port of session proxies: the KeepAlive stream goes to them (failing
   * over between them), every other call to `endpoints`. Without proxies the
   * stream goes to `endpoints` too.
   */
  readonly proxies?: readonly string[];
  /** Names this process for operators; default "<hostname>/<pid>". */
  readonly clientId?: string;
  /** Requested session TTL (the server clamps it). Default 12 s. */
  readonly ttlMs?: number;
  /** How long a session in jeopardy keeps trying before it is declared expired. Default 45 s. */
  readonly gracePeriodMs?: number;
  /** Clock drift allowance in ppm of the TTL (at least 500). */
  readonly driftPpm?: number;
  /** Fixed safety margin subtracted from every local lease. Default 100 ms. */
  readonly driftMarginMs?: number;
  readonly callTimeoutMs?: number;
  readonly retryBudgetMs?: number;
  readonly backoffBaseMs?: number;
  readonly backoffMaxMs?: number;
  /** Time and timers (tests inject a ManualScheduler). */
  readonly scheduler?: Scheduler;
  /** Randomness for request ids and jitter (tests inject a SeededRandom). */
  readonly random?: Random;
  /**
   * How the channels are secured: grpc-js credentials, e.g.
   * `credentials.createSsl(ca)` for a fleet started with `--secure`.
   * Default: plaintext.
   */
  readonly credentials?: ChannelCredentials;
  /**
   * The tenant's token, sent as `authorization: Bearer <token>` on every
   * call and stream (the contract's header); it grants its own namespace only.
   */
  readonly token?: string;
  /**
   * Direct mode (decision 0015): unary calls go straight to the cell replica
   * that a router named for their namespace, and back through a router on
   * NAMESPACE_NOT_HERE, NOT_LEADER or a transport error. `endpoints` are
   * then routers; KeepAlive and watches still go through the front ends.
   * Default off: every call through `endpoints`.
   */
  readonly direct?: boolean;
  /** Told about every failed attempt of a unary call. */
  readonly onRetry?: CallContext['onRetry'];
  /** Told about heartbeats and stream failures. */
  readonly keepAliveObserver?: KeepAliveObserver;
}

export interface AcquireOptions {
  /** Default 'exclusive'. */
  readonly mode?: LockMode;
  /** How long to wait in the FIFO queue; 0 is a try-lock. Default 30 s. */
  readonly waitMs?: number;
  /** Gives up waiting: the call rejects with the signal's reason and the cell drops the waiter. */
  readonly signal?: AbortSignal;
  /** Lock-delay: if this session expires while holding the lock, the cell holds the lock back this long. */
  readonly lockDelayMs?: number;
}

export interface ClientEvents {
  jeopardy: [session: Session];
  safe: [session: Session];
  expired: [session: Session];
}

/** A token a metadata value can carry: visible ASCII, no spaces (gRPC forbids the rest in an ASCII value). */
const TOKEN_SHAPE = /^[\x21-\x7e]{1,4096}$/;

/** The metadata of every call and stream: `authorization: Bearer <token>`, made fresh each time (grpc-js may change what it is given). */
function bearerMetadata(token: string): () => Metadata {
  if (!TOKEN_SHAPE.test(token)) throw new RangeError('token must be 1 to 4096 visible ASCII characters without spaces');
  return () => {
    const md = new Metadata();
    md.set('authorization', `Bearer ${token}`);
    return md;
  };
}

function randomSeed(): number {
  return randomBytes(6).readUIntBE(0, 6);
}

export class FencerClient extends EventEmitter<ClientEvents> {
  readonly clientId: string;
  private readonly ctx: CallContext;
  private readonly keepAlive: KeepAlive;
  private readonly keepAliveCtx: CallContext;
  private readonly sessions = new Map<string, Promise<Session>>();
  private readonly closeController = new AbortController();
  private readonly ttlMs: number;
  private readonly gracePeriodMs: number;
  private readonly driftPpm: number;
  private readonly driftMarginMs: number;
  private closing: Promise<void> | undefined;

  constructor(options: FencerClientOptions) {
    super();
    const policy: RetryPolicy = {
      callTimeoutMs: options.callTimeoutMs ?? CLIENT_DEFAULTS.callTimeoutMs,
      retryBudgetMs: options.retryBudgetMs ?? CLIENT_DEFAULTS.retryBudgetMs,
      backoffBaseMs: options.backoffBaseMs ?? CLIENT_DEFAULTS.backoffBaseMs,
      backoffMaxMs: options.backoffMaxMs ?? CLIENT_DEFAULTS.backoffMaxMs,
    };
    this.ttlMs = options.ttlMs ?? CLIENT_DEFAULTS.ttlMs;
    this.gracePeriodMs = options.gracePeriodMs ?? CLIENT_DEFAULTS.gracePeriodMs;
    this.driftPpm = options.driftPpm ?? CLIENT_DEFAULTS.driftPpm;
    this.driftMarginMs = options.driftMarginMs ?? CLIENT_DEFAULTS.driftMarginMs;
    if (!(Number.isSafeInteger(this.ttlMs) && this.ttlMs > 0)) throw new RangeError(`ttlMs must be a positive integer, got ${this.ttlMs}`);
    if (!(this.gracePeriodMs >= 0)) throw new RangeError(`gracePeriodMs must not be negative, got ${this.gracePeriodMs}`);
    if (!(this.driftPpm >= DRIFT_PPM_MIN)) throw new RangeError(`driftPpm must be at least ${DRIFT_PPM_MIN}, got ${this.driftPpm}`);
    if (!(this.driftMarginMs >= 0)) throw new RangeError(`driftMarginMs must not be negative, got ${this.driftMarginMs}`);
    if (!(policy.backoffBaseMs > 0 && policy.backoffBaseMs <= policy.backoffMaxMs))
      throw new RangeError('backoff needs 0 < backoffBaseMs <= backoffMaxMs');
    if (options.endpoints.length === 0) throw new RangeError('a client needs at least one endpoint (host:port)');
    this.clientId = options.clientId ?? `${hostname()}/${process.pid}`;
    this.ctx = {
      pool: new EndpointPool(options.endpoints, options.credentials),
      scheduler: options.scheduler ?? systemScheduler,
      random: options.random ?? new SeededRandom(randomSeed()),
      policy,
      ...(options.token !== undefined ? { metadata: bearerMetadata(options.token) } : {}),
      ...(options.onRetry ? { onRetry: options.onRetry } : {}),
      ...(options.direct ? { direct: new DirectRoutes() } : {}),
    };
    this.keepAliveCtx =
      options.proxies && options.proxies.length > 0
        ? { ...this.ctx, pool: new EndpointPool(options.proxies, options.credentials) }
        : this.ctx;
    this.keepAlive = new KeepAlive(this.keepAliveCtx, options.keepAliveObserver);
  }

  /** Where the KeepAlive stream goes: the proxies when configured, else the endpoints. */
  get keepAliveEndpoints(): { readonly all: readonly string[]; readonly current: string | undefined } {
    return { all: this.keepAliveCtx.pool.list(), current: this.keepAlive.address };
  }

  /** Direct mode's counts: calls sent straight to a replica, and those that went back to a router. Undefined when off. */
  get directCalls(): { readonly direct: number; readonly fallbacks: number } | undefined {
    const d = this.ctx.direct;
    return d ? { direct: d.direct, fallbacks: d.fallbacks } : undefined;
  }

  /** The endpoints known now (configured ones plus learned leader hints), and the one preferred. */
  get endpoints(): { readonly all: readonly string[]; readonly preferred: string } {
    return { all: this.ctx.pool.list(), preferred: this.ctx.pool.current() };
  }

  // ---- sessions ----

  /** The session of a namespace, opened on first use and reopened after an expiry. Waits while it is in jeopardy. */
  async session(namespace: string): Promise<Session> {
    checkNamespaceName(namespace);
    for (let i = 0; i < 2; i++) {
      this.checkOpen();
      const existing = this.sessions.get(namespace);
      if (existing) {
        const s = await existing.catch(() => undefined);
        if (s && s.state !== 'expired' && !s.closed) return s;
        if (this.sessions.get(namespace) === existing) this.sessions.delete(namespace);
        continue;
      }
      if (this.sessions.size >= CLIENT_LIMITS.sessionsMax) {
        throw new FencerError('QUOTA_EXCEEDED', `a client holds sessions in at most ${CLIENT_LIMITS.sessionsMax} namespaces`);
      }
      const opening = this.openSession(namespace);
      this.sessions.set(namespace, opening);
      opening.catch(() => {
        if (this.sessions.get(namespace) === opening) this.sessions.delete(namespace);
      });
      return opening;
    }
    throw new FencerError('SESSION_NOT_FOUND', `the session for namespace ${namespace} could not be kept open`);
  }

  private async openSession(namespace: string): Promise<Session> {
    // The lease counts from before the first attempt: the server's TTL started later than that.
    const sentMonoMs = this.ctx.scheduler.monoMs();
    const res = await callWithRetry<lockservice.OpenSessionRequest, lockservice.OpenSessionResponse>(
      this.ctx,
      'openSession',
      { clientId: this.clientId, ttlMs: this.ttlMs, namespace },
      { signal: this.closeController.signal },
    );
    assert(res.sessionId.length > 0 && res.ttlMs > 0, 'OpenSession answers a session id and its TTL');
    const session = new Session(
      res.sessionId,
      namespace,
      this.clientId,
      { ttlMs: res.ttlMs, gracePeriodMs: this.gracePeriodMs, driftPpm: this.driftPpm, driftMarginMs: this.driftMarginMs },
      sentMonoMs,
    );
    session.on('jeopardy', () => this.emit('jeopardy', session));
    session.on('safe', () => this.emit('safe', session));
    session.on('expired', () => this.emit('expired', session));
    this.keepAlive.add(session);
    return session;
  }

  /** Closes the session of a namespace: the cell releases its locks and drops its waits. */
  async closeSession(namespace: string): Promise<void> {
    const opening = this.sessions.get(namespace);
    if (!opening) return;
    this.sessions.delete(namespace);
    const s = await opening.catch(() => undefined);
    if (s) await this.closeOne(s);
  }

  private async closeOne(s: Session): Promise<void> {
    const wasLive = s.state !== 'expired' && !s.closed;
    s.markClosed();
    this.keepAlive.remove(s);
    if (!wasLive) return;
    try {
      await callWithRetry(this.ctx, 'closeSession', { sessionId: s.id }, { budgetMs: Math.min(this.ctx.policy.retryBudgetMs, 5_000) });
    } catch {
      // Best effort: a session the cell cannot be told about expires on its own after its TTL.
    }
  }

  // ---- locks ----

  /**
   * Acquires a lock and returns its handle, or rejects with LockTimeoutError
   * when the wait ends without a grant. Retries are idempotent (one
   * request_id per acquire); a wait the server ends early (QUEUED) resumes.
   */
  async acquire(name: string, options: AcquireOptions = {}): Promise<LockHandle> {
    const namespace = namespaceOfName(name);
    const mode = options.mode ?? 'exclusive';
    if (mode !== 'exclusive' && mode !== 'shared')
      throw new FencerError('INVALID_MODE', `mode must be 'exclusive' or 'shared', got ${String(mode)}`);
    const waitMs = options.waitMs ?? CLIENT_DEFAULTS.waitMs;
    if (!(Number.isSafeInteger(waitMs) && waitMs >= 0))
      throw new FencerError('INVALID_ARGUMENT', `waitMs must be a non-negative integer, got ${waitMs}`);
    const lockDelayMs = options.lockDelayMs ?? 0;
    if (!(Number.isSafeInteger(lockDelayMs) && lockDelayMs >= 0))
      throw new FencerError('INVALID_ARGUMENT', `lockDelayMs must be a non-negative integer, got ${lockDelayMs}`);
    const signal = options.signal ? AbortSignal.any([options.signal, this.closeController.signal]) : this.closeController.signal;
    const { scheduler } = this.ctx;
    const deadlineMonoMs = scheduler.monoMs() + waitMs;
    const session = await this.session(namespace);
    const requestId = this.newRequestId();
    for (let resumes = 0; resumes < CLIENT_LIMITS.acquireResumesMax; resumes++) {
      // Jeopardy: new operations wait until the session is safe again (or expired).
      await session.whenUsable(signal);
      const remainingMs = waitMs === 0 ? 0 : Math.max(1, Math.ceil(deadlineMonoMs - scheduler.monoMs()));
      const res = await callWithRetry<lockservice.AcquireRequest, lockservice.AcquireResponse>(
        this.ctx,
        'acquire',
        { sessionId: session.id, name, mode: modeToPb(mode), waitMs: remainingMs, requestId, lockDelayMs },
        { signal, timeoutMs: remainingMs + this.ctx.policy.callTimeoutMs },
      ).catch((e: unknown) => {
        if (e instanceof FencerError && e.code === 'SESSION_NOT_FOUND') session.applyTransition(session.lease.expire());
        throw e;
      });
      switch (res.status) {
        case AcquireStatus.ACQUIRE_STATUS_GRANTED: {
          assert(res.token > 0, 'a grant carries a token');
          const handle = new LockHandle(name, mode, res.token, session, (h) => this.releaseHandle(h));
          if (session.state === 'expired' || session.closed) {
            handle.lose(session.closed ? 'closed' : 'expired');
            throw session.goneError();
          }
          session.addHandle(handle);
          return handle;
        }
        case AcquireStatus.ACQUIRE_STATUS_TIMED_OUT:
          throw new LockTimeoutError(name, res.holders.map(holderFromPb), res.revision, waitMs);
        case AcquireStatus.ACQUIRE_STATUS_QUEUED:
          continue; // still in the FIFO queue: resume with the same request_id
        default:
          throw new FencerError('INTERNAL', `Acquire answered an unknown status ${res.status}`);
      }
    }
    throw new FencerError('DEADLINE_EXCEEDED', `acquire ${name}: still queued after ${CLIENT_LIMITS.acquireResumesMax} resumes`);
  }

  /** Runs fn while holding the lock and releases it afterwards, also when fn throws. */
  withLock<T>(name: string, fn: (handle: LockHandle) => Promise<T> | T): Promise<T>;
  withLock<T>(name: string, options: AcquireOptions, fn: (handle: LockHandle) => Promise<T> | T): Promise<T>;
  async withLock<T>(
    name: string,
    a: AcquireOptions | ((h: LockHandle) => Promise<T> | T),
    b?: (h: LockHandle) => Promise<T> | T,
  ): Promise<T> {
    const options = typeof a === 'function' ? {} : a;
    const fn = typeof a === 'function' ? a : b;
    if (!fn) throw new TypeError('withLock needs a function to run');
    const handle = await this.acquire(name, options);
    try {
      return await fn(handle);
    } finally {
      await handle.release().catch(() => false);
    }
  }

  private async releaseHandle(handle: LockHandle): Promise<boolean> {
    const session = handle.session;
    // Unlike new operations, a release does not wait out a jeopardy: letting go early is always safe,
    // and a cell that answers it has the session anyway.
    try {
      const res = await callWithRetry<lockservice.ReleaseRequest, lockservice.ReleaseResponse>(this.ctx, 'release', {
        sessionId: session.id,
        name: handle.name,
        token: handle.token,
      });
      return res.ok;
    } catch (e) {
      if (e instanceof FencerError && e.code === 'SESSION_NOT_FOUND') return false; // expired: the lock is released anyway
      throw e;
    } finally {
      session.removeHandle(handle);
    }
  }

  // ---- reads ----

  /** Linearizable view of one lock. */
  async getLock(name: string): Promise<LockReadResult> {
    namespaceOfName(name);
    const res = await callWithRetry<lockservice.GetLockRequest, lockservice.GetLockResponse>(
      this.ctx,
      'getLock',
      { name },
      { signal: this.closeController.signal },
    );
    return { lock: lockFromPb(res.lock, name), revision: res.revision };
  }

  /** Is token current for name? Linearizable: what a resource asks before trusting a token it cannot compare. */
  async checkToken(name: string, token: number): Promise<TokenCheck> {
    namespaceOfName(name);
    const res = await callWithRetry<lockservice.CheckTokenRequest, lockservice.CheckTokenResponse>(
      this.ctx,
      'checkToken',
      { name, token },
      { signal: this.closeController.signal },
    );
    return { current: res.current, latestToken: res.latestToken, revision: res.revision };
  }

  /** One page of live locks under a prefix ("/ls/<namespace>/..."). */
  async listLocks(prefix: string, options: { limit?: number; pageToken?: string } = {}): Promise<LockPage> {
    checkPrefix(prefix);
    const res = await callWithRetry<lockservice.ListLocksRequest, lockservice.ListLocksResponse>(
      this.ctx,
      'listLocks',
      { prefix, limit: options.limit ?? 0, pageToken: options.pageToken ?? '' },
      { signal: this.closeController.signal },
    );
    return { locks: res.locks.map((l) => lockFromPb(l)), nextPageToken: res.nextPageToken, revision: res.revision };
  }

  /** Every live lock under a prefix, page by page. */
  async *listAllLocks(prefix: string, pageSize = 0): AsyncGenerator<LockInfo, void, undefined> {
    let pageToken = '';
    for (let pages = 0; pages < 1_000_000; pages++) {
      const page = await this.listLocks(prefix, { limit: pageSize, pageToken });
      yield* page.locks;
      if (page.nextPageToken === '') return;
      pageToken = page.nextPageToken;
    }
  }

  /** Events of a lock, or of every lock under a prefix (a name ending in "/"), across reconnects. */
  watch(nameOrPrefix: string, options: WatchOptions = {}): AsyncGenerator<WatchEventInfo, void, undefined> {
    const signal = options.signal ? AbortSignal.any([options.signal, this.closeController.signal]) : this.closeController.signal;
    return watchEvents(this.ctx, nameOrPrefix, { ...options, signal });
  }

  // ---- life cycle ----

  /** Closes every session (releasing their locks), ends the KeepAlive stream and the watches. Idempotent. */
  close(): Promise<void> {
    this.closing ??= (async () => {
      const sessions = await Promise.all([...this.sessions.values()].map((p) => p.catch(() => undefined)));
      this.sessions.clear();
      await Promise.all(sessions.filter((s): s is Session => s !== undefined).map((s) => this.closeOne(s)));
      this.closeController.abort(new FencerError('CANCELLED', 'the client is closed'));
      this.keepAlive.close();
      this.ctx.pool.close();
      if (this.keepAliveCtx !== this.ctx) this.keepAliveCtx.pool.close();
    })();
    return this.closing;
  }

  private checkOpen(): void {
    if (this.closing) throw new FencerError('CANCELLED', 'the client is closed');
  }

  /** 128 random bits: unique per attempt within a session, reused by every retry of that attempt. */
  private newRequestId(): string {
    const r = this.ctx.random;
    return [r.nextU32(), r.nextU32(), r.nextU32(), r.nextU32()].map((n) => n.toString(16).padStart(8, '0')).join('');
  }
}
