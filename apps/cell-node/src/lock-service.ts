/**
 * The contract's LockService on one node. The leader serves calls itself; a
 * follower forwards unary calls to the leader (once: a forwarded call that
 * meets a non-leader is answered NOT_LEADER with a leader-hint), relays
 * KeepAlive heartbeats through the leader's HeartbeatBatch, and serves Watch
 * from its own apply stream.
 */
import {
  type Metadata as MetadataT,
  Metadata,
  credentials,
  type sendUnaryData,
  type ServerUnaryCall,
  type ServerWritableStream,
  type ServerDuplexStream,
  type ServiceError,
  status,
} from '@grpc/grpc-js';
import {
  ErrorCode,
  FencerError,
  Namespace,
  RequestId,
  Revision,
  SessionId,
  isValidNamespace,
  makeSessionId,
  namespaceOfSessionId,
  unreachable,
} from '@fencer/base';
import { CLIENT_ID_BYTES_MAX, REQUEST_ID_BYTES_MAX, LOCK_DELAY_MS_MAX, isFailure, LIST_LOCKS_LIMIT_DEFAULT, LIST_LOCKS_LIMIT_MAX, WAIT_MS_MAX, parseLockPrefix, validateLockName } from '@fencer/lock-fsm';
import type { AcquireOutcome, CloseSessionOutcome, Failure, OpenSessionOutcome, ReleaseOutcome } from '@fencer/lock-fsm';
import { internalpb, lockservice, toServiceError } from '@fencer/protocol';
import { lockToPb, holderToPb, modeFromPb } from './convert.js';
import type { CellNode } from './node.js';
import type { HubEvent, WatchSink } from './watch-hub.js';

const FORWARDED_KEY = 'fencer-forwarded';
const FORWARD_TIMEOUT_MS = 10_000;
/** A held-open Acquire answers QUEUED if nothing decided it this long after its wait ran out. */
const WAIT_GRACE_MS = 5_000;

type Pb = typeof lockservice;
const { AcquireStatus, WatchEventType } = lockservice as Pb;

function fail(code: ErrorCode, message: string, leaderHint?: string): never {
  throw new FencerError(code, message, leaderHint);
}

function failure(o: unknown): o is Failure {
  return typeof o === 'object' && o !== null && (o as { ok?: unknown }).ok === false;
}

function throwIfFailure(o: unknown): void {
  if (failure(o)) throw new FencerError(o.code, o.message);
}

/** Session id embedded namespace, or SESSION_NOT_FOUND for an id no server could have issued. */
function sessionNamespace(sessionId: string): Namespace {
  if (sessionId === '') fail('SESSION_NOT_FOUND', 'session_id is empty: open a session first');
  const ns = namespaceOfSessionId(sessionId);
  if (!ns) fail('SESSION_NOT_FOUND', `session "${sessionId.slice(0, 80)}" does not exist (malformed id)`);
  return ns;
}

function checkName(name: string, namespace?: string): void {
  const problem = validateLockName(name, namespace);
  if (problem) fail(problem.code, problem.message);
}

export class LockServiceImpl {
  private readonly forwardClients = new Map<string, InstanceType<typeof lockservice.LockServiceClient>>();
  private readonly internalClients = new Map<string, InstanceType<typeof internalpb.CellInternalClient>>();

  /** Unary calls received and not yet answered (held-open Acquires included), forwarded ones too. */
  callsInFlight = 0;

  constructor(private readonly node: CellNode) {}

  close(): void {
    for (const c of this.forwardClients.values()) c.close();
    for (const c of this.internalClients.values()) c.close();
  }

  // ---- plumbing ----

  private forwardClient(address: string): InstanceType<typeof lockservice.LockServiceClient> {
    let c = this.forwardClients.get(address);
    if (!c) {
      c = new lockservice.LockServiceClient(address, credentials.createInsecure());
      this.forwardClients.set(address, c);
    }
    return c;
  }

