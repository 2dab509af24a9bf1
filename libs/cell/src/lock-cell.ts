/**
 * One replica of a lock cell: the generic group core (replica + adapter +
 * proposals + read barrier + leadership + member directory) with the lock
 * layer on top: the leader's duties (session, wait and lock-delay deadlines
 * on the monotonic clock), the heartbeat confirmation round, held-open
 * Acquire calls and the watch hub. Its request-level API is what the gRPC
 * services and the simulator's clients both call; a follower forwards unary
 * calls and heartbeats to the leader through the injected LeaderForwarder.
 *
 * Everything is callbacks over the injected environment, never promises or
 * real timers, so the simulator runs this very class on virtual time.
 */
import {
  FencerError,
  type LogIndex,
  Namespace,
  NodeId,
  RequestId,
  Revision,
  SessionId,
  type Result,
  err,
  isValidNamespace,
  makeSessionId,
  namespaceOfSessionId,
  ok,
  unreachable,
} from '@fencer/base';
import type { Entry } from '@fencer/raft';
import type { Applied, StateMachine } from '@fencer/replica';
import type { RaftLogStore } from '@fencer/wal';
import {
  type AcquireOutcome,
  type ApplyResult,
  type CloseSessionOutcome,
  type Command,
  type Failure,
  type LockState,
  type OpenSessionOutcome,
  type ReleaseOutcome,
  CLIENT_ID_BYTES_MAX,
  LIST_LOCKS_LIMIT_DEFAULT,
  LIST_LOCKS_LIMIT_MAX,
  LOCK_DELAY_MS_MAX,
  LockStateMachine,
  REQUEST_ID_BYTES_MAX,
  WAIT_MS_MAX,
  decodeCommand,
  encodeCommand,
  utf8ByteLength,
  isFailure,
  parseLockPrefix,
  validateLockName,
} from '@fencer/lock-fsm';
import type { Cancel, CellEnv } from './env.js';
import { type Done, type GroupConfig, GroupCore, type ReplicaFactory } from './group.js';
import { HeartbeatConfirmer } from './heartbeat-confirmer.js';
import { HeartbeatRelay, type RelayRoute } from './heartbeat-relay.js';
import { type DutyCommand, LeaderDuties } from './leader-duties.js';
import {
  CATCH_UP_TIMEOUT_MS,
  CATCH_UP_WAITS_MAX,
  FORWARD_TIMEOUT_MS,
  HEARTBEATS_WAITING_MAX,
  HEARTBEAT_BATCH_SESSIONS_MAX,
  HEARTBEAT_RELAY_WAITING_MAX,
  HEARTBEAT_RELAY_WINDOW_MS,
  WAIT_GRACE_MS,
} from './limits.js';
import { afterChained } from './timers.js';
import { type WaitResult, WaitingCalls } from './waiting-calls.js';
import { WatchHub, type WatchSink } from './watch-hub.js';
import {
  type AcquireRequest,
  type AcquireResponse,
  type CellMethod,
  type HeartbeatAnswer,
  type RequestOf,
  type ResponseOf,
  WIRE_ACQUIRE_STATUS,
  holderToWire,
  lockToWire,
  modeFromWire,
} from './wire.js';

/** Where a write landed in the log (the simulator's durability checkers use it; the gRPC layer ignores it). */
export interface Receipt {
  readonly index: LogIndex;
  readonly term: number;
  readonly data: Uint8Array;
}

/** The answer to a unary call, with the receipt of the entry it wrote when it wrote one here. */
export type CallDone<T> = (outcome: Result<T, FencerError>, receipt?: Receipt) => void;

/** How a call reached this replica. */
export interface CallContext {
  /** Forwarded by another replica: never forwarded again (answered NOT_LEADER with a leader hint instead). */
  readonly forwarded: boolean;
}

/** Sends calls to the leader (gRPC to its client port in production, the simulated network in the simulator). */
export interface LeaderForwarder {
  forward<M extends CellMethod>(leader: NodeId, address: string, method: M, request: RequestOf<M>, done: CallDone<ResponseOf<M>>): Cancel;
  heartbeats(leader: NodeId, address: string, sessionIds: readonly string[], done: Done<HeartbeatAnswer[]>): Cancel;
}

export interface LockCellConfig extends GroupConfig {
  readonly tickMs: number;
  readonly ttlDefaultMs: number;
  readonly ttlMinMs: number;
  readonly ttlMaxMs: number;
  /** Held-open Acquire calls on this node. */
  readonly waitingCallsMax: number;
  readonly watchHistoryMax: number;
  readonly watcherBufferMax: number;
  readonly watchersMax: number;
  readonly watchProgressMs: number;
  /** Least time between the starts of two heartbeat confirmation rounds. */
  readonly heartbeatRoundSpacingMs: number;
  /**
   * Claim a namespace on its first OpenSession (a cell without a control plane owns every namespace).
   * False for a cell a control plane manages: it owns only what ClaimNamespace gave it (ARCHITECTURE decision 5).
   */
  readonly autoClaim: boolean;
}

