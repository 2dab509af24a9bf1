/**
 * The one table that maps every error code to how it travels: gRPC status,
 * the `lock-reason` trailing metadata, an HTTP status for the control plane,
 * and whether a client may retry the same call (with the same request_id).
 * Switch on the code, never on the message.
 */
import { ERROR_CODES, ErrorCode, FencerError } from '@fencer/base';
import { Metadata, status, type ServiceError } from '@grpc/grpc-js';

export const LOCK_REASON_KEY = 'lock-reason';
export const LEADER_HINT_KEY = 'leader-hint';
/** Trailing metadata of a rate-limited call (TOO_MANY_REQUESTS): milliseconds to wait before trying again, as a decimal integer. */
export const RETRY_AFTER_MS_KEY = 'retry-after-ms';
/**
 * Request metadata set by a replica forwarding a call to its leader, and by a
 * router that already follows leaders: a follower answers such a call with
 * NOT_LEADER and a hint instead of forwarding it again.
 */
export const FORWARDED_KEY = 'fencer-forwarded';
/**
 * Client direct mode (docs/decisions/0015-clients-may-skip-the-router.md):
 * a call carrying ROUTE_WANTED_KEY asks the router to name, in the trailing
 * metadata ROUTE_LEADER_KEY of a successful answer, the cell replica that
 * served it (the namespace's leader), so the client can call it directly.
 */
export const ROUTE_WANTED_KEY = 'fencer-route-wanted';
export const ROUTE_LEADER_KEY = 'fencer-route-leader';

export interface ErrorSpec {
  readonly grpc: status;
  readonly http: number;
  /** Safe to retry the same call unchanged (same request_id), possibly elsewhere. */
  readonly retryable: boolean;
}

export const ERROR_TABLE: { readonly [K in ErrorCode]: ErrorSpec } = {
  INVALID_NAME: { grpc: status.INVALID_ARGUMENT, http: 400, retryable: false },
  INVALID_MODE: { grpc: status.INVALID_ARGUMENT, http: 400, retryable: false },
  INVALID_TTL: { grpc: status.INVALID_ARGUMENT, http: 400, retryable: false },
  MISSING_REQUEST_ID: { grpc: status.INVALID_ARGUMENT, http: 400, retryable: false },
  WRONG_NAMESPACE: { grpc: status.INVALID_ARGUMENT, http: 400, retryable: false },
  INVALID_ARGUMENT: { grpc: status.INVALID_ARGUMENT, http: 400, retryable: false },
  SESSION_NOT_FOUND: { grpc: status.NOT_FOUND, http: 404, retryable: false },
  NAMESPACE_NOT_FOUND: { grpc: status.NOT_FOUND, http: 404, retryable: false },
  NOT_FOUND: { grpc: status.NOT_FOUND, http: 404, retryable: false },
  NOT_LEADER: { grpc: status.UNAVAILABLE, http: 503, retryable: true },
  NO_LEADER: { grpc: status.UNAVAILABLE, http: 503, retryable: true },
  NAMESPACE_MOVING: { grpc: status.UNAVAILABLE, http: 503, retryable: true },
  OUTCOME_UNKNOWN: { grpc: status.UNAVAILABLE, http: 503, retryable: true },
  SHUTTING_DOWN: { grpc: status.UNAVAILABLE, http: 503, retryable: true },
  NAMESPACE_NOT_HERE: { grpc: status.FAILED_PRECONDITION, http: 421, retryable: false },
  /** Admin DropNamespace of a namespace that still has sessions or locks. */
  NAMESPACE_NOT_EMPTY: { grpc: status.FAILED_PRECONDITION, http: 409, retryable: false },
  /** A move step carrying an older meta term than one the cell already applied for the namespace: its sender was deposed. */
  MOVE_FENCED: { grpc: status.FAILED_PRECONDITION, http: 409, retryable: false },
  QUOTA_EXCEEDED: { grpc: status.RESOURCE_EXHAUSTED, http: 429, retryable: false },
  TOO_MANY_REQUESTS: { grpc: status.RESOURCE_EXHAUSTED, http: 429, retryable: true },
  /** A request over the server's message size limit: the same bytes can never succeed, so never retried. */
  MESSAGE_TOO_LARGE: { grpc: status.RESOURCE_EXHAUSTED, http: 413, retryable: false },
  SLOW_WATCHER: { grpc: status.RESOURCE_EXHAUSTED, http: 429, retryable: true },
  BAD_CREDENTIALS: { grpc: status.UNAUTHENTICATED, http: 401, retryable: false },
  NAMESPACE_FORBIDDEN: { grpc: status.PERMISSION_DENIED, http: 403, retryable: false },
  COMPACTED: { grpc: status.OUT_OF_RANGE, http: 410, retryable: false },
  DEADLINE_EXCEEDED: { grpc: status.DEADLINE_EXCEEDED, http: 504, retryable: true },
  CANCELLED: { grpc: status.CANCELLED, http: 499, retryable: false },
  INTERNAL: { grpc: status.INTERNAL, http: 500, retryable: false },
};

