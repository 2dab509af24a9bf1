/**
 * Unary calls with the client's retry policy: an UNAVAILABLE-class error
 * (not the leader, no leader, namespace moving, outcome unknown, deadline) is
 * retried unchanged — the same request, so the same request_id, which the
 * cell deduplicates — following leader hints at once and otherwise rotating
 * through the endpoints with jittered exponential backoff, until the retry
 * budget is spent. Anything else is the caller's to handle.
 */
import { FencerError, type Random } from '@fencer/base';
import { Metadata, status, type ServiceError } from '@grpc/grpc-js';
import { FORWARDED_KEY, ROUTE_LEADER_KEY, ROUTE_WANTED_KEY, fromServiceError, isRetryable } from '@fencer/protocol';
import type { DirectRoutes } from './direct-routes.js';
import { namespaceOfRequest } from './direct-routes.js';
import type { EndpointPool, LockServiceStub } from './endpoints.js';
import { CLIENT_LIMITS } from './limits.js';
import { sleep, type Scheduler } from './scheduler.js';

export interface RetryPolicy {
  readonly callTimeoutMs: number;
  readonly retryBudgetMs: number;
  readonly backoffBaseMs: number;
  readonly backoffMaxMs: number;
}

export interface CallContext {
  readonly pool: EndpointPool;
  readonly scheduler: Scheduler;
  readonly random: Random;
  readonly policy: RetryPolicy;
  /** The metadata each call and stream opens with (the tenant's `authorization: Bearer <token>`); absent: none. */
  readonly metadata?: () => Metadata;
  /** Direct mode: calls go straight to the replica a router named for their namespace (direct-routes.ts). */
  readonly direct?: DirectRoutes;
  /** Told about every failed attempt (for logs and tests). */
  readonly onRetry?: (info: { method: string; address: string; error: FencerError; attempt: number }) => void;
}

type UnaryMethod = 'openSession' | 'acquire' | 'release' | 'checkToken' | 'getLock' | 'listLocks' | 'closeSession';

/** Backoff before attempt n+1 (n from 0): half the capped exponential step, plus up to as much again at random. */
export function backoffMs(random: Random, attempt: number, baseMs: number, maxMs: number): number {
  const step = Math.min(maxMs, baseMs * 2 ** Math.min(attempt, 30));
  return Math.floor(step / 2 + random.float() * (step / 2));
}

/** The client's error for anything a call can throw: gRPC errors become FencerErrors with the contract's code. */
export function toFencerError(e: unknown): FencerError {
  if (e instanceof FencerError) return e;
  const se = e as Partial<ServiceError>;
  if (typeof se?.code === 'number' && se.metadata instanceof Metadata) return fromServiceError(se as ServiceError);
  if (typeof se?.code === 'number')
    return new FencerError(se.code === status.CANCELLED ? 'CANCELLED' : 'INTERNAL', se.details ?? String(e));
  return new FencerError('INTERNAL', (e as Error)?.message ?? String(e));
}

function callOnce<Req, Res>(
  stub: LockServiceStub,
  method: UnaryMethod,
  request: Req,
  timeoutMs: number,
  signal: AbortSignal | undefined,
  metadata: Metadata,
  onTrailer?: (trailer: Metadata) => void,
): Promise<Res> {
  return new Promise<Res>((resolve, reject) => {
    if (signal?.aborted) return reject(signal.reason);
    const fn = (stub as unknown as Record<string, (...args: unknown[]) => unknown>)[method]!;
    const onAbort = (): void => call.cancel();
    const call = fn.call(stub, request, metadata, { deadline: Date.now() + timeoutMs }, (err: ServiceError | null, res: Res) => {
      signal?.removeEventListener('abort', onAbort);
      if (err) reject(signal?.aborted ? signal.reason : err);
      else resolve(res);
    }) as { cancel(): void; on(event: 'status', cb: (s: { metadata: Metadata }) => void): void };
    if (onTrailer) call.on('status', (s) => onTrailer(s.metadata));
    signal?.addEventListener('abort', onAbort, { once: true });
  });
}

export interface CallOptions {
  /** Deadline of one attempt; defaults to the policy's. */
  readonly timeoutMs?: number;
  /** Cancels the call (and its retries): the promise rejects with the signal's reason. */
  readonly signal?: AbortSignal;
  /** Retry budget for this call; defaults to the policy's. */
  readonly budgetMs?: number;
}

/**
 * The call's metadata. In direct mode, through a router it asks the router to
 * name the replica that serves it; straight to a replica it says "do not
 * forward" (FORWARDED_KEY), so a replica that no longer leads answers
 * NOT_LEADER, and the client goes back to a router, instead of the call
 * taking a hop the client never learns about.
 */
function routeMetadata(ctx: CallContext, viaRouter: boolean): Metadata {
  const md = ctx.metadata?.() ?? new Metadata();
  if (ctx.direct && viaRouter) md.set(ROUTE_WANTED_KEY, '1');
  else if (ctx.direct) md.set(FORWARDED_KEY, 'direct-client');
  return md;
}

function learnFrom(direct: DirectRoutes, namespace: string | undefined): (trailer: Metadata) => void {
  return (trailer) => {
    const at = trailer.get(ROUTE_LEADER_KEY)[0];
    if (typeof at === 'string' && at !== '') direct.learn(namespace, at);
  };
}

/** Calls `method` with retries; rejects with a FencerError (or the signal's reason). */
export async function callWithRetry<Req, Res>(
  ctx: CallContext,
  method: UnaryMethod,
  request: Req,
  options: CallOptions = {},
): Promise<Res> {
  const { pool, scheduler, random, policy } = ctx;
  const startedMonoMs = scheduler.monoMs();
  const budgetMs = options.budgetMs ?? policy.retryBudgetMs;
  let hops = 0;
  const namespace = ctx.direct ? namespaceOfRequest(method, request as Record<string, unknown>) : undefined;
  for (let attempt = 0; ; attempt++) {
    const leader = ctx.direct?.leaderOf(namespace);
    const address = leader ?? pool.current();
    if (leader !== undefined) ctx.direct!.direct++;
    try {
      return await callOnce<Req, Res>(
        pool.stub(address),
        method,
        request,
        options.timeoutMs ?? policy.callTimeoutMs,
        options.signal,
        routeMetadata(ctx, leader === undefined),
        ctx.direct && leader === undefined ? learnFrom(ctx.direct, namespace) : undefined,
      );
    } catch (e) {
      if (options.signal?.aborted) throw options.signal.reason;
      const error = toFencerError(e);
      ctx.onRetry?.({ method, address, error, attempt });
      if (leader !== undefined && (isRetryable(error.code) || error.code === 'NAMESPACE_NOT_HERE')) {
        // The replica is not the place any more (moved, deposed, gone): through a router at once, which names the new one.
        ctx.direct!.forget(namespace);
        continue;
      }
      if (!isRetryable(error.code)) throw error;
      if (scheduler.monoMs() - startedMonoMs >= budgetMs) throw error;
      if (error.leaderHint && error.leaderHint !== address && hops < CLIENT_LIMITS.hintHopsMax) {
        // A fresh hint is worth following at once: the leader is known and alive.
        pool.noteLeader(error.leaderHint);
        hops++;
        continue;
      }
      hops = 0;
      if (error.leaderHint && error.leaderHint !== address) pool.noteLeader(error.leaderHint);
      else pool.advance(address);
      await sleep(scheduler, backoffMs(random, attempt, policy.backoffBaseMs, policy.backoffMaxMs), options.signal);
    }
  }
}