  private internalClient(address: string): InstanceType<typeof internalpb.CellInternalClient> {
    let c = this.internalClients.get(address);
    if (!c) {
      c = new internalpb.CellInternalClient(address, credentials.createInsecure());
      this.internalClients.set(address, c);
    }
    return c;
  }

  /** Where a call must go when this node is not the leader: throws NOT_LEADER / NO_LEADER when it cannot be forwarded. */
  private leaderTarget(metadata: MetadataT): string {
    const hint = this.node.leaderAddress();
    if (metadata.get(FORWARDED_KEY).length > 0) fail('NOT_LEADER', 'this replica is not the leader', hint);
    if (!hint) fail('NO_LEADER', 'the cell has no leader right now (election in progress); retry with the same request_id');
    return hint;
  }

  /**
   * Runs `local` on the leader, or forwards the call to it. Errors become the
   * contract's status with `lock-reason` (and `leader-hint`).
   */
  private unary<Req, Res>(
    method: string,
    call: ServerUnaryCall<Req, Res>,
    callback: sendUnaryData<Res>,
    local: (req: Req) => Promise<Res>,
    forwardTimeoutMs = FORWARD_TIMEOUT_MS,
  ): void {
    this.callsInFlight++;
    let inFlight = true;
    const finished = (): void => {
      if (!inFlight) return;
      inFlight = false;
      this.callsInFlight--;
    };
    // A call the client gives up on may never be answered.
    call.on('cancelled', finished);
    const answer = (err: ServiceError | Partial<ServiceError> | null, res?: Res): void => {
      finished();
      this.node.env.metrics.rpcs.inc({ method, code: err ? status[err.code ?? status.UNKNOWN] ?? 'UNKNOWN' : 'OK' });
      if (err) callback(err as ServiceError);
      else callback(null, res);
    };
    const onError = (e: unknown): void => {
      if (e instanceof FencerError) return answer(toServiceError(e));
      this.node.env.logger.error({ method, err: (e as Error)?.stack ?? String(e) }, 'unexpected error in a handler');
      answer(toServiceError(new FencerError('INTERNAL', `internal error: ${(e as Error)?.message ?? e}`)));
    };
    try {
      if (this.node.isLeader) {
        local(call.request).then((res) => answer(null, res), onError);
        return;
      }
      const target = this.leaderTarget(call.metadata);
      const md = new Metadata();
      md.set(FORWARDED_KEY, this.node.id);
      const client = this.forwardClient(target) as unknown as Record<string, Function>;
      const fwd = client[method]!.call(client, call.request, md, { deadline: Date.now() + forwardTimeoutMs }, (err: ServiceError | null, res: Res) => {
        if (err && err.metadata?.get('lock-reason').length === 0 && (err.code === status.UNAVAILABLE || err.code === status.DEADLINE_EXCEEDED)) {
          // The leader did not answer at all: say so in the contract's words.
          return answer(toServiceError(new FencerError('NO_LEADER', `the leader at ${target} did not answer: ${err.details}`, target)));
        }
        answer(err, res);
      });
      call.on('cancelled', () => fwd.cancel());
    } catch (e) {
      onError(e);
    }
  }

  // ---- the contract ----

