/**
 * How the router retries a call for its client: which answers mean "this
 * attempt did not run the call, or ran it idempotently" (so another attempt
 * is safe: Acquire carries a request_id the cell deduplicates), the pause
 * between attempts, the deadline they must fit in, and the error the client
 * finally sees.
 */
import { FencerError, type ErrorCode } from '@fencer/base';
import type { ServiceError } from '@grpc/grpc-js';
import { toServiceError } from '@fencer/protocol';
import type { Logger } from 'pino';
import { CALL_BUDGET_MS_DEFAULT, MOVING_RETRY_MS_MAX, RETRY_BACKOFF_MS_MAX, RETRY_BACKOFF_MS_MIN } from './limits.js';

/** Reasons that mean "this attempt did not run the call, or ran it idempotently": retry elsewhere. */
export const RETRY_CODES = new Set<ErrorCode>(['NOT_LEADER', 'NO_LEADER', 'NAMESPACE_MOVING', 'OUTCOME_UNKNOWN', 'SHUTTING_DOWN']);

/** The caller's deadline as epoch ms; a call without one gets a default budget (plus its wait, for Acquire). */
export function deadlineOf(call: { getDeadline(): Date | number }, extraMs: number): number {
  const d = call.getDeadline();
  const ms = d instanceof Date ? d.getTime() : d;
  return Number.isFinite(ms) && ms > 0 ? ms : Date.now() + CALL_BUDGET_MS_DEFAULT + extraMs;
}

export const sleep = (ms: number): Promise<void> => new Promise((r) => setTimeout(r, ms));

/**
 * The pause before attempt n + 1: doubling from min to max, with jitter so
 * that retrying callers spread out. A namespace frozen for a move grows
 * only to MOVING_RETRY_MS_MAX: it serves again within a move's cutover.
 */
export const backoffMs = (attempt: number, code?: ErrorCode): number =>
  Math.min(code === 'NAMESPACE_MOVING' ? MOVING_RETRY_MS_MAX : RETRY_BACKOFF_MS_MAX, RETRY_BACKOFF_MS_MIN * 2 ** attempt) *
  (0.5 + Math.random() / 2);

/** A FencerError as the router's client sees it: no leader-hint (the cell's replicas are not the client's endpoints). */
export function toClientError(e: unknown, logger: Logger, method: string): Partial<ServiceError> {
  // Without the cell-internal leader-hint; a retry hint is the client's to use.
  if (e instanceof FencerError) return toServiceError(new FencerError(e.code, e.message, undefined, e.retryAfterMs));
  logger.error({ method, err: (e as Error)?.stack ?? String(e) }, 'unexpected error in a router handler');
  return toServiceError(new FencerError('INTERNAL', `internal error in the router: ${(e as Error)?.message ?? e}`));
}