/**
 * Test-only seams: planted bugs and the simulator's observation points. The
 * cell node never passes any; nothing in its configuration reaches them.
 */
export interface LockCellTestHooks {
  /** Planted bug: the leader extends leases at once, without confirming it still leads. */
  readonly heartbeatWithoutConfirmation?: boolean;
  /** Planted bug: every replica answers GetLock, CheckToken and ListLocks from its own applied state at once (no ReadIndex round, no forwarding). */
  readonly readWithoutBarrier?: boolean;
  /** Planted bug: the leader answers GRANTED for a free lock as soon as it proposes the Acquire, before the entry commits. */
  readonly grantBeforeCommit?: boolean;
  /** Rewrites what the state machine reports for an entry (planted lock-level bugs). */
  readonly rewriteApplied?: (command: Command, applied: ApplyResult) => ApplyResult;
  /** The state linearizable reads are answered from (a planted stale read). */
  readonly readState?: () => LockStateMachine;
  /** Every applied command, after the cell handled it. */
  readonly applied?: (entry: Entry, command: Command, applied: ApplyResult, fsm: LockStateMachine) => void;
  /** Every deadline command this leader proposes. */
  readonly dutyProposed?: (command: DutyCommand) => void;
  /** Builds the replica (replica-level planted bugs: `createReplica` from `@fencer/replica/testing`). */
  readonly makeReplica?: ReplicaFactory;
}

export type WatchRequest = { readonly name: string; readonly prefix: boolean; readonly sinceRevision: number };

/** The linearizable reads (the readWithoutBarrier test hook serves these locally). */
const READ_METHODS: ReadonlySet<CellMethod> = new Set<CellMethod>(['getLock', 'checkToken', 'listLocks']);

function fail(code: FencerError['code'], message: string, leaderHint?: string): never {
  throw new FencerError(code, message, leaderHint);
}

/** The namespace of a lock name or prefix the request validation already accepted. */
function namespaceOfName(name: string): string {
  const parsed = parseLockPrefix(name.endsWith('/') ? name : `${name}/`);
  if (!parsed.ok) fail(parsed.code, parsed.message);
  return parsed.namespace;
}

/** Reads answer only for a namespace this cell owns (ARCHITECTURE decision 5); a stale router gets NAMESPACE_NOT_HERE, never "free". */
function requireOwned(fsm: LockStateMachine, name: string): void {
  const bad = fsm.checkNamespace(namespaceOfName(name));
  if (bad) fail(bad.code, bad.message);
}

function failureOf(o: unknown): Failure | undefined {
  return typeof o === 'object' && o !== null && (o as { ok?: unknown }).ok === false ? (o as Failure) : undefined;
}

/** Session id's embedded namespace, or SESSION_NOT_FOUND for an id no server could have issued. */
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

/** Checks a request's fields before it is served or forwarded: bad input is refused where it arrives. */
const validators: { readonly [M in CellMethod]: (req: RequestOf<M>) => void } = {
  openSession: (req) => {
    if (!isValidNamespace(req.namespace))
      fail('INVALID_NAME', `namespace "${req.namespace.slice(0, 80)}" must be 1-64 characters of [A-Za-z0-9._-], not "." or ".."`);
    if (utf8ByteLength(req.clientId) > CLIENT_ID_BYTES_MAX)
      fail('INVALID_ARGUMENT', `client_id is longer than ${CLIENT_ID_BYTES_MAX} bytes`);
  },
  closeSession: (req) => void sessionNamespace(req.sessionId),
  release: (req) => checkName(req.name, sessionNamespace(req.sessionId)),
  acquire: (req) => {
    checkName(req.name, sessionNamespace(req.sessionId));
    if (!modeFromWire(req.mode)) fail('INVALID_MODE', `mode ${req.mode} is not EXCLUSIVE (1) or SHARED (2)`);
    if (req.requestId === '') fail('MISSING_REQUEST_ID', 'request_id is required: a unique id per attempt makes retries safe');
    if (utf8ByteLength(req.requestId) > REQUEST_ID_BYTES_MAX)
      fail('INVALID_ARGUMENT', `request_id is longer than ${REQUEST_ID_BYTES_MAX} bytes`);
  },
  checkToken: (req) => checkName(req.name),
  getLock: (req) => checkName(req.name),
  listLocks: (req) => {
    const parsed = parseLockPrefix(req.prefix);
    if (!parsed.ok) fail(parsed.code, parsed.message);
  },
};

