/**
 * An in-process fake of the contract's LockService for client tests: a
 * grpc-js server on 127.0.0.1 whose lock semantics are the real state
 * machine's (FakeCell applies every request to @fencer/lock-fsm's
 * LockStateMachine), with knobs for the failures a client must survive:
 * NOT_LEADER with a leader-hint, UNAVAILABLE before or after a call took
 * effect, paused heartbeats, session expiry, broken streams and compacted
 * watch history. It expires sessions on its own only with autoExpire: tests
 * decide when (expireSession), so they stay deterministic.
 *
 * This is why the client's `testing` entry depends on @fencer/lock-fsm: a
 * fake that re-implemented the lock semantics would drift from the cell's,
 * and the client's tests would then check the client against the wrong
 * server. The fake adds only a leader's part (deadlines on an injectable
 * scheduler, held-open Acquires, watch streams) and the gRPC plumbing here.
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
import { FencerError, ok, type ErrorCode, type Result } from '@fencer/base';
import type { SessionInfo } from '@fencer/lock-fsm';
import { adminpb, lockservice, toServiceError } from '@fencer/protocol';
import { systemScheduler, type Scheduler } from '../scheduler.js';
import { FakeCell, matches, type Reply } from './fake-cell.js';
import { FakeLocks } from './fake-locks.js';

type Method = 'openSession' | 'acquire' | 'release' | 'checkToken' | 'getLock' | 'listLocks' | 'closeSession' | 'keepAlive' | 'watch';

/** Watch streams open at once. */
const WATCHERS_MAX = 10_000;
/** Heartbeats held while paused; past it the oldest is answered, as a paused node's buffer would overflow. */
const HELD_HEARTBEATS_MAX = 100_000;

export interface InjectedFault {
  /** Which call fails; every method when omitted. */
  readonly method?: Method;
  readonly code: ErrorCode;
  readonly leaderHint?: string;
  /** Apply the call first, then answer the error: the client cannot know the outcome and must retry idempotently. */
  readonly afterApply?: boolean;
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
   * Expire sessions on the fake's own clock, as a leader does: a session
   * whose heartbeats stop for its TTL is expired. Off by default, so unit
   * tests decide expiry themselves.
   */
  readonly autoExpire?: boolean;
  /** The leader's clock and timers (wait deadlines, lock-delay, autoExpire); the process's by default. */
  readonly scheduler?: Scheduler;
  /** Also serve CellAdmin.Status with this answer (see `status`). */
  readonly adminStatus?: adminpb.StatusResponse;
  /** How its ports listen: plaintext by default; TLS (e.g. requiring a client certificate) for the tests of secure clients. */
  readonly serverCredentials?: ServerCredentials;
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
  /** The lock table, in the contract's shapes (see FakeLocks). */
  readonly locks: FakeLocks;
  readonly calls: FakeCall[] = [];
  /** NOT_LEADER with this hint on every call while set (this node "is a follower"). */
  notLeaderHint: string | undefined;
  /** Admin Status answer; tests may change it. */
  status: adminpb.StatusResponse | undefined;
  address = '';
  private readonly cell: FakeCell;
  private readonly faults: InjectedFault[] = [];
  private readonly watchers = new Set<Watcher>();
  private readonly keepAlives = new Set<ServerDuplexStream<lockservice.KeepAliveRequest, lockservice.KeepAliveResponse>>();
  private heartbeatsPaused = false;
  private readonly heldHeartbeats: (() => void)[] = [];
  private server!: Server;

  private constructor(private readonly options: FakeLockServiceOptions) {
    super();
    this.status = options.adminStatus;
    const cellOptions = {
      scheduler: options.scheduler ?? systemScheduler,
      historyMax: options.historyMax ?? 10_000,
      ttlDefaultMs: options.ttlDefaultMs ?? 12_000,
      autoExpire: options.autoExpire ?? false,
      acquireHoldMs: options.acquireHoldMs,
    };
    this.cell = new FakeCell(cellOptions, {
      event: (ev) => {
        for (const w of this.watchers) if (matches(w, ev.name)) w.call.write(ev);
      },
      queued: (name, sessionId, requestId) => this.emit('queued', name, sessionId, requestId),
      canceled: (name, sessionId, requestId) => this.emit('canceled', name, sessionId, requestId),
    });
    this.locks = new FakeLocks(this.cell);
  }

