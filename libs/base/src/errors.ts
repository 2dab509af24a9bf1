/**
 * Error codes for environment and protocol errors at the edges. One code per
 * reason a caller can act on; `@fencer/protocol` maps each to a gRPC status,
 * the `lock-reason` metadata, an HTTP status and whether a retry is safe.
 * Switch on the code, never on the message.
 */
export const ERROR_CODES = [
  // The contract's reasons (lockservice.proto header).
  'INVALID_NAME',
  'INVALID_MODE',
  'INVALID_TTL',
  'MISSING_REQUEST_ID',
  'WRONG_NAMESPACE',
  'SESSION_NOT_FOUND',
  'NAMESPACE_NOT_FOUND',
  'NOT_LEADER',
  'NO_LEADER',
  'NAMESPACE_MOVING',
  'NAMESPACE_NOT_HERE',
  'QUOTA_EXCEEDED',
  'BAD_CREDENTIALS',
  'NAMESPACE_FORBIDDEN',
  'COMPACTED',
  // Our own, beyond the contract's list.
  'INVALID_ARGUMENT',
  'OUTCOME_UNKNOWN',
  'SLOW_WATCHER',
  'TOO_MANY_REQUESTS',
  'MESSAGE_TOO_LARGE',
  'NAMESPACE_NOT_EMPTY',
  // A tenant move's cell step from a deposed control plane (docs/decisions/0019-the-move-worker.md).
  'MOVE_FENCED',
  'DEADLINE_EXCEEDED',
  'CANCELLED',
  'NOT_FOUND',
  'SHUTTING_DOWN',
  'INTERNAL',
] as const;

export type ErrorCode = (typeof ERROR_CODES)[number];
export const ErrorCode = Object.fromEntries(ERROR_CODES.map((c) => [c, c])) as { readonly [K in ErrorCode]: K };

/** The one error class thrown at the edges. */
export class FencerError extends Error {
  override readonly name = 'FencerError';

  constructor(
    readonly code: ErrorCode,
    message: string,
    /** Address of the current leader, when known (NOT_LEADER). */
    readonly leaderHint?: string,
    /** How long to wait before trying again, when the server knows (TOO_MANY_REQUESTS from a rate limit). */
    readonly retryAfterMs?: number,
  ) {
    super(message);
  }
}