interface CatchUp {
  readonly revision: number;
  readonly run: () => void;
}

export class LockCell {
  fsm: LockStateMachine;
  readonly core: GroupCore;
  readonly hub: WatchHub;
  readonly duties = new LeaderDuties();
  readonly waits: WaitingCalls;
  readonly heartbeats: HeartbeatConfirmer;
  /** A follower's batches of its own clients' heartbeats to the leader. */
  readonly relay: HeartbeatRelay;
  private readonly catchUps = new Set<CatchUp>();
  private ticksSinceStats = 0;
  private readonly hooks: LockCellTestHooks;

  constructor(
    readonly config: LockCellConfig,
    store: RaftLogStore,
    readonly env: CellEnv,
    private readonly forwarder: LeaderForwarder,
    hooks: LockCellTestHooks = {},
  ) {
    this.hooks = hooks;
    this.fsm = new LockStateMachine({ autoClaim: config.autoClaim });
    this.hub = new WatchHub({
      historyMax: config.watchHistoryMax,
      watcherBufferMax: config.watcherBufferMax,
      watchersMax: config.watchersMax,
      progressIntervalMs: config.watchProgressMs,
    });
    this.waits = new WaitingCalls(config.waitingCallsMax);
    this.heartbeats = new HeartbeatConfirmer(
      (done) => this.core.replica.readIndex((r) => done(r.ok ? null : r.error)),
      HEARTBEATS_WAITING_MAX,
      {
        spacingMs: config.heartbeatRoundSpacingMs,
        nowMs: () => env.clock.monoMs(),
        after: (ms, run) => void env.after(ms, run),
      },
    );
    this.relay = new HeartbeatRelay({
      after: (ms, run) => env.after(ms, run),
      route: () => this.relayRoute(),
      windowMs: HEARTBEAT_RELAY_WINDOW_MS,
      timeoutMs: FORWARD_TIMEOUT_MS,
      batchSessionsMax: HEARTBEAT_BATCH_SESSIONS_MAX,
      waitingMax: HEARTBEAT_RELAY_WAITING_MAX,
    });
    this.core = new GroupCore(
      config,
      store,
      this.adapter(),
      env,
      {
        becameLeader: () => this.seedDuties(),
        steppedDown: () => {
          this.duties.stepDown();
          this.waits.resolveAll({ kind: 'leadership-lost' });
        },
      },
      hooks.makeReplica,
    );
    this.learnRestoredMembers();
  }

  get id(): NodeId {
    return this.config.id;
  }

  get isLeader(): boolean {
    return this.core.isLeader;
  }

  leaderAddress(): string | undefined {
    return this.core.leaderAddress();
  }

  /** Advances Raft one tick, proposes the leader's passed deadlines, sends watch PROGRESS, reports metrics. */
  tick(): void {
    const now = this.env.clock.monoMs();
    this.core.tick();
    if (this.isLeader) for (const command of this.duties.due(now)) this.proposeDuty(command);
    this.hub.tick(now);
    this.env.metrics.raftStatus(() => {
      const st = this.core.replica.status();
      return {
        term: st.term,
        commit: st.commit,
        applied: this.core.replica.applied,
        isLeader: this.isLeader,
        watchers: this.hub.watcherCount,
      };
    });
    if (++this.ticksSinceStats >= Math.max(1, Math.round(1000 / this.config.tickMs))) {
      this.ticksSinceStats = 0;
      this.env.metrics.tableSizes(() => this.fsmStats());
    }
  }

  /** Proposes a command; `done` gets where it landed and the state machine's outcome once applied here. */
  propose(command: Command, done: Done<Applied>): void {
    this.core.propose(encodeCommand(command), done);
  }

  // ---------------------------------------------------------------- the request API

  /**
   * Serves one unary call: validated here, then run on the leader or
   * forwarded to it. Returns a cancel for a caller that gives up (a held
   * Acquire then withdraws its wait).
   */
  call<M extends CellMethod>(method: M, request: RequestOf<M>, ctx: CallContext, done: CallDone<ResponseOf<M>>): Cancel {
    let answered = false;
    const answer: CallDone<ResponseOf<M>> = (outcome, receipt) => {
      if (answered) return;
      answered = true;
      done(outcome, receipt);
    };
    try {
      (validators[method] as (req: RequestOf<M>) => void)(request);
      if (this.isLeader || (this.hooks.readWithoutBarrier === true && READ_METHODS.has(method))) return this.serve(method, request, answer);
      return this.forward(method, request, ctx, answer);
    } catch (e) {
      if (!(e instanceof FencerError)) throw e;
      answer(err(e));
      return () => {};
    }
  }

