/**
 * An in-process fake of the contract's LockService for client tests: a
 * grpc-js server on 127.0.0.1:0 with the contract's semantics kept minimal
 * (sessions, exclusive/shared locks with FIFO waiters, request_id dedupe,
 * revisions as tokens, watch history) and knobs for the failures a client
 * must survive: NOT_LEADER with a leader-hint, UNAVAILABLE before or after a
 * call took effect, paused heartbeats, session expiry, broken streams and
 * compacted watch history. It never expires sessions on its own: tests
 * decide when (expireSession), so they stay deterministic.
 */
import { EventEmitter } from 'node:events';
import {
  Server,
  ServerCredentials,
  type sendUnaryData,
  type ServerDuplexStream,
  type ServerUnaryCall,
  type ServerWritableStream,
  type ServiceError,
} from '@grpc/grpc-js';
import { FencerError, type ErrorCode } from '@fencer/base';
import { adminpb, lockservice, toServiceError } from '@fencer/protocol';

const { AcquireStatus, LockMode, WatchEventType } = lockservice;

type Method = 'openSession' | 'acquire' | 'release' | 'checkToken' | 'getLock' | 'listLocks' | 'closeSession' | 'keepAlive' | 'watch';

export interface InjectedFault {
  /** Which call fails; every method when omitted. */
  readonly method?: Method;
  readonly code: ErrorCode;
  readonly leaderHint?: string;
  /** Apply the call first, then answer the error: the client cannot know the outcome and must retry idempotently. */
  readonly afterApply?: boolean;
}

interface FakeSession {
  readonly id: string;
  readonly namespace: string;
  readonly clientId: string;
  readonly ttlMs: number;
  expired: boolean;
  readonly dedupe: Map<string, lockservice.AcquireResponse | 'QUEUED'>;
}

interface FakeWaiter {
  readonly sessionId: string;
  readonly clientId: string;
  readonly mode: lockservice.LockMode;
  readonly requestId: string;
  timer: ReturnType<typeof setTimeout> | undefined;
}

interface FakeLock {
  readonly name: string;
  holders: lockservice.Holder[];
  waiters: FakeWaiter[];
}

interface PendingAcquire {
  readonly name: string;
  readonly answer: (res: lockservice.AcquireResponse) => void;
}

interface Watcher {
  readonly name: string;
  readonly prefix: boolean;
  readonly call: ServerWritableStream<lockservice.WatchRequest, lockservice.WatchEvent>;
}

export interface FakeCall {
  readonly method: Method;
  readonly request: unknown;
}

export interface FakeLockServiceOptions {
  /** A held-open Acquire answers QUEUED after this long (the waiter stays queued); default: hold until decided. */
  readonly acquireHoldMs?: number;
  /** TTL the fake grants when a client asks for 0. */
  readonly ttlDefaultMs?: number;
  /** Watch history kept; older revisions answer COMPACTED. */
  readonly historyMax?: number;
  /** Calls remembered in `calls`. */
  readonly callsMax?: number;
  /**
   * Expire sessions on the fake's own (real) clock, as a leader does: a
   * session whose heartbeats stop for its TTL is expired. Off by default, so
   * unit tests decide expiry themselves.
   */
  readonly autoExpire?: boolean;
  /** Also serve CellAdmin.Status with this answer (see `status`). */
  readonly adminStatus?: adminpb.StatusResponse;
}

export interface FakeEvents {
  heartbeat: [sessionId: string];
  call: [call: FakeCall];
  keepAliveOpened: [];
  /** A waiter joined a lock's queue. */
  queued: [name: string, sessionId: string, requestId: string];
  /** A waiter left a lock's queue without the lock (its wait ran out or was cancelled). */
  canceled: [name: string, sessionId: string, requestId: string];
}