const CODES = new Set<string>(ERROR_CODES);

/**
 * Characters of an error message sent as `grpc-message`. A message may quote
 * what the caller sent (a 100 KB namespace, say); the trailers carrying it
 * must stay far below a peer's header-list limit (grpc-js and nghttp2 take
 * 16-64 KiB), or the trailers cannot be written, the call never ends and
 * the connection is torn down with every call on it.
 */
export const ERROR_DETAILS_CHARS_MAX = 1_024;

/** `message`, cut to ERROR_DETAILS_CHARS_MAX characters with a note of how much was left out. */
export function boundedDetails(message: string): string {
  if (message.length <= ERROR_DETAILS_CHARS_MAX) return message;
  return `${message.slice(0, ERROR_DETAILS_CHARS_MAX)}… (${message.length - ERROR_DETAILS_CHARS_MAX} more characters cut)`;
}

/** A grpc-js ServiceError for a FencerError: status, message, `lock-reason` and `leader-hint` metadata. */
export function toServiceError(error: FencerError): Partial<ServiceError> & { code: status; metadata: Metadata } {
  const spec = ERROR_TABLE[error.code];
  const details = boundedDetails(error.message);
  const metadata = new Metadata();
  metadata.set(LOCK_REASON_KEY, error.code);
  if (error.leaderHint) metadata.set(LEADER_HINT_KEY, error.leaderHint);
  if (error.retryAfterMs !== undefined) metadata.set(RETRY_AFTER_MS_KEY, String(Math.max(0, Math.ceil(error.retryAfterMs))));
  return { code: spec.grpc, details, message: details, metadata, name: 'FencerError' };
}

/** Default code for a gRPC status that arrived without `lock-reason` (e.g. from grpc-js itself). */
function codeForStatus(code: status): ErrorCode {
  switch (code) {
    case status.INVALID_ARGUMENT:
      return 'INVALID_ARGUMENT';
    case status.NOT_FOUND:
      return 'NOT_FOUND';
    case status.UNAVAILABLE:
      return 'NO_LEADER';
    case status.FAILED_PRECONDITION:
      return 'NAMESPACE_NOT_HERE';
    case status.RESOURCE_EXHAUSTED:
      // Every limit of ours sends its reason; a bare RESOURCE_EXHAUSTED is grpc-js refusing a message over its size limit.
      return 'MESSAGE_TOO_LARGE';
    case status.UNAUTHENTICATED:
      return 'BAD_CREDENTIALS';
    case status.PERMISSION_DENIED:
      return 'NAMESPACE_FORBIDDEN';
    case status.OUT_OF_RANGE:
      return 'COMPACTED';
    case status.DEADLINE_EXCEEDED:
      return 'DEADLINE_EXCEEDED';
    case status.CANCELLED:
      return 'CANCELLED';
    default:
      return 'INTERNAL';
  }
}

/** The FencerError a client sees for a failed call. */
export function fromServiceError(error: Pick<ServiceError, 'code' | 'details' | 'metadata'>): FencerError {
  const reason = error.metadata?.get(LOCK_REASON_KEY)[0];
  const hint = error.metadata?.get(LEADER_HINT_KEY)[0];
  const code: ErrorCode = typeof reason === 'string' && CODES.has(reason) ? (reason as ErrorCode) : codeForStatus(error.code);
  const after = Number(error.metadata?.get(RETRY_AFTER_MS_KEY)[0]);
  return new FencerError(
    code,
    error.details || ErrorCode[code],
    typeof hint === 'string' && hint !== '' ? hint : undefined,
    Number.isSafeInteger(after) && after >= 0 ? after : undefined,
  );
}

export function isRetryable(code: ErrorCode): boolean {
  return ERROR_TABLE[code].retryable;
}