  private serve<M extends CellMethod>(method: M, request: RequestOf<M>, done: CallDone<ResponseOf<M>>): Cancel {
    const d = done as CallDone<unknown>;
    switch (method) {
      case 'openSession':
        return this.openSession(request as RequestOf<'openSession'>, d);
      case 'closeSession':
        return this.write({ kind: 'CloseSession', sessionId: SessionId((request as RequestOf<'closeSession'>).sessionId) }, d, (o) => ({
          released: [...(o as CloseSessionOutcome).released],
        }));
      case 'release': {
        const req = request as RequestOf<'release'>;
        return this.write({ kind: 'Release', sessionId: SessionId(req.sessionId), name: req.name, token: Revision(req.token) }, d, (o) => ({
          ok: (o as ReleaseOutcome).released,
        }));
      }
      case 'acquire':
        return this.acquire(request as AcquireRequest, d);
      case 'checkToken':
        return this.read(d, (fsm) => {
          const req = request as RequestOf<'checkToken'>;
          requireOwned(fsm, req.name);
          const a = fsm.checkToken(req.name, Revision(req.token));
          return { current: a.current, latestToken: a.latestToken, revision: fsm.revision };
        });
      case 'getLock':
        return this.read(d, (fsm) => {
          const req = request as RequestOf<'getLock'>;
          requireOwned(fsm, req.name);
          return { lock: lockToWire(fsm.getLock(req.name)), revision: fsm.revision };
        });
      case 'listLocks':
        return this.read(d, (fsm) => {
          const req = request as RequestOf<'listLocks'>;
          requireOwned(fsm, req.prefix);
          const limit = req.limit === 0 ? LIST_LOCKS_LIMIT_DEFAULT : Math.min(req.limit, LIST_LOCKS_LIMIT_MAX);
          const page = fsm.listLocks(req.prefix, limit, req.pageToken);
          if (isFailure(page)) fail(page.code, page.message);
          return { locks: page.locks.map(lockToWire), nextPageToken: page.nextPageToken, revision: fsm.revision };
        });
      default:
        return unreachable(method as never, 'cell method');
    }
  }

  private forward<M extends CellMethod>(method: M, request: RequestOf<M>, ctx: CallContext, done: CallDone<ResponseOf<M>>): Cancel {
    const target = this.leaderTarget(ctx);
    const timeoutMs =
      method === 'acquire' ? Math.min(WAIT_MS_MAX, (request as AcquireRequest).waitMs) + FORWARD_TIMEOUT_MS : FORWARD_TIMEOUT_MS;
    let cancelCall: Cancel = () => {};
    const timer = afterChained(this.env.after, timeoutMs, () => {
      cancelCall();
      done(err(new FencerError('NO_LEADER', `the leader at ${target.address} did not answer within ${timeoutMs} ms`, target.address)));
    });
    cancelCall = this.forwarder.forward(target.id, target.address, method, request, (outcome, receipt) => {
      timer();
      done(outcome, receipt);
    });
    return () => {
      timer();
      cancelCall();
    };
  }

  /** Where a call goes when this node is not the leader; throws NOT_LEADER / NO_LEADER when it cannot be forwarded. */
  private leaderTarget(ctx: CallContext): { id: NodeId; address: string } {
    const leader = this.core.leader;
    const address = this.leaderAddress();
    if (ctx.forwarded) fail('NOT_LEADER', 'this replica is not the leader', address);
    if (leader === null || address === undefined)
      fail('NO_LEADER', 'the cell has no leader right now (election in progress); retry with the same request_id');
    return { id: leader, address };
  }

  private openSession(req: RequestOf<'openSession'>, done: CallDone<unknown>): Cancel {
    const c = this.config;
    const ttlMs = req.ttlMs === 0 ? c.ttlDefaultMs : Math.min(c.ttlMaxMs, Math.max(c.ttlMinMs, req.ttlMs));
    const r = this.env.random;
    const unique = [r.nextU32(), r.nextU32(), r.nextU32(), r.nextU32()].map((n) => n.toString(16).padStart(8, '0')).join('');
    const sessionId = makeSessionId(Namespace(req.namespace), unique);
    return this.write({ kind: 'OpenSession', sessionId, clientId: req.clientId, namespace: Namespace(req.namespace), ttlMs }, done, (o) => {
      const opened = o as OpenSessionOutcome;
      return { sessionId: opened.sessionId, ttlMs: opened.ttlMs };
    });
  }