export class FakeLockService extends EventEmitter<FakeEvents> {
  revision = 0;
  readonly sessions = new Map<string, FakeSession>();
  readonly locks = new Map<string, FakeLock>();
  readonly calls: FakeCall[] = [];
  /** NOT_LEADER with this hint on every call while set (this node "is a follower"). */
  notLeaderHint: string | undefined;
  /** Admin Status answer; tests may change it. */
  status: adminpb.StatusResponse | undefined;
  private readonly faults: InjectedFault[] = [];
  private readonly pending = new Map<string, PendingAcquire>();
  private readonly history: lockservice.WatchEvent[] = [];
  private floorRevision = 0;
  private readonly watchers = new Set<Watcher>();
  private readonly keepAlives = new Set<ServerDuplexStream<lockservice.KeepAliveRequest, lockservice.KeepAliveResponse>>();
  private heartbeatsPaused = false;
  private readonly heldHeartbeats: (() => void)[] = [];
  private nextSession = 1;
  private readonly expiryTimers = new Map<string, ReturnType<typeof setTimeout>>();
  private server!: Server;
  address = '';

  private constructor(private readonly options: FakeLockServiceOptions) {
    super();
    this.status = options.adminStatus;
  }

  static async start(options: FakeLockServiceOptions = {}, port = 0): Promise<FakeLockService> {
    const fake = new FakeLockService(options);
    fake.server = new Server();
    fake.server.addService(lockservice.LockServiceService, fake.handlers());
    fake.server.addService(adminpb.CellAdminService, fake.adminHandlers());
    const bound = await new Promise<number>((resolve, reject) =>
      fake.server.bindAsync(`127.0.0.1:${port}`, ServerCredentials.createInsecure(), (err, p) => (err ? reject(err) : resolve(p))),
    );
    fake.address = `127.0.0.1:${bound}`;
    return fake;
  }

  /** Listens on one more port with the same state: another "node" of the same cell. Returns its address. */
  async addPort(): Promise<string> {
    const bound = await new Promise<number>((resolve, reject) =>
      this.server.bindAsync('127.0.0.1:0', ServerCredentials.createInsecure(), (err, p) => (err ? reject(err) : resolve(p))),
    );
    return `127.0.0.1:${bound}`;
  }

  async stop(): Promise<void> {
    for (const t of this.expiryTimers.values()) clearTimeout(t);
    this.expiryTimers.clear();
    for (const p of this.pending.values()) p.answer(this.queuedAnswer(p.name));
    for (const l of this.locks.values()) for (const w of l.waiters) if (w.timer) clearTimeout(w.timer);
    this.server.forceShutdown();
  }

  // ---- knobs ----

  /** The next matching call fails with this error (one-shot; queue several for several failures). */
  injectFault(fault: InjectedFault): void {
    this.faults.push(fault);
  }

  pauseHeartbeats(): void {
    this.heartbeatsPaused = true;
  }

  /** Answers every heartbeat held while paused, then answers new ones at once. */
  resumeHeartbeats(): void {
    this.heartbeatsPaused = false;
    for (const answer of this.heldHeartbeats.splice(0)) answer();
  }

  /** Errors every open KeepAlive stream, as a crashing or deposed node would. */
  breakKeepAlives(code: ErrorCode = 'NO_LEADER', leaderHint?: string): void {
    for (const call of this.keepAlives) call.emit('error', toServiceError(new FencerError(code, 'the fake broke the stream', leaderHint)));
    this.keepAlives.clear();
  }

  /** Errors every open Watch stream. */
  breakWatches(code: ErrorCode = 'SHUTTING_DOWN'): void {
    for (const w of this.watchers) w.call.emit('error', toServiceError(new FencerError(code, 'the fake broke the stream')));
    this.watchers.clear();
  }

  /** Forgets watch history up to the current revision: resuming from an older one answers COMPACTED. */
  compactHistory(): void {
    this.floorRevision = this.revision;
    this.history.length = 0;
  }

