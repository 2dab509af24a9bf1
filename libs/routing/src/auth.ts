/**
 * A front end's part of tenant tokens (docs/decisions/0016-tenant-credentials-and-mtls.md):
 * it reads the token a call presents and passes it on to the cell, which
 * checks it against the namespace's replicated hashes. The front end holds
 * no hashes; it refuses only what needs none: a call without a token, and a
 * namespace with no tenant (with the cells' answer for another tenant's, so
 * the two cannot be told apart).
 */
import { bearerOf } from '@fencer/contract';

export { bearerOf, forbidden, missingToken } from '@fencer/contract';

/** The token of a call's `authorization: Bearer <token>` metadata; undefined for none or another form. */
export function tokenOf(call: { metadata: { get(key: string): unknown[] } }): string | undefined {
  return bearerOf(call.metadata.get('authorization')[0]);
}