  /** Proposes a command and answers with `answer(outcome)`, or the outcome's failure. */
  private write(command: Command, done: CallDone<unknown>, answer: (outcome: unknown) => unknown): Cancel {
    const data = encodeCommand(command);
    this.core.propose(data, (r) => {
      if (!r.ok) return done(r);
      const receipt: Receipt = { index: r.value.index, term: r.value.term, data };
      const failure = failureOf(r.value.result);
      if (failure) return done(err(new FencerError(failure.code, failure.message)), receipt);
      done(ok(answer(r.value.result)), receipt);
    });
    return () => {};
  }

  /** A linearizable read: a ReadIndex round, then `answer` from the applied state. */
  private read(done: CallDone<unknown>, answer: (fsm: LockStateMachine) => unknown): Cancel {
    const barrier =
      this.hooks.readWithoutBarrier === true
        ? (then: (error: FencerError | null) => void) => then(null)
        : (then: (error: FencerError | null) => void) => this.core.readBarrier(then);
    barrier((error) => {
      if (error) return done(err(error));
      try {
        done(ok(answer(this.hooks.readState?.() ?? this.fsm)));
      } catch (e) {
        if (!(e instanceof FencerError)) throw e;
        done(err(e));
      }
    });
    return () => {};
  }

  /**
   * Acquire on the leader. A queued request with a wait is held open until
   * the log grants or cancels it, its session ends, leadership moves, or
   * its wait (plus a grace period) runs out on this node's timer; then
   * QUEUED tells the client to retry with the same request id.
   */
  private acquire(req: AcquireRequest, done: CallDone<unknown>): Cancel {
    const mode = modeFromWire(req.mode)!;
    const waitMs = Math.min(req.waitMs, WAIT_MS_MAX);
    const sessionId = SessionId(req.sessionId);
    const requestId = RequestId(req.requestId);
    const command: Command = {
      kind: 'Acquire',
      sessionId,
      name: req.name,
      mode,
      requestId,
      waitMs,
      lockDelayMs: Math.min(req.lockDelayMs, LOCK_DELAY_MS_MAX),
      tryLock: waitMs === 0,
    };
    const data = encodeCommand(command);
    let receipt: Receipt | undefined;
    let finished = false;
    let queued = false;
    let early: WaitResult | undefined;
    let safety: Cancel = () => {};
    const finish = (outcome: Result<AcquireResponse, FencerError>): void => {
      if (finished) return;
      finished = true;
      safety();
      handle?.cancel();
      done(outcome, receipt);
    };
    const answerWait = (w: WaitResult): void => {
      switch (w.kind) {
        case 'granted':
          return finish(
            ok({
              status: WIRE_ACQUIRE_STATUS.GRANTED,
              token: w.token,
              holders: this.fsm.getLock(req.name).holders.map(holderToWire),
              queuePosition: 0,
              revision: w.revision,
            }),
          );
        case 'cancelled':
          return finish(ok(this.timedOut(req.name, w.revision)));
        case 'session-gone':
          return finish(err(new FencerError('SESSION_NOT_FOUND', `session ${sessionId} expired or was closed while waiting`)));
        case 'leadership-lost':
        case 'gave-up':
          return finish(ok(this.queued(req.name, sessionId, requestId, this.fsm.revision)));
        default:
          return unreachable(w, 'wait result');
      }
    };
    // Registered before the proposal, so a grant applied in the same batch as the queueing still reaches it.
    const handle =
      waitMs > 0
        ? this.waits.register(sessionId, requestId, (w) => {
            if (queued) answerWait(w);
            else early = w;
          })
        : undefined;
    if (waitMs > 0 && !handle) {
      finish(err(new FencerError('TOO_MANY_REQUESTS', 'too many Acquire calls are waiting on this node; retry later')));
      return () => {};
    }
    const freeBefore = this.hooks.grantBeforeCommit === true && this.isFree(req.name);
    this.core.propose(data, (r) => {
      if (!r.ok) return finish(r);
      receipt = { index: r.value.index, term: r.value.term, data };
      const failure = failureOf(r.value.result);
      if (failure) return finish(err(new FencerError(failure.code, failure.message)));
      const o = r.value.result as AcquireOutcome;
      if (o.status === 'GRANTED')
        return finish(
          ok({
            status: WIRE_ACQUIRE_STATUS.GRANTED,
            token: o.token,
            holders: o.holders.map(holderToWire),
            queuePosition: 0,
            revision: o.revision,
          }),
        );
      if (o.status === 'TIMED_OUT') return finish(ok(this.timedOut(req.name, o.revision)));
      if (!handle) return finish(ok(this.queued(req.name, sessionId, requestId, o.revision)));
      queued = true;
      if (early) return answerWait(early);
      safety = afterChained(this.env.after, waitMs + WAIT_GRACE_MS, () => handle.cancel());
    });
    if (freeBefore) this.grantBeforeCommitted(finish);
    return () => {
      if (finished) return;
      const wasQueued = queued;
      finish(err(new FencerError('CANCELLED', 'the caller gave up')));
      if (wasQueued) this.propose({ kind: 'CancelWait', sessionId, name: req.name, requestId, reason: 'cancelled' }, () => {});
    };
  }