  /**
   * Appends raw events to the watch history and sends them to matching
   * watchers, as one log entry that yields several events at one revision
   * would. The revision is taken as given (it must not go back).
   */
  appendEvents(events: readonly lockservice.WatchEvent[]): void {
    for (const ev of events) {
      this.revision = Math.max(this.revision, ev.revision);
      this.history.push(ev);
      for (const w of this.watchers) if (matches(w, ev.name)) w.call.write(ev);
    }
  }

  get keepAliveStreams(): number {
    return this.keepAlives.size;
  }

  /** Expires a session as the leader would: its locks are released (EXPIRED), its waits dropped, waiters promoted. */
  expireSession(sessionId: string): void {
    const s = this.sessions.get(sessionId);
    if (!s || s.expired) return;
    s.expired = true;
    this.dropSession(s, WatchEventType.WATCH_EVENT_TYPE_EXPIRED);
  }

  callsOf(method: Method): unknown[] {
    return this.calls.filter((c) => c.method === method).map((c) => c.request);
  }

  /** (Re)starts a session's expiry timer when autoExpire is on: the heartbeat reached the "leader" now. */
  private armExpiry(sessionId: string, ttlMs: number): void {
    if (!this.options.autoExpire) return;
    const old = this.expiryTimers.get(sessionId);
    if (old) clearTimeout(old);
    this.expiryTimers.set(
      sessionId,
      setTimeout(() => {
        this.expiryTimers.delete(sessionId);
        this.expireSession(sessionId);
      }, ttlMs),
    );
  }

  // ---- the state machine (minimal) ----

  private lock(name: string): FakeLock {
    let l = this.locks.get(name);
    if (!l) {
      l = { name, holders: [], waiters: [] };
      this.locks.set(name, l);
    }
    return l;
  }

  private state(l: FakeLock | undefined, name: string): lockservice.LockState {
    if (!l) return { name, mode: LockMode.LOCK_MODE_UNSPECIFIED, holders: [], waiters: [], delayed: false };
    return {
      name: l.name,
      mode: l.holders.length === 0 ? LockMode.LOCK_MODE_UNSPECIFIED : (l.holders[0] as lockservice.Holder).mode,
      holders: l.holders.map((h) => ({ ...h })),
      waiters: l.waiters.map((w) => ({ sessionId: w.sessionId, mode: w.mode, requestId: w.requestId, clientId: w.clientId })),
      delayed: false,
    };
  }

  private grantable(l: FakeLock, mode: lockservice.LockMode): boolean {
    if (l.holders.length === 0) return true;
    return mode === LockMode.LOCK_MODE_SHARED && l.holders.every((h) => h.mode === LockMode.LOCK_MODE_SHARED);
  }

  private event(type: lockservice.WatchEventType, l: FakeLock, sessionId: string, token: number): void {
    const ev: lockservice.WatchEvent = { revision: this.revision, type, name: l.name, sessionId, token, lock: this.state(l, l.name) };
    this.history.push(ev);
    const max = this.options.historyMax ?? 10_000;
    while (this.history.length > max) this.floorRevision = (this.history.shift() as lockservice.WatchEvent).revision;
    for (const w of this.watchers) if (matches(w, l.name)) w.call.write(ev);
  }

  private grant(l: FakeLock, s: FakeSession, mode: lockservice.LockMode): lockservice.Holder {
    this.revision++;
    const holder = { sessionId: s.id, token: this.revision, mode, clientId: s.clientId };
    l.holders.push(holder);
    this.event(WatchEventType.WATCH_EVENT_TYPE_ACQUIRED, l, s.id, holder.token);
    return holder;
  }

  private promote(l: FakeLock): void {
    for (let i = 0; i < 10_000 && l.waiters.length > 0; i++) {
      const w = l.waiters[0] as FakeWaiter;
      if (!this.grantable(l, w.mode)) return;
      l.waiters.shift();
      if (w.timer) clearTimeout(w.timer);
      const s = this.sessions.get(w.sessionId) as FakeSession;
      const h = this.grant(l, s, w.mode);
      const res: lockservice.AcquireResponse = {
        status: AcquireStatus.ACQUIRE_STATUS_GRANTED,
        token: h.token,
        holders: l.holders.map((x) => ({ ...x })),
        queuePosition: 0,
        revision: this.revision,
      };
      s.dedupe.set(w.requestId, res);
      this.answerPending(w.sessionId, w.requestId, res);
    }
  }

