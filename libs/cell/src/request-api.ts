/**
 * The lock cell's request API: what the gRPC services and the simulator's
 * clients both call. A call is validated where it arrives, then served here
 * if this replica leads (writes through the log, linearizable reads behind
 * a read barrier, Acquire through held-acquire.ts) or forwarded to the
 * leader through the injected LeaderForwarder (once: a forwarded call that
 * meets a follower is answered NOT_LEADER with a leader hint).
 *
 * Each call is answered once, through the `done` it came with.
 */
import { FencerError, type LogIndex, Namespace, type NodeId, Revision, SessionId, type Result, err, ok, unreachable } from '@fencer/base';
import { LIST_LOCKS_LIMIT_DEFAULT, LIST_LOCKS_LIMIT_MAX, WAIT_MS_MAX, makeSessionId, namespaceOfSessionId } from '@fencer/contract';
import { type Cancel, type Done, type GroupCore, afterChained } from '@fencer/group';
import {
  type CloseSessionOutcome,
  type Command,
  type LockStateMachine,
  type OpenSessionOutcome,
  type ReleaseOutcome,
  encodeCommand,
  isFailure,
} from '@fencer/lock-fsm';
import type { LockCellConfig, LockCellTestHooks } from './config.js';
import type { CellEnv } from './env.js';
import type { HeldAcquires } from './held-acquire.js';
import { FORWARD_TIMEOUT_MS } from './limits.js';
import { fail, failureOf, namespaceOfName, requireOwned, validators } from './validation.js';
import { type AcquireRequest, type CellMethod, type HeartbeatAnswer, type RequestOf, type ResponseOf, lockToWire } from './wire.js';

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
  /** The tenant (or admin) token the call presented (`authorization: Bearer`); checked where the call is served (auth.ts). */
  readonly token?: string;
}

/** Sends calls to the leader (gRPC to its client port in production, the simulated network in the simulator). */
export interface LeaderForwarder {
  /** Carries `token` (the call's own) to the leader, which checks it. */
  forward<M extends CellMethod>(
    leader: NodeId,
    address: string,
    method: M,
    request: RequestOf<M>,
    done: CallDone<ResponseOf<M>>,
    token?: string,
  ): Cancel;
  heartbeats(leader: NodeId, address: string, sessionIds: readonly string[], done: Done<HeartbeatAnswer[]>): Cancel;
}

/** The linearizable reads (the readWithoutBarrier test hook serves these locally). */
const READ_METHODS: ReadonlySet<CellMethod> = new Set<CellMethod>(['getLock', 'checkToken', 'listLocks']);

/** Where a call goes when this node is not the leader; throws NOT_LEADER / NO_LEADER when it cannot be forwarded. */
export function leaderTarget(core: GroupCore, ctx: CallContext): { id: NodeId; address: string } {
  const leader = core.leader;
  const address = core.leaderAddress();
  if (ctx.forwarded) fail('NOT_LEADER', 'this replica is not the leader', address);
  if (leader === null || address === undefined)
    fail('NO_LEADER', 'the cell has no leader right now (election in progress); retry with the same request_id');
  return { id: leader, address };
}

export interface RequestApiParts {
  readonly config: LockCellConfig;
  readonly env: CellEnv;
  readonly hooks: LockCellTestHooks;
  readonly core: GroupCore;
  readonly forwarder: LeaderForwarder;
  readonly acquires: HeldAcquires;
  /** The lock state as applied here now. */
  readonly fsm: () => LockStateMachine;
  /** Why `token` may not call `namespace` here now (auth.ts), or undefined. */
  readonly refusal: (namespace: string, token: string | undefined) => FencerError | undefined;
}

/** The namespace a validated request is about: named, or embedded in its session id or lock name. */
export function namespaceOfRequest<M extends CellMethod>(method: M, request: RequestOf<M>): string {
  switch (method) {
    case 'openSession':
      return (request as RequestOf<'openSession'>).namespace;
    case 'closeSession':
    case 'release':
    case 'acquire':
      return namespaceOfSessionId((request as RequestOf<'closeSession'>).sessionId) ?? '';
    case 'checkToken':
    case 'getLock':
      return namespaceOfName((request as RequestOf<'getLock'>).name);
    case 'listLocks':
      return namespaceOfName((request as RequestOf<'listLocks'>).prefix);
    default:
      return unreachable(method as never, 'cell method');
  }
}

export class RequestApi {
  constructor(private readonly parts: RequestApiParts) {}