  private isFree(name: string): boolean {
    const lock = this.fsm.getLock(name);
    return lock.holders.length === 0 && lock.waiters.length === 0;
  }

  /** The planted bug: GRANTED, with the token of the entry just appended to this leader's log, before it commits. */
  private grantBeforeCommitted(finish: (outcome: Result<AcquireResponse, FencerError>) => void): void {
    const token = this.core.replica.status().lastIndex + this.fsm.revisionBase;
    finish(ok({ status: WIRE_ACQUIRE_STATUS.GRANTED, token, holders: [], queuePosition: 0, revision: token }));
  }

  private timedOut(name: string, revision: number): AcquireResponse {
    return {
      status: WIRE_ACQUIRE_STATUS.TIMED_OUT,
      token: 0,
      holders: this.fsm.getLock(name).holders.map(holderToWire),
      queuePosition: 0,
      revision,
    };
  }

  private queued(name: string, sessionId: SessionId, requestId: RequestId, revision: number): AcquireResponse {
    const lock = this.fsm.getLock(name);
    const at = lock.waiters.findIndex((w) => w.sessionId === sessionId && w.requestId === requestId);
    return {
      status: WIRE_ACQUIRE_STATUS.QUEUED,
      token: 0,
      holders: lock.holders.map(holderToWire),
      queuePosition: Math.max(0, at),
      revision,
    };
  }

  /**
   * Heartbeats for a batch of sessions. On the leader they are recorded
   * after a leadership-confirmation round begun after they arrived, so a
   * deposed leader that has not noticed yet never extends a lease; on a
   * follower they join the relay's next batch to the leader
   * (heartbeat-relay.ts), and the caller gets its share of the leader's
   * answer (a relayed batch is never relayed again).
   */
  heartbeat(sessionIds: readonly string[], ctx: CallContext, done: Done<HeartbeatAnswer[]>): Cancel {
    if (sessionIds.length > HEARTBEAT_BATCH_SESSIONS_MAX) {
      done(err(new FencerError('INVALID_ARGUMENT', `at most ${HEARTBEAT_BATCH_SESSIONS_MAX} sessions per heartbeat batch`)));
      return () => {};
    }
    if (this.isLeader) {
      this.heartbeatOnLeader(sessionIds, done);
      return () => {};
    }
    try {
      this.leaderTarget(ctx);
    } catch (e) {
      done(err(e as FencerError));
      return () => {};
    }
    return this.relay.relay(sessionIds, (r) => {
      if (r.ok) this.env.metrics.heartbeatsAnswered('relayed', r.value.length);
      done(r);
    });
  }

  private heartbeatOnLeader(sessionIds: readonly string[], done: Done<HeartbeatAnswer[]>): void {
    if (this.hooks.heartbeatWithoutConfirmation === true) return done(ok(this.recordHeartbeats(sessionIds)));
    const queued = this.heartbeats.confirm((error) => {
      if (error)
        return done(err(error instanceof FencerError ? error : new FencerError('NOT_LEADER', error.message, this.leaderAddress())));
      done(ok(this.recordHeartbeats(sessionIds)));
    });
    if (!queued) done(err(new FencerError('TOO_MANY_REQUESTS', 'too many heartbeats waiting for confirmation')));
  }

  /**
   * Where the relay's next batch goes: the leader this replica knows of, or
   * this replica itself if it has become the leader since the heartbeats
   * arrived (they then take this leader's confirmation round, as if sent here).
   */
  private relayRoute(): RelayRoute {
    if (this.isLeader) {
      return {
        key: this.id,
        address: this.leaderAddress() ?? this.id,
        send: (sessionIds, done) => {
          this.heartbeatOnLeader(sessionIds, done);
          return () => {};
        },
      };
    }
    const target = this.leaderTarget({ forwarded: false });
    return {
      key: target.id,
      address: target.address,
      send: (sessionIds, done) => this.forwarder.heartbeats(target.id, target.address, sessionIds, done),
    };
  }

  /**
   * After the confirmation round this leader has applied everything
   * committed before the heartbeats: "expired" is said only of a session
   * gone from that state (its locks released). One whose expiry is proposed
   * but not applied gets no TTL and is not yet called expired.
   */
  private recordHeartbeats(sessionIds: readonly string[]): HeartbeatAnswer[] {
    const now = this.env.clock.monoMs();
    this.env.metrics.heartbeatsAnswered('leader', sessionIds.length);
    return sessionIds.map((id) => {
      const remaining = this.duties.heartbeat(now, SessionId(id));
      if (remaining !== undefined) return { sessionId: id, ttlMsRemaining: remaining, expired: false };
      return { sessionId: id, ttlMsRemaining: 0, expired: this.fsm.getSession(id) === undefined };
    });
  }