  private answerPending(sessionId: string, requestId: string, res: lockservice.AcquireResponse): void {
    const key = `${sessionId}/${requestId}`;
    const p = this.pending.get(key);
    if (p) {
      this.pending.delete(key);
      p.answer(res);
    }
  }

  private queuedAnswer(name: string, sessionId?: string, requestId?: string): lockservice.AcquireResponse {
    const l = this.locks.get(name);
    const at = l ? l.waiters.findIndex((w) => w.sessionId === sessionId && w.requestId === requestId) : -1;
    return {
      status: AcquireStatus.ACQUIRE_STATUS_QUEUED,
      token: 0,
      holders: l ? l.holders.map((h) => ({ ...h })) : [],
      queuePosition: Math.max(0, at),
      revision: this.revision,
    };
  }

  private timedOut(l: FakeLock): lockservice.AcquireResponse {
    return {
      status: AcquireStatus.ACQUIRE_STATUS_TIMED_OUT,
      token: 0,
      holders: l.holders.map((h) => ({ ...h })),
      queuePosition: 0,
      revision: this.revision,
    };
  }

  /** Removes a waiter (its wait ran out or was cancelled): CANCELED event, TIMED_OUT remembered and answered. */
  private cancelWait(l: FakeLock, sessionId: string, requestId: string): void {
    const at = l.waiters.findIndex((w) => w.sessionId === sessionId && w.requestId === requestId);
    if (at < 0) return;
    const [w] = l.waiters.splice(at, 1);
    if (w?.timer) clearTimeout(w.timer);
    this.revision++;
    this.event(WatchEventType.WATCH_EVENT_TYPE_CANCELED, l, sessionId, 0);
    this.emit('canceled', l.name, sessionId, requestId);
    const res = this.timedOut(l);
    this.sessions.get(sessionId)?.dedupe.set(requestId, res);
    this.answerPending(sessionId, requestId, res);
    this.promote(l);
  }

  private dropSession(s: FakeSession, type: lockservice.WatchEventType): string[] {
    const released: string[] = [];
    for (const l of this.locks.values()) {
      const before = l.holders.length;
      for (const h of l.holders.filter((x) => x.sessionId === s.id)) {
        l.holders = l.holders.filter((x) => x !== h);
        this.revision++;
        this.event(type, l, s.id, h.token);
      }
      if (l.holders.length < before) released.push(l.name);
      for (const w of l.waiters.filter((x) => x.sessionId === s.id)) {
        l.waiters = l.waiters.filter((x) => x !== w);
        if (w.timer) clearTimeout(w.timer);
        this.revision++;
        this.event(type, l, s.id, 0);
        const key = `${s.id}/${w.requestId}`;
        const p = this.pending.get(key);
        if (p) {
          this.pending.delete(key);
          p.answer(this.timedOut(l));
        }
      }
      this.promote(l);
    }
    return released;
  }

  private liveSession(sessionId: string): FakeSession {
    const s = this.sessions.get(sessionId);
    if (!s || s.expired) throw new FencerError('SESSION_NOT_FOUND', `session ${sessionId} does not exist or expired`);
    return s;
  }

  private checkName(name: string, namespace?: string): void {
    const m = /^\/ls\/([A-Za-z0-9._-]+)\/[A-Za-z0-9._/-]+$/.exec(name);
    if (!m || name.endsWith('/') || name.includes('//')) throw new FencerError('INVALID_NAME', `bad lock name "${name}"`);
    if (namespace !== undefined && m[1] !== namespace) throw new FencerError('WRONG_NAMESPACE', `${name} is not in namespace ${namespace}`);
  }

  // ---- gRPC plumbing ----

