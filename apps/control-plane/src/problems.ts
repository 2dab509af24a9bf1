/**
 * The control plane's error catalogue: one table from a stable code to its
 * HTTP status and title, and the RFC 9457 problem document every error
 * answer carries (application/problem+json). Switch on the code, never on
 * the detail.
 */

export const PROBLEMS = {
  INVALID_REQUEST: { status: 400, title: 'The request does not match the API contract' },
  UNAUTHENTICATED: { status: 401, title: 'A valid bearer token is required' },
  FORBIDDEN: { status: 403, title: 'This token may not do that' },
  NOT_FOUND: { status: 404, title: 'No such resource' },
  TENANT_NOT_FOUND: { status: 404, title: 'No such tenant' },
  CELL_NOT_FOUND: { status: 404, title: 'No such cell' },
  MOVE_NOT_FOUND: { status: 404, title: 'No such move' },
  SNAPSHOT_NOT_FOUND: { status: 404, title: 'No such snapshot' },
  METHOD_NOT_ALLOWED: { status: 405, title: 'This path does not take that method' },
  TENANT_EXISTS: { status: 409, title: 'A tenant with this name exists' },
  TENANT_NOT_EMPTY: { status: 409, title: 'The tenant has live sessions' },
  MOVE_IN_PROGRESS: { status: 409, title: 'A move of this namespace is in progress' },
  ALREADY_THERE: { status: 409, title: 'The namespace is already on that cell' },
  IDEMPOTENCY_KEY_REUSED: { status: 409, title: 'This Idempotency-Key was used with another request' },
  PAYLOAD_TOO_LARGE: { status: 413, title: 'The request body is too large' },
  UNSUPPORTED_MEDIA_TYPE: { status: 415, title: 'Send application/json' },
  QUOTA_EXCEEDED: { status: 429, title: 'A limit of the fleet is reached' },
  RESOURCE_EXHAUSTED: { status: 429, title: 'Too many requests in flight on this instance' },
  INTERNAL: { status: 500, title: 'Internal error' },
  CELL_UNAVAILABLE: { status: 503, title: 'The cell did not answer' },
  NOT_LEADER: { status: 503, title: "This instance cannot reach the meta group's leader" },
} as const satisfies Record<string, { status: number; title: string }>;

export type ProblemCode = keyof typeof PROBLEMS;

export interface Problem {
  readonly type: string;
  readonly title: string;
  readonly status: number;
  readonly code: ProblemCode;
  readonly detail?: string;
}

/** Thrown by handlers; the app's error handler turns it into the problem document. */
export class ProblemError extends Error {
  override readonly name = 'ProblemError';
  constructor(
    readonly code: ProblemCode,
    readonly detail: string,
  ) {
    super(`${code}: ${detail}`);
  }
}

export function problemOf(code: ProblemCode, detail?: string): Problem {
  const p = PROBLEMS[code];
  return {
    type: `urn:fencer:problem:${code.toLowerCase().replace(/_/g, '-')}`,
    title: p.title,
    status: p.status,
    code,
    ...(detail !== undefined ? { detail } : {}),
  };
}