  openSession = (call: ServerUnaryCall<lockservice.OpenSessionRequest, lockservice.OpenSessionResponse>, cb: sendUnaryData<lockservice.OpenSessionResponse>): void =>
    this.unary('openSession', call, cb, async (req) => {
      const c = this.node.config;
      if (!isValidNamespace(req.namespace)) fail('INVALID_NAME', `namespace "${req.namespace.slice(0, 80)}" must be 1-64 characters of [A-Za-z0-9._-], not "." or ".."`);
      if (Buffer.byteLength(req.clientId) > CLIENT_ID_BYTES_MAX) fail('INVALID_ARGUMENT', `client_id is longer than ${CLIENT_ID_BYTES_MAX} bytes`);
      const ttlMs = req.ttlMs === 0 ? c.ttlDefaultMs : Math.min(c.ttlMaxMs, Math.max(c.ttlMinMs, req.ttlMs));
      const r = this.node.env.random;
      const unique = [r.nextU32(), r.nextU32(), r.nextU32(), r.nextU32()].map((n) => n.toString(16).padStart(8, '0')).join('');
      const sessionId = makeSessionId(Namespace(req.namespace), unique);
      const { outcome } = await this.node.propose({ kind: 'OpenSession', sessionId, clientId: req.clientId, namespace: Namespace(req.namespace), ttlMs });
      throwIfFailure(outcome);
      const o = outcome as OpenSessionOutcome;
      return { sessionId: o.sessionId, ttlMs: o.ttlMs };
    });

  closeSession = (call: ServerUnaryCall<lockservice.CloseSessionRequest, lockservice.CloseSessionResponse>, cb: sendUnaryData<lockservice.CloseSessionResponse>): void =>
    this.unary('closeSession', call, cb, async (req) => {
      sessionNamespace(req.sessionId);
      const { outcome } = await this.node.propose({ kind: 'CloseSession', sessionId: SessionId(req.sessionId) });
      throwIfFailure(outcome);
      return { released: [...(outcome as CloseSessionOutcome).released] };
    });

  release = (call: ServerUnaryCall<lockservice.ReleaseRequest, lockservice.ReleaseResponse>, cb: sendUnaryData<lockservice.ReleaseResponse>): void =>
    this.unary('release', call, cb, async (req) => {
      const ns = sessionNamespace(req.sessionId);
      checkName(req.name, ns);
      const { outcome } = await this.node.propose({ kind: 'Release', sessionId: SessionId(req.sessionId), name: req.name, token: Revision(req.token) });
      throwIfFailure(outcome);
      return { ok: (outcome as ReleaseOutcome).released };
    });

  acquire = (call: ServerUnaryCall<lockservice.AcquireRequest, lockservice.AcquireResponse>, cb: sendUnaryData<lockservice.AcquireResponse>): void =>
    this.unary('acquire', call, cb, (req) => this.acquireOnLeader(req, call), Math.min(WAIT_MS_MAX, call.request.waitMs) + FORWARD_TIMEOUT_MS);