  private takeFault(method: Method): InjectedFault | undefined {
    const at = this.faults.findIndex((f) => f.method === undefined || f.method === method);
    return at < 0 ? undefined : this.faults.splice(at, 1)[0];
  }

  private record(method: Method, request: unknown): void {
    this.calls.push({ method, request });
    if (this.calls.length > (this.options.callsMax ?? 10_000)) this.calls.shift();
    this.emit('call', { method, request });
  }

  private unary<Req, Res>(
    method: Method,
    body: (req: Req, call: ServerUnaryCall<Req, Res>, answer: (res: Res) => void) => Res | undefined,
  ) {
    return (call: ServerUnaryCall<Req, Res>, callback: sendUnaryData<Res>): void => {
      this.record(method, call.request);
      const fail = (e: unknown): void => {
        const fe = e instanceof FencerError ? e : new FencerError('INTERNAL', String(e));
        callback(toServiceError(fe) as ServiceError);
      };
      if (this.notLeaderHint !== undefined) return fail(new FencerError('NOT_LEADER', 'this fake node is a follower', this.notLeaderHint));
      const fault = this.takeFault(method);
      if (fault && !fault.afterApply) return fail(new FencerError(fault.code, 'injected fault', fault.leaderHint));
      let done = false;
      const answer = (res: Res): void => {
        if (done) return;
        done = true;
        if (fault) fail(new FencerError(fault.code, 'injected fault after the call took effect', fault.leaderHint));
        else callback(null, res);
      };
      try {
        const res = body(call.request, call, answer);
        if (res !== undefined) answer(res);
      } catch (e) {
        done = true;
        fail(e);
      }
    };
  }

