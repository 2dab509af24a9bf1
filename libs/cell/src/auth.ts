/**
 * Tenant credentials checked at the cell (docs/decisions/0016-tenant-credentials-and-mtls.md).
 *
 * A call presents its token as metadata `authorization: Bearer <token>`; the
 * node hands the token to the cell in the call's context. Where the cell runs
 * with `auth`, the token must be the admin's (which passes everywhere) or one
 * whose hash the namespace's replicated credentials list (SetNamespaceCredentials),
 * not past its grace period by this replica's wall clock: the expiry is
 * compared here, never on apply (decision 0002). The hash function comes
 * from the node (SHA-256 there): this library reads no crypto module.
 *
 * Answers: no token is UNAUTHENTICATED BAD_CREDENTIALS; a token the namespace
 * does not list is PERMISSION_DENIED NAMESPACE_FORBIDDEN, whether the
 * namespace belongs to another tenant or nobody. A namespace this cell does
 * not hold (moved out, or not claimed here) is left to the call's own answer,
 * NAMESPACE_NOT_HERE, which sends a router to the namespace's cell, where the
 * check is made; a router with no route for it answers NAMESPACE_FORBIDDEN
 * itself. Under auto-claim (a cell without a control plane), a namespace not
 * held yet is forbidden instead: a token must never create one.
 */
import type { Clock, FencerError } from '@fencer/base';
import { credentialsAdmit, type LockStateMachine } from '@fencer/lock-fsm';
import { forbidden, missingToken } from '@fencer/contract';

export interface CellAuth {
  /** The form a token is stored in ("sha256:" + hex in the cell node), as the control plane hashes it. */
  hashToken(token: string): string;
  /** The admin token's hash: it reaches every namespace. None: no admin token is accepted on the lock service. */
  readonly adminTokenHash?: string;
}

export interface AuthCheck {
  readonly auth: CellAuth | undefined;
  readonly clock: Clock;
  readonly autoClaim: boolean;
}

/** Undefined when `token` may call `namespace` on this cell now; otherwise the refusal to answer. */
export function refusal(check: AuthCheck, fsm: LockStateMachine, namespace: string, token: string | undefined): FencerError | undefined {
  const { auth } = check;
  if (auth === undefined) return undefined;
  if (token === undefined || token === '') return missingToken();
  const hash = auth.hashToken(token);
  if (auth.adminTokenHash !== undefined && hash === auth.adminTokenHash) return undefined;
  const credentials = fsm.namespaceCredentials(namespace);
  if (credentials === undefined) return check.autoClaim ? forbidden(namespace) : undefined;
  return credentialsAdmit(credentials, hash, check.clock.wallMs()) ? undefined : forbidden(namespace);
}