  private async acquireOnLeader(
    req: lockservice.AcquireRequest,
    call: ServerUnaryCall<lockservice.AcquireRequest, lockservice.AcquireResponse>,
  ): Promise<lockservice.AcquireResponse> {
    const ns = sessionNamespace(req.sessionId);
    checkName(req.name, ns);
    const mode = modeFromPb(req.mode);
    if (!mode) fail('INVALID_MODE', `mode ${req.mode} is not EXCLUSIVE (1) or SHARED (2)`);
    if (req.requestId === '') fail('MISSING_REQUEST_ID', 'request_id is required: a unique id per attempt makes retries safe');
    if (Buffer.byteLength(req.requestId) > REQUEST_ID_BYTES_MAX) fail('INVALID_ARGUMENT', `request_id is longer than ${REQUEST_ID_BYTES_MAX} bytes`);
    const waitMs = Math.min(req.waitMs, WAIT_MS_MAX);
    const sessionId = SessionId(req.sessionId);
    const requestId = RequestId(req.requestId);
    const handle = waitMs > 0 ? this.node.waits.register(sessionId, requestId) : undefined;
    if (waitMs > 0 && !handle) fail('TOO_MANY_REQUESTS', 'too many Acquire calls are waiting on this node; retry later');
    try {
      const { outcome } = await this.node.propose({
        kind: 'Acquire',
        sessionId,
        name: req.name,
        mode,
        requestId,
        waitMs,
        lockDelayMs: Math.min(req.lockDelayMs, LOCK_DELAY_MS_MAX),
        tryLock: waitMs === 0,
      });
      throwIfFailure(outcome);
      const o = outcome as AcquireOutcome;
      if (o.status === 'GRANTED') return { status: AcquireStatus.ACQUIRE_STATUS_GRANTED, token: o.token, holders: o.holders.map(holderToPb), queuePosition: 0, revision: o.revision };
      if (o.status === 'TIMED_OUT') return this.answerTimedOut(req.name, o.revision);
      if (!handle) return this.answerQueued(req.name, sessionId, requestId, o.revision);
      // Queued: hold the call open until the log decides, the client gives up, or leadership moves.
      const onCancel = (): void => {
        handle.cancel();
        this.node.propose({ kind: 'CancelWait', sessionId, name: req.name, requestId, reason: 'cancelled' }).catch(() => {});
      };
      call.once('cancelled', onCancel);
      const safety = setTimeout(() => handle.cancel(), waitMs + WAIT_GRACE_MS);
      const r = await handle.result;
      clearTimeout(safety);
      call.removeListener('cancelled', onCancel);
      switch (r.kind) {
        case 'granted': {
          const lock = this.node.fsm.getLock(req.name);
          return { status: AcquireStatus.ACQUIRE_STATUS_GRANTED, token: r.token, holders: lock.holders.map(holderToPb), queuePosition: 0, revision: r.revision };
        }
        case 'cancelled':
          return this.answerTimedOut(req.name, r.revision);
        case 'session-gone':
          return fail('SESSION_NOT_FOUND', `session ${sessionId} expired or was closed while waiting`);
        case 'leadership-lost':
        case 'gave-up':
          return this.answerQueued(req.name, sessionId, requestId, this.node.fsm.revision);
        default:
          return unreachable(r, 'wait result');
      }
    } finally {
      handle?.cancel();
    }
  }

  private answerTimedOut(name: string, revision: number): lockservice.AcquireResponse {
    const lock = this.node.fsm.getLock(name);
    return { status: AcquireStatus.ACQUIRE_STATUS_TIMED_OUT, token: 0, holders: lock.holders.map(holderToPb), queuePosition: 0, revision };
  }

  private answerQueued(name: string, sessionId: SessionId, requestId: RequestId, revision: number): lockservice.AcquireResponse {
    const lock = this.node.fsm.getLock(name);
    return {
      status: AcquireStatus.ACQUIRE_STATUS_QUEUED,
      token: 0,
      holders: lock.holders.map(holderToPb),
      queuePosition: this.node.queuePosition(name, sessionId, requestId),
      revision,
    };
  }

  checkToken = (call: ServerUnaryCall<lockservice.CheckTokenRequest, lockservice.CheckTokenResponse>, cb: sendUnaryData<lockservice.CheckTokenResponse>): void =>
    this.unary('checkToken', call, cb, async (req) => {
      checkName(req.name);
      await this.node.readBarrier();
      const a = this.node.fsm.checkToken(req.name, Revision(req.token));
      return { current: a.current, latestToken: a.latestToken, revision: this.node.fsm.revision };
    });

  getLock = (call: ServerUnaryCall<lockservice.GetLockRequest, lockservice.GetLockResponse>, cb: sendUnaryData<lockservice.GetLockResponse>): void =>
    this.unary('getLock', call, cb, async (req) => {
      checkName(req.name);
      await this.node.readBarrier();
      return { lock: lockToPb(this.node.fsm.getLock(req.name)), revision: this.node.fsm.revision };
    });