  /**
   * Starts a Watch on this replica. From now (since_revision 0) it is
   * linearizable wherever it runs: the leader confirms a read barrier, a
   * follower learns the leader's revision after one and waits until it has
   * applied that far; then one SNAPSHOT per live lock, PROGRESS, and live
   * events. `started` gets null once the watcher is subscribed, or the error
   * that ends it. The returned cancel unsubscribes (or abandons the start).
   */
  watch(req: WatchRequest, sink: WatchSink, started: (error: FencerError | null) => void): Cancel {
    let stopped = false;
    let abandon: Cancel = () => {};
    const stop: Cancel = () => {
      stopped = true;
      abandon();
      this.hub.unsubscribe(sink);
    };
    try {
      if (req.prefix) {
        const parsed = parseLockPrefix(req.name);
        if (!parsed.ok) fail(parsed.code, parsed.message);
      } else {
        checkName(req.name);
      }
    } catch (e) {
      started(e as FencerError);
      return stop;
    }
    const subscribe = (): void => {
      if (stopped) return;
      const bad = this.fsm.checkNamespace(namespaceOfName(req.name));
      if (bad) return started(new FencerError(bad.code, bad.message));
      const r = this.hub.subscribe({ name: req.name, prefix: req.prefix }, req.sinceRevision, sink, this.env.clock.monoMs(), () =>
        this.snapshotLocks(req),
      );
      if (r === 'compacted') {
        return started(
          new FencerError(
            'COMPACTED',
            `revision ${req.sinceRevision} is older than this node's watch history (from ${this.hub.floorRevision}); resync with GetLock, then watch from its revision`,
          ),
        );
      }
      if (r === 'full') return started(new FencerError('TOO_MANY_REQUESTS', 'this node has too many watchers; try another replica'));
      started(null);
    };
    if (req.sinceRevision !== 0) {
      subscribe();
      return stop;
    }
    abandon = this.linearizableFloor(req, (error) => {
      if (stopped) return;
      if (error) return started(error);
      subscribe();
    });
    return stop;
  }

  /** Runs `then` once this replica's state includes every write committed before the call (a read barrier). */
  private linearizableFloor(req: WatchRequest, then: (error: FencerError | null) => void): Cancel {
    if (this.isLeader) {
      this.core.readBarrier(then);
      return () => {};
    }
    // The leader's revision after its own read barrier: any read on it gives one.
    const learn = (outcome: Result<{ revision: number }, FencerError>): void => {
      if (!outcome.ok) return then(outcome.error);
      cancelCatchUp = this.catchUp(outcome.value.revision, then);
    };
    let cancelCatchUp: Cancel = () => {};
    const cancelCall = req.prefix
      ? this.call('listLocks', { prefix: req.name, limit: 1, pageToken: '' }, { forwarded: false }, learn)
      : this.call('getLock', { name: req.name }, { forwarded: false }, learn);
    return () => {
      cancelCall();
      cancelCatchUp();
    };
  }

  /** Runs `then` once this replica has applied up to `revision`, or fails after CATCH_UP_TIMEOUT_MS. */
  private catchUp(revision: number, then: (error: FencerError | null) => void): Cancel {
    if (this.fsm.revision >= revision) {
      then(null);
      return () => {};
    }
    if (this.catchUps.size >= CATCH_UP_WAITS_MAX) {
      then(new FencerError('TOO_MANY_REQUESTS', 'too many watches are waiting for this replica to catch up; try another replica'));
      return () => {};
    }
    const wait: CatchUp = {
      revision,
      run: () => {
        timer();
        this.catchUps.delete(wait);
        then(null);
      },
    };
    this.catchUps.add(wait);
    const timer = this.env.after(CATCH_UP_TIMEOUT_MS, () => {
      if (!this.catchUps.delete(wait)) return;
      then(
        new FencerError(
          'DEADLINE_EXCEEDED',
          `this replica did not catch up with the leader (revision ${revision}) within ${CATCH_UP_TIMEOUT_MS} ms; retry or watch another replica`,
        ),
      );
    });
    return () => {
      timer();
      this.catchUps.delete(wait);
    };
  }

  private snapshotLocks(req: WatchRequest): Iterable<LockState> {
    if (!req.prefix) {
      const lock = this.fsm.getLock(req.name);
      return lock.holders.length > 0 || lock.waiters.length > 0 ? [lock] : [];
    }
    return this.allLocks(req.name);
  }

