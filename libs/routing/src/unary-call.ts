/**
 * A unary call through the router: routed by its namespace to its cell's
 * last known leader, and tried again inside the caller's deadline while
 * the answer says the attempt did not run (RETRY_CODES, following the
 * leader-hint within the cell) or that the table is stale
 * (NAMESPACE_NOT_HERE: refresh, then retry). When the connection to the
 * leader is lost, the replicas are asked who leads now and the call is
 * resent as soon as one answers (leader-search.ts); an Acquire is resent
 * with its request_id, so a held one resumes. A client that cancels cancels
 * the attempt in flight. Calls in flight per cell are bounded. A client in
 * direct mode is told which replica served its call (routeTrailer).
 */
import { FencerError } from '@fencer/base';
import { LaneConnectionLost } from '@fencer/peer-transport';
import { Metadata, type sendUnaryData, type ServerUnaryCall, type ServiceError, status } from '@grpc/grpc-js';
import { ROUTE_LEADER_KEY, ROUTE_WANTED_KEY, fromServiceError } from '@fencer/protocol';
import type { Logger } from 'pino';
import type { CellState } from './cell-pool.js';
import type { CellOf } from './cell-of-namespace.js';
import type { RouterMetrics } from './metrics.js';
import { fail, namespaceOfCall, type UnaryMethod } from './namespace-of-call.js';
import { RETRY_CODES, backoffMs, deadlineOf, sleep, toClientError } from './retry-policy.js';
import type { RoutingSource } from './routing-source.js';
import type { Attempt } from './upstream.js';
import type { AcquireRateLimiter } from './rate-limiter.js';
import { searchLeader } from './leader-search.js';
import { missingToken, tokenOf } from './auth.js';

export interface UnaryDeps {
  readonly source: RoutingSource;
  readonly logger: Logger;
  readonly metrics: RouterMetrics;
  readonly cellOf: CellOf;
  readonly attempt: Attempt;
  readonly inFlightMax: number;
  /** Per-tenant Acquire rate limits (rate-limiter.ts); none: no limit. */
  readonly acquireLimiter?: AcquireRateLimiter;
  /** A fleet with tenant tokens: a call without one is refused here; the cell checks the one it has. */
  readonly auth?: boolean;
}

/** NAMESPACE_NOT_HERE refreshes the table at most this often per call: a table that stays wrong is the client's answer. */
const NAMESPACE_REFRESHES_MAX = 3;
/** The first hints of a call are followed without a pause: a fresh leader change needs one hop. */
const HINTS_FOLLOWED_AT_ONCE_MAX = 2;

/** What the handler and its retry loop share about one call. */
interface CallState {
  /** The cell of the last attempt ('' before the first), for the call's metrics. */
  cellId: string;
  /** Cancels the attempt in flight. */
  cancelUpstream: (() => void) | undefined;
  cancelled: boolean;
  /** The replica whose answer the client gets (the namespace's leader), once an attempt succeeded. */
  servedBy: string | undefined;
}

/** The grpc-js handler of one unary method. */
export function unaryHandler<Req, Res>(deps: UnaryDeps, method: UnaryMethod) {
  return (call: ServerUnaryCall<Req, Res>, callback: sendUnaryData<Res>): void => {
    const started = performance.now();
    const state: CallState = { cellId: '', cancelUpstream: undefined, cancelled: false, servedBy: undefined };
    let answered = false;
    // grpc-js says 'cancelled' after every answer too: only a call still running has anything to cancel.
    call.on('cancelled', () => {
      if (answered) return;
      state.cancelled = true;
      state.cancelUpstream?.();
    });
    const answer = (err: Partial<ServiceError> | null, res?: Res): void => {
      answered = true;
      const code = err ? (status[err.code ?? status.UNKNOWN] ?? 'UNKNOWN') : 'OK';
      deps.metrics.calls.inc({ cell: state.cellId, method, code });
      deps.metrics.callSeconds.observe({ cell: state.cellId, method }, (performance.now() - started) / 1000);
      if (err) callback(err as ServiceError);
      else callback(null, res, routeTrailer(call.metadata, state.servedBy));
    };
    callWithRetries<Res>(deps, method, call, state).then(
      (res) => answer(null, res),
      (e) => answer(toClientError(e, deps.logger, method)),
    );
  };
}