  static async start(options: FakeLockServiceOptions = {}, port = 0): Promise<FakeLockService> {
    const fake = new FakeLockService(options);
    fake.server = new Server();
    fake.server.addService(lockservice.LockServiceService, fake.recordingAuthorization(fake.handlers()));
    fake.server.addService(adminpb.CellAdminService, fake.adminHandlers());
    fake.address = `127.0.0.1:${await fake.bind(port)}`;
    return fake;
  }

  /** Each call and stream as it opened: its method and its `authorization` metadata ('' when it had none). */
  readonly authorizations: { readonly method: string; readonly authorization: string }[] = [];

  private recordingAuthorization(handlers: lockservice.LockServiceServer): lockservice.LockServiceServer {
    const out: Record<string, unknown> = {};
    for (const [method, handler] of Object.entries(handlers) as [string, (...args: unknown[]) => unknown][]) {
      out[method] = (call: { metadata: { get(key: string): unknown[] } }, ...rest: unknown[]) => {
        this.authorizations.push({ method, authorization: String(call.metadata.get('authorization')[0] ?? '') });
        return handler.call(handlers, call, ...rest);
      };
    }
    return out as unknown as lockservice.LockServiceServer;
  }

  /** Listens on one more port with the same state: another "node" of the same cell. Returns its address. */
  async addPort(): Promise<string> {
    return `127.0.0.1:${await this.bind(0)}`;
  }

  private bind(port: number): Promise<number> {
    return new Promise<number>((resolve, reject) =>
      this.server.bindAsync(`127.0.0.1:${port}`, this.options.serverCredentials ?? ServerCredentials.createInsecure(), (err, p) =>
        err ? reject(err) : resolve(p),
      ),
    );
  }

  async stop(): Promise<void> {
    this.cell.stop();
    this.server.forceShutdown();
  }

  /** Revision of the last entry (or of the last appended event). Tests may move it forward, never back. */
  get revision(): number {
    return this.cell.revision;
  }

  set revision(revision: number) {
    this.cell.revision = revision;
  }

  /** Live sessions, by id. */
  get sessions(): ReadonlyMap<string, SessionInfo> {
    return new Map([...this.cell.fsm.sessions()].map((s) => [s.sessionId, s]));
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
    this.cell.compactHistory();
  }

  /**
   * Appends raw events to the watch history and sends them to matching
   * watchers, as one log entry that yields several events at one revision
   * would. The revision is taken as given (it must not go back).
   */
  appendEvents(events: readonly lockservice.WatchEvent[]): void {
    this.cell.appendEvents(events);
  }

  /** Watch streams open on the fake now. */
  get watchStreams(): number {
    return this.watchers.size;
  }

  get keepAliveStreams(): number {
    return this.keepAlives.size;
  }

  /** Expires a session as the leader would: its locks are released (EXPIRED), its waits dropped, waiters promoted. */
  expireSession(sessionId: string): void {
    this.cell.expireSession(sessionId);
  }

  callsOf(method: Method): unknown[] {
    return this.calls.filter((c) => c.method === method).map((c) => c.request);
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

  /**
   * One unary method: records the call, plays a follower or an injected
   * fault, else runs `body`, which answers through `reply` now or later.
   * A fault with afterApply lets the call take effect, then answers the fault.
   */
  private unary<Req, Res>(method: Method, body: (req: Req, reply: Reply<Res>, call: ServerUnaryCall<Req, Res>) => void) {
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
      const reply = (r: Result<Res, FencerError>): void => {
        if (done) return;
        done = true;
        if (fault) fail(new FencerError(fault.code, 'injected fault after the call took effect', fault.leaderHint));
        else if (r.ok) callback(null, r.value);
        else fail(r.error);
      };
      try {
        body(call.request, reply, call);
      } catch (e) {
        done = true;
        fail(e);
      }
    };
  }