  private handlers(): lockservice.LockServiceServer {
    return {
      openSession: this.unary<lockservice.OpenSessionRequest, lockservice.OpenSessionResponse>('openSession', (req) => {
        if (!/^[A-Za-z0-9._-]{1,64}$/.test(req.namespace)) throw new FencerError('INVALID_NAME', `bad namespace "${req.namespace}"`);
        const id = `${req.namespace}:fake${this.nextSession++}`;
        const ttlMs = req.ttlMs === 0 ? (this.options.ttlDefaultMs ?? 12_000) : req.ttlMs;
        this.sessions.set(id, { id, namespace: req.namespace, clientId: req.clientId, ttlMs, expired: false, dedupe: new Map() });
        this.revision++;
        this.armExpiry(id, ttlMs);
        return { sessionId: id, ttlMs };
      }),
      closeSession: this.unary<lockservice.CloseSessionRequest, lockservice.CloseSessionResponse>('closeSession', (req) => {
        const s = this.liveSession(req.sessionId);
        s.expired = true;
        return { released: this.dropSession(s, WatchEventType.WATCH_EVENT_TYPE_EXPIRED) };
      }),
      acquire: this.unary<lockservice.AcquireRequest, lockservice.AcquireResponse>('acquire', (req, call, answer) => {
        const s = this.liveSession(req.sessionId);
        this.checkName(req.name, s.namespace);
        if (req.requestId === '') throw new FencerError('MISSING_REQUEST_ID', 'request_id is required');
        const mode = req.mode === LockMode.LOCK_MODE_SHARED ? LockMode.LOCK_MODE_SHARED : LockMode.LOCK_MODE_EXCLUSIVE;
        const l = this.lock(req.name);
        const prior = s.dedupe.get(req.requestId);
        if (prior !== undefined && prior !== 'QUEUED') return prior;
        if (prior === undefined) {
          if (l.waiters.length === 0 && this.grantable(l, mode)) {
            const h = this.grant(l, s, mode);
            const res = {
              status: AcquireStatus.ACQUIRE_STATUS_GRANTED,
              token: h.token,
              holders: l.holders.map((x) => ({ ...x })),
              queuePosition: 0,
              revision: this.revision,
            };
            s.dedupe.set(req.requestId, res);
            return res;
          }
          if (req.waitMs === 0) {
            const res = this.timedOut(l);
            s.dedupe.set(req.requestId, res);
            return res;
          }
          this.revision++;
          const w: FakeWaiter = { sessionId: s.id, clientId: s.clientId, mode, requestId: req.requestId, timer: undefined };
          // The leader's wait deadline runs from the first arrival, whatever happens to the call.
          w.timer = setTimeout(() => this.cancelWait(l, s.id, req.requestId), req.waitMs);
          l.waiters.push(w);
          s.dedupe.set(req.requestId, 'QUEUED');
          this.event(WatchEventType.WATCH_EVENT_TYPE_QUEUED, l, s.id, 0);
          this.emit('queued', req.name, s.id, req.requestId);
        }
        // Queued (new or resumed): hold the call open until decided, or answer QUEUED early.
        if (req.waitMs === 0) return this.queuedAnswer(req.name, s.id, req.requestId);
        const key = `${s.id}/${req.requestId}`;
        const early =
          this.options.acquireHoldMs !== undefined
            ? setTimeout(() => {
                if (this.pending.get(key)?.answer === wrapped) {
                  this.pending.delete(key);
                  answer(this.queuedAnswer(req.name, s.id, req.requestId));
                }
              }, this.options.acquireHoldMs)
            : undefined;
        const wrapped = (res: lockservice.AcquireResponse): void => {
          if (early) clearTimeout(early);
          answer(res);
        };
        this.pending.set(key, { name: req.name, answer: wrapped });
        call.once('cancelled', () => {
          if (this.pending.get(key)?.answer !== wrapped) return;
          this.pending.delete(key);
          if (early) clearTimeout(early);
          this.cancelWait(l, s.id, req.requestId); // the real cell proposes CancelWait
        });
        return undefined;
      }),
      release: this.unary<lockservice.ReleaseRequest, lockservice.ReleaseResponse>('release', (req) => {
        const s = this.liveSession(req.sessionId);
        const l = this.locks.get(req.name);
        const h = l?.holders.find((x) => x.sessionId === s.id && x.token === req.token);
        if (!l || !h) return { ok: false };
        l.holders = l.holders.filter((x) => x !== h);
        this.revision++;
        this.event(WatchEventType.WATCH_EVENT_TYPE_RELEASED, l, s.id, h.token);
        this.promote(l);
        return { ok: true };
      }),
      checkToken: this.unary<lockservice.CheckTokenRequest, lockservice.CheckTokenResponse>('checkToken', (req) => {
        this.checkName(req.name);
        const l = this.locks.get(req.name);
        const tokens = l?.holders.map((h) => h.token) ?? [];
        return { current: tokens.includes(req.token), latestToken: tokens.length ? Math.max(...tokens) : 0, revision: this.revision };
      }),
      getLock: this.unary<lockservice.GetLockRequest, lockservice.GetLockResponse>('getLock', (req) => {
        this.checkName(req.name);
        return { lock: this.state(this.locks.get(req.name), req.name), revision: this.revision };
      }),
      listLocks: this.unary<lockservice.ListLocksRequest, lockservice.ListLocksResponse>('listLocks', (req) => {
        if (!/^\/ls\/[A-Za-z0-9._-]+\//.test(req.prefix)) throw new FencerError('INVALID_NAME', `bad prefix "${req.prefix}"`);
        const live = [...this.locks.values()]
          .filter((l) => l.name.startsWith(req.prefix) && (l.holders.length > 0 || l.waiters.length > 0))
          .sort((a, b) => (a.name < b.name ? -1 : 1));
        const from = req.pageToken === '' ? 0 : Number(req.pageToken);
        const limit = req.limit === 0 ? 1000 : req.limit;
        const page = live.slice(from, from + limit);
        return {
          locks: page.map((l) => this.state(l, l.name)),
          nextPageToken: from + limit < live.length ? String(from + limit) : '',
          revision: this.revision,
        };
      }),
      keepAlive: (call) => {
        this.record('keepAlive', {});
        if (this.notLeaderHint !== undefined) {
          call.emit('error', toServiceError(new FencerError('NOT_LEADER', 'this fake node is a follower', this.notLeaderHint)));
          return;
        }
        this.keepAlives.add(call);
        this.emit('keepAliveOpened');
        call.on('data', (req: lockservice.KeepAliveRequest) => {
          this.emit('heartbeat', req.sessionId);
          const answer = (): void => {
            if (!this.keepAlives.has(call)) return;
            const s = this.sessions.get(req.sessionId);
            if (s && !s.expired) this.armExpiry(s.id, s.ttlMs);
            call.write(
              !s || s.expired
                ? { sessionId: req.sessionId, ttlMsRemaining: 0, expired: true }
                : { sessionId: req.sessionId, ttlMsRemaining: s.ttlMs, expired: false },
            );
          };
          if (this.heartbeatsPaused) this.heldHeartbeats.push(answer);
          else answer();
        });
        const gone = (): void => {
          this.keepAlives.delete(call);
        };
        call.on('end', () => {
          gone();
          call.end();
        });
        call.on('cancelled', gone);
        call.on('error', gone);
      },
      watch: (call) => {
        const req = call.request;
        this.record('watch', req);
        const reject = (e: FencerError): void => {
          call.emit('error', toServiceError(e));
        };
        try {
          if (req.prefix) {
            if (!/^\/ls\/[A-Za-z0-9._-]+\/([A-Za-z0-9._-]+\/)*$/.test(req.name))
              throw new FencerError('INVALID_NAME', `bad prefix "${req.name}"`);
          } else {
            this.checkName(req.name);
          }
        } catch (e) {
          return reject(e as FencerError);
        }
        if (req.sinceRevision > 0 && req.sinceRevision < this.floorRevision) {
          return reject(
            new FencerError('COMPACTED', `revision ${req.sinceRevision} is older than the history (from ${this.floorRevision})`),
          );
        }
        const w: Watcher = { name: req.name, prefix: req.prefix, call };
        if (req.sinceRevision === 0) {
          for (const l of [...this.locks.values()].sort((a, b) => (a.name < b.name ? -1 : 1))) {
            if (!matches(w, l.name) || (l.holders.length === 0 && l.waiters.length === 0)) continue;
            call.write({
              revision: this.revision,
              type: WatchEventType.WATCH_EVENT_TYPE_SNAPSHOT,
              name: l.name,
              sessionId: '',
              token: 0,
              lock: this.state(l, l.name),
            });
          }
          call.write({
            revision: this.revision,
            type: WatchEventType.WATCH_EVENT_TYPE_PROGRESS,
            name: '',
            sessionId: '',
            token: 0,
            lock: undefined,
          });
        } else {
          for (const ev of this.history) if (ev.revision > req.sinceRevision && matches(w, ev.name)) call.write(ev);
        }
        this.watchers.add(w);
        const gone = (): void => {
          this.watchers.delete(w);
        };
        call.on('cancelled', gone);
        call.on('close', gone);
      },
    };
  }

  private adminHandlers(): adminpb.CellAdminServer {
    const unimplemented = (_c: unknown, cb: sendUnaryData<never>): void =>
      cb(toServiceError(new FencerError('INTERNAL', 'not in the fake')) as ServiceError);
    return {
      status: (_call: ServerUnaryCall<adminpb.StatusRequest, adminpb.StatusResponse>, cb: sendUnaryData<adminpb.StatusResponse>) => {
        if (!this.status) return cb(toServiceError(new FencerError('NO_LEADER', 'no status configured')) as ServiceError);
        cb(null, this.status);
      },
      transferLeadership: unimplemented,
      addMember: unimplemented,
      removeMember: unimplemented,
      promoteLearner: unimplemented,
      takeSnapshot: unimplemented,
      claimNamespace: unimplemented,
      dropNamespace: unimplemented,
    };
  }
}

function matches(w: { name: string; prefix: boolean }, name: string): boolean {
  return w.prefix ? name.startsWith(w.name) : name === w.name;
}