  /** Every live lock under a prefix, ordered by name (Watch's starting SNAPSHOT). */
  *allLocks(prefix: string): Generator<LockState> {
    let pageToken = '';
    do {
      const page = this.fsm.listLocks(prefix, LIST_LOCKS_LIMIT_MAX, pageToken);
      if (isFailure(page)) return;
      yield* page.locks;
      pageToken = page.nextPageToken;
    } while (pageToken !== '');
  }

  /** Counts for status and metrics (walks the sessions and waiters: for operators, not hot paths). */
  fsmStats(): { revisionBase: number; sessions: number; locks: number; waiters: number } {
    let sessions = 0;
    let locks = 0;
    for (const ns of this.fsm.namespaces()) {
      sessions += ns.sessions;
      locks += ns.locks;
    }
    let waiters = 0;
    for (const _ of this.fsm.waiters()) waiters++;
    return { revisionBase: this.fsm.revisionBase, sessions, locks, waiters };
  }

  /** Ends every held call and watcher (the node is shutting down). */
  close(): void {
    this.waits.resolveAll({ kind: 'leadership-lost' });
    this.hub.close();
  }

  // ---------------------------------------------------------------- the apply stream

  private adapter(): StateMachine {
    return {
      apply: (entry: Entry): unknown => {
        const command = decodeCommand(entry.data);
        let applied = this.fsm.apply(entry.index, command);
        if (this.hooks.rewriteApplied) applied = this.hooks.rewriteApplied(command, applied);
        this.afterApply(command, applied);
        this.hooks.applied?.(entry, command, applied, this.fsm);
        return applied.outcome;
      },
      snapshot: (): Uint8Array => this.fsm.snapshot(),
      restore: (data: Uint8Array): void => {
        this.fsm = LockStateMachine.restore(data, { autoClaim: this.config.autoClaim });
        this.afterRestore();
      },
    };
  }

  /** After every applied command, on every replica: watchers, deadlines, held calls, the member directory. */
  private afterApply(command: Command, applied: ApplyResult): void {
    const { outcome, events, revision } = applied;
    this.hub.publish(revision, events);
    this.duties.applied(this.env.clock.monoMs(), command, outcome, events);
    if (command.kind === 'ExpireSession' && outcome.ok) this.env.metrics.sessionExpired();
    // While the replica is being constructed (replaying its log) there is no core yet: the constructor
    // learns the whole replicated directory from the state machine afterwards.
    if (command.kind === 'SetMemberAddress' && outcome.ok)
      this.core?.members.learn(NodeId(command.id), command.address, command.peerAddress);
    if (command.kind === 'ForgetMember' && outcome.ok) this.core?.members.forget(NodeId(command.id));
    for (const event of events) {
      const requestId = event.requestId;
      if (!requestId) continue;
      if (event.type === 'ACQUIRED')
        this.waits.resolve(event.sessionId, requestId, { kind: 'granted', token: event.token, revision: event.revision });
      else if (event.type === 'CANCELED') this.waits.resolve(event.sessionId, requestId, { kind: 'cancelled', revision: event.revision });
      else if (event.type === 'EXPIRED') this.waits.resolve(event.sessionId, requestId, { kind: 'session-gone' });
    }
    this.runCatchUps();
  }

  /** The state machine was replaced by a snapshot (restart or InstallSnapshot). */
  private afterRestore(): void {
    this.hub.reset(this.fsm.revision);
    // On a restart the replica restores its snapshot while it is being constructed: no core (and no leadership) yet.
    if (this.core === undefined) return;
    this.learnRestoredMembers();
    if (this.isLeader) this.seedDuties();
    this.runCatchUps();
  }

  /** Learns the replicated member directory restored at construction (the core did not exist yet). */
  private learnRestoredMembers(): void {
    for (const [id, m] of this.fsm.members()) this.core.members.learn(NodeId(id), m.address, m.peerAddress);
  }

  /** Every session, waiter and lock-delay gets a fresh full period (ARCHITECTURE "Expiry"). */
  private seedDuties(): void {
    this.duties.becomeLeader(this.env.clock.monoMs(), this.fsm.sessions(), this.fsm.waiters(), this.fsm.delayedLocks());
  }

  private proposeDuty(command: DutyCommand): void {
    this.hooks.dutyProposed?.(command);
    this.propose(command, (r) => {
      if (!r.ok) this.env.logger.debug({ kind: command.kind, code: r.error.code }, 'leader duty proposal did not land; retried later');
    });
  }

  private runCatchUps(): void {
    if (this.catchUps.size === 0) return;
    const revision = this.fsm.revision;
    for (const wait of [...this.catchUps]) if (revision >= wait.revision) wait.run();
  }
}