  /** A unary method answered at once from the fake cell. */
  private served<Req, Res>(method: Method, serve: (req: Req) => Res) {
    return this.unary<Req, Res>(method, (req, reply) => reply(ok(serve(req))));
  }

  private handlers(): lockservice.LockServiceServer {
    const cell = this.cell;
    return {
      openSession: this.served('openSession', (req: lockservice.OpenSessionRequest) => cell.openSession(req)),
      closeSession: this.served('closeSession', (req: lockservice.CloseSessionRequest) => cell.closeSession(req)),
      acquire: this.unary<lockservice.AcquireRequest, lockservice.AcquireResponse>('acquire', (req, reply, call) => {
        const callerGone = cell.acquire(req, reply);
        call.once('cancelled', callerGone);
      }),
      release: this.served('release', (req: lockservice.ReleaseRequest) => cell.release(req)),
      checkToken: this.served('checkToken', (req: lockservice.CheckTokenRequest) => cell.checkToken(req)),
      getLock: this.served('getLock', (req: lockservice.GetLockRequest) => cell.getLock(req)),
      listLocks: this.served('listLocks', (req: lockservice.ListLocksRequest) => cell.listLocks(req)),
      keepAlive: (call) => this.keepAlive(call),
      watch: (call) => this.watch(call),
    };
  }

  private keepAlive(call: ServerDuplexStream<lockservice.KeepAliveRequest, lockservice.KeepAliveResponse>): void {
    this.record('keepAlive', {});
    if (this.notLeaderHint !== undefined) {
      call.emit('error', toServiceError(new FencerError('NOT_LEADER', 'this fake node is a follower', this.notLeaderHint)));
      return;
    }
    this.keepAlives.add(call);
    this.emit('keepAliveOpened');
    call.on('data', (req: lockservice.KeepAliveRequest) => {
      this.emit('heartbeat', req.sessionId);
      // The heartbeat reaches the "leader" when answered: a paused node holds it until resumed.
      const answer = (): void => {
        if (this.keepAlives.has(call)) call.write(this.cell.heartbeat(req.sessionId));
      };
      if (!this.heartbeatsPaused) return answer();
      this.heldHeartbeats.push(answer);
      if (this.heldHeartbeats.length > HELD_HEARTBEATS_MAX) this.heldHeartbeats.shift()?.();
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
  }

  private watch(call: ServerWritableStream<lockservice.WatchRequest, lockservice.WatchEvent>): void {
    const req = call.request;
    this.record('watch', req);
    let first: lockservice.WatchEvent[];
    try {
      if (this.watchers.size >= WATCHERS_MAX) throw new FencerError('TOO_MANY_REQUESTS', `the fake serves ${WATCHERS_MAX} watches already`);
      first = this.cell.watchStart(req);
    } catch (e) {
      call.emit('error', toServiceError(e instanceof FencerError ? e : new FencerError('INTERNAL', String(e))));
      return;
    }
    for (const ev of first) call.write(ev);
    const w: Watcher = { name: req.name, prefix: req.prefix, call };
    this.watchers.add(w);
    const gone = (): void => {
      this.watchers.delete(w);
    };
    call.on('cancelled', gone);
    call.on('close', gone);
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
      readSnapshot: (call: { emit(event: 'error', e: unknown): void }) =>
        call.emit('error', toServiceError(new FencerError('INTERNAL', 'not in the fake'))),
      freezeNamespace: unimplemented,
      unfreezeNamespace: unimplemented,
      exportNamespace: unimplemented,
      importNamespace: unimplemented,
      namespaceStatus: unimplemented,
      listNamespaces: unimplemented,
      setNamespaceQuotas: unimplemented,
      setNamespaceCredentials: unimplemented,
    };
  }
}