  /**
   * Serves one unary call: validated here, then run on the leader or
   * forwarded to it. Returns a cancel for a caller that gives up (a held
   * Acquire then withdraws its wait).
   */
  call<M extends CellMethod>(method: M, request: RequestOf<M>, ctx: CallContext, done: CallDone<ResponseOf<M>>): Cancel {
    // A forwarded call's answer may still arrive after its timer answered it (a forwarder that cannot take a call back).
    let answered = false;
    const answer: CallDone<ResponseOf<M>> = (outcome, receipt) => {
      if (answered) return;
      answered = true;
      done(outcome, receipt);
    };
    try {
      (validators[method] as (req: RequestOf<M>) => void)(request);
      const local = this.parts.core.isLeader || (this.parts.hooks.readWithoutBarrier === true && READ_METHODS.has(method));
      // The token is checked where the call is served: the leader's applied copy of the namespace's hashes.
      if (local) {
        const refused = this.parts.refusal(namespaceOfRequest(method, request), ctx.token);
        if (refused !== undefined) throw refused;
        return this.serve(method, request, answer);
      }
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
        return this.parts.acquires.acquire(request as AcquireRequest, d);
      case 'checkToken':
      case 'getLock':
      case 'listLocks':
        return this.read(d, (fsm) => answerRead(fsm, method, request));
      default:
        return unreachable(method as never, 'cell method');
    }
  }

  private forward<M extends CellMethod>(method: M, request: RequestOf<M>, ctx: CallContext, done: CallDone<ResponseOf<M>>): Cancel {
    const target = leaderTarget(this.parts.core, ctx);
    const timeoutMs =
      method === 'acquire' ? Math.min(WAIT_MS_MAX, (request as AcquireRequest).waitMs) + FORWARD_TIMEOUT_MS : FORWARD_TIMEOUT_MS;
    let cancelCall: Cancel = () => {};
    const timer = afterChained(this.parts.env.after, timeoutMs, () => {
      cancelCall();
      done(err(new FencerError('NO_LEADER', `the leader at ${target.address} did not answer within ${timeoutMs} ms`, target.address)));
    });
    cancelCall = this.parts.forwarder.forward(
      target.id,
      target.address,
      method,
      request,
      (outcome, receipt) => {
        timer();
        done(outcome, receipt);
      },
      ctx.token,
    );
    return () => {
      timer();
      cancelCall();
    };
  }

  private openSession(req: RequestOf<'openSession'>, done: CallDone<unknown>): Cancel {
    const c = this.parts.config;
    const ttlMs = req.ttlMs === 0 ? c.ttlDefaultMs : Math.min(c.ttlMaxMs, Math.max(c.ttlMinMs, req.ttlMs));
    const r = this.parts.env.random;
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
    this.parts.core.propose(data, (r) => {
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
    const { hooks, core } = this.parts;
    const barrier =
      hooks.readWithoutBarrier === true
        ? (then: (error: FencerError | null) => void) => then(null)
        : (then: (error: FencerError | null) => void) => core.readBarrier(then);
    barrier((error) => {
      if (error) return done(err(error));
      try {
        done(ok(answer(hooks.readState?.() ?? this.parts.fsm())));
      } catch (e) {
        if (!(e instanceof FencerError)) throw e;
        done(err(e));
      }
    });
    return () => {};
  }
}

/** A read's answer from the applied state (throws NAMESPACE_NOT_HERE for a namespace this cell does not own). */
function answerRead(fsm: LockStateMachine, method: 'checkToken' | 'getLock' | 'listLocks', request: unknown): unknown {
  switch (method) {
    case 'checkToken': {
      const req = request as RequestOf<'checkToken'>;
      requireOwned(fsm, req.name);
      const a = fsm.checkToken(req.name, Revision(req.token));
      return { current: a.current, latestToken: a.latestToken, revision: fsm.revision };
    }
    case 'getLock': {
      const req = request as RequestOf<'getLock'>;
      requireOwned(fsm, req.name);
      return { lock: lockToWire(fsm.getLock(req.name)), revision: fsm.revision };
    }
    case 'listLocks': {
      const req = request as RequestOf<'listLocks'>;
      requireOwned(fsm, req.prefix);
      const limit = req.limit === 0 ? LIST_LOCKS_LIMIT_DEFAULT : Math.min(req.limit, LIST_LOCKS_LIMIT_MAX);
      const page = fsm.listLocks(req.prefix, limit, req.pageToken);
      if (isFailure(page)) fail(page.code, page.message);
      return { locks: page.locks.map(lockToWire), nextPageToken: page.nextPageToken, revision: fsm.revision };
    }
  }
}