  listLocks = (call: ServerUnaryCall<lockservice.ListLocksRequest, lockservice.ListLocksResponse>, cb: sendUnaryData<lockservice.ListLocksResponse>): void =>
    this.unary('listLocks', call, cb, async (req) => {
      const parsed = parseLockPrefix(req.prefix);
      if (!parsed.ok) fail(parsed.code, parsed.message);
      const limit = req.limit === 0 ? LIST_LOCKS_LIMIT_DEFAULT : Math.min(req.limit, LIST_LOCKS_LIMIT_MAX);
      await this.node.readBarrier();
      const page = this.node.fsm.listLocks(req.prefix, limit, req.pageToken);
      if (isFailure(page)) fail(page.code, page.message);
      return { locks: page.locks.map(lockToPb), nextPageToken: page.nextPageToken, revision: this.node.fsm.revision };
    });

  keepAlive = (call: ServerDuplexStream<lockservice.KeepAliveRequest, lockservice.KeepAliveResponse>): void => {
    let open = true;
    call.on('data', (req: lockservice.KeepAliveRequest) => {
      this.heartbeat([req.sessionId], call.metadata, (err, answers) => {
        if (!open) return;
        if (err) {
          open = false;
          call.emit('error', toServiceError(err));
          return;
        }
        for (const a of answers!) call.write(a);
      });
    });
    call.on('end', () => {
      open = false;
      call.end();
    });
    call.on('error', () => (open = false));
    call.on('cancelled', () => (open = false));
  };

  /**
   * Heartbeats for a batch of sessions: on the leader, recorded after a
   * leadership confirmation round; on a follower, relayed to the leader in one
   * HeartbeatBatch.
   */
  heartbeat(sessionIds: readonly string[], metadata: MetadataT, done: (err: FencerError | null, answers?: lockservice.KeepAliveResponse[]) => void): void {
    if (this.node.isLeader) {
      const ok = this.node.heartbeats.confirm((error) => {
        if (error) return done(error instanceof FencerError ? error : new FencerError('NOT_LEADER', error.message, this.node.leaderAddress()));
        const now = this.node.env.clock.monoMs();
        // After the confirmation round this leader has applied everything committed before the heartbeat:
        // "expired" is said only of a session that is gone from that state (its locks are released).
        // One whose expiry is proposed but not applied gets no TTL and is not yet called expired.
        const answers = sessionIds.map((id) => {
          const remaining = this.node.duties.heartbeat(now, SessionId(id));
          this.node.env.metrics.keepalives.inc({ path: 'leader' });
          if (remaining !== undefined) return { sessionId: id, ttlMsRemaining: remaining, expired: false };
          const gone = this.node.fsm.getSession(id) === undefined;
          return { sessionId: id, ttlMsRemaining: 0, expired: gone };
        });
        done(null, answers);
      });
      if (!ok) done(new FencerError('TOO_MANY_REQUESTS', 'too many heartbeats waiting for confirmation'));
      return;
    }
    let target: string;
    try {
      target = this.leaderTarget(metadata);
    } catch (e) {
      return done(e as FencerError);
    }
    const md = new Metadata();
    md.set(FORWARDED_KEY, this.node.id);
    this.internalClient(target).heartbeatBatch({ sessionIds: [...sessionIds], proxyId: this.node.id }, md, { deadline: Date.now() + FORWARD_TIMEOUT_MS }, (err: ServiceError | null, res: internalpb.HeartbeatBatchResponse) => {
      if (err) return done(new FencerError('NO_LEADER', `heartbeat relay to ${target} failed: ${err.details}`, target));
      this.node.env.metrics.keepalives.inc({ path: 'relayed' }, res.sessions.length);
      done(null, res.sessions);
    });
  }

