/**
 * A front end's part of tenant tokens (docs/decisions/0016-tenant-credentials-and-mtls.md):
 * it reads the token a call presents and passes it on to the cell, which
 * checks it against the namespace's replicated hashes. The front end holds
 * no hashes; it refuses only what needs none: a call without a token, and a
 * namespace with no tenant (with the cells' answer for another tenant's, so
 * the two cannot be told apart).
 */
import { FencerError } from '@fencer/base';

/** The token of a call's `authorization: Bearer <token>` metadata; undefined for none or another form. */
export function tokenOf(call: { metadata: { get(key: string): unknown[] } }): string | undefined {
  return bearerOf(call.metadata.get('authorization')[0]);
}

/** The token of an `authorization` value (`Bearer <token>`), from metadata or an HTTP/2 header; undefined for any other form. */
export function bearerOf(value: unknown): string | undefined {
  if (typeof value !== 'string') return undefined;
  return /^Bearer ([\x21-\x7e]{1,512})$/.exec(value)?.[1];
}

export function missingToken(): FencerError {
  return new FencerError(
    'BAD_CREDENTIALS',
    'this fleet requires a tenant token: send metadata "authorization: Bearer <token>" (the client\'s token option, $FENCER_TOKEN in the CLI)',
  );
}

export function forbidden(namespace: string): FencerError {
  return new FencerError(
    'NAMESPACE_FORBIDDEN',
    `this token does not grant namespace "${namespace.slice(0, 80)}": use the tenant's current token (rotated ones stop at the end of their grace period)`,
  );
}