async function callWithRetries<Res>(
  deps: UnaryDeps,
  method: UnaryMethod,
  call: ServerUnaryCall<unknown, unknown>,
  state: CallState,
): Promise<Res> {
  const req = call.request as Record<string, unknown>;
  const { namespace, bySession } = namespaceOfCall(method, req);
  const token = tokenOf(call);
  if (deps.auth === true && token === undefined) throw missingToken();
  // Once per call, before any attempt: retries inside the router are not the tenant's acquires.
  if (method === 'acquire') deps.acquireLimiter?.take(namespace);
  const waitMs = method === 'acquire' && typeof req.waitMs === 'number' ? req.waitMs : 0;
  const deadlineMs = deadlineOf(call, waitMs);
  let refreshes = 0;
  for (let n = 0; ; n++) {
    const cell = await deps.cellOf(namespace, bySession);
    state.cellId = cell.id;
    if (cell.inFlight >= deps.inFlightMax)
      fail('TOO_MANY_REQUESTS', `cell ${cell.id} has ${deps.inFlightMax} calls in flight from this router; retry with backoff`);
    const target = cell.target();
    // The call counts against its cell until the attempt and any pause after it are over.
    cell.inFlight++;
    try {
      const res = await deps.attempt<Res>(target, method, call.request, deadlineMs, (c) => (state.cancelUpstream = c), token);
      state.servedBy = target;
      return res;
    } catch (e) {
      if (state.cancelled) fail('CANCELLED', 'the client cancelled the call');
      const fe = e instanceof FencerError ? e : fromServiceError(e as ServiceError);
      let retry = false;
      let followHint = false;
      let leaderFound = false;
      if (e instanceof LaneConnectionLost) {
        // The leader's connection closed: its process most likely died. Ask the replicas who leads now, and resend at once.
        leaderFound = (await searchLeader(deps.attempt, cell, target, namespace, deadlineMs)) !== undefined;
        if (state.cancelled) fail('CANCELLED', 'the client cancelled the call');
        retry = true;
      } else if (RETRY_CODES.has(fe.code)) {
        followHint = moveToNextTarget(cell, fe, target);
        retry = true;
      } else if (fe.code === 'NAMESPACE_NOT_HERE' && refreshes < NAMESPACE_REFRESHES_MAX) {
        refreshes++;
        await deps.source.refresh();
        retry = true;
      }
      // A fresh leader-hint (or a leader found after a lost connection) is followed at once; anything else waits, growing.
      const pauseMs = leaderFound || (followHint && n < HINTS_FOLLOWED_AT_ONCE_MAX) ? 0 : backoffMs(n, fe.code);
      if (!retry || Date.now() + pauseMs >= deadlineMs) throw fe;
      deps.metrics.retries.inc({ cell: cell.id, method, reason: fe.code });
      if (pauseMs > 0) await sleep(pauseMs);
    } finally {
      cell.inFlight--;
    }
  }
}

/** For a client in direct mode (it sent ROUTE_WANTED_KEY): the replica that served its call, to call directly next time. */
function routeTrailer(request: Metadata, servedBy: string | undefined): Metadata | undefined {
  if (servedBy === undefined || request.get(ROUTE_WANTED_KEY).length === 0) return undefined;
  const md = new Metadata();
  md.set(ROUTE_LEADER_KEY, servedBy);
  return md;
}

/**
 * After an attempt on `target` that did not run: the cell's next target is
 * the replica its NOT_LEADER answer named, when that is another replica of
 * the cell (returns true); the same one after NAMESPACE_MOVING (the leader
 * answered: the namespace is frozen for a move and is asked again soon,
 * backoffMs); else the next replica in turn.
 */
function moveToNextTarget(cell: CellState, fe: FencerError, target: string): boolean {
  const followHint =
    fe.code === 'NOT_LEADER' && fe.leaderHint !== undefined && fe.leaderHint !== target && cell.replicas.includes(fe.leaderHint);
  if (followHint) cell.noteLeader(fe.leaderHint);
  else if (fe.code !== 'NAMESPACE_MOVING') cell.advance(target);
  return followHint;
}