  watch = (call: ServerWritableStream<lockservice.WatchRequest, lockservice.WatchEvent>): void => {
    const req = call.request;
    const reject = (e: FencerError): void => {
      call.emit('error', toServiceError(e));
    };
    try {
      if (req.prefix) {
        const parsed = parseLockPrefix(req.name);
        if (!parsed.ok) fail(parsed.code, parsed.message);
      } else {
        checkName(req.name);
      }
    } catch (e) {
      return reject(e as FencerError);
    }
    const filter = { name: req.name, prefix: req.prefix };
    const toPb = (e: HubEvent): lockservice.WatchEvent => {
      switch (e.type) {
        case 'event':
          return {
            revision: e.event.revision,
            type: WatchEventType[`WATCH_EVENT_TYPE_${e.event.type}` as keyof typeof WatchEventType],
            name: e.event.name,
            sessionId: e.event.sessionId,
            token: e.event.token,
            lock: lockToPb(e.event.lock),
          };
        case 'snapshot':
          return { revision: e.revision, type: WatchEventType.WATCH_EVENT_TYPE_SNAPSHOT, name: e.lock.name, sessionId: '', token: 0, lock: lockToPb(e.lock) };
        case 'progress':
          return { revision: e.revision, type: WatchEventType.WATCH_EVENT_TYPE_PROGRESS, name: '', sessionId: '', token: 0, lock: undefined };
      }
    };
    const sink: WatchSink = {
      write: (e) => {
        call.write(toPb(e));
        return call.writableLength;
      },
      end: (reason) => {
        if (reason === 'slow') reject(new FencerError('SLOW_WATCHER', 'this watcher fell too far behind; resume with since_revision = the last revision seen'));
        else reject(new FencerError('SHUTTING_DOWN', 'the node is shutting down; resume elsewhere with since_revision'));
      },
    };
    const snapshotLocks = (): Iterable<import('@fencer/lock-fsm').LockState> => {
      if (!req.prefix) {
        const lock = this.node.fsm.getLock(req.name);
        return lock.holders.length > 0 || lock.waiters.length > 0 ? [lock] : [];
      }
      return this.node.allLocks(req.name);
    };
    const r = this.node.hub.subscribe(filter, req.sinceRevision, sink, this.node.env.clock.monoMs(), snapshotLocks);
    if (r === 'compacted') {
      return reject(new FencerError('COMPACTED', `revision ${req.sinceRevision} is older than this node's watch history (from ${this.node.hub.floorRevision}); resync with GetLock, then watch from its revision`));
    }
    if (r === 'full') return reject(new FencerError('TOO_MANY_REQUESTS', 'this node has too many watchers; try another replica'));
    const stop = (): void => this.node.hub.unsubscribe(sink);
    call.on('cancelled', stop);
    call.on('close', stop);
    call.on('error', stop);
  };

  /** The leader's internal HeartbeatBatch (session proxies, and followers relaying KeepAlive). */
  heartbeatBatch = (call: ServerUnaryCall<internalpb.HeartbeatBatchRequest, internalpb.HeartbeatBatchResponse>, cb: sendUnaryData<internalpb.HeartbeatBatchResponse>): void => {
    if (!this.node.isLeader) {
      cb(toServiceError(new FencerError('NOT_LEADER', 'heartbeat batches go to the leader', this.node.leaderAddress())) as ServiceError);
      return;
    }
    if (call.request.sessionIds.length > 100_000) {
      cb(toServiceError(new FencerError('INVALID_ARGUMENT', 'at most 100000 sessions per heartbeat batch')) as ServiceError);
      return;
    }
    this.heartbeat(call.request.sessionIds, call.metadata, (err, answers) => {
      if (err) cb(toServiceError(err) as ServiceError);
      else cb(null, { sessions: answers! });
    });
  };
}

/** The LockService implementation object for grpc-js. */
export function lockServiceHandlers(impl: LockServiceImpl): lockservice.LockServiceServer {
  return {
    openSession: impl.openSession,
    keepAlive: impl.keepAlive,
    acquire: impl.acquire,
    release: impl.release,
    checkToken: impl.checkToken,
    getLock: impl.getLock,
    listLocks: impl.listLocks,
    watch: impl.watch,
    closeSession: impl.closeSession,
  };
}

export function internalHandlers(impl: LockServiceImpl): internalpb.CellInternalServer {
  return { heartbeatBatch: impl.heartbeatBatch };
}
